//! Secrets never leave the process: a server that echoes the API key into llama.cpp-style
//! `timings`, or into an error body right where messages are cut, and credentials written
//! into the target URL, appear in no output (console, records, reports, result files), not
//! even as a 6-character piece.

use std::path::Path;
use std::process::Output;

use crate::fault_server::{Fault, FaultServer};
use crate::support::{fixture, stderr, stdout};

/// Everything a run showed or wrote: its console and every file under `dir`.
fn everything(out: &Output, dir: &Path) -> String {
    let mut all = stdout(out) + &*stderr(out);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            all += &String::from_utf8_lossy(&std::fs::read(&path).unwrap());
        }
    }
    all
}

/// Every 6-character piece of `secret` that occurs in `text`.
fn pieces_of(secret: &str, text: &str) -> Vec<String> {
    let chars: Vec<char> = secret.chars().collect();
    chars
        .windows(6)
        .map(|w| w.iter().collect::<String>())
        .filter(|piece| text.contains(piece.as_str()))
        .collect()
}

fn run_against(target: &str, key: Option<&str>, dir: &Path) -> Output {
    let saved = dir.join("saved.json").display().to_string();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_runner"));
    cmd.args([
        &fixture("faults.rhai"),
        "--target",
        target,
        "-p",
        "requests=20",
        "-p",
        "concurrency=4",
        "--output",
        &dir.display().to_string(),
        "--save-result",
        &saved,
    ])
    .env_remove("OPENAI_API_KEY")
    .env("RUST_BACKTRACE", "0");
    if let Some(key) = key {
        cmd.env("OPENAI_API_KEY", key);
    }
    cmd.output().unwrap()
}

#[test]
fn a_key_echoed_in_timings_or_at_the_cut_of_an_error_body_is_redacted() {
    const KEY: &str = "sk-SECRET-4b9d0e7a21c8f6";
    let server = FaultServer::start(|i| match i % 4 {
        0 => Fault::EchoAuthInTimings,
        1 => Fault::EchoAuthAtCut,
        _ => Fault::None,
    });
    let dir = tempfile::tempdir().unwrap();
    let out = run_against(&server.url, Some(KEY), dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(server
        .seen
        .lock()
        .unwrap()
        .authorization
        .iter()
        .all(|a| a == &format!("Bearer {KEY}")));
    let all = everything(&out, dir.path());
    // The echoes were recorded, redacted: the timings object and the error message.
    let records = std::fs::read_to_string(dir.path().join("requests.jsonl")).unwrap();
    assert!(records.contains("server_timings"), "no timings kept");
    assert!(
        records.contains("[redacted]"),
        "the echoes were not recorded"
    );
    assert!(records.contains("xxxx"), "the error body was not recorded");
    assert_eq!(pieces_of(KEY, &all), Vec::<String>::new(), "the key leaked");
}

#[test]
fn credentials_in_the_target_url_are_never_shown() {
    const PASSWORD: &str = "pw-7c1d93be05aa";
    let server = FaultServer::start(|_| Fault::None);
    let dir = tempfile::tempdir().unwrap();
    let target = server
        .url
        .replace("http://", &format!("http://ada-lovelace:{PASSWORD}@"));
    let out = run_against(&target, None, dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let all = everything(&out, dir.path());
    assert!(
        stdout(&out).contains("http://[redacted]@127.0.0.1"),
        "{}",
        stdout(&out)
    );
    assert_eq!(pieces_of(PASSWORD, &all), Vec::<String>::new(), "leaked");
    assert!(!all.contains("ada-lovelace"), "the user name was shown");

    // A target that cannot be reached: the error line names it without its credentials.
    let dead = format!(
        "http://ada-lovelace:{PASSWORD}@127.0.0.1:{}",
        crate::support::free_port()
    );
    let out = crate::support::runner(&[&fixture("faults.rhai"), "--target", &dead]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(pieces_of(PASSWORD, &err), Vec::<String>::new(), "{err}");
    assert!(!err.contains("ada-lovelace"), "{err}");
}
