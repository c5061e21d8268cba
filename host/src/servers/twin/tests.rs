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
    let (decoded, prefilled): (Vec<_>, Vec<_>) = steps.iter().partition(|s| s.decoding > 0);
    assert_eq!(decoded.len(), 19);
    assert!(decoded
        .iter()
        .all(|s| s.decoding == 3 && s.running == 3 && s.gap_ms == 10.0));
    // The first step only prefilled: timed from the send, all three prompts in it.
    assert_eq!(prefilled.len(), 1);
    assert_eq!(
        (
            prefilled[0].gap_ms,
            prefilled[0].prefill_tokens,
            prefilled[0].running
        ),
        (10.0, 300, 3)
    );
}

/// A step that ended late and the step after it, shorter by as much (as on a loaded
/// machine), are 1 ms apart: a prompt whose first token came with the second is priced
/// in the second only.
#[test]
fn a_first_chunk_counts_in_the_step_it_is_nearest() {
    let mut phase = lockstep(1, 6, 10_000_000);
    // The decoding stream: steps end at 10, 20, 34 (4 ms late), 35, 50, 60 ms.
    phase.requests[0].chunks = [10, 20, 34, 35, 50, 60]
        .iter()
        .map(|&ms| (ms * 1_000_000, 1))
        .collect();
    phase.requests.push(ObservedRequest {
        sent_ns: 25_000_000,
        chunks: vec![(35_000_000, 1), (50_000_000, 1)],
        end_ns: 50_000_001,
        new_prompt_tokens: 500,
        output_tokens: 2,
        server_prompt_ms: None,
    });
    let steps = steps::of(&phase);
    let priced: Vec<(f64, u64)> = steps
        .iter()
        .filter(|s| s.prefill_tokens > 0 && s.decoding > 0)
        .map(|s| (s.gap_ms, s.prefill_tokens))
        .collect();
    assert_eq!(priced, [(1.0, 500)]);
}

/// From idle, a step that only prefilled began when its request was sent, not when the
/// stream before it ended.
#[test]
fn a_step_that_only_prefilled_from_idle_is_timed_from_the_send() {
    let mut phase = lockstep(2, 4, 10_000_000);
    phase.requests[1].sent_ns = 100_000_000;
    phase.requests[1].chunks = (0..4).map(|k| (130_000_000 + k * 10_000_000, 1)).collect();
    phase.requests[1].end_ns = 160_000_001;
    let alone: Vec<f64> = steps::of(&phase)
        .iter()
        .filter(|s| s.decoding == 0)
        .map(|s| s.gap_ms)
        .collect();
    assert_eq!(alone, [10.0, 30.0]);
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
