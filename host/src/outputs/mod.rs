//! What a run leaves: the reports in every format, the claimed output directory, the progress display, the runner's own lines and its requests' spans (`--otlp`).

pub mod console;
pub mod otlp;
pub mod output_dir;
pub mod progress;
pub mod report;
