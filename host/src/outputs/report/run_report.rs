//! [`RunReport`]: one run's result, whether one process ran it or `runner merge` put it
//! together from shards. Every output is rendered from it: the text report, result.json,
//! report.md, report.html and the CSV files; none of them is imported here. Also which API
//! the requests went to (the header's), from the endpoints the records name.

use super::RunHeader;
use crate::measuring::client::Api;
use crate::measuring::metrics::answer::EndpointCount;
use crate::measuring::metrics::PhaseSummary;
use crate::measuring::thresholds::{self, Threshold, Verdict};
use crate::outputs::otlp::OtlpSummary;
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
    /// Whether thresholds were given (result.json then lists their verdicts, even none).
    pub thresholds_given: bool,
    /// Each threshold in each measured phase, thresholds first.
    pub verdicts: Vec<Verdict>,
    /// What the scenario reported with `note`, in order.
    pub notes: Vec<(String, NoteValue)>,
    /// A merged run's shards; `None` for a run one process made.
    pub shards: Option<ShardStarts>,
    /// The shard this report is of (`--shard I/N`: I, N); `None` for a whole or merged
    /// run. Plain numbers: the outputs read shards, they do not import sharding.
    pub shard: Option<(u32, u32)>,
    /// What became of the spans `--otlp` exported; `None` without it.
    pub otlp: Option<OtlpSummary>,
}

/// The parts of a [`RunReport`] before its thresholds are checked.
pub struct ReportParts {
    pub header: RunHeader,
    pub phases: Vec<ReportPhase>,
    pub notes: Vec<(String, NoteValue)>,
    pub shards: Option<ShardStarts>,
    pub otlp: Option<OtlpSummary>,
}

impl RunReport {
    /// The report of `parts`, with `checks` checked against every measured phase.
    pub fn new(parts: ReportParts, checks: &[Threshold]) -> RunReport {
        let mut report = RunReport {
            header: parts.header,
            phases: parts.phases,
            thresholds_given: !checks.is_empty(),
            verdicts: Vec::new(),
            notes: parts.notes,
            shards: parts.shards,
            shard: None,
            otlp: parts.otlp,
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

    /// Each phase that ended early (its duration, the scenario's stop, the error rate,
    /// Ctrl-C): its name and why.
    pub fn endings(&self) -> Vec<(String, String)> {
        self.phases
            .iter()
            .filter_map(|p| Some((p.summary.name.clone(), p.ended.clone()?)))
            .collect()
    }

    /// The request stream's digest (sha256 hex).
    pub fn request_digest(&self) -> &str {
        self.header.request_digest.as_deref().unwrap_or("")
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

/// Requests per endpoint over `phases`, in path order.
pub fn endpoints_used<'a>(
    phases: impl IntoIterator<Item = &'a PhaseSummary>,
) -> Vec<EndpointCount> {
    let mut counts = std::collections::BTreeMap::<String, u64>::new();
    for p in phases {
        for e in &p.answer.endpoints {
            *counts.entry(e.endpoint.clone()).or_default() += e.requests;
        }
    }
    counts
        .into_iter()
        .map(|(endpoint, requests)| EndpointCount { endpoint, requests })
        .collect()
}

/// An endpoint's `--api` name (the path itself for one no API has).
fn api_name(endpoint: &str) -> &str {
    match Api::of_path(endpoint) {
        Some(api) => api.name(),
        None => endpoint,
    }
}

/// The header's API: the one every request went to, or each with its request count
/// (`chat (90), completions (10)`); `configured` when nothing was sent.
pub fn api_used(endpoints: &[EndpointCount], configured: &str) -> String {
    match endpoints {
        [] => configured.to_string(),
        [one] => api_name(&one.endpoint).to_string(),
        many => many
            .iter()
            .map(|e| format!("{} ({})", api_name(&e.endpoint), e.requests))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(endpoint: &str, requests: u64) -> EndpointCount {
        EndpointCount {
            endpoint: endpoint.into(),
            requests,
        }
    }

    #[test]
    fn the_api_is_the_one_used_or_each_with_its_count() {
        assert_eq!(api_used(&[], "completions"), "completions");
        let chat = count(Api::Chat.path(), 5);
        assert_eq!(api_used(std::slice::from_ref(&chat), "completions"), "chat");
        let both = [chat, count(Api::Completions.path(), 2)];
        assert_eq!(api_used(&both, "completions"), "chat (5), completions (2)");
    }
}
