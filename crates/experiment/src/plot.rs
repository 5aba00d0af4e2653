//! The report's figure, drawn with `plotters` (SVG backend): anode's series and the same-run
//! baselines as solid lines with filled markers, the paper's as dashed lines with hollow
//! markers, one unit on the y axis.
//!
//! Contract: [`svg`] returns a complete SVG document for any outcome, also one with no
//! drawable point (then the axes are drawn over a unit range and the caption says so).

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use crate::outcome::{Outcome, Role};
use crate::paper::PaperExperiment;

/// A `Plot::paper_series` entry that matches no label: the paper's series from
/// paper-values.toml stay out of the figure (the outcome draws derived ones instead).
pub const NO_PAPER_SERIES: &str = "\u{0}";

/// One line to draw.
struct Line {
    label: String,
    points: Vec<(f64, f64)>,
    paper: bool,
    color: RGBColor,
}

const ANODE: [RGBColor; 4] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x17, 0xbe, 0xcf),
];
const BASE: [RGBColor; 3] = [
    RGBColor(0x55, 0x55, 0x55),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xbc, 0xbd, 0x22),
];
const PAPER: [RGBColor; 4] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x0f, 0x0f),
];

fn lines(o: &Outcome, paper: &PaperExperiment) -> Vec<Line> {
    let mut out = Vec::new();
    let (mut a, mut b) = (0, 0);
    let mut derived = 0;
    for s in o.series.iter().filter(|s| s.unit == o.plot.unit) {
        if s.role == Role::Paper {
            derived += 1;
            out.push(Line {
                label: format!("paper: {}", s.label),
                points: s.points.iter().map(|p| (p[0], p[1])).collect(),
                paper: true,
                color: PAPER[(derived - 1) % PAPER.len()],
            });
            continue;
        }
        let color = match s.role {
            Role::Anode => {
                a += 1;
                ANODE[(a - 1) % ANODE.len()]
            }
            Role::Baseline | Role::Paper => {
                b += 1;
                BASE[(b - 1) % BASE.len()]
            }
        };
        out.push(Line {
            label: s.label.clone(),
            points: s.points.iter().map(|p| (p[0], p[1])).collect(),
            paper: false,
            color,
        });
    }
    let wanted = |label: &str| {
        o.plot.paper_series.is_empty()
            || o.plot
                .paper_series
                .iter()
                .any(|p| label.starts_with(p.as_str()))
    };
    for (i, s) in paper
        .series
        .iter()
        .filter(|s| s.unit == o.plot.unit && wanted(&s.label))
        .enumerate()
    {
        out.push(Line {
            label: format!("paper: {} ({})", s.label, s.figure),
            points: s.points.iter().map(|p| (p[0], p[1])).collect(),
            paper: true,
            color: PAPER[(i + derived) % PAPER.len()],
        });
    }
    out
}

/// The range of the values, widened a little (and kept positive for a log axis).
fn span(v: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let v: Vec<f64> = v.filter(|x| x.is_finite() && (!log || *x > 0.0)).collect();
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return (if log { 1.0 } else { 0.0 }, 10.0);
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-9);
        ((lo - pad).min(0.0_f64.max(lo - pad)), hi + pad)
    }
}

/// The figure as an SVG document.
pub fn svg(o: &Outcome, paper: &PaperExperiment) -> Result<String, String> {
    let ls = lines(o, paper);
    let xs = span(
        ls.iter().flat_map(|l| l.points.iter().map(|p| p.0)),
        o.plot.log_x,
    );
    let ys = span(
        ls.iter().flat_map(|l| l.points.iter().map(|p| p.1)),
        o.plot.log_y,
    );
    let mut buf = String::new();
    {
        let height = CHART_HEIGHT + LEGEND_ROW * ls.len() as u32 + 16;
        let root = SVGBackend::with_string(&mut buf, (960, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (top, bottom) = root.split_vertically(CHART_HEIGHT);
        let (x, y) = ((xs.0..xs.1), (ys.0..ys.1));
        match (o.plot.log_x, o.plot.log_y) {
            (false, false) => draw(&top, o, &ls, x, y),
            (true, false) => draw(&top, o, &ls, x.log_scale(), y),
            (false, true) => draw(&top, o, &ls, x, y.log_scale()),
            (true, true) => draw(&top, o, &ls, x.log_scale(), y.log_scale()),
        }
        .map_err(|e| e.to_string())?;
        legend(&bottom, &ls).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(buf)
}

/// Height of the chart; the legend goes below it, one row per line, so it never hides data.
const CHART_HEIGHT: u32 = 560;
/// Height of one legend row.
const LEGEND_ROW: u32 = 22;

/// The legend under the chart: a swatch (solid with a filled marker for anode and the
/// baselines, dashed with a hollow one for the paper) and the label.
fn legend<'a>(
    area: &'a DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    ls: &[Line],
) -> Result<(), Box<dyn std::error::Error + 'a>> {
    let font = ("sans-serif", 14).into_font().color(&BLACK);
    for (i, l) in ls.iter().enumerate() {
        let y = 8 + (i as i32) * LEGEND_ROW as i32 + LEGEND_ROW as i32 / 2;
        let c = l.color;
        if l.paper {
            for k in 0..3 {
                area.draw(&PathElement::new(
                    vec![(90 + k * 12, y), (97 + k * 12, y)],
                    c.stroke_width(2),
                ))?;
            }
            area.draw(&Circle::new((108, y), 5, c.stroke_width(2)))?;
        } else {
            area.draw(&PathElement::new(
                vec![(90, y), (126, y)],
                c.stroke_width(2),
            ))?;
            area.draw(&Circle::new((108, y), 4, c.filled()))?;
        }
        area.draw(&Text::new(l.label.clone(), (140, y - 8), font.clone()))?;
    }
    Ok(())
}

fn draw<'a, X, Y>(
    root: &'a DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    o: &Outcome,
    ls: &[Line],
    x: X,
    y: Y,
) -> Result<(), Box<dyn std::error::Error + 'a>>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(&o.plot.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc(&o.plot.x_label)
        .y_desc(&o.plot.y_label)
        .light_line_style(RGBColor(0xf2, 0xf2, 0xf2))
        .x_label_formatter(&|v: &f64| crate::report::num(*v))
        .y_label_formatter(&|v: &f64| crate::report::num(*v))
        .draw()?;
    for l in ls {
        let style = l.color.stroke_width(2);
        let c = l.color;
        let pts = l.points.clone();
        if l.paper {
            chart.draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))?;
            chart.draw_series(
                pts.into_iter()
                    .map(move |p| Circle::new(p, 5, c.stroke_width(2))),
            )?;
        } else {
            chart
                .draw_series(LineSeries::new(pts.clone(), style))?
                .label(&l.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2))
                });
            chart.draw_series(pts.into_iter().map(move |p| Circle::new(p, 4, c.filled())))?;
        }
    }
    Ok(())
}
