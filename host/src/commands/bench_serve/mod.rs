//! `runner bench serve [vllm bench serve flags]`: vLLM's benchmark command line, taken
//! verbatim, turned into a Rhai scenario and run by the same engine as `runner run` (no
//! second code path); `--emit-scenario FILE` hands that scenario back to edit. Flags the
//! runner does not take are refused by name (exit code 2), never dropped.

mod datasets;
mod error;
pub mod flags;
mod options;
mod rhai_literal;
mod run_command;
mod scenario_text;
mod vllm_json;

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::cli::{self, Command};
use error::FlagError;
use options::BenchOptions;

/// Runs `runner bench serve ARGS`; returns the exit code.
pub fn bench_serve(raw: Vec<OsString>) -> Result<i32> {
    let args: Vec<String> = match raw.into_iter().map(OsString::into_string).collect() {
        Ok(a) => a,
        Err(bad) => return refuse(FlagError::Positional(bad.to_string_lossy().into_owned())),
    };
    if args.iter().any(|a| a == "--help" || a == "-h") {
        crate::out!("{}", help());
        return Ok(0);
    }
    let options = match flags::parse(&args)
        .and_then(|p| BenchOptions::from_parsed(&p))
        .and_then(absolute_dataset)
    {
        Ok(o) => o,
        Err(e) => return refuse(e),
    };
    let work = tempfile::tempdir().context("cannot make a temporary directory")?;
    let scenario = options
        .emit_scenario
        .clone()
        .unwrap_or_else(|| work.path().join("vllm_bench_serve.rhai"));
    let run_args = run_command::run_args(&options, &scenario);
    let rerun = run_command::shell_line(&run_args);
    let text = scenario_text::scenario_text(&options.workload, &vllm_only(&args), &rerun);
    std::fs::write(&scenario, text)
        .with_context(|| format!("cannot write the scenario to {}", scenario.display()))?;
    if options.emit_scenario.is_some() {
        crate::errln!("wrote {}; run it with: {rerun}", scenario.display());
    }
    if options.dry_run {
        crate::out!("{rerun}\n");
        return Ok(0);
    }
    if options.workload.custom_chat_template_skipped {
        crate::errln!("note: the custom dataset's prompts are sent as written, without the tokenizer's chat template (as with --skip-chat-template)");
    }
    if options.run.tokenizer_id.is_none() {
        crate::errln!("note: token counts use o200k_base; give --tokenizer DIR (a local model directory with tokenizer.json) for the model's own");
    }
    wait_ready(&options.run.target, options.run.ready_check_timeout_sec)?;
    run_and_save(&options, run_args, work.path())
}

/// The command line without the runner's own flags: what `vllm bench serve` was given.
fn vllm_only(args: &[String]) -> String {
    let mut kept: Vec<&str> = vec![];
    let mut skip_value = false;
    for a in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
        match flags::OWN_FLAGS.iter().find(|f| f.name == name) {
            Some(f) => skip_value = f.kind != flags::FlagKind::Switch && !a.contains('='),
            None => kept.push(a),
        }
    }
    kept.join(" ")
}

/// One line on stderr and argparse's exit code for a usage error.
fn refuse(e: FlagError) -> Result<i32> {
    crate::errln!("error: {e}");
    Ok(2)
}

/// The dataset file as an absolute path: the scenario resolves relative paths against
/// its own directory, not the one the command was typed in.
fn absolute_dataset(mut o: BenchOptions) -> Result<BenchOptions, FlagError> {
    use options::Dataset;
    let path = match &mut o.workload.dataset {
        Dataset::ShareGpt { path, .. }
        | Dataset::Sonnet { path, .. }
        | Dataset::Custom { path, .. } => path,
        _ => return Ok(o),
    };
    *path = std::fs::canonicalize(&*path).map_err(|e| {
        FlagError::value(
            "--dataset-path",
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    Ok(o)
}

/// Runs the scenario as `runner run` (the command printed), then writes vLLM's file.
fn run_and_save(o: &BenchOptions, run_args: Vec<String>, work: &Path) -> Result<i32> {
    let result = work.join("result.json");
    let output = o.output.clone().unwrap_or_else(|| work.join("output"));
    let mut argv: Vec<OsString> = vec!["runner".into()];
    argv.extend(run_args.into_iter().map(OsString::from));
    argv.extend([
        "--quiet".into(),
        "--save-result".into(),
        result.clone().into_os_string(),
    ]);
    argv.extend(["--output".into(), output.clone().into_os_string()]);
    let run = match cli::parse(argv) {
        Ok(cli::Cli {
            command: Command::Run(run),
        }) => run,
        Ok(_) => bail!("the generated run command is not a run"),
        Err(e) => bail!(
            "the generated run command does not parse: {}",
            cli::usage_error_line(&e.render().to_string())
        ),
    };
    let code = super::run::run(*run).map_err(|e| inputs_named(&e, o, work))?;
    if o.save.save_result || o.save.append_result {
        let path = vllm_json::write(o, &result, &output.join("requests.jsonl"))?;
        crate::errln!("vLLM result file: {}", path.display());
    }
    Ok(code)
}

/// The run's error with the temporary files it names (the generated scenario, the run's
/// files) replaced by what the user gave: the temporary directory is gone when the line
/// is read, and the line must point at the input to fix.
fn inputs_named(e: &anyhow::Error, o: &BenchOptions, work: &Path) -> anyhow::Error {
    let dataset = &o.workload.dataset;
    let input = match dataset.path() {
        Some(path) => format!(" from --dataset-path {}", path.display()),
        None => format!(" for --dataset-name {}", dataset.name()),
    };
    let line = super::error_line(e);
    let line = match &o.emit_scenario {
        Some(_) => line,
        None => line.replace(
            &work.join("vllm_bench_serve.rhai").display().to_string(),
            &format!("the scenario generated{input} (--emit-scenario FILE writes it)"),
        ),
    };
    anyhow::anyhow!(line.replace(&work.display().to_string(), "<temporary directory>"))
}

/// `--ready-check-timeout-sec`: waits until the target accepts connections.
fn wait_ready(target: &str, timeout_sec: u64) -> Result<()> {
    if timeout_sec == 0 {
        return Ok(());
    }
    let url = reqwest::Url::parse(target).with_context(|| format!("`{target}` is not a URL"))?;
    let host = url
        .host_str()
        .unwrap_or("127.0.0.1")
        .trim_matches(['[', ']'])
        .to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    let deadline = Instant::now() + Duration::from_secs(timeout_sec);
    loop {
        let addrs = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port));
        let up = addrs.map(|mut a| {
            a.any(|addr| {
                std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
            })
        });
        if up.unwrap_or(false) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "the target {target} was not ready within --ready-check-timeout-sec {timeout_sec}"
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `--help`: what is taken, what is refused and why.
fn help() -> String {
    let mut s = String::from("runner bench serve [vllm bench serve flags]\n\nThe flags of `vllm bench serve`, verbatim; the run is a generated Rhai scenario (--emit-scenario FILE writes it).\n\nTaken:\n");
    let taken = |f: &&flags::FlagSpec| f.support == flags::Support::Taken;
    for f in flags::VLLM_FLAGS.iter().filter(taken) {
        s.push_str(&format!("  {}\n", f.name));
    }
    s.push_str("\nThe runner's own:\n  --emit-scenario FILE  write the scenario (and still run it)\n  --dry-run             write it, print the `runner run` command, send nothing\n  --output DIR          result.json, report.txt, report.html, requests.jsonl\n\nRefused (with what to use instead):\n");
    for f in flags::VLLM_FLAGS {
        if let flags::Support::Gap(why) = f.support {
            s.push_str(&format!("  {}: {why}\n", f.name));
        }
    }
    s
}
