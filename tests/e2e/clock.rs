//! Which clock the latencies use, and the client's own delay, in every report: runs on the
//! built-in simulator with the kernel's receive times (the default) and with the client's
//! own read times (`--receive-clock user`).

use std::path::Path;

use serde_json::Value;

use crate::support::*;

/// A short closed-loop run of 8 streamed requests of 16 chunks into `dir`; its result.json.
fn run_into(dir: &Path, clock: &str) -> (String, Value) {
    let out = dir.display().to_string();
    run_ok(&[
        &fixture("truth.rhai"),
        "-p",
        "requests=8",
        "-p",
        "concurrency=4",
        "-p",
        "output_tokens=16",
        "--sim-profile",
        "fixed",
        "--sim-ttft-ms",
        "5",
        "--receive-clock",
        clock,
        "--output",
        &out,
    ])
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn every_report_says_the_clock_and_the_clients_own_delay() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (text, r) = run_into(dir.path(), "kernel");
    let records: Vec<Value> = records_in(dir.path())
        .into_iter()
        .filter(|rec| rec["phase"] == 1)
        .collect();
    assert_eq!(records.len(), 8);
    // Per chunk in requests.jsonl: a delay (u64, so never negative) on every chunk, and
    // every send stamped at its socket write.
    for rec in &records {
        let chunks = rec["chunks"].as_array().expect("chunks");
        assert_eq!(chunks.len(), 16, "{rec}");
        assert!(
            chunks.iter().all(|c| c["client_delay_ns"].is_u64()),
            "{rec}"
        );
        assert!(rec["send_write_ns"].is_u64(), "{rec}");
    }
    let delay = &r["runner"]["client_delay"];
    assert_eq!(num(delay, "count"), 8.0 * 16.0, "{delay}");
    let (min, p50, p99, max) = (
        num(delay, "min_ms"),
        num(delay, "median_ms"),
        num(delay, "p99_ms"),
        num(delay, "max_ms"),
    );
    assert!(
        0.0 <= min && min <= p50 && p50 <= p99 && p99 <= max,
        "{delay}"
    );
    let clock = &r["runner"]["clock"];
    assert_eq!(num(clock, "kernel_chunks"), 128.0, "{clock}");
    assert_eq!(num(clock, "read_chunks"), 0.0, "{clock}");
    assert_eq!(num(clock, "socket_write_sends"), 8.0, "{clock}");
    let line = "Latency clock: kernel receive times (SO_TIMESTAMPING) for 100.0 % of chunks";
    assert!(text.contains(line), "{text}");
    assert!(text.contains("P99 client delay (ms):"), "{text}");
    for report in ["report.txt", "report.md", "report.html"] {
        let body = read(dir.path(), report);
        assert!(body.contains("Latency clock"), "{report}");
        assert!(body.contains("kernel receive times"), "{report}");
        assert!(body.to_lowercase().contains("client delay"), "{report}");
    }
}

#[test]
fn the_users_read_times_are_said_and_carry_no_delay() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (text, r) = run_into(dir.path(), "user");
    for rec in records_in(dir.path()) {
        let chunks = rec["chunks"].as_array().expect("chunks");
        assert!(
            chunks.iter().all(|c| c.get("client_delay_ns").is_none()),
            "{rec}"
        );
    }
    let clock = &r["runner"]["clock"];
    assert_eq!(num(clock, "kernel_chunks"), 0.0, "{clock}");
    assert_eq!(num(clock, "read_chunks"), 128.0, "{clock}");
    let line = "Latency clock: user-space read times";
    assert!(text.contains(line), "{text}");
    assert!(read(dir.path(), "report.html").contains("user-space read times"));
}
