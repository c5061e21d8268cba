//! The twin's error on held-out phases: each phase's requests (send offsets, new prompt
//! and output tokens) are written as a Mooncake-format trace and replayed against the twin,
//! run by this same binary with `--sim-profile twin.toml` (the built-in simulator, in real
//! time); its result.json figures are then set against the real run's.
//!
//! A closed-loop phase (a `max_concurrency` cap and no request rate: each request left
//! when an earlier one finished) is replayed closed-loop at its concurrency, its requests
//! in their order (`closed_replay.rhai`): its recorded send times hold the real server's
//! waits, and replaying them would feed those into the twin's TTFT. Any other phase is
//! replayed at its recorded send times by the bundled `trace_replay.rhai`.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use crate::servers::sim::twin_file::HoldoutError;
use crate::servers::twin::ObservedPhase;

const REPLAY: &str = include_str!("../../../../scenarios/trace_replay.rhai");
const CLOSED_REPLAY: &str = include_str!("closed_replay.rhai");

/// The figures compared, as result.json names them.
const METRICS: [&str; 14] = [
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
    "output_throughput",
    "request_throughput",
];

/// `virtual_time`: the replays run on the simulated clock (`run --virtual-time`).
pub fn measure(
    twin: &Path,
    held: &[(ObservedPhase, Value)],
    virtual_time: bool,
) -> Result<Vec<HoldoutError>> {
    let dir = tempfile::tempdir().context("cannot make a directory for the replay")?;
    std::fs::write(dir.path().join("replay.rhai"), REPLAY)?;
    std::fs::write(dir.path().join("closed_replay.rhai"), CLOSED_REPLAY)?;
    let mut rows = Vec::new();
    for (phase, observed) in held {
        let how = Replay {
            concurrency: closed_loop(observed),
            virtual_time,
        };
        let predicted = replay(twin, phase, how, dir.path())?;
        for metric in METRICS {
            let (Some(o), Some(p)) = (observed[metric].as_f64(), predicted[metric].as_f64()) else {
                continue;
            };
            rows.push(HoldoutError {
                phase: phase.name.clone(),
                metric: metric.to_string(),
                observed: o,
                predicted: p,
                error: p - o,
                error_pct: (o != 0.0).then(|| (p - o).abs() / o.abs() * 100.0),
            });
        }
    }
    Ok(rows)
}

/// The concurrency of a closed-loop phase, from its result.json figures: a cap, and no
/// request rate (vLLM's layout writes "inf").
fn closed_loop(figures: &Value) -> Option<u64> {
    let cap = figures["max_concurrency"].as_u64().filter(|&c| c > 0)?;
    figures["request_rate"].as_f64().is_none().then_some(cap)
}

/// How a phase is replayed.
#[derive(Clone, Copy)]
struct Replay {
    /// Closed-loop at this concurrency, if given; else at the recorded send times.
    concurrency: Option<u64>,
    /// On the simulated clock.
    virtual_time: bool,
}

/// Runs the phase's requests against the twin as `how` says; the replay's result.json.
fn replay(twin: &Path, phase: &ObservedPhase, how: Replay, dir: &Path) -> Result<Value> {
    let mut reqs: Vec<_> = phase.requests.iter().collect();
    reqs.sort_by_key(|r| r.sent_ns);
    let mut trace = String::new();
    for r in &reqs {
        let line = json!({
            "timestamp": r.sent_ns as f64 / 1e6,
            "input_length": r.new_prompt_tokens.max(1),
            "output_length": r.output_tokens.max(1),
        });
        let _ = writeln!(trace, "{line}");
    }
    // A scenario reads files from the `data/` folder beside it.
    std::fs::create_dir_all(dir.join("data"))?;
    std::fs::write(dir.join("data").join("trace.jsonl"), trace)?;
    let out = dir.join("out");
    let exe = std::env::current_exe().context("cannot find the runner's own binary")?;
    let mut command = Command::new(exe);
    command.arg("run");
    match how.concurrency {
        Some(c) => command
            .arg(dir.join("closed_replay.rhai"))
            .args(["-p", &format!("concurrency={c}")]),
        None => command.arg(dir.join("replay.rhai")),
    };
    if how.virtual_time {
        command.arg("--virtual-time");
    }
    let run = command
        .args(["-p", "trace=data/trace.jsonl", "--sim-profile"])
        .arg(std::path::absolute(twin)?)
        .arg("--output")
        .arg(&out)
        .output()
        .context("cannot start the replay")?;
    if !run.status.success() {
        let err = String::from_utf8_lossy(&run.stderr);
        let last = err.lines().last().unwrap_or("no message");
        bail!(
            "the replay of phase {} against the twin failed: {last}",
            phase.name
        );
    }
    let text = std::fs::read_to_string(out.join("result.json"))?;
    let result: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow!("the replay's result.json is not JSON: {e}"))?;
    std::fs::remove_dir_all(&out)?;
    Ok(result)
}

/// The error table, one row per phase and metric, under a title saying what was replayed.
pub fn table(rows: &[HoldoutError], replayed: &str) -> String {
    let mut s = format!(
        "held-out error ({replayed}):\n  {:<16} {:<20} {:>12} {:>12} {:>12} {:>9}",
        "phase", "metric", "observed", "twin", "error", "error %"
    );
    for r in rows {
        let pct = r.error_pct.map_or("-".into(), |p| format!("{p:.1}"));
        let _ = write!(
            s,
            "\n  {:<16} {:<20} {:>12.3} {:>12.3} {:>12.3} {:>9}",
            r.phase, r.metric, r.observed, r.predicted, r.error, pct
        );
    }
    s
}

/// Per phase, the figure where the real run and the twin part most (the largest error in %).
pub fn parting(rows: &[HoldoutError]) -> String {
    let mut phases: Vec<&str> = rows.iter().map(|r| r.phase.as_str()).collect();
    phases.dedup();
    let mut s = String::from("where they part most:");
    for phase in phases {
        let worst = rows
            .iter()
            .filter(|r| r.phase == phase)
            .filter_map(|r| r.error_pct.map(|p| (p, r)))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((pct, r)) = worst {
            let _ = write!(
                s,
                "\n  {phase}: {} (real {:.3}, twin {:.3}, {pct:.1} % {})",
                r.metric,
                r.observed,
                r.predicted,
                if r.error > 0.0 { "over" } else { "under" }
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(phase: &str, metric: &str, observed: f64, predicted: f64) -> HoldoutError {
        HoldoutError {
            phase: phase.into(),
            metric: metric.into(),
            observed,
            predicted,
            error: predicted - observed,
            error_pct: Some((predicted - observed).abs() / observed * 100.0),
        }
    }

    #[test]
    fn each_phase_parts_at_its_largest_relative_error() {
        let rows = [
            row("c2", "mean_ttft_ms", 100.0, 110.0),
            row("c2", "mean_tpot_ms", 10.0, 8.0),
            row("c8", "mean_ttft_ms", 500.0, 505.0),
        ];
        let s = parting(&rows);
        assert!(
            s.contains("c2: mean_tpot_ms (real 10.000, twin 8.000, 20.0 % under)"),
            "{s}"
        );
        assert!(s.contains("c8: mean_ttft_ms"), "{s}");
        assert_eq!(s.lines().count(), 3, "{s}");
    }

    #[test]
    fn only_a_capped_phase_without_a_rate_is_closed_loop() {
        let closed = json!({"max_concurrency": 4, "request_rate": "inf"});
        assert_eq!(closed_loop(&closed), Some(4));
        assert_eq!(
            closed_loop(&json!({"max_concurrency": 4, "request_rate": 2.0})),
            None
        );
        assert_eq!(
            closed_loop(&json!({"max_concurrency": null, "request_rate": "inf"})),
            None
        );
    }
}
