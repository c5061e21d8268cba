//! The catalogue of reported metrics: each one's key (as result.json and `--threshold`
//! spell it), label (as the text report and `runner compare` show it), unit, and which way
//! is better. Thresholds, `runner compare`, the result.json writer and the text report
//! read their names from here, so a new metric is one entry below plus its computation in
//! [`PhaseSummary`].

use super::{Distribution, PhaseSummary};

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
}

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
};
pub const ERROR_RATE: Scalar = Scalar {
    key: "error_rate",
    label: "Error rate",
    unit: Unit::Fraction,
    better: Better::Lower,
    in_result: InResult::Derived,
    compared: false,
    nullable: true,
    value: |s| {
        let finished = s.completed + s.failed;
        (finished > 0).then(|| s.failed as f64 / finished as f64)
    },
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
};
pub const TPOT: Latency = Latency {
    key: "tpot",
    title: "Time per Output Token (excl. 1st token)",
    short: "TPOT",
    in_result: InResult::Vllm,
    compared: true,
    rows: TextRows::MeanMedianPercentiles,
    distribution: |s| &s.tpot,
};
pub const ITL: Latency = Latency {
    key: "itl",
    title: "Inter-token Latency",
    short: "ITL",
    in_result: InResult::Vllm,
    compared: true,
    rows: TextRows::MeanMedianPercentiles,
    distribution: |s| &s.itl,
};
pub const E2EL: Latency = Latency {
    key: "e2el",
    title: "End-to-end Latency",
    short: "E2EL",
    in_result: InResult::Vllm,
    compared: true,
    rows: TextRows::MeanMedianPercentiles,
    distribution: |s| &s.e2el,
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
};
pub const TOKEN_LATENCY: Latency = Latency {
    key: "token_latency",
    title: "Token Latency (e2e_latency / output_len)",
    short: "Token Latency",
    in_result: InResult::Runner,
    compared: false,
    rows: TextRows::MeanMedianPercentiles,
    distribution: |s| &s.token_latency,
};
pub const ITL_PER_TOKEN: Latency = Latency {
    key: "itl_per_token",
    title: "Inter-token Latency per Token",
    short: "per-token ITL",
    in_result: InResult::Runner,
    compared: false,
    rows: TextRows::MeanMedianPercentiles,
    distribution: |s| &s.itl_per_token,
};
pub const SEND_LATENESS: Latency = Latency {
    key: "send_lateness",
    title: "Send Lateness (sent - scheduled)",
    short: "send lateness",
    in_result: InResult::Runner,
    compared: false,
    rows: TextRows::MeanP99Max,
    distribution: |s| &s.lateness,
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
