//! Tests of `xtask::plot`.

use xtask::plot::*;

#[test]
fn banded_curves_draw_one_band_each_on_log_axes() {
    let dir = std::env::temp_dir().join(format!("xtask-bands-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bands.svg");
    let point = |x: f64, y: f64| CurvePoint {
        x,
        y,
        low: 0.5 * y,
        high: 2.0 * y,
    };
    let series = vec![
        Curve {
            label: "cKAM".into(),
            points: vec![point(0.1, 3.0), point(1.0, 0.3), point(10.0, 0.03)],
            kind: CurveKind::Banded,
            colour: 0,
        },
        Curve {
            label: "RW".into(),
            points: vec![point(0.2, 2.0), point(2.0, 0.2)],
            kind: CurveKind::Banded,
            colour: 1,
        },
        Curve {
            label: "iid floor".into(),
            // the non-positive point cannot be drawn on log axes
            points: vec![point(0.0, 1.0), point(1.0, 0.1), point(10.0, 0.01)],
            kind: CurveKind::Reference,
            colour: 0,
        },
    ];
    let axes = Axes {
        log_x: true,
        log_y: true,
    };
    curves(&path, "KL vs time", ("seconds", "J"), axes, &series).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    for text in ["KL vs time", "cKAM", "RW", "iid floor", "seconds"] {
        assert!(svg.contains(text), "missing {text}");
    }
    assert_legend_right_of(&svg, 900, &["cKAM", "RW", "iid floor"]);
    assert_eq!(svg.matches("<polygon").count(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The legend sits in a column right of the chart's `width` px, so it
/// cannot cover data: the SVG is wider than `width`, and every label is
/// a text element starting right of it.
fn assert_legend_right_of(svg: &str, width: u32, labels: &[&str]) {
    let attr = |tag: &str, name: &str| -> f64 {
        let start = tag.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        let len = tag[start..].find('"').unwrap();
        tag[start..start + len].parse().unwrap()
    };
    let svg_tag = &svg[..svg.find('>').unwrap()];
    assert!(attr(svg_tag, "width") > f64::from(width), "{svg_tag}");
    for label in labels {
        let end = svg.find(&format!(">\n{label}\n</text>")).unwrap();
        let tag = &svg[svg[..end].rfind("<text").unwrap()..end];
        assert!(attr(tag, "x") > f64::from(width), "{label}: {tag}");
    }
}

/// The boundary points have Mahalanobis radius r: (x − c)ᵀΣ⁻¹(x − c)
/// with the explicit 2 × 2 inverse.
#[test]
fn ellipse_boundary_has_the_given_mahalanobis_radius() {
    let e = Ellipse {
        centre: (1.0, -2.0),
        covariance: (4.0, 1.5, 1.0),
    };
    let det = 4.0 * 1.0 - 1.5 * 1.5;
    for (x, y) in e.boundary(2.0, 17) {
        let (u, v) = (x - 1.0, y + 2.0);
        let m = (1.0 * u * u - 2.0 * 1.5 * u * v + 4.0 * v * v) / det;
        assert!((m - 4.0).abs() < 1e-12, "{m}");
    }
    // χ²₂ CDF at the radius: 1 − exp(−r/2) = 0.95.
    assert!((1.0 - (-CHI2_2_95 / 2.0).exp() - 0.95).abs() < 1e-15);
}

#[test]
fn draws_curves_on_linear_and_log_axes() {
    let dir = std::env::temp_dir().join(format!("xtask-plot-curves-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let point = |x: f64| CurvePoint {
        x,
        y: 1.0 / x,
        low: 0.8 / x,
        high: 1.2 / x,
    };
    let series = vec![
        Curve {
            label: "error".into(),
            points: vec![point(10.0), point(100.0), point(1000.0)],
            kind: CurveKind::Data,
            colour: 0,
        },
        Curve {
            label: "fit".into(),
            points: vec![point(10.0), point(1000.0)],
            kind: CurveKind::Fit,
            colour: 0,
        },
    ];
    for (log_x, log_y) in [(false, false), (true, true)] {
        let path = dir.join(format!("curves-{log_x}.svg"));
        curves(
            &path,
            "curves",
            ("D", "err"),
            Axes { log_x, log_y },
            &series,
        )
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("error") && svg.contains("fit") && svg.contains("curves"));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn draws_contours() {
    let dir = std::env::temp_dir().join(format!("xtask-plot-contours-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("contours.svg");
    let ellipse = Ellipse {
        centre: (0.0, 0.0),
        covariance: (1.0, 0.0, 1.0),
    };
    proposal_contours(
        &path,
        "panel",
        ((-3.0, 3.0), (-3.0, 3.0)),
        &mut |x, y| -0.5 * (x * x + y * y),
        &[(0.5, 0.5)],
        &[ellipse],
    )
    .unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("panel"));
    std::fs::remove_dir_all(&dir).unwrap();
}

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
    assert_legend_right_of(&svg, 1000, &["SM", "AM-LS"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
