//! What the statistics are asked to compute: the percentiles and the goodput SLO.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Error of parsing `--goodput` or `--metric-percentiles` style strings.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ParseError {
    #[error("empty goodput SLO: expected e.g. \"ttft:200 tpot:50 e2el:5000\" (milliseconds)")]
    EmptySlo,
    #[error("bad SLO item {0:?}: expected KEY:MILLISECONDS with KEY one of ttft, tpot, e2el")]
    SloSyntax(String),
    #[error("unknown SLO key {0:?}: expected one of ttft, tpot, e2el")]
    UnknownSloKey(String),
    #[error("bad value {value:?} for SLO {key}: expected a non-negative number of milliseconds")]
    BadSloValue { key: String, value: String },
    #[error("SLO {0} given more than once")]
    DuplicateSloKey(String),
    #[error("no percentiles given: expected e.g. \"50,90,99\"")]
    EmptyPercentiles,
    #[error("bad percentile {0:?}: expected a number in (0, 100]")]
    BadPercentile(String),
}

/// Service-level objectives for goodput, in milliseconds; a request counts as "good" when it
/// meets every objective that is given (inclusive `<=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2el_ms: Option<f64>,
}

impl FromStr for Slo {
    type Err = ParseError;

    /// `"ttft:200 tpot:50 e2el:5000"`; items may be separated by spaces and/or commas.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let mut slo = Slo::default();
        let mut any = false;
        for item in s
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|i| !i.is_empty())
        {
            let (key, value) = item
                .split_once(':')
                .ok_or_else(|| ParseError::SloSyntax(item.to_string()))?;
            let (key, value) = (key.trim(), value.trim());
            let slot = match key {
                "ttft" => &mut slo.ttft_ms,
                "tpot" => &mut slo.tpot_ms,
                "e2el" => &mut slo.e2el_ms,
                _ => return Err(ParseError::UnknownSloKey(key.to_string())),
            };
            let ms: f64 = value
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| ParseError::BadSloValue {
                    key: key.to_string(),
                    value: value.to_string(),
                })?;
            if slot.replace(ms).is_some() {
                return Err(ParseError::DuplicateSloKey(key.to_string()));
            }
            any = true;
        }
        if any {
            Ok(slo)
        } else {
            Err(ParseError::EmptySlo)
        }
    }
}

impl fmt::Display for Slo {
    /// The same syntax [`Slo::from_str`] reads: `ttft:200 tpot:50 e2el:5000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items = [
            ("ttft", self.ttft_ms),
            ("tpot", self.tpot_ms),
            ("e2el", self.e2el_ms),
        ];
        let mut first = true;
        for (key, ms) in items {
            if let Some(ms) = ms {
                if !first {
                    f.write_str(" ")?;
                }
                write!(f, "{key}:{ms}")?;
                first = false;
            }
        }
        Ok(())
    }
}

/// Parses `"50,90,95,99,99.9"` (commas and/or spaces). Each value must lie in (0, 100];
/// order is kept, duplicates are dropped.
pub fn parse_percentiles(s: &str) -> Result<Vec<f64>, ParseError> {
    let mut out: Vec<f64> = Vec::new();
    for item in s
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|i| !i.is_empty())
    {
        let p: f64 = item
            .parse()
            .ok()
            .filter(|p: &f64| p.is_finite() && *p > 0.0 && *p <= 100.0)
            .ok_or_else(|| ParseError::BadPercentile(item.to_string()))?;
        if !out.contains(&p) {
            out.push(p);
        }
    }
    if out.is_empty() {
        return Err(ParseError::EmptyPercentiles);
    }
    Ok(out)
}

/// What [`super::PhaseAccumulator`] computes besides the fixed set of statistics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricsOptions {
    /// Percentiles reported for every distribution (vLLM's `--metric-percentiles`).
    pub percentiles: Vec<f64>,
    /// Goodput SLO (vLLM's `--goodput`); `None` = no goodput.
    pub goodput: Option<Slo>,
}

impl Default for MetricsOptions {
    fn default() -> Self {
        MetricsOptions {
            percentiles: vec![99.0],
            goodput: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slo_parses_spaces_and_commas() {
        let s: Slo = "ttft:200 tpot:50 e2el:5000".parse().unwrap();
        assert_eq!(
            s,
            Slo {
                ttft_ms: Some(200.0),
                tpot_ms: Some(50.0),
                e2el_ms: Some(5000.0)
            }
        );
        let s: Slo = "tpot:12.5, e2el:3000".parse().unwrap();
        assert_eq!(
            s,
            Slo {
                ttft_ms: None,
                tpot_ms: Some(12.5),
                e2el_ms: Some(3000.0)
            }
        );
        assert_eq!(s.to_string(), "tpot:12.5 e2el:3000");
        assert_eq!(s.to_string().parse::<Slo>().unwrap(), s);
    }

    #[test]
    fn slo_errors_name_the_bad_part() {
        let e = "ttft:200 foo:3".parse::<Slo>().unwrap_err();
        assert_eq!(e, ParseError::UnknownSloKey("foo".into()));
        assert!(e.to_string().contains("\"foo\""));
        let e = "ttft:abc".parse::<Slo>().unwrap_err();
        assert!(e.to_string().contains("\"abc\"") && e.to_string().contains("ttft"));
        assert_eq!(
            "tpot:-1".parse::<Slo>().unwrap_err(),
            ParseError::BadSloValue {
                key: "tpot".into(),
                value: "-1".into()
            }
        );
        assert_eq!(
            "ttft200".parse::<Slo>().unwrap_err(),
            ParseError::SloSyntax("ttft200".into())
        );
        assert_eq!(
            "ttft:1 ttft:2".parse::<Slo>().unwrap_err(),
            ParseError::DuplicateSloKey("ttft".into())
        );
        assert_eq!(" , ".parse::<Slo>().unwrap_err(), ParseError::EmptySlo);
    }

    #[test]
    fn percentiles_parse_and_validate() {
        assert_eq!(
            parse_percentiles("50,90,95,99,99.9").unwrap(),
            vec![50.0, 90.0, 95.0, 99.0, 99.9]
        );
        assert_eq!(parse_percentiles(" 99, 50 ,99").unwrap(), vec![99.0, 50.0]);
        assert_eq!(parse_percentiles("100").unwrap(), vec![100.0]);
        assert_eq!(
            parse_percentiles("0").unwrap_err(),
            ParseError::BadPercentile("0".into())
        );
        assert_eq!(
            parse_percentiles("50,100.1").unwrap_err(),
            ParseError::BadPercentile("100.1".into())
        );
        assert_eq!(
            parse_percentiles("p99").unwrap_err(),
            ParseError::BadPercentile("p99".into())
        );
        assert_eq!(
            parse_percentiles("").unwrap_err(),
            ParseError::EmptyPercentiles
        );
        assert_eq!(MetricsOptions::default().percentiles, vec![99.0]);
    }
}
