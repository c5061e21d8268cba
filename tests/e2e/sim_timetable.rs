//! The simulator's own timetable, checked against its send log in every run of the
//! suite: on the simulated clock (`--virtual-time`) nothing a busy machine does moves a
//! send, so each chunk the log records leaves exactly when the profile says (the fixed
//! profile's TTFT and gaps, every K-th request held, several tokens to a chunk). The
//! real clock's side is in host/src/servers/sim/tests.rs: no chunk leaves ahead of its
//! timetable, on any machine; how late it leaves is the `quiet_machine` tests'.

use std::collections::BTreeMap;

use crate::support::*;

/// Runs fixed.rhai (`requests` requests of `tokens` tokens, 4 at a time) in virtual time
/// against the fixed profile with `sim` flags; the send log's chunk times by the server's
/// request number (the pre-run request is number 1).
fn sent_in_virtual_time(requests: u32, tokens: u32, sim: &[&str]) -> BTreeMap<u64, Vec<f64>> {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("sent.jsonl").display().to_string();
    let out = dir.path().join("out").display().to_string();
    let (requests, tokens) = (
        format!("requests={requests}"),
        format!("output_tokens={tokens}"),
    );
    let mut args = vec![
        fixture("fixed.rhai"),
        "-p".into(),
        requests,
        "-p".into(),
        tokens,
        "-p".into(),
        "concurrency=4".into(),
        "--sim-profile".into(),
        "fixed".into(),
        "--virtual-time".into(),
        "--sim-send-log".into(),
        log.clone(),
        "--output".into(),
        out,
        "-q".into(),
    ];
    args.extend(sim.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = runner(&refs);
    assert!(run.status.success(), "{}", stderr(&run));
    std::fs::read_to_string(&log)
        .expect("send log")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            let chunks = v["chunk_ms"].as_array().expect("chunk_ms");
            let ms = chunks.iter().map(|c| c.as_f64().expect("ms")).collect();
            (v["id"].as_u64().expect("id"), ms)
        })
        .collect()
}

/// Each stream's chunks left at `first_ms(id) + i × gap_ms`, to the log's µs.
fn assert_timetable(
    what: &str,
    sent: &BTreeMap<u64, Vec<f64>>,
    first_ms: impl Fn(u64) -> f64,
    gap_ms: f64,
    chunks: usize,
) {
    for (id, times) in sent.iter().filter(|(id, _)| **id > 1) {
        assert_eq!(times.len(), chunks, "{what}: request {id}: {times:?}");
        for (i, at) in times.iter().enumerate() {
            let due = first_ms(*id) + i as f64 * gap_ms;
            assert!(
                (at - due).abs() < 0.002,
                "{what}: request {id} chunk {i} left at {at} ms, due at {due} ms"
            );
        }
    }
    let streams = sent.len() - 1;
    tell(&format!(
        "simulator timetable, {what}: {streams} streams of {chunks} chunks, each at its time"
    ));
}

#[test]
fn the_fixed_profile_sends_on_its_timetable() {
    let sent = sent_in_virtual_time(16, 21, &["--sim-ttft-ms", "50", "--sim-itl-ms", "10"]);
    assert_eq!(sent.len(), 17, "every stream is logged");
    assert_timetable("fixed 50/10 ms", &sent, |_| 50.0, 10.0, 21);
}

/// Requests 4, 8, 12, … (counted as the server received them, the pre-run one first)
/// wait 80 ms more before their first token; the gaps after it are unchanged.
#[test]
fn every_kth_request_is_held_by_its_delay_and_no_more() {
    let flags = [
        "--sim-ttft-ms",
        "20",
        "--sim-itl-ms",
        "10",
        "--sim-slow-every",
        "4",
        "--sim-slow-ms",
        "80",
    ];
    let sent = sent_in_virtual_time(11, 3, &flags);
    assert_eq!(sent.len(), 12, "every stream is logged");
    let first = |id: u64| if id.is_multiple_of(4) { 100.0 } else { 20.0 };
    assert_timetable("every 4th held 80 ms", &sent, first, 10.0, 3);
}

/// 64 tokens four to a chunk: 16 chunks, each at the next gap of the timetable.
#[test]
fn grouped_chunks_keep_the_timetable() {
    let flags = [
        "--sim-ttft-ms",
        "20",
        "--sim-itl-ms",
        "10",
        "--sim-tokens-per-chunk",
        "4",
    ];
    let sent = sent_in_virtual_time(4, 64, &flags);
    assert_eq!(sent.len(), 5, "every stream is logged");
    assert_timetable("4 tokens a chunk", &sent, |_| 20.0, 10.0, 16);
}
