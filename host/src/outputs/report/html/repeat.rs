//! report.html of a series of repeated runs (`--repeat N`): the headline figures of each
//! phase as the mean over the runs with its 95 % confidence interval drawn as an error bar
//! (x: the phase), the mean, interval and CV beside each chart, then every figure's table
//! (`series/render.rs` has the columns) and the runs with their folders.

use std::fmt::Write as _;

use super::charts::{Chart, ChartError};
use super::escape::escape;
use super::panel::{num, push_all, Figures, Panel};
use super::{grid_table, header_rows, page_end, page_head_with};
use crate::outputs::report::series::render::{columns, title};
use crate::outputs::report::series::{RunSeries, SeriesPhase};

/// The headline charts: id, title, unit, and the figures (result.json keys) drawn.
const HEADLINES: [(&str, &str, &str, &[&str]); 6] = [
    (
        "repeat-request-throughput",
        "Request throughput",
        "req/s",
        &["request_throughput"],
    ),
    (
        "repeat-output-throughput",
        "Output token throughput",
        "tok/s",
        &["output_throughput"],
    ),
    (
        "repeat-ttft",
        "TTFT",
        "ms",
        &["mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms"],
    ),
    (
        "repeat-tpot",
        "TPOT",
        "ms",
        &["mean_tpot_ms", "p99_tpot_ms"],
    ),
    ("repeat-itl", "ITL", "ms", &["mean_itl_ms", "p99_itl_ms"]),
    (
        "repeat-e2el",
        "E2EL",
        "ms",
        &["mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms"],
    ),
];

/// The header's rows for a series: the header is run 1's, so its seed and request digest
/// are replaced by every run's seed and by whether the runs sent one request stream
/// (issue 58: the page showed seed 42 and run 1's digest over three seeds).
fn series_rows(series: &RunSeries) -> Vec<(&'static str, String)> {
    let seeds: Vec<String> = series.runs.iter().map(|r| r.seed.to_string()).collect();
    let mut digests: Vec<&str> = series
        .runs
        .iter()
        .map(|r| r.request_digest.as_str())
        .collect();
    digests.dedup();
    let seed = match series.same_seed {
        true => format!("{} for every run (--same-seed)", series.header.seed),
        false => format!("{} (one per run)", seeds.join(", ")),
    };
    let digest = match digests.as_slice() {
        [one] => format!("sha256:{one} (every run)"),
        _ => "differs per run (each run's seed makes its own stream; see Runs)".into(),
    };
    let mut rows = header_rows(&series.header);
    for (label, value) in &mut rows {
        match *label {
            "Seed" => *value = seed.clone(),
            "Request digest" => *value = digest.clone(),
            _ => {}
        }
    }
    rows
}

/// The series' page.
pub fn render_series(series: &RunSeries) -> Result<String, ChartError> {
    let h = &series.header;
    let mut out = page_head_with(
        &format!("Repeated runs: {}", h.scenario),
        h,
        series_rows(series),
    );
    let phases = series.phases();
    let _ = writeln!(
        out,
        "<h2>Headline figures over the runs</h2>\n<p class=\"muted\">{}. Dots: the mean over the runs; bars: its 95% confidence interval.</p>\n<div class=\"grid\">",
        escape(&title(series))
    );
    let panels: Vec<Panel> = HEADLINES
        .iter()
        .filter_map(|&(id, name, unit, keys)| headline(&phases, id, name, unit, keys))
        .collect();
    push_all(&mut out, &panels)?;
    out.push_str("</div>\n");
    for p in &phases {
        let _ = writeln!(out, "<h2>Phase {}: every figure</h2>", escape(&p.name));
        grid_table(&mut out, p.figures.iter().map(columns));
    }
    out.push_str("<h2>Runs</h2>\n");
    grid_table(
        &mut out,
        series.runs.iter().map(|r| {
            vec![
                ("run", r.run.to_string()),
                ("seed", r.seed.to_string()),
                ("folder", r.dir.clone().unwrap_or_else(|| "-".into())),
                ("request digest", r.request_digest.clone()),
            ]
        }),
    );
    page_end(&mut out, h);
    Ok(out)
}

/// One headline chart: a line per figure over the phases, each point the mean over the
/// runs with its interval; `None` when no phase has any of the figures.
fn headline(
    phases: &[SeriesPhase],
    id: &str,
    name: &str,
    unit: &str,
    keys: &[&str],
) -> Option<Panel> {
    let mut chart = Chart::new(&format!("{name} over {} runs", runs(phases)), "phase", unit);
    chart.x_names = phases.iter().map(|p| p.name.clone()).collect();
    chart.dots = true;
    let mut figures = Figures::new(&["", "mean", "95% CI", "CV"]);
    for (j, key) in keys.iter().enumerate() {
        // Figures of one phase sit a little apart, so their bars do not hide each other.
        let nudge = (j as f64 - (keys.len() - 1) as f64 / 2.0) * 0.08;
        let mut points = Vec::new();
        let mut errors = Vec::new();
        let mut label = None;
        for (i, p) in phases.iter().enumerate() {
            let Some(f) = p.figures.iter().find(|f| f.key == *key) else {
                continue;
            };
            label.get_or_insert_with(|| f.label.clone());
            let Some(s) = &f.spread else {
                continue;
            };
            points.push(((i + 1) as f64 + nudge, s.mean));
            errors.push((s.ci_low, s.ci_high));
            let row_name = if phases.len() > 1 {
                format!("{} ({})", f.label, p.name)
            } else {
                f.label.clone()
            };
            figures = figures.row(vec![
                row_name,
                num(s.mean),
                format!("{} to {}", num(s.ci_low), num(s.ci_high)),
                s.cv.map_or("-".into(), |cv| format!("{:.1}%", 100.0 * cv)),
            ]);
        }
        if !points.is_empty() {
            chart = chart.line_with_errors(&label.unwrap_or_default(), points, errors);
        }
    }
    (!chart.lines.is_empty()).then(|| Panel::new(id, chart, figures))
}

/// The most runs any phase had.
fn runs(phases: &[SeriesPhase]) -> usize {
    phases.iter().map(|p| p.runs).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::catalogue::Better;
    use crate::outputs::report::series::{FigureValue, RunFigures};
    use crate::outputs::report::RunHeader;

    fn run(n: u32, ttft: f64) -> RunFigures {
        let f = |key: &str, label: &str, v: f64| FigureValue {
            key: key.into(),
            label: label.into(),
            better: Better::Lower,
            value: Some(v),
        };
        RunFigures {
            run: n,
            seed: u64::from(n),
            dir: Some(format!("run-{n}")),
            request_digest: "abc".into(),
            phases: vec![(
                "only".into(),
                vec![
                    f("mean_ttft_ms", "Mean TTFT (ms)", ttft),
                    f("p99_ttft_ms", "P99 TTFT (ms)", 2.0 * ttft),
                ],
            )],
        }
    }

    #[test]
    fn the_means_carry_their_intervals_as_error_bars() {
        let series = RunSeries {
            header: RunHeader::default(),
            same_seed: false,
            cv_threshold: 0.1,
            runs: vec![run(1, 100.0), run(2, 110.0), run(3, 90.0)],
        };
        let html = render_series(&series).unwrap();
        // One chart: TTFT, the only headline the runs have.
        assert_eq!(html.matches("<svg").count(), 1, "{html}");
        assert!(html.contains("id=\"chart-repeat-ttft\""));
        // Mean 100, std 10, t(0.975, 2) = 4.303: 100 ± 24.84.
        assert!(
            html.contains("<td>Mean TTFT (ms)</td><td>100</td><td>75.2 to 125</td>"),
            "{html}"
        );
        let panels: Vec<Panel> = HEADLINES
            .iter()
            .filter_map(|&(id, n, u, k)| headline(&series.phases(), id, n, u, k))
            .collect();
        let line = &panels[0].chart.lines[0];
        // Mean, median and p99 of TTFT side by side around x = 1: the mean on the left.
        assert_eq!(line.points.len(), 1);
        assert!((line.points[0].0 - 0.92).abs() < 1e-9 && line.points[0].1 == 100.0);
        assert!((line.errors[0].0 - 75.16).abs() < 0.01, "{:?}", line.errors);
        assert!(html.contains("<td>run-3</td>"));
    }

    /// Issue 58: the page's header showed run 1's seed and digest for a three-seed series.
    #[test]
    fn the_header_names_every_seed_and_says_the_digests_differ() {
        let mut runs = vec![run(1, 100.0), run(2, 110.0), run(3, 90.0)];
        runs[1].request_digest = "def".into();
        let mut series = RunSeries {
            header: RunHeader {
                seed: 1,
                request_digest: Some("abc".into()),
                ..RunHeader::default()
            },
            same_seed: false,
            cv_threshold: 0.1,
            runs,
        };
        let html = render_series(&series).unwrap();
        assert!(
            html.contains("<tr><th>Seed</th><td>1, 2, 3 (one per run)</td></tr>"),
            "{html}"
        );
        assert!(
            html.contains("<tr><th>Request digest</th><td>differs per run"),
            "{html}"
        );
        assert!(!html.contains("sha256:abc"), "{html}");
        series.same_seed = true;
        series
            .runs
            .iter_mut()
            .for_each(|r| r.request_digest = "abc".into());
        let html = render_series(&series).unwrap();
        assert!(
            html.contains("<td>1 for every run (--same-seed)</td>"),
            "{html}"
        );
        assert!(html.contains("<td>sha256:abc (every run)</td>"), "{html}");
    }
}
