//! Tests of `xtask::experiments::ckam`.

use std::collections::BTreeMap;
use xtask::experiments::ckam::*;
use xtask::size::Size;
use xtask::summary::{CellSummary, CurveStats, Summary};
use xtask::summary::{Curve, RunParams};
use xtask::verdict::Verdict;
use xtask::verdict::{COST_RATIO, all_of};

/// A done cell whose two chains reach the checkpoints (kept draws `x`)
/// at `seconds` with KL `kl` (the same for both chains).
fn cell(sampler: &str, x: &[f64], seconds: &[f64], kl: &[f64]) -> CellSummary {
    let curve = |y: &[f64]| {
        let c = Curve {
            x: x.to_vec(),
            y: y.to_vec(),
        };
        CurveStats::new("c", &[&c, &c]).unwrap()
    };
    let floor: Vec<f64> = x.iter().map(|n| 1.0 / n).collect();
    CellSummary {
        target: "t".into(),
        target_label: "T".into(),
        sampler: sampler.into(),
        setting: String::new(),
        status: "done".into(),
        chains: 2,
        iterations: *x.last().unwrap() as u64,
        burn_in: 0,
        wall_time_secs: 0.0,
        metrics: BTreeMap::new(),
        curves: BTreeMap::from([
            ("kl".into(), curve(kl)),
            ("seconds".into(), curve(seconds)),
            ("kl_floor".into(), curve(&floor)),
        ]),
    }
}

fn summary(cells: Vec<CellSummary>) -> Summary {
    Summary {
        experiment: "ckam-gmm32".into(),
        source: String::new(),
        params: RunParams::new(Size::Quick, 1, 2),
        notes: String::new(),
        cells,
        claims: Vec::new(),
    }
}

#[test]
fn curves_interpolate_in_time_and_are_empty_outside_the_run() {
    let (t, y) = ([1.0, 2.0, 4.0], [10.0, 20.0, 0.0]);
    assert_eq!(interpolate(&t, &y, 1.5), 15.0);
    assert_eq!(interpolate(&t, &y, 3.0), 10.0);
    assert_eq!(interpolate(&t, &y, 4.0), 0.0);
    assert!(interpolate(&t, &y, 0.5).is_nan());
    assert!(interpolate(&t, &y, 4.5).is_nan());
}

/// A rival with no draws yet when cKAM's run ends is no data on our
/// clock (neither a win nor a loss); on the paper's clock, which starts
/// at each chain's first kept draw, both have draws and the comparison
/// is decided.
#[test]
fn a_sampler_without_draws_decides_nothing() {
    let s = summary(vec![
        cell(
            "cKAM",
            &[10.0, 20.0, 30.0],
            &[1.0, 2.0, 3.0],
            &[3.0, 2.0, 1.0],
        ),
        // burn-in until 10 s: no draws before cKAM's end at 3 s
        cell(
            "GAM",
            &[10.0, 20.0, 30.0],
            &[11.0, 12.0, 13.0],
            &[0.3, 0.2, 0.1],
        ),
    ]);
    let ours = at_equal_time(&s, "c", &["GAM"], 1.0, Clock::Ours, all_of);
    assert_eq!(ours.verdict, Verdict::Inconclusive, "{ours:?}");
    assert!(ours.evidence.contains("no data: GAM"), "{}", ours.evidence);
    assert!(ours.claim.contains("at 3.0000 s"), "{}", ours.claim);
    // paper's clock: both start at 0 (the first kept draw, extrapolated
    // from the first two checkpoints) and end at 3 s
    let papers = at_equal_time(&s, "c", &["GAM"], 1.0, Clock::Papers, all_of);
    assert_eq!(papers.verdict, Verdict::Refuted, "{papers:?}");
    assert!(papers.claim.contains("at 3.0000 s"), "{}", papers.claim);
    assert!(papers.caveats.contains(&COST_RATIO.to_string()));
    // with GAM as good as cKAM the intervals (of width zero) still order
    // nothing: equal values are inconclusive
    let tie = summary(vec![
        cell("cKAM", &[10.0, 20.0], &[1.0, 2.0], &[1.0, 1.0]),
        cell("GAM", &[10.0, 20.0], &[1.0, 2.0], &[1.0, 1.0]),
    ]);
    let d = at_equal_time(&tie, "c", &["GAM"], 1.0, Clock::Ours, all_of);
    assert_eq!(d.verdict, Verdict::Inconclusive);
}
