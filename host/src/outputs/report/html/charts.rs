//! Line charts as inline SVG (plotters' SVG backend: text stays text, no fonts are loaded,
//! nothing is fetched when the page is viewed).

use plotters::prelude::*;

const WIDTH: u32 = 560;
const HEIGHT: u32 = 330;

/// Line colours, one per series (Tableau 10, then two more).
const PALETTE: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 128),
    RGBColor(128, 0, 0),
];

#[derive(Debug, thiserror::Error)]
#[error("cannot draw the chart `{chart}`: {message}")]
pub struct ChartError {
    chart: String,
    message: String,
}

/// One line of a chart.
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Each point's interval (low, high), drawn as a vertical error bar: the 95 %
    /// confidence interval of a mean over repeated runs. Empty: no bars.
    pub errors: Vec<(f64, f64)>,
}

/// How the x axis reads.
#[derive(Clone, Copy, PartialEq)]
pub enum XScale {
    Linear,
    /// Values are drawn at log2(x) and labelled with x (a sweep over 1, 2, 4 … prompts).
    Log2,
}

/// A chart: title, axis names, lines, and vertical markers (phase boundaries).
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<Line>,
    pub x_scale: XScale,
    /// Vertical rules at these x values (phase starts), drawn light.
    pub markers: Vec<f64>,
    /// Draw each point as a dot too (few points, as in a sweep).
    pub dots: bool,
    /// Shaded spans of x (each phase's steady-state window), drawn under the lines.
    pub bands: Vec<(f64, f64)>,
    /// The x axis ends here, the lines cut at it (a CDF clipped at its p99.9, so one
    /// outlier does not squeeze the rest into the left edge).
    pub x_max: Option<f64>,
    /// The x axis spans this, whatever the lines cover (charts over one timeline line up).
    pub x_span: Option<(f64, f64)>,
    /// Points only, no lines between them (one dot per request).
    pub scatter: bool,
    /// The x axis is by phase: x = 1, 2 … n, each tick named by its phase (phases of
    /// equal prompt counts would otherwise fall on one vertical line). Empty: numbers.
    pub x_names: Vec<String>,
    /// The x values are counts (a turn index): ticks are labelled at whole numbers only.
    pub x_integers: bool,
}

impl Chart {
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            lines: Vec::new(),
            x_scale: XScale::Linear,
            markers: Vec::new(),
            dots: false,
            bands: Vec::new(),
            x_max: None,
            x_span: None,
            scatter: false,
            x_names: Vec::new(),
            x_integers: false,
        }
    }

    pub fn line(self, name: &str, points: Vec<(f64, f64)>) -> Chart {
        self.line_with_errors(name, points, Vec::new())
    }

    /// A line whose points carry intervals (`errors`, one per point).
    pub fn line_with_errors(
        mut self,
        name: &str,
        points: Vec<(f64, f64)>,
        errors: Vec<(f64, f64)>,
    ) -> Chart {
        self.lines.push(Line {
            name: name.into(),
            points,
            errors,
        });
        self
    }

    fn error(&self, e: &dyn std::fmt::Display) -> ChartError {
        ChartError {
            chart: self.title.clone(),
            message: e.to_string(),
        }
    }

    /// `x` on the chart's x scale.
    fn tx(&self, x: f64) -> f64 {
        match self.x_scale {
            XScale::Linear => x,
            XScale::Log2 => x.max(1e-9).log2(),
        }
    }

    /// A line's finite points, on the chart's x scale; past `x_max`, the line ends at it
    /// with the value it had there.
    fn points(&self, line: &Line) -> Vec<(f64, f64)> {
        let finite = line
            .points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite());
        let Some(max) = self.x_max else {
            return finite.map(|&(x, y)| (self.tx(x), y)).collect();
        };
        let mut out: Vec<(f64, f64)> = Vec::new();
        for &(x, y) in finite {
            if x > max {
                if let Some(&(_, last)) = out.last() {
                    out.push((self.tx(max), last));
                }
                break;
            }
            out.push((self.tx(x), y));
        }
        out
    }

    /// The chart as an `<svg>` element.
    pub fn to_svg(&self) -> Result<String, ChartError> {
        let all: Vec<(f64, f64)> = self.lines.iter().flat_map(|l| self.points(l)).collect();
        let (x0, x1) = match self.x_span {
            Some((a, b)) if b > a => (self.tx(a), self.tx(b)),
            _ if !self.x_names.is_empty() => (0.5, self.x_names.len() as f64 + 0.5),
            _ => padded(all.iter().map(|p| p.0), false),
        };
        let bars = self.lines.iter().flat_map(|l| &l.errors);
        let ys = || {
            all.iter()
                .map(|p| p.1)
                .chain(bars.clone().flat_map(|e| [e.0, e.1]))
        };
        let (_, y1) = padded(ys().filter(|y| y.is_finite()), true);
        let y0 = ys().filter(|y| y.is_finite()).fold(0.0f64, f64::min);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| self.error(&e))?;
            let mut chart = ChartBuilder::on(&root)
                .caption(&self.title, ("sans-serif", 17))
                .margin(12)
                .x_label_area_size(42)
                .y_label_area_size(62)
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(|e| self.error(&e))?;
            self.draw_mesh(&mut chart, x1 - x0, y1 - y0)?;
            self.draw_lines(&mut chart, (x0, x1), (y0, y1))?;
            root.present().map_err(|e| self.error(&e))?;
        }
        Ok(svg)
    }

    /// Axes, grid and labels.
    fn draw_mesh(&self, chart: &mut Plot, x_span: f64, y_span: f64) -> Result<(), ChartError> {
        let scale = self.x_scale;
        let names = &self.x_names;
        let integers = self.x_integers;
        let x_fmt = move |v: &f64| match scale {
            _ if !names.is_empty() => phase_tick(names, *v),
            XScale::Linear if integers && (v - v.round()).abs() > 1e-6 => String::new(),
            XScale::Linear => short(*v, x_span),
            XScale::Log2 => short(v.exp2(), v.exp2()),
        };
        let y_fmt = move |v: &f64| short(*v, y_span);
        let x_ticks = if self.x_integers {
            // No more ticks than whole numbers on the axis, so they fall on them.
            (x_span.floor() as usize + 1).clamp(2, 8)
        } else if names.is_empty() {
            8
        } else {
            names.len().clamp(2, 30)
        };
        chart
            .configure_mesh()
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .x_labels(x_ticks)
            .y_labels(6)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .light_line_style(RGBColor(238, 238, 238))
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 13))
            .draw()
            .map_err(|e| self.error(&e))
    }

    /// The bands and markers, then each line (with dots and error bars if asked) and the
    /// legend.
    fn draw_lines<'a, 'b: 'a>(
        &self,
        chart: &mut Plot<'a, 'b>,
        (x0, x1): (f64, f64),
        (y0, y1): (f64, f64),
    ) -> Result<(), ChartError> {
        for &(a, b) in &self.bands {
            let (a, b) = (self.tx(a).max(x0), self.tx(b).min(x1));
            if b > a {
                chart
                    .draw_series([Rectangle::new(
                        [(a, y0), (b, y1)],
                        RGBColor(44, 160, 44).mix(0.12).filled(),
                    )])
                    .map_err(|e| self.error(&e))?;
            }
        }
        for &m in &self.markers {
            let x = self.tx(m);
            if x > x0 && x < x1 {
                chart
                    .draw_series(LineSeries::new(
                        [(x, y0), (x, y1)],
                        RGBColor(110, 110, 110).stroke_width(2),
                    ))
                    .map_err(|e| self.error(&e))?;
            }
        }
        for (i, line) in self.lines.iter().enumerate() {
            self.draw_line(chart, line, PALETTE[i % PALETTE.len()])?;
        }
        if self.lines.len() > 1 {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(180, 180, 180))
                .label_font(("sans-serif", 11))
                .draw()
                .map_err(|e| self.error(&e))?;
        }
        Ok(())
    }

    /// One line: its path (none for a scatter), its dots, its error bars, its legend entry.
    fn draw_line<'a, 'b: 'a>(
        &self,
        chart: &mut Plot<'a, 'b>,
        line: &Line,
        color: RGBColor,
    ) -> Result<(), ChartError> {
        let pts = self.points(line);
        let path = if self.scatter {
            Vec::new()
        } else {
            pts.clone()
        };
        chart
            .draw_series(LineSeries::new(path, color.stroke_width(2)))
            .map_err(|e| self.error(&e))?
            .label(line.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        if self.dots || self.scatter {
            let radius = if self.scatter { 2 } else { 3 };
            let style = if self.scatter {
                color.mix(0.6).filled()
            } else {
                color.filled()
            };
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, radius, style)))
                .map_err(|e| self.error(&e))?;
        }
        let bars = line.points.iter().zip(&line.errors);
        let bars =
            bars.filter(|((x, y), (lo, hi))| [*x, *y, *lo, *hi].iter().all(|v| v.is_finite()));
        chart
            .draw_series(bars.map(|(&(x, y), &(lo, hi))| {
                ErrorBar::new_vertical(self.tx(x), lo, y, hi, color.stroke_width(2), 10)
            }))
            .map_err(|e| self.error(&e))?;
        Ok(())
    }
}

/// The tick label at `v` of an x axis by phase: the phase's name at whole numbers (cut
/// to a tick's width), nothing between them.
fn phase_tick(names: &[String], v: f64) -> String {
    let i = v.round();
    if (v - i).abs() > 1e-6 || i < 1.0 || i > names.len() as f64 {
        return String::new();
    }
    let name = &names[i as usize - 1];
    if name.chars().count() <= 14 {
        name.clone()
    } else {
        let cut: String = name.chars().take(13).collect();
        format!("{cut}…")
    }
}

/// The drawing area of a chart: linear f64 axes on the SVG backend.
type Plot<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// A range over `values` with a little room; `from_zero` starts it at 0 for positive data.
fn padded(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let lo = if from_zero { lo.min(0.0) } else { lo };
    let span = hi - lo;
    if span <= 0.0 {
        let pad = if hi == 0.0 { 1.0 } else { hi.abs() * 0.1 };
        return (lo - if from_zero { 0.0 } else { pad }, hi + pad);
    }
    let pad = span * 0.05;
    (if from_zero { lo } else { lo - pad }, hi + pad)
}

/// A tick label on an axis spanning `span`: as many decimals as ticks a tenth of the span
/// apart need, no trailing zeros, k/M for large values.
fn short(v: f64, span: f64) -> String {
    let a = v.abs().max(span.abs());
    let (x, unit, suffix) = if a >= 1e6 {
        (v / 1e6, 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, 1e3, "k")
    } else {
        (v, 1.0, "")
    };
    let step = span.abs() / unit / 10.0;
    let decimals = if step > 0.0 && step.is_finite() {
        ((-step.log10()).ceil() + 1.0).clamp(0.0, 6.0) as usize
    } else {
        3
    };
    let text = format!("{x:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_is_one_svg_with_its_texts() {
        let svg = Chart::new("TTFT <CDF>", "ms", "fraction")
            .line("1 prompts", vec![(1.0, 0.0), (2.0, 1.0)])
            .line("2 prompts", vec![(1.5, 0.0), (3.0, 1.0)])
            .to_svg()
            .unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        assert_eq!(svg.matches("<svg").count(), 1);
        assert!(svg.contains("TTFT &lt;CDF&gt;"));
        assert!(svg.contains("2 prompts"));
        assert!(svg.contains("<polyline"));
    }

    #[test]
    fn empty_and_flat_charts_still_draw() {
        assert!(Chart::new("empty", "x", "y").to_svg().is_ok());
        let flat = Chart::new("flat", "x", "y").line("a", vec![(1.0, 5.0)]);
        assert!(flat.to_svg().is_ok());
        let mut log =
            Chart::new("sweep", "prompts", "tok/s").line("a", vec![(1.0, 1.0), (2048.0, 9.0)]);
        log.x_scale = XScale::Log2;
        log.dots = true;
        let svg = log.to_svg().unwrap();
        assert!(svg.contains("\n1024\n"), "{svg}");
    }

    #[test]
    fn a_line_past_x_max_ends_at_it_and_bands_are_shaded() {
        let mut chart = Chart::new("cut", "ms", "fraction").line(
            "a",
            vec![
                (1.0, 0.0),
                (1.0, 0.5),
                (2.0, 0.5),
                (2.0, 0.9),
                (900.0, 0.9),
                (900.0, 1.0),
            ],
        );
        chart.x_max = Some(3.0);
        let line = &chart.lines[0];
        assert_eq!(
            chart.points(line),
            vec![(1.0, 0.0), (1.0, 0.5), (2.0, 0.5), (2.0, 0.9), (3.0, 0.9)]
        );
        let plain = chart.to_svg().unwrap();
        chart.bands = vec![(1.5, 2.5)];
        let shaded = chart.to_svg().unwrap();
        assert_eq!(
            shaded.matches("<rect").count(),
            plain.matches("<rect").count() + 1,
            "{shaded}"
        );
    }

    #[test]
    fn intervals_are_error_bars_and_phase_ticks_are_names() {
        let mut chart = Chart::new("repeat", "phase", "ms").line_with_errors(
            "mean",
            vec![(1.0, 10.0), (2.0, 12.0)],
            vec![(9.0, 11.0), (f64::NAN, 13.0)],
        );
        chart.x_names = vec!["a".into(), "a rather long phase name".into()];
        let svg = chart.to_svg().unwrap();
        // One bar (stem and two caps); the one with a bound that is no number is left out.
        assert_eq!(
            svg.matches("<line opacity=\"1\" stroke=\"#1F77B4\"")
                .count(),
            3
        );
        assert_eq!(phase_tick(&chart.x_names, 1.0), "a");
        assert_eq!(phase_tick(&chart.x_names, 2.0), "a rather long…");
        assert_eq!(phase_tick(&chart.x_names, 1.5), "");
        assert_eq!(phase_tick(&chart.x_names, 3.0), "");
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(short(0.0, 100.0), "0");
        assert_eq!(short(2.5, 10.0), "2.5");
        assert_eq!(short(0.126, 1.0), "0.13");
        assert_eq!(short(12.34, 50.0), "12.3");
        assert_eq!(short(10.004, 0.03), "10.004");
        assert_eq!(short(9.99, 0.03), "9.99");
        assert_eq!(short(25000.0, 60000.0), "25k");
        assert_eq!(short(2_500_000.0, 1e7), "2.5M");
        assert_eq!(short(2048.0, 2048.0), "2048");
    }
}
