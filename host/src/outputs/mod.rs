//! What a run leaves: the reports in every format, the claimed output directory, the progress display and the runner's own lines.

pub mod console;
pub mod output_dir;
pub mod progress;
pub mod report;
