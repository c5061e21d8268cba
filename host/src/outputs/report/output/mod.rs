//! The files `--output DIR` gets at the end of a run, all rendered from one [`RunReport`].
//! One streaming pass over requests.jsonl feeds requests.csv and the charts, so memory
//! stays flat however many requests the run had.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

mod replace_file;

use super::csv::{request_csv_row, REQUEST_CSV_HEADER};
use super::html::series::{PhaseSlot, Series};
use super::run_report::RunReport;
use super::{csv, html, json, markdown, text};
use crate::measuring::metrics::RequestRecord;

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
    Chart(#[from] html::charts::ChartError),
}

/// Every file of a run's `--output DIR` but requests.jsonl (written as requests finish,
/// or gathered from the shards): result.json, report.txt, phases.md and phases.csv (more
/// than one measured phase), requests.csv, report.md and report.html.
pub fn write_outputs(report: &RunReport, dir: &Path) -> Result<(), OutputError> {
    write_result_json(report, &dir.join("result.json"))?;
    write_text(&dir.join("report.txt"), &text::render(report))?;
    if report.many_phases() {
        write_text(&dir.join("phases.md"), &markdown::render_phases(report))?;
        write_text(&dir.join("phases.csv"), &csv::render(report))?;
    }
    let series = write_requests_csv(report, dir)?;
    write_text(&dir.join("report.md"), &markdown::render_markdown(report))?;
    write_text(&dir.join("report.html"), &html::render(report, &series)?)
}

/// result.json (or the `--save-result` file): see [`json::render`].
pub fn write_result_json(report: &RunReport, path: &Path) -> Result<(), OutputError> {
    write_text(path, &json::render(report))
}

/// Writes a file as rendered: what came from a server or a scenario was redacted where it
/// entered (see `redact`), so the rendered text is never touched.
pub fn write_text(path: &Path, text: &str) -> Result<(), OutputError> {
    replace_file::write(path, text.as_bytes()).map_err(|source| OutputError::Write {
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
