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
}

pub struct Kv {
    pub tokens: usize,
    pub source: String,
}

/// The most sequences seen in one step, when the runs show requests queued behind them;
/// else the running gauge's peak when the waiting gauge shows a queue.
pub fn concurrency(steps: &[EngineStep], gauges: &[&Gauges]) -> Result<Fitted, FitError> {
    let queued = steps.iter().filter(|s| s.in_flight > s.running).count();
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
    if queued >= MIN_QUEUED_STEPS && most > 0 {
        return Ok(Fitted {
            max_seqs: most,
            source: format!("the most sequences in one step (decoding + prefilled, from requests.jsonl's chunk times) while requests waited: {queued} of {} steps had more streams sent than running{gauge_words}", steps.len()),
        });
    }
    let waited = gauges.iter().filter_map(|g| g.max_waiting).any(|w| w > 0.0);
    if let (true, Some((name, v))) = (waited, &gauge) {
        return Ok(Fitted {
            max_seqs: (v.round() as usize).max(1),
            source: format!("the peak of server_metrics.jsonl's {name} ({v}) in runs whose waiting gauge rose above 0"),
        });
    }
    Err(FitError::Undetermined {
        parameter: "max_seqs",
        why: format!("no request waited for a slot (at most {most} sequences ran at once, and every request sent was running)"),
        remedy: "add a run with more requests in flight than the server runs at once (max_concurrency above its --max-num-seqs or slot count)",
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
