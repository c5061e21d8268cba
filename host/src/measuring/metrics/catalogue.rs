//! The catalogue of reported metrics: each one's key (as result.json and `--threshold`
//! spell it), label (as the text report and `runner compare` show it), unit, and which way
//! is better. Thresholds, `runner compare`, the result.json writer and the text report
//! read their names from here.
//!
//! A latency is declared once, here: its entry says how a phase accumulates it from each
//! finished request ([`Accumulated`]), under which name its merge state travels between
//! shards, where its summary lands and how each output names it. The phase's
//! accumulator, its merge state and its summary iterate [`accumulated`], so a new latency
//! is one entry in [`LATENCIES`]: it cannot be accumulated and not merged.

use super::record::RequestRecord;
use super::{Distribution, PhaseSummary, TagSummary};

/// Which way a metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
    /// Neither (e.g. peak concurrency): shown, not judged.
    Neither,
}

/// What a metric counts or measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Requests,
    Tokens,
    Seconds,
    Milliseconds,
    RequestsPerSecond,
    TokensPerSecond,
    /// Requests in flight at once.
    Concurrency,
    /// A share of the finished requests, 0 to 1.
    Fraction,
    TokensPerChunk,
}

impl Unit {
    /// Counts are whole numbers, written as JSON integers.
    pub fn is_count(self) -> bool {
        matches!(self, Unit::Requests | Unit::Tokens)
    }
}

/// Where result.json carries a metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InResult {
    /// Among the keys of `vllm bench serve --save-result`, at the phase object's top level.
    Vllm,
    /// In the phase's `runner` section.
    Runner,
    /// Nowhere: derived from other keys (thresholds read it).
    Derived,
}

/// One number per phase.
#[derive(Clone, Copy, Debug)]
pub struct Scalar {
    pub key: &'static str,
    pub label: &'static str,
    pub unit: Unit,
    pub better: Better,
    pub in_result: InResult,
    /// Listed by `runner compare`.
    pub compared: bool,
    /// May have no value (written as `null`).
    pub nullable: bool,
    /// The value in a phase; `None` when the phase has none (goodput without an SLO, the
    /// error rate of a phase where nothing finished).
    pub value: fn(&PhaseSummary) -> Option<f64>,
    /// The value in a tag's or a target's row, when the row has it (a threshold naming a
    /// target reads it).
    pub in_tag: Option<fn(&TagSummary) -> Option<f64>>,
}

/// How the text report lists a latency's statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextRows {
    /// Mean, median, then each reported percentile (vLLM's layout).
    MeanMedianPercentiles,
    /// Mean, P99 and max.
    MeanP99Max,
    /// Median, P99 and max, to the microsecond (three decimals of ms): for a delay of a
    /// few µs whose tail matters, where a mean would hide a few slow reads.
    MedianP99Max,
}

/// A latency distribution per phase, in ms; thresholds name its statistics
/// `<stat>_<key>_ms` (`p99_ttft_ms`, `mean_send_lateness_ms`).
#[derive(Clone, Copy, Debug)]
pub struct Latency {
    pub key: &'static str,
    /// The section title of the text report.
    pub title: &'static str,
    /// The name in its rows: `Mean {short} (ms):`.
    pub short: &'static str,
    /// [`InResult::Vllm`]: `mean_/median_/std_/p<N>_<key>_ms` keys at the phase's top
    /// level; [`InResult::Runner`]: a distribution object under `key` in `runner`.
    pub in_result: InResult,
    pub compared: bool,
    pub rows: TextRows,
    pub distribution: fn(&PhaseSummary) -> &Distribution,
    /// Its distribution in a tag's or a target's row, when the row has it.
    pub in_tag: Option<fn(&TagSummary) -> &Distribution>,
    /// How the phase accumulates, merges and summarises it; `None` when another part of
    /// the phase's statistics owns it (the answer split's TTFA, the clocks' client delay).
    pub accumulated: Option<Accumulated>,
}

/// Which finished requests a latency counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counts {
    /// Every request sent, whatever its outcome.
    Every,
    /// The successful requests.
    Completed,
    /// The successful requests and those the scenario cancelled (a user who gave up
    /// still saw the first token).
    CompletedOrCancelled,
}

impl Counts {
    /// Whether `r` is counted.
    pub fn includes(self, r: &RequestRecord) -> bool {
        match self {
            Counts::Every => true,
            Counts::Completed => !r.cancelled && r.error.is_none(),
            Counts::CompletedOrCancelled => r.cancelled || r.error.is_none(),
        }
    }
}

/// What a saved merge state's histogram may hold, checked before a shard is merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Exactly one sample per request sent.
    EveryRequest,
    /// At most one per successful request.
    Completed,
    /// At most one per successful or cancelled request.
    CompletedOrCancelled,
    /// At most one per content chunk.
    Chunks,
    /// Nothing checked (a weight per token).
    Unchecked,
}

/// How a phase accumulates a latency: its samples in each request, its name in the
/// merge state, the percentiles it always has and where its summary lands.
#[derive(Clone, Copy, Debug)]
pub struct Accumulated {
    /// Its histogram's name in a shard's saved state (shard.json): renaming it stops old
    /// shards from merging.
    pub state_key: &'static str,
    pub counts: Counts,
    /// Its samples in one counted request, in ns, each with its weight (1, or the tokens
    /// of a per-token sample).
    pub samples: fn(&RequestRecord, &mut dyn FnMut(f64, u64)),
    /// Percentiles computed whatever the report asked for (those its text rows show).
    pub always: &'static [f64],
    pub bound: Bound,
    /// The field of [`PhaseSummary`] its summary lands in; `None`: in
    /// [`PhaseSummary::latencies`], under its key (where [`keyed`] reads it).
    pub field: Option<fn(&mut PhaseSummary) -> &mut Distribution>,
}

/// The distribution of a latency whose summary has no field of its own.
pub fn keyed<'a>(s: &'a PhaseSummary, key: &str) -> &'a Distribution {
    s.latencies.get(key).unwrap_or(&EMPTY)
}

static EMPTY: Distribution = Distribution {
    count: 0,
    mean: 0.0,
    median: 0.0,
    std: 0.0,
    min: 0.0,
    max: 0.0,
    percentiles: Vec::new(),
};

impl Latency {
    /// Latencies are better lower.
    pub const BETTER: Better = Better::Lower;
}

pub const COMPLETED: Scalar = Scalar {
    key: "completed",
    label: "Successful requests",
    unit: Unit::Requests,
    better: Better::Higher,
    in_result: InResult::Vllm,
    compared: true,
    nullable: false,
    value: |s| Some(s.completed as f64),
    in_tag: Some(|t| Some(t.completed as f64)),
};
pub const FAILED: Scalar = Scalar {
    key: "failed",
    label: "Failed requests",
    unit: Unit::Requests,
    better: Better::Lower,
    in_result: InResult::Vllm,
    compared: true,
    nullable: false,
    value: |s| Some(s.failed as f64),
    in_tag: Some(|t| Some(t.failed as f64)),
};
pub const CANCELLED: Scalar = Scalar {
    key: "cancelled",
    label: "Cancelled by the scenario",
    unit: Unit::Requests,
    better: Better::Neither,
    // result.json has it as `runner.cancelled_requests`, written whatever its value.
    in_result: InResult::Derived,
    compared: false,
    nullable: false,
    value: |s| Some(s.cancelled as f64),
    in_tag: Some(|t| Some(t.cancelled as f64)),
};
pub const ERROR_RATE: Scalar = Scalar {
    key: "error_rate",
    label: "Error rate",
    unit: Unit::Fraction,
    better: Better::Lower,
    in_result: InResult::Derived,
    compared: false,
    nullable: true,
    value: |s| error_rate(s.completed, s.failed),
    in_tag: Some(|t| error_rate(t.completed, t.failed)),
};
pub const DURATION: Scalar = Scalar {
    key: "duration",
    label: "Benchmark duration (s)",
    unit: Unit::Seconds,
    better: Better::Lower,
    in_result: InResult::Vllm,
    compared: true,
    nullable: false,
    value: |s| Some(s.duration_s),
    in_tag: None,
};
pub const TOTAL_INPUT_TOKENS: Scalar = Scalar {
    key: "total_input_tokens",
    label: "Total input tokens",
    unit: Unit::Tokens,
    better: Better::Neither,
    in_result: InResult::Vllm,
    compared: false,
    nullable: false,
    value: |s| Some(s.total_input_tokens as f64),
    in_tag: None,
};
pub const TOTAL_OUTPUT_TOKENS: Scalar = Scalar {
    key: "total_output_tokens",
    label: "Total generated tokens",
    unit: Unit::Tokens,
    better: Better::Neither,
    in_result: InResult::Vllm,
    compared: false,
    nullable: false,
    value: |s| Some(s.total_output_tokens as f64),
    in_tag: None,
};
pub const REQUEST_THROUGHPUT: Scalar = Scalar {
    key: "request_throughput",
    label: "Request throughput (req/s)",
    unit: Unit::RequestsPerSecond,
    better: Better::Higher,
    in_result: InResult::Vllm,
    compared: true,
    nullable: false,
    value: |s| Some(s.request_throughput),
    in_tag: None,
};
pub const REQUEST_GOODPUT: Scalar = Scalar {
    key: "request_goodput",
    label: "Request goodput (req/s)",
    unit: Unit::RequestsPerSecond,
    better: Better::Higher,
    in_result: InResult::Vllm,
    compared: true,
    nullable: true,
    value: |s| s.goodput,
    in_tag: None,
};
pub const OUTPUT_THROUGHPUT: Scalar = Scalar {
    key: "output_throughput",
    label: "Output token throughput (tok/s)",
    unit: Unit::TokensPerSecond,
    better: Better::Higher,
    in_result: InResult::Vllm,
    compared: true,
    nullable: false,
    value: |s| Some(s.output_throughput),
    in_tag: None,
};
pub const TOTAL_TOKEN_THROUGHPUT: Scalar = Scalar {
    key: "total_token_throughput",
    label: "Total token throughput (tok/s)",
    unit: Unit::TokensPerSecond,
    better: Better::Higher,
    in_result: InResult::Vllm,
    compared: true,
    nullable: false,
    value: |s| Some(s.total_token_throughput),
    in_tag: None,
};
pub const PEAK_OUTPUT_THROUGHPUT: Scalar = Scalar {
    key: "max_output_tokens_per_s",
    label: "Peak output token throughput (tok/s)",
    unit: Unit::TokensPerSecond,
    better: Better::Higher,
    in_result: InResult::Vllm,
    compared: true,
    nullable: false,
    value: |s| Some(s.peak_output_throughput),
    in_tag: None,
};
pub const PEAK_CONCURRENCY: Scalar = Scalar {
    key: "max_concurrent_requests",
    label: "Peak concurrent requests",
    unit: Unit::Concurrency,
    better: Better::Neither,
    in_result: InResult::Vllm,
    compared: true,
    nullable: false,
    value: |s| Some(s.peak_concurrency),
    in_tag: None,
};
pub const REASONING_TOKENS: Scalar = Scalar {
    key: "total_reasoning_tokens",
    label: "Total reasoning tokens",
    unit: Unit::Tokens,
    better: Better::Neither,
    in_result: InResult::Runner,
    compared: false,
    nullable: false,
    value: |s| Some(s.answer.reasoning_tokens as f64),
    in_tag: None,
};
pub const ANSWER_TOKENS: Scalar = Scalar {
    key: "total_answer_tokens",
    label: "Total answer tokens",
    unit: Unit::Tokens,
    better: Better::Neither,
    in_result: InResult::Runner,
    compared: false,
    nullable: false,
    value: |s| Some(s.answer.answer_tokens as f64),
    in_tag: None,
};
pub const MEAN_TOKENS_PER_CHUNK: Scalar = Scalar {
    key: "mean_tokens_per_chunk",
    label: "Mean tokens per chunk",
    unit: Unit::TokensPerChunk,
    better: Better::Neither,
    in_result: InResult::Runner,
    compared: false,
    nullable: false,
    value: |s| Some(s.mean_tokens_per_chunk),
    in_tag: None,
};

/// Every scalar, in the order `runner compare` and the threshold help list them.
pub const SCALARS: [Scalar; 16] = [
    COMPLETED,
    FAILED,
    CANCELLED,
    ERROR_RATE,
    DURATION,
    TOTAL_INPUT_TOKENS,
    TOTAL_OUTPUT_TOKENS,
    REQUEST_THROUGHPUT,
    REQUEST_GOODPUT,
    OUTPUT_THROUGHPUT,
    TOTAL_TOKEN_THROUGHPUT,
    PEAK_OUTPUT_THROUGHPUT,
    PEAK_CONCURRENCY,
    MEAN_TOKENS_PER_CHUNK,
    REASONING_TOKENS,
    ANSWER_TOKENS,
];

pub const TTFT: Latency = Latency {
    key: "ttft",
    title: "Time to First Token",
    short: "TTFT",
    in_result: InResult::Vllm,
    compared: true,
    rows: TextRows::MeanMedianPercentiles,
    distribution: |s| &s.ttft,
    in_tag: Some(|t| &t.ttft),
    accumulated: Some(Accumulated {
        state_key: "ttft",
        counts: Counts::CompletedOrCancelled,
        samples: |r, add| {
            if let Some(t) = r.ttft_ns() {
                add(t as f64, 1);
            }
        },
        always: &[],
        bound: Bound::CompletedOrCancelled,
        field: Some(|s| &mut s.ttft),
    }),
};
pub const TPOT: Latency = Latency {
    key: "tpot",
    title: "Time per Output Token (excl. 1st token)",
    short: "TPOT",
    in_result: InResult::Vllm,
    compared: true,
    rows: TextRows::MeanMedianPercentiles,
    distribution: |s| &s.tpot,
    in_tag: Some(|t| &t.tpot),
    accumulated: Some(Accumulated {
        state_key: "tpot",
        counts: Counts::Completed,
        samples: |r, add| {
            if let Some(t) = r.tpot_ns() {
                add(t, 1);
            }
        },
        always: &[],
        bound: Bound::Completed,
        field: Some(|s| &mut s.tpot),
    }),
};
pub const ITL: Latency = Latency {
    key: "itl",
    title: "Inter-token Latency",
    short: "ITL",
    in_result: InResult::Vllm,
    compared: true,
    rows: TextRows::MeanMedianPercentiles,
    distribution: |s| &s.itl,
    in_tag: None,
    accumulated: Some(Accumulated {
        state_key: "itl",
        counts: Counts::Completed,
        samples: |r, add| {
            for gap in r.itls_ns() {
                add(gap as f64, 1);
            }
        },
        always: &[],
        bound: Bound::Chunks,
        field: Some(|s| &mut s.itl),
    }),
};
pub const E2EL: Latency = Latency {
    key: "e2el",
    title: "End-to-end Latency",
    short: "E2EL",
    in_result: InResult::Vllm,
    compared: true,
    rows: TextRows::MeanMedianPercentiles,
    distribution: |s| &s.e2el,
    in_tag: Some(|t| &t.e2el),
    accumulated: Some(Accumulated {
        state_key: "e2el",
        counts: Counts::Completed,
        samples: |r, add| {
            if let Some(e) = r.e2el_ns() {
                add(e as f64, 1);
            }
        },
        always: &[],
        bound: Bound::Completed,
        field: Some(|s| &mut s.e2el),
    }),
};
/// Time to the first answer (content or tool-call) token, after any reasoning: equal to
/// TTFT when the model does not reason.
pub const TTFA: Latency = Latency {
    key: "ttfa",
    title: "Time to First Answer (after reasoning)",
    short: "TTFA",
    in_result: InResult::Runner,
    compared: false,
    rows: TextRows::MeanMedianPercentiles,
    distribution: |s| &s.answer.ttfa,
    in_tag: None,
    accumulated: None,
};
pub const TOKEN_LATENCY: Latency = Latency {
    key: "token_latency",
    title: "Token Latency (e2e_latency / output_len)",
    short: "Token Latency",
    in_result: InResult::Runner,
    compared: false,
    rows: TextRows::MeanMedianPercentiles,
    distribution: |s| &s.token_latency,
    in_tag: None,
    accumulated: Some(Accumulated {
        state_key: "token_latency",
        counts: Counts::Completed,
        samples: |r, add| {
            if let (Some(e), true) = (r.e2el_ns(), r.output_tokens > 0) {
                add(e as f64 / r.output_tokens as f64, 1);
            }
        },
        always: &[],
        bound: Bound::Completed,
        field: Some(|s| &mut s.token_latency),
    }),
};
pub const ITL_PER_TOKEN: Latency = Latency {
    key: "itl_per_token",
    title: "Inter-token Latency per Token",
    short: "per-token ITL",
    in_result: InResult::Runner,
    compared: false,
    rows: TextRows::MeanMedianPercentiles,
    distribution: |s| &s.itl_per_token,
    in_tag: None,
    accumulated: Some(Accumulated {
        state_key: "itl_per_token",
        counts: Counts::Completed,
        samples: |r, add| {
            for w in r.chunks.windows(2) {
                let gap = w[1].t_ns.saturating_sub(w[0].t_ns);
                let tokens = w[1].tokens.max(1);
                add(gap as f64 / f64::from(tokens), u64::from(tokens));
            }
        },
        always: &[],
        bound: Bound::Unchecked,
        field: Some(|s| &mut s.itl_per_token),
    }),
};
pub const SEND_LATENESS: Latency = Latency {
    key: "send_lateness",
    title: "Send Lateness (sent - scheduled)",
    short: "send lateness",
    in_result: InResult::Runner,
    compared: false,
    rows: TextRows::MeanP99Max,
    distribution: |s| &s.lateness,
    in_tag: None,
    accumulated: Some(Accumulated {
        state_key: "lateness",
        counts: Counts::Every,
        samples: |r, add| add(r.lateness_ns() as f64, 1),
        always: &[99.0],
        bound: Bound::EveryRequest,
        field: Some(|s| &mut s.lateness),
    }),
};
/// How long the client took to read what the kernel had received: the part of every
/// latency that is the client's own, where the kernel stamped the chunks.
pub const CLIENT_DELAY: Latency = Latency {
    key: "client_delay",
    title: "Client Delay (read - kernel arrival)",
    short: "client delay",
    in_result: InResult::Runner,
    compared: false,
    rows: TextRows::MedianP99Max,
    distribution: |s| &s.client_delay,
    in_tag: None,
    accumulated: None,
};

/// Every latency: vLLM's four in vLLM's order, then ours in the order the text report's
/// extras show them.
pub const LATENCIES: [Latency; 9] = [
    TTFT,
    TPOT,
    ITL,
    E2EL,
    TTFA,
    TOKEN_LATENCY,
    ITL_PER_TOKEN,
    SEND_LATENESS,
    CLIENT_DELAY,
];

/// The statistics of a latency that thresholds and result.json name.
pub const LATENCY_STATS: [&str; 5] = ["mean", "median", "std", "min", "max"];

/// The scalar named `key`.
pub fn scalar(key: &str) -> Option<&'static Scalar> {
    SCALARS.iter().find(|m| m.key == key)
}

/// The latency named `key`.
pub fn latency(key: &str) -> Option<&'static Latency> {
    LATENCIES.iter().find(|m| m.key == key)
}

/// The failed share of the finished requests; `None` when none finished.
fn error_rate(completed: u64, failed: u64) -> Option<f64> {
    let finished = completed + failed;
    (finished > 0).then(|| failed as f64 / finished as f64)
}

/// The latencies a phase accumulates, in [`LATENCIES`] order: the accumulator's table of
/// histograms, its merge state and its summary are indexed by this list.
pub fn accumulated() -> impl Iterator<Item = (&'static Latency, &'static Accumulated)> {
    LATENCIES
        .iter()
        .filter_map(|l| l.accumulated.as_ref().map(|a| (l, a)))
}

/// The position of `latency` in [`accumulated`]; `None` when the phase does not
/// accumulate it itself.
pub fn accumulated_index(latency: &Latency) -> Option<usize> {
    accumulated().position(|(l, _)| l.key == latency.key)
}

/// A statistic of a latency distribution, as a metric name spells it (`p99`, `mean`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LatencyStat {
    Mean,
    Median,
    Std,
    Min,
    Max,
    Percentile(f64),
}

impl LatencyStat {
    /// `mean`, `median`, `std`, `min`, `max` or `p<N>` with 0 < N ≤ 100.
    pub fn parse(word: &str) -> Option<LatencyStat> {
        let stat = match word {
            "mean" => LatencyStat::Mean,
            "median" => LatencyStat::Median,
            "std" => LatencyStat::Std,
            "min" => LatencyStat::Min,
            "max" => LatencyStat::Max,
            p => {
                let v: f64 = p.strip_prefix('p')?.parse().ok()?;
                if !(v > 0.0 && v <= 100.0) {
                    return None;
                }
                LatencyStat::Percentile(v)
            }
        };
        Some(stat)
    }

    /// Its value in `d`; `None` when `d` has no sample or lacks the percentile.
    pub fn of(self, d: &Distribution) -> Option<f64> {
        if d.count == 0 {
            return None;
        }
        match self {
            LatencyStat::Mean => Some(d.mean),
            LatencyStat::Median => Some(d.median),
            LatencyStat::Std => Some(d.std),
            LatencyStat::Min => Some(d.min),
            LatencyStat::Max => Some(d.max),
            LatencyStat::Percentile(p) => d.percentile(p),
        }
    }
}

/// A metric name as thresholds spell it: a scalar's key, or `<stat>_<latency>_ms`.
#[derive(Clone, Copy, Debug)]
pub enum MetricName {
    Scalar(&'static Scalar),
    Latency(LatencyStat, &'static Latency),
}

impl MetricName {
    /// The metric `name` names, if any.
    pub fn parse(name: &str) -> Option<MetricName> {
        if let Some(m) = scalar(name) {
            return Some(MetricName::Scalar(m));
        }
        let (stat, key) = name.strip_suffix("_ms")?.split_once('_')?;
        Some(MetricName::Latency(
            LatencyStat::parse(stat)?,
            latency(key)?,
        ))
    }

    /// Its value in a phase; `None` without data.
    pub fn value(&self, s: &PhaseSummary) -> Option<f64> {
        match *self {
            MetricName::Scalar(m) => (m.value)(s),
            MetricName::Latency(stat, l) => stat.of((l.distribution)(s)),
        }
    }

    /// Whether a tag's or a target's row has it.
    pub fn in_tag(&self) -> bool {
        match self {
            MetricName::Scalar(m) => m.in_tag.is_some(),
            MetricName::Latency(_, l) => l.in_tag.is_some(),
        }
    }

    /// Its value in a tag's or a target's row; `None` without data or when rows lack it.
    pub fn tag_value(&self, t: &TagSummary) -> Option<f64> {
        match *self {
            MetricName::Scalar(m) => (m.in_tag?)(t),
            MetricName::Latency(stat, l) => stat.of((l.in_tag?)(t)),
        }
    }

    /// The percentile it reads, if any.
    pub fn percentile(&self) -> Option<f64> {
        match self {
            MetricName::Latency(LatencyStat::Percentile(p), _) => Some(*p),
            _ => None,
        }
    }

    /// Its catalogue key (a latency's, for a latency statistic).
    pub fn key(&self) -> &'static str {
        match self {
            MetricName::Scalar(m) => m.key,
            MetricName::Latency(_, l) => l.key,
        }
    }
}

impl PartialEq for MetricName {
    fn eq(&self, other: &MetricName) -> bool {
        match (self, other) {
            (MetricName::Scalar(a), MetricName::Scalar(b)) => a.key == b.key,
            (MetricName::Latency(s, a), MetricName::Latency(t, b)) => s == t && a.key == b.key,
            _ => false,
        }
    }
}

/// What a tag's or a target's row has, for error messages.
pub fn tag_metric_help() -> String {
    let latencies: Vec<&str> = LATENCIES
        .iter()
        .filter(|l| l.in_tag.is_some())
        .map(|l| l.key)
        .collect();
    let scalars: Vec<&str> = SCALARS
        .iter()
        .filter(|m| m.in_tag.is_some())
        .map(|m| m.key)
        .collect();
    format!(
        "`<stat>_<latency>_ms` with latency {}, or {}",
        or_list(&latencies),
        or_list(&scalars)
    )
}

/// `a, b or c`.
fn or_list(words: &[&str]) -> String {
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        Some((last, _)) => last.to_string(),
        None => String::new(),
    }
}

/// vLLM's `p_word`: `str(int(p))` when integral, else `str(p)` (99 → "99", 99.9 → "99.9").
pub fn percentile_word(p: f64) -> String {
    if p.fract() == 0.0 && p.abs() < 1e15 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

/// The result.json key of statistic `stat` (`mean`, `p99`, …) of a vLLM latency:
/// `mean_ttft_ms`, `p99.9_itl_ms`.
pub fn latency_key(stat: &str, latency: &Latency) -> String {
    format!("{stat}_{}_ms", latency.key)
}

/// `p99` for percentile 99, `p99.9` for 99.9, as result.json spells it.
pub fn percentile_key(p: f64) -> String {
    format!("p{}", percentile_word(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn keys_are_unique_and_never_collide_with_latency_statistics() {
        let scalars: HashSet<&str> = SCALARS.iter().map(|m| m.key).collect();
        assert_eq!(scalars.len(), SCALARS.len());
        let latencies: HashSet<&str> = LATENCIES.iter().map(|m| m.key).collect();
        assert_eq!(latencies.len(), LATENCIES.len());
        for l in &LATENCIES {
            for stat in LATENCY_STATS {
                assert!(scalar(&latency_key(stat, l)).is_none(), "{stat} {}", l.key);
            }
        }
    }

    #[test]
    fn percentile_words_follow_python() {
        assert_eq!(percentile_word(99.0), "99");
        assert_eq!(percentile_word(99.9), "99.9");
        assert_eq!(percentile_word(50.0), "50");
        assert_eq!(percentile_word(99.99), "99.99");
        assert_eq!(percentile_word(100.0), "100");
        assert_eq!(percentile_key(99.9), "p99.9");
    }
}
