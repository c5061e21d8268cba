//! A phase's accumulated statistics as a serialisable state, and the merge of several
//! (the shards of one run): counters add, histograms add bucket for bucket, the send/end
//! times merge into one sweep line and the per-second token buckets add. Summarising the
//! merged accumulator builds the same `PhaseSummary` a single process would.

use serde::{Deserialize, Serialize};

mod consistent;
mod latency_states;

pub use latency_states::LatencyStates;

use super::super::answer::{AnswerState, AnswerStats};
use super::super::catalogue;
use super::super::options::MetricsOptions;
use super::super::prefix_cache::PrefixCacheStats;
use super::super::sessions::{SessionStats, SessionsState};
use super::super::stamp_source::{StampSourceState, StampSourceStats};
use super::super::stat::{add_count, in_field, StatStateError, StreamingStat};
use super::super::tags::{TagState, TagStats};
use super::{kind_index, FailureCount, PhaseAccumulator, ERROR_KINDS};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseState {
    pub completed: u64,
    pub failed: u64,
    #[serde(default)]
    pub retried: u64,
    #[serde(default)]
    pub cancelled: u64,
    /// Non-zero kinds only.
    pub failures: Vec<FailureCount>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub chunks: u64,
    pub chunk_tokens: u64,
    pub usage_tokens: u64,
    pub usage_requests: u64,
    pub text_tokens: u64,
    /// Requests within the goodput SLO.
    pub good: u64,
    /// The catalogue's accumulated latencies, each under its `state_key` (`ttft`, …,
    /// `lateness`).
    #[serde(flatten)]
    pub latencies: LatencyStates,
    /// Send and end times (ns from the phase start) of every request with a non-empty
    /// `[sent, end)`, ascending, for the exact peak concurrency.
    pub starts_ns: Vec<u64>,
    pub ends_ns: Vec<u64>,
    /// Output tokens per second `[k s, k+1 s)` of the phase.
    pub tokens_per_second: Vec<u64>,
    /// Per-tag statistics; absent when no request had a tag.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<TagState>,
    /// Per-target statistics, keyed by the target's index; absent with one target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TagState>,
    #[serde(default)]
    pub answer: AnswerState,
    /// Chunks and sends by clock, the client delay and the send write durations.
    #[serde(default)]
    pub clock: StampSourceState,
    /// Per-session aggregates and TTFT by turn index; absent when no request named a
    /// session (and in shards written before sessions).
    #[serde(default, skip_serializing_if = "SessionsState::is_empty")]
    pub sessions: SessionsState,
    /// The answers' cached prompt tokens (absent in shards written before they were kept).
    #[serde(default)]
    pub prefix_cache: PrefixCacheStats,
}

/// Two sorted vectors as one.
fn merge_sorted(a: &[u64], b: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] <= b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

impl PhaseAccumulator {
    /// Everything needed to merge this phase with another shard's.
    pub fn state(&self) -> PhaseState {
        PhaseState {
            completed: self.completed,
            failed: self.failed,
            retried: self.retried,
            cancelled: self.cancelled,
            failures: self.failure_counts(),
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            chunks: self.chunks,
            chunk_tokens: self.chunk_tokens,
            usage_tokens: self.usage_tokens,
            usage_requests: self.usage_requests,
            text_tokens: self.text_tokens,
            good: self.good,
            latencies: LatencyStates::new(
                self.latencies.iter().map(StreamingStat::state).collect(),
            ),
            starts_ns: self.starts.clone(),
            ends_ns: self.ends.clone(),
            tokens_per_second: self.tokens_per_second.clone(),
            tags: self.tags.state(),
            targets: self.targets.state(),
            answer: self.answer.state(),
            clock: self.clock.state(),
            sessions: self.sessions.state(),
            prefix_cache: self.prefix_cache.clone(),
        }
    }

    /// The accumulator a state was taken from, summarised with `opts`. A state whose
    /// counts no run could have written (more requests than its histograms hold, a count
    /// past `u64::MAX`) is refused, naming the count.
    pub fn from_state(
        opts: &MetricsOptions,
        s: &PhaseState,
    ) -> Result<PhaseAccumulator, StatStateError> {
        let mut acc = PhaseAccumulator::new(opts);
        acc.latencies = s
            .latencies
            .iter()
            .map(|(key, st)| StreamingStat::from_state(st).map_err(in_field(key)))
            .collect::<Result<_, _>>()?;
        acc.tags = TagStats::from_state(&s.tags).map_err(in_field("tags"))?;
        acc.targets = TagStats::from_state(&s.targets).map_err(in_field("targets"))?;
        acc.answer = AnswerStats::from_state(&s.answer).map_err(in_field("answer"))?;
        acc.clock = StampSourceStats::from_state(&s.clock).map_err(in_field("clock"))?;
        acc.sessions = SessionStats::from_state(&s.sessions).map_err(in_field("sessions"))?;
        acc.prefix_cache = s.prefix_cache.clone();
        consistent::check(s)?;
        acc.completed = s.completed;
        acc.failed = s.failed;
        acc.retried = s.retried;
        acc.cancelled = s.cancelled;
        for f in &s.failures {
            let k = kind_index(f.kind);
            acc.failures[k] = f.count;
            acc.first_messages[k] = Some(f.first_message.clone());
        }
        acc.input_tokens = s.input_tokens;
        acc.output_tokens = s.output_tokens;
        acc.chunks = s.chunks;
        acc.chunk_tokens = s.chunk_tokens;
        acc.usage_tokens = s.usage_tokens;
        acc.usage_requests = s.usage_requests;
        acc.text_tokens = s.text_tokens;
        acc.good = s.good;
        acc.starts = s.starts_ns.clone();
        acc.ends = s.ends_ns.clone();
        acc.tokens_per_second = s.tokens_per_second.clone();
        Ok(acc)
    }

    /// Adds another shard's requests of the same phase. Times are taken as measured from a
    /// common phase start (shards started together with `--start-at`). Request counts
    /// are added checked (a sum past `u64::MAX` is refused, naming the count); token
    /// totals saturate, as one process's do.
    pub fn merge(&mut self, o: &PhaseAccumulator) -> Result<(), StatStateError> {
        for (field, a, b) in [
            ("completed", &mut self.completed, o.completed),
            ("failed", &mut self.failed, o.failed),
            ("retried", &mut self.retried, o.retried),
            ("cancelled", &mut self.cancelled, o.cancelled),
            ("chunks", &mut self.chunks, o.chunks),
            ("chunk_tokens", &mut self.chunk_tokens, o.chunk_tokens),
            ("usage_requests", &mut self.usage_requests, o.usage_requests),
            ("good", &mut self.good, o.good),
        ] {
            add_count(field, a, b)?;
        }
        for (k, kind) in ERROR_KINDS.iter().enumerate() {
            let field = format!("failures.{}", kind.key());
            add_count(&field, &mut self.failures[k], o.failures[k])?;
        }
        let latencies = catalogue::accumulated().zip(&mut self.latencies);
        for (((_, a), mine), theirs) in latencies.zip(&o.latencies) {
            mine.merge(theirs).map_err(in_field(a.state_key))?;
        }
        self.tags.merge(&o.tags).map_err(in_field("tags"))?;
        self.targets
            .merge(&o.targets)
            .map_err(in_field("targets"))?;
        self.answer.merge(&o.answer).map_err(in_field("answer"))?;
        self.clock.merge(&o.clock).map_err(in_field("clock"))?;
        self.sessions
            .merge(&o.sessions)
            .map_err(in_field("sessions"))?;
        self.prefix_cache.merge(&o.prefix_cache);
        self.merge_totals(o);
        Ok(())
    }

    /// The token totals, the per-second buckets and the send/end times of another shard.
    fn merge_totals(&mut self, o: &PhaseAccumulator) {
        for (a, b) in [
            (&mut self.input_tokens, o.input_tokens),
            (&mut self.output_tokens, o.output_tokens),
            (&mut self.usage_tokens, o.usage_tokens),
            (&mut self.text_tokens, o.text_tokens),
        ] {
            *a = a.saturating_add(b);
        }
        for k in 0..ERROR_KINDS.len() {
            if self.first_messages[k].is_none() {
                self.first_messages[k] = o.first_messages[k].clone();
            }
        }
        self.starts = merge_sorted(&self.starts, &o.starts);
        self.ends = merge_sorted(&self.ends, &o.ends);
        self.steady.merge(&o.steady);
        if self.tokens_per_second.len() < o.tokens_per_second.len() {
            self.tokens_per_second.resize(o.tokens_per_second.len(), 0);
        }
        for (a, b) in self.tokens_per_second.iter_mut().zip(&o.tokens_per_second) {
            *a = a.saturating_add(*b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PhaseInfo, PhaseSummary};
    use super::*;
    use crate::measuring::metrics::catalogue::{LATENCIES, SEND_LATENESS, TTFT};
    use crate::measuring::metrics::record::{Chunk, ErrorKind, RequestError, RequestRecord};
    use crate::measuring::metrics::Distribution;

    /// A varied record; built from JSON so fields with defaults need not be listed.
    fn record(index: u64) -> RequestRecord {
        let sent = index * 7_000_000;
        let chunks: Vec<Chunk> = (1..=(index % 5 + 1))
            .map(|c| Chunk {
                t_ns: sent + c * (1_000_000 + index * 37_000),
                tokens: (c % 3 + 1) as u32,
                // Three requests in four read on the kernel's clock.
                client_delay_ns: (!index.is_multiple_of(4)).then_some(2_000 + index * 13 + c * 7),
            })
            .collect();
        let tokens: u64 = chunks.iter().map(|c| u64::from(c.tokens)).sum();
        let error = (index % 11 == 3).then(|| RequestError {
            kind: if index.is_multiple_of(2) {
                ErrorKind::Timeout
            } else {
                ErrorKind::Http5xx
            },
            message: format!("failure {index}"),
        });
        serde_json::from_value(serde_json::json!({
            "phase": 0,
            "index": index,
            "scheduled_ns": sent,
            "sent_ns": sent + index % 3 * 1000,
            "first_byte_ns": chunks.first().map(|c| c.t_ns),
            "end_ns": chunks.last().map_or(sent, |c| c.t_ns + 10),
            "output_tokens": tokens,
            "usage_output_tokens": (!index.is_multiple_of(4)).then_some(tokens),
            "text_tokens": chunks.len(),
            "chunks": chunks,
            "input_tokens": 100 + index,
            "http_status": 200,
            "error": error,
            "send_write_ns": (!index.is_multiple_of(5)).then_some(5_000 + index * 11),
        }))
        .expect("a valid record")
    }

    #[test]
    fn merged_shards_summarise_like_one_accumulator() {
        let opts = MetricsOptions {
            percentiles: vec![50.0, 90.0, 99.0],
            goodput: Some("ttft:3 e2el:20".parse().unwrap()),
        };
        let info = PhaseInfo {
            name: "main".into(),
            duration_ns: 3_000_000_000,
            max_concurrency: None,
            request_rate: Some(140.0),
            burstiness: None,
            steady_window: None,
        };
        let mut whole = PhaseAccumulator::new(&opts);
        let mut shards: Vec<PhaseAccumulator> =
            (0..3).map(|_| PhaseAccumulator::new(&opts)).collect();
        for i in 0..400 {
            let r = record(i);
            whole.record(&r);
            shards[(i % 3) as usize].record(&r);
        }
        let mut merged = PhaseAccumulator::new(&opts);
        for s in &shards {
            let json = serde_json::to_string(&s.state()).unwrap();
            let state: PhaseState = serde_json::from_str(&json).unwrap();
            merged
                .merge(&PhaseAccumulator::from_state(&opts, &state).unwrap())
                .unwrap();
        }
        let (a, b) = (merged.summarize(&info), whole.summarize(&info));
        assert_eq!(
            (
                a.completed,
                a.failed,
                a.total_input_tokens,
                a.total_output_tokens
            ),
            (
                b.completed,
                b.failed,
                b.total_input_tokens,
                b.total_output_tokens
            )
        );
        assert!(a.failed > 0 && a.goodput.is_some());
        // Counts add; the first message is the first shard's (shards do not share a clock).
        let kinds = |s: &PhaseSummary| -> Vec<(ErrorKind, u64)> {
            s.failures_by_kind
                .iter()
                .map(|f| (f.kind, f.count))
                .collect()
        };
        assert_eq!(kinds(&a), kinds(&b));
        assert_eq!(a.failures_by_kind[1].first_message, "failure 36");
        assert_eq!(a.token_accounting, b.token_accounting);
        let clock_counts = |s: &PhaseSummary| {
            let c = &s.clock;
            (
                c.kernel_chunks,
                c.read_chunks,
                c.socket_write_sends,
                c.handoff_sends,
            )
        };
        assert_eq!(clock_counts(&a), clock_counts(&b));
        assert!(a.clock.kernel_chunks > 0 && a.clock.read_chunks > 0);
        assert!(a.clock.socket_write_sends > 0 && a.clock.handoff_sends > 0);
        assert_eq!(
            (a.goodput, a.peak_concurrency, a.peak_output_throughput),
            (b.goodput, b.peak_concurrency, b.peak_output_throughput)
        );
        // Every latency of the catalogue, whoever accumulates it: one added to the
        // catalogue is held to the merge here with no other edit.
        for l in LATENCIES.iter().filter(|l| l.accumulated.is_some()) {
            assert!((l.distribution)(&b).count > 0, "{} has samples", l.key);
        }
        let pairs = LATENCIES
            .iter()
            .map(|l| (l.key, (l.distribution)(&a), (l.distribution)(&b)));
        for (key, x, y) in pairs.chain([("send_write", &a.clock.send_write, &b.clock.send_write)]) {
            assert_same(key, x, y);
        }
    }

    /// The merged distribution `x` of `key` is the single process's `y`.
    fn assert_same(key: &str, x: &Distribution, y: &Distribution) {
        assert_eq!(
            (x.count, x.min, x.max, x.median),
            (y.count, y.min, y.max, y.median),
            "{key}"
        );
        assert_eq!(x.percentiles, y.percentiles, "{key}");
        assert!(
            (x.mean - y.mean).abs() <= 1e-9 * y.mean.abs().max(1.0),
            "{key}"
        );
        assert!(
            (x.std - y.std).abs() <= 1e-6 * y.std.abs().max(1.0),
            "{key}"
        );
    }

    fn refusal(opts: &MetricsOptions, s: &PhaseState) -> String {
        PhaseAccumulator::from_state(opts, s)
            .expect_err("a refusal")
            .to_string()
    }

    #[test]
    fn counts_no_run_could_write_are_refused_naming_them() {
        let opts = MetricsOptions {
            percentiles: vec![50.0],
            goodput: None,
        };
        let mut acc = PhaseAccumulator::new(&opts);
        // Ten requests, one failed (index 3).
        for i in 0..10 {
            acc.record(&record(i));
        }
        let good = acc.state();
        assert!(PhaseAccumulator::from_state(&opts, &good).is_ok());
        let tampered = |edit: &dyn Fn(&mut PhaseState)| {
            let mut s = good.clone();
            edit(&mut s);
            refusal(&opts, &s)
        };
        // The u64::MAX that wrapped a merged total to 9.
        assert_eq!(
            tampered(&|s| s.completed = u64::MAX),
            "`completed` (18446744073709551615) + `failed` (1) + `cancelled` (0) overflow a 64-bit count"
        );
        assert_eq!(
            tampered(&|s| s.completed = 100),
            "`completed` + `failed` + `cancelled` is 101, but the `lateness` histogram holds 10 requests"
        );
        assert_eq!(
            tampered(&|s| s.failures[0].count = 5),
            "`failures` add up to 5, but `failed` is 1"
        );
        assert_eq!(
            tampered(&|s| s.good = 50),
            "`good` is 50, more than `completed` (9)"
        );
        assert_eq!(
            tampered(&|s| s.latencies.get_mut(&TTFT).weight = 3),
            "`ttft`: its histogram holds 9 samples, its `weight` says 3"
        );
        assert_eq!(
            tampered(&|s| s.ends_ns[0] = s.starts_ns[0]),
            "`ends_ns`[0] (0) is not after `starts_ns`[0] (0)"
        );
        assert_eq!(
            tampered(&|s| s.clock.handoff_sends = 1000),
            "`clock.socket_write_sends + handoff_sends` is 1008, more than the requests sent (10)"
        );
    }

    #[test]
    fn merged_counts_past_u64_max_are_refused_and_token_totals_saturate() {
        let opts = MetricsOptions {
            percentiles: vec![50.0],
            goodput: None,
        };
        // Half of u64's range of requests (the most a V2 histogram holds) in each of
        // three shards: each consistent alone, the three past u64::MAX.
        let mut lateness = StreamingStat::new();
        lateness.record_weighted(1e3, i64::MAX as u64);
        let mut half = PhaseAccumulator::new(&opts).state();
        half.completed = i64::MAX as u64;
        *half.latencies.get_mut(&SEND_LATENESS) = lateness.state();
        let mut merged = PhaseAccumulator::from_state(&opts, &half).unwrap();
        let other = PhaseAccumulator::from_state(&opts, &half).unwrap();
        merged.merge(&other).unwrap();
        assert_eq!(
            merged.merge(&other).unwrap_err().to_string(),
            "`completed` overflows a 64-bit count when the shards are added (18446744073709551614 + 9223372036854775807)"
        );
        // Token totals saturate, as one process's do.
        let mut one = PhaseAccumulator::new(&opts);
        one.record(&record(1));
        let mut full = one.state();
        full.input_tokens = u64::MAX;
        let mut merged = PhaseAccumulator::from_state(&opts, &full).unwrap();
        merged
            .merge(&PhaseAccumulator::from_state(&opts, &full).unwrap())
            .unwrap();
        assert_eq!(merged.input_tokens, u64::MAX);
        assert_eq!(merged.completed, 2);
    }
}
