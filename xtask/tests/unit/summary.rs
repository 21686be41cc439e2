//! Tests of `xtask::summary`.

use std::collections::BTreeMap;
use xtask::size::Size;
use xtask::summary::*;

#[test]
fn stats_match_hand_computations() {
    let s = MetricStats::new(vec![3.0, 1.0, 2.0, 4.0, 5.0]);
    assert_eq!(s.values, vec![3.0, 1.0, 2.0, 4.0, 5.0]);
    assert_eq!(s.mean, 3.0);
    // Type 7: h = 4·0.1 = 0.4 → 1 + 0.4·(2 − 1).
    assert!((s.q10 - 1.4).abs() < 1e-15);
    assert!((s.q90 - 4.6).abs() < 1e-15);
    // sd = √2.5.
    assert!((s.ci80_half_width - 1.2816 * 2.5f64.sqrt() / 5f64.sqrt()).abs() < 1e-15);
    let one = MetricStats::new(vec![7.0]);
    assert_eq!((one.q10, one.q90, one.ci80_half_width), (7.0, 7.0, 0.0));
}

#[test]
fn curve_stats_are_pointwise_metric_stats_and_need_equal_points() {
    let x = vec![10.0, 20.0];
    let chains: Vec<Curve> = [[3.0, 0.5], [1.0, 1.5], [2.0, 2.5], [4.0, 3.5], [5.0, 4.5]]
        .iter()
        .map(|y| Curve {
            x: x.clone(),
            y: y.to_vec(),
        })
        .collect();
    let refs: Vec<&Curve> = chains.iter().collect();
    let s = CurveStats::new("kl", &refs).unwrap();
    assert_eq!(s.x, x);
    for k in 0..2 {
        let pointwise = MetricStats::new(chains.iter().map(|c| c.y[k]).collect());
        assert_eq!(
            (s.mean[k], s.q10[k], s.q90[k]),
            (pointwise.mean, pointwise.q10, pointwise.q90)
        );
    }
    assert_eq!(s.chains[1], vec![1.0, 1.5]);
    let other = Curve {
        x: vec![10.0, 30.0],
        y: vec![0.0, 0.0],
    };
    assert!(CurveStats::new("kl", &[&chains[0], &other]).is_err());
    assert!(CurveStats::new("kl", &[]).is_err());
    assert!(depends_on_clock("seconds") && depends_on_clock("ess_min_per_s"));
    assert!(!depends_on_clock("kl"));
}

/// The report shows each metric once: `kl`, the last point of its
/// curve, only in the curve's table; `accept` in the main table; a
/// curve every sampler shares (the exact reference) in one row; no
/// setting column when no cell has a setting.
#[test]
fn markdown_shows_each_metric_once() {
    let curve = |y: [f64; 3]| Curve {
        x: vec![10.0, 20.0, 40.0],
        y: y.to_vec(),
    };
    let cell = |sampler: &str, kl: [[f64; 3]; 2]| {
        let chains: Vec<Curve> = kl.iter().map(|&y| curve(y)).collect();
        let refs: Vec<&Curve> = chains.iter().collect();
        let exact = curve([0.1, 0.2, 0.7]);
        CellSummary {
            target: "t".into(),
            target_label: "T".into(),
            sampler: sampler.into(),
            setting: String::new(),
            status: "done".into(),
            chains: 2,
            iterations: 40,
            burn_in: 0,
            wall_time_secs: 1.0,
            metrics: BTreeMap::from([
                ("accept".into(), MetricStats::new(vec![0.2, 0.3])),
                (
                    "kl".into(),
                    MetricStats::new(kl.iter().map(|y| y[2]).collect()),
                ),
            ]),
            curves: BTreeMap::from([
                ("kl".into(), CurveStats::new("kl", &refs).unwrap()),
                (
                    "exact".into(),
                    CurveStats::new("exact", &[&exact, &exact]).unwrap(),
                ),
            ]),
        }
    };
    let summary = Summary {
        experiment: "e".into(),
        source: "s".into(),
        params: RunParams::new(Size::Quick, 1, 2),
        notes: String::new(),
        cells: vec![
            cell("A", [[3.0, 2.0, 1.0], [5.0, 4.0, 3.0]]),
            cell("B", [[6.0, 5.0, 4.0], [7.0, 6.0, 5.0]]),
        ],
        claims: Vec::new(),
    };
    let md = summary.markdown(&[]);
    assert_eq!(md.matches("`accept`").count(), 2, "{md}"); // legend + table head
    assert_eq!(md.matches("`kl`").count(), 1, "{md}"); // the curve table only
    assert!(md.contains("| sampler | x = 10 | 20 | 40 |"), "{md}");
    // kl's last point over chains A: mean 2 [q10 1.2, q90 2.8].
    assert!(
        md.contains(
            "| A | 4.0000 [3.2000, 4.8000] | 3.0000 [2.2000, 3.8000] | 2.0000 [1.2000, 2.8000] |"
        ),
        "{md}"
    );
    assert!(
        md.contains("| (every sampler) | 0.1000 | 0.2000 | 0.7000 |"),
        "{md}"
    );
    assert!(!md.contains("setting"), "{md}");
    assert!(!md.contains("Curves along the chains"), "{md}");
    // a metric the cell lacks and a cell that never ran are pending, each
    // with its reason
    let pending_reason =
        |sampler: &str, metric: &str| match summary.estimate("t", sampler, "", metric) {
            Err(xtask::verdict::Missing::Pending(why)) => why,
            other => panic!("{other:?}"),
        };
    assert!(pending_reason("A", "ess_min").contains("ran without this metric"));
    assert!(pending_reason("C", "accept").contains("no such cell has run"));
    assert!(summary.estimate("t", "A", "", "accept").is_ok());
}

/// A summary read back is checked before anything decides claims or draws
/// figures from it: every done cell's metrics hold one value per chain and
/// the statistics those values give, and its curves one curve per chain
/// over the points; an emptied or edited summary is an error naming the
/// cell and the metric, never a panic or a verdict on numbers no run made.
/// Every summary the repository commits passes.
#[test]
fn summaries_are_checked_against_their_per_chain_values() {
    let results = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../results");
    let mut checked = 0;
    for entry in std::fs::read_dir(&results).unwrap() {
        let path = entry.unwrap().path().join("summary.json");
        if path.exists() {
            let summary = Summary::read_json(&path).unwrap();
            summary
                .check()
                .unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} committed summaries");

    let kamh = Summary::read_json(&results.join("kamh-banana").join("summary.json")).unwrap();
    let broken = |edit: &dyn Fn(&mut Summary)| {
        let mut s = kamh.clone();
        edit(&mut s);
        format!("{:#}", s.check().unwrap_err())
    };
    fn first(s: &mut Summary) -> &mut MetricStats {
        let cell = s.cells.iter_mut().find(|c| c.status == "done").unwrap();
        cell.metrics.get_mut("accept").unwrap()
    }
    let sampler = kamh
        .cells
        .iter()
        .find(|c| c.status == "done")
        .unwrap()
        .sampler
        .clone();
    for message in [
        broken(&|s| first(s).values.clear()),
        broken(&|s| first(s).values.push(0.5)),
        broken(&|s| first(s).mean += 0.01),
        broken(&|s| first(s).values[0] += 0.01),
        broken(&|s| first(s).ci80_half_width = 0.0),
    ] {
        assert!(
            message.contains(&sampler) && message.contains("accept"),
            "{message}"
        );
    }
    let curves = Summary::read_json(&results.join("kamh-glass").join("summary.json")).unwrap();
    let mut s = curves.clone();
    let cell = s.cells.iter_mut().find(|c| !c.curves.is_empty()).unwrap();
    let (name, curve) = cell.curves.iter_mut().next().unwrap();
    let name = name.clone();
    curve.chains.pop();
    let message = format!("{:#}", s.check().unwrap_err());
    assert!(message.contains(&name), "{message}");
}
