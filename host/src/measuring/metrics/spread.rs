//! The spread of one figure over repeated runs (`--repeat`): mean, sample standard
//! deviation, the 95 % confidence interval of the mean (Student's t with n − 1 degrees of
//! freedom) and the coefficient of variation; and Welch's t-test between two such series,
//! which `runner compare` uses to call a difference significant. The t distribution comes
//! from `statrs`, never from a table.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// The confidence level of every interval and test here.
pub const CONFIDENCE: f64 = 0.95;

/// One figure over `n` runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Spread {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator).
    pub std: f64,
    /// The 95 % confidence interval of the mean: mean ± t(0.975, n − 1) · std / √n.
    pub ci_low: f64,
    pub ci_high: f64,
    /// std / |mean|; `None` when the mean is 0.
    pub cv: Option<f64>,
}

/// Two-sided quantile of Student's t at [`CONFIDENCE`] with `df` degrees of freedom.
fn t_quantile(df: f64) -> Option<f64> {
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(t.inverse_cdf(1.0 - (1.0 - CONFIDENCE) / 2.0))
}

/// Mean and sample variance; `None` for fewer than two values or a value not finite.
fn mean_var(values: &[f64]) -> Option<(f64, f64)> {
    if values.len() < 2 || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((mean, var))
}

impl Spread {
    /// The spread of `values`; `None` for fewer than two (no spread to estimate) or a
    /// value that is not a finite number.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let (mean, var) = mean_var(values)?;
        let n = values.len();
        let std = var.sqrt();
        let half = t_quantile(n as f64 - 1.0)? * std / (n as f64).sqrt();
        Some(Spread {
            n,
            mean,
            std,
            ci_low: mean - half,
            ci_high: mean + half,
            cv: (mean != 0.0).then(|| std / mean.abs()),
        })
    }

    /// Whether the coefficient of variation is above `threshold` (a fraction).
    pub fn unstable(&self, threshold: f64) -> bool {
        self.cv.is_some_and(|cv| cv > threshold)
    }
}

/// Welch's t-test of `b`'s mean against `a`'s (unequal variances, Welch–Satterthwaite
/// degrees of freedom), two-sided.
#[derive(Clone, Debug, PartialEq)]
pub struct Welch {
    /// mean(b) − mean(a).
    pub diff: f64,
    /// The 95 % confidence interval of that difference.
    pub ci_low: f64,
    pub ci_high: f64,
    pub df: f64,
    /// Two-sided p-value of "the means are equal".
    pub p_value: f64,
}

impl Welch {
    /// The test; `None` when either side has fewer than two values. Two series with no
    /// spread at all give p = 0 when their means differ and 1 when they do not.
    pub fn test(a: &[f64], b: &[f64]) -> Option<Welch> {
        let ((ma, va), (mb, vb)) = (mean_var(a)?, mean_var(b)?);
        let (sa, sb) = (va / a.len() as f64, vb / b.len() as f64);
        let diff = mb - ma;
        let se = (sa + sb).sqrt();
        if se == 0.0 {
            let p_value = if diff == 0.0 { 1.0 } else { 0.0 };
            return Some(Welch {
                diff,
                ci_low: diff,
                ci_high: diff,
                df: (a.len() + b.len() - 2) as f64,
                p_value,
            });
        }
        let df = (sa + sb).powi(2)
            / (sa.powi(2) / (a.len() as f64 - 1.0) + sb.powi(2) / (b.len() as f64 - 1.0));
        let dist = StudentsT::new(0.0, 1.0, df).ok()?;
        let p_value = (2.0 * dist.cdf(-(diff / se).abs())).min(1.0);
        let half = t_quantile(df)? * se;
        Some(Welch {
            diff,
            ci_low: diff - half,
            ci_high: diff + half,
            df,
            p_value,
        })
    }

    /// p below 1 − [`CONFIDENCE`].
    pub fn significant(&self) -> bool {
        self.p_value < 1.0 - CONFIDENCE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn the_interval_uses_students_t_with_n_minus_one_degrees() {
        // t(0.975, 4) = 2.776445105 (any table); mean 3, sample std √2.5.
        let s = Spread::of(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(s.n, 5);
        assert!(close(s.mean, 3.0, 1e-12));
        assert!(close(s.std, 2.5f64.sqrt(), 1e-12));
        let half = 2.776_445_105 * 2.5f64.sqrt() / 5f64.sqrt();
        assert!(close(s.ci_low, 3.0 - half, 1e-6), "{s:?}");
        assert!(close(s.ci_high, 3.0 + half, 1e-6), "{s:?}");
        assert!(close(s.cv.unwrap(), 2.5f64.sqrt() / 3.0, 1e-12));
        // Two runs: t(0.975, 1) = 12.706204736.
        let two = Spread::of(&[10.0, 12.0]).unwrap();
        assert!(
            close(two.ci_high - two.mean, 12.706_204_736, 1e-6),
            "{two:?}"
        );
    }

    #[test]
    fn one_value_or_a_nan_has_no_spread() {
        assert_eq!(Spread::of(&[1.0]), None);
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[1.0, f64::NAN]), None);
        let zero = Spread::of(&[0.0, 0.0]).unwrap();
        assert_eq!(zero.cv, None);
        assert!(!zero.unstable(0.1));
        assert!(Spread::of(&[90.0, 110.0]).unwrap().unstable(0.1));
    }

    #[test]
    fn welch_matches_the_textbook_case() {
        // Equal variances 2.5, n = 5 each: t = 2, df = 8, two-sided p = 0.0805162.
        let w = Welch::test(&[1.0, 2.0, 3.0, 4.0, 5.0], &[3.0, 4.0, 5.0, 6.0, 7.0]).unwrap();
        assert!(close(w.diff, 2.0, 1e-12));
        assert!(close(w.df, 8.0, 1e-9), "{w:?}");
        assert!(close(w.p_value, 0.080_516_2, 1e-6), "{w:?}");
        assert!(!w.significant());
        // t(0.975, 8) = 2.306004135.
        assert!(close(w.ci_high - 2.0, 2.306_004_135, 1e-6), "{w:?}");
        // Unequal variances: df from Welch–Satterthwaite, below n_a + n_b − 2.
        let u = Welch::test(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0, 40.0]).unwrap();
        assert!(u.df < 5.0 && u.df > 2.0, "{u:?}");
        assert!(u.significant(), "{u:?}");
    }

    #[test]
    fn series_without_spread_differ_or_not_by_their_means() {
        assert!(Welch::test(&[1.0, 1.0], &[2.0, 2.0]).unwrap().significant());
        assert!(!Welch::test(&[1.0, 1.0], &[1.0, 1.0]).unwrap().significant());
        assert_eq!(Welch::test(&[1.0], &[1.0, 2.0]), None);
    }
}
