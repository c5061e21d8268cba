//! A phase's accumulated statistics as a serialisable state, and the merge of several
//! (the shards of one run): counters add, histograms add bucket for bucket, the send/end
//! times merge into one sweep line and the per-second token buckets add. Summarising the
//! merged accumulator builds the same `PhaseSummary` a single process would.

use serde::{Deserialize, Serialize};

use super::super::answer::{AnswerState, AnswerStats};
use super::super::clock::{ClockState, ClockStats};
use super::super::options::MetricsOptions;
use super::super::stat::{StatState, StatStateError, StreamingStat};
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
    pub ttft: StatState,
    pub tpot: StatState,
    pub itl: StatState,
    pub e2el: StatState,
    pub token_latency: StatState,
    pub itl_per_token: StatState,
    pub lateness: StatState,
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
    pub clock: ClockState,
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
            ttft: self.ttft.state(),
            tpot: self.tpot.state(),
            itl: self.itl.state(),
            e2el: self.e2el.state(),
            token_latency: self.token_latency.state(),
            itl_per_token: self.itl_per_token.state(),
            lateness: self.lateness.state(),
            starts_ns: self.starts.clone(),
            ends_ns: self.ends.clone(),
            tokens_per_second: self.tokens_per_second.clone(),
            tags: self.tags.state(),
            targets: self.targets.state(),
            answer: self.answer.state(),
            clock: self.clock.state(),
        }
    }

    /// The accumulator a state was taken from, summarised with `opts`.
    pub fn from_state(
        opts: &MetricsOptions,
        s: &PhaseState,
    ) -> Result<PhaseAccumulator, StatStateError> {
        let mut acc = PhaseAccumulator::new(opts);
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
        acc.ttft = StreamingStat::from_state(&s.ttft)?;
        acc.tpot = StreamingStat::from_state(&s.tpot)?;
        acc.itl = StreamingStat::from_state(&s.itl)?;
        acc.e2el = StreamingStat::from_state(&s.e2el)?;
        acc.token_latency = StreamingStat::from_state(&s.token_latency)?;
        acc.itl_per_token = StreamingStat::from_state(&s.itl_per_token)?;
        acc.lateness = StreamingStat::from_state(&s.lateness)?;
        acc.starts = s.starts_ns.clone();
        acc.ends = s.ends_ns.clone();
        acc.tokens_per_second = s.tokens_per_second.clone();
        acc.tags = TagStats::from_state(&s.tags)?;
        acc.targets = TagStats::from_state(&s.targets)?;
        acc.answer = AnswerStats::from_state(&s.answer)?;
        acc.clock = ClockStats::from_state(&s.clock)?;
        Ok(acc)
    }

    /// Adds another shard's requests of the same phase. Times are taken as measured from a
    /// common phase start (shards started together with `--start-at`).
    pub fn merge(&mut self, o: &PhaseAccumulator) -> Result<(), StatStateError> {
        self.completed += o.completed;
        self.failed += o.failed;
        self.retried += o.retried;
        self.cancelled += o.cancelled;
        for k in 0..ERROR_KINDS.len() {
            self.failures[k] += o.failures[k];
            if self.first_messages[k].is_none() {
                self.first_messages[k] = o.first_messages[k].clone();
            }
        }
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.chunks += o.chunks;
        self.chunk_tokens += o.chunk_tokens;
        self.usage_tokens += o.usage_tokens;
        self.usage_requests += o.usage_requests;
        self.text_tokens += o.text_tokens;
        self.good += o.good;
        self.ttft.merge(&o.ttft)?;
        self.tpot.merge(&o.tpot)?;
        self.itl.merge(&o.itl)?;
        self.e2el.merge(&o.e2el)?;
        self.token_latency.merge(&o.token_latency)?;
        self.itl_per_token.merge(&o.itl_per_token)?;
        self.lateness.merge(&o.lateness)?;
        self.starts = merge_sorted(&self.starts, &o.starts);
        self.ends = merge_sorted(&self.ends, &o.ends);
        if self.tokens_per_second.len() < o.tokens_per_second.len() {
            self.tokens_per_second.resize(o.tokens_per_second.len(), 0);
        }
        for (a, b) in self.tokens_per_second.iter_mut().zip(&o.tokens_per_second) {
            *a += b;
        }
        self.tags.merge(&o.tags)?;
        self.targets.merge(&o.targets)?;
        self.answer.merge(&o.answer)?;
        self.clock.merge(&o.clock)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PhaseInfo, PhaseSummary};
    use super::*;
    use crate::metrics::record::{Chunk, ErrorKind, RequestError, RequestRecord};

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
        for (x, y) in [
            (&a.ttft, &b.ttft),
            (&a.tpot, &b.tpot),
            (&a.itl, &b.itl),
            (&a.e2el, &b.e2el),
            (&a.token_latency, &b.token_latency),
            (&a.itl_per_token, &b.itl_per_token),
            (&a.lateness, &b.lateness),
            (&a.client_delay, &b.client_delay),
            (&a.clock.send_write, &b.clock.send_write),
        ] {
            assert_eq!(
                (x.count, x.min, x.max, x.median),
                (y.count, y.min, y.max, y.median)
            );
            assert_eq!(x.percentiles, y.percentiles);
            assert!((x.mean - y.mean).abs() <= 1e-9 * y.mean.abs().max(1.0));
            assert!((x.std - y.std).abs() <= 1e-6 * y.std.abs().max(1.0));
        }
    }
}
