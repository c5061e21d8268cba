//! The `runner` library: a scriptable benchmark scenario runner for LLM serving.
//!
//! Pipeline: scenario (own thread) → schedule → dispatcher (tokio) → HTTP client →
//! records → statistics → reports. The binary in `main.rs` is a thin shell over [`run`]:
//! [`cli`] parses, [`commands`] holds one file per subcommand, [`config`] turns the
//! arguments of `run` into one [`config::RunConfig`].

pub mod both_sides;
pub mod commands;
pub mod measuring;
pub mod outputs;
pub mod safeguards;
pub mod servers;
pub mod sharding;
pub mod workloads;

/// Runs the command line `args` (program name first); returns the process exit code.
pub fn run(args: Vec<std::ffi::OsString>) -> i32 {
    commands::main(args)
}
