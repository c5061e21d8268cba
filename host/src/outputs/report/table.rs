//! Tables every format shares: the column sets of a phase, a tag and a target (title and
//! value of each cell), and the one aligner of text tables (with its markdown twin).

use crate::measuring::metrics::{PhaseSummary, TagSummary};

/// Column title and value of each phase, in order.
pub(crate) fn columns(s: &PhaseSummary) -> [(&'static str, String); 12] {
    let p99 = |d: &crate::measuring::metrics::Distribution| d.percentile(99.0).unwrap_or(0.0);
    [
        ("phase", s.name.clone()),
        ("completed", s.completed.to_string()),
        ("failed", s.failed.to_string()),
        ("duration_s", format!("{:.2}", s.duration_s)),
        ("request_throughput", format!("{:.2}", s.request_throughput)),
        ("output_throughput", format!("{:.2}", s.output_throughput)),
        ("mean_ttft_ms", format!("{:.2}", s.ttft.mean)),
        ("p99_ttft_ms", format!("{:.2}", p99(&s.ttft))),
        ("mean_tpot_ms", format!("{:.2}", s.tpot.mean)),
        ("mean_itl_ms", format!("{:.2}", s.itl.mean)),
        ("mean_e2el_ms", format!("{:.2}", s.e2el.mean)),
        ("peak_concurrency", format!("{:.2}", s.peak_concurrency)),
    ]
}

/// A column title of [`columns`] with its unit where its name carries none: the HTML and
/// markdown tables show these; CSV keeps result.json's names, which parsers read.
pub(crate) fn unit_title(title: &'static str) -> &'static str {
    match title {
        "request_throughput" => "request_throughput (req/s)",
        "output_throughput" => "output_throughput (tok/s)",
        "peak_concurrency" => "peak_concurrency (requests)",
        other => other,
    }
}

/// The phase's columns as the HTML and markdown tables title them ([`unit_title`]).
pub(crate) fn columns_with_units(s: &PhaseSummary) -> Vec<(&'static str, String)> {
    columns(s)
        .into_iter()
        .map(|(title, value)| (unit_title(title), value))
        .collect()
}

/// A cell of a markdown table row: a `|` or a line break in a name or tag would end the
/// cell or the row.
fn markdown_cell(text: &str) -> String {
    text.replace('|', "\\|")
        .replace("\r\n", " ")
        .replace(['\n', '\r'], " ")
        .replace(['\n', '\r'], " ")
}

/// Column title and value of each tag, in order.
pub fn tag_columns(t: &TagSummary) -> Vec<(&'static str, String)> {
    let mut row = vec![
        ("tag", t.tag.clone()),
        ("completed", t.completed.to_string()),
        ("failed", t.failed.to_string()),
    ];
    row.extend(latency_columns(t));
    row.insert(row.len() - 1, ("p50_e2el_ms", percentile(&t.e2el, 50.0)));
    row
}

/// Column title and value of a target's row; `urls` are the run's targets by index (no
/// `url` column without them: the text report's header lists them).
pub fn target_columns(t: &TagSummary, urls: &[String]) -> Vec<(&'static str, String)> {
    let mut row = vec![("target", t.tag.clone())];
    if !urls.is_empty() {
        let url = index_of(t).and_then(|i| urls.get(i)).cloned();
        row.push(("url", url.unwrap_or_default()));
    }
    row.extend([
        ("completed", t.completed.to_string()),
        ("failed", t.failed.to_string()),
        ("cancelled", t.cancelled.to_string()),
    ]);
    row.extend(latency_columns(t));
    row
}

/// A row's target index (its `tag` is the index written out).
pub fn index_of(t: &TagSummary) -> Option<usize> {
    t.tag.parse().ok()
}

/// The columns a tag's row and a target's share: mean tokens, then TTFT, TPOT and E2EL
/// (mean and the percentiles the tables show; the tag table adds E2EL's median).
fn latency_columns(t: &TagSummary) -> [(&'static str, String); 9] {
    [
        ("mean_input_tokens", format!("{:.1}", t.mean_input_tokens)),
        ("mean_output_tokens", format!("{:.1}", t.mean_output_tokens)),
        ("mean_ttft_ms", format!("{:.2}", t.ttft.mean)),
        ("p50_ttft_ms", percentile(&t.ttft, 50.0)),
        ("p99_ttft_ms", percentile(&t.ttft, 99.0)),
        ("mean_tpot_ms", format!("{:.2}", t.tpot.mean)),
        ("p99_tpot_ms", percentile(&t.tpot, 99.0)),
        ("mean_e2el_ms", format!("{:.2}", t.e2el.mean)),
        ("p99_e2el_ms", percentile(&t.e2el, 99.0)),
    ]
}

fn percentile(d: &crate::measuring::metrics::Distribution, p: f64) -> String {
    format!("{:.2}", d.percentile(p).unwrap_or(0.0))
}

/// The widest a cell of an aligned text table is shown.
const MAX_CELL_CHARS: usize = 120;

/// `text` cut to [`MAX_CELL_CHARS`] for an aligned column (a name or tag may be any length;
/// a format width must stay far below u16::MAX).
fn cut_cell(text: &str) -> String {
    if text.chars().count() <= MAX_CELL_CHARS {
        return text.to_string();
    }
    text.chars().take(MAX_CELL_CHARS - 1).chain(['…']).collect()
}

/// Rows of (column title, value) as aligned text columns, the first left-aligned, the
/// others right-aligned (nothing without rows).
pub(crate) fn aligned_table(rows: Vec<Vec<(&'static str, String)>>) -> String {
    let Some(first) = rows.first() else {
        return String::new();
    };
    let titles = first.iter().map(|c| c.0.to_string()).collect();
    let values = rows
        .into_iter()
        .map(|r| r.into_iter().map(|c| c.1).collect())
        .collect();
    aligned(titles, values, false)
}

/// The one text-table aligner: `titles` and each row of `rows` as columns as wide as their
/// widest cell, the first left-aligned, the others right-aligned, two spaces apart, no
/// trailing space; with `ruler`, a line of `-` as wide as the table under the titles.
pub(crate) fn aligned(titles: Vec<String>, mut rows: Vec<Vec<String>>, ruler: bool) -> String {
    // A column is as wide as its widest cell, and a format width must stay far below
    // u16::MAX: a scenario's tag may be any length, so long ones are cut for display.
    for cell in rows.iter_mut().flat_map(|r| r.iter_mut()) {
        if cell.chars().count() > MAX_CELL_CHARS {
            *cell = cut_cell(cell);
        }
    }
    let widths: Vec<usize> = (0..titles.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([titles[c].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (v, &w))| {
                if c == 0 {
                    format!("{v:<w$}")
                } else {
                    format!("{v:>w$}")
                }
            })
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(&titles);
    if ruler {
        let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
        out += &line(&["-".repeat(total)]);
    }
    for r in &rows {
        out += &line(r);
    }
    out
}

/// Rows of (column title, value) as a markdown table (nothing without rows).
pub(crate) fn markdown_table(rows: Vec<Vec<(&'static str, String)>>) -> String {
    let mut out = String::new();
    let Some(first) = rows.first() else {
        return out;
    };
    let titles: Vec<&str> = first.iter().map(|c| c.0).collect();
    out.push_str(&format!("| {} |\n", titles.join(" | ")));
    out.push_str(&format!("|{}\n", ["---|"].repeat(titles.len()).concat()));
    for row in rows {
        let cells: Vec<String> = row.into_iter().map(|c| markdown_cell(&c.1)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::{MetricsOptions, PhaseAccumulator, PhaseInfo};
    use crate::outputs::report::csv::{csv_field, phase_table as render_phase_table_csv};

    fn render_phase_table_markdown(phases: &[PhaseSummary]) -> String {
        markdown_table(phases.iter().map(|s| columns(s).to_vec()).collect())
    }

    fn render_tag_table_text(tags: &[TagSummary]) -> String {
        aligned_table(tags.iter().map(tag_columns).collect())
    }

    fn render_tag_table_markdown(tags: &[TagSummary]) -> String {
        markdown_table(tags.iter().map(tag_columns).collect())
    }

    #[test]
    fn a_csv_cell_is_never_a_formula_nor_a_terminal_command() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(
            csv_field("=HYPERLINK(\"http://x\",\"y\")"),
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\""
        );
        for lead in ["+1+cmd", "-cmd", "@SUM(A1)"] {
            assert_eq!(csv_field(lead), format!("'{lead}"));
        }
        // Numbers stay numbers.
        assert_eq!(csv_field("-1.5"), "-1.5");
        assert_eq!(csv_field("+3"), "+3");
        // A line break cannot start a row; ESC, BEL and RLO are written visibly.
        assert_eq!(csv_field("a\nb"), "a\\u{a}b");
        assert_eq!(
            csv_field("\u{1b}[2J\u{7}\u{202e}x"),
            "\\u{1b}[2J\\u{7}\\u{202e}x"
        );
    }

    fn phase(name: &str) -> PhaseSummary {
        let acc = PhaseAccumulator::new(&MetricsOptions::default());
        acc.summarize(&PhaseInfo {
            name: name.into(),
            duration_ns: 2_000_000_000,
            max_concurrency: None,
            request_rate: None,
            burstiness: None,
            steady_window: None,
        })
    }

    #[test]
    fn markdown_and_csv_have_a_row_per_phase() {
        let phases = [phase("1 prompts"), phase("a, \"b\" | c")];
        let md = render_phase_table_markdown(&phases);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("| phase | completed | failed | duration_s |"));
        assert_eq!(lines[1].matches("---|").count(), 12);
        assert!(
            lines[3].starts_with("| a, \"b\" \\| c | 0 | 0 | 2.00 |"),
            "{}",
            lines[3]
        );
        let csv = render_phase_table_csv(&phases);
        let rows: Vec<&str> = csv.lines().collect();
        assert_eq!(rows[0].split(',').count(), 12);
        assert!(rows[1].starts_with("1 prompts,0,0,2.00,"));
        assert!(
            rows[2].starts_with("\"a, \"\"b\"\" | c\",0,0,2.00,"),
            "{}",
            rows[2]
        );
    }

    #[test]
    fn the_tag_table_has_a_row_per_tag_and_nothing_without_tags() {
        use crate::measuring::metrics::Distribution;
        let latency = |mean: f64| Distribution {
            count: 2,
            mean,
            median: mean,
            percentiles: vec![(50.0, mean), (99.0, mean + 1.0)],
            ..Distribution::default()
        };
        let tag = |name: &str, input: f64| TagSummary {
            tag: name.into(),
            completed: 2,
            failed: 1,
            cancelled: 0,
            ttft: latency(10.0),
            tpot: latency(2.0),
            e2el: latency(30.0),
            mean_input_tokens: input,
            mean_output_tokens: 8.0,
        };
        assert_eq!(render_tag_table_text(&[]), "");
        assert_eq!(render_tag_table_markdown(&[]), "");
        let tags = [tag("turn-1", 24.0), tag("turn-10 | x", 1234.5)];
        let text = render_tag_table_text(&tags);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].starts_with("tag          completed  failed  mean_input_tokens"),
            "{text}"
        );
        assert!(
            lines[1].starts_with("turn-1               2       1               24.0"),
            "{text}"
        );
        assert!(lines[2].ends_with("30.00        31.00"), "{text}");
        let md = render_tag_table_markdown(&tags);
        let rows: Vec<&str> = md.lines().collect();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[1].matches("---|").count(), 13);
        assert!(
            rows[3].starts_with("| turn-10 \\| x | 2 | 1 | 1234.5 | 8.0 | 10.00 | 10.00 | 11.00 |"),
            "{md}"
        );
    }

    #[test]
    fn a_line_break_or_a_long_name_cannot_break_a_table() {
        assert_eq!(markdown_cell("a|b\nc\r\nd"), "a\\|b c d");
        let long = "t".repeat(70_000);
        let cut = cut_cell(&long);
        assert_eq!(cut.chars().count(), MAX_CELL_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(cut_cell("short"), "short");
    }
}
