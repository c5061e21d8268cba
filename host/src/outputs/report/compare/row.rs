//! One row of `runner compare`: a metric of two results and which side is better. Its
//! own module because both the client's rows (compare.rs) and the server's
//! (server_compare.rs) are built of it.

use crate::measuring::metrics::catalogue::Better;

/// The most decimals a row is shown with.
const MAX_DECIMALS: usize = 12;

/// One metric of one pair.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub key: String,
    pub label: String,
    pub a: f64,
    pub b: f64,
    pub better: Better,
    /// Interpolated inside histogram buckets (a server's percentiles): the true values
    /// may lie anywhere in their buckets, so no side is called better.
    pub coarse: bool,
}

impl Row {
    pub fn change(&self) -> f64 {
        self.b - self.a
    }

    /// Change relative to A, percent; `None` when A is 0.
    pub fn percent(&self) -> Option<f64> {
        (self.a != 0.0).then(|| 100.0 * (self.b - self.a) / self.a)
    }

    /// Which side is better, from the unrounded values: Some(true) for B, Some(false) for
    /// A, None for a tie, no direction, or a coarse row.
    pub fn b_wins(&self) -> Option<bool> {
        match self.better {
            _ if self.a == self.b || self.coarse => None,
            Better::Higher => Some(self.b > self.a),
            Better::Lower => Some(self.b < self.a),
            Better::Neither => None,
        }
    }

    /// How many decimals show both values and their change: none when both are whole;
    /// otherwise at least 2 and 3 significant digits of each, and more while two
    /// different values would read the same, so the shown values explain the shown
    /// change (0.005 against 0.01 is `0.00500` and `0.01000`, not `0.01` twice).
    pub fn decimals(&self) -> usize {
        let whole = |v: f64| v.fract() == 0.0 && v.abs() < 1e15;
        if whole(self.a) && whole(self.b) {
            return 0;
        }
        let three_significant = |v: f64| {
            if v == 0.0 || !v.is_finite() {
                0
            } else {
                (2 - v.abs().log10().floor() as i64).clamp(0, MAX_DECIMALS as i64) as usize
            }
        };
        let mut d = three_significant(self.a)
            .max(three_significant(self.b))
            .max(2);
        while d < MAX_DECIMALS && self.a != self.b && fixed(self.a, d) == fixed(self.b, d) {
            d += 1;
        }
        d
    }
}

fn fixed(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(a: f64, b: f64) -> Row {
        Row {
            key: "k".into(),
            label: "k".into(),
            a,
            b,
            better: Better::Lower,
            coarse: false,
        }
    }

    #[test]
    fn decimals_show_what_changed() {
        // Whole numbers as they are; the usual two decimals where they tell values apart.
        assert_eq!(row(100.0, 150.0).decimals(), 0);
        assert_eq!(row(1234.5678, 1300.25).decimals(), 2);
        // A KV cache fraction: 0.005 and 0.01 read 0.01 twice with two decimals.
        let kv = row(0.005, 0.01);
        let d = kv.decimals();
        assert_eq!(d, 5);
        assert_eq!(
            (fixed(kv.a, d), fixed(kv.b, d)),
            ("0.00500".into(), "0.01000".into())
        );
        // Close values get the digits that tell them apart.
        let close = row(1234.567, 1234.571);
        assert_eq!(fixed(close.a, close.decimals()), "1234.567");
        assert_eq!(fixed(close.b, close.decimals()), "1234.571");
        // Bounded, even for values no decimals tell apart.
        assert_eq!(row(1.0, 1.0 + f64::EPSILON).decimals(), MAX_DECIMALS);
        assert_eq!(row(f64::NAN, 0.5).decimals(), 3);
    }

    #[test]
    fn winners_come_from_unrounded_values_and_never_from_coarse_rows() {
        assert_eq!(row(0.0100, 0.0101).b_wins(), Some(false));
        assert_eq!(row(2.0, 1.0).b_wins(), Some(true));
        let coarse = Row {
            coarse: true,
            ..row(2.0, 1.0)
        };
        assert_eq!(coarse.b_wins(), None);
    }
}
