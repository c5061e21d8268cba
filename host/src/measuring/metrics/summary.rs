//! Per-phase statistics, accumulated one finished request at a time (vLLM semantics: `calculate_metrics`
//! in vLLM's `vllm/benchmarks/serve.py`) and summarised on demand.
//!
//! Memory: a fixed set of HDR histograms and running sums, plus 16 bytes per sent request
//! (its send and end times, in two sorted vectors, for the exact peak-concurrency sweep) and
//! 8 bytes per second of phase (output tokens per 1-second bucket, for the peak output
//! throughput). No per-request latency is kept.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::answer::{AnswerStats, AnswerSummary};
use super::catalogue::{self, Latency, E2EL, ITL, TPOT, TTFT};
use super::options::{MetricsOptions, Slo};
use super::prefix_cache::{PrefixCacheStats, PrefixCacheSummary};
use super::record::{ErrorKind, RequestRecord};
use super::sessions::{SessionStats, SessionsSummary};
use super::stamp_source::{StampSourceStats, StampSources, CLIENT_DELAY_PERCENTILES};
use super::stat::{Distribution, StreamingStat};
use super::steady_state::{PhaseSpan, SteadyState, SteadyStats};
use crate::workloads::scenario::NamedWindow;

mod mergeable;
use super::tags::{TagStats, TagSummary, TAG_PERCENTILES};
pub use mergeable::PhaseState;

/// P99 send lateness above which the run is flagged as client-bound, in ms.
pub const CLIENT_BOUND_LATENESS_MS: f64 = 10.0;

const NS_PER_S: u64 = 1_000_000_000;
const NS_PER_MS: f64 = 1e6;
/// Chunks stamped later than this (≈ 194 days into the phase) are left out of the peak
/// output throughput rather than growing the bucket vector without bound.
const MAX_BUCKETS: u64 = 1 << 24;

/// Every error kind, in declaration order (the order failures are reported in).
pub const ERROR_KINDS: [ErrorKind; 15] = [
    ErrorKind::Http4xx,
    ErrorKind::RateLimited,
    ErrorKind::Http5xx,
    ErrorKind::HttpOther,
    ErrorKind::Connect,
    ErrorKind::Disconnect,
    ErrorKind::StreamCut,
    ErrorKind::Timeout,
    ErrorKind::FirstTokenTimeout,
    ErrorKind::MalformedSse,
    ErrorKind::MalformedJson,
    ErrorKind::ErrorObject,
    ErrorKind::EmptyCompletion,
    ErrorKind::Cancelled,
    ErrorKind::TooLarge,
];

fn kind_index(k: ErrorKind) -> usize {
    // Exhaustive on purpose: a new ErrorKind must be added to ERROR_KINDS too.
    match k {
        ErrorKind::Http4xx => 0,
        ErrorKind::RateLimited => 1,
        ErrorKind::Http5xx => 2,
        ErrorKind::HttpOther => 3,
        ErrorKind::Connect => 4,
        ErrorKind::Disconnect => 5,
        ErrorKind::StreamCut => 6,
        ErrorKind::Timeout => 7,
        ErrorKind::FirstTokenTimeout => 8,
        ErrorKind::MalformedSse => 9,
        ErrorKind::MalformedJson => 10,
        ErrorKind::ErrorObject => 11,
        ErrorKind::EmptyCompletion => 12,
        ErrorKind::Cancelled => 13,
        ErrorKind::TooLarge => 14,
    }
}

/// What the accumulator cannot know by itself about a phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseInfo {
    pub name: String,
    /// Benchmark duration (vLLM's `dur_s`), ns; every throughput divides by it.
    pub duration_ns: u64,
    pub max_concurrency: Option<u64>,
    /// Configured request rate, req/s; `None` = infinite.
    pub request_rate: Option<f64>,
    pub burstiness: Option<f64>,
    /// The steady-state window the scenario named for the phase (`None`: the plateau
    /// rule finds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_window: Option<NamedWindow>,
}

/// Failed requests of one kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailureCount {
    pub kind: ErrorKind,
    pub count: u64,
    /// The message of the first failure of this kind, so the report says what went wrong
    /// (every message is in requests.jsonl).
    #[serde(default)]
    pub first_message: String,
}

/// Everything reported about one phase. Latency distributions are in milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseSummary {
    pub name: String,
    /// Successful requests.
    pub completed: u64,
    pub failed: u64,
    /// Requests sent a second time, once, after their pooled connection closed with no
    /// answer: the server may have received both copies.
    #[serde(default)]
    pub retried: u64,
    /// Requests the scenario gave up on mid-stream (its `cancel`): neither completed nor
    /// failed; only their TTFT is in the statistics.
    #[serde(default)]
    pub cancelled: u64,
    /// Non-zero counts only, in [`ERROR_KINDS`] order.
    pub failures_by_kind: Vec<FailureCount>,
    pub max_concurrency: Option<u64>,
    /// Configured rate, req/s; `None` = infinite.
    pub request_rate: Option<f64>,
    pub burstiness: Option<f64>,
    pub duration_s: f64,
    /// Input/output tokens of the successful requests.
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    /// Content chunks of the successful requests.
    pub total_chunks: u64,
    /// Output tokens counted three ways, to show when they disagree.
    pub token_accounting: TokenAccounting,
    /// req/s, successful requests.
    pub request_throughput: f64,
    /// Output tok/s.
    pub output_throughput: f64,
    /// (Input + output) tok/s.
    pub total_token_throughput: f64,
    /// Good req/s; `Some` exactly when a goodput SLO was given.
    pub goodput: Option<f64>,
    /// The goodput SLO, when given.
    pub slo: Option<Slo>,
    /// The percentiles every distribution below was computed at (vLLM's
    /// `--metric-percentiles`): the reports show these, and need no other copy of them.
    #[serde(default = "default_percentiles")]
    pub percentiles: Vec<f64>,
    /// Most output tokens received in one 1-second bucket since phase start, tok/s.
    pub peak_output_throughput: f64,
    /// Most requests in flight at once (exact sweep line over `[sent, end)`).
    pub peak_concurrency: f64,
    pub ttft: Distribution,
    pub tpot: Distribution,
    /// Chunk-weighted gaps between consecutive content chunks (vLLM "ITL").
    pub itl: Distribution,
    pub e2el: Distribution,
    /// E2EL / output tokens per request.
    pub token_latency: Distribution,
    /// Each chunk gap divided by that chunk's tokens, weighted per token.
    pub itl_per_token: Distribution,
    /// Send lateness (sent − scheduled) of every sent request; always has P99.
    pub lateness: Distribution,
    /// The client's own delay (read − kernel arrival) of every content chunk of the
    /// successful requests that the kernel stamped; always has P50 and P99.
    #[serde(default)]
    pub client_delay: Distribution,
    /// Which clock stamped the chunks and the sends, and how long the stamped writes took.
    #[serde(default)]
    pub clock: StampSources,
    /// Σ chunk tokens / Σ chunks over the successful requests (0 without chunks).
    pub mean_tokens_per_chunk: f64,
    /// P99 send lateness above [`CLIENT_BOUND_LATENESS_MS`]: the client could not keep its
    /// schedule, so the offered load was lower than configured.
    pub client_bound: bool,
    /// The main metrics per request tag, in natural tag order; empty without tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<TagSummary>,
    /// With several `--target`s, the main metrics per target: each row's `tag` is the
    /// target's index (`0`, `1`, …). Empty with one target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TagSummary>,
    /// Time to first answer token, the reasoning/answer token split, requests per endpoint.
    #[serde(default)]
    pub answer: AnswerSummary,
    /// The catalogue's latencies with no field above, by key (reports read them through
    /// the catalogue); empty while every latency has its field.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub latencies: BTreeMap<String, Distribution>,
    /// Per-session figures and TTFT by turn index; `None` when no request named a session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<SessionsSummary>,
    /// The prefix cache as the answers' usage told it; `None` when none said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCacheSummary>,
    /// The steady-state window of a capped phase and its figures (`steady_state.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyState>,
}

/// The latencies an adaptive scenario decides on, at p50, p90 and p99 whatever
/// `--percentiles` asked for the report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DecisionLatencies {
    pub ttft: Distribution,
    pub tpot: Distribution,
    pub itl: Distribution,
    pub e2el: Distribution,
}

/// The percentiles of [`DecisionLatencies`].
pub const DECISION_PERCENTILES: [f64; 3] = [50.0, 90.0, 99.0];

/// Summaries written before they carried their percentiles were computed at the default.
fn default_percentiles() -> Vec<f64> {
    MetricsOptions::default().percentiles
}

impl PhaseSummary {
    /// Failed requests of `kind`.
    pub fn failures(&self, kind: ErrorKind) -> u64 {
        self.failures_by_kind
            .iter()
            .find(|f| f.kind == kind)
            .map_or(0, |f| f.count)
    }
}

/// Output tokens of the successful requests, three ways: the server's usage, the run's
/// tokenizer over the generated text, and the number of content chunks. The totals in the
/// report use usage for every request that reported it, the tokenizer for the others.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenAccounting {
    /// Successful requests whose server reported `usage.completion_tokens`.
    pub usage_requests: u64,
    pub usage_tokens: u64,
    pub tokenizer_tokens: u64,
    pub chunks: u64,
}

impl TokenAccounting {
    /// Which count the totals come from, given `completed` successful requests.
    pub fn source(&self, completed: u64) -> &'static str {
        match self.usage_requests {
            0 => "tokenizer",
            n if n == completed => "server usage",
            _ => "server usage, tokenizer where absent",
        }
    }
}

/// Streaming statistics of one phase.
#[derive(Clone, Debug)]
pub struct PhaseAccumulator {
    opts: MetricsOptions,
    completed: u64,
    failed: u64,
    /// Requests sent a second time (see `RequestRecord::retried`).
    retried: u64,
    /// Requests the scenario cancelled (see `RequestRecord::cancelled`).
    cancelled: u64,
    failures: [u64; ERROR_KINDS.len()],
    first_messages: [Option<String>; ERROR_KINDS.len()],
    input_tokens: u64,
    output_tokens: u64,
    chunks: u64,
    chunk_tokens: u64,
    /// Output tokens by server usage, and how many successful requests reported usage.
    usage_tokens: u64,
    usage_requests: u64,
    /// Output tokens by the run's tokenizer.
    text_tokens: u64,
    good: u64,
    /// One histogram per latency of [`catalogue::accumulated`], in its order.
    latencies: Vec<StreamingStat>,
    /// Send times of every request with a non-empty `[sent, end)`, ascending.
    starts: Vec<u64>,
    /// End times of the same requests, ascending.
    ends: Vec<u64>,
    /// Output tokens of successful requests per second `[k s, k+1 s)` of chunk arrival.
    tokens_per_second: Vec<u64>,
    tags: TagStats,
    /// Keyed by the target's index, for records that name one.
    targets: TagStats,
    answer: AnswerStats,
    clock: StampSourceStats,
    sessions: SessionStats,
    prefix_cache: PrefixCacheStats,
    steady: SteadyStats,
}

/// The per-target table's percentiles (the per-tag table's) and the report's, which hold
/// any a threshold on a target reads.
fn target_percentiles(report: &[f64]) -> Vec<f64> {
    let mut out = TAG_PERCENTILES.to_vec();
    out.extend(report.iter().filter(|p| !TAG_PERCENTILES.contains(p)));
    out
}

/// The report's percentiles, then those of `always` it lacks: a distribution whose report
/// lines read fixed percentiles (send lateness's P99) has them whatever was asked.
fn including(report: &[f64], always: &[f64]) -> Vec<f64> {
    let mut out = report.to_vec();
    out.extend(always.iter().filter(|p| !report.contains(*p)));
    out
}

/// Inserts into an ascending vector. Records arrive in completion order, so the insertion
/// point is near the end: at most the number of requests that overlapped this one.
fn insert_sorted(v: &mut Vec<u64>, x: u64) {
    if v.last().is_none_or(|&last| last <= x) {
        v.push(x);
    } else {
        let at = v.partition_point(|&y| y <= x);
        v.insert(at, x);
    }
}

impl PhaseAccumulator {
    /// Failed requests by kind, each with its first message; kinds that never failed are
    /// left out.
    fn failure_counts(&self) -> Vec<FailureCount> {
        ERROR_KINDS
            .iter()
            .zip(self.failures)
            .zip(&self.first_messages)
            .filter(|&((_, n), _)| n > 0)
            .map(|((&kind, count), message)| FailureCount {
                kind,
                count,
                first_message: message.clone().unwrap_or_default(),
            })
            .collect()
    }

    pub fn new(opts: &MetricsOptions) -> Self {
        PhaseAccumulator {
            opts: opts.clone(),
            completed: 0,
            failed: 0,
            retried: 0,
            cancelled: 0,
            failures: [0; ERROR_KINDS.len()],
            first_messages: std::array::from_fn(|_| None),
            input_tokens: 0,
            output_tokens: 0,
            chunks: 0,
            chunk_tokens: 0,
            usage_tokens: 0,
            usage_requests: 0,
            text_tokens: 0,
            good: 0,
            latencies: catalogue::accumulated()
                .map(|_| StreamingStat::new())
                .collect(),
            starts: Vec::new(),
            ends: Vec::new(),
            tokens_per_second: Vec::new(),
            tags: TagStats::default(),
            targets: TagStats::default(),
            answer: AnswerStats::default(),
            clock: StampSourceStats::default(),
            sessions: SessionStats::default(),
            prefix_cache: PrefixCacheStats::default(),
            steady: SteadyStats::default(),
        }
    }

    /// Requests recorded so far (successful + failed).
    pub fn requests(&self) -> u64 {
        self.completed + self.failed
    }

    /// Failed requests recorded so far.
    pub fn failed(&self) -> u64 {
        self.failed
    }

    /// Adds one finished request (called in completion order, but any order is correct).
    pub fn record(&mut self, r: &RequestRecord) {
        for ((_, a), stat) in catalogue::accumulated().zip(&mut self.latencies) {
            if a.counts.includes(r) {
                (a.samples)(r, &mut |ns, weight| stat.record_weighted(ns, weight));
            }
        }
        self.tags.record(r);
        self.answer.record(r);
        self.clock.record(r);
        self.sessions.record(r);
        self.prefix_cache.record(r);
        self.steady.record(r);
        if let Some(target) = r.target {
            self.targets.record_as(&target.to_string(), r);
        }
        if r.end_ns > r.sent_ns {
            insert_sorted(&mut self.starts, r.sent_ns);
            insert_sorted(&mut self.ends, r.end_ns);
        }

        self.retried += u64::from(r.retried);
        if r.cancelled {
            // A user who gave up still saw the first token: its wait counts (its TTFT, in
            // the latencies above), nothing else.
            self.cancelled += 1;
            return;
        }
        if let Some(err) = &r.error {
            self.failed += 1;
            let k = kind_index(err.kind);
            self.failures[k] += 1;
            self.first_messages[k].get_or_insert_with(|| err.message.clone());
            return;
        }

        self.completed += 1;
        // A scenario's `input_tokens` may be any u64: totals saturate, never overflow.
        self.input_tokens = self.input_tokens.saturating_add(r.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(r.output_tokens);
        self.text_tokens = self.text_tokens.saturating_add(r.text_tokens);
        if let Some(u) = r.usage_output_tokens {
            self.usage_tokens = self.usage_tokens.saturating_add(u);
            self.usage_requests += 1;
        }

        for c in &r.chunks {
            self.chunks += 1;
            self.chunk_tokens += u64::from(c.tokens);
            let k = c.t_ns / NS_PER_S;
            if k < MAX_BUCKETS {
                let k = k as usize;
                if self.tokens_per_second.len() <= k {
                    self.tokens_per_second.resize(k + 1, 0);
                }
                self.tokens_per_second[k] += u64::from(c.tokens);
            }
        }
        if let Some(slo) = &self.opts.goodput {
            let (ttft, tpot, e2el) = (r.ttft_ns(), r.tpot_ns(), r.e2el_ns());
            let ms = |ns: f64| ns / NS_PER_MS;
            let within = |limit: Option<f64>, value_ms: f64| limit.is_none_or(|l| value_ms <= l);
            // A request with ≤ 1 output token has TPOT 0 for goodput (as in vLLM).
            if within(slo.ttft_ms, ms(ttft.unwrap_or(0) as f64))
                && within(slo.tpot_ms, ms(tpot.unwrap_or(0.0)))
                && within(slo.e2el_ms, ms(e2el.unwrap_or(0) as f64))
            {
                self.good += 1;
            }
        }
    }

    /// Exact peak of requests in flight over half-open `[sent, end)` intervals; on ties an
    /// end is processed before a start, so touching intervals do not overlap.
    fn peak_concurrency(&self) -> u64 {
        let (mut i, mut j) = (0, 0);
        let (mut cur, mut peak) = (0u64, 0u64);
        while i < self.starts.len() {
            if j < self.ends.len() && self.ends[j] <= self.starts[i] {
                cur -= 1;
                j += 1;
            } else {
                cur += 1;
                i += 1;
                peak = peak.max(cur);
            }
        }
        peak
    }

    fn peak_output_throughput(&self, duration_ns: u64) -> f64 {
        if duration_ns == 0 {
            return 0.0;
        }
        // A phase shorter than a second has one bucket: the phase itself.
        let first_width_s = (duration_ns.min(NS_PER_S)) as f64 / NS_PER_S as f64;
        self.tokens_per_second
            .iter()
            .enumerate()
            .map(|(k, &tokens)| {
                let width = if k == 0 { first_width_s } else { 1.0 };
                tokens as f64 / width
            })
            .fold(0.0, f64::max)
    }

    pub fn summarize(&self, info: &PhaseInfo) -> PhaseSummary {
        let duration_s = info.duration_ns as f64 / NS_PER_S as f64;
        let per_s = |x: f64| {
            if info.duration_ns == 0 {
                0.0
            } else {
                x / duration_s
            }
        };
        let pcts = &self.opts.percentiles;
        let mut summary = PhaseSummary {
            name: info.name.clone(),
            completed: self.completed,
            failed: self.failed,
            retried: self.retried,
            cancelled: self.cancelled,
            failures_by_kind: self.failure_counts(),
            max_concurrency: info.max_concurrency,
            request_rate: info.request_rate,
            burstiness: info.burstiness,
            duration_s,
            total_input_tokens: self.input_tokens,
            total_output_tokens: self.output_tokens,
            total_chunks: self.chunks,
            token_accounting: TokenAccounting {
                usage_requests: self.usage_requests,
                usage_tokens: self.usage_tokens,
                tokenizer_tokens: self.text_tokens,
                chunks: self.chunks,
            },
            request_throughput: per_s(self.completed as f64),
            output_throughput: per_s(self.output_tokens as f64),
            total_token_throughput: per_s((self.input_tokens + self.output_tokens) as f64),
            goodput: self.opts.goodput.map(|_| per_s(self.good as f64)),
            slo: self.opts.goodput,
            percentiles: pcts.clone(),
            peak_output_throughput: self.peak_output_throughput(info.duration_ns),
            peak_concurrency: self.peak_concurrency() as f64,
            ttft: Distribution::default(),
            tpot: Distribution::default(),
            itl: Distribution::default(),
            e2el: Distribution::default(),
            token_latency: Distribution::default(),
            itl_per_token: Distribution::default(),
            lateness: Distribution::default(),
            client_delay: self
                .clock
                .client_delay(&including(pcts, &CLIENT_DELAY_PERCENTILES)),
            clock: self.clock.summarize(),
            answer: self.answer.summarize(pcts),
            mean_tokens_per_chunk: if self.chunks == 0 {
                0.0
            } else {
                self.chunk_tokens as f64 / self.chunks as f64
            },
            client_bound: false,
            tags: self.tags.summarize(),
            targets: self.targets.summarize_at(&target_percentiles(pcts)),
            latencies: BTreeMap::new(),
            sessions: self.sessions.summarize(),
            prefix_cache: self.prefix_cache.summarize(),
            steady_state: self.steady.summarize(
                &PhaseSpan {
                    cap: info.max_concurrency,
                    named: info.steady_window,
                    duration_ns: info.duration_ns,
                    starts: &self.starts,
                    ends: &self.ends,
                },
                // The section reads p99 whatever `--percentiles` asked for.
                &including(pcts, &[99.0]),
            ),
        };
        self.summarize_latencies(&mut summary);
        let p99_lateness = summary.lateness.percentile(99.0).unwrap_or(0.0);
        summary.client_bound = p99_lateness > CLIENT_BOUND_LATENESS_MS;
        summary
    }

    /// Each accumulated latency into its field of `summary`, or under its key.
    fn summarize_latencies(&self, summary: &mut PhaseSummary) {
        let pcts = &self.opts.percentiles;
        for ((l, a), stat) in catalogue::accumulated().zip(&self.latencies) {
            let d = stat.distribution(&including(pcts, a.always));
            match a.field {
                Some(field) => *field(summary) = d,
                None => {
                    summary.latencies.insert(l.key.to_string(), d);
                }
            }
        }
    }

    /// The histogram of an accumulated latency of the catalogue.
    fn latency(&self, latency: &Latency) -> &StreamingStat {
        let at = catalogue::accumulated_index(latency).expect("an accumulated latency");
        &self.latencies[at]
    }

    /// TTFT, TPOT, ITL and E2EL at [`DECISION_PERCENTILES`].
    pub fn decision_latencies(&self) -> DecisionLatencies {
        let p = &DECISION_PERCENTILES;
        DecisionLatencies {
            ttft: self.latency(&TTFT).distribution(p),
            tpot: self.latency(&TPOT).distribution(p),
            itl: self.latency(&ITL).distribution(p),
            e2el: self.latency(&E2EL).distribution(p),
        }
    }

    /// Adds a request to the steady state only: a merged phase's accumulator, built from
    /// the shards' states, gets its rows from their records (`sharding::merge`).
    pub fn record_steady(&mut self, r: &RequestRecord) {
        self.steady.record(r);
    }

    /// Number of ITL samples so far (chunk gaps of successful requests).
    pub fn itl_samples(&self) -> u64 {
        self.latency(&ITL).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::record::{Chunk, Reach, RequestError};

    const MS: u64 = 1_000_000;

    /// A successful request sent at `sent` (ms) with chunks `(t ms, tokens)`.
    fn ok(index: u64, sent_ms: u64, chunks: &[(u64, u32)], input: u64) -> RequestRecord {
        let chunks: Vec<Chunk> = chunks
            .iter()
            .map(|&(t, tokens)| Chunk {
                t_ns: t * MS,
                tokens,
                client_delay_ns: None,
            })
            .collect();
        RequestRecord {
            request_id: String::new(),
            trace: Default::default(),
            phase: 0,
            index,
            tag: None,
            scheduled_ns: sent_ms * MS,
            sent_ns: sent_ms * MS,
            first_byte_ns: chunks.first().map(|c| c.t_ns),
            end_ns: chunks.last().map_or(sent_ms * MS, |c| c.t_ns + MS),
            output_tokens: chunks.iter().map(|c| u64::from(c.tokens)).sum(),
            usage_output_tokens: Some(chunks.iter().map(|c| u64::from(c.tokens)).sum()),
            text_tokens: chunks.iter().map(|c| u64::from(c.tokens)).sum(),
            chunks,
            input_tokens: input,
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
        }
    }

    fn failed(index: u64, sent_ms: u64, end_ms: u64, kind: ErrorKind) -> RequestRecord {
        RequestRecord {
            request_id: String::new(),
            trace: Default::default(),
            phase: 0,
            index,
            tag: None,
            scheduled_ns: sent_ms * MS,
            sent_ns: sent_ms * MS,
            first_byte_ns: None,
            chunks: vec![],
            end_ns: end_ms * MS,
            input_tokens: 77,
            output_tokens: 0,
            usage_output_tokens: None,
            text_tokens: 0,
            warmup: false,
            http_status: None,
            error: Some(RequestError {
                kind,
                message: format!("boom {index}"),
            }),
            server_timings: None,
            reached: Default::default(),
            retried: false,
            send_write_ns: None,
            cancelled: false,
            target: None,
            answer: Default::default(),
            session: Default::default(),
        }
    }

    fn info(duration_ms: u64) -> PhaseInfo {
        PhaseInfo {
            name: "main".into(),
            duration_ns: duration_ms * MS,
            max_concurrency: None,
            request_rate: None,
            burstiness: None,
            steady_window: None,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn summarize(records: &[RequestRecord], opts: &MetricsOptions, dur_ms: u64) -> PhaseSummary {
        let mut acc = PhaseAccumulator::new(opts);
        for r in records {
            acc.record(r);
        }
        acc.summarize(&info(dur_ms))
    }

    #[test]
    fn latency_means_follow_vllm_definitions() {
        let recs = [
            // TTFT 100, E2EL 400, 4 tokens in 4 chunks → TPOT 100, ITLs 100,100,100
            ok(0, 0, &[(100, 1), (200, 1), (300, 1), (400, 1)], 10),
            // TTFT 50, E2EL 250, 5 tokens in 2 chunks → TPOT 50, ITL 200 (4 tokens)
            ok(1, 1000, &[(1050, 1), (1250, 4)], 20),
            // TTFT 30, single token: no TPOT, no ITL
            ok(2, 2000, &[(2030, 1)], 30),
        ];
        let s = summarize(&recs, &MetricsOptions::default(), 4000);
        assert_eq!((s.completed, s.failed), (3, 0));
        assert_eq!((s.total_input_tokens, s.total_output_tokens), (60, 10));
        assert_eq!(s.total_chunks, 7);
        assert!(close(s.ttft.mean, 60.0));
        assert!(close(s.ttft.median, 50.0));
        assert_eq!(s.tpot.count, 2);
        assert!(close(s.tpot.mean, 75.0));
        assert_eq!(s.itl.count, 4);
        assert!(close(s.itl.mean, 125.0));
        assert!(close(s.itl.median, 100.0));
        assert!(close(s.e2el.mean, (400.0 + 250.0 + 30.0) / 3.0));
        // token latency: 400/4, 250/5, 30/1
        assert!(close(s.token_latency.mean, 60.0));
        // per-token ITL: 100,100,100 (1 token each) and 200/4=50 weighted 4 → (300+200)/7
        assert_eq!(s.itl_per_token.count, 7);
        assert!(close(s.itl_per_token.mean, 500.0 / 7.0));
        assert!(close(s.itl_per_token.median, 50.0));
        assert!(close(s.mean_tokens_per_chunk, 10.0 / 7.0));
        assert!(close(s.request_throughput, 0.75));
        assert!(close(s.output_throughput, 2.5));
        assert!(close(s.total_token_throughput, 17.5));
        assert_eq!(s.goodput, None);
        assert!(!s.client_bound);
    }

    #[test]
    fn failed_requests_are_counted_but_not_measured() {
        let recs = [
            ok(0, 0, &[(100, 1), (300, 1)], 10),
            failed(1, 0, 5000, ErrorKind::Timeout),
            failed(2, 10, 20, ErrorKind::Http5xx),
            failed(3, 20, 30, ErrorKind::Timeout),
        ];
        let s = summarize(&recs, &MetricsOptions::default(), 5000);
        assert_eq!((s.completed, s.failed), (1, 3));
        assert_eq!(
            s.failures_by_kind,
            vec![
                FailureCount {
                    kind: ErrorKind::Http5xx,
                    count: 1,
                    first_message: "boom 2".into(),
                },
                FailureCount {
                    kind: ErrorKind::Timeout,
                    count: 2,
                    first_message: "boom 1".into(),
                },
            ]
        );
        assert_eq!(s.failures(ErrorKind::Timeout), 2);
        assert_eq!(s.failures(ErrorKind::Connect), 0);
        assert_eq!((s.total_input_tokens, s.total_output_tokens), (10, 2));
        assert_eq!((s.ttft.count, s.e2el.count, s.itl.count), (1, 1, 1));
        assert!(close(s.ttft.mean, 100.0) && close(s.e2el.mean, 300.0));
        assert!(close(s.ttft.percentile(99.0).unwrap(), 100.0));
        assert!(close(s.request_throughput, 0.2));
        // The failed requests were in flight: the timeout overlaps everything.
        assert_eq!(s.peak_concurrency, 3.0);
        // They count for lateness (4 samples, all on time).
        assert_eq!(s.lateness.count, 4);
    }

    #[test]
    fn empty_phase_reads_zero() {
        let s = summarize(&[], &MetricsOptions::default(), 0);
        assert_eq!(s.ttft, s.e2el);
        assert_eq!(s.ttft.percentiles, vec![(99.0, 0.0)]);
        assert_eq!(
            (
                s.request_throughput,
                s.peak_output_throughput,
                s.peak_concurrency
            ),
            (0.0, 0.0, 0.0)
        );
        assert_eq!(s.mean_tokens_per_chunk, 0.0);
        assert!(!s.ttft.mean.is_nan());
    }

    #[test]
    fn peak_concurrency_touching_intervals_do_not_overlap() {
        // [0,1000) [1000,2000) [2000,3000): touching, never more than one in flight.
        let mut recs: Vec<RequestRecord> = (0..3)
            .map(|i| failed(i, i * 1000, (i + 1) * 1000, ErrorKind::Connect))
            .collect();
        assert_eq!(
            summarize(&recs, &MetricsOptions::default(), 3000).peak_concurrency,
            1.0
        );
        // One more spanning [500, 2500) → overlaps two of them, never three at once.
        recs.push(failed(3, 500, 2500, ErrorKind::Connect));
        // Record out of completion order too; the answer must not depend on it.
        recs.swap(0, 3);
        assert_eq!(
            summarize(&recs, &MetricsOptions::default(), 3000).peak_concurrency,
            2.0
        );
        // Three starting at the same instant.
        recs.extend((4..7).map(|i| failed(i, 2600, 2700, ErrorKind::Connect)));
        assert_eq!(
            summarize(&recs, &MetricsOptions::default(), 3000).peak_concurrency,
            4.0
        );
        // Zero-length requests are never in flight.
        let z = [failed(0, 5, 5, ErrorKind::Connect)];
        assert_eq!(
            summarize(&z, &MetricsOptions::default(), 10).peak_concurrency,
            0.0
        );
    }

    #[test]
    fn peak_output_throughput_counts_tokens_per_second() {
        let recs = [
            // bucket 0: 1 + 5 = 6 tokens; bucket 1: 8 + 2 = 10 tokens; bucket 2: 3
            ok(0, 0, &[(100, 1), (900, 5), (1000, 8), (1999, 2)], 0),
            ok(1, 1500, &[(2500, 3)], 0),
            // failed requests' chunks do not count
            RequestRecord {
                request_id: String::new(),
                trace: Default::default(),
                error: Some(RequestError {
                    kind: ErrorKind::Disconnect,
                    message: String::new(),
                }),
                ..ok(2, 1000, &[(1100, 50)], 0)
            },
        ];
        let s = summarize(&recs, &MetricsOptions::default(), 3000);
        assert_eq!(s.peak_output_throughput, 10.0);
        assert!(close(s.mean_tokens_per_chunk, 19.0 / 5.0));

        // A phase shorter than a second: the bucket is the phase.
        let short = [ok(0, 0, &[(100, 4), (200, 4)], 0)];
        let s = summarize(&short, &MetricsOptions::default(), 250);
        assert!(close(s.peak_output_throughput, 32.0));
        // Zero duration never divides by zero.
        let s = summarize(&short, &MetricsOptions::default(), 0);
        assert_eq!((s.peak_output_throughput, s.output_throughput), (0.0, 0.0));
    }

    #[test]
    fn goodput_is_inclusive_and_needs_every_slo() {
        let opts = MetricsOptions {
            percentiles: vec![99.0],
            goodput: Some("ttft:100 tpot:50 e2el:400".parse().unwrap()),
        };
        let recs = [
            // TTFT 100 (= limit), TPOT 50 (= limit), E2EL 300: good
            ok(0, 0, &[(100, 1), (150, 1), (200, 1), (300, 2)], 0),
            // TTFT 101: bad
            ok(1, 0, &[(101, 1), (102, 1)], 0),
            // single token, TTFT 400 but E2EL 400 ok, TPOT counts as 0: bad (TTFT)
            ok(2, 0, &[(400, 1)], 0),
            // single token fast: good even with TPOT undefined
            ok(3, 0, &[(10, 1)], 0),
            // TPOT 60: bad
            ok(4, 0, &[(10, 1), (70, 1)], 0),
            // E2EL 401: bad
            ok(5, 0, &[(10, 1), (30, 1), (50, 1), (401, 8)], 0),
            // failed: never good
            failed(6, 0, 10, ErrorKind::Http4xx),
        ];
        let s = summarize(&recs, &opts, 2000);
        assert_eq!(s.goodput, Some(1.0)); // 2 good / 2 s
        assert_eq!(s.slo, opts.goodput);
    }

    #[test]
    fn lateness_and_client_bound() {
        let mut recs: Vec<RequestRecord> = (0..100)
            .map(|i| ok(i, i * 10, &[(i * 10 + 5, 1)], 1))
            .collect();
        let s = summarize(&recs, &MetricsOptions::default(), 2000);
        assert!(!s.client_bound);
        assert_eq!(s.lateness.max, 0.0);
        for r in recs.iter_mut().take(5) {
            // sent 50 ms after its schedule
            r.sent_ns += 50 * MS;
            r.chunks[0].t_ns += 50 * MS;
            r.end_ns += 50 * MS;
        }
        let opts = MetricsOptions {
            percentiles: vec![50.0],
            goodput: None,
        };
        let s = summarize(&recs, &opts, 2000);
        assert!(s.client_bound);
        assert_eq!(s.lateness.count, 100);
        assert_eq!(s.lateness.max, 50.0);
        assert!(close(s.lateness.mean, 2.5));
        // 99 is always computed for lateness, after the requested ones.
        assert_eq!(s.lateness.percentiles.len(), 2);
        assert!(close(s.lateness.percentile(99.0).unwrap(), 50.0));
        assert_eq!(s.ttft.percentiles.len(), 1);
    }

    #[test]
    fn client_delay_and_clock_count_the_kernel_stamped_chunks() {
        // Without kernel times: no client delay, every chunk on the read clock.
        let plain = [ok(0, 0, &[(100, 1), (200, 1)], 1), ok(1, 0, &[(50, 2)], 1)];
        let s = summarize(&plain, &MetricsOptions::default(), 1000);
        assert_eq!(s.client_delay.count, 0);
        assert_eq!(s.client_delay.percentiles, vec![(99.0, 0.0), (50.0, 0.0)]);
        assert_eq!(
            (s.clock.kernel_chunks, s.clock.read_chunks, s.total_chunks),
            (0, 3, 3)
        );
        assert_eq!((s.clock.socket_write_sends, s.clock.handoff_sends), (0, 2));

        // Read 5, 15 and 400 µs after arrival; sent by a 12 µs write.
        let mut kernel = ok(0, 0, &[(100, 1), (200, 1), (300, 1)], 1);
        for (c, us) in kernel.chunks.iter_mut().zip([5u64, 15, 400]) {
            c.client_delay_ns = Some(us * 1000);
        }
        kernel.send_write_ns = Some(12_000);
        // One chunk of two stamped by the kernel; sent by a 40 µs write.
        let mut mixed = ok(1, 0, &[(110, 1), (210, 1)], 1);
        mixed.chunks[0].client_delay_ns = Some(25_000);
        mixed.send_write_ns = Some(40_000);
        // A failed request's send counts, its chunks do not.
        let mut failed_one = RequestRecord {
            error: Some(RequestError {
                kind: ErrorKind::StreamCut,
                message: String::new(),
            }),
            ..ok(3, 0, &[(130, 1)], 1)
        };
        failed_one.chunks[0].client_delay_ns = Some(9_000_000);
        // A refused connection sent nothing to stamp.
        let mut refused = failed(4, 0, 1, ErrorKind::Connect);
        refused.reached = Reach::No;
        let recs = [kernel, mixed, ok(2, 0, &[(120, 1)], 1), failed_one, refused];
        let opts = MetricsOptions {
            percentiles: vec![90.0],
            goodput: None,
        };
        let s = summarize(&recs, &opts, 1000);
        // Delays 5, 15, 25, 400 µs; numpy's linear percentiles, P50 and P99 always.
        let d = &s.client_delay;
        assert_eq!((d.count, d.min, d.max), (4, 0.005, 0.4));
        assert!(close(d.mean, 0.11125) && close(d.median, 0.020));
        assert_eq!(d.percentiles.len(), 3);
        assert!(close(d.percentile(90.0).unwrap(), 0.2875));
        assert!(close(d.percentile(50.0).unwrap(), 0.020));
        assert!(close(d.percentile(99.0).unwrap(), 0.38875));
        let c = &s.clock;
        assert_eq!((c.kernel_chunks, c.read_chunks), (4, 2));
        assert_eq!((c.socket_write_sends, c.handoff_sends), (2, 2));
        assert_eq!((c.send_write.count, c.send_write.max), (2, 0.04));
        assert!(close(c.send_write.percentile(99.0).unwrap(), 0.03972));
    }

    #[test]
    fn summarize_is_repeatable() {
        let mut acc = PhaseAccumulator::new(&MetricsOptions::default());
        acc.record(&ok(0, 0, &[(10, 1), (20, 1)], 3));
        let a = acc.summarize(&info(100));
        assert_eq!(a, acc.summarize(&info(100)));
        acc.record(&ok(1, 0, &[(30, 1)], 3));
        assert_eq!(acc.summarize(&info(100)).completed, 2);
        assert_eq!(acc.requests(), 2);
        assert_eq!(acc.itl_samples(), 1);
    }
}
