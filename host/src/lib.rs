//! The `runner` library: a scriptable benchmark scenario runner for LLM serving.
//!
//! Pipeline: scenario (own thread) → schedule → dispatcher (tokio) → HTTP client →
//! records → statistics → reports. The binary in `main.rs` is a thin shell over [`run`]:
//! [`cli`] parses, [`commands`] holds one file per subcommand, [`config`] turns the
//! arguments of `run` into one [`config::RunConfig`].

pub mod bounded_file;
pub mod cache_dir;
pub mod cli;
pub mod client;
pub mod clock;
pub mod commands;
pub mod config;
pub mod console;
pub mod digest;
pub mod display;
pub mod engine;
pub mod interrupt;
pub mod kernel_clock;
pub mod memory_budget;
pub mod merge;
pub mod metrics;
pub mod output_dir;
pub mod package;
pub mod progress;
pub mod redact;
pub mod report;
pub mod scenario;
pub mod schedule;
pub mod server_metrics;
pub mod shard;
pub mod sim;
pub mod thresholds;
pub mod tokenizer;
pub mod wire;

/// Runs the command line `args` (program name first); returns the process exit code.
pub fn run(args: Vec<std::ffi::OsString>) -> i32 {
    commands::main(args)
}
