//! Pass/fail thresholds for CI, in the spirit of k6: `p99_ttft_ms<500`, `error_rate<0.01`.
//! Each is checked at the end of the run against every measured phase; one that fails in
//! any phase makes the process exit with [`EXIT_THRESHOLDS_FAILED`] (k6's code).
//!
//! Metric names are those of result.json, from the metric catalogue (`metrics::catalogue`),
//! so what a threshold reads is what the JSON says.
//!
//! With several `--target`s a threshold may name one: `p99_ttft_ms[target=1]<500` reads
//! target 1's row of the per-target table (its TTFT, TPOT and E2EL, and its completed,
//! failed and cancelled counts and error rate), where `p99_ttft_ms<500` reads the whole
//! phase.

use std::fmt;
use std::str::FromStr;

use crate::measuring::metrics::catalogue::{
    tag_metric_help, MetricName, LATENCIES, LATENCY_STATS, SCALARS,
};
use crate::measuring::metrics::PhaseSummary;

/// Exit code of a run whose thresholds failed (k6's `ThresholdsHaveFailed`).
pub const EXIT_THRESHOLDS_FAILED: i32 = 99;

/// The metric names a threshold accepts, from the metric catalogue, for error messages.
pub fn metric_help() -> String {
    let latencies: Vec<&str> = LATENCIES.iter().map(|l| l.key).collect();
    let scalars: Vec<&str> = SCALARS.iter().map(|m| m.key).collect();
    format!(
        "`<stat>_<latency>_ms` with stat {} or p<N> (e.g. p99, p99.9) and latency {}; or {}",
        LATENCY_STATS.join(", "),
        latencies.join(", "),
        scalars.join(", ")
    )
}

#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ThresholdError {
    #[error("threshold `{0}`: expected METRIC OP VALUE such as p99_ttft_ms<500 or error_rate<0.01 (OP is <, <=, >, >=, == or !=)")]
    Syntax(String),
    #[error("threshold `{text}`: unknown metric `{metric}`; use {}", metric_help())]
    Metric { text: String, metric: String },
    #[error("threshold `{text}`: `{value}` is not a number")]
    Value { text: String, value: String },
    #[error("threshold `{text}`: `[{scope}]` is not a scope; name a target as `[target=N]` (N its index among the --target URLs, from 0)")]
    Scope { text: String, scope: String },
    #[error(
        "threshold `{text}`: a target's row has no `{metric}`; per target, use {}",
        tag_metric_help()
    )]
    TargetMetric { text: String, metric: String },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Op::Lt => value < limit,
            Op::Le => value <= limit,
            Op::Gt => value > limit,
            Op::Ge => value >= limit,
            Op::Eq => value == limit,
            Op::Ne => value != limit,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }
}

/// One parsed threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    /// As written, without spaces.
    pub text: String,
    pub metric: String,
    pub op: Op,
    pub limit: f64,
    /// What it reads, from the metric catalogue.
    what: MetricName,
    /// The index of the target it reads (`[target=N]`); `None`: the whole phase.
    pub target: Option<usize>,
}

impl FromStr for Threshold {
    type Err = ThresholdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text: String = s.split_whitespace().collect();
        let syntax = || ThresholdError::Syntax(s.trim().to_string());
        // A scope's `=` is no operator: the operator comes after its `]`.
        let scope_end = match text.find('[') {
            Some(open) => open + text[open..].find(']').ok_or_else(syntax)? + 1,
            None => 0,
        };
        let at = scope_end
            + text[scope_end..]
                .find(['<', '>', '=', '!'])
                .ok_or_else(syntax)?;
        let (metric_text, rest) = text.split_at(at);
        let (metric, target) = split_scope(&text, metric_text)?;
        let (op, value) = [
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<", Op::Lt),
            (">", Op::Gt),
        ]
        .iter()
        .find_map(|(sym, op)| rest.strip_prefix(sym).map(|v| (*op, v)))
        .ok_or_else(syntax)?;
        if metric.is_empty() || value.is_empty() {
            return Err(syntax());
        }
        let what = MetricName::parse(metric).ok_or_else(|| ThresholdError::Metric {
            text: text.clone(),
            metric: metric.to_string(),
        })?;
        if target.is_some() && !what.in_tag() {
            return Err(ThresholdError::TargetMetric {
                text: text.clone(),
                metric: metric.to_string(),
            });
        }
        let bad_value = || ThresholdError::Value {
            text: text.clone(),
            value: value.to_string(),
        };
        // `error_rate<1%` reads as 0.01.
        let limit = match value.strip_suffix('%') {
            Some(p) => p.parse::<f64>().map(|v| v / 100.0),
            None => value.parse::<f64>(),
        }
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(bad_value)?;
        Ok(Threshold {
            metric: metric_text.to_string(),
            text,
            op,
            limit,
            what,
            target,
        })
    }
}

/// `p99_ttft_ms[target=1]` as the metric and the target's index; no scope, no target.
fn split_scope<'a>(
    text: &str,
    metric: &'a str,
) -> Result<(&'a str, Option<usize>), ThresholdError> {
    let Some((name, scope)) = metric.split_once('[') else {
        return Ok((metric, None));
    };
    let scope = scope.strip_suffix(']').unwrap_or(scope);
    let bad = || ThresholdError::Scope {
        text: text.to_string(),
        scope: scope.to_string(),
    };
    let index = scope
        .strip_prefix("target=")
        .and_then(|n| n.parse::<usize>().ok())
        .ok_or_else(bad)?;
    Ok((name, Some(index)))
}

impl Threshold {
    /// The percentile this threshold needs computed, if any.
    pub fn percentile(&self) -> Option<f64> {
        self.what.percentile()
    }

    /// The metric's value in a phase; `None` when the phase has no data for it (no
    /// successful request, or goodput without an SLO), which fails the threshold.
    pub fn value(&self, s: &PhaseSummary) -> Option<f64> {
        match self.target {
            Some(target) => {
                let row = s.targets.iter().find(|t| t.tag == target.to_string())?;
                self.what.tag_value(row)
            }
            None => self.what.value(s),
        }
    }

    /// Checks this threshold against one phase.
    pub fn check(&self, s: &PhaseSummary) -> Verdict {
        let value = self.value(s);
        Verdict {
            threshold: self.text.clone(),
            phase: s.name.clone(),
            value,
            pass: value.is_some_and(|v| self.op.holds(v, self.limit)),
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{}", self.metric, self.op.symbol(), self.limit)
    }
}

/// The outcome of one threshold in one phase.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub threshold: String,
    pub phase: String,
    /// `None`: no data (fails).
    pub value: Option<f64>,
    pub pass: bool,
}

impl Verdict {
    pub fn value_text(&self) -> String {
        self.value
            .map_or_else(|| "no data".to_string(), |v| format!("{v:.2}"))
    }
}

/// Parses every threshold, the first error ending it.
pub fn parse_all<S: AsRef<str>>(texts: &[S]) -> Result<Vec<Threshold>, ThresholdError> {
    texts.iter().map(|t| t.as_ref().parse()).collect()
}

/// Checks every threshold against every phase, thresholds first.
pub fn check_all(thresholds: &[Threshold], phases: &[PhaseSummary]) -> Vec<Verdict> {
    thresholds
        .iter()
        .flat_map(|t| phases.iter().map(move |s| t.check(s)))
        .collect()
}

/// The percentiles `thresholds` read that `percentiles` lacks, to compute them too.
pub fn missing_percentiles(thresholds: &[Threshold], percentiles: &[f64]) -> Vec<f64> {
    let mut out: Vec<f64> = Vec::new();
    for p in thresholds.iter().filter_map(Threshold::percentile) {
        let known = |q: &f64| (q - p).abs() < 1e-9;
        if !percentiles.iter().any(known) && !out.iter().any(known) {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::{
        Chunk, MetricsOptions, PhaseAccumulator, PhaseInfo, RequestError, RequestRecord,
    };

    fn phase(ttfts_ms: &[u64], failed: u64) -> PhaseSummary {
        let mut acc = PhaseAccumulator::new(&MetricsOptions {
            percentiles: vec![50.0, 99.0],
            goodput: None,
        });
        let ms = 1_000_000;
        for (i, &t) in ttfts_ms.iter().enumerate() {
            acc.record(&RequestRecord {
                request_id: String::new(),
                trace: Default::default(),
                phase: 0,
                index: i as u64,
                tag: None,
                scheduled_ns: 0,
                sent_ns: 0,
                first_byte_ns: None,
                chunks: vec![Chunk {
                    t_ns: t * ms,
                    tokens: 1,
                    client_delay_ns: None,
                }],
                end_ns: t * ms,
                input_tokens: 1,
                output_tokens: 1,
                usage_output_tokens: None,
                text_tokens: 1,
                warmup: false,
                http_status: Some(200),
                error: None,
                server_timings: None,
                reached: Default::default(),
                retried: false,
                send_write_ns: None,
                cancelled: false,
                target: None,
                answer: Default::default(),
                session: Default::default(),
            });
        }
        for i in 0..failed {
            acc.record(&RequestRecord {
                request_id: String::new(),
                trace: Default::default(),
                phase: 0,
                index: 1000 + i,
                tag: None,
                scheduled_ns: 0,
                sent_ns: 0,
                first_byte_ns: None,
                chunks: vec![],
                end_ns: ms,
                input_tokens: 1,
                output_tokens: 0,
                usage_output_tokens: None,
                text_tokens: 0,
                warmup: false,
                http_status: Some(500),
                error: Some(RequestError {
                    kind: crate::measuring::metrics::ErrorKind::Http5xx,
                    message: "boom".into(),
                }),
                server_timings: None,
                reached: Default::default(),
                retried: false,
                send_write_ns: None,
                cancelled: false,
                target: None,
                answer: Default::default(),
                session: Default::default(),
            });
        }
        acc.summarize(&PhaseInfo {
            name: "main".into(),
            duration_ns: 1_000 * ms,
            max_concurrency: None,
            request_rate: None,
            burstiness: None,
            steady_window: None,
        })
    }

    #[test]
    fn parses_k6_style_expressions() {
        let t: Threshold = " p99_ttft_ms < 500 ".parse().unwrap();
        assert_eq!(
            (t.text.as_str(), t.op, t.limit),
            ("p99_ttft_ms<500", Op::Lt, 500.0)
        );
        assert_eq!(t.percentile(), Some(99.0));
        let t: Threshold = "error_rate<=1%".parse().unwrap();
        assert_eq!((t.op, t.limit), (Op::Le, 0.01));
        let t: Threshold = "p99.9_itl_per_token_ms>=0.5".parse().unwrap();
        assert_eq!(t.percentile(), Some(99.9));
        for ok in [
            "mean_tpot_ms!=3",
            "output_throughput>100",
            "median_send_lateness_ms==0",
        ] {
            assert!(ok.parse::<Threshold>().is_ok(), "{ok}");
        }
    }

    #[test]
    fn bad_thresholds_say_what_is_wrong() {
        assert!(matches!(
            "p99_ttft_ms".parse::<Threshold>(),
            Err(ThresholdError::Syntax(_))
        ));
        assert!(matches!(
            "<5".parse::<Threshold>(),
            Err(ThresholdError::Syntax(_))
        ));
        assert!(matches!(
            "p99_ttft<5".parse::<Threshold>(),
            Err(ThresholdError::Metric { .. })
        ));
        assert!(matches!(
            "p0_ttft_ms<5".parse::<Threshold>(),
            Err(ThresholdError::Metric { .. })
        ));
        assert!(matches!(
            "p99_ttft_ms<fast".parse::<Threshold>(),
            Err(ThresholdError::Value { .. })
        ));
        let e = "latency<3".parse::<Threshold>().unwrap_err().to_string();
        assert!(
            e.contains("unknown metric `latency`") && e.contains("error_rate"),
            "{e}"
        );
    }

    #[test]
    fn verdicts_read_the_summary() {
        let s = phase(&[100, 200, 300], 1);
        let v = |t: &str| t.parse::<Threshold>().unwrap().check(&s);
        assert!(v("p50_ttft_ms<250").pass);
        assert_eq!(v("p50_ttft_ms<250").value, Some(200.0));
        assert!(!v("p99_ttft_ms<250").pass);
        assert!(v("max_ttft_ms<=300").pass);
        assert!(!v("error_rate<0.2").pass);
        assert_eq!(v("error_rate<0.2").value, Some(0.25));
        assert!(v("completed==3").pass);
        // A percentile that was not computed, or goodput without an SLO: no data, failed.
        let missing = v("p90_ttft_ms<1000");
        assert_eq!((missing.value, missing.pass), (None, false));
        assert_eq!(missing.value_text(), "no data");
        assert!(!v("request_goodput>0").pass);
        // No successful request: latency thresholds have no data.
        let empty = phase(&[], 2);
        let t: Threshold = "p99_ttft_ms<500".parse().unwrap();
        assert!(!t.check(&empty).pass);
    }

    #[test]
    fn client_delay_thresholds_read_the_kernel_stamped_chunks() {
        let t: Threshold = "p99_client_delay_ms<0.05".parse().unwrap();
        assert_eq!(t.percentile(), Some(99.0));
        // No chunk had a kernel time: no data, failed.
        let v = t.check(&phase(&[100, 200], 0));
        assert_eq!((v.value, v.pass), (None, false));
        // Four chunks the client read 10, 20, 30 and 40 µs after the kernel received them.
        let chunks: Vec<serde_json::Value> = [10u64, 20, 30, 40]
            .iter()
            .map(|us| serde_json::json!({ "t_ns": us * 1_000_000, "tokens": 1, "client_delay_ns": us * 1000 }))
            .collect();
        let record: RequestRecord = serde_json::from_value(serde_json::json!({
            "phase": 0, "index": 0, "scheduled_ns": 0, "sent_ns": 0, "chunks": chunks,
            "end_ns": 50_000_000, "input_tokens": 1, "output_tokens": 4, "text_tokens": 4,
            "http_status": 200,
        }))
        .expect("a valid record");
        let mut acc = PhaseAccumulator::new(&MetricsOptions::default());
        acc.record(&record);
        let s = acc.summarize(&PhaseInfo {
            name: "main".into(),
            duration_ns: 1_000_000_000,
            max_concurrency: None,
            request_rate: None,
            steady_window: None,
            burstiness: None,
        });
        // numpy's P99 of 10, 20, 30, 40 µs: 30 + 0.97 × 10 = 39.7 µs.
        let v = t.check(&s);
        assert!((v.value.expect("a value") - 0.0397).abs() < 1e-9, "{v:?}");
        assert!(v.pass);
        let max: Threshold = "max_client_delay_ms<0.04".parse().unwrap();
        assert_eq!(
            (max.check(&s).value, max.check(&s).pass),
            (Some(0.04), false)
        );
    }

    /// Two targets: target 0 answers in 10 ms, target 1 in 30 ms and fails once; one
    /// request to target 1 is cancelled by the scenario.
    fn two_targets() -> PhaseSummary {
        let mut acc = PhaseAccumulator::new(&MetricsOptions {
            percentiles: vec![90.0],
            goodput: None,
        });
        for (i, (target, ttft_ms, fails, cancelled)) in [
            (0, 10, false, false),
            (0, 10, false, false),
            (1, 30, false, false),
            (1, 30, true, false),
            (1, 20, false, true),
        ]
        .into_iter()
        .enumerate()
        {
            let error = fails.then(|| serde_json::json!({"kind": "http_5xx", "message": "x"}));
            acc.record(
                &serde_json::from_value(serde_json::json!({
                    "phase": 0, "index": i, "scheduled_ns": 0, "sent_ns": 0,
                    "chunks": if fails { serde_json::json!([]) } else {
                        serde_json::json!([{"t_ns": ttft_ms * 1_000_000, "tokens": 1}])
                    },
                    "end_ns": ttft_ms * 1_000_000, "input_tokens": 1, "output_tokens": 1,
                    "text_tokens": 1, "target": target, "cancelled": cancelled, "error": error,
                }))
                .expect("a record"),
            );
        }
        acc.summarize(&PhaseInfo {
            name: "main".into(),
            duration_ns: 1_000_000_000,
            max_concurrency: None,
            steady_window: None,
            request_rate: None,
            burstiness: None,
        })
    }

    #[test]
    fn a_threshold_may_name_a_target() {
        let s = two_targets();
        let v = |t: &str| t.parse::<Threshold>().unwrap().check(&s);
        assert_eq!(v("p90_ttft_ms[target=0]<15").value, Some(10.0));
        assert!(v("p90_ttft_ms[target=0]<15").pass);
        // Target 1's TTFT includes its cancelled request's (20 ms) but not its failure.
        assert_eq!(v("max_ttft_ms[target=1]<15").value, Some(30.0));
        assert_eq!(v("min_ttft_ms[target=1]<15").value, Some(20.0));
        assert_eq!(v("error_rate[target=1]<0.1").value, Some(0.5));
        assert_eq!(v("cancelled[target=1]==1").value, Some(1.0));
        assert_eq!(v("completed [target=0] >= 2").value, Some(2.0));
        // The whole phase, and a target the phase never sent to (no data: fails).
        assert_eq!(v("cancelled==1").value, Some(1.0));
        assert_eq!(v("error_rate<1").value, Some(0.25));
        let absent = v("completed[target=5]>0");
        assert_eq!((absent.value, absent.pass), (None, false));
        assert_eq!(
            "p99_ttft_ms[target=1]<500"
                .parse::<Threshold>()
                .unwrap()
                .target,
            Some(1)
        );
    }

    #[test]
    fn a_bad_scope_or_a_metric_targets_lack_is_refused() {
        for (text, what) in [
            ("p99_ttft_ms[tag=a]<5", "is not a scope"),
            ("p99_ttft_ms[target=-1]<5", "is not a scope"),
            ("p99_ttft_ms[target=1<5", "expected METRIC OP VALUE"),
            (
                "p99_itl_ms[target=0]<5",
                "a target's row has no `p99_itl_ms`",
            ),
            ("output_throughput[target=0]>5", "a target's row has no"),
        ] {
            let e = text.parse::<Threshold>().unwrap_err().to_string();
            assert!(e.contains(what), "{text}: {e}");
        }
    }

    #[test]
    fn missing_percentiles_are_listed_once() {
        let ts = parse_all(&[
            "p95_ttft_ms<1",
            "p95_e2el_ms<2",
            "p99_itl_ms<3",
            "error_rate<0.1",
        ])
        .unwrap();
        assert_eq!(missing_percentiles(&ts, &[99.0]), vec![95.0]);
        let all = check_all(&ts, &[phase(&[1], 0), phase(&[2], 0)]);
        assert_eq!(all.len(), 8);
    }
}
