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
