//! SVG figures drawn like the papers': grouped bars with interval whiskers,
//! and curves with shaded bands.

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
    let top = series
        .iter()
        .flat_map(|s| s.bars.iter().flatten())
        .map(|b| b.high.max(b.value))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let top = if top > 0.0 { top * 1.1 } else { 1.0 };
    let root = SVGBackend::new(path, (1000, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(&e))?;
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
            .map_err(|e| plot_err(&e))?
            .label(s.label.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
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
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| plot_err(&e))?;
    root.present().map_err(|e| plot_err(&e))?;
    Ok(())
}

/// One sampler's curve: the mean and a band (e.g. 10%–90% of chains) at x.
#[derive(Debug, Clone, PartialEq)]
pub struct CurveSeries {
    /// The legend label.
    pub label: String,
    /// The abscissae.
    pub x: Vec<f64>,
    /// The curve.
    pub mean: Vec<f64>,
    /// The lower edge of the band.
    pub low: Vec<f64>,
    /// The upper edge of the band.
    pub high: Vec<f64>,
}

/// Draws curves (one colour per series) with shaded bands into an SVG file.
/// Non-finite points are skipped.
pub fn curves(
    path: &Path,
    title: &str,
    series: &[CurveSeries],
    x_label: &str,
    y_label: &str,
) -> Result<()> {
    let plot_err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());
    let finite = |v: &f64| v.is_finite();
    let xs = series.iter().flat_map(|s| s.x.iter()).filter(|v| finite(v));
    let (x_lo, x_hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
        (a.min(v), b.max(v))
    });
    let ys = series
        .iter()
        .flat_map(|s| s.mean.iter().chain(&s.low).chain(&s.high))
        .filter(|v| finite(v));
    let (y_lo, y_hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
        (a.min(v), b.max(v))
    });
    let (x_lo, x_hi) = if x_lo < x_hi {
        (x_lo, x_hi)
    } else {
        (0.0, 1.0)
    };
    let (y_lo, y_hi) = if y_lo < y_hi {
        let pad = 0.05 * (y_hi - y_lo);
        (y_lo - pad, y_hi + pad)
    } else if y_lo.is_finite() {
        (y_lo - 1.0, y_lo + 1.0)
    } else {
        (0.0, 1.0)
    };
    let root = SVGBackend::new(path, (1000, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
        .map_err(|e| plot_err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| plot_err(&e))?;
    for (k, s) in series.iter().enumerate() {
        let colour = PALETTE[k % PALETTE.len()];
        let points = |ys: &[f64]| -> Vec<(f64, f64)> {
            s.x.iter()
                .zip(ys)
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .map(|(x, y)| (*x, *y))
                .collect()
        };
        let mut band = points(&s.high);
        band.extend(points(&s.low).into_iter().rev());
        if band.len() >= 3 {
            chart
                .draw_series(std::iter::once(Polygon::new(
                    band,
                    colour.mix(0.2).filled(),
                )))
                .map_err(|e| plot_err(&e))?;
        }
        chart
            .draw_series(LineSeries::new(points(&s.mean), colour.stroke_width(2)))
            .map_err(|e| plot_err(&e))?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 14, y)], colour.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| plot_err(&e))?;
    root.present().map_err(|e| plot_err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_an_svg_with_labels_and_one_rect_per_bar() {
        let dir = std::env::temp_dir().join(format!("xtask-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bars.svg");
        let series = vec![
            BarSeries {
                label: "SM".into(),
                bars: vec![
                    Some(Bar {
                        value: 0.3,
                        low: 0.2,
                        high: 0.4,
                    }),
                    None,
                ],
            },
            BarSeries {
                label: "AM-LS".into(),
                bars: vec![
                    Some(Bar {
                        value: 0.5,
                        low: 0.45,
                        high: 0.55,
                    });
                    2
                ],
            },
        ];
        let groups = vec!["accept".to_string(), "q0.5".to_string()];
        grouped_bars(&path, "test", &groups, &series, "value").unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in ["accept", "q0.5", "SM", "AM-LS", "test"] {
            assert!(svg.contains(text), "missing {text}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Curves draw one band polygon and one line per series, with labels,
    /// skipping non-finite points.
    #[test]
    fn draws_curves_with_bands_and_labels() {
        let dir = std::env::temp_dir().join(format!("xtask-curves-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("curves.svg");
        let series: Vec<CurveSeries> = ["KMC", "RW"]
            .iter()
            .enumerate()
            .map(|(k, label)| CurveSeries {
                label: label.to_string(),
                x: vec![1.0, 2.0, 3.0],
                mean: vec![1.0 + k as f64, 0.5, f64::NAN],
                low: vec![0.5, 0.2, 0.1],
                high: vec![2.0, 1.0, 0.8],
            })
            .collect();
        curves(&path, "mmd", &series, "iterations", "MMD²").unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for text in ["KMC", "RW", "mmd", "iterations"] {
            assert!(svg.contains(text), "missing {text}");
        }
        assert_eq!(svg.matches("<polygon").count(), 2);
        assert!(svg.matches("<polyline").count() >= 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
