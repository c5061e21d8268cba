//! Timing truth: against the simulator's fixed mode and its own send log, the measured
//! figures are the server's, request by request, within the client's own error
//! (`client_error.rs` of tests/timing); the nominal figures, which only a quiet machine
//! keeps, in `quiet_machine`.

use crate::client_error::*;
use crate::support::*;

/// 64 requests of 64 tokens in a closed loop of 16 on the fixed profile (TTFT 50 ms,
/// 10 ms gaps), with no warm-up: the connections are opened ahead of the phase.
fn fixed_run() -> Logged {
    let run = run_logged(&[
        &fixture("fixed.rhai"),
        "--sim-profile",
        "fixed",
        "--sim-ttft-ms",
        "50",
        "--sim-itl-ms",
        "10",
        "-p",
        "requests=64",
        "-p",
        "output_tokens=64",
        "-p",
        "concurrency=16",
        "--percentiles",
        "50,99",
        "-q",
    ]);
    let r = &run.result;
    assert_eq!(num(r, "completed"), 64.0);
    assert_eq!(num(r, "failed"), 0.0);
    assert_eq!(num(r, "total_output_tokens"), 64.0 * 64.0);
    // Closed loop of 16: never more than 16 in flight, and it does reach 16.
    assert_eq!(num(r, "max_concurrent_requests"), 16.0);
    run
}

#[test]
fn fixed_timing_is_the_servers_send_times() {
    let _quiet = exclusive();
    let run = fixed_run();
    let measured = paired(&run, 0);
    assert_eq!(measured.len(), 64);
    check_latencies("16 streams", &measured);
    check_gaps("16 streams", &measured);
    check_client_delays("16 streams", &measured);
    check_all_reported(&run.result, &measured);
}

/// The sweep up to 512 prompts at once, 16 tokens each, on the default (batching) profile.
fn sweep_run() -> Logged {
    let run = run_logged(&[
        &scenario("sweep.rhai"),
        "-p",
        "max_prompts=512",
        "-p",
        "output_tokens=16",
        "-q",
    ]);
    let phases = run.result["phases"]
        .as_array()
        .expect("a sweep saves one object per phase");
    assert_eq!(phases.len(), 10, "1, 2, 4 … 512 prompts");
    let completed: Vec<f64> = phases.iter().map(|p| num(p, "completed")).collect();
    assert_eq!(
        completed,
        vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0]
    );
    assert_eq!(
        run.stdout
            .matches("============ Serving Benchmark Result ============")
            .count(),
        10
    );
    assert!(
        run.stdout.contains("512 prompts"),
        "closing table lists the phases:\n{}",
        run.stdout
    );
    run
}

/// How far above the server's a phase's median TTFT may read in a burst: as in a closed
/// loop ([`LATENCY`]). The server takes the burst's requests one after another, but its
/// log counts each from the kernel's receipt of its bytes, not from when its thread got to
/// it (beside two busy loops: median 0.007-0.04 ms at every size up to 512; before the
/// server's log counted from the kernel's receipt, 5-15 ms at 512).
const BURST_MEDIAN_ERROR_MS: f64 = LATENCY.median_ms;

#[test]
fn sweep_ttft_rises_with_the_number_of_prompts() {
    let _quiet = exclusive();
    let run = sweep_run();
    // The server's own TTFT, phase by phase, from its send log: the model queues the
    // prompts of a burst, and the client reads each phase's rise as the server had it.
    let mut server_ttft = Vec::new();
    for phase in 0..10 {
        let measured = paired(&run, phase);
        let server = Spread::of(measured.iter().map(|p| p.server_ms[0]).collect());
        let error = Spread::of(measured.iter().map(Paired::ttft_error).collect());
        eprintln!(
            "{} prompts: server TTFT {server}; client minus server {error}",
            measured.len()
        );
        assert!(
            error.min >= FLOOR_MS && error.median <= BURST_MEDIAN_ERROR_MS,
            "phase {phase}: client TTFT minus the server's {error}"
        );
        server_ttft.push(server.mean);
    }
    assert!(
        server_ttft[9] > 4.0 * server_ttft[0],
        "TTFT should rise with load: {server_ttft:?}"
    );
    for w in server_ttft.windows(2).skip(3) {
        assert!(
            w[1] > w[0],
            "TTFT should rise from 8 prompts on: {server_ttft:?}"
        );
    }
}

#[test]
fn a_scenario_stop_ends_the_phase_at_once() {
    // Requests are generated up to 256 ahead; none of those may go out after the stop.
    let (out, r) = run_ok(&[
        &fixture("adaptive_stop.rhai"),
        "--sim-profile",
        "fixed",
        "-q",
    ]);
    let completed = num(&r, "completed");
    assert!(
        (12.0..150.0).contains(&completed),
        "completed {completed}, expected a stop soon after 12 answers:\n{out}"
    );
    assert_eq!(
        num(&r, "failed"),
        0.0,
        "in-flight requests drain instead of being cut"
    );
    assert!(
        out.contains("Phase ended: the scenario's stop condition held."),
        "{out}"
    );
}

/// The same runs held to the nominal timetable and to the client's own rise of TTFT,
/// which only a quiet machine keeps. Run them with the README's quiet-machine command.
mod quiet_machine {
    use super::*;

    #[test]
    #[ignore = "quiet machine only: see README"]
    fn fixed_timing_is_measured_exactly() {
        let _quiet = exclusive();
        let r = fixed_run().result;
        let (ttft, tpot, itl) = (
            num(&r, "mean_ttft_ms"),
            num(&r, "mean_tpot_ms"),
            num(&r, "mean_itl_ms"),
        );
        assert!(
            (ttft - 50.0).abs() <= 2.0,
            "mean TTFT {ttft} ms, want 50 ± 2"
        );
        assert!(
            (tpot - 10.0).abs() <= 0.5,
            "mean TPOT {tpot} ms, want 10 ± 0.5"
        );
        assert!(
            (itl - 10.0).abs() <= 0.5,
            "mean ITL {itl} ms, want 10 ± 0.5"
        );
    }

    #[test]
    #[ignore = "quiet machine only: see README"]
    fn the_clients_sweep_ttft_rises_with_the_number_of_prompts() {
        let _quiet = exclusive();
        let run = sweep_run();
        let phases = run.result["phases"].as_array().expect("phases");
        let ttft: Vec<f64> = phases.iter().map(|p| num(p, "mean_ttft_ms")).collect();
        assert!(
            ttft[9] > 4.0 * ttft[0],
            "TTFT should rise with load: {ttft:?}"
        );
        for w in ttft.windows(2).skip(3) {
            assert!(w[1] > w[0], "TTFT should rise from 8 prompts on: {ttft:?}");
        }
    }
}
