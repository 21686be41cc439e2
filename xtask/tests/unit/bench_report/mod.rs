//! Tests of `xtask::bench_report`.

mod peak;
mod walltime;

use xtask::bench_report::*;

/// At a tiny size the report runs end to end (without the peers, which
/// the Python suite checks), writes both files, and the JSON has every
/// field with consistent values.
#[test]
fn tiny_report_has_every_field() {
    let out = std::env::temp_dir().join(format!("kameleon-bench-report-{}", std::process::id()));
    let opts = ReportOptions {
        sizes: Sizes::tiny(),
        full_size: false,
        out: out.clone(),
        isolate_memory: false,
        peers: false,
        results: out.join("no-results"),
    };
    let report = run(&opts).unwrap();
    let text = std::fs::read_to_string(out.join("bench-report.json")).unwrap();
    let names: Vec<&str> = report.paths.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "kamh_step",
            "kamh_adapting_step",
            "fkamh_step",
            "fkamh_adapting_step_t50",
            "fkamh_adapting_step_t100",
            "kmc_lite_gradient",
            "kmc_finite_gradient",
            "kmc_lite_step",
            "kmc_lite_adapting_step",
            "kmc_finite_step",
            "kmc_finite_adapting_step",
            "finite_online_update",
            "finite_online_update_fixed_ridge",
            "lite_fit",
            "finite_fit",
            "glass_estimate"
        ]
    );
    for p in &report.paths {
        let t = &p.timing;
        assert!(
            0.0 < t.p10_secs && t.p10_secs <= t.median_secs && t.median_secs <= t.p90_secs,
            "{}: {t:?}",
            p.name
        );
        assert!(p.flops > 0.0 && p.floor_secs > 0.0, "{}", p.name);
        assert!((p.times_floor - t.median_secs / p.floor_secs).abs() <= 1e-12 * p.times_floor);
        // every adapting path is compared with its frozen form
        assert_eq!(
            p.vs_frozen.is_some(),
            p.name.contains("adapting"),
            "{}",
            p.name
        );
        assert!(p.peer.is_none() && p.vs_peer.is_none());
    }
    // the JSON round-trips into the same report
    let back: Report = serde_json::from_str(&text).unwrap();
    assert_eq!(back, report);
    assert!(report.peak.fma_gflops > 0.0 && report.peak.lanes >= 1);
    assert!(report.peak.gemm.gflops_median > 0.0);
    assert!(report.memory.peak_resident_mb > 0.0);
    assert!(report.parallelism.throughput_ratio > 0.0);
    assert!(report.experiments.is_empty());
    // a floor goal per path, the adapting KAMH goal and the parallel one
    assert_eq!(report.goals().len(), report.paths.len() + 2);
    let md = std::fs::read_to_string(out.join("bench-report.md")).unwrap();
    assert!(
        md.contains("| `kamh_step` |") && md.contains("VmHWM"),
        "{md}"
    );
    // the fits and the Glass estimate are bound by dense linear algebra:
    // marked, and with peers they get no peer goal while the others do
    let blas_bound: Vec<&str> = report
        .paths
        .iter()
        .filter(|p| p.blas_bound)
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(blas_bound, ["lite_fit", "finite_fit", "glass_estimate"]);
    assert!(md.contains("| `glass_estimate` † |"), "{md}");
    let mut with_peers = report.clone();
    for p in &mut with_peers.paths {
        p.vs_peer = Some(10.0);
    }
    let goals = with_peers.goals();
    let peer_goals: Vec<&str> = goals
        .iter()
        .filter(|g| g.goal.contains("numpy peer"))
        .map(|g| g.goal.as_str())
        .collect();
    assert_eq!(peer_goals.len(), report.paths.len() - 3, "{peer_goals:?}");
    assert!(
        blas_bound
            .iter()
            .all(|name| peer_goals.iter().all(|g| !g.contains(&format!("`{name}`")))),
        "{peer_goals:?}"
    );
    std::fs::remove_dir_all(&out).unwrap();
}
