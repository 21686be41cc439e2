//! What users wait for end to end: each experiment's full-size wall time
//! and chain CPU-seconds per 1000 iterations, read from the experiments'
//! own records (`summary.json` and `runs/*.json` under the results
//! directory), so the report needs no rerun to show them.

use crate::benchmark::{GLASS_IMPORTANCE_DRAWS, ReferenceKey};
use crate::experiments;
use crate::size::Size;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// One experiment's recorded cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentCost {
    /// The experiment.
    pub name: String,
    /// Wall seconds of its full-size runs (summed over resumed runs and
    /// shards) that finished.
    pub wall_secs: f64,
    /// Its full-size runs that did not finish (killed, failed, or still
    /// running): their wall time is unknown, so `wall_secs` leaves it out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unfinished_runs: usize,
    /// The machine of its runs (as their records name it).
    pub machine: String,
    /// Seconds inside the chains, summed over cells and chains.
    pub chain_secs: f64,
    /// Iterations (burn-in included) over every chain.
    pub iterations: f64,
    /// `chain_secs` per 1000 iterations.
    pub cpu_secs_per_1000: f64,
    /// The cell with the highest CPU-seconds per 1000 iterations.
    pub slowest_cell: String,
    /// Its CPU-seconds per 1000 iterations.
    pub slowest_cpu_secs_per_1000: f64,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Glass log-likelihood estimates at the papers' size (`--size paper`):
/// the benchmark's chains plus every cell of `kamh-glass` and `kmc-glass`
/// at the papers' chains, burn-in included (one estimate per iteration,
/// and per walker move in the ensemble cells, which run the same number of
/// evaluations).
pub fn glass_paper_estimates() -> u64 {
    let benchmark = ReferenceKey::Glass {
        n_importance: GLASS_IMPORTANCE_DRAWS,
    }
    .plan(Size::Paper, 1);
    let mut total = benchmark.chains as u64 * (benchmark.burn_in + benchmark.iterations);
    for name in ["kamh-glass", "kmc-glass"] {
        let protocol = experiments::find(name)
            .and_then(|e| e.protocol)
            .expect("the Glass experiments have a protocol");
        let chains = protocol.chains_at(Size::Paper) as u64;
        let cells = protocol.cells_at(Size::Paper);
        total += chains * cells.iter().map(|c| c.burn_in + c.iterations).sum::<u64>();
    }
    total
}

/// The costs of every full-size experiment under `results`, by name; an
/// experiment without a full-size summary is left out.
pub fn read(results: &Path) -> Result<Vec<ExperimentCost>> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(results) else {
        return Ok(out);
    };
    let mut dirs: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let summary = dir.join("summary.json");
        if !summary.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&summary)
            .with_context(|| format!("reading {}", summary.display()))?;
        let json: Value = serde_json::from_str(&text)
            .with_context(|| format!("parsing {}", summary.display()))?;
        if json["params"]["quick"].as_bool() != Some(false) {
            continue;
        }
        if let Some(cost) = cost(&json, &dir.join("runs"))? {
            out.push(cost);
        }
    }
    Ok(out)
}

fn cost(summary: &Value, runs: &Path) -> Result<Option<ExperimentCost>> {
    let name = summary["experiment"].as_str().unwrap_or("?").to_string();
    let (mut chain_secs, mut iterations) = (0.0, 0.0);
    let mut slowest = (String::new(), 0.0);
    for cell in summary["cells"].as_array().into_iter().flatten() {
        let number = |key: &str| cell[key].as_f64().unwrap_or(0.0);
        let its = number("chains") * (number("iterations") + number("burn_in"));
        let secs = number("wall_time_secs");
        if its <= 0.0 || secs <= 0.0 {
            continue;
        }
        chain_secs += secs;
        iterations += its;
        let per_1000 = secs / its * 1000.0;
        if per_1000 > slowest.1 {
            let label = [
                cell["sampler"].as_str().unwrap_or("?"),
                cell["setting"].as_str().unwrap_or(""),
                cell["target_label"].as_str().unwrap_or(""),
            ]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
            slowest = (label, per_1000);
        }
    }
    if iterations <= 0.0 {
        return Ok(None);
    }
    let (mut wall_secs, mut machine, mut unfinished_runs) = (0.0, String::new(), 0);
    if let Ok(entries) = std::fs::read_dir(runs) {
        for entry in entries.filter_map(|e| e.ok()) {
            let text = std::fs::read_to_string(entry.path())?;
            let Ok(run) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            if run["quick"].as_bool() == Some(true) {
                continue;
            }
            // a record without `finished` is one of a run that ended
            if run["finished"] == false {
                unfinished_runs += 1;
            }
            wall_secs += run["wall_time_secs"].as_f64().unwrap_or(0.0);
            if let Some(m) = run["machine"].as_str() {
                machine = m.to_string();
            }
        }
    }
    Ok(Some(ExperimentCost {
        name,
        wall_secs,
        unfinished_runs,
        machine,
        chain_secs,
        iterations,
        cpu_secs_per_1000: chain_secs / iterations * 1000.0,
        slowest_cell: slowest.0,
        slowest_cpu_secs_per_1000: slowest.1,
    }))
}
