//! Running the binary and reading what it wrote.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

pub fn scenario(name: &str) -> String {
    repo().join("scenarios").join(name).display().to_string()
}

pub fn fixture(name: &str) -> String {
    repo()
        .join("tests/fixtures/scenarios")
        .join(name)
        .display()
        .to_string()
}

/// Runs `runner ARGS…` to completion (every run in these tests is bounded in requests).
pub fn runner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("the runner binary starts")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts a successful run and returns its saved result JSON.
pub fn run_ok(args: &[&str]) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("result.json");
    let mut all: Vec<&str> = args.to_vec();
    let p = path.display().to_string();
    all.extend(["--save-result", &p]);
    let out = runner(&all);
    assert!(
        out.status.success(),
        "runner {args:?} failed: {}\n{}",
        stderr(&out),
        stdout(&out)
    );
    let text = std::fs::read_to_string(&path).expect("result file written");
    (
        stdout(&out),
        serde_json::from_str(&text).expect("result is JSON"),
    )
}

pub fn num(v: &serde_json::Value, key: &str) -> f64 {
    v.get(key)
        .and_then(|x| x.as_f64())
        .unwrap_or_else(|| panic!("no numeric `{key}` in {v}"))
}

/// Serialises the tests whose timing assertions are tight, and the heavy runs that would
/// disturb them, so a 2-core machine measures the runner rather than its neighbours.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
