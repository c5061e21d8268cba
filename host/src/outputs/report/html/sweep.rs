//! report.html's panels over the phases of a multi-phase run (vllm-sweep-results.txt's
//! curves): output throughput and TTFT against each phase's request rate, else its number
//! of prompts, else, where those repeat (phases of equal prompt count would fall on one
//! vertical line), the phase itself; beside each, every point's value.

use super::charts::{Chart, XScale};
use super::panel::{num, Figures, Panel};
use crate::measuring::metrics::catalogue::percentile_word;
use crate::measuring::metrics::PhaseSummary;

/// What the x axis of the curves is.
struct Axis {
    label: &'static str,
    /// One per phase; 1, 2 … n when by phase.
    xs: Vec<f64>,
    by_phase: bool,
}

/// The rates when every phase has its own, else the prompt counts when they differ, else
/// the phases in order.
fn axis(phases: &[PhaseSummary]) -> Axis {
    let distinct = |xs: &[f64]| {
        let mut r = xs.to_vec();
        r.sort_by(f64::total_cmp);
        r.dedup();
        r.len() == xs.len()
    };
    let rates: Vec<f64> = phases
        .iter()
        .filter_map(|s| s.request_rate.filter(|r| r.is_finite() && *r > 0.0))
        .collect();
    if rates.len() == phases.len() && distinct(&rates) {
        return Axis {
            label: "request rate (req/s)",
            xs: rates,
            by_phase: false,
        };
    }
    let prompts: Vec<f64> = phases
        .iter()
        .map(|s| (s.completed + s.failed) as f64)
        .collect();
    if distinct(&prompts) {
        return Axis {
            label: "number of prompts",
            xs: prompts,
            by_phase: false,
        };
    }
    Axis {
        label: "phase",
        xs: (1..=phases.len()).map(|i| i as f64).collect(),
        by_phase: true,
    }
}

/// Picks one value of a phase, if it has it.
type PhaseValue<'a> = &'a dyn Fn(&PhaseSummary) -> Option<f64>;

/// The two panels over the phases.
pub fn sweep_panels(phases: &[PhaseSummary]) -> Vec<Panel> {
    let axis = axis(phases);
    let positive = axis.xs.iter().all(|x| *x > 0.0);
    let (lo, hi) = axis.xs.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
        (lo.min(*x), hi.max(*x))
    });
    let scale = if !axis.by_phase && positive && hi / lo >= 8.0 {
        XScale::Log2
    } else {
        XScale::Linear
    };
    let tail = phases
        .iter()
        .all(|s| s.ttft.percentile(99.0).is_some())
        .then_some(99.0);
    let p_label = tail.map(|p| format!("P{} TTFT", percentile_word(p)));
    let mut ttft_lines: Vec<(&str, PhaseValue)> = vec![
        ("mean TTFT", &|s| Some(s.ttft.mean)),
        ("median TTFT", &|s| Some(s.ttft.median)),
    ];
    let p99 = |s: &PhaseSummary| s.ttft.percentile(99.0);
    if let Some(label) = &p_label {
        ttft_lines.push((label, &p99));
    }
    let throughput: Vec<(&str, PhaseValue)> =
        vec![("output tok/s", &|s| Some(s.output_throughput))];
    let mut panels = vec![
        panel(
            "sweep-throughput",
            "Output token throughput over phases",
            "tok/s",
            &throughput,
            phases,
            &axis,
        ),
        panel(
            "sweep-ttft",
            "TTFT over phases",
            "ms",
            &ttft_lines,
            phases,
            &axis,
        ),
    ];
    for p in &mut panels {
        p.chart.x_scale = scale;
        p.chart.dots = true;
    }
    panels
}

/// One panel: each line's value at each phase, and the table of them.
fn panel(
    id: &str,
    title: &str,
    unit: &str,
    lines: &[(&str, PhaseValue)],
    phases: &[PhaseSummary],
    axis: &Axis,
) -> Panel {
    let mut chart = Chart::new(title, axis.label, unit);
    if axis.by_phase {
        chart.x_names = phases.iter().map(|s| s.name.clone()).collect();
    }
    // By phase, the x value is the phase's place, which its name already gives.
    let mut head = vec!["phase"];
    if !axis.by_phase {
        head.push(axis.label);
    }
    head.extend(lines.iter().map(|(name, _)| *name));
    let mut figures = Figures::new(&head);
    for (s, x) in phases.iter().zip(&axis.xs) {
        let mut row = vec![s.name.clone()];
        if !axis.by_phase {
            row.push(if x.fract() == 0.0 {
                format!("{x:.0}")
            } else {
                num(*x)
            });
        }
        row.extend(lines.iter().map(|(_, f)| f(s).map_or("-".into(), num)));
        figures = figures.row(row);
    }
    for (name, f) in lines {
        let points = axis
            .xs
            .iter()
            .zip(phases)
            .filter_map(|(x, s)| f(s).map(|y| (*x, y)))
            .collect();
        chart = chart.line(name, points);
    }
    Panel::new(id, chart, figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(name: &str, completed: u64, rate: Option<f64>) -> PhaseSummary {
        use crate::measuring::metrics::{MetricsOptions, PhaseAccumulator, PhaseInfo};
        let mut s = PhaseAccumulator::new(&MetricsOptions::default()).summarize(&PhaseInfo {
            name: name.into(),
            duration_ns: 1_000_000_000,
            max_concurrency: None,
            request_rate: rate,
            burstiness: None,
            steady_window: None,
        });
        s.completed = completed;
        s
    }

    #[test]
    fn the_axis_is_the_rate_then_the_prompts_then_the_phase() {
        let rated = [phase("a", 8, Some(1.0)), phase("b", 8, Some(2.0))];
        assert_eq!(axis(&rated).label, "request rate (req/s)");
        let counted = [phase("a", 8, None), phase("b", 16, None)];
        assert_eq!(axis(&counted).xs, [8.0, 16.0]);
        // Equal prompt counts: one vertical line by count, so by phase.
        let equal = [
            phase("low", 8, None),
            phase("mid", 8, None),
            phase("high", 8, None),
        ];
        let a = axis(&equal);
        assert!(a.by_phase);
        assert_eq!(a.xs, [1.0, 2.0, 3.0]);
        let panels = sweep_panels(&equal);
        assert_eq!(panels[0].chart.x_names, ["low", "mid", "high"]);
        assert_eq!(panels[0].figures.rows.len(), 3);
        assert_eq!(panels[0].figures.head, ["phase", "output tok/s"]);
        assert_eq!(
            panels[0].figures.rows[1],
            ["mid".to_string(), "0.00".into()]
        );
        let by_count = sweep_panels(&counted);
        assert_eq!(by_count[0].figures.head[1], "number of prompts");
        assert_eq!(by_count[0].figures.rows[1][1], "16");
        let svg = panels[0].chart.to_svg().unwrap();
        assert!(svg.contains(">mid<") || svg.contains("\nmid\n"), "{svg}");
    }
}
