//! Console reports. [`render_vllm_block`] reproduces `vllm bench serve`'s result block byte
//! for byte (the `print` calls of `benchmark()` in vLLM's `vllm/benchmarks/serve.py`): rows are Python's `"{:<40} {:<10}"` / `"{:<40} {:<10.2f}"`, so short
//! values leave trailing spaces; section rulers are `"{:-^50}"`, which in Python and in Rust
//! alike put the odd pad character on the right. Every rendered string ends with a newline.

mod clock;
mod embeddings;
pub(super) mod energy;
mod format;
mod server;
mod sessions;
pub(super) mod spec_decode;
pub(super) mod steady_state;
mod targets;

use std::fmt::Write as _;

use self::format::{
    footer, latency_section, metric_row, pct, retried_and_failures, row, row_f, section, title,
};
pub(super) use self::server::lines as server_lines;
use super::run_report::{ReportPhase, RunReport, ShardStarts};
use super::table::{aligned, aligned_table, tag_columns};
use super::RunHeader;
use crate::measuring::metrics::catalogue as metric;
use crate::measuring::metrics::catalogue::percentile_word;
use crate::measuring::metrics::{PhaseSummary, CLIENT_BOUND_LATENESS_MS};
use crate::safeguards::display::{escape_control, escape_control_multiline};

/// report.txt: the header, a blank line, then the body.
pub fn render(report: &RunReport) -> String {
    format!("{}\n{}", render_header(&report.header), render_body(report))
}

/// The text report after the header: each phase, the scenario's notes, the thresholds, a
/// merged run's shards and the request stream digest. Servers' messages reach it: control
/// characters are escaped (their secrets were hidden where they entered, see `redact`).
pub fn render_body(report: &RunReport) -> String {
    let mut body = render_phases(&report.phases);
    body += &render_notes(&report.shown_notes());
    body += &render_prefix_intent(&super::prefix_intent::compare(report));
    if let Some(leftover) = super::leftover_cache::check(report) {
        let _ = writeln!(body, "{}\n", leftover.warning());
    }
    body += &render_thresholds(&report.verdicts, report.many_phases());
    if let Some(shards) = &report.shards {
        body += &render_shards(shards);
    }
    let _ = writeln!(
        body,
        "Request stream digest (sha256): {}",
        report.request_digest()
    );
    body += &render_dependence(&report.header.stream_depends_on);
    // Also after the figures: `--quiet` prints no header.
    if report.header.virtual_time {
        let _ = writeln!(body, "Clock: {VIRTUAL_CLOCK}");
    }
    escape_control_multiline(&body).into_owned()
}

/// A short readable block printed before the results.
pub fn render_header(h: &RunHeader) -> String {
    let mut out = String::new();
    // Every value comes from a scenario, a package or the server (the model's name): each
    // stays on its line, control characters escaped; a description may span lines.
    let mut line = |label: &str, value: &str, multiline: bool| {
        let value = if multiline {
            escape_control_multiline(value)
        } else {
            escape_control(value)
        };
        let _ = writeln!(out, "{:<16} {value}", format!("{label}:"));
    };
    line("Scenario", &h.scenario, false);
    if !h.description.is_empty() {
        line("Description", &h.description, true);
    }
    let params = if h.params.is_empty() {
        "(none)".to_string()
    } else {
        h.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    line("Parameters", &params, false);
    if let Some((name, version)) = &h.package {
        line("Package", &format!("{name} {version}"), false);
    }
    line(
        "Scenario digest",
        &format!("sha256:{}", h.scenario_digest),
        false,
    );
    line("Seed", &h.seed.to_string(), false);
    if h.targets.is_empty() {
        line("Target", &h.target, false);
    }
    for (i, target) in h.targets.iter().enumerate() {
        line(&format!("Target {i}"), target, false);
    }
    if h.virtual_time {
        line("Clock", VIRTUAL_CLOCK, false);
    }
    line("Model", &h.model, false);
    line("API", &h.api, false);
    line("Tokenizer", &h.tokenizer, false);
    if let Some(d) = &h.request_digest {
        line("Request digest", &format!("sha256:{d}"), false);
    }
    line("Runner version", &h.runner_version, false);
    out
}

/// What the header says of a run in virtual time, so nobody takes its times for a
/// measurement.
pub const VIRTUAL_CLOCK: &str =
    "virtual (--virtual-time): every time in this report is simulated, not measured";

/// The exact `============ Serving Benchmark Result ============` block of `vllm bench serve`
/// with `--percentile-metrics ttft,tpot,itl,e2el`, at the percentiles the summary was
/// computed at; a goodput SLO adds the `Request goodput (req/s):` row.
fn render_vllm_block(s: &PhaseSummary) -> String {
    let mut out = String::new();
    title(&mut out, " Serving Benchmark Result ");
    metric_row(&mut out, &metric::COMPLETED, s);
    metric_row(&mut out, &metric::FAILED, s);
    // Retried requests are ours: the extras show them, the block keeps vLLM's rows.
    if let Some(c) = s.max_concurrency {
        row(&mut out, "Maximum request concurrency:", c);
    }
    if let Some(r) = s.request_rate.filter(|r| r.is_finite()) {
        row_f(&mut out, "Request rate configured (RPS):", r);
    }
    // vLLM's order, which is not the catalogue's.
    let mut metrics = vec![
        &metric::DURATION,
        &metric::TOTAL_INPUT_TOKENS,
        &metric::TOTAL_OUTPUT_TOKENS,
        &metric::REQUEST_THROUGHPUT,
    ];
    if s.slo.is_some() {
        metrics.push(&metric::REQUEST_GOODPUT);
    }
    metrics.extend([
        &metric::OUTPUT_THROUGHPUT,
        &metric::PEAK_OUTPUT_THROUGHPUT,
        &metric::PEAK_CONCURRENCY,
        &metric::TOTAL_TOKEN_THROUGHPUT,
    ]);
    for m in metrics {
        metric_row(&mut out, m, s);
    }
    for m in metric::LATENCIES
        .iter()
        .filter(|m| m.in_result == metric::InResult::Vllm)
    {
        latency_section(&mut out, m, s);
    }
    footer(&mut out, '=');
    out
}

/// Whether the extras show metric `key`: the time to first answer and the token split
/// only when the model reasoned (else TTFA is TTFT and every token is an answer token);
/// the client delay only when the kernel stamped a chunk (else there is none to show).
fn shown(key: &str, s: &PhaseSummary) -> bool {
    if key == metric::CLIENT_DELAY.key {
        return s.client_delay.count > 0;
    }
    let answer = [
        metric::TTFA.key,
        metric::REASONING_TOKENS.key,
        metric::ANSWER_TOKENS.key,
    ];
    s.answer.reasoning_requests > 0 || !answer.contains(&key)
}

/// Our own lines, printed right after the vLLM block's `=` footer, in the same 40/10 style.
/// Labels never start like a vLLM label (e.g. "Mean per-token ITL", not "Mean ITL ..."), so
/// parsers of the vLLM block are not confused.
fn render_extras(s: &PhaseSummary) -> String {
    let mut out = String::new();
    section(&mut out, " Runner extras ");
    let ours = |rows: metric::TextRows| {
        metric::LATENCIES.iter().filter(move |m| {
            m.in_result != metric::InResult::Vllm && m.rows == rows && shown(m.key, s)
        })
    };
    for m in ours(metric::TextRows::MeanMedianPercentiles) {
        latency_section(&mut out, m, s);
    }
    for m in metric::SCALARS
        .iter()
        .filter(|m| m.in_result == metric::InResult::Runner && shown(m.key, s))
    {
        metric_row(&mut out, m, s);
    }
    token_accounting(&mut out, s);
    endpoint_rows(&mut out, s);
    for m in ours(metric::TextRows::MeanP99Max) {
        latency_section(&mut out, m, s);
    }
    for m in ours(metric::TextRows::MedianP99Max) {
        latency_section(&mut out, m, s);
    }
    let _ = writeln!(out, "{}", clock::clock_line(&s.clock));
    retried_and_failures(&mut out, s);
    if s.client_bound {
        let _ = writeln!(
            out,
            "WARNING: the client could not keep its schedule (P99 send lateness {:.2} ms > {} ms): \
             the offered load was lower than configured.",
            pct(&s.lateness, 99.0),
            CLIENT_BOUND_LATENESS_MS
        );
    }
    if !s.tags.is_empty() {
        section(&mut out, "Per-tag Metrics");
        out.push_str(&aligned_table(s.tags.iter().map(tag_columns).collect()));
    }
    // The header lists the targets' URLs by index.
    out.push_str(&targets::render_text_section(s, &[]));
    footer(&mut out, '=');
    out
}

/// The phases of a run (a single run's or a merge's): each one's heading when there are
/// several, then the warm-up line or the vLLM block with our extras and how it ended,
/// then the table over the measured phases.
fn render_phases(phases: &[ReportPhase]) -> String {
    let mut out = String::new();
    let many = phases.len() > 1;
    for (i, phase) in phases.iter().enumerate() {
        let s = &phase.summary;
        if many {
            let _ = writeln!(
                out,
                "Phase {}/{}: {} ({})",
                i + 1,
                phases.len(),
                escape_control(&s.name),
                phase.arrival
            );
        }
        if phase.warmup {
            let _ = writeln!(
                out,
                "Warm-up: {} requests sent ({} succeeded, {} failed), left out of the statistics.\n",
                s.completed + s.failed,
                s.completed,
                s.failed
            );
            continue;
        }
        out += &render_phase_result(s);
        out += &steady_state::render_section(s);
        if let Some(sessions) = &s.sessions {
            out += &sessions::render_sessions(sessions);
        }
        if let Some(server) = &phase.server {
            // No scrapes: energy alone (`--power-metrics` with `--server-metrics off`).
            if server.samples > 0 {
                out += &server::render_section(server, s);
            }
            out += &spec_decode::render_section(server);
            out += &energy::render_section(server);
        }
        if let Some(ended) = &phase.ended {
            let _ = writeln!(out, "Phase ended: {ended}.");
        }
        if phase.cut > 0 {
            let _ = writeln!(
                out,
                "{} requests were still running at the drain limit and were cut (counted as failed, cancelled)",
                phase.cut
            );
        }
        out.push('\n');
    }
    let measured: Vec<PhaseSummary> = phases
        .iter()
        .filter(|p| !p.warmup)
        .map(|p| p.summary.clone())
        .collect();
    if measured.len() > 1 {
        out += &render_phase_table(&measured);
        out.push('\n');
    }
    out
}

/// What the report says of a phase that sent no request, in place of its block.
const NOTHING_SENT: &str = "No requests were sent in this phase: nothing to measure.";

/// A measured phase's results as text, markdown and HTML show them: the vLLM block and our
/// extras; vLLM's pooling block and ours when every request went to embeddings (nothing
/// generated); one line when the phase sent nothing (a block of zeros would read as
/// measured zeros).
pub(super) fn render_phase_result(s: &PhaseSummary) -> String {
    if s.completed + s.failed + s.cancelled == 0 {
        return format!("{NOTHING_SENT}\n");
    }
    let (mut out, extras) = if s.answer.only_embeddings() {
        let block = embeddings::render_embeddings_block(s);
        (block, embeddings::render_embeddings_extras(s))
    } else {
        (render_vllm_block(s), render_extras(s))
    };
    out.push_str(&extras);
    out.push_str(&server::render_usage_cache(s));
    out
}

/// The prefix-cache hit rate each measured phase's server achieved beside the one the
/// scenario intended, with a warning where they part (nothing without both).
fn render_prefix_intent(rows: &[super::prefix_intent::PrefixIntent]) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    section(&mut out, " Prefix Cache ");
    for row in rows {
        let phase = escape_control(&row.phase);
        let _ = writeln!(
            out,
            "{:<40} {:.1} % achieved, {:.1} % intended (scenario)",
            format!("Hit rate, {phase}:"),
            row.achieved * 100.0,
            row.intended * 100.0
        );
        if row.warns() {
            let _ = writeln!(
                out,
                "warning: phase `{phase}` hit the prefix cache {:+.1} points off what the workload intended (over {} points): a cache smaller than the workload assumed, evicted under load, off, or left warm by an earlier run",
                row.gap_points(),
                super::prefix_intent::WARN_POINTS
            );
        }
    }
    footer(&mut out, '=');
    out.push('\n');
    out
}

/// The results a scenario reported with `note` (nothing when it reported none).
fn render_notes(notes: &[(String, crate::workloads::scenario::NoteValue)]) -> String {
    let mut out = String::new();
    if notes.is_empty() {
        return out;
    }
    section(&mut out, " Scenario Result ");
    for (key, value) in notes {
        let value = escape_control_multiline(&value.to_string()).into_owned();
        let _ = writeln!(out, "{:<40} {value}", format!("{}:", escape_control(key)));
    }
    footer(&mut out, '=');
    out.push('\n');
    out
}

/// Output tokens three ways, which count the totals use, and any disagreement.
fn token_accounting(out: &mut String, s: &PhaseSummary) {
    let t = &s.token_accounting;
    section(out, "Output Token Accounting");
    row(out, "Output tokens counted by:", t.source(s.completed));
    if t.usage_requests > 0 {
        row(out, "Output tokens by server usage:", t.usage_tokens);
    }
    row(out, "Output tokens by tokenizer:", t.tokenizer_tokens);
    row(out, "Content chunks:", t.chunks);
    // Compare each count with the one the totals use (usage where present).
    if t.usage_requests > 0 && t.usage_requests == s.completed {
        for (what, n) in [("tokenizer", t.tokenizer_tokens), ("chunk", t.chunks)] {
            if n != t.usage_tokens {
                let pct =
                    100.0 * (n as f64 - t.usage_tokens as f64) / (t.usage_tokens.max(1) as f64);
                let _ = writeln!(
                    out,
                    "NOTE: the {what} count differs from the server's usage by {:+} tokens ({pct:+.2} %).",
                    n as i64 - t.usage_tokens as i64
                );
            }
        }
    }
}

/// The thresholds with their values and verdicts, in the 40/10 style under their own
/// ruler; `per_phase` names the phase of each line. Empty when there are none.
fn render_thresholds(
    verdicts: &[crate::measuring::thresholds::Verdict],
    per_phase: bool,
) -> String {
    let mut out = String::new();
    if verdicts.is_empty() {
        return out;
    }
    section(&mut out, "Thresholds");
    for v in verdicts {
        let label = if per_phase {
            format!("{} [{}]", v.threshold, v.phase)
        } else {
            v.threshold.clone()
        };
        let _ = writeln!(
            out,
            "{label:<40} {:<10} {}",
            v.value_text(),
            if v.pass { "pass" } else { "FAIL" }
        );
    }
    footer(&mut out, '=');
    out.push('\n');
    out
}

/// A closing table over phases (e.g. a sweep), aligned columns: names left, numbers right.
/// The TTFT tail column is P99 when every phase has it, else the highest percentile of the
/// first phase.
fn render_phase_table(phases: &[PhaseSummary]) -> String {
    let tail_p = if phases.iter().all(|s| s.ttft.percentile(99.0).is_some()) {
        99.0
    } else {
        phases
            .first()
            .and_then(|s| s.ttft.percentiles.iter().map(|&(p, _)| p).reduce(f64::max))
            .unwrap_or(99.0)
    };
    let headers: Vec<String> = [
        "phase",
        "ok",
        "failed",
        "duration s",
        "req/s",
        "out tok/s",
        "mean TTFT ms",
    ]
    .iter()
    .map(|h| h.to_string())
    .chain([format!("P{} TTFT ms", percentile_word(tail_p))])
    .chain(
        ["mean TPOT ms", "mean ITL ms", "mean E2EL ms"]
            .iter()
            .map(|h| h.to_string()),
    )
    .collect();
    let f2 = |x: f64| format!("{x:.2}");
    let rows: Vec<Vec<String>> = phases
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                s.completed.to_string(),
                s.failed.to_string(),
                f2(s.duration_s),
                f2(s.request_throughput),
                f2(s.output_throughput),
                f2(s.ttft.mean),
                f2(pct(&s.ttft, tail_p)),
                f2(s.tpot.mean),
                f2(s.itl.mean),
                f2(s.e2el.mean),
            ]
        })
        .collect();
    aligned(headers, rows, true)
}

/// The extras' rows of requests per endpoint, when a phase sent to more than one.
fn endpoint_rows(out: &mut String, s: &PhaseSummary) {
    if s.answer.endpoints.len() < 2 {
        return;
    }
    section(out, "Requests by Endpoint");
    for e in &s.answer.endpoints {
        row(out, &format!("Requests to {}:", e.endpoint), e.requests);
    }
}

/// The line saying what the request stream may have depended on beyond the seed and the
/// parameters (see `scenario::dependence`); none when nothing.
fn render_dependence(reasons: &[String]) -> String {
    if reasons.is_empty() {
        return String::new();
    }
    format!(
        "Request stream may have depended on responses or timing, through: {} \
         (the same seed may send other requests on another run)\n",
        reasons.join(", ")
    )
}

/// One line per shard start, and the spread.
fn render_shards(shards: &ShardStarts) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:=^50}", " Shards ");
    let _ = writeln!(out, "{:<40} {:<10}", "Shards merged:", shards.shards.len());
    if let Some(at) = &shards.start_at {
        let _ = writeln!(out, "{:<40} {}", "Start at:", at);
    }
    let offsets: Vec<f64> = shards
        .shards
        .iter()
        .filter_map(|s| s.clock_offset_ms)
        .collect();
    if !offsets.is_empty() {
        let lo = offsets.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = offsets.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let _ = writeln!(out, "{:<40} {:<10.2}", "Min start offset (ms):", lo);
        let _ = writeln!(out, "{:<40} {:<10.2}", "Max start offset (ms):", hi);
    }
    let _ = writeln!(
        out,
        "{:<40} {:<10.2}",
        "Start spread (ms):",
        shards.spread_ms()
    );
    let _ = writeln!(out, "{}\n", "=".repeat(50));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::{Distribution, ErrorKind, FailureCount, Slo};

    /// `s` computed at `percentiles`, with a goodput SLO when `goodput`.
    fn at(s: &PhaseSummary, percentiles: &[f64], goodput: bool) -> PhaseSummary {
        let mut s = s.clone();
        s.percentiles = percentiles.to_vec();
        s.slo = goodput.then(Slo::default);
        s
    }

    fn render_vllm_block(s: &PhaseSummary, percentiles: &[f64], goodput: bool) -> String {
        super::render_vllm_block(&at(s, percentiles, goodput))
    }

    fn render_extras(s: &PhaseSummary, percentiles: &[f64]) -> String {
        super::render_extras(&at(s, percentiles, s.slo.is_some()))
    }

    fn render_phase_result(s: &PhaseSummary, percentiles: &[f64], goodput: bool) -> String {
        super::render_phase_result(&at(s, percentiles, goodput))
    }

    fn dist(mean: f64, median: f64, p99: f64) -> Distribution {
        Distribution {
            count: 10,
            mean,
            median,
            std: 1.0,
            min: 0.0,
            max: p99,
            percentiles: vec![(99.0, p99)],
        }
    }

    /// Synthetic figures filling every row of the block.
    fn vllm_example() -> PhaseSummary {
        let acc = crate::measuring::metrics::PhaseAccumulator::new(&Default::default());
        let mut s = acc.summarize(&crate::measuring::metrics::PhaseInfo {
            name: String::new(),
            duration_ns: 0,
            max_concurrency: None,
            request_rate: None,
            burstiness: None,
            steady_window: None,
        });
        s.name = "main".into();
        s.completed = 1000;
        s.failed = 0;
        s.retried = 0;
        s.cancelled = 0;
        s.failures_by_kind = vec![];
        s.max_concurrency = Some(64);
        s.request_rate = Some(20.0);
        s.burstiness = Some(1.0);
        s.duration_s = 52.35;
        s.total_input_tokens = 1_024_000;
        s.total_output_tokens = 128_000;
        s.total_chunks = 128_000;
        s.token_accounting = Default::default();
        s.request_throughput = 19.10;
        s.output_throughput = 2445.28;
        s.total_token_throughput = 22007.50;
        s.goodput = Some(17.50);
        s.slo = None;
        s.percentiles = vec![99.0];
        s.peak_output_throughput = 3391.0;
        s.peak_concurrency = 64.0;
        s.ttft = dist(112.30, 98.70, 401.20);
        s.tpot = dist(24.10, 23.80, 31.00);
        s.itl = dist(23.90, 22.50, 58.40);
        s.e2el = dist(3180.20, 3150.40, 3990.70);
        s.token_latency = dist(41.71, 39.85, 82.11);
        s.itl_per_token = dist(23.904, 22.5, 58.4);
        s.lateness = dist(0.1234, 0.1, 0.9);
        s.client_delay = Default::default();
        s.clock = crate::measuring::metrics::StampSources {
            read_chunks: 128_000,
            handoff_sends: 1000,
            ..Default::default()
        };
        s.answer = Default::default();
        s.mean_tokens_per_chunk = 1.0;
        s.client_bound = false;
        s.tags = vec![];
        s.targets = vec![];
        s
    }

    /// The block `vllm bench serve` prints for those figures, in its layout (trailing spaces
    /// preserved).
    const VLLM_BLOCK: &str = "\
============ Serving Benchmark Result ============
Successful requests:                     1000      
Failed requests:                         0         
Maximum request concurrency:             64        
Request rate configured (RPS):           20.00     
Benchmark duration (s):                  52.35     
Total input tokens:                      1024000   
Total generated tokens:                  128000    
Request throughput (req/s):              19.10     
Request goodput (req/s):                 17.50     
Output token throughput (tok/s):         2445.28   
Peak output token throughput (tok/s):    3391.00   
Peak concurrent requests:                64.00     
Total token throughput (tok/s):          22007.50  
---------------Time to First Token----------------
Mean TTFT (ms):                          112.30    
Median TTFT (ms):                        98.70     
P99 TTFT (ms):                           401.20    
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          24.10     
Median TPOT (ms):                        23.80     
P99 TPOT (ms):                           31.00     
---------------Inter-token Latency----------------
Mean ITL (ms):                           23.90     
Median ITL (ms):                         22.50     
P99 ITL (ms):                            58.40     
----------------End-to-end Latency----------------
Mean E2EL (ms):                          3180.20   
Median E2EL (ms):                        3150.40   
P99 E2EL (ms):                           3990.70   
==================================================
";

    #[test]
    fn vllm_block_matches_vllms_layout() {
        assert_eq!(
            render_vllm_block(&vllm_example(), &[99.0], true),
            VLLM_BLOCK
        );
    }

    #[test]
    fn vllm_block_optional_rows() {
        let mut s = vllm_example();
        s.max_concurrency = None;
        s.request_rate = None; // infinite: no "configured" row
        s.failed = 3;
        s.ttft.percentiles = vec![(50.0, 98.7), (99.9, 1234.5678)];
        let text = render_vllm_block(&s, &[50.0, 99.9], false);
        let expected_head = "\
============ Serving Benchmark Result ============
Successful requests:                     1000      
Failed requests:                         3         
Benchmark duration (s):                  52.35     
Total input tokens:                      1024000   
Total generated tokens:                  128000    
Request throughput (req/s):              19.10     
Output token throughput (tok/s):         2445.28   
";
        assert!(text.starts_with(expected_head), "{text}");
        assert!(text.contains("\nP50 TTFT (ms):                           98.70     \n"));
        assert!(text.contains("\nP99.9 TTFT (ms):                         1234.57   \n"));
        // not computed for TPOT: reads 0, never N/A
        assert!(text.contains("\nP99.9 TPOT (ms):                         0.00      \n"));
        assert!(!text.contains("goodput"));
        // long values overflow the 10-column field, like Python
        s.total_input_tokens = 123_456_789_012;
        let text = render_vllm_block(&s, &[99.0], false);
        assert!(text.contains("\nTotal input tokens:                      123456789012\n"));
    }

    #[test]
    fn section_rulers_match_vllm_reference_output() {
        // Literal lines of a report printed by `vllm bench serve` (a 20-minute Poisson run).
        let mut out = String::new();
        title(&mut out, " Serving Benchmark Result ");
        section(&mut out, "Time to First Token");
        section(&mut out, "Time per Output Token (excl. 1st token)");
        section(&mut out, "Inter-token Latency");
        section(&mut out, "End-to-end Latency");
        section(&mut out, "Token Latency (e2e_latency / output_len)");
        footer(&mut out, '=');
        assert_eq!(
            out,
            "============ Serving Benchmark Result ============\n\
             ---------------Time to First Token----------------\n\
             -----Time per Output Token (excl. 1st token)------\n\
             ---------------Inter-token Latency----------------\n\
             ----------------End-to-end Latency----------------\n\
             -----Token Latency (e2e_latency / output_len)-----\n\
             ==================================================\n"
        );
        // And rows from the same file.
        let mut out = String::new();
        row(&mut out, "Successful requests:", 4762u64);
        row_f(&mut out, "Benchmark duration (s):", 1200.2149);
        row_f(&mut out, "P99 E2EL (ms):", 41893.8251);
        row_f(&mut out, "Mean Token Latency (ms):", 41.71);
        assert_eq!(
            out,
            "Successful requests:                     4762      \n\
             Benchmark duration (s):                  1200.21   \n\
             P99 E2EL (ms):                           41893.83  \n\
             Mean Token Latency (ms):                 41.71     \n"
        );
    }

    #[test]
    fn extras_golden() {
        let mut s = vllm_example();
        s.failures_by_kind = vec![
            FailureCount {
                kind: ErrorKind::Http5xx,
                count: 2,
                first_message: "HTTP 503:\n  overloaded".into(),
            },
            FailureCount {
                kind: ErrorKind::Timeout,
                count: 1,
                first_message: "x".repeat(170),
            },
        ];
        s.lateness = dist(3.456, 0.5, 12.345);
        s.lateness.max = 20.0;
        s.client_bound = true;
        s.mean_tokens_per_chunk = 1.5;
        s.token_accounting = crate::measuring::metrics::TokenAccounting {
            usage_requests: s.completed,
            usage_tokens: 128_000,
            tokenizer_tokens: 128_010,
            chunks: 85_334,
        };
        let expected = "\
----------------- Runner extras ------------------
-----Token Latency (e2e_latency / output_len)-----
Mean Token Latency (ms):                 41.71     
Median Token Latency (ms):               39.85     
P99 Token Latency (ms):                  82.11     
----------Inter-token Latency per Token-----------
Mean per-token ITL (ms):                 23.90     
Median per-token ITL (ms):               22.50     
P99 per-token ITL (ms):                  58.40     
Mean tokens per chunk:                   1.50      
-------------Output Token Accounting--------------
Output tokens counted by:                server usage
Output tokens by server usage:           128000    
Output tokens by tokenizer:              128010    
Content chunks:                          85334     
NOTE: the tokenizer count differs from the server's usage by +10 tokens (+0.01 %).
NOTE: the chunk count differs from the server's usage by -42666 tokens (-33.33 %).
---------Send Lateness (sent - scheduled)---------
Mean send lateness (ms):                 3.46      
P99 send lateness (ms):                  12.35     
Max send lateness (ms):                  20.00     
Latency clock: user-space read times (the kernel gave no receive timestamps); sends stamped at the hand-off to the HTTP client
-------------Failed Requests by Kind--------------
Failed (http 5xx):                       2         
Failed (request timeout):                1         
First message of each kind:
  http 5xx: HTTP 503: overloaded
  request timeout: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…
WARNING: the client could not keep its schedule (P99 send lateness 12.35 ms > 10 ms): the offered load was lower than configured.
==================================================
";
        assert_eq!(render_extras(&s, &[99.0]), expected);
    }

    /// vLLM's client never sends a request twice: retried requests are an extras row, and
    /// the block stays vLLM's (it once had a `Retried requests:` row inside).
    #[test]
    fn retried_requests_are_in_the_extras_not_the_block() {
        let mut s = vllm_example();
        s.retried = 7;
        assert_eq!(render_vllm_block(&s, &[99.0], true), VLLM_BLOCK);
        let extras = render_extras(&s, &[99.0]);
        assert!(
            extras.contains("\nRetried requests:                        7         \n"),
            "{extras}"
        );
    }

    /// A phase that sent nothing says so on one line, not in a block of zeros.
    #[test]
    fn a_phase_that_sent_nothing_says_so() {
        let mut s = vllm_example();
        (s.completed, s.failed, s.cancelled) = (0, 0, 0);
        assert_eq!(
            render_phase_result(&s, &[99.0], false),
            format!("{NOTHING_SENT}\n")
        );
        // A request the scenario cancelled was sent.
        s.cancelled = 1;
        let text = render_phase_result(&s, &[99.0], true);
        assert!(
            text.starts_with("============ Serving Benchmark Result"),
            "{text}"
        );
    }

    #[test]
    fn extras_without_failures_or_warning() {
        let text = render_extras(&vllm_example(), &[99.0]);
        assert!(!text.contains("Failed"));
        assert!(!text.contains("WARNING"));
        assert!(text.ends_with(
            "Max send lateness (ms):                  0.90      \n\
             Latency clock: user-space read times (the kernel gave no receive timestamps); \
             sends stamped at the hand-off to the HTTP client\n\
             ==================================================\n"
        ));
        // No chunk had a kernel time: no client delay section.
        assert!(!text.contains("Client Delay"));
    }

    #[test]
    fn extras_with_kernel_times_show_the_client_delay() {
        let mut s = vllm_example();
        s.client_delay = Distribution {
            count: 128_000,
            mean: 0.02,
            median: 0.011,
            std: 0.01,
            min: 0.001,
            max: 1.25,
            percentiles: vec![(99.0, 0.0874), (50.0, 0.011)],
        };
        s.clock = crate::measuring::metrics::StampSources {
            kernel_chunks: 128_000,
            read_chunks: 0,
            socket_write_sends: 1000,
            handoff_sends: 0,
            send_write: Distribution {
                count: 1000,
                max: 0.04,
                percentiles: vec![(99.0, 0.012)],
                ..Distribution::default()
            },
        };
        let expected_tail = "\
---------Send Lateness (sent - scheduled)---------
Mean send lateness (ms):                 0.12      
P99 send lateness (ms):                  0.90      
Max send lateness (ms):                  0.90      
-------Client Delay (read - kernel arrival)-------
Median client delay (ms):                0.011     
P99 client delay (ms):                   0.087     
Max client delay (ms):                   1.250     
Latency clock: kernel receive times (SO_TIMESTAMPING) for 100.0 % of chunks; sends stamped at the socket write (P99 write 0.012 ms, max 0.040 ms)
==================================================
";
        let text = render_extras(&s, &[99.0]);
        assert!(text.ends_with(expected_tail), "{text}");
        // The vLLM block does not move.
        assert_eq!(render_vllm_block(&s, &[99.0], true), VLLM_BLOCK);
    }

    #[test]
    fn header_block() {
        let h = RunHeader {
            scenario: "chat-poisson".into(),
            description: "Poisson arrivals".into(),
            params: vec![
                ("rate".into(), "4".into()),
                ("duration".into(), "20m".into()),
            ],
            seed: 7,
            target: "built-in simulator (profile default)".into(),
            targets: vec![],
            model: "m".into(),
            api: "chat".into(),
            tokenizer: "cl100k_base".into(),
            request_digest: Some("ab12".into()),
            trace_id: None,
            stream_depends_on: vec![],
            runner_version: "0.1.0".into(),
            package: Some(("team-a/chat-mix".into(), "1.2.0".into())),
            scenario_digest: "cafe".into(),
            wit_version: "0.1.0".into(),
            twin: None,
            sim_overrides: Default::default(),
            virtual_time: false,
        };
        assert_eq!(
            render_header(&h),
            "\
Scenario:        chat-poisson
Description:     Poisson arrivals
Parameters:      rate=4, duration=20m
Package:         team-a/chat-mix 1.2.0
Scenario digest: sha256:cafe
Seed:            7
Target:          built-in simulator (profile default)
Model:           m
API:             chat
Tokenizer:       cl100k_base
Request digest:  sha256:ab12
Runner version:  0.1.0
"
        );
        let h = RunHeader {
            description: String::new(),
            params: vec![],
            request_digest: None,
            package: None,
            ..h
        };
        let text = render_header(&h);
        assert!(text.contains("Parameters:      (none)\n"));
        assert!(!text.contains("Description") && !text.contains("Request digest"));
        assert!(!text.contains("Package"));
    }

    #[test]
    fn phase_table_golden() {
        let mut a = vllm_example();
        a.name = "rate=1".into();
        let mut b = vllm_example();
        b.name = "rate=16 (saturated)".into();
        b.completed = 12;
        b.failed = 3;
        b.e2el.mean = 123456.789;
        let expected = "\
phase                  ok  failed  duration s  req/s  out tok/s  mean TTFT ms  P99 TTFT ms  mean TPOT ms  mean ITL ms  mean E2EL ms
-----------------------------------------------------------------------------------------------------------------------------------
rate=1               1000       0       52.35  19.10    2445.28        112.30       401.20         24.10        23.90       3180.20
rate=16 (saturated)    12       3       52.35  19.10    2445.28        112.30       401.20         24.10        23.90     123456.79
";
        assert_eq!(render_phase_table(&[a, b]), expected);
    }

    #[test]
    fn phase_table_without_p99_uses_highest() {
        let mut a = vllm_example();
        a.ttft.percentiles = vec![(50.0, 1.0), (90.0, 2.0)];
        let text = render_phase_table(&[a]);
        assert!(text.starts_with("phase  "));
        assert!(text.contains("P90 TTFT ms"));
        assert!(render_phase_table(&[]).starts_with("phase  ok"));
    }
}
