//! The server metrics the reports name in plain words: the important ones of vLLM,
//! SGLang, llama.cpp and TGI. Every other scraped metric is kept in server_metrics.jsonl
//! and given to scenarios, but not listed in the reports.
//!
//! Sources: vLLM `vllm/v1/metrics/loggers.py` (PrometheusStatLogger), SGLang
//! `python/sglang/srt/metrics/collector.py`, llama.cpp `tools/server/server.cpp`
//! (handle_metrics), TGI `router/src/infer/` and `backends/v3/src/queue.rs`.

/// What a known metric means to a reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meaning {
    Running,
    Waiting,
    /// Fraction of the KV cache in use, 0 to 1 (shown in percent).
    KvCacheUse,
    Preemptions,
    PrefixCacheQueries,
    PrefixCacheHits,
    /// SGLang's own hit rate gauge, 0 to 1.
    PrefixCacheHitRate,
    PromptTokens,
    GeneratedTokens,
    ServerTtft,
    ServerQueueTime,
    ServerE2eLatency,
    /// Anything else worth a line; its words are in [`Known::words`].
    Other,
}

/// One metric the reports know.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Known {
    pub name: &'static str,
    pub meaning: Meaning,
    /// What the reports call it.
    pub words: &'static str,
    /// A level worth the time spent above it (KV cache use over 90 %: preemptions near).
    pub threshold: Option<f64>,
}

const fn known(name: &'static str, meaning: Meaning, words: &'static str) -> Known {
    Known {
        name,
        meaning,
        words,
        threshold: None,
    }
}

/// KV cache use above which a server is about to preempt or queue.
pub const KV_HIGH: f64 = 0.9;

const fn kv(name: &'static str, words: &'static str) -> Known {
    Known {
        name,
        meaning: Meaning::KvCacheUse,
        words,
        threshold: Some(KV_HIGH),
    }
}

/// In report order.
pub const KNOWN: &[Known] = &[
    // vLLM
    known(
        "vllm:num_requests_running",
        Meaning::Running,
        "requests running",
    ),
    known(
        "vllm:num_requests_waiting",
        Meaning::Waiting,
        "requests waiting",
    ),
    kv("vllm:kv_cache_usage_perc", "KV cache use"),
    kv("vllm:gpu_cache_usage_perc", "KV cache use (vLLM < 0.10)"),
    known(
        "vllm:num_preemptions_total",
        Meaning::Preemptions,
        "preemptions",
    ),
    known(
        "vllm:prefix_cache_queries_total",
        Meaning::PrefixCacheQueries,
        "prefix-cache queries",
    ),
    known(
        "vllm:prefix_cache_hits_total",
        Meaning::PrefixCacheHits,
        "prefix-cache hits",
    ),
    known(
        "vllm:prompt_tokens_total",
        Meaning::PromptTokens,
        "prompt tokens",
    ),
    known(
        "vllm:generation_tokens_total",
        Meaning::GeneratedTokens,
        "generated tokens",
    ),
    known(
        "vllm:time_to_first_token_seconds",
        Meaning::ServerTtft,
        "server TTFT",
    ),
    known(
        "vllm:request_queue_time_seconds",
        Meaning::ServerQueueTime,
        "server queue time",
    ),
    known(
        "vllm:e2e_request_latency_seconds",
        Meaning::ServerE2eLatency,
        "server E2E latency",
    ),
    // SGLang
    known(
        "sglang:num_running_reqs",
        Meaning::Running,
        "requests running",
    ),
    known(
        "sglang:num_queue_reqs",
        Meaning::Waiting,
        "requests waiting",
    ),
    kv("sglang:token_usage", "KV cache use"),
    known(
        "sglang:cache_hit_rate",
        Meaning::PrefixCacheHitRate,
        "prefix-cache hit rate",
    ),
    known(
        "sglang:prompt_tokens_total",
        Meaning::PromptTokens,
        "prompt tokens",
    ),
    known(
        "sglang:generation_tokens_total",
        Meaning::GeneratedTokens,
        "generated tokens",
    ),
    known(
        "sglang:time_to_first_token_seconds",
        Meaning::ServerTtft,
        "server TTFT",
    ),
    known(
        "sglang:queue_time_seconds",
        Meaning::ServerQueueTime,
        "server queue time",
    ),
    known(
        "sglang:e2e_request_latency_seconds",
        Meaning::ServerE2eLatency,
        "server E2E latency",
    ),
    // llama.cpp
    known(
        "llamacpp:requests_processing",
        Meaning::Running,
        "requests processing",
    ),
    known(
        "llamacpp:requests_deferred",
        Meaning::Waiting,
        "requests deferred",
    ),
    known(
        "llamacpp:n_busy_slots_per_decode",
        Meaning::Other,
        "busy slots per decode",
    ),
    kv("llamacpp:kv_cache_usage_ratio", "KV cache use"),
    known(
        "llamacpp:kv_cache_tokens",
        Meaning::Other,
        "KV cache tokens",
    ),
    known(
        "llamacpp:prompt_tokens_total",
        Meaning::PromptTokens,
        "prompt tokens",
    ),
    known(
        "llamacpp:tokens_predicted_total",
        Meaning::GeneratedTokens,
        "predicted tokens",
    ),
    known(
        "llamacpp:prompt_tokens_seconds",
        Meaning::Other,
        "prompt tokens/s (server avg)",
    ),
    known(
        "llamacpp:predicted_tokens_seconds",
        Meaning::Other,
        "predicted tokens/s (server avg)",
    ),
    // TGI
    known(
        "tgi_batch_current_size",
        Meaning::Running,
        "requests in the batch",
    ),
    known("tgi_queue_size", Meaning::Waiting, "requests waiting"),
    known(
        "tgi_request_queue_duration",
        Meaning::ServerQueueTime,
        "server queue time",
    ),
];

/// The known metric of this name.
pub fn lookup(name: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| k.name == name)
}

/// A fraction, 0 to 1 (KV cache use, SGLang's hit rate): shown in percent, and averaged
/// over label sets and targets where other metrics are summed.
pub fn is_fraction(name: &str) -> bool {
    lookup(name)
        .is_some_and(|k| matches!(k.meaning, Meaning::KvCacheUse | Meaning::PrefixCacheHitRate))
}

/// Whether the scrape comes from an engine whose counters may lag its responses:
/// llama.cpp adds a request's tokens to its metrics when the slot is released, in its
/// own loop (`tools/server/server-context.cpp`), so a scrape taken on the last chunk may
/// come before them (a run read 2,816 predicted tokens of 3,072).
pub fn counts_late(scrape: &super::Exposition) -> bool {
    scrape.families.keys().any(|n| n.starts_with("llamacpp:"))
}

/// The first known metric of `meaning` among `names` (in catalogue order).
pub fn first_of<'a>(meaning: Meaning, mut has: impl FnMut(&str) -> bool) -> Option<&'a Known> {
    KNOWN.iter().find(|k| k.meaning == meaning && has(k.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_follow_the_exposition_grammar() {
        for (i, k) in KNOWN.iter().enumerate() {
            assert!(KNOWN[..i].iter().all(|o| o.name != k.name), "{}", k.name);
            let ok = k
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
            assert!(ok, "{}", k.name);
        }
        assert_eq!(
            lookup("vllm:num_requests_waiting").map(|k| k.meaning),
            Some(Meaning::Waiting)
        );
        let first = first_of(Meaning::KvCacheUse, |n| n.starts_with("vllm:gpu"));
        assert_eq!(first.map(|k| k.name), Some("vllm:gpu_cache_usage_perc"));
    }
}
