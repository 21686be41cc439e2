//! SVG figures drawn like the papers': grouped bars with interval whiskers,
//! curves with interval whiskers or shaded bands on linear or log axes, and
//! 95% proposal ellipses over a density heat map.

use crate::files::write_file;
use crate::summary::CurveStats;
use anyhow::{Result, anyhow};
use plotters::prelude::*;
use std::path::Path;

/// One bar: its height and the interval drawn as a whisker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    /// Height.
    pub value: f64,
    /// Lower end of the whisker.
    pub low: f64,
    /// Upper end of the whisker.
    pub high: f64,
}

/// One sampler's bars, one per group (`None`: no value, e.g. pending).
#[derive(Debug, Clone, PartialEq)]
pub struct BarSeries {
    /// The legend label.
    pub label: String,
    /// The bars, one per group.
    pub bars: Vec<Option<Bar>>,
}

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Greys for reference levels, dark to light.
const GREYS: [RGBColor; 4] = [
    RGBColor(0, 0, 0),
    RGBColor(80, 80, 80),
    RGBColor(140, 140, 140),
    RGBColor(190, 190, 190),
];

/// How a legend entry is marked: a filled box (bars) or a line segment of
/// the curve's colour and width.
#[derive(Debug, Clone, Copy)]
enum Mark {
    Box(RGBColor),
    Line(RGBColor, u32),
}

/// Legend text size (px).
const LEGEND_FONT: u32 = 14;
/// Height of one legend row (px).
const LEGEND_ROW: i32 = 22;

/// The width (px) of a legend column for `labels`: the mark, a gap and the
/// longest label at a generous 0.62 em per character (SVG text is measured
/// by the viewer, so this errs on the wide side).
fn legend_width<'a>(labels: impl Iterator<Item = &'a str>) -> u32 {
    let chars = labels.map(|l| l.chars().count()).max().unwrap_or(0) as f64;
    44 + (0.62 * f64::from(LEGEND_FONT) * chars).ceil() as u32
}

/// An SVG of `size` (drawn into `svg`; `path` names it in errors) with a white legend column at its right, holding
/// `entries` from `top` px down; returns the area left of the column for
/// the chart, so the legend never covers data.
fn with_legend<'a>(
    path: &Path,
    svg: &'a mut String,
    (width, height): (u32, u32),
    entries: &[(String, Mark)],
    top: i32,
) -> Result<DrawingArea<SVGBackend<'a>, plotters::coord::Shift>> {
    let plot_err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());
    let legend = legend_width(entries.iter().map(|(l, _)| l.as_str()));
    let root = SVGBackend::with_string(svg, (width + legend, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(&e))?;
    let (chart_area, legend_area) = root.split_horizontally(width);
    let style = ("sans-serif", LEGEND_FONT).into_font().color(&BLACK).pos(
        plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Left,
            plotters::style::text_anchor::VPos::Center,
        ),
    );
    for (k, (label, mark)) in entries.iter().enumerate() {
        let y = top + LEGEND_ROW * k as i32;
        match *mark {
            Mark::Box(colour) => {
                legend_area.draw(&Rectangle::new([(6, y - 6), (24, y + 6)], colour.filled()))
            }
            Mark::Line(colour, width) => legend_area.draw(&PathElement::new(
                vec![(4, y), (28, y)],
                colour.stroke_width(width.max(2)),
            )),
        }
        .map_err(|e| plot_err(&e))?;
        legend_area
            .draw(&Text::new(label.clone(), (36, y), style.clone()))
            .map_err(|e| plot_err(&e))?;
    }
    Ok(chart_area)
}

/// Draws grouped bars (groups along x, one colour per series) with whiskers
/// into an SVG file.
pub fn grouped_bars(
    path: &Path,
    title: &str,
    groups: &[String],
    series: &[BarSeries],
    y_label: &str,
) -> Result<()> {
    let plot_err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());
    // Drawn in memory, then written atomically.
    let mut svg = String::new();
    {
        let top = series
            .iter()
            .flat_map(|s| s.bars.iter().flatten())
            .map(|b| b.high.max(b.value))
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max);
        let top = if top > 0.0 { top * 1.1 } else { 1.0 };
        let entries: Vec<(String, Mark)> = series
            .iter()
            .enumerate()
            .map(|(k, s)| (s.label.clone(), Mark::Box(PALETTE[k % PALETTE.len()])))
            .collect();
        let root = with_legend(path, &mut svg, (1000, 460), &entries, 50)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..groups.len() as f64, 0.0..top)
            .map_err(|e| plot_err(&e))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(y_label)
            .draw()
            .map_err(|e| plot_err(&e))?;
        let width = 0.8 / series.len().max(1) as f64;
        for (k, s) in series.iter().enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            let offset = 0.1 + k as f64 * width;
            let present: Vec<(f64, Bar)> = s
                .bars
                .iter()
                .enumerate()
                .filter_map(|(i, b)| b.map(|b| (i as f64 + offset, b)))
                .collect();
            chart
                .draw_series(present.iter().map(|&(x, b)| {
                    Rectangle::new([(x, 0.0), (x + width * 0.9, b.value)], colour.filled())
                }))
                .map_err(|e| plot_err(&e))?;
            chart
                .draw_series(present.iter().map(|&(x, b)| {
                    let mid = x + width * 0.45;
                    PathElement::new(vec![(mid, b.low), (mid, b.high)], BLACK.stroke_width(1))
                }))
                .map_err(|e| plot_err(&e))?;
        }
        // Group names under the axis, centred on their groups (drawn on the root
        // area: the chart's own labels would sit at "nice" numbers instead).
        for (i, name) in groups.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
            let style = ("sans-serif", 14).into_font().color(&BLACK).pos(
                plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Center,
                    plotters::style::text_anchor::VPos::Top,
                ),
            );
            root.draw(&Text::new(name.clone(), (px, py + 8), style))
                .map_err(|e| plot_err(&e))?;
        }
        root.present().map_err(|e| plot_err(&e))?;
    }
    write_file(path, svg.as_bytes())
}

/// One point of a curve with its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    /// Abscissa.
    pub x: f64,
    /// Value.
    pub y: f64,
    /// Lower end of the interval (= `y` for none).
    pub low: f64,
    /// Upper end of the interval (= `y` for none).
    pub high: f64,
}

/// A cell's curve over chains as points: the mean with the 10%–90%
/// quantiles of the chains as its interval, at the curve's own points or at
/// `x` (e.g. another curve's means).
pub fn interval_points(stats: &CurveStats, x: Option<&[f64]>) -> Vec<CurvePoint> {
    let x = x.unwrap_or(&stats.x);
    x.iter()
        .enumerate()
        .map(|(k, &x)| CurvePoint {
            x,
            y: stats.mean[k],
            low: stats.q10[k],
            high: stats.q90[k],
        })
        .collect()
}

/// How a curve is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CurveKind {
    /// Data: a thick line with markers and interval whiskers.
    Data,
    /// A fitted line: thin, no markers, in the colour of its data.
    Fit,
    /// A reference level (e.g. another method's value): thin, in greys.
    Reference,
    /// Data with many points (e.g. a KL curve along the chains): a thick
    /// line with its interval drawn as a shaded band, no markers.
    Banded,
}

/// One labelled curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// The legend label.
    pub label: String,
    /// The points, by increasing x.
    pub points: Vec<CurvePoint>,
    /// How it is drawn.
    pub kind: CurveKind,
    /// Its colour's index (in the data palette, or in the greys for
    /// references).
    pub colour: usize,
}

/// Axis scales of [`curves`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Axes {
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
}

/// Draws curves with interval whiskers (one colour per curve) into an SVG
/// file; non-positive values are dropped on a log axis.
pub fn curves(
    path: &Path,
    title: &str,
    (x_label, y_label): (&str, &str),
    axes: Axes,
    series: &[Curve],
) -> Result<()> {
    let plot_err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());
    // Drawn in memory, then written atomically.
    let mut svg = String::new();
    {
        let keep = |p: &CurvePoint| {
            p.x.is_finite()
                && p.y.is_finite()
                && (!axes.log_x || p.x > 0.0)
                && (!axes.log_y || p.low.min(p.y) > 0.0)
        };
        let all: Vec<&CurvePoint> = series
            .iter()
            .flat_map(|s| &s.points)
            .filter(|p| keep(p))
            .collect();
        let range = |values: &mut dyn Iterator<Item = f64>, log: bool| {
            let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            });
            if !lo.is_finite() {
                return (1.0, 10.0);
            }
            if log {
                (lo / 1.3, hi * 1.3)
            } else {
                let pad = ((hi - lo) * 0.05).max(1e-12);
                (lo - pad, hi + pad)
            }
        };
        let (x0, x1) = range(&mut all.iter().map(|p| p.x), axes.log_x);
        let (y0, y1) = range(
            &mut all.iter().flat_map(|p| [p.low.min(p.y), p.high.max(p.y)]),
            axes.log_y,
        );
        let colour_of = |s: &Curve| match s.kind {
            CurveKind::Reference => GREYS[s.colour % GREYS.len()],
            _ => PALETTE[s.colour % PALETTE.len()],
        };
        let width_of = |s: &Curve| match s.kind {
            CurveKind::Data | CurveKind::Banded => 2,
            CurveKind::Fit | CurveKind::Reference => 1,
        };
        let entries: Vec<(String, Mark)> = series
            .iter()
            .map(|s| (s.label.clone(), Mark::Line(colour_of(s), width_of(s))))
            .collect();
        let root = with_legend(path, &mut svg, (900, 560), &entries, 50)?;
        let mut builder = ChartBuilder::on(&root);
        builder
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(65);
        // The four axis combinations have different coordinate types.
        macro_rules! draw {
            ($x:expr, $y:expr) => {{
                let mut chart = builder
                    .build_cartesian_2d($x, $y)
                    .map_err(|e| plot_err(&e))?;
                chart
                    .configure_mesh()
                    .x_desc(x_label)
                    .y_desc(y_label)
                    .draw()
                    .map_err(|e| plot_err(&e))?;
                for s in series {
                    let (colour, width) = (colour_of(s), width_of(s));
                    let points: Vec<CurvePoint> = s.points.iter().copied().filter(keep).collect();
                    if s.kind == CurveKind::Banded && points.len() > 1 {
                        let mut outline: Vec<(f64, f64)> =
                            points.iter().map(|p| (p.x, p.low.min(p.y))).collect();
                        outline.extend(points.iter().rev().map(|p| (p.x, p.high.max(p.y))));
                        chart
                            .draw_series(std::iter::once(Polygon::new(
                                outline,
                                colour.mix(0.2).filled(),
                            )))
                            .map_err(|e| plot_err(&e))?;
                    }
                    chart
                        .draw_series(LineSeries::new(
                            points.iter().map(|p| (p.x, p.y)),
                            colour.stroke_width(width),
                        ))
                        .map_err(|e| plot_err(&e))?;
                    if s.kind == CurveKind::Data {
                        chart
                            .draw_series(points.iter().map(|p| {
                                PathElement::new(
                                    vec![(p.x, p.low), (p.x, p.high)],
                                    colour.stroke_width(1),
                                )
                            }))
                            .map_err(|e| plot_err(&e))?;
                        chart
                            .draw_series(
                                points
                                    .iter()
                                    .map(|p| Circle::new((p.x, p.y), 3, colour.filled())),
                            )
                            .map_err(|e| plot_err(&e))?;
                    }
                }
            }};
        }
        match (axes.log_x, axes.log_y) {
            (false, false) => draw!(x0..x1, y0..y1),
            (true, false) => draw!((x0..x1).log_scale(), y0..y1),
            (false, true) => draw!(x0..x1, (y0..y1).log_scale()),
            (true, true) => draw!((x0..x1).log_scale(), (y0..y1).log_scale()),
        }
        root.present().map_err(|e| plot_err(&e))?;
    }
    write_file(path, svg.as_bytes())
}

/// A 2-d Gaussian N(centre, Σ) whose region of given mass is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ellipse {
    /// The mean.
    pub centre: (f64, f64),
    /// Σ as (Σ₁₁, Σ₁₂, Σ₂₂); positive definite.
    pub covariance: (f64, f64, f64),
}

/// −2 log(0.05): the squared Mahalanobis radius of a 2-d Gaussian's 95%
/// region (χ²₂ has the CDF 1 − e^{−r/2}).
pub const CHI2_2_95: f64 = 5.991_464_547_107_979;

impl Ellipse {
    /// `count` points on the boundary {x : (x − c)ᵀΣ⁻¹(x − c) = r²}, the
    /// image of the circle of radius r under the Cholesky factor of Σ
    /// (closed: the last point equals the first).
    pub fn boundary(&self, radius: f64, count: usize) -> Vec<(f64, f64)> {
        let (s11, s12, s22) = self.covariance;
        let a = s11.sqrt();
        let b = s12 / a;
        let c = (s22 - b * b).max(0.0).sqrt();
        (0..=count)
            .map(|i| {
                let t = std::f64::consts::TAU * i as f64 / count as f64;
                let (u, v) = (radius * t.cos(), radius * t.sin());
                (self.centre.0 + a * u, self.centre.1 + b * u + c * v)
            })
            .collect()
    }
}

/// A panel like KAMH Fig. 2: the target's density as a heat map (from its
/// log density on a grid), the samples as blue dots and each ellipse's 95%
/// region in red with its centre.
pub fn proposal_contours(
    path: &Path,
    title: &str,
    (x_range, y_range): ((f64, f64), (f64, f64)),
    log_density: &mut dyn FnMut(f64, f64) -> f64,
    samples: &[(f64, f64)],
    ellipses: &[Ellipse],
) -> Result<()> {
    const GRID: usize = 80;
    let plot_err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());
    // Drawn in memory, then written atomically.
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 620)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(35)
            .y_label_area_size(45)
            .build_cartesian_2d(x_range.0..x_range.1, y_range.0..y_range.1)
            .map_err(|e| plot_err(&e))?;
        chart
            .configure_mesh()
            .disable_mesh()
            .draw()
            .map_err(|e| plot_err(&e))?;
        let (dx, dy) = (
            (x_range.1 - x_range.0) / GRID as f64,
            (y_range.1 - y_range.0) / GRID as f64,
        );
        let cells: Vec<(f64, f64, f64)> = (0..GRID * GRID)
            .map(|k| {
                let (x, y) = (
                    x_range.0 + (k % GRID) as f64 * dx,
                    y_range.0 + (k / GRID) as f64 * dy,
                );
                (x, y, log_density(x + dx / 2.0, y + dy / 2.0))
            })
            .collect();
        let top = cells.iter().map(|c| c.2).fold(f64::NEG_INFINITY, f64::max);
        // Heat: white at zero density to dark grey at the maximum; cells below
        // 1% of the maximum stay white (keeps the SVG small).
        chart
            .draw_series(cells.iter().filter_map(|&(x, y, l)| {
                let w = (l - top).exp();
                (w >= 0.01).then(|| {
                    let g = (235.0 - 130.0 * w) as u8;
                    Rectangle::new([(x, y), (x + dx, y + dy)], RGBColor(g, g, g).filled())
                })
            }))
            .map_err(|e| plot_err(&e))?;
        chart
            .draw_series(
                samples
                    .iter()
                    .map(|&p| Circle::new(p, 1, RGBColor(31, 119, 180).filled())),
            )
            .map_err(|e| plot_err(&e))?;
        let red = RGBColor(214, 39, 40);
        for e in ellipses {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    e.boundary(CHI2_2_95.sqrt(), 96),
                    red.stroke_width(2),
                )))
                .map_err(|e| plot_err(&e))?;
            chart
                .draw_series(std::iter::once(Circle::new(e.centre, 3, red.filled())))
                .map_err(|e| plot_err(&e))?;
        }
        root.present().map_err(|e| plot_err(&e))?;
    }
    write_file(path, svg.as_bytes())
}
