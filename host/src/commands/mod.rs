//! One file per subcommand, and what they share: the runtime, the tokenizer, how a
//! scenario named on the command line is loaded, and how an error becomes one line on
//! stderr and an exit code, never a panic.

pub mod cli;
pub mod config;

mod bench_serve;
mod calibrate;
mod compare;
mod info;
mod merge;
mod pack;
mod pull;
mod push;
mod repeat;
mod run;
mod sim;
mod source;
mod targets;
mod trace;
mod verify;

use std::ffi::OsString;
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::workloads::tokenizer::Tokenizer;
use cli::Command;

pub use crate::safeguards::interrupt::EXIT_INTERRUPTED;

/// Runs the command `args` names (the process arguments, program name first); returns the
/// process exit code.
pub fn main(args: Vec<OsString>) -> i32 {
    let cli = match cli::parse(args) {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            crate::errln!("{}", cli::usage_error_line(&e.render().to_string()));
            return 2;
        }
        Err(e) => {
            // --help and --version.
            let _ = e.print();
            return 0;
        }
    };
    let result = match cli.command {
        Command::Run(a) if a.repeat.is_some() => repeat::series(*a),
        Command::Run(a) => run::run(*a),
        Command::Info(a) => info::info(a).map(|_| 0),
        Command::Pack(a) => pack::pack(a).map(|_| 0),
        Command::Verify(a) => verify::verify(a).map(|_| 0),
        Command::Push(a) => push::push(a).map(|_| 0),
        Command::Pull(a) => pull::pull(a).map(|_| 0),
        Command::Sim(a) => sim::sim(*a).map(|_| 0),
        Command::Compare(a) => compare::compare(a),
        Command::Merge(a) => merge::merge(a),
        Command::Trace(cli::TraceCommand::Analyze(a)) => trace::analyze(a).map(|_| 0),
        Command::Bench(cli::BenchCommand::Serve(a)) => bench_serve::bench_serve(a.flags),
        Command::Calibrate(a) => calibrate::calibrate(a).map(|_| 0),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            crate::workloads::package::unpacked::wait_if_exiting();
            crate::errln!(
                "error: {}",
                crate::safeguards::redact::text(&error_line(&e))
            );
            1
        }
    }
}

/// The error and its causes on one line; a cause its parent already quotes is not repeated.
pub(crate) fn error_line(e: &anyhow::Error) -> String {
    let mut s = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
    }
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The runtime of a run in virtual time: one thread for the engine, the client and the
/// simulator, whose park hook moves the virtual clock (`both_sides/clock.rs`).
fn virtual_runtime() -> Result<tokio::runtime::Runtime> {
    let clock = crate::both_sides::clock::install_virtual();
    let hook = clock.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_park(move || {
            hook.advance_when_idle();
        })
        .build()
        .context("cannot start the async runtime")?;
    rt.spawn(async move {
        // Never hang: a stuck run ends with its one line.
        let stuck = clock.answer_pokes().await;
        crate::errln!("error: {stuck}");
        std::process::exit(1);
    });
    Ok(rt)
}

fn load_tokenizer(spec: &str) -> Result<Arc<Tokenizer>> {
    Ok(Arc::new(Tokenizer::load(spec)?))
}
