//! The client keeps its schedule and measures what the server really did: send lateness of
//! a trace replay, and TTFT / E2EL request by request against the simulator's own log of
//! the moments it sent each chunk (`--sim-send-log`), gated on the client's own error
//! (`client_error.rs` of tests/timing). The millisecond checks that only a quiet machine
//! meets are in `quiet_machine`, ignored by `cargo test`; the README says how to run them.

use std::time::Duration;

use crate::client_error::*;
use crate::support::*;

/// Send lateness allowed beside other work, on its median and 90th percentile: the
/// dispatcher's clock thread and the connection task that writes the request must both
/// be woken, and two busy loops on a 2-core machine delay a wake-up by a few ms now and
/// then, more when other work runs as well (once: p99 97 ms, max 101 ms). A dispatcher on
/// tokio's millisecond timer sends 1 ms late at the median (bench-results/client_perf.md);
/// this one, loaded, 0.1 ms.
const LOADED_MEDIAN_LATENESS_MS: f64 = 0.5;
const LOADED_P90_LATENESS_MS: f64 = 5.0;

/// The trace_replay sample (200 lines, 31 s of timestamps) replayed 10 times faster, so
/// gaps go down to a few ms; short answers keep the run about the sends. Returns the send
/// lateness block of result.json and each request's lateness from requests.jsonl, ms.
fn trace_replay_lateness() -> (serde_json::Value, Vec<f64>) {
    let (_, r, records) = run_records(&[
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
    let lateness = r["runner"]["send_lateness"].clone();
    assert_eq!(num(&lateness, "count"), 200.0);
    eprintln!("trace_replay send lateness: {lateness}");
    let late = records
        .iter()
        .map(|rec| (num(rec, "sent_ns") - num(rec, "scheduled_ns")) / 1e6)
        .collect();
    (lateness, late)
}

#[test]
fn trace_replay_keeps_the_trace_times() {
    let _quiet = exclusive();
    let (reported, late) = trace_replay_lateness();
    let late = Spread::of(late);
    eprintln!("send lateness from the records: {late}");
    assert!(
        (num(&reported, "median_ms") - late.median).abs() <= 1e-3 * late.median + 1e-3,
        "the report's median lateness is the records': {reported}"
    );
    assert!(
        late.min >= 0.0
            && late.median <= LOADED_MEDIAN_LATENESS_MS
            && late.p90 <= LOADED_P90_LATENESS_MS,
        "send lateness {late}, want a median within {LOADED_MEDIAN_LATENESS_MS} ms and a \
         p90 within {LOADED_P90_LATENESS_MS} ms"
    );
}

/// 64 streams of the truth fixture on the fixed profile (TTFT 50 ms, 10 ms gaps, 64
/// tokens), with the server's send log; `clock` is `--receive-clock`.
fn truth_run_at_64_streams(clock: &str) -> Logged {
    let (streams, requests) = (64, 256);
    let run = run_logged(&[
        &fixture("truth.rhai"),
        "-p",
        &format!("concurrency={streams}"),
        "-p",
        &format!("requests={requests}"),
        "--sim-profile",
        "fixed",
        "--receive-clock",
        clock,
        "--request-id-prefix",
        "truth-",
        "--percentiles",
        "50,99",
        "-q",
    ]);
    assert_eq!(num(&run.result, "completed"), requests as f64);
    // One line per stream: the preflight's short one, the warm-up, then the measured phase,
    // each with the x-request-id the runner sent.
    assert_eq!(
        run.sent.len(),
        1 + streams + requests,
        "every stream is logged once"
    );
    assert_eq!(
        run.sent["truth-preflight"].len(),
        4,
        "the preflight's 4 tokens"
    );
    run
}

#[test]
fn ttft_and_e2el_match_the_servers_own_send_times_at_64_streams() {
    let _quiet = exclusive();
    let run = truth_run_at_64_streams("kernel");
    let measured = paired(&run, 1);
    assert_eq!(measured.len(), 256);
    for p in &measured {
        let (id, index) = (&p.record["request_id"], &p.record["index"]);
        assert_eq!(*id, format!("truth-1-{index}"));
    }
    check_latencies("64 streams", &measured);
    check_gaps("64 streams", &measured);
    check_client_delays("64 streams", &measured);
    check_all_reported(&run.result, &measured);
}

#[test]
fn the_user_space_clock_is_held_to_the_same_send_times() {
    let _quiet = exclusive();
    // `--receive-clock user` stamps each chunk when the client reads it: no client delay
    // is recorded, and the error gates still hold (a read late by more than they allow
    // is rare beside two busy loops; the kernel clock removes it altogether).
    let run = truth_run_at_64_streams("user");
    let measured = paired(&run, 1);
    assert!(
        measured
            .iter()
            .all(|p| p.client_delays_ms().iter().all(Option::is_none)),
        "the user-space clock records no client delay"
    );
    check_latencies_within("64 streams, user clock", &measured, USER_CLOCK_LATENCY);
}

/// A `runner sim` of the fixed profile on a free port, in a process of its own, writing
/// its send log; killed when dropped.
struct SimProcess {
    child: std::process::Child,
    url: String,
    log: String,
}

impl SimProcess {
    fn start(dir: &std::path::Path) -> SimProcess {
        let port = free_port();
        let log = dir.join("sent.jsonl").display().to_string();
        let p = port.to_string();
        let args = ["sim", "--port", &p, "--sim-profile", "fixed"];
        let child = spawn_runner(&[&args[..], &["--sim-send-log", &log]].concat());
        wait_until("the simulator to listen", Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        SimProcess {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
        }
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long the client is stopped, out of every [`PAUSE_PERIOD`]: a process the machine
/// deschedules now and then, as a busy one does, while the server keeps sending. Shorter
/// than the fixed profile's 10 ms between chunks: one read returns the bytes of several
/// segments with the kernel's stamp of the last, so a stop that outlasts the gap (10 ms,
/// with the stopper itself a little late on a busy machine) gave a whole wave of streams
/// their second chunk's time for their first (TTFT p90 10.14 ms, once in five loaded runs).
const PAUSED: Duration = Duration::from_millis(6);
const PAUSE_PERIOD: Duration = Duration::from_millis(40);

/// Stops and continues `child` (SIGSTOP, SIGCONT) until it exits, at most `limit`.
fn pause_now_and_then(child: &mut std::process::Child, limit: Duration) {
    let pid = i32::try_from(child.id()).expect("a pid");
    let signal = |sig| assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill failed");
    let start = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() && start.elapsed() < limit {
        std::thread::sleep(PAUSE_PERIOD - PAUSED);
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        signal(libc::SIGSTOP);
        std::thread::sleep(PAUSED);
        signal(libc::SIGCONT);
    }
}

#[cfg(target_os = "linux")]
#[test]
fn the_kernel_clock_keeps_the_clients_own_delay_out_of_its_times() {
    let _quiet = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let sim = SimProcess::start(dir.path());
    let out = dir.path().join("out");
    let out_arg = out.display().to_string();
    let mut client = spawn_runner(&[
        &fixture("truth.rhai"),
        "--target",
        &sim.url,
        "-p",
        "concurrency=16",
        "-p",
        "requests=64",
        "--output",
        &out_arg,
        "-q",
    ]);
    let pipes = Pipes::take(&mut client);
    pause_now_and_then(&mut client, Duration::from_secs(60));
    let code = wait_exit(&mut client, Duration::from_secs(60));
    let (stdout, stderr) = pipes.join();
    assert_eq!(code, Some(0), "{stderr}");
    let result = std::fs::read_to_string(out.join("result.json")).expect("result.json");
    let mut records = records_in(&out);
    records.sort_by_key(|r| r["index"].as_u64().expect("index"));
    let run = Logged {
        stdout,
        result: serde_json::from_str(&result).expect("result is JSON"),
        records,
        sent: send_log(&sim.log),
    };
    let measured = paired(&run, 1);
    assert_eq!(measured.len(), 64);
    // About a sixth of the chunks arrive while the client is stopped: read up to 6 ms late
    // (10 ms where the stopper is late), and timed when they arrived.
    let late = check_client_delays("client stopped now and then", &measured);
    assert!(
        late > 0,
        "no chunk was read late: the pauses did not happen"
    );
    check_latencies("client stopped now and then", &measured);
}

/// Checks that hold only on a quiet machine: the server's own timers on time to 2 ms, and
/// the client's error within 1.5 ms on the mean and 5 ms at p99. Run them with the README's
/// quiet-machine command.
mod quiet_machine {
    use super::*;

    /// P99 send lateness on a quiet machine (release: well under 1 ms; a debug build on
    /// a 2-core VM that stalls a thread for up to ~4 ms now and then: p99 2.26 ms, max
    /// 3.38 ms).
    const QUIET_P99_LATENESS_MS: f64 = 5.0;

    #[test]
    #[ignore = "quiet machine only: see README"]
    fn trace_replay_keeps_the_trace_times_to_the_millisecond() {
        let _quiet = exclusive();
        let (lateness, _) = trace_replay_lateness();
        let p99 = num(&lateness, "p99_ms");
        assert!(
            p99 <= QUIET_P99_LATENESS_MS,
            "p99 send lateness {p99} ms over {QUIET_P99_LATENESS_MS} ms: {lateness}"
        );
    }

    #[test]
    #[ignore = "quiet machine only: see README"]
    fn the_servers_timers_and_the_clients_error_at_64_streams() {
        let _quiet = exclusive();
        let run = truth_run_at_64_streams("kernel");
        let measured = paired(&run, 1);
        let server =
            |chunk: usize| Spread::of(measured.iter().map(|p| p.server_ms[chunk]).collect()).mean;
        // Chunks never leave early, and on time to within the VM's stalls (nominal TTFT
        // 50 ms, E2EL 50 + 63 × 10 = 680 ms).
        let (ttft, e2el) = (server(0), server(63));
        assert!((50.0..52.0).contains(&ttft), "server TTFT {ttft}");
        assert!((680.0..682.0).contains(&e2el), "server E2EL {e2el}");
        let ttft_error = Spread::of(measured.iter().map(|p| p.ttft_error()).collect());
        let e2el_error = Spread::of(measured.iter().map(|p| p.e2el_error()).collect());
        eprintln!("quiet: TTFT error {ttft_error}; E2EL error {e2el_error}");
        // Quiet, release: mean 0.5-1.0 ms, p99 1.5-3.3 ms (the 64 requests of a round
        // leave together and the server stamps them one after another).
        for error in [ttft_error, e2el_error] {
            assert!(
                error.mean <= 1.5 && error.p99 <= 5.0,
                "TTFT error {ttft_error}; E2EL error {e2el_error}"
            );
        }
    }
}
