//! [`RunReport`]: one run's result, whether one process ran it or `runner merge` put it
//! together from shards. Every output is rendered from it: the text report, result.json,
//! report.md, report.html and the CSV files.

use std::fmt::Write as _;

use super::text::{render_notes, render_phases, render_thresholds, PhaseText};
use super::RunHeader;
use crate::measuring::metrics::PhaseSummary;
use crate::measuring::thresholds::{self, Threshold, Verdict};
use crate::safeguards::display::escape_control_multiline;
use crate::servers::server_metrics::ServerPhase;
use crate::workloads::scenario::NoteValue;

/// One phase as every output shows it.
#[derive(Clone, Debug)]
pub struct ReportPhase {
    pub summary: PhaseSummary,
    /// Warm-up: its requests are counted, its statistics left out.
    pub warmup: bool,
    /// The arrival process, described (`Poisson, 10 req/s`).
    pub arrival: String,
    /// Why the phase ended, when it did not simply run out of requests.
    pub ended: Option<String>,
    /// Requests still running at the drain limit, cut.
    pub cut: u64,
    /// The server's metrics over the phase, when they were scraped.
    pub server: Option<ServerPhase>,
}

/// When one shard of a merged run began.
#[derive(Clone, Debug)]
pub struct ShardStart {
    pub index: u32,
    /// How late the shard began after `--start-at`, in ms.
    pub clock_offset_ms: Option<f64>,
    /// Wall clock when the shard began, ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// What the shard's scenario reported with `note`, in order.
    pub notes: Vec<(String, NoteValue)>,
}

/// The shards a merged run came from.
#[derive(Clone, Debug)]
pub struct ShardStarts {
    pub shards: Vec<ShardStart>,
    /// The agreed start instant, RFC 3339.
    pub start_at: Option<String>,
}

impl ShardStarts {
    /// Milliseconds between the first and the last shard to start.
    pub fn spread_ms(&self) -> f64 {
        let starts = self.shards.iter().map(|s| s.started_unix_ns);
        match (starts.clone().min(), starts.max()) {
            (Some(lo), Some(hi)) => (hi - lo) as f64 / 1e6,
            _ => 0.0,
        }
    }
}

/// What a run's outputs are made of.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// What was run; its `request_digest` is the digest of the whole request stream.
    pub header: RunHeader,
    /// Every phase, warm-ups included, in run order (records index them).
    pub phases: Vec<ReportPhase>,
    /// The percentiles every latency is reported at.
    pub percentiles: Vec<f64>,
    /// A goodput SLO was given: the goodput rows are shown.
    pub goodput: bool,
    /// Whether thresholds were given (result.json then lists their verdicts, even none).
    pub thresholds_given: bool,
    /// Each threshold in each measured phase, thresholds first.
    pub verdicts: Vec<Verdict>,
    /// What the scenario reported with `note`, in order.
    pub notes: Vec<(String, NoteValue)>,
    /// A merged run's shards; `None` for a run one process made.
    pub shards: Option<ShardStarts>,
}

/// The parts of a [`RunReport`] before its thresholds are checked.
pub struct ReportParts {
    pub header: RunHeader,
    pub phases: Vec<ReportPhase>,
    pub percentiles: Vec<f64>,
    pub goodput: bool,
    pub notes: Vec<(String, NoteValue)>,
    pub shards: Option<ShardStarts>,
}

impl RunReport {
    /// The report of `parts`, with `checks` checked against every measured phase.
    pub fn new(parts: ReportParts, checks: &[Threshold]) -> RunReport {
        let mut report = RunReport {
            header: parts.header,
            phases: parts.phases,
            percentiles: parts.percentiles,
            goodput: parts.goodput,
            thresholds_given: !checks.is_empty(),
            verdicts: Vec::new(),
            notes: parts.notes,
            shards: parts.shards,
        };
        report.verdicts = thresholds::check_all(checks, &report.measured());
        report
    }

    /// The measured phases' summaries (warm-ups left out), in run order.
    pub fn measured(&self) -> Vec<PhaseSummary> {
        self.phases
            .iter()
            .filter(|p| !p.warmup)
            .map(|p| p.summary.clone())
            .collect()
    }

    /// The notes the reports show: the run's own, then, in a merged run, each note the
    /// shards did not agree on, once per shard that reported it, as `key (shard I/N)`.
    pub fn shown_notes(&self) -> Vec<(String, NoteValue)> {
        let mut out = self.notes.clone();
        let Some(shards) = &self.shards else {
            return out;
        };
        let mut keys: Vec<&str> = Vec::new();
        for (k, _) in shards.shards.iter().flat_map(|s| &s.notes) {
            if !keys.contains(&k.as_str()) && !self.notes.iter().any(|(own, _)| own == k) {
                keys.push(k);
            }
        }
        let n = shards.shards.len();
        for key in keys {
            for s in &shards.shards {
                if let Some((_, v)) = s.notes.iter().find(|(k, _)| k == key) {
                    out.push((format!("{key} (shard {}/{n})", s.index), v.clone()));
                }
            }
        }
        out
    }

    /// More than one measured phase: verdicts and errors then name their phase.
    pub fn many_phases(&self) -> bool {
        self.phases.iter().filter(|p| !p.warmup).count() > 1
    }

    /// The request stream's digest (sha256 hex).
    pub fn request_digest(&self) -> &str {
        self.header.request_digest.as_deref().unwrap_or("")
    }

    /// The text report after the header: each phase, the scenario's notes, the
    /// thresholds, a merged run's shards and the request stream digest. Servers' messages
    /// reach it: control characters are escaped (their secrets were hidden where they
    /// entered, see `redact`).
    pub fn render_body(&self) -> String {
        let phases: Vec<PhaseText> = self
            .phases
            .iter()
            .map(|p| PhaseText {
                summary: &p.summary,
                arrival: p.arrival.clone(),
                warmup: p.warmup,
                ended: p.ended.clone(),
                cut: p.cut,
                server: p.server.as_ref(),
            })
            .collect();
        let mut body = render_phases(&phases, &self.percentiles, self.goodput);
        body += &render_notes(&self.shown_notes());
        body += &render_thresholds(&self.verdicts, self.many_phases());
        if let Some(shards) = &self.shards {
            body += &render_shards(shards);
        }
        let _ = writeln!(
            body,
            "Request stream digest (sha256): {}",
            self.request_digest()
        );
        body += &render_dependence(&self.header.stream_depends_on);
        escape_control_multiline(&body).into_owned()
    }

    /// `N of M thresholds failed: ...`, naming each failed one with its value (and its
    /// phase when there are several); `None` when all passed.
    pub fn failed_thresholds(&self) -> Option<String> {
        let many = self.many_phases();
        let failed: Vec<String> = self
            .verdicts
            .iter()
            .filter(|v| !v.pass)
            .map(|v| {
                let phase = if many {
                    format!(" in phase `{}`", v.phase)
                } else {
                    String::new()
                };
                format!("{} ({}{phase})", v.threshold, v.value_text())
            })
            .collect();
        (!failed.is_empty()).then(|| {
            format!(
                "{} of {} thresholds failed: {}",
                failed.len(),
                self.verdicts.len(),
                failed.join(", ")
            )
        })
    }
}

/// The line saying what the request stream may have depended on beyond the seed and the
/// parameters (see `scenario::dependence`); none when nothing.
fn render_dependence(reasons: &[String]) -> String {
    if reasons.is_empty() {
        return String::new();
    }
    format!(
        "Request stream may have depended on responses or timing, through: {} \
         (the same seed may send other requests on another run)\n",
        reasons.join(", ")
    )
}

/// One line per shard start, and the spread.
fn render_shards(shards: &ShardStarts) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:=^50}", " Shards ");
    let _ = writeln!(out, "{:<40} {:<10}", "Shards merged:", shards.shards.len());
    if let Some(at) = &shards.start_at {
        let _ = writeln!(out, "{:<40} {}", "Start at:", at);
    }
    let offsets: Vec<f64> = shards
        .shards
        .iter()
        .filter_map(|s| s.clock_offset_ms)
        .collect();
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
        shards.spread_ms()
    );
    let _ = writeln!(out, "{}\n", "=".repeat(50));
    out
}
