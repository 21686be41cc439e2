//! SVG figures drawn like the papers': grouped bars with interval whiskers.

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
}
