//! The text report of a phase whose requests all went to `/v1/embeddings`: nothing is
//! generated, so no TTFT, TPOT or ITL. The block is the one `vllm bench serve` prints for a
//! pooling model (`benchmark()` in vLLM's `vllm/benchmarks/serve.py` with
//! `TaskType.POOLING`): requests, duration, input tokens, request and total token
//! throughput, then the end-to-end latency. Our own lines follow it, as the extras follow
//! the generation block.

use std::fmt::Write as _;

use super::format::{
    footer, latency_section, metric_row, retried_and_failures, row, row_f, section, title,
};
use crate::measuring::metrics::catalogue as metric;
use crate::measuring::metrics::PhaseSummary;

/// vLLM's pooling block, byte for byte. No goodput row: vLLM's pooling metrics have none.
pub(super) fn render_embeddings_block(s: &PhaseSummary) -> String {
    let mut out = String::new();
    title(&mut out, " Serving Benchmark Result ");
    metric_row(&mut out, &metric::COMPLETED, s);
    metric_row(&mut out, &metric::FAILED, s);
    if let Some(c) = s.max_concurrency {
        row(&mut out, "Maximum request concurrency:", c);
    }
    if let Some(r) = s.request_rate.filter(|r| r.is_finite()) {
        row_f(&mut out, "Request rate configured (RPS):", r);
    }
    // Total token throughput is input tokens over the duration: nothing is generated.
    for m in [
        &metric::DURATION,
        &metric::TOTAL_INPUT_TOKENS,
        &metric::REQUEST_THROUGHPUT,
        &metric::TOTAL_TOKEN_THROUGHPUT,
    ] {
        metric_row(&mut out, m, s);
    }
    latency_section(&mut out, &metric::E2EL, s);
    footer(&mut out, '=');
    out
}

/// Our lines after the pooling block: retried requests, failures by kind and the clock
/// E2EL was read on.
pub(super) fn render_embeddings_extras(s: &PhaseSummary) -> String {
    let mut out = String::new();
    section(&mut out, " Runner extras ");
    let _ = writeln!(out, "{}", super::clock::clock_line(&s.clock));
    retried_and_failures(&mut out, s);
    footer(&mut out, '=');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::{MetricsOptions, PhaseAccumulator, PhaseInfo, RequestRecord};

    /// The block at `percentiles` (the summary carries them).
    fn render_embeddings_block(s: &PhaseSummary, percentiles: &[f64]) -> String {
        let mut s = s.clone();
        s.percentiles = percentiles.to_vec();
        super::render_embeddings_block(&s)
    }

    /// A batch of `input` tokens sent at `sent_us`, answered at `end_us`.
    fn embedded(index: u64, sent_us: u64, end_us: u64, input: u64) -> RequestRecord {
        serde_json::from_value(serde_json::json!({
            "phase": 0, "index": index, "scheduled_ns": sent_us * 1_000,
            "sent_ns": sent_us * 1_000, "chunks": [{"t_ns": end_us * 1_000, "tokens": 1}],
            "end_ns": end_us * 1_000, "input_tokens": input, "output_tokens": 0,
            "text_tokens": 0, "endpoint": "/v1/embeddings",
        }))
        .expect("a valid record")
    }

    /// Four batches over two seconds: 1.0, 1.2, 1.4 and 1.6 ms of latency (below 2 ms the
    /// histogram is exact to 0.5 µs: the median and P99 are numpy's), at most 4 at once and
    /// 2 req/s configured. The rows, their order and formats are those `benchmark()`
    /// prints for a pooling task in vLLM's `vllm/benchmarks/serve.py` at commit
    /// def9ce85ba1079af970a58ed3d42dd861ae35d58 (vllm-project/vllm): the generation rows
    /// (generated tokens, output and peak throughput, TTFT, TPOT, ITL) left out, and
    /// "Total token throughput (tok/s):" the input tokens over the duration.
    const EMBEDDINGS_BLOCK: &str = "\
============ Serving Benchmark Result ============
Successful requests:                     4         
Failed requests:                         0         
Maximum request concurrency:             4         
Request rate configured (RPS):           2.00      
Benchmark duration (s):                  2.00      
Total input tokens:                      1000      
Request throughput (req/s):              2.00      
Total token throughput (tok/s):          500.00    
----------------End-to-end Latency----------------
Mean E2EL (ms):                          1.30      
Median E2EL (ms):                        1.30      
P99 E2EL (ms):                           1.59      
==================================================
";

    #[test]
    fn the_block_is_vllms_pooling_block() {
        let mut acc = PhaseAccumulator::new(&MetricsOptions::default());
        for (i, latency) in [1000, 1200, 1400, 1600].into_iter().enumerate() {
            let sent = 400_000 * i as u64;
            acc.record(&embedded(i as u64, sent, sent + latency, 250));
        }
        let s = acc.summarize(&PhaseInfo {
            name: "main".into(),
            duration_ns: 2_000_000_000,
            max_concurrency: Some(4),
            request_rate: Some(2.0),
            burstiness: None,
            steady_window: None,
        });
        assert!(s.answer.only_embeddings());
        assert_eq!(render_embeddings_block(&s, &[99.0]), EMBEDDINGS_BLOCK);
    }

    /// Failures and retried requests are the runner's lines: they follow the block, which
    /// stays vLLM's.
    #[test]
    fn failures_and_retries_follow_the_block() {
        let mut acc = PhaseAccumulator::new(&MetricsOptions::default());
        acc.record(&embedded(0, 0, 1000, 250));
        let mut s = acc.summarize(&PhaseInfo {
            name: "main".into(),
            duration_ns: 2_000_000_000,
            max_concurrency: None,
            request_rate: None,
            steady_window: None,
            burstiness: None,
        });
        s.retried = 2;
        s.failed = 1;
        s.failures_by_kind = vec![crate::measuring::metrics::FailureCount {
            kind: crate::measuring::metrics::ErrorKind::Http5xx,
            count: 1,
            first_message: "HTTP 503".into(),
        }];
        let block = render_embeddings_block(&s, &[99.0]);
        assert!(
            !block.contains("Retried") && !block.contains("Failed ("),
            "{block}"
        );
        let extras = render_embeddings_extras(&s);
        assert!(extras.starts_with("----------------- Runner extras ------------------\n"));
        assert!(extras.contains("\nRetried requests:                        2         \n"));
        assert!(extras.contains("\nFailed (http 5xx):                       1         \n"));
        assert!(extras.contains("\n  http 5xx: HTTP 503\n"), "{extras}");
    }
}
