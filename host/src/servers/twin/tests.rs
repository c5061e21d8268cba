use super::*;

/// `streams` requests sent at 0 that decode in lockstep: steps of `step_ns`, the first
/// step prefilling them all.
fn lockstep(streams: usize, steps: u64, step_ns: u64) -> ObservedPhase {
    let requests = (0..streams)
        .map(|_| ObservedRequest {
            sent_ns: 0,
            chunks: (1..=steps).map(|k| (k * step_ns, 1)).collect(),
            end_ns: steps * step_ns + 1,
            new_prompt_tokens: 100,
            output_tokens: steps,
            server_prompt_ms: None,
        })
        .collect();
    ObservedPhase {
        name: "p".into(),
        requests,
        gauges: Gauges::default(),
    }
}

#[test]
fn steps_count_the_streams_decoding_once_each() {
    let steps = steps::of(&lockstep(3, 20, 10_000_000));
    assert_eq!(steps.len(), 19);
    assert!(steps
        .iter()
        .all(|s| s.decoding == 3 && s.running == 3 && s.gap_ms == 10.0));
}

#[test]
fn one_load_point_is_refused_naming_the_run_that_would_do() {
    let run = ObservedRun {
        path: "r".into(),
        phases: vec![lockstep(4, 40, 9_000_000)],
        ..ObservedRun::default()
    };
    let e = fit(&[run]).expect_err("one load point").to_string();
    assert!(e.contains("decode_us_per_seq"), "{e}");
    assert!(e.contains("second load point"), "{e}");
    assert!(!e.contains('\n'), "{e}");
}
