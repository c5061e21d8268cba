//! What a request carries beyond its body, end to end: headers from `--header` and from the
//! scenario reach the server (and secret-looking values reach no output), a scenario's
//! cancellation closes the connection (the simulator's send log sees the stream aborted)
//! and is counted apart from failures, and several `--target`s share the requests.

use std::path::Path;

use crate::fault_server::{Fault, FaultServer};
use crate::support::*;

/// Every file under `dir` (result files, records, reports), read as text.
fn all_files_in(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).expect("output dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            text += &all_files_in(&path);
        } else {
            text += &String::from_utf8_lossy(&std::fs::read(&path).expect("file"));
        }
    }
    text
}

/// Each request's headers arrive: `--header`s on every one, the scenario's own on each,
/// and a scenario header replaces a `--header` of the same name. Two requests are answered
/// 401 with their Authorization header echoed in the body (the one from `--header`, and one
/// a scenario request set itself): neither value appears in any file or on the console.
#[test]
fn headers_arrive_and_secret_values_are_written_nowhere() {
    const CLI_SECRET: &str = "cli-s3cret-t0ken-9d2e";
    const SCENARIO_SECRET: &str = "scenario-auth-s3cret-41b7";
    let server = FaultServer::start(|i| match i {
        3 | 4 => Fault::EchoAuth,
        _ => Fault::None,
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let out_dir = dir.path().join("out");
    let saved = dir.path().join("saved.json");
    let cli_auth = format!("Authorization: Bearer {CLI_SECRET}");
    let out = runner(&[
        &fixture("headers_echo.rhai"),
        "--target",
        &server.url,
        "--header",
        "x-route: from-cli",
        "--header",
        &cli_auth,
        "--output",
        &out_dir.display().to_string(),
        "--save-result",
        &saved.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = server.seen.lock().expect("seen");
    assert_eq!(seen.headers.len(), 6, "every request was seen once");
    for (&i, headers) in &seen.headers {
        let want_route = if i % 2 == 1 {
            "from-scenario"
        } else {
            "from-cli"
        };
        let want_auth = if i == 3 { SCENARIO_SECRET } else { CLI_SECRET };
        assert_eq!(
            headers["x-tenant"],
            format!("tenant-{}", i % 2),
            "request {i}"
        );
        assert_eq!(headers["x-route"], want_route, "request {i}");
        assert_eq!(
            headers["authorization"],
            format!("Bearer {want_auth}"),
            "request {i}"
        );
    }
    let result = std::fs::read_to_string(&saved).expect("saved result");
    let everything = format!(
        "{}{result}{}{}",
        all_files_in(&out_dir),
        stdout(&out),
        stderr(&out)
    );
    assert!(
        everything.contains("[redacted]"),
        "the echoes were recorded, hidden"
    );
    for secret in [CLI_SECRET, SCENARIO_SECRET] {
        assert!(!everything.contains(secret), "{secret} leaked");
    }
    // Both echoes failed their request (401), nothing else did.
    let result: serde_json::Value = serde_json::from_str(&result).expect("JSON");
    assert_eq!(num(&result, "failed"), 2.0);
    assert_eq!(result["runner"]["failures_by_kind"]["http_4xx"], 2);
}

/// `--header` mistakes end the run before anything is sent, in one line that does not
/// show a secret-looking value.
#[test]
fn a_bad_header_is_one_line_without_its_value() {
    for (header, says) in [
        ("Authorization Bearer s3cret-value", "expected NAME: VALUE"),
        ("x-request-id: 7", "--request-id-prefix"),
        ("bad name: x", "not a valid HTTP header name"),
    ] {
        let out = runner(&[&scenario("chat_abandon.rhai"), "--header", header]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{header}: {err}");
        assert!(err.contains(says), "{header}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(!err.contains("s3cret-value"), "{err}");
    }
}

/// chat_abandon gives up on every 5th of 50 requests after 5 tokens of 32: exactly 10
/// are cancelled, none failed, 40 completed; the server saw exactly those 10 streams end
/// early (aborted in its send log, long before their 32 tokens would have taken), and the
/// text report, result.json and a threshold all count them.
#[test]
fn a_fifth_of_the_requests_cancelled_after_five_tokens() {
    let _guard = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("sent.jsonl");
    let (stdout, result, records) = run_records(&[
        &scenario("chat_abandon.rhai"),
        "--sim-profile",
        "fixed",
        "--sim-ttft-ms",
        "20",
        "--sim-itl-ms",
        "10",
        "--sim-send-log",
        &log.display().to_string(),
        "--threshold",
        "cancelled==10",
    ]);
    let runner = &result["runner"];
    assert_eq!(num(runner, "cancelled_requests"), 10.0, "{runner}");
    assert_eq!(
        (num(&result, "completed"), num(&result, "failed")),
        (40.0, 0.0)
    );
    assert_eq!(result["thresholds"][0]["pass"], true);
    let cancelled: Vec<&serde_json::Value> =
        records.iter().filter(|r| r["cancelled"] == true).collect();
    assert_eq!(cancelled.len(), 10);
    for r in &cancelled {
        assert_eq!(r["index"].as_u64().unwrap() % 5, 4, "{r}");
        assert!(r.get("error").is_none(), "{r}");
        // Given up at its 5th token: a chunk or two more may share the read.
        let chunks = r["chunks"].as_array().expect("chunks").len();
        assert!((5..8).contains(&chunks), "{chunks} chunks: {r}");
    }
    // The server's side: exactly the cancelled streams ended without [DONE], soon after
    // their 5th token left (20 + 4 × 10 ms), not at the 32nd (330 ms).
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .expect("send log")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let mut aborted: Vec<&str> = lines
        .iter()
        .filter(|l| l["aborted"] == true)
        .map(|l| l["request_id"].as_str().expect("request id"))
        .collect();
    let mut wanted: Vec<&str> = cancelled
        .iter()
        .map(|r| r["request_id"].as_str().expect("request id"))
        .collect();
    aborted.sort_unstable();
    wanted.sort_unstable();
    assert_eq!(aborted, wanted);
    for l in lines.iter().filter(|l| l["aborted"] == true) {
        let at = l["aborted_ms"].as_f64().expect("aborted_ms");
        let sent = l["chunk_ms"].as_array().expect("chunk_ms").len();
        assert!(
            at < 250.0 && sent < 32,
            "aborted at {at} ms after {sent} chunks: {l}"
        );
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("Cancelled by the scenario:")
                && l.split_whitespace().last() == Some("10")),
        "{stdout}"
    );
}

/// Two simulator targets, round-robin: each gets half of 20 requests, the records name
/// their target, the per-target table and result.json show both, a threshold reads one;
/// a request naming a target the run lacks is one clear error. (Both targets' server
/// metrics: `server_metrics::every_targets_metrics_are_scraped_and_summed`.)
#[test]
fn two_targets_share_the_requests_round_robin() {
    let _guard = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let sims = [
        SimProcess::logging(dir.path(), "a", &["--sim-profile", "fixed"]),
        SimProcess::logging(dir.path(), "b", &["--sim-profile", "fixed"]),
    ];
    let (stdout, result, records) = run_records(&[
        &scenario("chat_abandon.rhai"),
        "-p",
        "requests=20",
        "-p",
        "abandon_every=0",
        "--target",
        &sims[0].url,
        "--target",
        &sims[1].url,
        "--threshold",
        "completed[target=1]==10",
    ]);
    for (i, sim) in sims.iter().enumerate() {
        assert_eq!(sim.lines().len(), 10, "target {i}");
        let to_it = records.iter().filter(|r| r["target"] == i).count();
        assert_eq!(to_it, 10, "records of target {i}");
    }
    assert!(records
        .iter()
        .all(|r| r["target"].as_u64() == r["index"].as_u64().map(|i| i % 2)));
    let targets = result["runner"]["targets"]
        .as_array()
        .expect("per-target rows");
    assert_eq!(targets.len(), 2);
    for (i, t) in targets.iter().enumerate() {
        assert_eq!(
            (t["target"].as_u64(), num(t, "completed")),
            (Some(i as u64), 10.0)
        );
        assert_eq!(t["url"], sims[i].url.as_str());
    }
    assert_eq!(result["thresholds"][0]["pass"], true);
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.contains("Per-target Metrics"))
        .collect();
    assert!(table.len() > 3, "{stdout}");
    assert!(table[1].starts_with("target"), "{stdout}");
    for i in 0..2 {
        assert!(stdout.contains(&format!("Target {i}:")), "{stdout}");
        let row = table[2 + i].split_whitespace().take(2).collect::<Vec<_>>();
        assert_eq!(row, [i.to_string(), "10".to_string()], "{stdout}");
    }

    // Tenant 2 pinned to target 2 of 2.
    let out = runner(&[
        &scenario("chat_abandon.rhai"),
        "-p",
        "requests=4",
        "-p",
        "pin_tenant_to_target=3",
        "--target",
        &sims[0].url,
        "--target",
        &sims[1].url,
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("names target 2, but the run has 2 --targets"),
        "{err}"
    );
}

/// `--session-header` naming a credential's header is refused in one line, as `Host` is:
/// each session's id would replace the API key sent there.
#[test]
fn a_credential_session_header_is_refused_in_one_line() {
    for name in [
        "Authorization",
        "x-api-key",
        "Proxy-Authorization",
        "Cookie",
    ] {
        let out = runner(&[
            &scenario("chat_abandon.rhai"),
            "--api-key",
            "key-0123456789",
            "--session-header",
            name,
        ]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{name}: {err}");
        assert!(
            err.contains(&format!("--session-header: `{name}` carries credentials")),
            "{name}: {err}"
        );
    }
}

/// A scenario's `extra` body fields may not replace what the runner owns (`stream`,
/// `stream_options`) or built from the request's own fields (`max_tokens`, `prompt`):
/// the run ends at that request in one line naming the field, before it is sent.
#[test]
fn extra_fields_the_runner_owns_end_the_run_in_one_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (extra, says) in [
        (
            "#{ stream: false }",
            "`extra.stream`: the runner sets `stream` itself",
        ),
        (
            "#{ stream_options: #{ include_usage: false } }",
            "use --no-usage or --continuous-usage",
        ),
        (
            "#{ max_tokens: 999 }",
            "`extra.max_tokens` would replace the `max_tokens`",
        ),
        (
            "#{ prompt: \"other\" }",
            "`extra.prompt` would replace the `prompt`",
        ),
    ] {
        let script = dir.path().join("owned.rhai");
        std::fs::write(
            &script,
            format!(
                "fn describe() {{ #{{ name: \"owned\", params: [] }} }}
fn phases() {{ [#{{ name: \"p\", max_requests: 2 }}] }}
fn next_request(phase, index) {{ #{{ prompt: \"hi\", max_tokens: 2, extra: {extra} }} }}
"
            ),
        )
        .unwrap();
        let out = runner(&[&script.display().to_string()]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{extra}: {err}");
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
        assert_eq!(errors.len(), 1, "{extra}: {err}");
        assert!(
            errors[0].contains("next_request") && errors[0].contains(says),
            "{extra}: {err}"
        );
    }
}
