//! The CSV files: one row per request (requests.csv) and the table over phases
//! (phases.csv), for spreadsheets and plots.

use super::run_report::RunReport;
use super::table::columns;
use crate::measuring::metrics::{PhaseSummary, RequestRecord};

/// Columns of requests.csv; times in ms since the request's phase started.
pub(super) const REQUEST_CSV_HEADER: &str = "phase,phase_name,index,tag,warmup,outcome,http_status,\
scheduled_ms,sent_ms,lateness_ms,ttft_ms,tpot_ms,e2el_ms,mean_itl_ms,chunks,input_tokens,output_tokens,request_id\n";

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// One CSV line (with its newline) for a record; `phase_name` is the phase's name.
pub(super) fn request_csv_row(r: &RequestRecord, phase_name: &str) -> String {
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

/// phases.csv: the table over the measured phases.
pub fn render(report: &RunReport) -> String {
    phase_table(&report.measured())
}

pub(super) fn phase_table(phases: &[PhaseSummary]) -> String {
    let mut out = String::new();
    let Some(first) = phases.first() else {
        return out;
    };
    let titles: Vec<&str> = columns(first).iter().map(|c| c.0).collect();
    out.push_str(&titles.join(","));
    out.push('\n');
    for s in phases {
        let cells: Vec<String> = columns(s).into_iter().map(|c| csv_field(&c.1)).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// A CSV cell. Text from outside (a tag, a phase name, a request id) has its control and
/// bidi characters written visibly (`display::escape_control`), and a cell a spreadsheet
/// would run as a formula (`=`, `+`, `-` or `@` first, as `=HYPERLINK(…)`) gets a leading
/// `'`, OWASP's advice against CSV injection; numbers are kept as they are. Then quoted
/// where RFC 4180 needs it.
pub(super) fn csv_field(s: &str) -> String {
    let mut cell = crate::safeguards::display::escape_control(s).into_owned();
    let formula = cell.starts_with(['=', '+', '-', '@']);
    if formula && cell.parse::<f64>().is_err() {
        cell.insert(0, '\'');
    }
    if cell.contains([',', '"']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell
    }
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
            trace: Default::default(),
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
            session: Default::default(),
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
