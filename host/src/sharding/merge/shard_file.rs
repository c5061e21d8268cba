//! What a shard leaves in its `--output DIR` for `runner merge`, besides requests.jsonl:
//! shard.json (identity, clock offset, each phase's mergeable statistics with histograms in
//! HdrHistogram V2) and stream.jsonl (the digest entry of every request it generated).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::measuring::metrics::{
    MetricsOptions, PhaseAccumulator, PhaseInfo, PhaseState, RequestRecord, Slo,
};
use crate::outputs::report::RunHeader;
use crate::sharding::shard::Shard;
use crate::workloads::scenario::NoteValue;

pub const SHARD_FILE: &str = "shard.json";
pub const STREAM_FILE: &str = "stream.jsonl";
pub const RECORDS_FILE: &str = "requests.jsonl";
/// Version of shard.json; `runner merge` refuses any other.
pub const FORMAT: u32 = 1;
/// The largest shard.json `runner merge` reads. Its histograms are compact (a few KiB
/// each, whatever the number of requests); what grows is 2 times per request sent
/// (`starts_ns`, `ends_ns`: at most 2 × 21 bytes of JSON, about 28 for an hour's phase)
/// and a number per second of phase: 256 MiB holds a shard of over 6 million requests.
pub const SHARD_FILE_LIMIT: u64 = 256 << 20;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShardFile {
    pub format: u32,
    pub shard: Shard,
    /// [`RunHeader::workload_id`]: scenario digest, parameters, seed, tokenizer.
    pub workload_id: String,
    /// The run's header; `request_digest` is this shard's own part of the stream.
    pub header: RunHeader,
    /// The agreed start instant (`--start-at`), RFC 3339.
    pub start_at: Option<String>,
    /// How late this shard began after `start_at`, in ms.
    pub clock_offset_ms: Option<f64>,
    /// Wall clock when the run began, ns since the Unix epoch.
    pub started_unix_ns: u64,
    pub percentiles: Vec<f64>,
    pub goodput: Option<Slo>,
    pub phases: Vec<ShardPhase>,
    /// What this shard's scenario reported with `note`, in order (absent in files of
    /// runners before notes were merged: none).
    #[serde(default)]
    pub notes: Vec<(String, NoteValue)>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShardPhase {
    pub warmup: bool,
    /// The arrival process as the single run describes it (before this shard's share).
    pub arrival: String,
    /// Concurrency limit of the whole run's phase, and this shard's share of it.
    pub concurrency_limit: Option<u64>,
    pub concurrency_share: Option<u64>,
    /// This shard's phase (name, duration; the rate of the whole run).
    pub info: PhaseInfo,
    /// Why the phase stopped, when not because it sent everything.
    pub stop: Option<String>,
    /// Requests cut at the drain limit.
    pub cut: u64,
    pub state: PhaseState,
    /// The server's metrics over the phase, as this shard scraped them: every shard
    /// scrapes the same server, so a merge keeps shard 0's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ShardServer>,
}

/// A phase's server metrics with their chart series (which result.json leaves out).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShardServer {
    #[serde(flatten)]
    pub phase: crate::servers::server_metrics::ServerPhase,
    pub series: Vec<crate::servers::server_metrics::ServerPoint>,
}

impl ShardServer {
    fn of(phase: &crate::servers::server_metrics::ServerPhase) -> ShardServer {
        ShardServer {
            phase: phase.clone(),
            series: phase.series.clone(),
        }
    }

    /// The phase's server metrics, series included.
    pub fn into_phase(self) -> crate::servers::server_metrics::ServerPhase {
        crate::servers::server_metrics::ServerPhase {
            series: self.series,
            ..self.phase
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ShardFileError {
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
    #[error("{path}:{line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: not a shard result of this runner (format {found}, expected {FORMAT})")]
    Format { path: PathBuf, found: u32 },
    #[error(transparent)]
    Bounded(#[from] crate::safeguards::bounded_file::BoundedReadError),
}

/// Only the `format` of a shard.json (the other keys skipped unparsed).
#[derive(Deserialize)]
struct FormatOnly {
    #[serde(default)]
    format: Option<serde_json::Value>,
}

/// Each line of a JSONL file as `T`, with its path and line number in errors.
pub fn read_jsonl<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<impl Iterator<Item = Result<T, ShardFileError>>, ShardFileError> {
    let file = File::open(path).map_err(|source| ShardFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let path = path.to_path_buf();
    Ok(BufReader::new(file)
        .lines()
        .enumerate()
        .filter(|(_, l)| l.as_ref().map_or(true, |l| !l.trim().is_empty()))
        .map(move |(n, line)| {
            let line = line.map_err(|source| ShardFileError::Read {
                path: path.clone(),
                source,
            })?;
            serde_json::from_str(&line).map_err(|e| ShardFileError::Parse {
                path: path.clone(),
                line: n + 1,
                message: e.to_string(),
            })
        }))
}

/// Each phase's statistics, rebuilt from the shard's own records: the accumulator the run
/// kept, record for record, now in a form that can be saved.
pub fn phase_states(
    records: &Path,
    phases: usize,
    options: &MetricsOptions,
) -> Result<Vec<PhaseState>, ShardFileError> {
    let mut accs: Vec<PhaseAccumulator> = (0..phases)
        .map(|_| PhaseAccumulator::new(options))
        .collect();
    for (n, record) in read_jsonl::<RequestRecord>(records)?.enumerate() {
        let record = record?;
        let acc = accs
            .get_mut(record.phase)
            .ok_or_else(|| ShardFileError::Parse {
                path: records.to_path_buf(),
                line: n + 1,
                message: format!("phase {} out of range", record.phase),
            })?;
        acc.record(&record);
    }
    Ok(accs.iter().map(PhaseAccumulator::state).collect())
}

impl ShardFile {
    pub fn write(&self, dir: &Path) -> Result<(), ShardFileError> {
        let path = dir.join(SHARD_FILE);
        let text = serde_json::to_string(self).expect("a shard file serialises");
        std::fs::write(&path, text + "\n").map_err(|source| ShardFileError::Write { path, source })
    }

    pub fn read(dir: &Path) -> Result<ShardFile, ShardFileError> {
        let path = dir.join(SHARD_FILE);
        let text = crate::safeguards::bounded_file::read_to_string(
            &path,
            SHARD_FILE_LIMIT,
            "a shard.json",
        )?;
        // The format first, so an old or foreign file says so rather than a missing field.
        let format = serde_json::from_str::<FormatOnly>(&text)
            .ok()
            .and_then(|m| m.format.and_then(|f| f.as_u64()))
            .map_or(0, |f| u32::try_from(f).unwrap_or(u32::MAX));
        if format != FORMAT {
            return Err(ShardFileError::Format {
                path,
                found: format,
            });
        }
        serde_json::from_str(&text).map_err(|e| ShardFileError::Parse {
            path,
            line: e.line(),
            message: e.to_string(),
        })
    }
}

/// What a finished shard run hands to [`ShardFile::from_run`].
pub struct ShardRun<'a> {
    pub plan: &'a crate::sharding::shard::ShardPlan,
    pub header: &'a RunHeader,
    pub result: &'a crate::measuring::engine::RunResult,
    /// The phases as the scenario declared them, before this shard's share.
    pub declared: &'a [crate::workloads::scenario::PhaseSpec],
    pub metrics: &'a MetricsOptions,
    pub start_at: Option<crate::sharding::shard::StartAt>,
    pub clock_offset_ms: Option<f64>,
    pub started: std::time::SystemTime,
    /// The shard's --output directory, holding its requests.jsonl.
    pub dir: &'a Path,
}

impl ShardFile {
    pub fn from_run(run: &ShardRun) -> Result<ShardFile, ShardFileError> {
        let phases = run.result.phases.len();
        let states = phase_states(&run.dir.join(RECORDS_FILE), phases, run.metrics)?;
        let phases = run
            .result
            .phases
            .iter()
            .zip(states)
            .enumerate()
            .map(|(p, (phase, state))| {
                let declared = run.declared.get(p).unwrap_or(&phase.spec);
                let s = &phase.summary;
                ShardPhase {
                    warmup: phase.spec.warmup,
                    arrival: declared.arrival.describe(),
                    concurrency_limit: declared.concurrency_limit(),
                    concurrency_share: phase.spec.concurrency_limit(),
                    info: PhaseInfo {
                        name: s.name.clone(),
                        duration_ns: (s.duration_s * 1e9).round() as u64,
                        max_concurrency: s.max_concurrency,
                        request_rate: s.request_rate,
                        burstiness: s.burstiness,
                        steady_window: declared.steady_window,
                    },
                    stop: (phase.stop != crate::measuring::engine::StopReason::Exhausted)
                        .then(|| phase.stop.describe()),
                    server: phase.server.as_ref().map(ShardServer::of),
                    cut: phase.cut,
                    state,
                }
            })
            .collect();
        Ok(ShardFile {
            format: FORMAT,
            shard: run.plan.shard,
            workload_id: run.header.workload_id(),
            header: run.header.clone(),
            start_at: run.start_at.map(|s| s.rfc3339()),
            clock_offset_ms: run.clock_offset_ms,
            started_unix_ns: run
                .started
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            percentiles: run.metrics.percentiles.clone(),
            goodput: run.metrics.goodput,
            phases,
            notes: run.result.notes.clone(),
        })
    }
}
