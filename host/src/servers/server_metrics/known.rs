//! The server metrics the reports name in plain words: the important ones of vLLM,
//! SGLang, llama.cpp, TGI and Dynamo (the frontend in front of TensorRT-LLM, vLLM or
//! SGLang workers). Every other scraped metric is kept in server_metrics.jsonl and given
//! to scenarios, but not listed in the reports.
//!
//! Each is read as what it is ([`Reading`]): most as their exposition type says, but
//! llama.cpp's two tokens/s gauges are rates since the previous scrape (its /metrics
//! resets them) and its busy slots per decode is an average since the server started;
//! reading either as a level gave 7.8 tokens/s for a real 302 and 3.95 busy slots in a
//! phase of one request.
//!
//! Sources: vLLM `vllm/v1/metrics/loggers.py` (PrometheusStatLogger), SGLang
//! `python/sglang/srt/metrics/collector.py`, llama.cpp `tools/server/server-context.cpp`
//! (its metrics task) and the HELP lines of its /metrics, TGI `router/src/infer/` and
//! `backends/v3/src/queue.rs`, Dynamo `docs/observability/metrics.md` (frontend metrics).

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
    /// Prompt tokens the engine took from its prefix cache (llama.cpp, SGLang).
    PromptTokensCached,
    GeneratedTokens,
    ServerTtft,
    ServerQueueTime,
    ServerE2eLatency,
    /// Anything else worth a line; its words are in [`Known::words`].
    Other,
}

/// How a phase reads a known metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// As its exposition type says: a gauge's levels, a counter's increase, a histogram's
    /// bucket increases.
    AsExposed,
    /// A gauge that is an average since the server started, of something `count` (a
    /// counter) counts: over a phase, `(avg₁·count₁ − avg₀·count₀) / (count₁ − count₀)`.
    SinceStart { count: &'static str },
    /// A gauge that is `amount / seconds` since the previous scrape, reset by each scrape:
    /// over a phase, the increase of the counter `amount` over that of `seconds`.
    SinceLastScrape {
        amount: &'static str,
        seconds: &'static str,
    },
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
    pub reading: Reading,
}

const fn known(name: &'static str, meaning: Meaning, words: &'static str) -> Known {
    Known {
        name,
        meaning,
        words,
        threshold: None,
        reading: Reading::AsExposed,
    }
}

const fn read_as(reading: Reading, name: &'static str, words: &'static str) -> Known {
    Known {
        reading,
        ..known(name, Meaning::Other, words)
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
        reading: Reading::AsExposed,
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
    // Labelled by cache_source (device, host, storage): summed.
    known(
        "sglang:cached_tokens_total",
        Meaning::PromptTokensCached,
        "prompt tokens from cache",
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
    read_as(
        Reading::SinceStart {
            count: "llamacpp:n_decode_total",
        },
        "llamacpp:n_busy_slots_per_decode",
        "busy slots per decode",
    ),
    kv("llamacpp:kv_cache_usage_ratio", "KV cache use"),
    known(
        "llamacpp:kv_cache_tokens",
        Meaning::Other,
        "KV cache tokens",
    ),
    // "Number of prompt tokens processed, excluding cached tokens" (its HELP line).
    known(
        "llamacpp:prompt_tokens_total",
        Meaning::PromptTokens,
        "prompt tokens computed (not from cache)",
    ),
    known(
        "llamacpp:prompt_tokens_cached_total",
        Meaning::PromptTokensCached,
        "prompt tokens from cache",
    ),
    known(
        "llamacpp:tokens_predicted_total",
        Meaning::GeneratedTokens,
        "predicted tokens",
    ),
    known("llamacpp:n_decode_total", Meaning::Other, "decode calls"),
    read_as(
        Reading::SinceLastScrape {
            amount: "llamacpp:prompt_tokens_total",
            seconds: "llamacpp:prompt_seconds_total",
        },
        "llamacpp:prompt_tokens_seconds",
        "prompt tokens/s per busy slot",
    ),
    read_as(
        Reading::SinceLastScrape {
            amount: "llamacpp:tokens_predicted_total",
            seconds: "llamacpp:tokens_predicted_seconds_total",
        },
        "llamacpp:predicted_tokens_seconds",
        "predicted tokens/s per busy slot",
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
    // Dynamo's HTTP frontend
    known(
        "dynamo_frontend_inflight_requests",
        Meaning::Running,
        "requests in flight",
    ),
    known(
        "dynamo_frontend_queued_requests",
        Meaning::Waiting,
        "requests queued",
    ),
    known(
        "dynamo_frontend_output_tokens_total",
        Meaning::GeneratedTokens,
        "generated tokens",
    ),
    known(
        "dynamo_frontend_time_to_first_token_seconds",
        Meaning::ServerTtft,
        "server TTFT",
    ),
    known(
        "dynamo_frontend_inter_token_latency_seconds",
        Meaning::Other,
        "server inter-token latency",
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
