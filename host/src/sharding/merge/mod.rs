//! `runner merge DIR...`: one [`RunReport`] from the shards of a run. Statistics come from
//! each shard's mergeable state (histograms add bucket for bucket), the request digest
//! from their stream logs; the outputs are rendered from the report as a single run's are.

pub mod notes;
mod sessions;
pub mod shard_file;
mod steady;

use std::collections::HashSet;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::measuring::digest::StreamEntry;
use crate::measuring::metrics::{
    MetricsOptions, PhaseAccumulator, PhaseInfo, RequestRecord, StatStateError,
};
use crate::measuring::thresholds::{self, Threshold};
use crate::outputs::report::{self, ReportParts, ReportPhase, RunReport, ShardStart, ShardStarts};
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
    #[error("{dir} (shard {shard}), phase {phase}: {what}")]
    Sessions {
        dir: String,
        shard: String,
        phase: String,
        what: String,
    },
    #[error("{dir} (shard {shard}), phase {phase}: {source}")]
    Stats {
        dir: String,
        shard: String,
        phase: String,
        source: StatStateError,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Output(#[from] report::output::OutputError),
}

/// One shard's directory and its shard.json.
pub struct LoadedShard {
    pub dir: PathBuf,
    pub file: ShardFile,
}

fn shown(dir: &Path) -> String {
    dir.display().to_string()
}

/// Reads every shard's shard.json, sorted by shard index, and refuses a set that is not
/// exactly shards 0..N of one workload.
pub fn load(dirs: &[PathBuf]) -> Result<Vec<LoadedShard>, MergeError> {
    let mut shards = dirs
        .iter()
        .map(|d| {
            Ok(LoadedShard {
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

fn check_same_workload(shards: &[LoadedShard]) -> Result<(), MergeError> {
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

/// One phase's statistics added over the shards, before its summary.
struct MergedPhase {
    acc: PhaseAccumulator,
    duration_ns: u64,
    stop: Option<String>,
    cut: u64,
}

/// Phase `p`'s statistics added over every shard's state.
fn merge_phase(
    shards: &[LoadedShard],
    p: usize,
    options: &MetricsOptions,
) -> Result<MergedPhase, MergeError> {
    let mut m = MergedPhase {
        acc: PhaseAccumulator::new(options),
        duration_ns: 0,
        stop: None,
        cut: 0,
    };
    for s in shards {
        let sp = &s.file.phases[p];
        let refused = |source| MergeError::Stats {
            dir: shown(&s.dir),
            shard: s.file.shard.to_string(),
            phase: sp.info.name.clone(),
            source,
        };
        let part = PhaseAccumulator::from_state(options, &sp.state).map_err(refused)?;
        m.acc.merge(&part).map_err(refused)?;
        crate::measuring::metrics::add_count("cut", &mut m.cut, sp.cut).map_err(refused)?;
        // The shards ran side by side: the phase lasted as long as its longest shard.
        m.duration_ns = m.duration_ns.max(sp.info.duration_ns);
        if m.stop.is_none() {
            m.stop.clone_from(&sp.stop);
        }
    }
    Ok(m)
}

/// Each phase's statistics over all shards, with `percentiles` computed.
pub fn merge_phases(
    shards: &[LoadedShard],
    percentiles: &[f64],
) -> Result<Vec<ReportPhase>, MergeError> {
    let first = &shards[0].file;
    let options = MetricsOptions {
        percentiles: percentiles.to_vec(),
        goodput: first.goodput,
    };
    let mut merged = (0..first.phases.len())
        .map(|p| merge_phase(shards, p, &options))
        .collect::<Result<Vec<_>, _>>()?;
    steady::feed(shards, &mut merged, |m| &mut m.acc)?;
    let mut out = Vec::new();
    for (phase, m) in first.phases.iter().zip(merged) {
        let info = PhaseInfo {
            duration_ns: m.duration_ns,
            max_concurrency: phase.concurrency_limit,
            ..phase.info.clone()
        };
        let summary = m.acc.summarize(&info);
        // Every shard scraped the same server: shard 0's series, not N copies.
        let mut server = phase.server.clone().map(|s| s.into_phase());
        // And the same power exporters: their joules are the fleet's, for every shard's tokens.
        if let Some(e) = server.as_mut().and_then(|s| s.energy.as_mut()) {
            e.count_tokens(summary.total_output_tokens);
        }
        out.push(ReportPhase {
            summary,
            warmup: phase.warmup,
            arrival: phase.arrival.clone(),
            ended: m.stop,
            cut: m.cut,
            server,
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

/// One shard's stream log, read in (phase, index) order, sent requests only.
struct Cursor<I> {
    entries: I,
    /// The next sent entry, `None` at the end.
    head: Option<StreamEntry>,
    /// The digest of this shard's own part.
    own: Sha256,
    sent: HashSet<(usize, u64)>,
    seen: usize,
}

impl<I: Iterator<Item = Result<StreamEntry, ShardFileError>>> Cursor<I> {
    /// Moves to the next sent entry of the log.
    fn advance(&mut self) -> Result<(), MergeError> {
        self.head = None;
        for e in self.entries.by_ref() {
            let e = e?;
            if self.sent.contains(&(e.phase, e.index)) {
                self.head = Some(e);
                break;
            }
        }
        Ok(())
    }

    /// Every sent request was in the log, and the log's digest is the one the shard
    /// computed while running.
    fn check(self, s: &LoadedShard) -> Result<(), MergeError> {
        let dir = shown(&s.dir);
        if self.seen != self.sent.len() {
            return Err(MergeError::Stream {
                dir,
                message: format!(
                    "{} of its {} sent requests are not in {STREAM_FILE}",
                    self.sent.len() - self.seen,
                    self.sent.len()
                ),
            });
        }
        let own = hex::encode(self.own.finalize());
        if s.file.header.request_digest.as_deref() != Some(own.as_str()) {
            return Err(MergeError::Stream {
                dir,
                message: format!(
                    "{STREAM_FILE} does not match the request digest the shard computed while running"
                ),
            });
        }
        Ok(())
    }
}

/// The digest of the union of the shards' request streams: every sent request, in
/// (phase, index) order, hashed as a single run hashes its stream. Each shard's own part
/// is checked against the digest it computed while running.
pub fn stream_digest(shards: &[LoadedShard]) -> Result<String, MergeError> {
    let mut cursors = Vec::new();
    for s in shards {
        let mut c = Cursor {
            entries: read_jsonl::<StreamEntry>(&s.dir.join(STREAM_FILE))?,
            head: None,
            own: Sha256::new(),
            sent: sent_requests(&s.dir)?,
            seen: 0,
        };
        c.advance()?;
        cursors.push(c);
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
        cursors[i].advance()?;
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
        c.check(s)?;
    }
    Ok(hex::encode(all.finalize()))
}

/// The line that warns of shards written by another runner or WIT version than shard
/// 0's: the first such shard, both versions named.
pub fn version_warning(shards: &[LoadedShard]) -> Option<String> {
    let first = &shards[0];
    let versions = |l: &LoadedShard| {
        let h = &l.file.header;
        report::compare::Versions {
            runner: h.runner_version.clone(),
            wit: h.wit_version.clone(),
        }
    };
    let name = |l: &LoadedShard| format!("shard {} ({})", l.file.shard, shown(&l.dir));
    shards[1..].iter().find_map(|s| {
        report::compare::versions_differ(&name(first), &versions(first), &name(s), &versions(s))
    })
}

/// A merged run: its report, and the warnings to print.
pub struct Merged {
    pub report: RunReport,
    pub warnings: Vec<String>,
}

/// Loads, checks and merges shard directories into one report, with `checks` checked on
/// the merged phases (the shards' own checks saw one stripe each).
pub fn merge(dirs: &[PathBuf], checks: &[Threshold]) -> Result<Merged, MergeError> {
    let shards = load(dirs)?;
    sessions::check(&shards)?;
    let warnings = version_warning(&shards).into_iter().collect();
    // A threshold on a percentile the shards did not report gets it computed: the merged
    // histograms hold every percentile.
    let mut percentiles = shards[0].file.percentiles.clone();
    percentiles.extend(thresholds::missing_percentiles(checks, &percentiles));
    let phases = merge_phases(&shards, &percentiles)?;
    let first = &shards[0].file;
    let mut header = first.header.clone();
    header.request_digest = Some(stream_digest(&shards)?);
    // Each shard sent its requests as spans of a trace of its own (its requests.jsonl
    // names it): the merged run has no one trace id.
    header.trace_id = None;
    let targets: HashSet<&str> = shards
        .iter()
        .map(|s| s.file.header.target.as_str())
        .collect();
    if targets.len() > 1 {
        let mut t: Vec<&str> = targets.into_iter().collect();
        t.sort_unstable();
        header.target = t.join(", ");
    }
    let starts = shards
        .iter()
        .map(|s| ShardStart {
            index: s.file.shard.index,
            clock_offset_ms: s.file.clock_offset_ms,
            started_unix_ns: s.file.started_unix_ns,
            notes: s.file.notes.clone(),
        })
        .collect();
    let parts = ReportParts {
        header,
        phases,
        // A shard's notes speak for its stripe only: the run's are those all shards agree
        // on; each shard's own stay with its start (notes.rs says why).
        notes: notes::agreed(
            &shards
                .iter()
                .map(|s| s.file.notes.as_slice())
                .collect::<Vec<_>>(),
        ),
        shards: Some(ShardStarts {
            shards: starts,
            start_at: first.start_at.clone(),
        }),
        // Each shard exported its own spans, and said so in its own result.json.
        otlp: None,
    };
    Ok(Merged {
        report: RunReport::new(parts, checks),
        warnings,
    })
}

/// The merged requests.jsonl in `out`: every shard's records, shard after shard.
/// Shard 0's server_metrics.jsonl, copied into the merged output: every shard scraped the
/// same server, so one series describes it, not N copies. Nothing when shard 0 has none.
pub fn copy_server_samples(dirs: &[PathBuf], out: &Path) -> Result<(), MergeError> {
    let first = dirs
        .iter()
        .find(|d| ShardFile::read(d).is_ok_and(|f| f.shard.index == 0));
    let Some(from) = first.map(|d| d.join(crate::servers::server_metrics::SAMPLES_FILE)) else {
        return Ok(());
    };
    if !from.is_file() {
        return Ok(());
    }
    let to = out.join(crate::servers::server_metrics::SAMPLES_FILE);
    std::fs::copy(&from, &to)
        .map(|_| ())
        .map_err(|source| MergeError::Write { path: to, source })
}

pub fn gather_records(dirs: &[PathBuf], out: &Path) -> Result<(), MergeError> {
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| MergeError::Write { path, source }
    };
    std::fs::create_dir_all(out).map_err(write_err(out))?;
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
    w.flush().map_err(write_err(&records))
}
