//! `runner compare A B … --headline`: one table, one row per phase of the first result,
//! of the two figures GPUStack's A/B tables give each profile (total token throughput and
//! mean TPOT), every later result's with its change in % against the first: the shape of
//! the table in GPUStack's "Optimizing Qwen3.5-9B Throughput".

use serde_json::{Map, Value};

use super::LoadedResult;

/// The figures of each row: JSON key, column title.
const FIGURES: [(&str, &str); 2] = [
    ("total_token_throughput", "Total TPS"),
    ("mean_tpot_ms", "Mean TPOT (ms)"),
];

/// `phase`'s figure `key` in `l`, if `l` has that phase and that figure.
fn figure(l: &LoadedResult, phase: &str, key: &str) -> Option<f64> {
    let (_, p): &(String, Map<String, Value>) = l.phases.iter().find(|(n, _)| n == phase)?;
    p.get(key)?.as_f64()
}

/// `+2.09%`; `n/a` against a zero or a missing value.
fn change(base: Option<f64>, value: f64) -> String {
    match base {
        Some(b) if b != 0.0 => format!("{:+.2}%", 100.0 * (value - b) / b),
        _ => "n/a".to_string(),
    }
}

/// Each figure of `l` in `phase`, with its change against `base` unless `l` is the base.
fn cells(base: &LoadedResult, l: &LoadedResult, phase: &str, with_change: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (key, _) in FIGURES {
        let value = figure(l, phase, key);
        out.push(value.map_or_else(|| "-".to_string(), |v| format!("{v:.2}")));
        if with_change {
            out.push(
                value.map_or_else(|| "-".to_string(), |v| change(figure(base, phase, key), v)),
            );
        }
    }
    out
}

/// The table as aligned text, or as markdown in the reference's layout (one cell per
/// result holding both figures).
pub fn table(loaded: &[LoadedResult], markdown: bool) -> String {
    let Some(base) = loaded.first() else {
        return String::new();
    };
    let phases: Vec<&str> = base.phases.iter().map(|(n, _)| n.as_str()).collect();
    if markdown {
        return markdown_table(loaded, &phases);
    }
    let mut titles = vec!["profile".to_string()];
    for (i, l) in loaded.iter().enumerate() {
        for (_, title) in FIGURES {
            titles.push(format!("{} {title}", l.label));
            if i > 0 {
                titles.push("change".into());
            }
        }
    }
    let rows = phases
        .iter()
        .map(|phase| {
            let mut row = vec![phase.to_string()];
            for (i, l) in loaded.iter().enumerate() {
                row.extend(cells(base, l, phase, i > 0));
            }
            row
        })
        .collect();
    crate::outputs::report::table::aligned(titles, rows, true)
}

fn markdown_table(loaded: &[LoadedResult], phases: &[&str]) -> String {
    let esc = |s: &str| s.replace('|', "\\|");
    let labels: Vec<String> = loaded.iter().map(|l| esc(&l.label)).collect();
    let mut out = format!(
        "| Benchmark Case | {} |\n|---|{}\n",
        labels.join(" | "),
        "---|".repeat(loaded.len())
    );
    for phase in phases {
        let results: Vec<String> = loaded
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let c = cells(&loaded[0], l, phase, i > 0);
                match c.as_slice() {
                    [tps, tpot] => format!("Total TPS: {tps}<br>Mean TPOT(ms): {tpot}"),
                    [tps, d_tps, tpot, d_tpot] => {
                        format!("Total TPS: {tps} ({d_tps})<br>Mean TPOT(ms): {tpot} ({d_tpot})")
                    }
                    _ => String::new(),
                }
            })
            .collect();
        out += &format!("| **{}** | {} |\n", esc(phase), results.join(" | "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(label: &str, phases: &[(&str, f64, f64)]) -> LoadedResult {
        let phases = phases
            .iter()
            .map(|(name, tps, tpot)| {
                let o = json!({"total_token_throughput": tps, "mean_tpot_ms": tpot});
                (name.to_string(), o.as_object().cloned().unwrap_or_default())
            })
            .collect();
        LoadedResult {
            label: label.into(),
            path: label.into(),
            phases,
            runner: None,
            vllm: false,
            runs: None,
        }
    }

    #[test]
    fn the_table_has_a_row_per_profile_and_the_change_of_each_figure() {
        // Two rows of the reference's table.
        let a = result(
            "baseline",
            &[
                ("ShareGPT", 11527.14, 15.12),
                ("Throughput", 29822.16, 34.63),
            ],
        );
        let b = result(
            "tuned",
            &[
                ("ShareGPT", 11768.22, 15.85),
                ("Throughput", 34470.14, 36.97),
            ],
        );
        let text = table(&[a, b], false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("profile") && lines[0].contains("tuned Total TPS"));
        assert!(lines[2].starts_with("ShareGPT"), "{text}");
        assert!(
            lines[2].contains("11768.22") && lines[2].contains("+2.09%"),
            "{text}"
        );
        assert!(
            lines[3].contains("+15.59%") && lines[3].contains("+6.76%"),
            "{text}"
        );
        let a = result("baseline", &[("ShareGPT", 11527.14, 15.12)]);
        let b = result("tuned", &[]);
        let md = table(&[a, b], true);
        assert!(
            md.contains(
                "| **ShareGPT** | Total TPS: 11527.14<br>Mean TPOT(ms): 15.12 | Total TPS: - (-)"
            ),
            "{md}"
        );
    }
}
