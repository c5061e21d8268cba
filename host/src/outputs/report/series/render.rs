//! A series as people and programs read it: the compact text table printed after the
//! last run's report (and in the series' report.txt) and its markdown twin (report.md);
//! result.json is `json::render_series`.

use std::fmt::Write as _;

use super::{RunSeries, SeriesFigure, SeriesPhase};
use crate::outputs::report::table::{aligned_table, markdown_table};

/// A value as the table shows it: a share with four decimals, anything else with two
/// (the vLLM block's precision).
fn number(f: &SeriesFigure, v: f64) -> String {
    if f.key == "success_rate" {
        format!("{v:.4}")
    } else {
        format!("{v:.2}")
    }
}

/// Columns of one figure's row: figure, mean, std, the 95 % interval, CV and the flag.
pub(crate) fn columns(f: &SeriesFigure) -> Vec<(&'static str, String)> {
    let dash = || "-".to_string();
    let s = f.spread.as_ref();
    vec![
        ("figure", f.label.clone()),
        ("mean", s.map_or_else(dash, |s| number(f, s.mean))),
        ("std", s.map_or_else(dash, |s| number(f, s.std))),
        (
            "95% CI of the mean",
            s.map_or_else(dash, |s| {
                format!("[{}, {}]", number(f, s.ci_low), number(f, s.ci_high))
            }),
        ),
        (
            "CV",
            s.and_then(|s| s.cv)
                .map_or_else(dash, |cv| format!("{:.1}%", 100.0 * cv)),
        ),
        ("", if f.unstable { "unstable" } else { "" }.to_string()),
    ]
}

/// The line above the tables: how many runs, their seeds, the threshold.
pub(crate) fn title(series: &RunSeries) -> String {
    let seeds = if series.same_seed {
        format!("all with seed {}", series.header.seed)
    } else {
        let list: Vec<String> = series.runs.iter().map(|r| r.seed.to_string()).collect();
        format!("seeds {}", list.join(", "))
    };
    format!(
        "{} runs ({seeds}); mean, sample std and 95% confidence interval of the mean (Student's t, {} degrees of freedom) of each figure over the runs; `unstable`: coefficient of variation above {}%",
        series.runs.len(),
        series.runs.len().saturating_sub(1),
        100.0 * series.cv_threshold
    )
}

fn phase_heading(p: &SeriesPhase, total: usize) -> String {
    let partial = if p.runs < total {
        format!(" (in {} of the {total} runs)", p.runs)
    } else {
        String::new()
    };
    format!("Phase `{}`{partial}", p.name)
}

/// The compact text table, one block per phase.
pub fn render_text(series: &RunSeries) -> String {
    let mut out = format!("{:=^50}\n", " Repeated runs ");
    let _ = writeln!(out, "{}", title(series));
    for p in series.phases() {
        let _ = writeln!(out, "\n{}", phase_heading(&p, series.runs.len()));
        out += &aligned_table(p.figures.iter().map(columns).collect());
    }
    out += &unstable_line(series);
    out
}

/// One line naming the flagged figures, if any.
fn unstable_line(series: &RunSeries) -> String {
    let flagged: Vec<String> = series
        .phases()
        .iter()
        .flat_map(|p| {
            p.figures
                .iter()
                .filter(|f| f.unstable)
                .map(move |f| format!("{} ({})", f.label, p.name))
        })
        .collect();
    if flagged.is_empty() {
        return String::new();
    }
    format!(
        "\nUnstable across runs (CV above {}%): {}\n",
        100.0 * series.cv_threshold,
        flagged.join(", ")
    )
}

/// report.md of the series.
pub fn render_markdown(series: &RunSeries) -> String {
    let mut md = format!("# Repeated runs: {}\n\n", series.header.scenario);
    let _ = writeln!(md, "{}.\n", title(series));
    md += "| run | seed | folder | request digest |\n|---|---|---|---|\n";
    for r in &series.runs {
        let _ = writeln!(
            md,
            "| {} | {} | {} | `{}` |",
            r.run,
            r.seed,
            r.dir.as_deref().unwrap_or("-"),
            r.request_digest
        );
    }
    for p in series.phases() {
        let _ = write!(
            md,
            "\n## {}\n\n{}",
            phase_heading(&p, series.runs.len()),
            markdown_table(p.figures.iter().map(columns).collect())
        );
    }
    md += &unstable_line(series);
    md
}
