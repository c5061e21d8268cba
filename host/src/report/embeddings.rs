//! The text report of a phase whose requests all went to `/v1/embeddings`: nothing is
//! generated, so no TTFT, TPOT or ITL; the block keeps the vLLM block's layout (`vllm
//! bench serve` prints this reduced block for pooling models) with requests, duration,
//! input tokens, request and input token throughput, then the end-to-end latency.

use super::text_format::{footer, latency_section, metric_row, row, row_f, section, title};
use crate::metrics::catalogue as metric;
use crate::metrics::PhaseSummary;

pub use super::endpoints::endpoint_rows;

pub fn render_embeddings_block(s: &PhaseSummary, percentiles: &[f64]) -> String {
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
    for m in [
        &metric::DURATION,
        &metric::TOTAL_INPUT_TOKENS,
        &metric::REQUEST_THROUGHPUT,
    ] {
        metric_row(&mut out, m, s);
    }
    // Input tokens only: what total_token_throughput is when nothing is generated.
    row_f(
        &mut out,
        "Input token throughput (tok/s):",
        s.total_token_throughput,
    );
    latency_section(&mut out, &metric::E2EL, s, percentiles);
    if !s.failures_by_kind.is_empty() {
        section(&mut out, "Failed Requests by Kind");
        for f in &s.failures_by_kind {
            row(&mut out, &format!("Failed ({}):", f.kind.label()), f.count);
        }
    }
    footer(&mut out, '=');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{MetricsOptions, PhaseAccumulator, PhaseInfo, RequestRecord};

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
    /// histogram is exact to 0.5 µs: the median and P99 are numpy's).
    const EMBEDDINGS_BLOCK: &str = "\
============ Serving Benchmark Result ============
Successful requests:                     4         
Failed requests:                         0         
Benchmark duration (s):                  2.00      
Total input tokens:                      1000      
Request throughput (req/s):              2.00      
Input token throughput (tok/s):          500.00    
----------------End-to-end Latency----------------
Mean E2EL (ms):                          1.30      
Median E2EL (ms):                        1.30      
P99 E2EL (ms):                           1.59      
==================================================
";

    #[test]
    fn the_block_follows_the_vllm_layout_without_generation_rows() {
        let mut acc = PhaseAccumulator::new(&MetricsOptions::default());
        for (i, latency) in [1000, 1200, 1400, 1600].into_iter().enumerate() {
            let sent = 400_000 * i as u64;
            acc.record(&embedded(i as u64, sent, sent + latency, 250));
        }
        let s = acc.summarize(&PhaseInfo {
            name: "main".into(),
            duration_ns: 2_000_000_000,
            max_concurrency: None,
            request_rate: None,
            burstiness: None,
        });
        assert!(s.answer.only_embeddings());
        assert_eq!(render_embeddings_block(&s, &[99.0]), EMBEDDINGS_BLOCK);
    }
}
