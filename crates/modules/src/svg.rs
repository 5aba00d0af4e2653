//! A small SVG line chart (bandwidth over time), written without dependencies.

use std::fmt::Write;

/// One series: a label, a colour, and (x, y) points.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// CSS colour.
    pub color: String,
    /// Points.
    pub points: Vec<(f64, f64)>,
}

/// Renders a line chart with axes, grid, vertical event markers and a legend.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    markers: &[(f64, String)],
) -> String {
    let (w, h) = (860.0, 440.0);
    let (l, r, t, b) = (70.0, 20.0, 40.0, 60.0);
    let xmax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0f64, f64::max);
    let ymax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(1.0f64, f64::max);
    let ymax = (ymax / 5.0).ceil() * 5.0;
    let sx = |x: f64| l + x / xmax * (w - l - r);
    let sy = |y: f64| h - b - y / ymax * (h - t - b);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{title}</text>"#,
        w / 2.0
    );
    for i in 0..=5 {
        let y = ymax * f64::from(i) / 5.0;
        let (x2, yy, tx, ty) = (w - r, sy(y), l - 6.0, sy(y) + 4.0);
        let _ = writeln!(
            o,
            r##"<line x1="{l}" x2="{x2}" y1="{yy:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{tx}" y="{ty:.1}" text-anchor="end">{y:.0}</text>"##
        );
    }
    let step = if xmax > 20.0 { 5.0 } else { 1.0 };
    let mut x = 0.0;
    while x <= xmax + 1e-9 {
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{x:.0}</text>"#,
            sx(x),
            h - b + 18.0
        );
        x += step;
    }
    let _ = writeln!(
        o,
        r#"<line x1="{l}" x2="{l}" y1="{t}" y2="{}" stroke="black"/><line x1="{l}" x2="{}" y1="{1}" y2="{1}" stroke="black"/>"#,
        h - b,
        w - r
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" text-anchor="middle">{x_label}</text>"#,
        (l + w - r) / 2.0,
        h - 18.0
    );
    let _ = writeln!(
        o,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {0})">{y_label}</text>"#,
        (t + h - b) / 2.0
    );
    for (mx, label) in markers {
        let _ = writeln!(
            o,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{t}" y2="{1}" stroke="#888" stroke-dasharray="4 3"/><text x="{2:.1}" y="{3}" font-size="11" fill="#444">{label}</text>"##,
            sx(*mx),
            h - b,
            sx(*mx) + 3.0,
            t + 12.0
        );
    }
    for (i, s) in series.iter().enumerate() {
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
            .collect();
        let _ = writeln!(
            o,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
            s.color,
            pts.join(" ")
        );
        let ly = t + 30.0 + 18.0 * i as f64;
        let _ = writeln!(
            o,
            r#"<line x1="{}" x2="{}" y1="{ly}" y2="{ly}" stroke="{}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            w - r - 170.0,
            w - r - 145.0,
            s.color,
            w - r - 140.0,
            ly + 4.0,
            s.label
        );
    }
    o.push_str("</svg>\n");
    o
}
