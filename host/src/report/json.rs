//! The `vllm bench serve --save-result` JSON object (PEERS §2.3), plus ours under "runner".
//!
//! serde_json is built without `preserve_order`, so keys come out in alphabetical order;
//! vLLM's readers index by key, so this does not matter.
//!
//! vLLM's per-request arrays (`latencies`, `queue_times`, and the `--save-detailed` ones)
//! are not written: the statistics are streaming (memory stays flat however long the run),
//! so no per-request latency is kept. The JSONL record file has every request instead.

use serde_json::{json, Map, Value};

use super::text::percentile_word;
use super::RunHeader;
use crate::metrics::{Distribution, PhaseSummary};

/// vLLM's backend name for our API: "openai" (completions) or "openai-chat" (chat).
pub fn vllm_backend(api: &str) -> &'static str {
    if api == "chat" {
        "openai-chat"
    } else {
        "openai"
    }
}

/// The `--save-result` object, dated now (local time, `YYYYmmdd-HHMMSS`).
pub fn vllm_result_json(
    h: &RunHeader,
    s: &PhaseSummary,
    percentiles: &[f64],
) -> Map<String, Value> {
    vllm_result_json_with(h, s, percentiles, &Map::new(), None)
}

/// [`vllm_result_json`] with additional top-level keys `extra` (like vLLM's
/// `--metadata k=v`; as in vLLM, the standard keys win over them) and, for reproducible
/// output, a given `date` (`None` = now, local time, `YYYYmmdd-HHMMSS`).
pub fn vllm_result_json_with(
    h: &RunHeader,
    s: &PhaseSummary,
    percentiles: &[f64],
    extra: &Map<String, Value>,
    date: Option<&str>,
) -> Map<String, Value> {
    let date = date.map_or_else(
        || chrono::Local::now().format("%Y%m%d-%H%M%S").to_string(),
        str::to_string,
    );
    let mut m = extra.clone();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    let backend = vllm_backend(&h.api);
    put("date", json!(date));
    put("endpoint_type", json!(backend));
    put("backend", json!(backend));
    put("label", Value::Null);
    put("model_id", json!(h.model));
    put("tokenizer_id", json!(h.tokenizer));
    put("num_prompts", json!(s.completed + s.failed));
    put(
        "request_rate",
        match s.request_rate {
            Some(r) if r.is_finite() => json!(r),
            _ => json!("inf"),
        },
    );
    put("burstiness", json!(s.burstiness));
    put("max_concurrency", json!(s.max_concurrency));
    put("duration", json!(s.duration_s));
    put("completed", json!(s.completed));
    put("failed", json!(s.failed));
    put("total_input_tokens", json!(s.total_input_tokens));
    put("total_output_tokens", json!(s.total_output_tokens));
    put("request_throughput", json!(s.request_throughput));
    put("request_goodput", json!(s.goodput));
    put("output_throughput", json!(s.output_throughput));
    put("total_token_throughput", json!(s.total_token_throughput));
    put("max_output_tokens_per_s", json!(s.peak_output_throughput));
    put("max_concurrent_requests", json!(s.peak_concurrency));
    // Audio only in vLLM (Σ input audio seconds / duration); always 0 for text.
    put("rtfx", json!(0.0));
    for (name, d) in [
        ("ttft", &s.ttft),
        ("tpot", &s.tpot),
        ("itl", &s.itl),
        ("e2el", &s.e2el),
    ] {
        put(&format!("mean_{name}_ms"), json!(d.mean));
        put(&format!("median_{name}_ms"), json!(d.median));
        put(&format!("std_{name}_ms"), json!(d.std));
        for &p in percentiles {
            put(
                &format!("p{}_{name}_ms", percentile_word(p)),
                json!(d.percentile(p).unwrap_or(0.0)),
            );
        }
    }
    put("runner", runner_object(h, s, percentiles));
    m
}

/// A distribution as `{count, mean_ms, median_ms, std_ms, min_ms, max_ms, p<P>_ms...}`.
fn distribution_object(d: &Distribution) -> Value {
    let mut m = Map::new();
    m.insert("count".into(), json!(d.count));
    m.insert("mean_ms".into(), json!(d.mean));
    m.insert("median_ms".into(), json!(d.median));
    m.insert("std_ms".into(), json!(d.std));
    m.insert("min_ms".into(), json!(d.min));
    m.insert("max_ms".into(), json!(d.max));
    for &(p, v) in &d.percentiles {
        m.insert(format!("p{}_ms", percentile_word(p)), json!(v));
    }
    Value::Object(m)
}

fn runner_object(h: &RunHeader, s: &PhaseSummary, percentiles: &[f64]) -> Value {
    let params: Map<String, Value> = h
        .params
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let failures: Map<String, Value> = s
        .failures_by_kind
        .iter()
        .map(|f| (f.kind.key().to_string(), json!(f.count)))
        .collect();
    let first_errors: Map<String, Value> = s
        .failures_by_kind
        .iter()
        .map(|f| (f.kind.key().to_string(), json!(f.first_message)))
        .collect();
    let mut object = json!({
        "scenario": h.scenario,
        "description": h.description,
        "params": params,
        "seed": h.seed,
        "target": h.target,
        "api": h.api,
        "request_digest": h.request_digest,
        "runner_version": h.runner_version,
        "package": h.package.as_ref().map(|(name, version)| json!({ "name": name, "version": version })),
        "scenario_digest": h.scenario_digest,
        "workload_id": h.workload_id(),
        "wit_version": h.wit_version,
        "phase": s.name,
        "percentiles": percentiles,
        "goodput_slo": s.slo.map(|slo| slo.to_string()),
        "total_chunks": s.total_chunks,
        "token_accounting": {
            "counted_by": s.token_accounting.source(s.completed),
            "usage_requests": s.token_accounting.usage_requests,
            "usage_tokens": s.token_accounting.usage_tokens,
            "tokenizer_tokens": s.token_accounting.tokenizer_tokens,
            "chunks": s.token_accounting.chunks,
        },
        "mean_tokens_per_chunk": s.mean_tokens_per_chunk,
        "peak_concurrency": s.peak_concurrency,
        "failures_by_kind": failures,
        "first_error_by_kind": first_errors,
        "retried_requests": s.retried,
        "token_latency": distribution_object(&s.token_latency),
        "itl_per_token": distribution_object(&s.itl_per_token),
        "send_lateness": distribution_object(&s.lateness),
        "client_bound": s.client_bound,
    });
    if let (false, Some(map)) = (s.tags.is_empty(), object.as_object_mut()) {
        map.insert("tags".into(), tags_array(s));
    }
    object
}

/// The per-tag table: one object per tag, latencies as distribution objects.
fn tags_array(s: &PhaseSummary) -> Value {
    s.tags
        .iter()
        .map(|t| {
            json!({
                "tag": t.tag,
                "completed": t.completed,
                "failed": t.failed,
                "mean_input_tokens": t.mean_input_tokens,
                "mean_output_tokens": t.mean_output_tokens,
                "ttft": distribution_object(&t.ttft),
                "tpot": distribution_object(&t.tpot),
                "e2el": distribution_object(&t.e2el),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{
        Chunk, ErrorKind, MetricsOptions, PhaseAccumulator, PhaseInfo, RequestError, RequestRecord,
    };

    fn header(api: &str) -> RunHeader {
        RunHeader {
            scenario: "s".into(),
            description: "d".into(),
            params: vec![("rate".into(), "4".into())],
            seed: 3,
            target: "http://x".into(),
            model: "facebook/opt-6.7b".into(),
            api: api.into(),
            tokenizer: "facebook/opt-6.7b".into(),
            request_digest: Some("beef".into()),
            runner_version: "0.1.0".into(),
            package: None,
            scenario_digest: "cafe".into(),
            wit_version: "0.1.0".into(),
        }
    }

    fn summary(goodput: bool) -> PhaseSummary {
        let opts = MetricsOptions {
            percentiles: vec![50.0, 99.9],
            goodput: goodput.then(|| "ttft:1000".parse().unwrap()),
        };
        let mut acc = PhaseAccumulator::new(&opts);
        let ms = 1_000_000;
        acc.record(&RequestRecord {
            request_id: String::new(),
            phase: 0,
            index: 0,
            tag: None,
            scheduled_ns: 0,
            sent_ns: 0,
            first_byte_ns: Some(90 * ms),
            chunks: vec![
                Chunk {
                    t_ns: 100 * ms,
                    tokens: 1,
                },
                Chunk {
                    t_ns: 300 * ms,
                    tokens: 2,
                },
            ],
            end_ns: 301 * ms,
            input_tokens: 5,
            output_tokens: 3,
            usage_output_tokens: Some(0),
            text_tokens: 0,
            warmup: false,
            http_status: Some(200),
            error: None,
            server_timings: None,
            reached: Default::default(),
            retried: false,
        });
        acc.record(&RequestRecord {
            request_id: String::new(),
            phase: 0,
            index: 1,
            tag: None,
            scheduled_ns: 0,
            sent_ns: 0,
            first_byte_ns: None,
            chunks: vec![],
            end_ns: 10 * ms,
            input_tokens: 5,
            output_tokens: 0,
            usage_output_tokens: None,
            text_tokens: 0,
            warmup: false,
            http_status: Some(500),
            error: Some(RequestError {
                kind: ErrorKind::Http5xx,
                message: "500".into(),
            }),
            server_timings: None,
            reached: Default::default(),
            retried: false,
        });
        acc.summarize(&PhaseInfo {
            name: "main".into(),
            duration_ns: 2_000 * ms,
            max_concurrency: Some(8),
            request_rate: None,
            burstiness: Some(1.0),
        })
    }

    #[test]
    fn vllm_keys_and_values() {
        let s = summary(false);
        let m = vllm_result_json_with(
            &header("chat"),
            &s,
            &[50.0, 99.9],
            &Map::new(),
            Some("20260101-120000"),
        );
        let keys: Vec<&str> = m.keys().map(String::as_str).collect();
        let mut expected = vec![
            "date",
            "endpoint_type",
            "backend",
            "label",
            "model_id",
            "tokenizer_id",
            "num_prompts",
            "request_rate",
            "burstiness",
            "max_concurrency",
            "duration",
            "completed",
            "failed",
            "total_input_tokens",
            "total_output_tokens",
            "request_throughput",
            "request_goodput",
            "output_throughput",
            "total_token_throughput",
            "max_output_tokens_per_s",
            "max_concurrent_requests",
            "rtfx",
            "runner",
        ];
        for metric in ["ttft", "tpot", "itl", "e2el"] {
            for stat in ["mean", "median", "std", "p50", "p99.9"] {
                expected.push(Box::leak(format!("{stat}_{metric}_ms").into_boxed_str()));
            }
        }
        expected.sort_unstable();
        assert_eq!(keys, expected);

        assert_eq!(m["date"], json!("20260101-120000"));
        assert_eq!(m["backend"], json!("openai-chat"));
        assert_eq!(m["endpoint_type"], json!("openai-chat"));
        assert_eq!(m["label"], Value::Null);
        assert_eq!(m["model_id"], json!("facebook/opt-6.7b"));
        assert_eq!(m["num_prompts"], json!(2));
        assert_eq!(m["request_rate"], json!("inf"));
        assert_eq!(m["burstiness"], json!(1.0));
        assert_eq!(m["max_concurrency"], json!(8));
        assert_eq!(m["duration"], json!(2.0));
        assert_eq!((&m["completed"], &m["failed"]), (&json!(1), &json!(1)));
        assert_eq!(m["total_input_tokens"], json!(5));
        assert_eq!(m["total_output_tokens"], json!(3));
        assert_eq!(m["request_throughput"], json!(0.5));
        assert_eq!(m["request_goodput"], Value::Null);
        assert_eq!(m["output_throughput"], json!(1.5));
        assert_eq!(m["total_token_throughput"], json!(4.0));
        assert_eq!(m["max_output_tokens_per_s"], json!(3.0));
        assert_eq!(m["max_concurrent_requests"], json!(2.0));
        assert_eq!(m["mean_ttft_ms"], json!(100.0));
        assert_eq!(m["median_e2el_ms"], json!(300.0));
        assert_eq!(m["p99.9_itl_ms"], json!(200.0));
        assert_eq!(m["std_tpot_ms"], json!(0.0));
        assert_eq!(m["mean_tpot_ms"], json!(100.0));

        let r = &m["runner"];
        assert_eq!(r["scenario"], json!("s"));
        assert_eq!(r["params"], json!({"rate": "4"}));
        assert_eq!(r["seed"], json!(3));
        assert_eq!(r["request_digest"], json!("beef"));
        assert_eq!(r["failures_by_kind"], json!({"http_5xx": 1}));
        assert_eq!(r["first_error_by_kind"], json!({"http_5xx": "500"}));
        assert_eq!(r["itl_per_token"]["mean_ms"], json!(100.0));
        assert_eq!(r["itl_per_token"]["count"], json!(2));
        assert_eq!(r["token_latency"]["p50_ms"], json!(100.0));
        assert_eq!(r["send_lateness"]["p99_ms"], json!(0.0));
        assert_eq!(r["mean_tokens_per_chunk"], json!(1.5));
        assert_eq!(r["client_bound"], json!(false));
        assert_eq!(r["goodput_slo"], Value::Null);
    }

    #[test]
    fn goodput_rate_backend_and_metadata() {
        let mut s = summary(true);
        s.request_rate = Some(4.0);
        let mut extra = Map::new();
        extra.insert("note".into(), json!("x"));
        extra.insert("completed".into(), json!("overridden?"));
        let m = vllm_result_json_with(&header("completions"), &s, &[99.0], &extra, None);
        assert_eq!(m["backend"], json!("openai"));
        assert_eq!(m["request_goodput"], json!(0.5));
        assert_eq!(m["request_rate"], json!(4.0));
        assert_eq!(m["note"], json!("x"));
        assert_eq!(m["completed"], json!(1));
        // 99 was not computed for these latencies: 0, never null or missing
        assert_eq!(m["p99_ttft_ms"], json!(0.0));
        assert_eq!(m["runner"]["goodput_slo"], json!("ttft:1000"));
        let date = m["date"].as_str().unwrap();
        assert_eq!(date.len(), 15);
        assert_eq!(&date[8..9], "-");
        // serialises
        assert!(serde_json::to_string(&m)
            .unwrap()
            .contains("\"p99_ttft_ms\":0.0"));
        assert_eq!(
            vllm_result_json(&header("completions"), &s, &[99.0])["runner"],
            m["runner"]
        );
    }
}
