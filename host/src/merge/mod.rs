//! `runner merge DIR...`: one report from the shards of a run. Statistics come from each
//! shard's mergeable state (histograms add bucket for bucket), the request digest from
//! their stream logs, and the reports are rendered by the same code as a single run's.

pub mod shard_file;

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::metrics::{
    MetricsOptions, PhaseAccumulator, PhaseInfo, PhaseSummary, RequestRecord, StatStateError,
};
use crate::report::{self, RunHeader};
use crate::shard::StreamEntry;
use crate::thresholds::{self, Threshold, Verdict};
use shard_file::{read_jsonl, ShardFile, ShardFileError, RECORDS_FILE, STREAM_FILE};

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(transparent)]
    File(#[from] ShardFileError),
    #[error("{dir} (shard {shard}) is not the same workload as {reference}: {what}")]
    Foreign {
        dir: String,
        shard: String,
        reference: String,
        what: String,
    },
    #[error("shard {shard} is given twice: {first} and {second}")]
    Duplicate {
        shard: String,
        first: String,
        second: String,
    },
    #[error("shard {shard} is missing (given: {given})")]
    Missing { shard: String, given: String },
    #[error("{dir}: request {index} of phase {phase} is also in another shard's stream")]
    Overlap {
        dir: String,
        phase: usize,
        index: u64,
    },
    #[error("{dir}: {message}")]
    Stream { dir: String, message: String },
    #[error("{dir}: {source}")]
    Stats { dir: String, source: StatStateError },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Output(#[from] report::output::OutputError),
}

/// One shard's directory and its shard.json.
pub struct Loaded {
    pub dir: PathBuf,
    pub file: ShardFile,
}

/// One phase of the merged run.
pub struct MergedPhase {
    pub summary: PhaseSummary,
    pub warmup: bool,
    pub arrival: String,
    /// Why shards stopped early, when any did (first such shard's reason).
    pub stop: Option<String>,
    pub cut: u64,
}

pub struct Merged {
    pub header: RunHeader,
    pub phases: Vec<MergedPhase>,
    pub percentiles: Vec<f64>,
    pub goodput: bool,
    /// Every shard's index, clock offset (ms, with --start-at) and start (unix ns).
    pub shards: Vec<(u32, Option<f64>, u64)>,
    pub start_at: Option<String>,
    /// `runner merge --threshold` checked on the merged phases (the shards' own checks saw
    /// one stripe each).
    pub verdicts: Vec<Verdict>,
}

fn shown(dir: &Path) -> String {
    dir.display().to_string()
}

/// Reads every shard's shard.json, sorted by shard index, and refuses a set that is not
/// exactly shards 0..N of one workload.
pub fn load(dirs: &[PathBuf]) -> Result<Vec<Loaded>, MergeError> {
    let mut shards = dirs
        .iter()
        .map(|d| {
            Ok(Loaded {
                dir: d.clone(),
                file: ShardFile::read(d)?,
            })
        })
        .collect::<Result<Vec<_>, MergeError>>()?;
    check_same_workload(&shards)?;
    shards.sort_by_key(|s| s.file.shard.index);
    for w in shards.windows(2) {
        if w[0].file.shard.index == w[1].file.shard.index {
            return Err(MergeError::Duplicate {
                shard: w[0].file.shard.to_string(),
                first: shown(&w[0].dir),
                second: shown(&w[1].dir),
            });
        }
    }
    let count = shards[0].file.shard.count;
    let have: HashSet<u32> = shards.iter().map(|s| s.file.shard.index).collect();
    if let Some(missing) = (0..count).find(|i| !have.contains(i)) {
        let given: Vec<String> = shards.iter().map(|s| s.file.shard.to_string()).collect();
        return Err(MergeError::Missing {
            shard: format!("{missing}/{count}"),
            given: given.join(", "),
        });
    }
    Ok(shards)
}

/// The first difference between a shard and the first one given, if any.
fn workload_difference(a: &ShardFile, b: &ShardFile) -> Option<String> {
    let (ha, hb) = (&a.header, &b.header);
    let differs = |what: &str, x: String, y: String| Some(format!("{what} differs ({y} vs {x})"));
    if a.shard.count != b.shard.count {
        return differs(
            "the shard count",
            a.shard.count.to_string(),
            b.shard.count.to_string(),
        );
    }
    if ha.scenario_digest != hb.scenario_digest {
        return differs(
            "the scenario digest",
            ha.scenario_digest.clone(),
            hb.scenario_digest.clone(),
        );
    }
    if ha.seed != hb.seed {
        return differs("the seed", ha.seed.to_string(), hb.seed.to_string());
    }
    if ha.params != hb.params {
        let show = |p: &[(String, String)]| {
            p.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        return differs("a parameter", show(&ha.params), show(&hb.params));
    }
    if ha.tokenizer != hb.tokenizer {
        return differs("the tokenizer", ha.tokenizer.clone(), hb.tokenizer.clone());
    }
    if ha.api != hb.api || ha.model != hb.model {
        return differs(
            "the API or model",
            format!("{} {}", ha.api, ha.model),
            format!("{} {}", hb.api, hb.model),
        );
    }
    if a.workload_id != b.workload_id {
        return differs(
            "the workload id",
            a.workload_id.clone(),
            b.workload_id.clone(),
        );
    }
    if a.goodput != b.goodput {
        return Some("the goodput SLO differs".into());
    }
    let names =
        |f: &ShardFile| -> Vec<String> { f.phases.iter().map(|p| p.info.name.clone()).collect() };
    if names(a) != names(b) {
        return differs("the phases", names(a).join(", "), names(b).join(", "));
    }
    None
}

fn check_same_workload(shards: &[Loaded]) -> Result<(), MergeError> {
    let first = &shards[0];
    for s in &shards[1..] {
        if let Some(what) = workload_difference(&first.file, &s.file) {
            return Err(MergeError::Foreign {
                dir: shown(&s.dir),
                shard: s.file.shard.to_string(),
                reference: shown(&first.dir),
                what,
            });
        }
    }
    Ok(())
}

/// Each phase's statistics over all shards, with `percentiles` computed.
pub fn merge_phases(
    shards: &[Loaded],
    percentiles: &[f64],
) -> Result<Vec<MergedPhase>, MergeError> {
    let first = &shards[0].file;
    let options = MetricsOptions {
        percentiles: percentiles.to_vec(),
        goodput: first.goodput,
    };
    let mut out = Vec::new();
    for (p, phase) in first.phases.iter().enumerate() {
        let mut acc = PhaseAccumulator::new(&options);
        let mut duration_ns = 0;
        let mut stop = None;
        let mut cut = 0;
        for s in shards {
            let sp = &s.file.phases[p];
            let part = PhaseAccumulator::from_state(&options, &sp.state).map_err(|source| {
                MergeError::Stats {
                    dir: shown(&s.dir),
                    source,
                }
            })?;
            acc.merge(&part).map_err(|source| MergeError::Stats {
                dir: shown(&s.dir),
                source,
            })?;
            // The shards ran side by side: the phase lasted as long as its longest shard.
            duration_ns = duration_ns.max(sp.info.duration_ns);
            cut += sp.cut;
            if stop.is_none() {
                stop.clone_from(&sp.stop);
            }
        }
        let info = PhaseInfo {
            duration_ns,
            max_concurrency: phase.concurrency_limit,
            ..phase.info.clone()
        };
        out.push(MergedPhase {
            summary: acc.summarize(&info),
            warmup: phase.warmup,
            arrival: phase.arrival.clone(),
            stop,
            cut,
        });
    }
    Ok(out)
}

/// Requests a shard sent: those with a record.
fn sent_requests(dir: &Path) -> Result<HashSet<(usize, u64)>, MergeError> {
    let mut sent = HashSet::new();
    for r in read_jsonl::<RequestRecord>(&dir.join(RECORDS_FILE))? {
        let r = r?;
        sent.insert((r.phase, r.index));
    }
    Ok(sent)
}

/// The digest of the union of the shards' request streams: every sent request, in
/// (phase, index) order, hashed as a single run hashes its stream. Each shard's own part
/// is checked against the digest it computed while running.
pub fn stream_digest(shards: &[Loaded]) -> Result<String, MergeError> {
    struct Cursor<I> {
        entries: I,
        head: Option<StreamEntry>,
        own: Sha256,
        sent: HashSet<(usize, u64)>,
        seen: usize,
    }
    let mut cursors = Vec::new();
    for s in shards {
        let sent = sent_requests(&s.dir)?;
        let entries = read_jsonl::<StreamEntry>(&s.dir.join(STREAM_FILE))?;
        cursors.push(Cursor {
            entries,
            head: None,
            own: Sha256::new(),
            sent,
            seen: 0,
        });
    }
    // The next sent entry of a shard's log (logs are in (phase, index) order).
    fn advance<I: Iterator<Item = Result<StreamEntry, ShardFileError>>>(
        c: &mut Cursor<I>,
    ) -> Result<(), MergeError> {
        c.head = None;
        for e in c.entries.by_ref() {
            let e = e?;
            if c.sent.contains(&(e.phase, e.index)) {
                c.head = Some(e);
                break;
            }
        }
        Ok(())
    }
    for c in &mut cursors {
        advance(c)?;
    }
    let mut all = Sha256::new();
    loop {
        let next = cursors
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.head.as_ref().map(|e| (e.phase, e.index, i)))
            .min();
        let Some((phase, index, i)) = next else { break };
        let dir = shown(&shards[i].dir);
        let bytes = cursors[i].head.as_ref().map(StreamEntry::digest_bytes);
        let bytes =
            bytes
                .unwrap_or_else(|| Ok(Vec::new()))
                .map_err(|message| MergeError::Stream {
                    dir: dir.clone(),
                    message,
                })?;
        all.update(&bytes);
        cursors[i].own.update(&bytes);
        cursors[i].seen += 1;
        advance(&mut cursors[i])?;
        let again = cursors.iter().any(|c| {
            c.head
                .as_ref()
                .is_some_and(|e| (e.phase, e.index) == (phase, index))
        });
        if again {
            return Err(MergeError::Overlap { dir, phase, index });
        }
    }
    for (c, s) in cursors.into_iter().zip(shards) {
        let dir = shown(&s.dir);
        if c.seen != c.sent.len() {
            return Err(MergeError::Stream {
                dir,
                message: format!(
                    "{} of its {} sent requests are not in {STREAM_FILE}",
                    c.sent.len() - c.seen,
                    c.sent.len()
                ),
            });
        }
        let own = hex::encode(c.own.finalize());
        if s.file.header.request_digest.as_deref() != Some(own.as_str()) {
            return Err(MergeError::Stream {
                dir,
                message: format!(
                    "{STREAM_FILE} does not match the request digest the shard computed while running"
                ),
            });
        }
    }
    Ok(hex::encode(all.finalize()))
}

/// Loads, checks and merges shard directories, then checks `checks` on the merged phases.
pub fn merge(dirs: &[PathBuf], checks: &[Threshold]) -> Result<Merged, MergeError> {
    let shards = load(dirs)?;
    // A threshold on a percentile the shards did not report gets it computed: the merged
    // histograms hold every percentile.
    let mut percentiles = shards[0].file.percentiles.clone();
    percentiles.extend(thresholds::missing_percentiles(checks, &percentiles));
    let phases = merge_phases(&shards, &percentiles)?;
    let digest = stream_digest(&shards)?;
    let first = &shards[0].file;
    let mut header = first.header.clone();
    header.request_digest = Some(digest);
    let targets: HashSet<&str> = shards
        .iter()
        .map(|s| s.file.header.target.as_str())
        .collect();
    if targets.len() > 1 {
        let mut t: Vec<&str> = targets.into_iter().collect();
        t.sort_unstable();
        header.target = t.join(", ");
    }
    let mut merged = Merged {
        header,
        phases,
        percentiles,
        goodput: first.goodput.is_some(),
        shards: shards
            .iter()
            .map(|s| {
                (
                    s.file.shard.index,
                    s.file.clock_offset_ms,
                    s.file.started_unix_ns,
                )
            })
            .collect(),
        start_at: first.start_at.clone(),
        verdicts: Vec::new(),
    };
    merged.verdicts = thresholds::check_all(checks, &merged.measured());
    Ok(merged)
}

impl Merged {
    /// Milliseconds between the first and the last shard to start.
    pub fn start_spread_ms(&self) -> f64 {
        let starts = self.shards.iter().map(|s| s.2);
        let (lo, hi) = (starts.clone().min(), starts.max());
        match (lo, hi) {
            (Some(lo), Some(hi)) => (hi - lo) as f64 / 1e6,
            _ => 0.0,
        }
    }

    /// More than one measured phase: verdicts and errors then name their phase.
    pub fn many_phases(&self) -> bool {
        self.phases.iter().filter(|p| !p.warmup).count() > 1
    }

    fn measured(&self) -> Vec<PhaseSummary> {
        self.phases
            .iter()
            .filter(|p| !p.warmup)
            .map(|p| p.summary.clone())
            .collect()
    }

    /// The text report after the header: what a single run prints, then the shards' starts.
    pub fn render_body(&self) -> String {
        let phases: Vec<report::text::PhaseText> = self
            .phases
            .iter()
            .map(|p| report::text::PhaseText {
                summary: &p.summary,
                arrival: p.arrival.clone(),
                warmup: p.warmup,
                ended: p.stop.clone(),
                cut: p.cut,
            })
            .collect();
        let mut body = report::text::render_phases(&phases, &self.percentiles, self.goodput);
        body += &report::text::render_thresholds(&self.verdicts, self.many_phases());
        body += &self.render_shards();
        let _ = writeln!(
            body,
            "Request stream digest (sha256): {}",
            self.header.request_digest.as_deref().unwrap_or("")
        );
        body
    }

    /// One line per shard start, and the spread.
    fn render_shards(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{:=^50}", " Shards ");
        let _ = writeln!(out, "{:<40} {:<10}", "Shards merged:", self.shards.len());
        if let Some(at) = &self.start_at {
            let _ = writeln!(out, "{:<40} {}", "Start at:", at);
        }
        let offsets: Vec<f64> = self.shards.iter().filter_map(|s| s.1).collect();
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
            self.start_spread_ms()
        );
        let _ = writeln!(out, "{}\n", "=".repeat(50));
        out
    }

    /// result.json: the form of a single run's (the vLLM keys of one phase at the top
    /// level, or a `phases` array), plus a `shards` object.
    pub fn result_json(&self) -> Value {
        let h = &self.header;
        let digest = h.request_digest.clone().unwrap_or_default();
        let mut objects: Vec<Value> = self
            .phases
            .iter()
            .filter(|p| !p.warmup)
            .map(|p| {
                let extra =
                    serde_json::Map::from_iter([("phase".to_string(), json!(p.summary.name))]);
                Value::Object(report::json::vllm_result_json_with(
                    h,
                    &p.summary,
                    &self.percentiles,
                    &extra,
                    None,
                ))
            })
            .collect();
        let warmups: Vec<Value> = self
            .phases
            .iter()
            .filter(|p| p.warmup)
            .map(|p| json!({"phase": p.summary.name, "completed": p.summary.completed, "failed": p.summary.failed}))
            .collect();
        let mut value = if objects.len() == 1 {
            objects.remove(0)
        } else {
            json!({
                "scenario": h.scenario,
                "request_digest": digest,
                "phases": objects,
            })
        };
        if let Some(map) = value.as_object_mut() {
            if !warmups.is_empty() {
                map.insert("warmup_phases".into(), Value::Array(warmups));
            }
            let shards: Vec<Value> = self
                .shards
                .iter()
                .map(|(i, offset, start)| {
                    json!({"index": i, "clock_offset_ms": offset, "started_unix_ns": start})
                })
                .collect();
            if !self.verdicts.is_empty() {
                let list = self.verdicts.iter().map(Verdict::to_json).collect();
                map.insert("thresholds".into(), Value::Array(list));
            }
            map.insert(
                "shards".into(),
                json!({
                    "count": self.shards.len(),
                    "start_at": self.start_at,
                    "start_spread_ms": self.start_spread_ms(),
                    "request_digest": digest,
                    "shards": shards,
                }),
            );
        }
        value
    }

    /// Writes result.json, report.txt, requests.jsonl (every shard's records), and the
    /// exports a single run's `--output` gets (phases.md/csv, requests.csv, report.md,
    /// report.html).
    pub fn write(&self, dirs: &[PathBuf], out: &Path, body: &str) -> Result<(), MergeError> {
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| MergeError::Write { path, source }
        };
        std::fs::create_dir_all(out).map_err(write_err(out))?;
        let put = |name: &str, text: &str| {
            let path = out.join(name);
            std::fs::write(&path, text).map_err(write_err(&path))
        };
        let json = serde_json::to_string_pretty(&self.result_json()).expect("JSON serialises");
        put("result.json", &(json + "\n"))?;
        put(
            "report.txt",
            &format!("{}\n{body}", report::render_header(&self.header)),
        )?;
        let measured = self.measured();
        if measured.len() > 1 {
            put("phases.md", &report::render_phase_table_markdown(&measured))?;
            put("phases.csv", &report::render_phase_table_csv(&measured))?;
        }
        let records = out.join(RECORDS_FILE);
        let mut w = BufWriter::new(std::fs::File::create(&records).map_err(write_err(&records))?);
        for dir in dirs {
            let path = dir.join(RECORDS_FILE);
            let mut f = std::fs::File::open(&path).map_err(|source| ShardFileError::Read {
                path: path.clone(),
                source,
            })?;
            std::io::copy(&mut f, &mut w).map_err(write_err(&records))?;
        }
        w.flush().map_err(write_err(&records))?;
        drop(w);
        let phases_out: Vec<report::output::PhaseOut> = self
            .phases
            .iter()
            .map(|p| report::output::PhaseOut {
                summary: &p.summary,
                warmup: p.warmup,
            })
            .collect();
        report::output::write_reports(
            out,
            &report::output::RunOut {
                header: &self.header,
                phases: &phases_out,
                percentiles: &self.percentiles,
                goodput: self.goodput,
                verdicts: &self.verdicts,
                // A shard's notes speak for its stripe only, and notes have no general
                // merge: the merged report has none (each shard's report.txt keeps its own).
                notes: &[],
            },
        )?;
        Ok(())
    }
}
