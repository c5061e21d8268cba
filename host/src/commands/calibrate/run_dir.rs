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
    let mut phases = read_records(&dir.join("requests.jsonl"))?;
    if phases.len() != phase_figures.len() {
        bail!(
            "{}: requests.jsonl has {} measured phases, result.json {}",
            dir.display(),
            phases.len(),
            phase_figures.len()
        );
    }
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

/// Successful, measured records by phase index (warm-up phases left out).
fn read_records(path: &Path) -> Result<Vec<(usize, ObservedPhase)>> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut reader = BufReader::new(file);
    let mut by_phase: BTreeMap<usize, ObservedPhase> = BTreeMap::new();
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
        if r.warmup || !r.succeeded() || r.chunks.is_empty() {
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
    Ok(by_phase.into_iter().collect())
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

/// Each phase's peaks of the running and waiting gauges and its KV-use samples.
fn read_gauges(path: &Path, phases: &mut [(usize, ObservedPhase)]) -> Result<()> {
    let Ok(file) = File::open(path) else {
        return Ok(());
    };
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let Ok(scrape) = serde_json::from_slice::<Value>(&line) else {
            continue;
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
