//! Host functions have budgets: a scenario asking the host for more than one call may
//! produce (text of u32::MAX tokens, a log message of megabytes) gets one `error:` line
//! naming the function and the limit, fast, instead of crashing or exhausting the runner.
//! Rhai scripts and Wasm components (the sandbox probe of tests/guests) alike.

use std::process::Output;
use std::time::{Duration, Instant};

use crate::support::{runner, stderr};
use crate::wasm::component;

/// A Rhai scenario whose requests are `synthetic_text(count)`.
fn greedy_script(dir: &tempfile::TempDir, count: &str) -> String {
    let path = dir.path().join("greedy.rhai");
    std::fs::write(
        &path,
        format!(
            r#"fn describe() {{ #{{ name: "greedy", params: [] }} }}
fn phases() {{ [#{{ name: "main", arrival: #{{ process: "burst" }}, max_requests: 2 }}] }}
fn next_request(phase, index) {{ #{{ prompt: synthetic_text({count}), max_tokens: 4 }} }}
"#
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// Exit 1 with exactly one `error:` line, which holds every one of `wanted`, and no
/// sign of a panic or an abort.
fn assert_one_clean_error(out: &Output, wanted: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    for w in wanted {
        assert!(errors[0].contains(w), "`{w}` missing from: {}", errors[0]);
    }
    for bad in ["panicked", "memory allocation", "abort", "RUST_BACKTRACE"] {
        assert!(!err.contains(bad), "`{bad}` in: {err}");
    }
}

/// Runs `args` and checks it ended within a bound that only a refusal before the work
/// meets (the work itself took 10 s to minutes); not a performance figure.
fn run_bounded(args: &[&str]) -> Output {
    let start = Instant::now();
    let out = runner(args);
    let took = start.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
    out
}

#[test]
fn rhai_synthetic_text_of_a_trillion_tokens_is_refused_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    for count in ["1000000000000", "2000000000"] {
        let script = greedy_script(&dir, count);
        let out = run_bounded(&[&script, "--sim-profile", "zero"]);
        assert_one_clean_error(
            &out,
            &[
                "greedy.rhai",
                "next_request",
                &format!("synthetic_text({count})"),
                "over the limit of 4194304 tokens per call",
            ],
        );
    }
}

#[test]
fn rhai_synthetic_text_of_a_negative_count_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let script = greedy_script(&dir, "-5");
    let out = run_bounded(&[&script, "--sim-profile", "zero"]);
    assert_one_clean_error(&out, &["synthetic_text(-5): need a count >= 0"]);
}

#[test]
fn wasm_text_of_u32_max_tokens_is_refused_naming_the_function() {
    let probe = component("sandbox_probe");
    for (attack, function, limit) in [
        ("synthetic", "synthetic-text(4294967295)", "4194304"),
        ("random-text", "random-token-text(4294967295)", "1048576"),
    ] {
        let out = run_bounded(&[&probe, "-p", &format!("attack={attack}")]);
        assert_one_clean_error(
            &out,
            &[
                "sandbox_probe.wasm",
                "`next-request`",
                function,
                &format!("over the limit of {limit} tokens per call"),
            ],
        );
    }
}

#[test]
fn wasm_host_calls_count_toward_the_call_time_limit() {
    // The guest asks for text in a loop: host time is where the call spends its second.
    let probe = component("sandbox_probe");
    let out = run_bounded(&[&probe, "-p", "attack=host-loop"]);
    assert_one_clean_error(
        &out,
        &["`next-request`", "ran longer than 1.0 s and was stopped"],
    );
}

#[test]
fn wasm_stack_overflow_is_reported_as_one() {
    let probe = component("sandbox_probe");
    let out = run_bounded(&[&probe, "-p", "attack=stack"]);
    assert_one_clean_error(&out, &["`next-request`", "overflowed its stack"]);
    assert!(!stderr(&out).contains("out of bounds"), "{}", stderr(&out));
}

#[test]
fn wasm_log_messages_are_cut_to_their_budget() {
    // Five 10 MB messages: each printed as 4 KiB and a marker; the run goes on.
    let probe = component("sandbox_probe");
    let out = run_bounded(&[&probe, "-p", "attack=log", "--sim-profile", "zero"]);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        &err[..err.len().min(2000)]
    );
    assert!(err.len() < 64 << 10, "{} bytes of stderr", err.len());
    assert_eq!(
        err.matches("[truncated: the message was 10485760 bytes]")
            .count(),
        5,
        "{}",
        &err[..err.len().min(2000)]
    );
}

/// Host calls count toward a Rhai call's wall-clock limit (10 s for a request hook): a
/// loop of large `synthetic_text` calls, each one operation, is stopped there instead of
/// running for as long as it likes within the operation limit.
#[test]
fn rhai_host_calls_count_toward_the_call_time_limit() {
    // Ten seconds of host calls at full speed: not beside the tests that time an engine.
    let _quiet = crate::support::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slow.rhai");
    std::fs::write(
        &path,
        r#"fn describe() { #{ name: "slow", params: [] } }
fn phases() { [#{ name: "main", arrival: #{ process: "burst" }, max_requests: 1 }] }
fn next_request(phase, index) {
    let n = 0;
    loop { n += synthetic_text(100000).len(); }
}
"#,
    )
    .unwrap();
    let start = Instant::now();
    let out = runner(&[&path.display().to_string(), "--sim-profile", "zero"]);
    let took = start.elapsed();
    assert_one_clean_error(
        &out,
        &["next_request", "longer than 10 s", "host calls included"],
    );
    // Bounded: the limit plus at most a few host calls, not the minutes the loop wants.
    assert!(took < Duration::from_secs(60), "took {took:?}");
}
