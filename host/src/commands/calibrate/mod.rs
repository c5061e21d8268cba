//! `runner calibrate RUN_DIR... [--out twin.toml] [--holdout PHASE...]`: fits a twin of the
//! server from runs' output directories (`servers::twin`), writes it, and with --holdout
//! measures its error on the phases left out of the fit (`holdout`). With `--twin FILE`
//! it fits nothing and replays every phase of the runs against that twin instead.

mod holdout;
mod run_dir;

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::commands::cli::CalibrateArgs;
use crate::servers::sim::twin_file::{TwinEngine, TwinFile};
use crate::servers::twin::{self, ObservedPhase, ObservedRun};

pub fn calibrate(a: CalibrateArgs) -> Result<()> {
    let dirs = a
        .runs
        .iter()
        .map(|d| run_dir::read(d))
        .collect::<Result<Vec<_>>>()?;
    if let Some(twin) = &a.twin {
        return replay_all(twin, dirs, a.virtual_time);
    }
    let mut held: Vec<(ObservedPhase, Value)> = Vec::new();
    let mut fit_runs: Vec<ObservedRun> = Vec::new();
    for dir in dirs {
        let mut run = dir.observed;
        let (out, kept): (Vec<_>, Vec<_>) = run
            .phases
            .into_iter()
            .partition(|p| a.holdout.contains(&p.name));
        held.extend(out.into_iter().map(|p| {
            let figures = dir.figures.get(&p.name).cloned().unwrap_or_default();
            (p, figures)
        }));
        run.phases = kept;
        if !run.phases.is_empty() {
            fit_runs.push(run);
        }
    }
    check_holdout(&a.holdout, &held)?;
    let mut twin = twin::fit(&fit_runs)?;
    write(&twin, &a)?;
    if !held.is_empty() {
        twin.holdout = holdout::measure(&a.out, &held, a.virtual_time)?;
        write(&twin, &a)?;
    }
    print(&twin, &a);
    Ok(())
}

/// `--twin FILE`: every measured phase of the runs replayed against the twin, the real
/// run's figures set against the twin's, and per phase the figure where they part most.
fn replay_all(
    twin: &std::path::Path,
    dirs: Vec<run_dir::RunDir>,
    virtual_time: bool,
) -> Result<()> {
    // Read first, so a bad twin file is its one line before any replay starts.
    TwinFile::load(twin)?;
    let phases: Vec<(ObservedPhase, Value)> = dirs
        .into_iter()
        .flat_map(|d| {
            let figures = d.figures;
            d.observed.phases.into_iter().map(move |p| {
                let f = figures.get(&p.name).cloned().unwrap_or_default();
                (p, f)
            })
        })
        .collect();
    let rows = holdout::measure(twin, &phases, virtual_time)?;
    println!(
        "{}",
        holdout::table(&rows, "the run's phases replayed against the twin")
    );
    println!("{}", holdout::parting(&rows));
    Ok(())
}

fn check_holdout(names: &[String], held: &[(ObservedPhase, Value)]) -> Result<()> {
    for name in names {
        if !held.iter().any(|(p, _)| &p.name == name) {
            bail!("--holdout {name}: no run has a measured phase of that name");
        }
    }
    Ok(())
}

fn write(twin: &TwinFile, a: &CalibrateArgs) -> Result<()> {
    std::fs::write(&a.out, twin.to_toml())
        .with_context(|| format!("cannot write {}", a.out.display()))
}

/// The limit, or the bound it is when no run queued: `≥ 64 (never reached)`.
fn max_seqs_shown(e: &TwinEngine) -> String {
    if e.max_seqs_lower_bound {
        format!(
            "≥ {} (never reached: no request waited for a slot)",
            e.max_seqs
        )
    } else {
        e.max_seqs.to_string()
    }
}

fn print(twin: &TwinFile, a: &CalibrateArgs) {
    let e = &twin.engine;
    println!("twin written to {}", a.out.display());
    let rows: BTreeMap<&str, String> = BTreeMap::from([
        ("max_seqs", max_seqs_shown(e)),
        ("kv_tokens", e.kv_tokens.to_string()),
        (
            "prefill_us_per_token",
            format!("{:.3}", e.prefill_us_per_token),
        ),
        ("decode_step_ms", format!("{:.4}", e.decode_step_ms)),
        ("decode_us_per_seq", format!("{:.3}", e.decode_us_per_seq)),
    ]);
    for (name, value) in rows {
        println!("  {name:<22} {value}");
    }
    if let Some(knots) = &e.decode_curve {
        let points: Vec<String> = knots
            .iter()
            .map(|k| format!("{}: {:.3} ms", k.seqs, k.ms))
            .collect();
        println!("  {:<22} {}", "decode_curve", points.join(", "));
    }
    println!(
        "  fit: {} steps, residual {:.4} ms rms, R² {:.4}",
        twin.fit.steps, twin.fit.residual_rms_ms, twin.fit.r_squared
    );
    if !twin.holdout.is_empty() {
        println!(
            "{}",
            holdout::table(
                &twin.holdout,
                "the phase's requests replayed against the twin"
            )
        );
    }
}
