//! Common stop conditions for `Scenario::stop`: build one in `new`, then return
//! `Ok(self.stop_when.check(&snapshot))`.
//!
//! ```
//! use bench_scenario_sdk::stops::StopWhen;
//! let stop = StopWhen::new().p99_ttft_above_ms(500.0).error_rate_above(0.05);
//! # let _ = stop;
//! ```

use crate::Snapshot;

/// A set of conditions, any of which ends the phase. Latency and error-rate conditions
/// are judged only once `min_completed` requests have finished (10 by default), so one
/// slow first request does not end a phase.
#[derive(Clone, Debug, PartialEq)]
pub struct StopWhen {
    p99_ttft_ms: Option<f64>,
    p99_e2el_ms: Option<f64>,
    error_rate: Option<f64>,
    failures: Option<u64>,
    seconds: Option<f64>,
    output_tokens: Option<u64>,
    /// Server metrics and the value each must not pass.
    server: Vec<(String, f64)>,
    min_completed: u64,
}

impl Default for StopWhen {
    fn default() -> StopWhen {
        StopWhen {
            p99_ttft_ms: None,
            p99_e2el_ms: None,
            error_rate: None,
            failures: None,
            seconds: None,
            output_tokens: None,
            server: vec![],
            min_completed: 10,
        }
    }
}

impl StopWhen {
    pub fn new() -> StopWhen {
        StopWhen::default()
    }

    /// When the p99 time to first token passes `ms`.
    pub fn p99_ttft_above_ms(mut self, ms: f64) -> StopWhen {
        self.p99_ttft_ms = Some(ms);
        self
    }

    /// When the p99 end-to-end latency passes `ms`.
    pub fn p99_e2el_above_ms(mut self, ms: f64) -> StopWhen {
        self.p99_e2el_ms = Some(ms);
        self
    }

    /// When more than this share of finished requests failed (0.05 = 5 %).
    pub fn error_rate_above(mut self, rate: f64) -> StopWhen {
        self.error_rate = Some(rate);
        self
    }

    /// When this many requests have failed.
    pub fn failures_at_least(mut self, n: u64) -> StopWhen {
        self.failures = Some(n);
        self
    }

    /// When the phase has run this long.
    pub fn after_seconds(mut self, seconds: f64) -> StopWhen {
        self.seconds = Some(seconds);
        self
    }

    /// When this many output tokens have arrived.
    pub fn after_output_tokens(mut self, n: u64) -> StopWhen {
        self.output_tokens = Some(n);
        self
    }

    /// When the server metric `name` passes `limit` at a scrape (KV-cache use,
    /// `"vllm:kv_cache_usage_perc"` above 0.95; waiting requests,
    /// `"vllm:num_requests_waiting"` above 0). A metric the server does not export never
    /// fires.
    pub fn server_above(mut self, name: &str, limit: f64) -> StopWhen {
        self.server.push((name.to_string(), limit));
        self
    }

    /// Requests that must finish before latency and error-rate conditions count.
    pub fn min_completed(mut self, n: u64) -> StopWhen {
        self.min_completed = n;
        self
    }

    /// Why the phase should stop now, or `None`.
    pub fn reason(&self, s: &Snapshot) -> Option<String> {
        if let Some(limit) = self.seconds.filter(|l| s.elapsed >= *l) {
            return Some(format!("ran {:.1} s (limit {limit} s)", s.elapsed));
        }
        if let Some(limit) = self.output_tokens.filter(|l| s.output_tokens >= *l) {
            return Some(format!("{} output tokens (limit {limit})", s.output_tokens));
        }
        if let Some(limit) = self.failures.filter(|l| s.failed >= *l) {
            return Some(format!("{} failed requests (limit {limit})", s.failed));
        }
        for (name, limit) in &self.server {
            if let Some(v) = s.server(name).filter(|v| v > limit) {
                return Some(format!("server {name} {v} above {limit}"));
            }
        }
        if s.completed + s.failed < self.min_completed {
            return None;
        }
        if let Some(limit) = self.error_rate.filter(|l| s.error_rate() > *l) {
            return Some(format!("error rate {:.3} above {limit}", s.error_rate()));
        }
        if let Some(limit) = self.p99_ttft_ms.filter(|l| s.ttft_p99_ms > *l) {
            return Some(format!("p99 TTFT {:.1} ms above {limit} ms", s.ttft_p99_ms));
        }
        if let Some(limit) = self.p99_e2el_ms.filter(|l| s.e2el_p99_ms > *l) {
            return Some(format!("p99 E2EL {:.1} ms above {limit} ms", s.e2el_p99_ms));
        }
        None
    }

    /// Whether any condition holds.
    pub fn check(&self, s: &Snapshot) -> bool {
        self.reason(s).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> Snapshot {
        Snapshot {
            phase: 0,
            elapsed: 5.0,
            sent: 20,
            completed: 18,
            failed: 2,
            in_flight: 0,
            output_tokens: 1000,
            ttft_p50_ms: 40.0,
            ttft_p99_ms: 300.0,
            e2el_p99_ms: 900.0,
            server: vec![crate::ServerValue {
                name: "vllm:num_requests_waiting".into(),
                value: 3.0,
            }],
        }
    }

    #[test]
    fn each_condition_fires_only_past_its_limit() {
        let s = snapshot();
        assert!(!StopWhen::new().check(&s));
        assert!(StopWhen::new().p99_ttft_above_ms(250.0).check(&s));
        assert!(!StopWhen::new().p99_ttft_above_ms(350.0).check(&s));
        assert!(StopWhen::new().error_rate_above(0.05).check(&s));
        assert!(!StopWhen::new().error_rate_above(0.2).check(&s));
        assert!(StopWhen::new().after_seconds(5.0).check(&s));
        assert!(StopWhen::new().after_output_tokens(1000).check(&s));
        assert!(!StopWhen::new().failures_at_least(3).check(&s));
        let waiting = "vllm:num_requests_waiting";
        assert_eq!(
            StopWhen::new()
                .server_above(waiting, 2.0)
                .reason(&s)
                .as_deref(),
            Some("server vllm:num_requests_waiting 3 above 2")
        );
        assert!(!StopWhen::new().server_above(waiting, 3.0).check(&s));
        assert!(!StopWhen::new().server_above("vllm:other", 0.0).check(&s));
    }

    #[test]
    fn latency_waits_for_enough_finished_requests() {
        let s = snapshot();
        let stop = StopWhen::new().p99_ttft_above_ms(100.0).min_completed(50);
        assert!(!stop.check(&s));
        assert_eq!(
            StopWhen::new()
                .p99_e2el_above_ms(500.0)
                .reason(&s)
                .as_deref(),
            Some("p99 E2EL 900.0 ms above 500 ms")
        );
    }
}
