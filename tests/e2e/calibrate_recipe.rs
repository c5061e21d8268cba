//! The README's calibration recipe, run as written: its commands are read from README.md
//! and run in a folder where `scenarios/` is the repository's, against a simulated server
//! whose limit (the `default` profile's 256 sequences) the load points' 16 in flight never
//! reach, as a large server's would not. Where no request waited, the fit states `max_seqs` as the lower bound it is instead of refusing, and a
//! run against the twin says so (issue 58 item 7).

use std::path::Path;
use std::process::{Command, Output};

use crate::support::{repo, runner, stderr, stdout, test_cache_dir, SimProcess};

/// The address the README's recipe names for "your server".
const README_TARGET: &str = "http://127.0.0.1:8000";

/// The indented `runner …` lines of the README's section on `runner calibrate`.
fn recipe() -> Vec<String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let section = readme
        .split("\n### ")
        .find(|s| s.starts_with("A twin of your server"))
        .expect("the README's calibrate section");
    section
        .lines()
        .filter_map(|l| l.strip_prefix("    runner "))
        .map(str::to_string)
        .collect()
}

/// `runner` with the words of `line`, run in `cwd`.
fn run_line(line: &str, cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(line.split_whitespace())
        .current_dir(cwd)
        .env_remove("OPENAI_API_KEY")
        .env("RUST_BACKTRACE", "0")
        .env("RUNNER_CACHE_DIR", test_cache_dir())
        .output()
        .expect("the runner binary starts")
}

#[test]
fn the_readmes_calibration_recipe_runs_as_written_against_a_server_it_never_fills() {
    let lines = recipe();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].contains(README_TARGET), "{lines:?}");
    let sim = SimProcess::start(&[]);
    let cwd = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo().join("scenarios"), cwd.path().join("scenarios")).unwrap();
    let mut outs = Vec::new();
    for line in &lines {
        let line = line.replace(README_TARGET, &sim.url);
        let out = run_line(&line, cwd.path());
        assert!(out.status.success(), "runner {line}: {}", stderr(&out));
        outs.push(stdout(&out));
    }
    let fitted = &outs[1];
    assert!(
        fitted.contains("≥ 16 (never reached"),
        "calibrate states the bound: {fitted}"
    );
    let twin = std::fs::read_to_string(cwd.path().join("twin.toml")).expect("twin.toml");
    let file: toml::Value = toml::from_str(&twin).expect("toml");
    assert_eq!(file["engine"]["max_seqs"].as_integer(), Some(16), "{twin}");
    assert_eq!(
        file["engine"]["max_seqs_lower_bound"].as_bool(),
        Some(true),
        "{twin}"
    );
    assert!(
        outs[2].contains("max_seqs ≥ 16 never reached"),
        "the run against the twin names the bound: {}",
        outs[2]
    );
}

/// The issue's own attempt: a sweep of up to 64 prompts against the built-in server
/// (whose limit is far above 64) calibrates, with the limit a lower bound of 64.
#[test]
fn a_sweep_that_never_queued_calibrates_with_a_lower_bound() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run").display().to_string();
    let script = crate::support::scenario("sweep.rhai");
    let out = runner(&[
        &script,
        "-q",
        "-p",
        "max_prompts=64",
        "-p",
        "output_tokens=32",
        "--output",
        &run,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let twin = dir.path().join("twin.toml").display().to_string();
    let out = runner(&["calibrate", &run, "--out", &twin]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("≥ 64 (never reached"),
        "{}",
        stdout(&out)
    );
}
