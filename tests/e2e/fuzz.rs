//! The scenario boundary under random input: tests/fixtures/scenarios/fuzz_boundary.rhai
//! and its Wasm twin tests/guests/fuzz_boundary draw every value they give the runner
//! (phases, arrivals, requests, gaps, stop and next-phase results, errors) from the run's
//! seed, of every type, in and out of range. Each seed must run (exit 0) or end with
//! exactly one `error:` line (exit 1): never a panic, an abort, a hang or a second line.
//! `RUNNER_FUZZ_CASES=N` runs more seeds than CI's 20 per kind.

use std::time::Duration;

use crate::support::{exclusive, fixture, spawn_runner, wait_exit, Pipes};

/// What one seed did; `Err` says what went wrong.
fn case(scenario: &str, seed: u64) -> Result<bool, String> {
    let seed_arg = seed.to_string();
    let mut child = spawn_runner(&[
        scenario,
        "--seed",
        &seed_arg,
        "--drain-timeout",
        "1s",
        "--request-timeout",
        "5s",
        "--sim-profile",
        "zero",
    ]);
    let pipes = Pipes::take(&mut child);
    let code = wait_exit(&mut child, Duration::from_secs(60));
    let (_, err) = pipes.join();
    let errors = err.lines().filter(|l| l.starts_with("error:")).count();
    let crashed = err.contains("panicked") || err.contains("RUST_BACKTRACE");
    match code {
        Some(0) if errors == 0 && !crashed => Ok(true),
        Some(1) if errors == 1 && !crashed => Ok(false),
        _ => Err(format!(
            "seed {seed}: exit {code:?}, {errors} error lines:\n{err}"
        )),
    }
}

fn fuzz(scenario: &str) {
    // Forty runs back to back are heavy: not beside the tests that time an engine.
    let _quiet = exclusive();
    let cases: u64 = std::env::var("RUNNER_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let (mut ran, mut refused, mut broken) = (0, 0, Vec::new());
    for seed in 0..cases {
        match case(scenario, seed) {
            Ok(true) => ran += 1,
            Ok(false) => refused += 1,
            Err(e) => broken.push(e),
        }
    }
    eprintln!(
        "fuzz {scenario}: {cases} seeds, {ran} ran, {refused} refused with one line, {} broken",
        broken.len()
    );
    assert!(broken.is_empty(), "{}", broken.join("\n---\n"));
    // The draws reach both outcomes, so the fixture is not vacuous.
    assert!(ran > 0 && refused > 0, "ran {ran}, refused {refused}");
}

#[test]
fn random_rhai_answers_run_or_fail_with_one_clear_line() {
    fuzz(&fixture("fuzz_boundary.rhai"));
}

#[test]
fn random_wit_values_run_or_fail_with_one_clear_line() {
    fuzz(&crate::wasm::component("fuzz_boundary"));
}
