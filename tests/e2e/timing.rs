//! Timing truth: against the simulator's fixed mode, the measured figures must equal the
//! configured ones.

use crate::support::*;

#[test]
fn fixed_timing_is_measured_exactly() {
    let _quiet = exclusive();
    let (_, r) = run_ok(&[
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
        "-q",
    ]);
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
    assert_eq!(num(&r, "completed"), 64.0);
    assert_eq!(num(&r, "failed"), 0.0);
    assert_eq!(num(&r, "total_output_tokens"), 64.0 * 64.0);
    // Closed loop of 16: never more than 16 in flight, and it does reach 16.
    assert_eq!(num(&r, "max_concurrent_requests"), 16.0);
}

#[test]
fn sweep_ttft_rises_with_the_number_of_prompts() {
    let _quiet = exclusive();
    let (out, r) = run_ok(&[
        &scenario("sweep.rhai"),
        "-p",
        "max_prompts=512",
        "-p",
        "output_tokens=16",
        "-q",
    ]);
    let phases = r["phases"]
        .as_array()
        .expect("a sweep saves one object per phase");
    assert_eq!(phases.len(), 10, "1, 2, 4 … 512 prompts");
    let ttft: Vec<f64> = phases.iter().map(|p| num(p, "mean_ttft_ms")).collect();
    let completed: Vec<f64> = phases.iter().map(|p| num(p, "completed")).collect();
    assert_eq!(
        completed,
        vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0]
    );
    assert!(
        ttft[9] > 4.0 * ttft[0],
        "TTFT should rise with load: {ttft:?}"
    );
    for w in ttft.windows(2).skip(3) {
        assert!(w[1] > w[0], "TTFT should rise from 8 prompts on: {ttft:?}");
    }
    assert_eq!(
        out.matches("============ Serving Benchmark Result ============")
            .count(),
        10
    );
    assert!(
        out.contains("512 prompts"),
        "closing table lists the phases:\n{out}"
    );
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
