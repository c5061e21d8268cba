//! A decode step's cost as a piecewise-linear function of the sequences decoding in it,
//! where a straight line (a fixed cost plus a cost per sequence) does not describe the
//! engine. A CPU engine such as llama.cpp's is one: measured on the llama.cpp test model
//! (bench-results/twin_llamacpp.md), a step costs 3.9 ms with 1 sequence, 6.7 ms with 2 and
//! 10.3 ms with 4, so the second sequence adds 2.8 ms and each further one 1.8 ms: a line
//! through 1 and 4 prices 2 sequences 10 % short, one through 2 and 4 prices 1 sequence
//! 15 % long. `runner calibrate` fits the curve's knots (servers/twin/curve.rs) and a
//! twin.toml carries them as `[engine] decode_curve`.

use serde::{Deserialize, Serialize};

/// The most knots a curve may have (a fit keeps one per batch size seen often enough; an
/// engine of 256 slots seen at every size is priced well by far fewer).
pub const MAX_KNOTS: usize = 64;

/// One knot: the step's decode cost with `seqs` sequences decoding, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Knot {
    pub seqs: usize,
    pub ms: f64,
}

/// At least two knots, their `seqs` strictly increasing, every cost finite and at least 0.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeCurve {
    /// The knots' `seqs` and costs side by side: pricing a step (once per simulated
    /// step) reads `seqs` as [`segment`]'s slice without building one.
    seqs: Vec<usize>,
    ms: Vec<f64>,
}

impl DecodeCurve {
    /// The curve through `knots`, or why they do not make one.
    pub fn new(knots: Vec<Knot>, max_ms: f64) -> Result<DecodeCurve, String> {
        if knots.len() < 2 || knots.len() > MAX_KNOTS {
            return Err(format!(
                "{} knots: a curve has 2 to {MAX_KNOTS}",
                knots.len()
            ));
        }
        if knots.windows(2).any(|w| w[1].seqs <= w[0].seqs) {
            return Err("the knots' seqs must strictly increase".into());
        }
        if let Some(k) = knots
            .iter()
            .find(|k| !k.ms.is_finite() || k.ms < 0.0 || k.ms > max_ms)
        {
            return Err(format!(
                "the knot at {} seqs costs {} ms: each must be a number from 0 to {max_ms}",
                k.seqs, k.ms
            ));
        }
        Ok(DecodeCurve {
            seqs: knots.iter().map(|k| k.seqs).collect(),
            ms: knots.iter().map(|k| k.ms).collect(),
        })
    }

    /// The knots, for a twin file and the calibrate report (off the request path).
    pub fn knots(&self) -> Vec<Knot> {
        let knot = |(&seqs, &ms)| Knot { seqs, ms };
        self.seqs.iter().zip(&self.ms).map(knot).collect()
    }

    /// The decode cost of a step with `decoding` sequences, ms: by [`segment`], never
    /// below 0.
    pub fn ms(&self, decoding: usize) -> f64 {
        segment(&self.seqs, decoding)
            .iter()
            .map(|&(i, weight)| weight * self.ms[i])
            .sum::<f64>()
            .max(0.0)
    }
}

/// How the cost of a step with `d` sequences decoding is made of the knots' (at `seqs`,
/// strictly increasing, at least two): between two knots on the line joining them,
/// outside them on the nearest segment's line. The knots' indices and weights; the fit
/// (servers/twin/curve.rs) weighs each step on the knots by this same rule.
pub fn segment(seqs: &[usize], d: usize) -> [(usize, f64); 2] {
    let i = seqs.partition_point(|&s| s < d).clamp(1, seqs.len() - 1);
    let (a, b) = (seqs[i - 1] as f64, seqs[i] as f64);
    let t = (d as f64 - a) / (b - a);
    [(i - 1, 1.0 - t), (i, t)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(points: &[(usize, f64)]) -> Result<DecodeCurve, String> {
        let knots = points.iter().map(|&(seqs, ms)| Knot { seqs, ms }).collect();
        DecodeCurve::new(knots, 1e6)
    }

    #[test]
    fn between_knots_it_interpolates_and_outside_it_extends_the_end_segments() {
        let c = curve(&[(1, 3.9), (2, 6.7), (4, 10.3)]).expect("a curve");
        assert!((c.ms(1) - 3.9).abs() < 1e-9);
        assert!((c.ms(3) - 8.5).abs() < 1e-9);
        assert!((c.ms(4) - 10.3).abs() < 1e-9);
        // Beyond the last knot: 1.8 ms a sequence; below the first: 2.8.
        assert!((c.ms(6) - 13.9).abs() < 1e-9);
        assert!((c.ms(0) - 1.1).abs() < 1e-9);
        // A steep first segment is not extended below 0.
        let steep = curve(&[(2, 1.0), (3, 9.0)]).expect("a curve");
        assert_eq!(steep.ms(0), 0.0);
    }

    #[test]
    fn malformed_knots_are_refused() {
        assert!(curve(&[(1, 3.0)]).is_err());
        assert!(curve(&[(2, 3.0), (2, 4.0)]).is_err());
        assert!(curve(&[(2, 3.0), (1, 4.0)]).is_err());
        assert!(curve(&[(1, 3.0), (2, f64::NAN)]).is_err());
        assert!(curve(&[(1, -1.0), (2, 4.0)]).is_err());
        let many: Vec<(usize, f64)> = (0..=MAX_KNOTS).map(|s| (s, 1.0)).collect();
        assert!(curve(&many).is_err());
    }
}
