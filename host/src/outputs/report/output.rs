//! The files `--output DIR` gets at the end of a run, all rendered from one [`RunReport`].
//! One streaming pass over requests.jsonl feeds requests.csv and the charts, so memory
//! stays flat however many requests the run had.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::export::{render_markdown, request_csv_row, REQUEST_CSV_HEADER};
use super::html::{render_html, HtmlReport};
use super::run_report::RunReport;
use super::series::{PhaseSlot, Series};
use super::table::{
    render_phase_table_csv, render_phase_table_markdown, render_tag_table_markdown,
};
use super::text::render_header;
use crate::measuring::metrics::RequestRecord;
use crate::workloads::scenario::NoteValue;

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: not a request record: {source}")]
    Record {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error(transparent)]
    Chart(#[from] super::charts::ChartError),
}

/// Every file of a run's `--output DIR` but requests.jsonl (written as requests finish,
/// or gathered from the shards): result.json, report.txt, phases.md and phases.csv (more
/// than one measured phase), requests.csv, report.md and report.html.
pub fn write_outputs(report: &RunReport, dir: &Path) -> Result<(), OutputError> {
    write_result_json(report, &dir.join("result.json"))?;
    let text = format!(
        "{}\n{}",
        render_header(&report.header),
        report.render_body()
    );
    write_text(&dir.join("report.txt"), &text)?;
    let measured = report.measured();
    if measured.len() > 1 {
        write_text(
            &dir.join("phases.md"),
            &render_phase_table_markdown(&measured),
        )?;
        write_text(&dir.join("phases.csv"), &render_phase_table_csv(&measured))?;
    }
    let series = write_requests_csv(report, dir)?;
    write_text(&dir.join("report.md"), &render_report_markdown(report))?;
    let html = render_html(&HtmlReport {
        header: &report.header,
        phases: &measured,
        percentiles: &report.percentiles,
        goodput: report.goodput,
        verdicts: &report.verdicts,
        notes: &report.shown_notes(),
        series: &series,
        servers: &report
            .phases
            .iter()
            .filter(|p| !p.warmup)
            .map(|p| p.server.as_ref())
            .collect::<Vec<_>>(),
        endings: &super::ended::endings(&report.phases),
    })?;
    write_text(&dir.join("report.html"), &html)
}

/// result.json (or the `--save-result` file): see [`super::json::result_json`].
pub fn write_result_json(report: &RunReport, path: &Path) -> Result<(), OutputError> {
    let text = super::json::result_json_text(report);
    write_text(path, &text)
}

/// Writes a file as rendered: what came from a server or a scenario was redacted where it
/// entered (see `redact`), so the rendered text is never touched.
fn write_text(path: &Path, text: &str) -> Result<(), OutputError> {
    super::replace_file::write(path, text.as_bytes()).map_err(|source| OutputError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// requests.csv, one row per record of requests.jsonl, in one streaming pass that also
/// gathers the charts' series.
fn write_requests_csv(report: &RunReport, dir: &Path) -> Result<Series, OutputError> {
    let slots: Vec<PhaseSlot> = report
        .phases
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.warmup)
        .map(|(index, p)| PhaseSlot {
            name: p.summary.name.clone(),
            index,
            duration_s: p.summary.duration_s,
        })
        .collect();
    let mut series = Series::new(&slots);
    let names: Vec<&str> = report
        .phases
        .iter()
        .map(|p| p.summary.name.as_str())
        .collect();
    let records_path = dir.join("requests.jsonl");
    let csv_path = dir.join("requests.csv");
    let write_err = |source| OutputError::Write {
        path: csv_path.clone(),
        source,
    };
    let mut csv = BufWriter::new(File::create(&csv_path).map_err(write_err)?);
    csv.write_all(REQUEST_CSV_HEADER.as_bytes())
        .map_err(write_err)?;
    let read_err = |source| OutputError::Read {
        path: records_path.clone(),
        source,
    };
    let reader = BufReader::new(File::open(&records_path).map_err(read_err)?);
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(read_err)?;
        if line.trim().is_empty() {
            continue;
        }
        let record: RequestRecord =
            serde_json::from_str(&line).map_err(|source| OutputError::Record {
                path: records_path.clone(),
                line: n + 1,
                source,
            })?;
        let name = names.get(record.phase).copied().unwrap_or("");
        csv.write_all(request_csv_row(&record, name).as_bytes())
            .map_err(write_err)?;
        series.add(&record);
    }
    csv.flush().map_err(write_err)?;
    Ok(series.finish())
}

/// report.md: the result, the scenario's notes and each phase's tag table. Servers'
/// messages and scenarios' names reach it: control characters are escaped (line breaks
/// kept), as on the terminal.
fn render_report_markdown(report: &RunReport) -> String {
    let measured = report.measured();
    let mut md = render_markdown(
        &report.header,
        &measured,
        &report.percentiles,
        report.goodput,
        &report.verdicts,
    );
    md += &render_notes_markdown(&report.shown_notes());
    for s in measured.iter().filter(|s| !s.tags.is_empty()) {
        md += &format!(
            "\n## Per-tag metrics: {}\n\n{}",
            s.name,
            render_tag_table_markdown(&s.tags)
        );
    }
    md += &super::ended::render_markdown(&super::ended::endings(&report.phases));
    let servers = report.phases.iter().filter(|p| !p.warmup);
    for (p, server) in servers.filter_map(|p| Some((p, p.server.as_ref()?))) {
        md += &format!(
            "\n## Server metrics: {}\n{}",
            p.summary.name,
            super::server::render_markdown(server, &p.summary)
        );
    }
    for s in measured.iter().filter(|s| !s.targets.is_empty()) {
        md += &format!(
            "\n## Per-target metrics: {}\n\n{}",
            s.name,
            super::targets::render_target_table_markdown(s, &report.header.targets)
        );
    }
    crate::safeguards::display::escape_control_multiline(&md).into_owned()
}

/// The scenario's `note`s as a markdown table (nothing when it reported none).
fn render_notes_markdown(notes: &[(String, NoteValue)]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n## Scenario result\n\n| key | value |\n|---|---|\n");
    for (key, value) in notes {
        let cell = |t: &str| crate::safeguards::display::escape_control(t).replace('|', "\\|");
        out += &format!("| {} | {} |\n", cell(key), cell(&value.to_string()));
    }
    out
}
