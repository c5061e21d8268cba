//! `runner run SCENARIO --repeat N`: the scenario run N times, each run exactly as a run
//! of its own (its own seed, its own `--output` folder `run-I`, its own simulator), then
//! the spread of every headline figure over the runs, printed after the last run's report
//! and written to the series' own `--output` folder (result.json, report.md, report.txt,
//! and report.html with each headline figure's interval as an error bar).
//!
//! The built-in simulator starts afresh for every run: runs on one server would share its
//! state (the `default` profile's prefix cache left warm by run 1 serves run 2's shared
//! prefixes from cache, `outputs/report/leftover_cache.rs`), and the interval assumes
//! independent runs. Against a real `--target` the server is the user's:
//! `--reset-prefix-cache run` empties its cache before each run.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};

use super::run::{run_once, Print, Ran, Session};
use crate::commands::cli::RunArgs;
use crate::outputs::report::series::{self, render, RunFigures, RunSeries};
use crate::outputs::report::{html, json, output};

/// Runs the series `a.repeat` asks for; the exit code is the failing run's, else 0.
pub(super) fn series(mut a: RunArgs) -> Result<i32> {
    let session = &Session::open(&a)?;
    let runs = a.repeat.unwrap_or(2);
    let base = Paths::of(&a);
    // The series' folder is held for the whole series, and the files an earlier series
    // left at its top are cleared (each run claims its own folder).
    let _claim = base
        .output
        .as_deref()
        .map(crate::outputs::output_dir::claim)
        .transpose()?;
    let mut done: Vec<RunFigures> = Vec::new();
    let mut first: Option<(crate::outputs::report::RunHeader, u64)> = None;
    for run in 1..=runs {
        if let Some((_, seed)) = &first {
            if !a.same_seed {
                set_seed(&mut a, series::run_seed(*seed, run));
            }
        }
        base.apply(&mut a, run);
        let last = run == runs;
        let print = if last { Print::Report } else { Print::Nothing };
        let Ran { report, code } = run_once(session, &a, print)
            .map_err(|e| e.context(format!("run {run} of {runs} failed, which ends the series")))?;
        if code != 0 {
            let report_at = match &a.output {
                Some(d) => format!("; its report is in {}", d.join("report.txt").display()),
                None => String::new(),
            };
            crate::errln!(
                "error: run {run} of {runs} ended with exit code {code}, which ends the series (no summary over the runs){report_at}"
            );
            return Ok(code);
        }
        let dir = base.output.as_ref().map(|_| run_dir(run));
        done.push(RunFigures::of(&report, run, dir.clone()));
        first.get_or_insert_with(|| (report.header.clone(), report.header.seed));
        if !last && !a.quiet {
            let place = match &a.output {
                Some(d) => format!(": {}", d.display()),
                None => String::new(),
            };
            crate::errln!(
                "run {run} of {runs} done (seed {}){place}",
                report.header.seed
            );
        }
    }
    let (header, _) = first.ok_or_else(|| anyhow!("the series ran no run"))?;
    let series = RunSeries {
        header,
        same_seed: a.same_seed,
        cv_threshold: a.cv_threshold,
        runs: done,
    };
    finish(&series, base.output.as_deref())
}

/// The table after the last run's report, and the series' own files.
fn finish(series: &RunSeries, output: Option<&Path>) -> Result<i32> {
    let table = render::render_text(series);
    if let Some(dir) = output {
        output::write_text(&dir.join("result.json"), &json::render_series(series))?;
        output::write_text(&dir.join("report.md"), &render::render_markdown(series))?;
        output::write_text(
            &dir.join("report.html"),
            &html::repeat::render_series(series)?,
        )?;
        // The last run's report is in its own folder: the series' report.txt is the table.
        output::write_text(&dir.join("report.txt"), &table)?;
    }
    crate::out!("\n{table}");
    Ok(0)
}

/// A run's folder in the series' `--output`.
fn run_dir(run: u32) -> String {
    format!("run-{run}")
}

/// The command line's paths, each made per run.
struct Paths {
    output: Option<PathBuf>,
    send_log: Option<PathBuf>,
    save_result: Option<PathBuf>,
}

impl Paths {
    fn of(a: &RunArgs) -> Paths {
        Paths {
            output: a.output.clone(),
            send_log: a.sim.send_log.clone(),
            save_result: a.save_result.clone(),
        }
    }

    /// Run `run`'s outputs in `run-I` under --output; the simulator's send log and
    /// --save-result file named for the run (`send-run-2.jsonl`): each run's simulator
    /// writes its own log, which would otherwise replace the one before.
    fn apply(&self, a: &mut RunArgs, run: u32) {
        a.output = self.output.as_ref().map(|d| d.join(run_dir(run)));
        a.sim.send_log = self.send_log.as_deref().map(|p| per_run(p, run));
        a.save_result = self.save_result.as_deref().map(|p| per_run(p, run));
    }
}

/// `dir/name-run-I.ext` for `dir/name.ext`.
fn per_run(path: &Path, run: u32) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-run-{run}.{}", ext.to_string_lossy()),
        None => format!("{stem}-run-{run}"),
    };
    path.with_file_name(name)
}

/// The run's seed: `-p seed=` when the command line set it so (it may not be given
/// twice), else `--seed`.
fn set_seed(a: &mut RunArgs, seed: u64) {
    match a.params.iter_mut().find(|(n, _)| n == "seed") {
        Some((_, value)) => *value = seed.to_string(),
        None => a.seed = Some(seed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_run_files_keep_their_folder_and_extension() {
        assert_eq!(
            per_run(Path::new("/tmp/x/send.jsonl"), 3),
            PathBuf::from("/tmp/x/send-run-3.jsonl")
        );
        assert_eq!(per_run(Path::new("log"), 1), PathBuf::from("log-run-1"));
    }
}
