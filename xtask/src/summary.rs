//! Per-job records (one chain each, or one replicate of a study), their
//! aggregation into `summary.json`, and the `summary.md` report.

use crate::experiment::{Cell, Experiment, Protocol, Study};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The run parameters every job of one run shares; shards merge only if they agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunParams {
    /// `--quick`.
    pub quick: bool,
    /// The master seed.
    pub seed: u64,
    /// Chains per cell.
    pub chains: usize,
}

/// What one chain produced: written as `jobs/<job id>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The experiment's name.
    pub experiment: String,
    /// The run parameters.
    pub params: RunParams,
    /// Target key.
    pub target: String,
    /// Sampler label.
    pub sampler: String,
    /// Setting (may be empty).
    pub setting: String,
    /// The chain's index within its cell.
    pub chain: usize,
    /// The seed of this cell's streams (derived from the master seed and the cell key).
    pub cell_seed: u64,
    /// Post-burn-in iterations.
    pub iterations: u64,
    /// Burn-in.
    pub burn_in: u64,
    /// Wall-clock seconds of sampling, burn-in included.
    pub wall_time_secs: f64,
    /// The adapted global scale at the end, if the sampler has one.
    pub final_scale: Option<f64>,
    /// Every metric's value for this chain.
    pub metrics: BTreeMap<String, f64>,
    /// Every curve metric of this chain (e.g. the symmetric KL at
    /// checkpoints along the chain), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub curves: BTreeMap<String, Curve>,
}

/// One chain's curve: values `y` at points `x` (e.g. numbers of draws,
/// lags or bin centres).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    /// The points, the same for every chain of a cell.
    pub x: Vec<f64>,
    /// The chain's value at each point.
    pub y: Vec<f64>,
}

impl Curve {
    /// Appends the point (x, y).
    pub fn push(&mut self, x: f64, y: f64) {
        self.x.push(x);
        self.y.push(y);
    }
}

/// A curve over the chains of a cell: per point the mean and the 10% / 90%
/// quantiles over chains, and every chain's values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurveStats {
    /// The points.
    pub x: Vec<f64>,
    /// The mean over chains at each point.
    pub mean: Vec<f64>,
    /// The 10% quantile over chains at each point.
    pub q10: Vec<f64>,
    /// The 90% quantile over chains at each point.
    pub q90: Vec<f64>,
    /// Every chain's values, in chain order.
    pub chains: Vec<Vec<f64>>,
}

impl CurveStats {
    /// Statistics of the given per-chain curves (at least one; all with the
    /// same points, else an error naming the curve).
    pub fn new(name: &str, curves: &[&Curve]) -> Result<Self> {
        let Some(first) = curves.first() else {
            bail!("curve {name}: no chains");
        };
        if let Some(c) = curves
            .iter()
            .find(|c| c.x != first.x || c.y.len() != first.x.len())
        {
            bail!(
                "curve {name}: chains disagree on the points ({} vs {} points)",
                first.x.len(),
                c.x.len()
            );
        }
        let points: Vec<MetricStats> = (0..first.x.len())
            .map(|k| MetricStats::new(curves.iter().map(|c| c.y[k]).collect()))
            .collect();
        Ok(Self {
            x: first.x.clone(),
            mean: points.iter().map(|p| p.mean).collect(),
            q10: points.iter().map(|p| p.q10).collect(),
            q90: points.iter().map(|p| p.q90).collect(),
            chains: curves.iter().map(|c| c.y.clone()).collect(),
        })
    }
}

#[cfg(test)]
/// Whether a metric or curve named `name` depends on the clock (wall time),
/// so that it differs between two runs with the same seed.
pub fn depends_on_clock(name: &str) -> bool {
    name.ends_with("_per_s") || name == "seconds"
}

/// One row of a study's replicate: the metrics of one target × method ×
/// setting (the study's analogue of a chain's metrics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Target key.
    pub target: String,
    /// The target in the paper's notation.
    pub target_label: String,
    /// What is measured (a sampler's proposal, an estimator, …); shown in the
    /// summary's `sampler` column.
    pub method: String,
    /// A setting that varies along the study (e.g. `D=100`), empty if none.
    pub setting: String,
    /// Wall-clock seconds this row took (0 if not timed separately).
    pub wall_time_secs: f64,
    /// Every metric's value in this replicate (finite).
    pub metrics: BTreeMap<String, f64>,
}

/// What one replicate of a study produced: written as
/// `jobs/replicate-<index>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyRecord {
    /// The experiment's name.
    pub experiment: String,
    /// The run parameters (`chains` = replicates).
    pub params: RunParams,
    /// The replicate's index.
    pub replicate: usize,
    /// The replicate's seed.
    pub seed: u64,
    /// Wall-clock seconds of the whole replicate.
    pub wall_time_secs: f64,
    /// The replicate's rows, in the study's order.
    pub rows: Vec<Measurement>,
}

/// Statistics of one metric over the chains of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricStats {
    /// One value per chain, in chain order.
    pub values: Vec<f64>,
    /// Their mean.
    pub mean: f64,
    /// The 10% quantile over chains (linear interpolation, R type 7).
    pub q10: f64,
    /// The 90% quantile over chains.
    pub q90: f64,
    /// The KAMH paper's "80% interval" half width, 1.2816·sd/√chains.
    pub ci80_half_width: f64,
}

impl MetricStats {
    /// Statistics of the given per-chain values (at least one).
    pub fn new(values: Vec<f64>) -> Self {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = if values.len() > 1 {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        Self {
            q10: quantile_sorted(&sorted, 0.1),
            q90: quantile_sorted(&sorted, 0.9),
            ci80_half_width: 1.2816 * var.sqrt() / n.sqrt(),
            mean,
            values,
        }
    }
}

/// The p-quantile of sorted values with linear interpolation (R type 7).
fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// One target × sampler × setting of the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    /// Target key.
    pub target: String,
    /// The target in the paper's notation.
    pub target_label: String,
    /// Sampler label.
    pub sampler: String,
    /// Setting (may be empty).
    pub setting: String,
    /// `"done"`, or `"pending: <reason>"` for samplers that do not exist yet.
    pub status: String,
    /// Number of chains.
    pub chains: usize,
    /// Post-burn-in iterations per chain.
    pub iterations: u64,
    /// Burn-in per chain.
    pub burn_in: u64,
    /// Wall-clock seconds summed over chains.
    pub wall_time_secs: f64,
    /// Every metric over chains (empty when pending).
    pub metrics: BTreeMap<String, MetricStats>,
    /// Every curve metric over chains (empty when pending or when the
    /// experiment has none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub curves: BTreeMap<String, CurveStats>,
}

/// The verdict on one claim of the paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Our numbers show what the paper claims.
    Reproduced,
    /// Our numbers contradict the claim.
    NotReproduced,
    /// A sampler the claim needs is pending.
    Pending,
}

/// One claim of the paper and whether we reproduce it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimCheck {
    /// The claim in the paper's words (with the target it is checked on).
    pub claim: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The numbers behind the verdict.
    pub evidence: String,
}

/// The whole `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The experiment's name.
    pub experiment: String,
    /// Paper and figure.
    pub source: String,
    /// The run parameters.
    pub params: RunParams,
    /// Fixed choices of the protocol (starting points, bands).
    pub notes: String,
    /// One entry per grid cell, in grid order.
    pub cells: Vec<CellSummary>,
    /// The paper's claims, checked.
    pub claims: Vec<ClaimCheck>,
}

impl Summary {
    /// Aggregates job records over the grid; fails listing missing jobs.
    pub fn aggregate(
        experiment: &Experiment,
        protocol: &Protocol,
        params: RunParams,
        cells: &[Cell],
        records: &[JobRecord],
    ) -> Result<Self> {
        let mut by_job: BTreeMap<(String, String, String, usize), &JobRecord> = BTreeMap::new();
        for r in records {
            if r.params != params || r.experiment != experiment.name {
                bail!(
                    "job {}/{}/{}#{} was run with {:?} of {}, expected {:?} of {}",
                    r.target,
                    r.sampler,
                    r.setting,
                    r.chain,
                    r.params,
                    r.experiment,
                    params,
                    experiment.name
                );
            }
            by_job.insert(
                (
                    r.target.clone(),
                    r.sampler.clone(),
                    r.setting.clone(),
                    r.chain,
                ),
                r,
            );
        }
        let mut missing = Vec::new();
        let mut out = Vec::with_capacity(cells.len());
        for cell in cells {
            let (target, sampler, setting) = cell.key();
            let mut summary = CellSummary {
                target: target.clone(),
                target_label: cell.target.label(),
                sampler: sampler.clone(),
                setting: setting.clone(),
                status: "done".into(),
                chains: params.chains,
                iterations: cell.iterations,
                burn_in: cell.burn_in,
                wall_time_secs: 0.0,
                metrics: BTreeMap::new(),
                curves: BTreeMap::new(),
            };
            if let Some(reason) = cell.sampler.pending() {
                summary.status = format!("pending: {reason}");
                summary.chains = 0;
                out.push(summary);
                continue;
            }
            let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            let mut curves: BTreeMap<String, Vec<&Curve>> = BTreeMap::new();
            for k in 0..params.chains {
                let key = (target.clone(), sampler.clone(), setting.clone(), k);
                let Some(r) = by_job.get(&key) else {
                    missing.push(crate::runner::job_id(&target, &sampler, &setting, k));
                    continue;
                };
                summary.wall_time_secs += r.wall_time_secs;
                for (name, v) in &r.metrics {
                    values.entry(name.clone()).or_default().push(*v);
                }
                for (name, c) in &r.curves {
                    curves.entry(name.clone()).or_default().push(c);
                }
            }
            summary.curves = curves
                .into_iter()
                .map(|(name, c)| Ok((name.clone(), CurveStats::new(&name, &c)?)))
                .collect::<Result<_>>()?;
            summary.metrics = values
                .into_iter()
                .map(|(name, v)| (name, MetricStats::new(v)))
                .collect();
            out.push(summary);
        }
        if !missing.is_empty() {
            bail!(
                "{} job(s) missing (run the shards that hold them): {}",
                missing.len(),
                missing.join(", ")
            );
        }
        let mut summary = Self {
            experiment: experiment.name.into(),
            source: experiment.source.into(),
            params,
            notes: protocol.notes.into(),
            cells: out,
            claims: Vec::new(),
        };
        summary.claims = (protocol.claims)(&summary);
        Ok(summary)
    }

    /// Aggregates the replicates of a study: one cell per row (target ×
    /// method × setting, in the first replicate's order) with every metric
    /// over the replicates; fails listing missing replicates, or if the
    /// replicates disagree on the rows.
    pub fn from_study(
        experiment: &Experiment,
        study: &Study,
        params: RunParams,
        records: &[StudyRecord],
    ) -> Result<Self> {
        let mut by_replicate: BTreeMap<usize, &StudyRecord> = BTreeMap::new();
        for r in records {
            if r.params != params || r.experiment != experiment.name {
                bail!(
                    "replicate {} was run with {:?} of {}, expected {:?} of {}",
                    r.replicate,
                    r.params,
                    r.experiment,
                    params,
                    experiment.name
                );
            }
            by_replicate.insert(r.replicate, r);
        }
        let missing: Vec<String> = (0..params.chains)
            .filter(|k| !by_replicate.contains_key(k))
            .map(crate::runner::replicate_id)
            .collect();
        if !missing.is_empty() {
            bail!(
                "{} replicate(s) missing (run the shards that hold them): {}",
                missing.len(),
                missing.join(", ")
            );
        }
        let first = &by_replicate[&0].rows;
        let mut cells: Vec<CellSummary> = first
            .iter()
            .map(|row| CellSummary {
                target: row.target.clone(),
                target_label: row.target_label.clone(),
                sampler: row.method.clone(),
                setting: row.setting.clone(),
                status: "done".into(),
                chains: params.chains,
                iterations: 0,
                burn_in: 0,
                wall_time_secs: 0.0,
                metrics: BTreeMap::new(),
                curves: BTreeMap::new(),
            })
            .collect();
        let mut values: Vec<BTreeMap<String, Vec<f64>>> = vec![BTreeMap::new(); cells.len()];
        for (k, record) in by_replicate.range(..params.chains) {
            let same_rows = record.rows.len() == first.len()
                && record.rows.iter().zip(first).all(|(a, b)| {
                    (&a.target, &a.method, &a.setting) == (&b.target, &b.method, &b.setting)
                        && a.metrics.keys().eq(b.metrics.keys())
                });
            if !same_rows {
                bail!("replicate {k} measured other rows or metrics than replicate 0");
            }
            for ((cell, row), v) in cells.iter_mut().zip(&record.rows).zip(&mut values) {
                cell.wall_time_secs += row.wall_time_secs;
                for (name, x) in &row.metrics {
                    v.entry(name.clone()).or_default().push(*x);
                }
            }
        }
        for (cell, v) in cells.iter_mut().zip(values) {
            cell.metrics = v
                .into_iter()
                .map(|(name, v)| (name, MetricStats::new(v)))
                .collect();
        }
        let mut summary = Self {
            experiment: experiment.name.into(),
            source: experiment.source.into(),
            params,
            notes: study.notes.into(),
            cells,
            claims: Vec::new(),
        };
        summary.claims = (study.claims)(&summary);
        Ok(summary)
    }

    /// The statistics of `metric` for a target key, sampler label and setting.
    pub fn stats(
        &self,
        target: &str,
        sampler: &str,
        setting: &str,
        metric: &str,
    ) -> Option<&MetricStats> {
        self.cells
            .iter()
            .find(|c| c.target == target && c.sampler == sampler && c.setting == setting)
            .and_then(|c| c.metrics.get(metric))
    }

    /// The distinct target keys with their labels, in grid order.
    pub fn targets(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for c in &self.cells {
            if !out.iter().any(|(k, _)| k == &c.target) {
                out.push((c.target.clone(), c.target_label.clone()));
            }
        }
        out
    }

    /// Writes `summary.json`.
    pub fn write_json(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    }

    /// Reads a `summary.json`.
    #[cfg(test)]
    pub fn read_json(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(serde_json::from_str(&text)?)
    }

    /// The `summary.md` report: tables per target, claims, figures.
    pub fn markdown(&self, figures: &[String]) -> String {
        let mut md = String::new();
        let size = if self.params.quick {
            "--quick size (too small to judge the paper's claims)"
        } else {
            "full size"
        };
        let _ = writeln!(
            md,
            "# {}\n\nSource: {}. Run at {size}; master seed {}, {} chains per cell.\n",
            self.experiment, self.source, self.params.seed, self.params.chains
        );
        let _ = writeln!(md, "{}\n", self.notes);
        let _ = writeln!(
            md,
            "Each entry is the mean over chains with the 10%–90% range of the chains in brackets. \
             `accept` is the post-burn-in acceptance rate, `mean_norm` the norm of the empirical mean \
             minus the exact mean, `qX` the absolute error of the empirical coverage of the exact \
             X-region, `q_avg` their average over the nine levels. Every per-chain value is in `summary.json`.\n"
        );
        for (key, label) in self.targets() {
            let cells: Vec<&CellSummary> = self.cells.iter().filter(|c| c.target == key).collect();
            let mut names: Vec<&str> = Vec::new();
            for c in &cells {
                for n in c.metrics.keys() {
                    if !names.contains(&n.as_str()) {
                        names.push(n);
                    }
                }
            }
            // Per-level quantile errors get a table of their own.
            let (levels, main): (Vec<&str>, Vec<&str>) =
                names.iter().partition(|n| n.starts_with("q0."));
            let _ = writeln!(md, "## {label}\n");
            table(&mut md, &cells, &main, true);
            if !levels.is_empty() {
                let _ = writeln!(md, "Quantile errors per level:\n");
                table(&mut md, &cells, &levels, false);
            }
            curve_tables(&mut md, &cells);
        }
        let curve_names: Vec<&str> = {
            let mut names: Vec<&str> = self
                .cells
                .iter()
                .flat_map(|c| c.curves.keys().map(String::as_str))
                .collect();
            names.sort_unstable();
            names.dedup();
            names
        };
        if !curve_names.is_empty() {
            let _ = writeln!(
                md,
                "Curves along the chains (every chain's values, their mean and 10%/90% quantiles at \
                 each point are in `summary.json` under `curves`): {}.\n",
                curve_names.join(", ")
            );
        }
        self.claims_and_figures(&mut md, figures);
        md
    }

    /// The `summary.md` report of a study: one table per target with the
    /// mean and 10%–90% range over replicates, claims, figures.
    pub fn study_markdown(&self, figures: &[String]) -> String {
        let mut md = String::new();
        let size = if self.params.quick {
            "--quick size (too small to judge the paper's claims)"
        } else {
            "full size"
        };
        let _ = writeln!(
            md,
            "# {}\n\nSource: {}. Run at {size}; master seed {}, {} replicate(s).\n",
            self.experiment, self.source, self.params.seed, self.params.chains
        );
        let _ = writeln!(md, "{}\n", self.notes);
        let _ = writeln!(
            md,
            "Each entry is the mean over replicates with their 10%–90% range in brackets; \
             every per-replicate value is in `summary.json`.\n"
        );
        for (key, label) in self.targets() {
            let cells: Vec<&CellSummary> = self.cells.iter().filter(|c| c.target == key).collect();
            let mut names: Vec<&str> = Vec::new();
            for c in &cells {
                for n in c.metrics.keys() {
                    if !names.contains(&n.as_str()) {
                        names.push(n);
                    }
                }
            }
            let _ = writeln!(md, "## {label}\n");
            table(&mut md, &cells, &names, false);
        }
        self.claims_and_figures(&mut md, figures);
        md
    }

    /// Appends the claims with their verdicts and the figure links.
    fn claims_and_figures(&self, md: &mut String, figures: &[String]) {
        let _ = writeln!(md, "## The paper's claims\n");
        for claim in &self.claims {
            let verdict = match claim.verdict {
                Verdict::Reproduced => "**reproduced**",
                Verdict::NotReproduced => "**not reproduced**",
                Verdict::Pending => "**pending**",
            };
            let _ = writeln!(md, "- {}: {verdict} — {}", claim.claim, claim.evidence);
        }
        if !figures.is_empty() {
            let _ = writeln!(md, "\n## Figures\n");
            for f in figures {
                let _ = writeln!(md, "![{f}]({f})");
            }
        }
    }
}

/// Appends a markdown table of `metrics` (mean [q10, q90]) for `cells`,
/// with the run sizes when `sizes`.
fn table(md: &mut String, cells: &[&CellSummary], metrics: &[&str], sizes: bool) {
    md.push_str("| sampler | setting |");
    if sizes {
        md.push_str(" chains | iterations / burn-in | wall time (s) |");
    }
    for n in metrics {
        let _ = write!(md, " {n} |");
    }
    md.push_str("\n|---|---|");
    if sizes {
        md.push_str("---|---|---|");
    }
    md.push_str(&"---|".repeat(metrics.len()));
    md.push('\n');
    for c in cells {
        let _ = write!(md, "| {} | {} |", c.sampler, c.setting);
        if c.status != "done" {
            let _ = writeln!(md, " {} |", c.status);
            continue;
        }
        if sizes {
            let _ = write!(
                md,
                " {} | {} / {} | {:.1} |",
                c.chains, c.iterations, c.burn_in, c.wall_time_secs
            );
        }
        for n in metrics {
            match c.metrics.get(*n) {
                Some(s) => {
                    let _ = write!(md, " {} [{}, {}] |", fmt(s.mean), fmt(s.q10), fmt(s.q90));
                }
                None => md.push_str(" – |"),
            }
        }
        md.push('\n');
    }
    md.push('\n');
}

/// Appends one table per curve metric: rows are cells, columns at most
/// eight evenly spaced abscissae (every value is in `summary.json`).
fn curve_tables(md: &mut String, cells: &[&CellSummary]) {
    let mut names: Vec<&str> = Vec::new();
    for c in cells {
        for n in c.curves.keys() {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    for name in names {
        let Some(x) = cells.iter().find_map(|c| c.curves.get(name)).map(|t| &t.x) else {
            continue;
        };
        let columns: Vec<usize> = if x.len() <= 8 {
            (0..x.len()).collect()
        } else {
            (0..8).map(|k| k * (x.len() - 1) / 7).collect()
        };
        let _ = writeln!(md, "Curve `{name}` (mean [10%, 90%] over chains) at x =\n");
        md.push_str("| sampler | setting |");
        for &i in &columns {
            let _ = write!(md, " {} |", fmt(x[i]));
        }
        let _ = writeln!(md, "\n|---|---|{}", "---|".repeat(columns.len()));
        for c in cells {
            let Some(t) = c.curves.get(name) else {
                continue;
            };
            let _ = write!(md, "| {} | {} |", c.sampler, c.setting);
            for &i in &columns {
                match (t.mean.get(i), t.q10.get(i), t.q90.get(i)) {
                    (Some(m), Some(lo), Some(hi)) => {
                        let _ = write!(md, " {} [{}, {}] |", fmt(*m), fmt(*lo), fmt(*hi));
                    }
                    _ => md.push_str(" – |"),
                }
            }
            md.push('\n');
        }
        md.push('\n');
    }
}

/// Compact number formatting for tables.
pub fn fmt(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 || (1e-3..1e4).contains(&a) {
        format!("{v:.4}")
    } else {
        format!("{v:.3e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
