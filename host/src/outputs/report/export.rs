//! Exports for spreadsheets and documents: one CSV row per request (requests.csv) and the
//! result as markdown (report.md), the vLLM block fenced as the GPUStack report shows it.

use std::fmt::Write as _;

use super::table::{csv_field, render_phase_table_markdown};
use super::text::{render_header, render_phase_result};
use super::RunHeader;
use crate::measuring::metrics::{PhaseSummary, RequestRecord};
use crate::measuring::thresholds::Verdict;

/// Columns of requests.csv; times in ms since the request's phase started.
pub const REQUEST_CSV_HEADER: &str = "phase,phase_name,index,tag,warmup,outcome,http_status,\
scheduled_ms,sent_ms,lateness_ms,ttft_ms,tpot_ms,e2el_ms,mean_itl_ms,chunks,input_tokens,output_tokens,request_id\n";

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// One CSV line (with its newline) for a record; `phase_name` is the phase's name.
pub fn request_csv_row(r: &RequestRecord, phase_name: &str) -> String {
    let opt = |v: Option<f64>| v.map_or_else(String::new, |ns| format!("{:.3}", ns / 1e6));
    let gaps: Vec<u64> = r.itls_ns().collect();
    let mean_itl = (!gaps.is_empty()).then(|| gaps.iter().sum::<u64>() as f64 / gaps.len() as f64);
    let outcome = match &r.error {
        _ if r.cancelled => "cancelled_by_scenario",
        Some(e) => e.kind.key(),
        None => "ok",
    };
    let cells = [
        r.phase.to_string(),
        csv_field(phase_name),
        r.index.to_string(),
        csv_field(r.tag.as_deref().unwrap_or("")),
        r.warmup.to_string(),
        outcome.to_string(),
        r.http_status.map_or_else(String::new, |s| s.to_string()),
        ms(r.scheduled_ns),
        ms(r.sent_ns),
        ms(r.lateness_ns()),
        opt(r.ttft_ns().map(|v| v as f64)),
        opt(r.tpot_ns()),
        opt(r.e2el_ns().map(|v| v as f64)),
        opt(mean_itl),
        r.chunks.len().to_string(),
        r.input_tokens.to_string(),
        r.output_tokens.to_string(),
        csv_field(&r.request_id),
    ];
    let mut line = cells.join(",");
    line.push('\n');
    line
}

/// The whole result as markdown: header, thresholds, the phase table, and each phase's
/// result as the text report has it (see [`render_phase_result`]) in a fenced block.
pub fn render_markdown(
    header: &RunHeader,
    phases: &[PhaseSummary],
    percentiles: &[f64],
    goodput: bool,
    verdicts: &[Verdict],
) -> String {
    let mut out = format!("# Benchmark result: {}\n\n", header.scenario);
    out.push_str("```\n");
    out.push_str(&render_header(header));
    out.push_str("```\n\n");
    if !verdicts.is_empty() {
        out.push_str(
            "## Thresholds\n\n| threshold | phase | value | verdict |\n|---|---|---|---|\n",
        );
        for v in verdicts {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} |",
                v.threshold,
                v.phase.replace('|', "\\|"),
                v.value_text(),
                if v.pass { "pass" } else { "**FAIL**" }
            );
        }
        out.push('\n');
    }
    if phases.len() > 1 {
        out.push_str("## Phases\n\n");
        out.push_str(&render_phase_table_markdown(phases));
        out.push('\n');
    }
    for s in phases {
        if phases.len() > 1 {
            let _ = writeln!(out, "## {}\n", s.name);
        }
        out.push_str("```\n");
        out.push_str(&render_phase_result(s, percentiles, goodput));
        out.push_str("```\n\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::{Chunk, ErrorKind, RequestError};

    #[test]
    fn a_request_row_has_every_column() {
        let ms = 1_000_000;
        let mut r = RequestRecord {
            request_id: "runner-0a1b2c3d-1-7".into(),
            phase: 1,
            index: 7,
            tag: Some("a,b".into()),
            scheduled_ns: ms,
            sent_ns: 3 * ms,
            first_byte_ns: None,
            chunks: vec![
                Chunk {
                    t_ns: 53 * ms,
                    tokens: 1,
                    client_delay_ns: None,
                },
                Chunk {
                    t_ns: 63 * ms,
                    tokens: 1,
                    client_delay_ns: None,
                },
                Chunk {
                    t_ns: 83 * ms,
                    tokens: 1,
                    client_delay_ns: None,
                },
            ],
            end_ns: 84 * ms,
            input_tokens: 80,
            output_tokens: 3,
            usage_output_tokens: Some(3),
            text_tokens: 3,
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
        };
        let columns = REQUEST_CSV_HEADER.trim_end().split(',').count();
        let row = request_csv_row(&r, "2 prompts");
        assert_eq!(
            row,
            "1,2 prompts,7,\"a,b\",false,ok,200,1.000,3.000,2.000,50.000,15.000,80.000,15.000,3,80,3,runner-0a1b2c3d-1-7\n"
        );
        r.chunks.clear();
        r.error = Some(RequestError {
            kind: ErrorKind::Http5xx,
            message: "x".into(),
        });
        let row = request_csv_row(&r, "p");
        assert!(row.contains(",http_5xx,"), "{row}");
        // Empty cells for the latencies, but every column is there (the tag is quoted).
        assert_eq!(row.trim_end().split(',').count(), columns + 1);
    }
}
