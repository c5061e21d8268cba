//! The concurrency limit (the most sequences the engine runs at once; the rest wait in
//! FIFO order) and the KV capacity, from the steps and the server's gauges.

use super::steps::EngineStep;
use super::{FitError, Gauges, ObservedPhase};

/// Steps with a request waiting for a slot, fewer than this, are a client's hiccup rather
/// than a queue.
const MIN_QUEUED_STEPS: usize = 3;

pub struct Fitted {
    pub max_seqs: usize,
    pub source: String,
    /// No request ever waited: `max_seqs` is the most that ran at once, a lower bound of
    /// the engine's limit, not the limit.
    pub lower_bound: bool,
}

pub struct Kv {
    pub tokens: usize,
    pub source: String,
}

/// A count of sequences seen in fewer steps than this is a misread step, not the limit:
/// on a loaded machine a finished stream's last chunk and its successor's first one can
/// fall into one step (5 sequences against llama.cpp's 4 slots, once). A limit the engine
/// reached holds for many steps, since its streams decode side by side for their whole
/// answers (4 slots: 40 of 1543 steps on a quiet run whose queue was short), as the
/// decode curve's knots need as many (`MIN_KNOT_STEPS`, `curve.rs`).
const MIN_STEPS_AT_LIMIT: usize = 5;

/// The largest count of sequences that at least [`MIN_STEPS_AT_LIMIT`] steps reached.
fn limit_reached(steps: &[EngineStep]) -> usize {
    let mut running: Vec<usize> = steps.iter().map(|s| s.running).collect();
    running.sort_unstable_by(|a, b| b.cmp(a));
    running
        .get(MIN_STEPS_AT_LIMIT - 1)
        .or(running.last())
        .copied()
        .unwrap_or(0)
}

/// The most sequences run in one step (in [`MIN_STEPS_AT_LIMIT`] steps at least), when
/// the runs show requests queued behind them; else the running gauge's peak when the
/// waiting gauge shows a queue.
pub fn concurrency(steps: &[EngineStep], gauges: &[&Gauges]) -> Result<Fitted, FitError> {
    let queued = steps.iter().filter(|s| s.in_flight > s.running).count();
    let limit = limit_reached(steps);
    // A request waited for a slot only where the slots were full: in a burst on a busy
    // client, requests sent a moment apart reach the engine in different steps, and a
    // step before the last of them arrived shows more sent than running with slots free
    // (64 prompts at once against 256 slots read as a limit of 64).
    let at_limit = steps
        .iter()
        .filter(|s| s.in_flight > s.running && s.running >= limit)
        .count();
    let most = steps.iter().map(|s| s.running).max().unwrap_or(0);
    let gauge = gauges.iter().filter_map(|g| g.max_running.as_ref()).fold(
        None::<(String, f64)>,
        |best, (name, v)| match best {
            Some((_, b)) if b >= *v => best,
            _ => Some((name.clone(), *v)),
        },
    );
    let gauge_words = match &gauge {
        Some((name, v)) => format!("; server_metrics.jsonl's {name} peaked at {v}"),
        None => String::new(),
    };
    // The server's own running gauge above the steps' limit proves it a misread: on a
    // busy client, late chunks fall into the wrong steps (16 in flight against 256 slots
    // once read as a limit of 8 while the gauge showed 16).
    let contradicted = gauge.as_ref().is_some_and(|(_, v)| *v > limit as f64);
    if at_limit >= MIN_QUEUED_STEPS && limit > 0 && !contradicted {
        return Ok(Fitted {
            max_seqs: limit,
            source: format!("the most sequences run in {MIN_STEPS_AT_LIMIT} steps at least (decoding + prefilled, from requests.jsonl's chunk times), while requests waited: {queued} of {} steps had more streams sent than running (at most {most} in one step){gauge_words}", steps.len()),
            lower_bound: false,
        });
    }
    let waited = gauges.iter().filter_map(|g| g.max_waiting).any(|w| w > 0.0);
    if let (true, Some((name, v))) = (waited, &gauge) {
        return Ok(Fitted {
            max_seqs: (v.round() as usize).max(1),
            source: format!("the peak of server_metrics.jsonl's {name} ({v}) in runs whose waiting gauge rose above 0"),
            lower_bound: false,
        });
    }
    // No queue: the runs show how many ran at once, not how many could. The rest of the
    // fit stands; the limit is stated as the bound it is.
    let peak = gauge.as_ref().map_or(0, |(_, v)| v.round() as usize);
    // What many steps ran, not the one step that ran most: a finished stream's last chunk
    // and its successor's first can share a misread step (17 of 16 in flight, once).
    let bound = limit.max(peak).max(1);
    Ok(Fitted {
        max_seqs: bound,
        source: format!("≥ {bound}, never reached: a lower bound, not the limit; no request waited for a slot (at most {most} sequences ran at once in requests.jsonl's chunk times, and no step that ran that many had more requests sent){gauge_words}; the twin runs {bound} at once and queues the rest, so beyond {bound} in flight its queueing is a guess: a run with more requests in flight than the server runs at once (max_concurrency above its --max-num-seqs or slot count) fits the limit itself"),
        lower_bound: true,
    })
}

/// From the KV-use gauge: the tokens the running requests hold over the share of the
/// cache they fill; without one, a capacity that never limits admission.
pub fn kv_capacity(
    phases: &[&ObservedPhase],
    gauges: &[&Gauges],
    max_seqs: usize,
    largest: usize,
) -> Kv {
    let reqs: Vec<_> = phases.iter().flat_map(|p| &p.requests).collect();
    let per_request = if reqs.is_empty() {
        0.0
    } else {
        reqs.iter()
            .map(|r| (r.new_prompt_tokens + r.output_tokens) as f64)
            .sum::<f64>()
            / reqs.len() as f64
    };
    let mut estimates: Vec<f64> = Vec::new();
    let mut name = String::new();
    for (n, samples) in gauges.iter().filter_map(|g| g.kv.as_ref()) {
        name = n.clone();
        estimates.extend(
            samples
                .iter()
                .map(|(running, frac)| running * per_request / frac),
        );
    }
    estimates.retain(|e| e.is_finite() && *e >= 1.0);
    estimates.sort_by(f64::total_cmp);
    match estimates.get(estimates.len() / 2) {
        Some(&median) if per_request > 0.0 => Kv {
            tokens: (median.round() as usize).max(largest),
            source: format!("median over {} scrapes of running requests × their mean prompt + output tokens ({per_request:.0}) / server_metrics.jsonl's {name}; an estimate: engines that reserve less than prompt + output per request read larger", estimates.len()),
        },
        _ => Kv {
            tokens: max_seqs.saturating_mul(largest).max(1),
            source: format!("not observed (no KV-use gauge in server_metrics.jsonl): max_seqs × the largest prompt + output seen ({largest}), so it never limits admission; fit it from a run with --server-metrics whose KV use nears full"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step of `running` sequences with `waiting` more requests sent.
    fn step(running: usize, waiting: usize) -> EngineStep {
        EngineStep {
            gap_ms: 10.0,
            decoding: running,
            prefill_tokens: 0,
            running,
            in_flight: running + waiting,
        }
    }

    #[test]
    fn the_limit_is_what_many_steps_ran_and_a_few_misread_steps_are_not() {
        let mut steps: Vec<EngineStep> = (0..40).map(|_| step(4, 0)).collect();
        steps.extend((0..200).map(|_| step(3, 1)));
        steps.extend((0..1000).map(|_| step(1, 0)));
        steps.extend((0..4).map(|_| step(5, 1)));
        let fitted = concurrency(&steps, &[]).expect("fitted");
        assert_eq!(fitted.max_seqs, 4);
        assert!(
            fitted.source.contains("204 of 1244 steps"),
            "{}",
            fitted.source
        );
        assert!(
            fitted.source.contains("at most 5 in one step"),
            "{}",
            fitted.source
        );
        steps.push(step(5, 0));
        assert_eq!(concurrency(&steps, &[]).expect("fitted").max_seqs, 5);
    }

    #[test]
    fn requests_sent_while_slots_were_free_are_no_queue() {
        // A burst of 64 whose requests reached the engine over three steps.
        let mut steps = vec![step(20, 44), step(50, 14), step(63, 1)];
        steps.extend((0..100).map(|_| step(64, 0)));
        let fitted = concurrency(&steps, &[]).expect("a bound");
        assert_eq!((fitted.max_seqs, fitted.lower_bound), (64, true));
    }

    #[test]
    fn a_running_gauge_above_the_steps_limit_makes_it_a_bound() {
        let mut steps: Vec<EngineStep> = (0..50).map(|_| step(8, 8)).collect();
        steps.extend((0..50).map(|_| step(4, 12)));
        let gauges = Gauges {
            max_running: Some(("vllm:num_requests_running".into(), 16.0)),
            max_waiting: Some(0.0),
            kv: None,
        };
        let fitted = concurrency(&steps, &[&gauges]).expect("a bound");
        assert_eq!((fitted.max_seqs, fitted.lower_bound), (16, true));
    }

    #[test]
    fn no_queue_gives_the_most_seen_as_a_lower_bound() {
        let steps: Vec<EngineStep> = (0..100).map(|_| step(3, 0)).collect();
        let fitted = concurrency(&steps, &[]).expect("a bound, not a refusal");
        assert_eq!(fitted.max_seqs, 3);
        assert!(fitted.lower_bound);
        assert!(
            fitted.source.starts_with("≥ 3, never reached"),
            "{}",
            fitted.source
        );
    }
}
