//! The same seed sends the same requests; another seed does not.

use crate::support::*;

fn digest(extra: &[&str]) -> String {
    let mut args = vec![scenario("throughput.rhai")];
    args.extend(["-p", "requests=40", "-p", "rate=200", "-q"].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, r) = run_ok(&refs);
    let d = r["runner"]["request_digest"]
        .as_str()
        .expect("digest in result")
        .to_string();
    assert!(out.contains(&d), "digest printed in the report");
    d
}

#[test]
fn same_seed_same_request_stream() {
    let a = digest(&[]);
    let b = digest(&[]);
    assert_eq!(a, b);
    assert_eq!(a.len(), 64);
    let c = digest(&["--seed", "7"]);
    assert_ne!(a, c, "another seed gives other requests");
}

/// 200 requests due 0.1 ms before the phase's deadline, 50 due at it (a second in, so the
/// scenario has queued them all long before, however busy the machine): the client cannot
/// send 200 in 0.1 ms, yet every one due before the deadline leaves (late, and its lateness
/// is reported) and none due at it does. Before, those the client got to after the
/// deadline were dropped, so a request stream depended on how busy the machine was (the
/// SLO-search twins once sent different streams beside two busy loops).
#[test]
fn every_request_due_before_the_deadline_is_sent_however_late_the_client_is() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("deadline.rhai");
    std::fs::write(
        &path,
        r#"
fn describe() { #{ name: "deadline", description: "A burst at a phase's deadline." } }
fn phases() { [#{ name: "burst", max_duration: 1.0 }] }
fn next_request(phase, index) {
    if index >= 250 { return (); }
    #{ prompt: "hi", max_tokens: 1, at: if index < 200 { 0.9999 } else { 1.0 } }
}
"#,
    )
    .expect("scenario written");
    let script = path.display().to_string();
    let (_, result, records) = run_records(&[&script, "--sim-profile", "zero", "-q"]);
    assert_eq!(records.len(), 200, "requests sent");
    assert_eq!(result["completed"].as_u64(), Some(200), "{result}");
    // Sent at or after the deadline, 0.1 ms after their send time.
    let late = records
        .iter()
        .filter(|r| r["sent_ns"].as_u64() >= r["scheduled_ns"].as_u64().map(|t| t + 100_000))
        .count();
    assert!(
        late > 0,
        "no request left after the deadline: the test proves nothing"
    );
}

/// A phase that a `stop` ends after three answers: as many requests leave as the server's
/// speed allows before then.
const STOPS_AFTER_THREE_ANSWERS: &str = r#"
fn describe() { #{ name: "stop-after-three", description: "Ends its phase after three answers." } }
fn phases() { [#{ name: "main", arrival: #{ process: "constant", rate: 100.0 }, max_requests: 300 }] }
fn next_request(phase, index) { #{ prompt: "hi", max_tokens: 2, ignore_eos: true } }
fn stop(s) { s.completed >= 3 }
"#;

fn stream_of(script: &str, ttft_ms: &str) -> (String, serde_json::Value) {
    run_ok(&[
        script,
        "--sim-profile",
        "fixed",
        "--sim-ttft-ms",
        ttft_ms,
        "--sim-itl-ms",
        "1",
        "-q",
    ])
}

const DEPENDENCE_LINE: &str = "Request stream may have depended on responses or timing";

/// The same seed sends another stream when a hook adapts to what it measured: here a
/// `stop` waiting for answers lets more requests out against a slow server than against a
/// fast one. The report says so after the digest, naming the hook, and result.json lists
/// it; a stream made by `next_request` alone names nothing.
#[test]
fn a_stream_that_followed_the_servers_timing_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("stop.rhai");
    std::fs::write(&path, STOPS_AFTER_THREE_ANSWERS).expect("scenario written");
    let script = path.display().to_string();
    let (fast_out, fast) = stream_of(&script, "1");
    let (slow_out, slow) = stream_of(&script, "500");
    let sent = |r: &serde_json::Value| r["num_prompts"].as_u64().expect("num_prompts");
    assert!(
        sent(&slow) > sent(&fast),
        "sent {} against the slow server, {} against the fast one",
        sent(&slow),
        sent(&fast)
    );
    assert_ne!(
        slow["runner"]["request_digest"], fast["runner"]["request_digest"],
        "the same seed, another stream"
    );
    for (out, result) in [(&fast_out, &fast), (&slow_out, &slow)] {
        assert_eq!(
            result["runner"]["request_stream_depends_on"],
            serde_json::json!(["stop"]),
            "{result}"
        );
        let line = out
            .lines()
            .find(|l| l.starts_with(DEPENDENCE_LINE))
            .unwrap_or_else(|| panic!("no dependence line in:\n{out}"));
        assert!(line.contains(": stop ("), "{line}");
    }

    let (out, result) = stream_of(&scenario("throughput.rhai"), "1");
    assert_eq!(
        result["runner"]["request_stream_depends_on"],
        serde_json::json!([]),
        "{result}"
    );
    assert!(!out.contains(DEPENDENCE_LINE), "{out}");
}

/// Each adaptive hook is named, in the order on_response, stop, next_phase, and so is a
/// phase whose deadline cuts a stream paced by the server's answers (closed loop).
#[test]
fn every_adaptive_hook_and_a_deadline_under_a_concurrency_limit_are_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("adaptive.rhai");
    std::fs::write(
        &path,
        r#"
fn describe() { #{ name: "adaptive", description: "Every hook." } }
fn phases() {
    [#{ name: "closed", arrival: #{ process: "closed", concurrency: 2 }, max_requests: 4, max_duration: 5.0 }]
}
fn next_request(phase, index) { #{ prompt: "hi", max_tokens: 1 } }
fn on_response(outcome) { }
fn stop(s) { false }
fn next_phase(history) { () }
"#,
    )
    .expect("scenario written");
    let (out, result) = stream_of(&path.display().to_string(), "1");
    let want = [
        "on_response",
        "stop",
        "next_phase",
        "max_duration_with_concurrency_limit",
    ];
    assert_eq!(
        result["runner"]["request_stream_depends_on"],
        serde_json::json!(want),
        "{result}"
    );
    assert!(out.contains(&want.join(", ")), "{out}");
}
