//! The step-time least squares (every cost at least 0): gap = decode_step + decode_per_seq × decoding +
//! prefill_per_token × prefill tokens, solved with nalgebra's SVD, refitted once without
//! the steps a stalled client or server stretched (residual over [`OUTLIER_MADS`] times
//! the median absolute residual). Refuses when the steps cannot separate a term.

use nalgebra::{DMatrix, DVector};

use super::curve;
use super::steps::EngineStep;
use super::{FitError, Sources};
use crate::servers::sim::decode_curve::Knot;
use crate::servers::sim::twin_file::FitQuality;

/// Fewer steps than this fit nothing worth a twin.
const MIN_STEPS: usize = 10;
/// Fewer prefill steps than this cannot price a prompt token.
const MIN_PREFILL_STEPS: usize = 3;
/// A step further than this many median absolute residuals from the first fit is left out,
const OUTLIER_MADS: f64 = 6.0;
/// or than this share of the median step, whichever is larger (a fit as close as the
/// simulator's has residuals of microseconds, and its timer jitter is no outlier),
const OUTLIER_SHARE: f64 = 0.05;
/// or, for a step that prefilled, than this share of its own fitted time: a prefill step
/// of a real engine lasts tens of decode steps, and its few-percent noise is many decode
/// steps' residuals. Not for decode steps: a 9 ms step stretched 4 ms by a busy machine
/// would then stay in the fit.
const OUTLIER_OWN_SHARE: f64 = 0.5;
/// Prefill tokens enter the matrix in thousands, so its columns are of like size.
const TOKENS_SCALE: f64 = 1000.0;

pub struct StepFit {
    pub prefill_us_per_token: f64,
    pub decode_step_ms: f64,
    pub decode_us_per_seq: f64,
    /// The decode cost by batch size, where the line above does not describe the engine.
    pub decode_curve: Option<Vec<Knot>>,
    pub quality: FitQuality,
    pub sources: Sources,
}

pub fn fit_steps(steps: &[EngineStep]) -> Result<StepFit, FitError> {
    check_identifiable(steps)?;
    let first = solve(steps);
    let residuals: Vec<f64> = steps
        .iter()
        .map(|s| s.gap_ms - predict(&first, s))
        .collect();
    let mut abs: Vec<f64> = residuals.iter().map(|r| r.abs()).collect();
    abs.sort_by(f64::total_cmp);
    let mut gaps: Vec<f64> = steps.iter().map(|s| s.gap_ms).collect();
    gaps.sort_by(f64::total_cmp);
    let bound = (OUTLIER_MADS * abs[abs.len() / 2]).max(OUTLIER_SHARE * gaps[gaps.len() / 2]);
    let kept: Vec<EngineStep> = steps
        .iter()
        .zip(&residuals)
        .filter(|(s, r)| r.abs() <= bound_of(s, bound, &first))
        .map(|(s, _)| s.clone())
        .collect();
    let kept = if kept.len() >= MIN_STEPS {
        kept
    } else {
        steps.to_vec()
    };
    let beta = solve(&kept);
    let [step_ms, per_seq_ms, per_ktoken_ms] = beta;
    let curve = curve::fit(&kept, |d| step_ms + per_seq_ms * d as f64);
    let quality = match &curve {
        Some(c) => quality(&kept, |s| curve_predict(c, &beta, s)),
        None => quality(&kept, |s| predict(&beta, s)),
    };
    let dropped = steps.len() - kept.len();
    let how = format!(
        "least squares with non-negative costs (nalgebra SVD) of {} steps' times on decoding sequences and prefilled tokens ({dropped} stretched steps left out)",
        kept.len()
    );
    let mut sources = Sources::from([
        ("decode_step_ms".into(), format!("intercept of the {how}; a step is the gap between two chunks of one stream in requests.jsonl (chunks[].t_ns), its decoding sequences the streams with a chunk at its end")),
        ("decode_us_per_seq".into(), format!("slope on decoding sequences of the {how}")),
        ("prefill_us_per_token".into(), format!("slope on prefilled tokens of the {how}; a stream's prompt is prefilled in the step its first chunk ends (input_tokens − cached_prompt_tokens, or server_timings.prompt_n), a step that only prefilled timed from the chunk before it or, from idle, from its first request's sent_ns, a step the server's server_timings.prompt_ms times where every record has it (llama.cpp)")),
    ]);
    let decode_curve = curve.map(|c| {
        sources.insert("decode_curve".into(), c.source());
        c.curve.knots()
    });
    Ok(StepFit {
        decode_step_ms: step_ms,
        decode_us_per_seq: per_seq_ms * 1000.0,
        prefill_us_per_token: per_ktoken_ms * 1000.0 / TOKENS_SCALE,
        decode_curve,
        quality,
        sources,
    })
}

/// A step's time under the curve fit, priced as the simulator prices it: a step that
/// only decoded by the curve, one that prefilled by the line.
fn curve_predict(c: &curve::CurveFit, beta: &[f64; 3], s: &EngineStep) -> f64 {
    match s.prefill_tokens {
        0 => c.curve.ms(s.decoding),
        _ => predict(beta, s),
    }
}

fn row(s: &EngineStep) -> [f64; 3] {
    [
        1.0,
        s.decoding as f64,
        s.prefill_tokens as f64 / TOKENS_SCALE,
    ]
}

/// How far step `s` may lie from the first fit and stay in the refit.
fn bound_of(s: &EngineStep, bound: f64, first: &[f64; 3]) -> f64 {
    match s.prefill_tokens {
        0 => bound,
        _ => bound.max(OUTLIER_OWN_SHARE * predict(first, s).abs()),
    }
}

fn predict(beta: &[f64; 3], s: &EngineStep) -> f64 {
    row(s).iter().zip(beta).map(|(x, b)| x * b).sum()
}

/// Least squares with every cost at least 0: a negative cost has no meaning, and clamping
/// it after the fit would leave the others fitted to it (a CPU engine's one-sequence step
/// is cheaper than the line through its larger batches, which then crosses below 0). A
/// term that comes out negative is dropped (fixed at 0) and the rest refitted, at most
/// once per term: the active-set method for three unknowns.
fn solve(steps: &[EngineStep]) -> [f64; 3] {
    let mut active = [true; 3];
    loop {
        let beta = solve_active(steps, &active);
        match beta.iter().position(|b| *b < 0.0) {
            Some(j) => active[j] = false,
            None => return beta,
        }
    }
}

fn solve_active(steps: &[EngineStep], active: &[bool; 3]) -> [f64; 3] {
    let columns: Vec<usize> = (0..3).filter(|&j| active[j]).collect();
    let mut beta = [0.0; 3];
    if columns.is_empty() {
        return beta;
    }
    let x = DMatrix::from_fn(steps.len(), columns.len(), |i, j| {
        row(&steps[i])[columns[j]]
    });
    let y = DVector::from_iterator(steps.len(), steps.iter().map(|s| s.gap_ms));
    // Only fails without U or V, which were asked for: then no term is fitted.
    if let Ok(b) = x.svd(true, true).solve(&y, 1e-12) {
        for (k, &j) in columns.iter().enumerate() {
            beta[j] = b[k];
        }
    }
    beta
}

fn quality(steps: &[EngineStep], predict: impl Fn(&EngineStep) -> f64) -> FitQuality {
    let n = steps.len() as f64;
    let mean = steps.iter().map(|s| s.gap_ms).sum::<f64>() / n;
    let ss_res: f64 = steps.iter().map(|s| (s.gap_ms - predict(s)).powi(2)).sum();
    let ss_tot: f64 = steps.iter().map(|s| (s.gap_ms - mean).powi(2)).sum();
    FitQuality {
        steps: steps.len(),
        residual_rms_ms: round((ss_res / n).sqrt()),
        r_squared: round(if ss_tot > 0.0 {
            1.0 - ss_res / ss_tot
        } else {
            0.0
        }),
    }
}

fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// Refuses, naming the run that would help, when a term cannot be told apart.
fn check_identifiable(steps: &[EngineStep]) -> Result<(), FitError> {
    if steps.len() < MIN_STEPS {
        return Err(FitError::Undetermined {
            parameter: "decode_step_ms",
            why: format!("the runs show {} engine steps (gaps between two single-token chunks of a stream), fewer than {MIN_STEPS}", steps.len()),
            remedy: "calibrate from streamed runs (the default) with more requests and output tokens",
        });
    }
    // Over the steps that decoded: the steps that only prefilled price a prompt token.
    let mut decoding: Vec<usize> = steps
        .iter()
        .map(|s| s.decoding)
        .filter(|&d| d > 0)
        .collect();
    if decoding.is_empty() {
        decoding.push(0);
    }
    decoding.sort_unstable();
    let (p10, p90) = (
        decoding[decoding.len() / 10],
        decoding[decoding.len() * 9 / 10],
    );
    // One load point keeps about as many sequences decoding in every step, and the
    // fixed and per-sequence costs then add up to one number.
    if p90 < p10 + 2 || (p90 as f64) < 1.5 * p10 as f64 {
        return Err(FitError::Undetermined {
            parameter: "decode_us_per_seq",
            why: format!("the steps had {p10} to {p90} sequences decoding (10th to 90th percentile), one load point, so the fixed and per-sequence step costs cannot be told apart"),
            remedy: "add a run (or phase) at a second load point, e.g. concurrency 2 and 16",
        });
    }
    let prefill_steps = steps.iter().filter(|s| s.prefill_tokens > 0).count();
    if prefill_steps < MIN_PREFILL_STEPS {
        return Err(FitError::Undetermined {
            parameter: "prefill_us_per_token",
            why: format!("only {prefill_steps} steps prefilled a prompt"),
            remedy: "calibrate from a run that keeps several requests in flight, so new prompts join running streams",
        });
    }
    Ok(())
}
