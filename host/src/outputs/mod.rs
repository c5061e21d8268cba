//! What a run leaves: the reports in every format, the claimed output directory, the progress display with its live panel, the run's own metrics served while it goes on, the runner's own lines and its requests' spans (`--otlp`).

pub mod console;
pub mod live_metrics;
pub mod live_panel;
pub mod otlp;
pub mod output_dir;
pub mod progress;
pub mod report;
