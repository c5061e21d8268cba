//! A chart with the numbers it shows beside it: one `<figure>` holding the SVG and a
//! small table, with an id a reader (or a test) can find it by. A chart alone shows a
//! shape; the figures beside it are what people quote.

use std::fmt::Write as _;

use super::charts::{Chart, ChartError};
use super::escape::escape;

/// A small table: column titles, then rows whose first cell names the row.
#[derive(Debug, Default, PartialEq)]
pub struct Figures {
    pub head: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Figures {
    pub fn new(head: &[&str]) -> Figures {
        Figures {
            head: head.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(mut self, cells: Vec<String>) -> Figures {
        self.rows.push(cells);
        self
    }

    fn to_html(&self, out: &mut String) {
        if self.rows.is_empty() {
            out.push_str("<p class=\"muted\">no values</p>");
            return;
        }
        out.push_str("<table class=\"figures\"><tr>");
        for h in &self.head {
            let _ = write!(out, "<th>{}</th>", escape(h));
        }
        out.push_str("</tr>\n");
        for row in &self.rows {
            out.push_str("<tr>");
            for cell in row {
                let _ = write!(out, "<td>{}</td>", escape(cell));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>");
    }
}

/// A chart, its id (`chart-…`) and its figures.
pub struct Panel {
    pub id: String,
    pub chart: Chart,
    pub figures: Figures,
}

impl Panel {
    pub fn new(id: &str, chart: Chart, figures: Figures) -> Panel {
        Panel {
            id: format!("chart-{id}"),
            chart,
            figures,
        }
    }

    /// `<figure id=…>` with the SVG and, right under it in the same box, the table (two
    /// panels side by side fit a 1200-pixel page; a table to the chart's right would not).
    pub fn to_html(&self) -> Result<String, ChartError> {
        let mut out = format!("<figure class=\"panel\" id=\"{}\">", escape(&self.id));
        out.push_str(&self.chart.to_svg()?);
        self.figures.to_html(&mut out);
        out.push_str("</figure>\n");
        Ok(out)
    }
}

/// Writes each panel into `out`.
pub fn push_all(out: &mut String, panels: &[Panel]) -> Result<(), ChartError> {
    for p in panels {
        out.push_str(&p.to_html()?);
    }
    Ok(())
}

/// A number as a table beside a chart shows it: three significant figures or so, whole
/// numbers from 100 up.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    match v.abs() {
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 10.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}

/// Each line's mean, median and peak over its points' values (a series over time: the
/// mean over the timeline's bins, its median bin, its busiest bin).
pub fn over_points(chart: &Chart) -> Figures {
    let mut f = Figures::new(&["", "mean", "median", "peak"]);
    for line in &chart.lines {
        let mut ys: Vec<f64> = line
            .points
            .iter()
            .map(|p| p.1)
            .filter(|y| y.is_finite())
            .collect();
        if ys.is_empty() {
            continue;
        }
        ys.sort_by(f64::total_cmp);
        let mean = ys.iter().sum::<f64>() / ys.len() as f64;
        let median = ys[ys.len() / 2];
        let peak = ys[ys.len() - 1];
        f = f.row(vec![line.name.clone(), num(mean), num(median), num(peak)]);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panel_is_one_figure_with_its_svg_and_table() {
        let chart = Chart::new("t", "x", "y").line("a <b>", vec![(0.0, 1.0), (1.0, 3.0)]);
        let figures = over_points(&chart);
        assert_eq!(
            figures.rows,
            vec![vec![
                "a <b>".to_string(),
                "2.00".into(),
                "3.00".into(),
                "3.00".into()
            ]]
        );
        let html = Panel::new("x", chart, figures).to_html().unwrap();
        assert!(html.starts_with("<figure class=\"panel\" id=\"chart-x\"><svg"));
        assert!(html.contains("<td>a &lt;b&gt;</td><td>2.00</td>"), "{html}");
        assert!(html.trim_end().ends_with("</table></figure>"));
    }

    #[test]
    fn numbers_keep_about_three_figures() {
        assert_eq!(num(1234.5), "1234");
        assert_eq!(num(12.345), "12.3");
        assert_eq!(num(0.1234), "0.12");
        assert_eq!(num(f64::NAN), "-");
    }
}
