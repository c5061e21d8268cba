//! Server faults are data: one run against the fault-injecting server, with a known number
//! of each fault, must report exactly those counts, each under its own kind, and record
//! every request with its message.

use std::collections::BTreeMap;

use crate::fault_server::{Fault, FaultServer};
use crate::support::*;

/// Each injected fault, the kind it must be reported as (JSON key, text label), and how
/// many of the run's requests get it.
const PLAN: [(Fault, &str, &str, usize); 13] = [
    (Fault::BadRequest, "http_4xx", "http 4xx", 20),
    (
        Fault::RateLimited,
        "rate_limited",
        "http 429 rate limited",
        20,
    ),
    (Fault::Unavailable, "http_5xx", "http 5xx", 20),
    (Fault::UnavailableStalled, "http_5xx", "http 5xx", 4),
    (Fault::RedirectAway, "http_other", "http other status", 20),
    (Fault::Reset, "disconnect", "connection lost", 20),
    (Fault::Cut, "stream_cut", "stream cut", 20),
    (Fault::StallAfterFirst, "timeout", "request timeout", 8),
    (
        Fault::StallBeforeFirst,
        "first_token_timeout",
        "first-token timeout",
        8,
    ),
    (Fault::NotSse, "malformed_sse", "malformed sse", 20),
    (Fault::BadJson, "malformed_json", "malformed json", 20),
    (Fault::ErrorObject, "error_object", "error object", 20),
    (Fault::Empty, "empty_completion", "empty completion", 20),
];

/// The fault of every request index: the planned counts, spread by a fixed shuffle.
fn assignment(requests: usize) -> Vec<Fault> {
    let mut faults: Vec<Fault> = PLAN
        .iter()
        .flat_map(|&(f, _, _, n)| std::iter::repeat_n(f, n))
        .collect();
    faults.resize(requests, Fault::None);
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..faults.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        faults.swap(i, (state % (i as u64 + 1)) as usize);
    }
    faults
}

fn key_of(f: Fault) -> Option<&'static str> {
    PLAN.iter().find(|p| p.0 == f).map(|p| p.1)
}

/// The text report: the successful and failed requests, each fault's own row and label.
/// Returns the expected count of each (kind, label).
fn check_report(
    text: &str,
    ok: usize,
    injected: usize,
) -> BTreeMap<(&'static str, &'static str), u64> {
    assert_eq!(
        report_row(text, "Successful requests:"),
        Some(ok as u64),
        "{text}"
    );
    assert_eq!(
        report_row(text, "Failed requests:"),
        Some(injected as u64),
        "{text}"
    );
    let mut expected: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for &(_, key, label, n) in &PLAN {
        *expected.entry((key, label)).or_default() += n as u64;
    }
    for (&(_, label), &n) in &expected {
        assert_eq!(
            report_row(text, &format!("Failed ({label}):")),
            Some(n),
            "{label}\n{text}"
        );
        assert!(text.contains(&format!("\n  {label}: ")), "{label}");
    }
    expected
}

/// result.json: the same counts, and nothing else.
fn check_result(
    dir: &std::path::Path,
    ok: usize,
    injected: usize,
    expected: &BTreeMap<(&str, &str), u64>,
) {
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).unwrap()).unwrap();
    assert_eq!(num(&result, "completed") as usize, ok);
    assert_eq!(num(&result, "failed") as usize, injected);
    let by_kind: BTreeMap<String, u64> =
        serde_json::from_value(result["runner"]["failures_by_kind"].clone()).unwrap();
    let expected: BTreeMap<String, u64> = expected
        .iter()
        .map(|(&(key, _), &n)| (key.to_string(), n))
        .collect();
    assert_eq!(by_kind, expected);
}

/// requests.jsonl: one record per request, each classified as injected, with a message
/// that says what happened.
fn check_records(dir: &std::path::Path, faults: &[Fault]) {
    let records = std::fs::read_to_string(dir.join("requests.jsonl")).unwrap();
    let mut seen = vec![false; faults.len()];
    for line in records.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let index = r["index"].as_u64().unwrap() as usize;
        assert!(!seen[index], "request {index} recorded twice");
        seen[index] = true;
        let kind = r["error"]["kind"].as_str();
        assert_eq!(kind, key_of(faults[index]), "request {index}: {r}");
        if kind.is_some() {
            let message = r["error"]["message"].as_str().unwrap();
            assert!(!message.is_empty(), "request {index}: {r}");
        }
    }
    assert!(
        seen.iter().all(|&s| s),
        "a request is missing from the records"
    );
    let message_of = |f: Fault| -> String {
        let i = faults.iter().position(|&x| x == f).unwrap();
        records
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|r| r["index"] == i)
            .unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(message_of(Fault::RateLimited).contains("HTTP 429 (Retry-After: 7)"));
    assert!(message_of(Fault::Unavailable).contains("injected: overloaded"));
    assert!(message_of(Fault::UnavailableStalled).starts_with("HTTP 503"));
    // A redirect is not followed: its target is quoted.
    assert!(message_of(Fault::RedirectAway).starts_with("HTTP 307 (Location: \"http://127.0.0.1:"));
    assert!(message_of(Fault::ErrorObject).contains("injected: engine died"));
}

#[test]
fn every_injected_fault_is_counted_under_its_own_kind() {
    let _guard = exclusive();
    const REQUESTS: usize = 1000;
    let faults = assignment(REQUESTS);
    let table = faults.clone();
    let server = FaultServer::start(move |i| table[i as usize]);
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().display().to_string();
    let started = std::time::Instant::now();
    let out = runner(&[
        &fixture("faults.rhai"),
        "--target",
        &server.url,
        "--model",
        "fault-model",
        "-p",
        &format!("requests={REQUESTS}"),
        "-p",
        "concurrency=32",
        "--request-timeout",
        "3s",
        "--first-token-timeout",
        "1500ms",
        "--output",
        &out_dir,
    ]);
    let elapsed = started.elapsed();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{text}", stderr(&out));

    let injected: usize = PLAN.iter().map(|p| p.3).sum();
    let expected = check_report(&text, REQUESTS - injected, injected);
    check_result(dir.path(), REQUESTS - injected, injected, &expected);
    check_records(dir.path(), &faults);

    // The server saw every request once: failed requests are not retried, except one
    // reset before any answer on a connection reused from the pool (the server may have
    // closed it under the request), sent once more and counted as retried.
    let seen = server.seen.lock().unwrap();
    let mut indices = seen.indices.clone();
    indices.sort_unstable();
    let twice: Vec<u64> = indices
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    indices.dedup();
    assert_eq!(indices.len(), REQUESTS);
    let retried: std::collections::HashSet<u64> = records_in(dir.path())
        .iter()
        .filter(|r| r["retried"] == true)
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    assert!(
        twice
            .iter()
            .all(|i| retried.contains(i) && faults[*i as usize] == Fault::Reset),
        "a request sent twice without being counted, or not a reset: {twice:?}"
    );
    eprintln!("fault run: {REQUESTS} requests, {injected} faults injected, {elapsed:?}\n{text}");
}

/// `--max-error-rate` ends a run against a failing server early, says why, and exits 1
/// after printing the report of what finished.
#[test]
fn max_error_rate_ends_the_run_with_its_reason() {
    let server = FaultServer::start(|i| {
        if i % 2 == 0 {
            Fault::Unavailable
        } else {
            Fault::None
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().display().to_string();
    let out = runner(&[
        &fixture("faults.rhai"),
        "--target",
        &server.url,
        "-p",
        "requests=5000",
        "-p",
        "concurrency=4",
        "--max-error-rate",
        "25%",
        "--output",
        &out_dir,
        // The fault server has no /metrics: its warning would be a second line.
        "--server-metrics",
        "off",
    ]);
    let err = stderr(&out);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{err}\n{text}");
    assert!(
        err.trim_end().lines().count() == 1
            && err.starts_with("error: the run stopped early in phase `faults`: error rate ")
            && err.contains("exceeded --max-error-rate 0.25"),
        "{err}"
    );
    assert!(text.contains("Phase ended: error rate "), "{text}");
    let ok = report_row(&text, "Successful requests:").unwrap();
    let failed = report_row(&text, "Failed requests:").unwrap();
    assert!(failed >= 5 && ok + failed < 5000, "{text}");
    let lines = std::fs::read_to_string(dir.path().join("requests.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(lines, ok + failed);
}

/// The API key is sent to the server and never shown: not in the console, the reports,
/// the records, nor in an error message whose body echoes it back.
#[test]
fn the_api_key_never_leaves_the_request() {
    const KEY: &str = "sk-test-7f3a9c1e5b-secret";
    let server = FaultServer::start(|i| if i < 10 { Fault::EchoAuth } else { Fault::None });
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().display().to_string();
    let result_file = dir.path().join("saved.json").display().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .args([
            &fixture("faults.rhai"),
            "--target",
            &server.url,
            "-p",
            "requests=40",
            "--output",
            &out_dir,
            "--save-result",
            &result_file,
        ])
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The server did get it, and echoed it into the records' error messages.
    let seen = server.seen.lock().unwrap();
    assert!(seen
        .authorization
        .iter()
        .all(|a| a == &format!("Bearer {KEY}")));
    assert!(!seen.authorization.is_empty());
    let mut everything = stdout(&out) + &*stderr(&out);
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        everything += &std::fs::read_to_string(entry.unwrap().path()).unwrap();
    }
    assert!(
        everything.contains("[redacted]"),
        "the echo was not recorded"
    );
    assert!(!everything.contains(KEY), "the key leaked");
    // Nor a recognisable part of it.
    assert!(!everything.contains("7f3a9c1e5b"), "part of the key leaked");

    // Nor in the help, where clap shows environment values unless told not to.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(["run", "--help"])
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("OPENAI_API_KEY") && !stdout(&out).contains(KEY));
}

/// A scenario's own stop condition over the live failure count ends the phase early, and
/// the report says so.
#[test]
fn a_scenario_stop_on_failures_ends_the_phase() {
    let server = FaultServer::start(|i| {
        if i % 2 == 0 {
            Fault::Unavailable
        } else {
            Fault::None
        }
    });
    let out = runner(&[&fixture("stop_on_errors.rhai"), "--target", &server.url]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}\n{text}", stderr(&out));
    assert!(
        text.contains("Phase ended: the scenario's stop condition held."),
        "{text}"
    );
    let failed = report_row(&text, "Failed requests:").unwrap();
    let ok = report_row(&text, "Successful requests:").unwrap();
    assert!(failed >= 10 && ok + failed < 5000, "{text}");
    assert_eq!(report_row(&text, "Failed (http 5xx):"), Some(failed));
}
