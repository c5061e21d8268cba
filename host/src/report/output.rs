//! The files `--output DIR` gets at the end of a run, besides result.json and report.txt:
//! requests.csv, report.md and report.html. One streaming pass over requests.jsonl feeds
//! the CSV and the charts, so memory stays flat however many requests the run had.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::export::{render_markdown, request_csv_row, REQUEST_CSV_HEADER};
use super::html::{render_html, HtmlReport};
use super::series::{PhaseSlot, Series};
use super::table::render_tag_table_markdown;
use super::RunHeader;
use crate::metrics::{PhaseSummary, RequestRecord};
use crate::scenario::NoteValue;
use crate::thresholds::Verdict;

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

/// A phase of the run as the exports need it.
pub struct PhaseOut<'a> {
    pub summary: &'a PhaseSummary,
    pub warmup: bool,
}

/// What the run gives the exports.
pub struct RunOut<'a> {
    pub header: &'a RunHeader,
    /// Every phase of the run, warm-ups included, in run order (records index them).
    pub phases: &'a [PhaseOut<'a>],
    pub percentiles: &'a [f64],
    pub goodput: bool,
    pub verdicts: &'a [Verdict],
    /// What the scenario reported with `note` (an SLO search's answer), in order.
    pub notes: &'a [(String, NoteValue)],
}

/// Writes requests.csv, report.md and report.html into `dir` (which holds requests.jsonl).
pub fn write_reports(dir: &Path, run: &RunOut) -> Result<(), OutputError> {
    let slots: Vec<PhaseSlot> = run
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
    let names: Vec<&str> = run.phases.iter().map(|p| p.summary.name.as_str()).collect();

    let records_path = dir.join("requests.jsonl");
    let csv_path = dir.join("requests.csv");
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| OutputError::Write { path, source }
    };
    let mut csv = BufWriter::new(File::create(&csv_path).map_err(write_err(&csv_path))?);
    csv.write_all(REQUEST_CSV_HEADER.as_bytes())
        .map_err(write_err(&csv_path))?;
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
            .map_err(write_err(&csv_path))?;
        series.add(&record);
    }
    csv.flush().map_err(write_err(&csv_path))?;
    let series = series.finish();

    let measured: Vec<PhaseSummary> = run
        .phases
        .iter()
        .filter(|p| !p.warmup)
        .map(|p| p.summary.clone())
        .collect();
    let mut md = render_markdown(
        run.header,
        &measured,
        run.percentiles,
        run.goodput,
        run.verdicts,
    );
    md += &render_notes_markdown(run.notes);
    for s in measured.iter().filter(|s| !s.tags.is_empty()) {
        md += &format!(
            "\n## Per-tag metrics: {}\n\n{}",
            s.name,
            render_tag_table_markdown(&s.tags)
        );
    }
    // Servers' messages and scenarios' names reach the markdown: control characters are
    // escaped (line breaks kept), as on the terminal.
    let md = crate::display::escape_control_multiline(&md).into_owned();
    let md_path = dir.join("report.md");
    std::fs::write(&md_path, crate::redact::text(&md).as_bytes()).map_err(write_err(&md_path))?;
    let html = render_html(&HtmlReport {
        header: run.header,
        phases: &measured,
        percentiles: run.percentiles,
        goodput: run.goodput,
        verdicts: run.verdicts,
        notes: run.notes,
        series: &series,
    })?;
    let html_path = dir.join("report.html");
    std::fs::write(&html_path, crate::redact::text(&html).as_bytes())
        .map_err(write_err(&html_path))?;
    Ok(())
}

/// The scenario's `note`s as a markdown table (nothing when it reported none).
fn render_notes_markdown(notes: &[(String, NoteValue)]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n## Scenario result\n\n| key | value |\n|---|---|\n");
    for (key, value) in notes {
        let cell = |t: &str| crate::display::escape_control(t).replace('|', "\\|");
        out += &format!("| {} | {} |\n", cell(key), cell(&value.to_string()));
    }
    out
}
