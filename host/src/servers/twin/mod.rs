//! `runner calibrate`'s fitting: the `default` profile's engine model (step time =
//! fixed cost + cost per decoding sequence + cost per prefilled prompt token, a FIFO
//! queue in front of `max_seqs` slots) fitted from what a real run's records show.
//!
//! - `steps`: every engine step the records reveal (a gap between two chunks of one
//!   stream, or a group of first chunks with no stream decoding), with the sequences
//!   decoding and the prompt tokens prefilled in it.
//! - `ols`: the step-time least squares (nalgebra's SVD).
//! - `curve`: the decode cost as a curve of the batch size, where the line misfits.
//! - `limits`: the concurrency limit and the KV capacity.

mod curve;
mod limits;
mod ols;
mod steps;

use std::collections::BTreeMap;

use crate::servers::sim::twin_file::{TwinEngine, TwinFile, TwinRun, TWIN_FORMAT};

/// The token budget of a step when no run shows chunked prefill: vLLM's default for
/// online serving, raised to fit the largest prompt seen so no prompt is chunked.
const MAX_BATCHED_TOKENS: usize = 8192;

/// One request as the fit needs it (from a requests.jsonl record that succeeded).
#[derive(Clone, Debug, Default)]
pub struct ObservedRequest {
    /// When it was sent, ns since its phase started.
    pub sent_ns: u64,
    /// Its content chunks: (arrival ns since the phase started, tokens).
    pub chunks: Vec<(u64, u32)>,
    pub end_ns: u64,
    /// Prompt tokens the server had to compute (input − cached).
    pub new_prompt_tokens: u64,
    pub output_tokens: u64,
    /// The server's own time for the prompt, ms, where it gives one (llama.cpp's
    /// `timings.prompt_ms`).
    pub server_prompt_ms: Option<f64>,
}

/// One phase of a run.
#[derive(Clone, Debug, Default)]
pub struct ObservedPhase {
    pub name: String,
    pub requests: Vec<ObservedRequest>,
    /// The server's gauges while it ran.
    pub gauges: Gauges,
}

/// The server's own gauges over a phase (server_metrics.jsonl), where scraped.
#[derive(Clone, Debug, Default)]
pub struct Gauges {
    /// The running-requests gauge's name and its largest value.
    pub max_running: Option<(String, f64)>,
    /// The waiting-requests gauge's largest value.
    pub max_waiting: Option<f64>,
    /// The KV-use gauge's name, and (running, KV fraction) at each scrape with both > 0.
    pub kv: Option<(String, Vec<(f64, f64)>)>,
}

/// One run directory.
#[derive(Clone, Debug, Default)]
pub struct ObservedRun {
    pub path: String,
    pub request_digest: String,
    pub phases: Vec<ObservedPhase>,
}

/// Why the runs cannot give a twin: which parameter, and what run would determine it.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("cannot fit {parameter}: {why}; {remedy}")]
    Undetermined {
        parameter: &'static str,
        why: String,
        remedy: &'static str,
    },
}

/// Fits the twin's engine from `runs`.
pub fn fit(runs: &[ObservedRun]) -> Result<TwinFile, FitError> {
    let phases: Vec<&ObservedPhase> = runs.iter().flat_map(|r| &r.phases).collect();
    let observed: Vec<steps::EngineStep> = phases.iter().flat_map(|p| steps::of(p)).collect();
    let step = ols::fit_steps(&observed)?;
    let gauges: Vec<&Gauges> = phases.iter().map(|p| &p.gauges).collect();
    let limit = limits::concurrency(&observed, &gauges)?;
    let largest = phases
        .iter()
        .flat_map(|p| &p.requests)
        .map(|r| (r.new_prompt_tokens + r.output_tokens) as usize)
        .max()
        .unwrap_or(1);
    let kv = limits::kv_capacity(&phases, &gauges, limit.max_seqs, largest);
    let largest_prompt = phases
        .iter()
        .flat_map(|p| &p.requests)
        .map(|r| r.new_prompt_tokens as usize)
        .max()
        .unwrap_or(0);
    let max_batched_tokens = MAX_BATCHED_TOKENS.max(largest_prompt).max(limit.max_seqs);
    let mut sources = step.sources.clone();
    sources.insert("max_seqs".into(), limit.source);
    sources.insert("kv_tokens".into(), kv.source);
    sources.insert(
        "max_batched_tokens".into(),
        format!("not fitted: {MAX_BATCHED_TOKENS} (vLLM's online default) or the largest new prompt seen ({largest_prompt} tokens in requests.jsonl's input_tokens − cached_prompt_tokens), so no observed prompt is chunked"),
    );
    Ok(TwinFile {
        format: TWIN_FORMAT,
        engine: TwinEngine {
            max_seqs: limit.max_seqs,
            max_seqs_lower_bound: limit.lower_bound,
            max_batched_tokens,
            kv_tokens: kv.tokens,
            prefill_us_per_token: step.prefill_us_per_token,
            decode_step_ms: step.decode_step_ms,
            decode_us_per_seq: step.decode_us_per_seq,
            decode_curve: step.decode_curve,
        },
        sources,
        fit: step.quality,
        runs: runs.iter().map(run_source).collect(),
        holdout: Vec::new(),
    })
}

fn run_source(r: &ObservedRun) -> TwinRun {
    TwinRun {
        path: r.path.clone(),
        request_digest: r.request_digest.clone(),
        phases: r.phases.iter().map(|p| p.name.clone()).collect(),
    }
}

/// Sources keyed by parameter, for the fits that fill several.
type Sources = BTreeMap<String, String>;

#[cfg(test)]
mod tests;
