//! Tests of `xtask::bench_report::walltime`.

/// The KAMH paper's benchmark (30 × 500 000) and Glass grid (5 samplers
/// × 30 chains × 100 000), and the KMC paper's (10 chains × 6 000 per
/// cell, six cells with the oracle-basis ones).
#[test]
fn the_papers_glass_budget_counts_every_estimate() {
    assert_eq!(
        xtask::bench_report::walltime::glass_paper_estimates(),
        30 * 500_000 + 5 * 30 * 100_000 + 6 * 10 * 6000
    );
}

use xtask::bench_report::walltime::*;

/// Costs add up over cells and runs; quick runs and empty cells are
/// left out.
#[test]
fn costs_sum_cells_and_runs() {
    let dir = std::env::temp_dir().join(format!("kameleon-walltime-{}", std::process::id()));
    let exp = dir.join("demo");
    std::fs::create_dir_all(exp.join("runs")).unwrap();
    let summary = serde_json::json!({
        "experiment": "demo",
        "params": {"quick": false},
        "cells": [
            {"sampler": "A", "setting": "", "target_label": "t", "chains": 2,
             "iterations": 900, "burn_in": 100, "wall_time_secs": 4.0},
            {"sampler": "B", "setting": "s", "target_label": "t", "chains": 1,
             "iterations": 1000, "burn_in": 0, "wall_time_secs": 3.0},
            {"sampler": "C", "chains": 0, "iterations": 0, "burn_in": 0,
             "wall_time_secs": 0.0}
        ]
    });
    std::fs::write(exp.join("summary.json"), summary.to_string()).unwrap();
    for (i, (wall, quick)) in [(10.0, false), (5.0, false), (99.0, true)]
        .iter()
        .enumerate()
    {
        let run = serde_json::json!({"wall_time_secs": wall, "quick": quick, "machine": "m"});
        std::fs::write(exp.join("runs").join(format!("{i}.json")), run.to_string()).unwrap();
    }
    // a run that did not finish: counted apart, its time unknown
    let stopped = serde_json::json!({"wall_time_secs": 0.0, "quick": false, "machine": "m",
        "finished": false});
    std::fs::write(exp.join("runs").join("3.json"), stopped.to_string()).unwrap();
    let costs = read(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(costs.len(), 1);
    let c = &costs[0];
    assert_eq!((c.wall_secs, c.unfinished_runs), (15.0, 1));
    assert_eq!(c.chain_secs, 7.0);
    assert_eq!(c.iterations, 3000.0);
    assert!((c.cpu_secs_per_1000 - 7.0 / 3.0).abs() < 1e-12);
    // A: 4 s / 2000 its = 2 per 1000; B: 3 per 1000
    assert_eq!(c.slowest_cell, "B, s, t");
    assert!((c.slowest_cpu_secs_per_1000 - 3.0).abs() < 1e-12);
}
