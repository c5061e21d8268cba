//! Reads a run's --output directory for `runner calibrate`: each phase's successful
//! requests from requests.jsonl, its figures and request digest from result.json, and the
//! server's running, waiting and KV-use gauges from server_metrics.jsonl where scraped.
//! Every read is bounded, so a huge or hostile file is one line, not an exhausted memory.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use crate::measuring::metrics::RequestRecord;
use crate::servers::server_metrics::known::{first_of, Meaning};
use crate::servers::twin::{Gauges, ObservedPhase, ObservedRequest, ObservedRun};

/// The longest line read (a record of a 100k-token stream is about 6 MB).
const MAX_LINE: u64 = 64 << 20;
/// The most chunks kept over a run (16 bytes each).
const MAX_CHUNKS: usize = 5_000_000;
/// The largest result.json read.
const MAX_RESULT: u64 = 256 << 20;

/// A run directory: what the fit reads, and each phase's result.json figures.
pub struct RunDir {
    pub observed: ObservedRun,
    /// Phase name → its object in result.json (`mean_ttft_ms`, …).
    pub figures: BTreeMap<String, Value>,
}

pub fn read(dir: &Path) -> Result<RunDir> {
    let result = read_result(&dir.join("result.json"))?;
    let (digest, phase_figures) = phases_of(&result);
    check_digest(dir, &digest)?;
    let (mut phases, succeeded) = read_records(&dir.join("requests.jsonl"))?;
    if phases.len() != phase_figures.len() {
        bail!(
            "{}: requests.jsonl has {} measured phases, result.json {}",
            dir.display(),
            phases.len(),
            phase_figures.len()
        );
    }
    check_counts(dir, &phases, &succeeded, &phase_figures)?;
    read_gauges(&dir.join("server_metrics.jsonl"), &mut phases)?;
    let mut figures = BTreeMap::new();
    let observed = phases
        .into_iter()
        .zip(phase_figures)
        .map(|((_, mut phase), (name, fig))| {
            phase.name = name.clone();
            figures.insert(name, fig);
            phase
        })
        .collect();
    Ok(RunDir {
        observed: ObservedRun {
            path: dir.display().to_string(),
            request_digest: digest,
            phases: observed,
        },
        figures,
    })
}

fn read_result(path: &Path) -> Result<Value> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_RESULT)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// The run's request digest, and each measured phase's name and figures, in order.
fn phases_of(result: &Value) -> (String, Vec<(String, Value)>) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    match result.get("phases").and_then(Value::as_array) {
        Some(list) => (
            text(&result["request_digest"]),
            list.iter()
                .map(|p| (text(&p["phase"]), p.clone()))
                .collect(),
        ),
        None => (
            text(&result["runner"]["request_digest"]),
            vec![(text(&result["phase"]), result.clone())],
        ),
    }
}

/// The run's request digest, as the twin file names it: the sha256 hex a run writes. The
/// stream itself cannot be hashed again here (requests.jsonl holds no request bodies), so
/// a digest of the right form from another run is not caught; any other text is.
fn check_digest(dir: &Path, digest: &str) -> Result<()> {
    let hex = digest.len() == 64
        && digest
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !hex {
        bail!(
            "{}: `request_digest` `{}` is not the sha256 hex digest a run writes: give the run's own result.json",
            dir.join("result.json").display(),
            crate::safeguards::display::excerpt(digest)
        );
    }
    Ok(())
}

/// Each measured phase's `completed` in result.json is its successful records in
/// requests.jsonl: both files were written by one run, or the fit would read requests
/// the figures beside it never counted.
fn check_counts(
    dir: &Path,
    phases: &[(usize, ObservedPhase)],
    succeeded: &BTreeMap<usize, u64>,
    figures: &[(String, Value)],
) -> Result<()> {
    for ((index, _), (name, fig)) in phases.iter().zip(figures) {
        let records = succeeded.get(index).copied().unwrap_or(0);
        match fig.get("completed").and_then(Value::as_u64) {
            Some(completed) if completed == records => {}
            claimed => bail!(
                "{}: result.json's phase `{}` has `completed` {}, requests.jsonl {records} successful records of it: the two files are not of one run",
                dir.display(),
                crate::safeguards::display::excerpt(name),
                claimed.map_or("missing".into(), |c| c.to_string()),
            ),
        }
    }
    Ok(())
}

/// How far a chunk may come before the one ahead of it: the kernel's receive stamps move
/// to the monotonic clock with up to this error (`both_sides/receive_stamp.rs`'s
/// `CLOCK_SLACK`); a record whose chunks step back further was not measured so.
const CHUNK_SLACK_NS: u64 = 1_000_000;

/// Refuses a record whose chunk times go backwards or end after its end.
fn check_times(r: &RequestRecord) -> std::result::Result<(), String> {
    for (i, w) in r.chunks.windows(2).enumerate() {
        if w[1].t_ns.saturating_add(CHUNK_SLACK_NS) < w[0].t_ns {
            return Err(format!(
                "chunk {} at {} ns comes before chunk {i} at {} ns: chunk times must not go backwards",
                i + 1,
                w[1].t_ns,
                w[0].t_ns
            ));
        }
    }
    match r.chunks.last() {
        Some(c) if r.end_ns.saturating_add(CHUNK_SLACK_NS) < c.t_ns => Err(format!(
            "its last chunk at {} ns comes after its end_ns {}",
            c.t_ns, r.end_ns
        )),
        _ => Ok(()),
    }
}

/// Successful, measured records by phase index (warm-up phases left out), and how many
/// records of each phase succeeded.
#[allow(clippy::type_complexity)]
fn read_records(path: &Path) -> Result<(Vec<(usize, ObservedPhase)>, BTreeMap<usize, u64>)> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut reader = BufReader::new(file);
    let mut by_phase: BTreeMap<usize, ObservedPhase> = BTreeMap::new();
    let mut succeeded: BTreeMap<usize, u64> = BTreeMap::new();
    let (mut line, mut chunks, mut number) = (Vec::new(), 0usize, 0usize);
    loop {
        line.clear();
        number += 1;
        let n = (&mut reader)
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        if n as u64 >= MAX_LINE && line.last() != Some(&b'\n') {
            bail!(
                "{} line {number} is longer than {MAX_LINE} bytes",
                path.display()
            );
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let r: RequestRecord = serde_json::from_slice(&line)
            .map_err(|e| anyhow!("{} line {number}: {e}", path.display()))?;
        check_times(&r).map_err(|e| anyhow!("{} line {number}: {e}", path.display()))?;
        if r.warmup || !r.succeeded() {
            continue;
        }
        *succeeded.entry(r.phase).or_default() += 1;
        if r.chunks.is_empty() {
            continue;
        }
        chunks += r.chunks.len();
        if chunks > MAX_CHUNKS {
            bail!(
                "{} holds more than {MAX_CHUNKS} chunks; calibrate from a shorter run",
                path.display()
            );
        }
        by_phase
            .entry(r.phase)
            .or_default()
            .requests
            .push(observed(&r));
    }
    Ok((by_phase.into_iter().collect(), succeeded))
}

fn observed(r: &RequestRecord) -> ObservedRequest {
    let cached = r.answer.cached_prompt_tokens.unwrap_or(0);
    // llama.cpp's own account of the prompt: the tokens it computed (`prompt_n`, the rest
    // came from its slot's cache as `cache_n`) and the time they took (`prompt_ms`).
    let timing = |key: &str| {
        r.server_timings
            .as_ref()
            .and_then(|t| t.get(key))
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let new_prompt_tokens = match timing("prompt_n") {
        Some(n) if n <= r.input_tokens as f64 => n as u64,
        _ => r.input_tokens.saturating_sub(cached),
    };
    ObservedRequest {
        sent_ns: r.sent_ns,
        chunks: r.chunks.iter().map(|c| (c.t_ns, c.tokens)).collect(),
        end_ns: r.end_ns,
        new_prompt_tokens,
        output_tokens: r.output_tokens,
        server_prompt_ms: timing("prompt_ms"),
    }
}

/// One line of server_metrics.jsonl as a run writes it (`server_metrics/samples_file.rs`):
/// an object whose `phase` is an index or null and whose `values` are numbers or null.
fn scrape_of(line: &[u8]) -> std::result::Result<Value, String> {
    let scrape: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON ({e})"))?;
    let phase_ok = matches!(&scrape["phase"], Value::Null) || scrape["phase"].as_u64().is_some();
    if !phase_ok {
        return Err("`phase` is not a phase index or null".into());
    }
    let Some(values) = scrape["values"].as_object() else {
        return Err("`values` is not an object of metrics".into());
    };
    if let Some((name, _)) = values.iter().find(|(_, v)| !(v.is_null() || v.is_number())) {
        return Err(format!(
            "`values.{}` is not a number",
            crate::safeguards::display::excerpt(name)
        ));
    }
    Ok(scrape)
}

/// Each phase's peaks of the running and waiting gauges and its KV-use samples. A line
/// that is not a scrape is refused (the gauges bound the twin's batch and KV size); only
/// a last line cut short, as an interrupted run may leave it, is skipped.
fn read_gauges(path: &Path, phases: &mut [(usize, ObservedPhase)]) -> Result<()> {
    let Ok(file) = File::open(path) else {
        return Ok(());
    };
    let mut reader = BufReader::new(file);
    let (mut line, mut number) = (Vec::new(), 0usize);
    loop {
        line.clear();
        number += 1;
        let n = (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let scrape = match scrape_of(&line) {
            Ok(scrape) => scrape,
            Err(_) if line.last() != Some(&b'\n') => return Ok(()),
            Err(what) => bail!(
                "{} line {number}: {what}: not a scrape this runner wrote; give the run's own file or remove it",
                path.display()
            ),
        };
        let Some(index) = scrape["phase"].as_u64() else {
            continue;
        };
        if let Some((_, phase)) = phases.iter_mut().find(|(i, _)| *i as u64 == index) {
            add_scrape(&mut phase.gauges, &scrape["values"]);
        }
    }
}

fn add_scrape(g: &mut Gauges, values: &Value) {
    let has = |n: &str| values.get(n).and_then(Value::as_f64).is_some();
    let value = |n: &str| values[n].as_f64().unwrap_or(0.0);
    let running = first_of(Meaning::Running, has).map(|k| (k.name, value(k.name)));
    if let Some((name, v)) = running {
        let peak = g.max_running.as_ref().map_or(0.0, |(_, p)| *p);
        g.max_running = Some((name.to_string(), v.max(peak)));
    }
    if let Some(k) = first_of(Meaning::Waiting, has) {
        g.max_waiting = Some(g.max_waiting.unwrap_or(0.0).max(value(k.name)));
    }
    if let (Some(k), Some((_, run))) = (first_of(Meaning::KvCacheUse, has), running) {
        let frac = value(k.name);
        let samples = &mut g
            .kv
            .get_or_insert_with(|| (k.name.to_string(), Vec::new()))
            .1;
        if frac > 0.0 && run > 0.0 {
            samples.push((run, frac));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// A successful record of phase 0 whose chunks arrive at `chunks_ms`.
    fn record(index: u64, chunks_ms: &[u64]) -> String {
        let chunks: Vec<Value> = chunks_ms
            .iter()
            .map(|ms| json!({"t_ns": ms * 1_000_000, "tokens": 1}))
            .collect();
        let end = chunks_ms.iter().max().copied().unwrap_or(0) * 1_000_000 + 10;
        json!({
            "phase": 0, "index": index, "scheduled_ns": 0, "sent_ns": 0,
            "first_byte_ns": chunks_ms.first().map(|ms| ms * 1_000_000),
            "end_ns": end, "chunks": chunks, "input_tokens": 100,
            "output_tokens": chunks_ms.len(), "text_tokens": chunks_ms.len(),
            "http_status": 200,
        })
        .to_string()
    }

    /// A run directory of one phase, `main`, with these files.
    fn run_dir(
        digest: &str,
        completed: u64,
        records: &[String],
        metrics: Option<&str>,
    ) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let result =
            json!({"phase": "main", "completed": completed, "runner": {"request_digest": digest}});
        std::fs::write(dir.path().join("result.json"), result.to_string()).unwrap();
        std::fs::write(dir.path().join("requests.jsonl"), records.join("\n") + "\n").unwrap();
        if let Some(m) = metrics {
            std::fs::write(dir.path().join("server_metrics.jsonl"), m).unwrap();
        }
        dir
    }

    fn refusal(dir: &tempfile::TempDir) -> String {
        match read(dir.path()) {
            Ok(_) => "read without a word".into(),
            Err(e) => e.to_string(),
        }
    }

    const SCRAPE: &str = r#"{"t_s": 0.5, "phase": 0, "values": {"vllm:num_requests_running": 2, "vllm:num_requests_waiting": null}}"#;

    #[test]
    fn a_run_of_one_run_reads_and_a_last_scrape_cut_short_is_skipped() {
        let records = [record(0, &[10, 20, 30]), record(1, &[12, 22])];
        let metrics = format!("{SCRAPE}\n{{\"t_s\": 1.0, \"pha");
        let d = run_dir(DIGEST, 2, &records, Some(&metrics));
        let run = read(d.path()).unwrap();
        assert_eq!(run.observed.phases[0].requests.len(), 2);
        assert_eq!(run.observed.request_digest, DIGEST);
    }

    /// A twin fitted from reversed chunk times had a 19 ns decode step: the record is
    /// refused with its file and line.
    #[test]
    fn a_record_whose_chunk_times_go_backwards_is_refused_with_its_line() {
        let records = [record(0, &[10, 20, 30]), record(1, &[30, 20, 10])];
        let d = run_dir(DIGEST, 2, &records, None);
        assert_eq!(
            refusal(&d),
            format!(
                "{} line 2: chunk 1 at 20000000 ns comes before chunk 0 at 30000000 ns: chunk times must not go backwards",
                d.path().join("requests.jsonl").display()
            )
        );
    }

    #[test]
    fn a_garbage_server_metrics_line_is_refused_with_its_line() {
        let records = [record(0, &[10, 20, 30])];
        let metrics = format!("{SCRAPE}\n{{\"phase\": \"x\", \"values\": {{}}}}\n{SCRAPE}\n");
        let d = run_dir(DIGEST, 1, &records, Some(&metrics));
        assert_eq!(
            refusal(&d),
            format!(
                "{} line 2: `phase` is not a phase index or null: not a scrape this runner wrote; give the run's own file or remove it",
                d.path().join("server_metrics.jsonl").display()
            )
        );
        let d = run_dir(DIGEST, 1, &records, Some("garbage\n"));
        assert!(
            refusal(&d).contains("server_metrics.jsonl line 1: not JSON"),
            "{}",
            refusal(&d)
        );
    }

    #[test]
    fn a_digest_that_is_no_digest_or_counts_of_another_run_are_refused() {
        let records = [record(0, &[10, 20, 30])];
        let d = run_dir("not-a-digest", 1, &records, None);
        assert_eq!(
            refusal(&d),
            format!(
                "{}: `request_digest` `not-a-digest` is not the sha256 hex digest a run writes: give the run's own result.json",
                d.path().join("result.json").display()
            )
        );
        let d = run_dir(DIGEST, 7, &records, None);
        assert_eq!(
            refusal(&d),
            format!(
                "{}: result.json's phase `main` has `completed` 7, requests.jsonl 1 successful records of it: the two files are not of one run",
                d.path().display()
            )
        );
    }
}
