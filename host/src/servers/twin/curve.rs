//! The decode cost as a curve (servers/sim/decode_curve.rs) where the straight line does
//! not describe the engine: the steps that only decoded, fitted to a piecewise-linear
//! function of the sequences decoding, with a knot at every batch size seen in at least
//! [`MIN_KNOT_STEPS`] of them. A step whose batch size lies between knots weighs on the
//! two around it; one outside them on the nearest two, by the same rule the simulator
//! prices it with. Steps that prefilled stay priced by the line (its fixed and
//! per-sequence cost and the cost per prompt token): on llama.cpp a prompt computed with
//! one decoding stream costs what it costs alone (its `prompt_ms`), where a decode step
//! of 1 sequence costs 3.9 ms and one of 2 costs 6.7. The curve is kept only where it
//! departs from the line by more than [`MIN_DEPARTURE`] at some knot: an engine the line
//! describes (the built-in simulator's) keeps its two numbers.

use nalgebra::{DMatrix, DVector};

use super::steps::EngineStep;
use crate::servers::sim::decode_curve::{segment, DecodeCurve, Knot, MAX_KNOTS};

/// A batch size seen in fewer steps than this gets no knot of its own.
const MIN_KNOT_STEPS: usize = 5;
/// The curve replaces the line only where, at one of its knots, the two part by more than
/// this share of the curve's cost,
const MIN_DEPARTURE: f64 = 0.05;
/// judged at the knots seen in at least this many steps: a knot of 5 steps on a busy
/// machine can sit 5 % off by chance.
const DEPARTURE_MIN_STEPS: usize = 20;

/// The fitted curve and what it says beside the line.
pub struct CurveFit {
    pub curve: DecodeCurve,
    /// The well-measured knot where the line parts most from the curve, and by how much
    /// (a share).
    pub departure: (usize, f64),
    /// The steps that only decoded, the ones fitted.
    pub steps: usize,
}

impl CurveFit {
    /// Where the curve came from, for the twin's `sources`.
    pub fn source(&self) -> String {
        let (at, share) = self.departure;
        let sizes: Vec<String> = self
            .curve
            .knots()
            .iter()
            .map(|k| k.seqs.to_string())
            .collect();
        format!(
            "least squares (nalgebra SVD) of the times of the {} steps that only decoded on a piecewise-linear function of the sequences decoding, knots at the batch sizes seen in at least {MIN_KNOT_STEPS} of them ({}); kept because the line of decode_step_ms and decode_us_per_seq parts from it by {:.1} % at {at} sequences, so the twin prices a step that only decodes by the curve and one that prefills by the line",
            self.steps,
            sizes.join(", "),
            share * 100.0
        )
    }
}

/// A knot's batch size and the steps seen at it.
#[derive(Clone, Copy)]
struct Seen {
    seqs: usize,
    steps: usize,
}

/// The curve through `steps`, when it has three knots or more, every cost at least 0,
/// and the line `line_ms` (ms for a batch size) parts from it by more than [`MIN_DEPARTURE`].
pub fn fit(steps: &[EngineStep], line_ms: impl Fn(usize) -> f64) -> Option<CurveFit> {
    let decode_only: Vec<&EngineStep> = steps.iter().filter(|s| s.prefill_tokens == 0).collect();
    let seen = knot_sizes(&decode_only);
    if seen.len() < 3 {
        return None;
    }
    let seqs: Vec<usize> = seen.iter().map(|k| k.seqs).collect();
    let values = solve(&decode_only, &seqs)?;
    if values.iter().any(|v| !v.is_finite() || *v < 0.0) || falls(&values) {
        return None;
    }
    let departure = seen
        .iter()
        .zip(&values)
        .filter(|(k, _)| k.steps >= DEPARTURE_MIN_STEPS)
        .map(|(k, &ms)| {
            (
                k.seqs,
                (line_ms(k.seqs) - ms).abs() / ms.max(f64::MIN_POSITIVE),
            )
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if departure.1 <= MIN_DEPARTURE {
        return None;
    }
    let knots = seqs
        .iter()
        .zip(&values)
        .map(|(&seqs, &ms)| Knot { seqs, ms })
        .collect();
    Some(CurveFit {
        curve: DecodeCurve::new(knots, f64::MAX).ok()?,
        departure,
        steps: decode_only.len(),
    })
}

/// Whether the knots' costs fall somewhere with more sequences by over [`MIN_DEPARTURE`]:
/// a step of more sequences never costs an engine less, so such a curve was measured on a
/// machine whose speed changed under it (llama.cpp beside busy loops: 6.8, 17.2, 13.3 and
/// 16.4 ms for 1 to 4 sequences; the knot at 2 priced a held-out 2-stream run's TPOT at
/// 17.6 ms against the 9.0 measured, where the line, kept instead, gives 10.6).
fn falls(values: &[f64]) -> bool {
    let mut highest = 0.0f64;
    for &v in values {
        if v < highest * (1.0 - MIN_DEPARTURE) {
            return true;
        }
        highest = highest.max(v);
    }
    false
}

/// The batch sizes seen in at least [`MIN_KNOT_STEPS`] steps, at most [`MAX_KNOTS`] of
/// them (evenly picked when more: a wide engine's curve needs no knot at every size).
fn knot_sizes(steps: &[&EngineStep]) -> Vec<Seen> {
    let mut counts = std::collections::BTreeMap::<usize, usize>::new();
    for s in steps {
        *counts.entry(s.decoding).or_default() += 1;
    }
    let seen: Vec<Seen> = counts
        .into_iter()
        .filter(|&(_, n)| n >= MIN_KNOT_STEPS)
        .map(|(seqs, steps)| Seen { seqs, steps })
        .collect();
    if seen.len() <= MAX_KNOTS {
        return seen;
    }
    let last = seen.len() - 1;
    let mut picked: Vec<Seen> = (0..MAX_KNOTS)
        .map(|i| seen[i * last / (MAX_KNOTS - 1)])
        .collect();
    picked.dedup_by_key(|k| k.seqs);
    picked
}

/// The knots' costs by least squares, each step weighing on the knots as the simulator
/// prices it (`segment`). None when nalgebra cannot solve it.
fn solve(steps: &[&EngineStep], seqs: &[usize]) -> Option<Vec<f64>> {
    let mut x = DMatrix::<f64>::zeros(steps.len(), seqs.len());
    for (i, s) in steps.iter().enumerate() {
        for (j, w) in segment(seqs, s.decoding) {
            x[(i, j)] = w;
        }
    }
    let y = DVector::from_iterator(steps.len(), steps.iter().map(|s| s.gap_ms));
    let b = x.svd(true, true).solve(&y, 1e-12).ok()?;
    Some(b.iter().copied().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(decoding: usize, prefill_tokens: u64, gap_ms: f64) -> EngineStep {
        EngineStep {
            gap_ms,
            decoding,
            prefill_tokens,
            running: decoding,
            in_flight: decoding,
        }
    }

    /// Steps of an engine priced by `truth`, a quarter of them also prefilling at 1 µs a
    /// token (those stay out of the curve).
    fn steps_of(truth: &DecodeCurve, sizes: &[usize]) -> Vec<EngineStep> {
        let mut out = Vec::new();
        for &d in sizes {
            for k in 0..28u64 {
                let tokens = if k % 4 == 0 { 20 + 10 * k } else { 0 };
                out.push(step(d, tokens, truth.ms(d) + 0.001 * tokens as f64));
            }
        }
        out
    }

    #[test]
    fn a_concave_engine_is_recovered_knot_by_knot() {
        let knots = [(1, 3.9), (2, 6.7), (4, 10.3)].map(|(seqs, ms)| Knot { seqs, ms });
        let truth = DecodeCurve::new(knots.to_vec(), 1e6).expect("a curve");
        let steps = steps_of(&truth, &[1, 2, 3, 4]);
        // The line through 1 and 4, as a fit from those two load points would draw it.
        let line = |d: usize| 3.9 + (10.3 - 3.9) / 3.0 * (d as f64 - 1.0);
        let fit = fit(&steps, line).expect("the line parts from it by 10 % at 2");
        let got: Vec<usize> = fit.curve.knots().iter().map(|k| k.seqs).collect();
        assert_eq!(got, [1, 2, 3, 4]);
        for k in fit.curve.knots() {
            assert!((k.ms - truth.ms(k.seqs)).abs() < 1e-6, "{k:?}");
        }
        assert_eq!(fit.departure.0, 2);
        // 21 of each size's 28 steps only decoded.
        assert_eq!(fit.steps, 84);
        assert!(fit.source().contains("the 84 steps that only decoded"));
        assert!(fit
            .source()
            .contains("seen in at least 5 of them (1, 2, 3, 4)"));
    }

    #[test]
    fn a_straight_engine_keeps_its_line() {
        let knots = [(1, 2.0), (8, 9.0)].map(|(seqs, ms)| Knot { seqs, ms });
        let truth = DecodeCurve::new(knots.to_vec(), 1e6).expect("a curve");
        let mut steps = steps_of(&truth, &[1, 2, 4, 8]);
        assert!(fit(&steps, |d| 1.0 + d as f64).is_none());
        // A batch size seen in a few steps, 20 % off (a busy machine), gets a knot but does
        // not decide against the line.
        steps.extend((0..6).map(|_| step(3, 0, 4.8)));
        assert!(fit(&steps, |d| 1.0 + d as f64).is_none());
        // Two batch sizes make no curve.
        let steps = steps_of(&truth, &[1, 8]);
        assert!(fit(&steps, |_| 100.0).is_none());
    }

    #[test]
    fn a_curve_that_falls_with_more_sequences_is_not_kept() {
        // The knots a loaded machine gave llama.cpp: 2 sequences dearer than 3.
        let steps: Vec<EngineStep> = [(1, 6.8), (2, 17.2), (3, 13.3), (4, 16.4)]
            .iter()
            .flat_map(|&(d, ms)| (0..30).map(move |_| step(d, 0, ms)))
            .collect();
        let line = |d: usize| 4.8 + 2.9 * d as f64;
        assert!(fit(&steps, line).is_none());
        // A dip within the noise the keep rule allows (3 % at 3) keeps the curve.
        let steps: Vec<EngineStep> = [(1, 2.0), (2, 3.4), (3, 3.3), (4, 7.2)]
            .iter()
            .flat_map(|&(d, ms)| (0..30).map(move |_| step(d, 0, ms)))
            .collect();
        assert!(fit(&steps, |d| 0.3 + 1.7 * d as f64).is_some());
    }

    #[test]
    fn a_wide_engine_gets_at_most_the_knots_a_curve_may_have() {
        let steps: Vec<EngineStep> = (1..=300)
            .flat_map(|d| (0..5).map(move |_| step(d, 0, 1.0 + d as f64 * 0.01)))
            .collect();
        let sizes = knot_sizes(&steps.iter().collect::<Vec<_>>());
        assert!(sizes.len() <= MAX_KNOTS && sizes.len() > MAX_KNOTS / 2);
        assert_eq!((sizes[0].seqs, sizes[sizes.len() - 1].seqs), (1, 300));
    }
}
