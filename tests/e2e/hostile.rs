//! A broken or hostile server cannot kill the runner, garble its output or make it send a
//! request twice: a connection reset while a large body is written, a reader that closes
//! stdout early, terminal escape sequences and binary bodies, SSE with lone-CR line ends
//! or a byte-order mark, and redirects (never followed: one POST per request).

use std::collections::BTreeMap;

use crate::fault_server::{Fault, FaultServer, ESCAPES};
use crate::support::*;

/// The arguments of a run of `faults.rhai` against `server`, into `out`.
fn fault_args(server: &FaultServer, requests: &str, out: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![fixture("faults.rhai")];
    let common = [
        "--target",
        &server.url,
        "--model",
        "fault-model",
        "-p",
        requests,
        "-p",
        "concurrency=4",
        "--output",
        out,
    ];
    args.extend(common.iter().chain(extra).map(|a| a.to_string()));
    args
}

/// The failure counts of result.json, by kind.
fn failures_by_kind(dir: &std::path::Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(dir.join("result.json")).expect("result.json");
    let result: serde_json::Value = serde_json::from_str(&text).unwrap();
    serde_json::from_value(result["runner"]["failures_by_kind"].clone()).unwrap()
}

/// A server that resets the connection after reading part of a 16 MiB body: the write
/// fails with EPIPE or ECONNRESET (SIGPIPE is ignored), each request is a failure, and the
/// run ends with its report and exit code 1 (nothing succeeded), never 141.
#[test]
fn a_reset_during_a_large_body_is_a_failure_not_death_by_sigpipe() {
    let _guard = exclusive();
    let server = FaultServer::start(|_| Fault::None);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let o = runner(&[
        &fixture("big_body.rhai"),
        "--target",
        &server.url,
        "--model",
        "fault-model",
        "--output",
        &out,
    ]);
    let (text, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(1), "{:?}\n{err}\n{text}", o.status);
    assert!(err.contains("error: no request succeeded"), "{err}");
    assert_eq!(report_row(&text, "Failed requests:"), Some(6), "{text}");
    assert_eq!(records_in(dir.path()).len(), 6);
    let reset = server.seen.lock().unwrap().big_bodies_reset;
    assert!(reset >= 6, "the server reset {reset} uploads");
    eprintln!(
        "16 MiB bodies reset: {reset}; failures {:?}",
        failures_by_kind(dir.path())
    );
}

/// `runner … --output DIR | head -1`: the reader goes away after the first line; the run
/// still finishes, writes every file, and exits 0 (not 141, not a panic).
#[test]
fn a_reader_that_closes_stdout_early_costs_no_file() {
    use std::io::BufRead;
    let server = FaultServer::start(|_| Fault::None);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let args = fault_args(&server, "requests=200", &out, &["-p", "rate=100"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = spawn_runner(&args);
    let stdout = child.stdout.take().unwrap();
    let mut first = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut first)
        .unwrap();
    // The pipe's read end is closed here: every later write to stdout fails with EPIPE.
    let stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let code = wait_exit(&mut child, std::time::Duration::from_secs(60));
    let err = err.join().unwrap();
    assert!(first.starts_with("Scenario:"), "{first}");
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for file in [
        "result.json",
        "report.txt",
        "report.md",
        "report.html",
        "requests.csv",
        "requests.jsonl",
    ] {
        let path = dir.path().join(file);
        assert!(
            std::fs::metadata(&path).is_ok_and(|m| m.len() > 0),
            "{file} missing"
        );
    }
    assert_eq!(records_in(dir.path()).len(), 200);
}

/// Escape sequences in an error body or a non-SSE line, and a gzip body, reach no output
/// raw: stdout, report.txt and report.md show them escaped, the gzip body is described.
#[test]
fn escape_sequences_and_binary_bodies_are_never_printed_raw() {
    let plan = |i: u64| match i % 4 {
        0 => Fault::EscapeBody,
        1 => Fault::EscapeLine,
        2 => Fault::GzipBody,
        _ => Fault::None,
    };
    let server = FaultServer::start(plan);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let args = fault_args(&server, "requests=40", &out, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = runner(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let raw: Vec<char> = ESCAPES
        .chars()
        .filter(|c| c.is_control() || *c == '\u{202e}')
        .collect();
    let outputs = [
        ("stdout", stdout(&o)),
        ("stderr", stderr(&o)),
        (
            "report.txt",
            std::fs::read_to_string(dir.path().join("report.txt")).unwrap(),
        ),
        (
            "report.md",
            std::fs::read_to_string(dir.path().join("report.md")).unwrap(),
        ),
    ];
    for (name, text) in &outputs {
        for c in &raw {
            assert!(!text.contains(*c), "{name} holds {c:?} raw:\n{text}");
        }
        // No byte of the gzip body either (it is not UTF-8: it would show as U+FFFD).
        assert!(
            !text.contains('\u{1f}') && !text.contains('\u{fffd}'),
            "{name}"
        );
    }
    let text = &outputs[0].1;
    assert!(text.contains("\\u{1b}]0;pwned"), "{text}");
    // The gzip body is described in its record (the report quotes the first 5xx only).
    let gzip = records_in(dir.path())
        .into_iter()
        .find(|r| r["index"] == 2)
        .unwrap();
    let message = gzip["error"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        "HTTP 500: a body of 23 bytes of application/json (gzip), not shown"
    );
    let kinds = failures_by_kind(dir.path());
    assert_eq!(kinds.get("http_5xx"), Some(&20), "{kinds:?}");
    assert_eq!(kinds.get("malformed_sse"), Some(&10), "{kinds:?}");
}

/// Lone-CR line ends and a leading byte-order mark are valid SSE: every request succeeds.
#[test]
fn cr_only_and_bom_streams_succeed() {
    let server = FaultServer::start(|i| {
        if i % 2 == 0 {
            Fault::CrLines
        } else {
            Fault::Bom
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let args = fault_args(&server, "requests=40", &out, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = runner(&args);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}\n{text}", stderr(&o));
    assert_eq!(
        report_row(&text, "Successful requests:"),
        Some(40),
        "{text}"
    );
    assert_eq!(
        report_row(&text, "Total generated tokens:"),
        Some(120),
        "{text}"
    );
}

/// A 307 elsewhere and a redirect loop are failures of kind `http_other` quoting their
/// Location; the server receives exactly one POST per request.
#[test]
fn redirects_are_failures_and_never_followed() {
    let server = FaultServer::start(|i| match i % 3 {
        0 => Fault::RedirectAway,
        1 => Fault::RedirectLoop,
        _ => Fault::None,
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().display().to_string();
    let args = fault_args(&server, "requests=30", &out, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = runner(&args);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}\n{text}", stderr(&o));
    assert_eq!(
        report_row(&text, "Successful requests:"),
        Some(10),
        "{text}"
    );
    let kinds = failures_by_kind(dir.path());
    assert_eq!(
        kinds,
        BTreeMap::from([("http_other".to_string(), 20)]),
        "{text}"
    );
    for r in records_in(dir.path()) {
        let index = r["index"].as_u64().unwrap();
        let message = r["error"]["message"].as_str().unwrap_or("");
        match index % 3 {
            0 => assert!(
                message.starts_with("HTTP 307 (Location: \"http://127.0.0.1:"),
                "{message}"
            ),
            1 => assert!(
                message.starts_with("HTTP 307 (Location: \"/v1/completions\")"),
                "{message}"
            ),
            _ => assert!(r["error"].is_null(), "{r}"),
        }
    }
    let mut seen = server.seen.lock().unwrap().indices.clone();
    seen.sort_unstable();
    assert_eq!(seen, (0..30).collect::<Vec<u64>>(), "one POST per request");
}

/// A scenario logging a server's text cannot print a line of its own: line breaks, tabs
/// and every other control character in `log()` and `print()` are shown escaped, on the
/// scenario's own line.
#[test]
fn a_logged_line_break_cannot_forge_an_output_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("forger.rhai");
    std::fs::write(
        &script,
        r#"fn describe() { #{ name: "forger", params: [] } }
fn phases() { [#{ name: "p", max_requests: 1 }] }
fn next_request(phase, index) { #{ prompt: "hi", max_tokens: 2 } }
fn on_response(o) {
    log("tool: get_weather\nX-Injected: 1\tx\u0085y\r");
    print("echo\nX-Printed: 1");
}
"#,
    )
    .unwrap();
    let out = runner(&[&script.display().to_string()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    for forged in ["X-Injected", "X-Printed"] {
        let lines: Vec<&str> = err.lines().filter(|l| l.contains(forged)).collect();
        assert_eq!(lines.len(), 1, "{forged}: {err}");
        assert!(lines[0].starts_with("[forger] "), "{forged}: {err}");
    }
    assert!(
        err.contains(r"get_weather\u{a}X-Injected: 1\u{9}x\u{85}y\u{d}"),
        "{err}"
    );
    for raw in ['\t', '\u{85}', '\r'] {
        assert!(!err.contains(raw), "{raw:?} raw in {err}");
    }
}
