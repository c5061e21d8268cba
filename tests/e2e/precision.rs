//! The client keeps its schedule and measures what the server really did: send lateness of
//! a trace replay, and TTFT / E2EL against the simulator's own log of the moments it sent
//! each chunk (`--sim-send-log`). Bounds here are for a debug build on a shared 2-core CI
//! machine; the release figures are in bench-results/client_perf.md.

use std::collections::HashMap;

use serde_json::Value;

use crate::support::*;

/// P99 send lateness allowed for a debug build. The target (release, a
/// quiet machine) is 1 ms; a debug build spends several times longer between the timer's
/// wake-up and the send, and this VM stalls a thread for up to ~4 ms now and then (debug,
/// machine loaded by two compiles: p99 2.26 ms, max 3.38 ms). Before the precise timer
/// every send was up to 2 ms late from tokio's millisecond timer alone.
const DEBUG_P99_LATENESS_MS: f64 = 5.0;

#[test]
fn trace_replay_keeps_the_trace_times() {
    let _quiet = exclusive();
    // The whole 200-line sample trace (31 s of timestamps) replayed 10 times faster, so
    // gaps go down to a few ms; short answers keep the run about the sends.
    let (_, r) = run_ok(&[
        &scenario("trace_replay.rhai"),
        "-p",
        "time_scale=0.1",
        "-p",
        "output_tokens=4",
        "--sim-profile",
        "zero",
        "-q",
    ]);
    assert_eq!(num(&r, "completed"), 200.0, "{r}");
    let lateness = &r["runner"]["send_lateness"];
    assert_eq!(num(lateness, "count"), 200.0);
    let p99 = num(lateness, "p99_ms");
    eprintln!("trace_replay send lateness: {lateness}");
    assert!(
        p99 <= DEBUG_P99_LATENESS_MS,
        "p99 send lateness {p99} ms over {DEBUG_P99_LATENESS_MS} ms: {lateness}"
    );
}

/// Mean and nearest-rank p99 of samples.
fn mean_and_p99(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let rank = (0.99 * v.len() as f64).ceil() as usize;
    (mean, v[rank.clamp(1, v.len()) - 1])
}

/// How far the client's figures may sit above the server's logged send times in a debug
/// build: the loopback trip and the client's read of 64 streams are in
/// them (release, quiet machine: see bench-results/client_perf.md).
/// Debug, machine loaded by two compiles: mean TTFT +1.5 ms, mean E2EL +2.2 ms, p99 TTFT
/// +3.2 ms.
const VS_SERVER_MEAN_MS: f64 = 3.0;
const VS_SERVER_P99_MS: f64 = 6.0;

/// The simulator's send log: each request id's chunk send times, ms from its arrival.
fn send_log(log: &str) -> HashMap<String, Vec<f64>> {
    std::fs::read_to_string(log)
        .expect("send log")
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("send log line is JSON");
            let chunks = v["chunk_ms"].as_array().expect("chunk_ms").iter();
            (
                v["request_id"].as_str().expect("request_id").to_string(),
                chunks
                    .map(|c| c.as_f64().expect("ms"))
                    .collect::<Vec<f64>>(),
            )
        })
        .collect()
}

/// Each request's TTFT and E2EL against the moments the server sent its chunks.
fn check_request_by_request(measured: &[(&Value, &Vec<f64>)]) {
    // Request by request, the client's clock starts before the request leaves and stops
    // after the chunk arrives: it never reads less than the server sent (the log keeps
    // whole µs, rounded down), and reads more by the loopback trips and its own delays.
    let ms = |rec: &Value, chunk: usize| {
        let t = rec["chunks"][chunk]["t_ns"].as_u64().expect("t_ns");
        (t - rec["sent_ns"].as_u64().expect("sent_ns")) as f64 / 1e6
    };
    let mut over_ttft = Vec::new();
    let mut over_e2el = Vec::new();
    for (rec, server) in measured {
        let (ttft, e2el) = (ms(rec, 0), ms(rec, 63));
        assert!(
            ttft >= server[0] && e2el >= server[63],
            "{}: client TTFT {ttft} / E2EL {e2el} ms, server sent at {} / {} ms",
            rec["request_id"],
            server[0],
            server[63]
        );
        over_ttft.push(ttft - server[0]);
        over_e2el.push(e2el - server[63]);
    }
    // The typical request's excess. Its tail is the 64-stream burst: every request ends,
    // and the next one starts, in the same millisecond, and the last of 64 waits for the
    // other 63 on both sides (debug, quiet machine: TTFT excess median 0.46-1.09 ms in four
    // runs, p99 1.7-7.8 ms in six; E2EL median 0.96-2.0 ms, p99 3.5-7.0 ms in four), so the
    // tail is gated on the reported percentiles below, where a late server chunk counts too.
    for (what, mut over) in [("TTFT", over_ttft), ("E2EL", over_e2el)] {
        over.sort_by(f64::total_cmp);
        let median = over[over.len() / 2];
        let (mean, p99) = mean_and_p99(over);
        eprintln!("{what} over the server's own, request by request: median {median:.3}, mean {mean:.3}, p99 {p99:.3} ms");
        assert!(
            median <= VS_SERVER_MEAN_MS,
            "{what}: the median request reads {median} ms over the server's send"
        );
    }
}

/// The reported means and p99s against the server's, (mean, p99) of TTFT and of E2EL.
fn check_reported(r: &Value, ttft: (f64, f64), e2el: (f64, f64)) {
    let (server_ttft, server_ttft_p99) = ttft;
    let (server_e2el, server_e2el_p99) = e2el;
    // The reported figures (histograms of 3 significant digits) say the same.
    for (what, got, truth, tolerance) in [
        (
            "mean TTFT",
            num(r, "mean_ttft_ms"),
            server_ttft,
            VS_SERVER_MEAN_MS,
        ),
        (
            "p99 TTFT",
            num(r, "p99_ttft_ms"),
            server_ttft_p99,
            VS_SERVER_P99_MS,
        ),
        (
            "mean E2EL",
            num(r, "mean_e2el_ms"),
            server_e2el,
            VS_SERVER_MEAN_MS,
        ),
        (
            "p99 E2EL",
            num(r, "p99_e2el_ms"),
            server_e2el_p99,
            VS_SERVER_P99_MS,
        ),
    ] {
        eprintln!("{what}: client {got:.3} ms, server sent at {truth:.3} ms");
        assert!(
            got >= truth * (1.0 - 1e-3) && got - truth <= tolerance,
            "{what}: client {got} ms, server sent at {truth} ms (± {tolerance})"
        );
    }
}

#[test]
fn ttft_and_e2el_match_the_servers_own_send_times_at_64_streams() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("sent.jsonl").display().to_string();
    let (streams, requests) = (64, 256);
    let (_, r, records) = run_records(&[
        &fixture("truth.rhai"),
        "-p",
        &format!("concurrency={streams}"),
        "-p",
        &format!("requests={requests}"),
        "--sim-profile",
        "fixed",
        "--sim-send-log",
        &log,
        "--request-id-prefix",
        "truth-",
        "--percentiles",
        "50,99",
        "-q",
    ]);
    assert_eq!(num(&r, "completed"), requests as f64);
    // One line per stream: the preflight's short one, the warm-up, then the measured phase,
    // each with the x-request-id the runner sent.
    let sent = send_log(&log);
    assert_eq!(
        sent.len(),
        1 + streams + requests,
        "every stream is logged once"
    );
    assert_eq!(sent["truth-preflight"].len(), 4, "the preflight's 4 tokens");
    // Each measured request's record and the server's account of it, by request id.
    let measured: Vec<(&Value, &Vec<f64>)> = records
        .iter()
        .filter(|rec| rec["phase"] == 1)
        .map(|rec| {
            let id = rec["request_id"].as_str().expect("request_id");
            assert_eq!(id, format!("truth-1-{}", rec["index"]));
            (rec, &sent[id])
        })
        .collect();
    assert_eq!(measured.len(), requests);
    let (server_ttft, server_ttft_p99) = mean_and_p99(measured.iter().map(|s| s.1[0]).collect());
    let (server_e2el, server_e2el_p99) = mean_and_p99(measured.iter().map(|s| s.1[63]).collect());
    // The server's own timers: chunks never leave early, and on time to within the VM's
    // stalls (nominal TTFT 50 ms, E2EL 50 + 63 × 10 = 680 ms).
    assert!(
        (50.0..52.0).contains(&server_ttft),
        "server TTFT {server_ttft}"
    );
    assert!(
        (680.0..682.0).contains(&server_e2el),
        "server E2EL {server_e2el}"
    );
    check_request_by_request(&measured);
    check_reported(
        &r,
        (server_ttft, server_ttft_p99),
        (server_e2el, server_e2el_p99),
    );
}
