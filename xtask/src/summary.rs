//! Per-job records (one chain each, or one replicate of a study), the
//! `summary.json` they aggregate into (see [`crate::aggregate`]), and the
//! `summary.md` report.

use crate::size::Size;
use crate::verdict::{ClaimCheck, Estimate, estimate, fmt, mean_and_half_width, pending};
use anyhow::{Result, bail};
use kameleon_diagnostics::quantile_sorted;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The run parameters every job of one run shares; shards merge only if they agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunParams {
    /// `--size quick` (`--quick`).
    pub quick: bool,
    /// `--size paper` (absent from the records of the other sizes).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paper: bool,
    /// The master seed.
    pub seed: u64,
    /// Chains per cell.
    pub chains: usize,
}

impl RunParams {
    /// The parameters of a run at `size`.
    pub fn new(size: Size, seed: u64, chains: usize) -> Self {
        Self {
            quick: size == Size::Quick,
            paper: size == Size::Paper,
            seed,
            chains,
        }
    }

    /// The run's size.
    pub fn size(&self) -> Size {
        match (self.quick, self.paper) {
            (true, _) => Size::Quick,
            (false, true) => Size::Paper,
            (false, false) => Size::Full,
        }
    }
}

/// The parameters as the flags of `reproduce` that give them, e.g.
/// `--size quick --seed 1 --chains 2`.
impl std::fmt::Display for RunParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--size {} --seed {} --chains {}",
            self.size().name(),
            self.seed,
            self.chains
        )
    }
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
    /// Statistics of the given per-chain values.
    ///
    /// # Panics
    ///
    /// On an empty `values` (every cell has at least one chain).
    pub fn new(values: Vec<f64>) -> Self {
        let (mean, ci80_half_width) = mean_and_half_width(&values);
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        let quantile =
            |p| quantile_sorted(&sorted, p).expect("at least one value, levels in [0, 1]");
        Self {
            q10: quantile(0.1),
            q90: quantile(0.9),
            ci80_half_width,
            mean,
            values,
        }
    }
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

    /// The 80% interval of `metric` over the chains (or replicates) of a
    /// cell, labelled with the sampler, the setting and the metric; pending
    /// when the cell is pending or absent, or ran without the metric.
    pub fn estimate(&self, target: &str, sampler: &str, setting: &str, metric: &str) -> Estimate {
        let label = self.label(target, sampler, setting, metric);
        let ran = self.cells.iter().any(|c| {
            c.target == target && c.sampler == sampler && c.setting == setting && c.status == "done"
        });
        match self.stats(target, sampler, setting, metric) {
            Some(m) => estimate(label, &m.values),
            None if ran => pending(format!(
                "{label} (the cell ran without this metric: it needs a rerun)"
            )),
            None => pending(format!("{label} (no such cell has run)")),
        }
    }

    /// The 80% interval over chains of the curve `curve` of a cell at its
    /// point `index` (negative: from the end, −1 the last), labelled with
    /// the point's abscissa; pending when the cell is pending or absent.
    pub fn curve_estimate(
        &self,
        target: &str,
        sampler: &str,
        setting: &str,
        curve: &str,
        index: isize,
    ) -> Estimate {
        let Some(c) = self
            .cells
            .iter()
            .find(|c| c.target == target && c.sampler == sampler && c.setting == setting)
            .and_then(|c| c.curves.get(curve))
        else {
            return pending(format!(
                "{} (no such cell has run)",
                self.label(target, sampler, setting, curve)
            ));
        };
        let i = if index < 0 {
            c.x.len().checked_sub(index.unsigned_abs())
        } else {
            Some(index.unsigned_abs()).filter(|&i| i < c.x.len())
        };
        let label = |x: String| self.label(target, sampler, setting, &format!("{curve} at {x}"));
        match i {
            Some(i) => estimate(
                label(abscissa(c.x[i])),
                &c.chains.iter().map(|y| y[i]).collect::<Vec<_>>(),
            ),
            None => estimate(label(format!("point {index}")), &[]),
        }
    }

    /// `sampler (setting) metric` of a cell, preceded by the target's label
    /// when the summary has several targets.
    fn label(&self, target: &str, sampler: &str, setting: &str, metric: &str) -> String {
        let cell = cell_label(sampler, setting, metric);
        let targets = self.targets();
        match targets.iter().find(|(key, _)| key == target) {
            Some((_, label)) if targets.len() > 1 => format!("{label}: {cell}"),
            _ => cell,
        }
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

    /// Checks what a summary read back holds before claims or figures use
    /// it: every done cell has chains, each metric one value per chain and
    /// the statistics [`MetricStats::new`] gives them (bit for bit), each
    /// curve one curve per chain and every series as long as its points.
    /// An error names the cell and the metric (a summary cut short, edited
    /// by hand or made by other code).
    pub fn check(&self) -> Result<()> {
        for c in self.cells.iter().filter(|c| c.status == "done") {
            let cell = || {
                format!("{} {} {}", c.target_label, c.sampler, c.setting)
                    .trim_end()
                    .to_string()
            };
            let advice = "restore the file, or rerun `cargo xtask reproduce`";
            if c.chains == 0 {
                bail!("{} is done with no chains: {advice}", cell());
            }
            for (name, stats) in &c.metrics {
                if stats.values.len() != c.chains {
                    bail!(
                        "{name} of {} holds {} value(s) for {} chain(s): {advice}",
                        cell(),
                        stats.values.len(),
                        c.chains
                    );
                }
                if *stats != MetricStats::new(stats.values.clone()) {
                    bail!(
                        "the mean, quantiles or interval of {name} of {} are not those of its \
                         per-chain values (edited, or made by other code): {advice}",
                        cell()
                    );
                }
            }
            for (name, curve) in &c.curves {
                let points = curve.x.len();
                let ragged = [&curve.mean, &curve.q10, &curve.q90]
                    .into_iter()
                    .chain(&curve.chains)
                    .any(|series| series.len() != points);
                if curve.chains.len() != c.chains || ragged {
                    bail!(
                        "curve {name} of {} does not hold one series of {points} point(s) per \
                         chain ({} chain(s)): {advice}",
                        cell(),
                        c.chains
                    );
                }
            }
        }
        Ok(())
    }

    /// Writes `summary.json` atomically.
    pub fn write_json(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        crate::files::write_file(path, text.as_bytes())
    }

    /// Reads a `summary.json`.
    pub fn read_json(path: &Path) -> Result<Self> {
        use anyhow::Context;
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Ok(serde_json::from_str(&text)?)
    }

    /// The `summary.md` report: per target one table of the scalar metrics,
    /// one of the per-level quantile errors and one per curve; then the
    /// claims and the figures. A metric that is also the last point of the
    /// curve of the same name is shown only in that curve's table.
    pub fn markdown(&self, figures: &[String]) -> String {
        let mut md = self.heading(&format!("{} chains per cell", self.params.chains));
        let has = |pred: &dyn Fn(&str) -> bool| {
            self.cells.iter().any(|c| c.metrics.keys().any(|n| pred(n)))
        };
        let mut legend = vec![
            "Each entry is the mean over chains with the 10%–90% range of the chains in brackets.",
        ];
        if has(&|n| n == "accept") {
            legend.push("`accept` is the post-burn-in acceptance rate.");
        }
        if has(&|n| n == "mean_norm") {
            legend.push("`mean_norm` is the norm of the empirical mean minus the exact mean.");
        }
        if has(&|n| n.starts_with("q0.") || n == "q_avg") {
            legend.push(
                "`qX` is the absolute error of the empirical coverage of the exact X-region, \
                 `q_avg` their average over the nine levels.",
            );
        }
        if self.cells.iter().any(|c| !c.curves.is_empty()) {
            legend.push(
                "Curve tables show up to eight of the curve's points (x), the last one included; \
                 a metric that equals a curve's last point appears only in that curve's table.",
            );
        }
        legend.push("Every per-chain value and every curve point is in `summary.json`.");
        let _ = writeln!(md, "{}\n", legend.join(" "));
        for (key, label) in self.targets() {
            let cells: Vec<&CellSummary> = self.cells.iter().filter(|c| c.target == key).collect();
            let names = entry_names(&cells, |c| &c.metrics);
            let (levels, main): (Vec<&str>, Vec<&str>) = names
                .iter()
                .filter(|n| !ends_curve(&cells, n))
                .partition(|n| n.starts_with("q0."));
            let _ = writeln!(md, "## {label}\n");
            table(&mut md, &cells, &main, true);
            if !levels.is_empty() {
                let _ = writeln!(md, "Quantile errors per level:\n");
                table(&mut md, &cells, &levels, false);
            }
            curve_tables(&mut md, &cells);
        }
        self.claims_and_figures(&mut md, figures);
        md
    }

    /// The `summary.md` report of a study: one table per target with the
    /// mean and 10%–90% range over replicates, claims, figures.
    pub fn study_markdown(&self, figures: &[String]) -> String {
        let mut md = self.heading(&format!("{} replicate(s)", self.params.chains));
        let _ = writeln!(
            md,
            "Each entry is the mean over replicates with their 10%–90% range in brackets; \
             every per-replicate value is in `summary.json`.\n"
        );
        for (key, label) in self.targets() {
            let cells: Vec<&CellSummary> = self.cells.iter().filter(|c| c.target == key).collect();
            let _ = writeln!(md, "## {label}\n");
            table(&mut md, &cells, &entry_names(&cells, |c| &c.metrics), false);
        }
        self.claims_and_figures(&mut md, figures);
        md
    }

    /// The report's title, source, size (`runs`: chains or replicates) and notes.
    fn heading(&self, runs: &str) -> String {
        let size = match self.params.size() {
            Size::Quick => "--quick size (too small to judge the paper's claims)",
            Size::Full => "full size",
            Size::Paper => "the papers' size (`--size paper`)",
        };
        format!(
            "# {}\n\nSource: {}. Run at {size}; master seed {}, {runs}.\n\n{}\n\n",
            self.experiment, self.source, self.params.seed, self.notes
        )
    }

    /// Appends the claims with their verdicts, rules and caveats, the
    /// protocol checks apart, and the figure links.
    fn claims_and_figures(&self, md: &mut String, figures: &[String]) {
        let _ = writeln!(md, "## The paper's claims\n");
        let line = |md: &mut String, c: &ClaimCheck| {
            let caveats = if c.caveats.is_empty() {
                String::new()
            } else {
                format!(" Caveat: {}.", c.caveats.join("; "))
            };
            let _ = writeln!(
                md,
                "- {}: **{}** — {}. Rule: {}.{caveats}",
                c.claim,
                c.verdict.word(),
                c.evidence,
                c.rule
            );
        };
        for claim in self.claims.iter().filter(|c| !c.protocol_check) {
            line(md, claim);
        }
        if self.claims.iter().any(|c| c.protocol_check) {
            let _ = writeln!(
                md,
                "\nProtocol checks (settings true by construction, not claims):\n"
            );
            for claim in self.claims.iter().filter(|c| c.protocol_check) {
                line(md, claim);
            }
        }
        if !figures.is_empty() {
            let _ = writeln!(md, "\n## Figures\n");
            for f in figures {
                let _ = writeln!(md, "![{f}]({f})");
            }
        }
    }
}

/// `sampler setting metric`, the setting left out when empty.
fn cell_label(sampler: &str, setting: &str, metric: &str) -> String {
    if setting.is_empty() {
        format!("{sampler} {metric}")
    } else {
        format!("{sampler} ({setting}) {metric}")
    }
}

/// The keys of `entries(cell)` over `cells`, in first-seen order.
fn entry_names<'a, V: 'a>(
    cells: &[&'a CellSummary],
    entries: impl Fn(&'a CellSummary) -> &'a BTreeMap<String, V>,
) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    for &c in cells {
        for n in entries(c).keys() {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    names
}

/// Whether every cell that has metric `name` also has a curve `name` whose
/// last point is that metric (its mean, 10% and 90% over chains).
fn ends_curve(cells: &[&CellSummary], name: &str) -> bool {
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1e-300);
    cells
        .iter()
        .filter_map(|c| c.metrics.get(name).map(|m| (c, m)))
        .all(|(c, m)| {
            c.curves
                .get(name)
                .is_some_and(|t| match (t.mean.last(), t.q10.last(), t.q90.last()) {
                    (Some(&mean), Some(&lo), Some(&hi)) => {
                        same(mean, m.mean) && same(lo, m.q10) && same(hi, m.q90)
                    }
                    _ => false,
                })
        })
}

/// `mean [q10, q90]` for a table entry; just the mean when all chains agree.
fn entry(mean: f64, q10: f64, q90: f64) -> String {
    if q10 == q90 {
        fmt(mean)
    } else {
        format!("{} [{}, {}]", fmt(mean), fmt(q10), fmt(q90))
    }
}

/// Appends a markdown table: the row labels (sampler, and the setting when
/// any cell has one), then the columns of `head` and of each row.
fn write_table(md: &mut String, cells: &[&CellSummary], head: &[String], rows: &[Vec<String>]) {
    let settings = cells.iter().any(|c| !c.setting.is_empty());
    let mut line = |columns: Vec<&str>| {
        let _ = writeln!(md, "| {} |", columns.join(" | "));
    };
    let mut labels = vec!["sampler"];
    if settings {
        labels.push("setting");
    }
    line(
        labels
            .iter()
            .copied()
            .chain(head.iter().map(String::as_str))
            .collect(),
    );
    line(vec!["---"; labels.len() + head.len()]);
    for (c, row) in cells.iter().zip(rows) {
        let mut columns = vec![c.sampler.as_str()];
        if settings {
            columns.push(&c.setting);
        }
        line(
            columns
                .into_iter()
                .chain(row.iter().map(String::as_str))
                .collect(),
        );
    }
    md.push('\n');
}

/// Appends a table of `metrics` (mean [q10, q90]) for `cells`, with the run
/// sizes when `sizes`.
fn table(md: &mut String, cells: &[&CellSummary], metrics: &[&str], sizes: bool) {
    let mut head: Vec<String> = Vec::new();
    if sizes {
        head.extend(["chains", "iterations / burn-in", "wall time (s)"].map(String::from));
    }
    head.extend(metrics.iter().map(|n| format!("`{n}`")));
    let rows: Vec<Vec<String>> = cells
        .iter()
        .map(|c| {
            if c.status != "done" {
                return vec![c.status.clone()];
            }
            let mut row = Vec::new();
            if sizes {
                row.push(c.chains.to_string());
                row.push(format!("{} / {}", c.iterations, c.burn_in));
                row.push(format!("{:.1}", c.wall_time_secs));
            }
            row.extend(metrics.iter().map(|n| match c.metrics.get(*n) {
                Some(s) => entry(s.mean, s.q10, s.q90),
                None => "–".into(),
            }));
            row
        })
        .collect();
    write_table(md, cells, &head, &rows);
}

/// Appends one table per curve: rows are the cells that have it, columns
/// at most eight evenly spaced points, the last one included. When every
/// cell has the same curve (e.g. an exact reference), one row says so.
fn curve_tables(md: &mut String, cells: &[&CellSummary]) {
    for name in entry_names(cells, |c| &c.curves) {
        let with: Vec<&CellSummary> = cells
            .iter()
            .copied()
            .filter(|c| c.curves.contains_key(name))
            .collect();
        let x = &with[0].curves[name].x;
        let columns: Vec<usize> = if x.len() <= 8 {
            (0..x.len()).collect()
        } else {
            (0..8).map(|k| k * (x.len() - 1) / 7).collect()
        };
        let head: Vec<String> = columns
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let v = abscissa(x[i]);
                if k == 0 { format!("x = {v}") } else { v }
            })
            .collect();
        let rows: Vec<Vec<String>> = with
            .iter()
            .map(|c| {
                let t = &c.curves[name];
                columns
                    .iter()
                    .map(|&i| match (t.mean.get(i), t.q10.get(i), t.q90.get(i)) {
                        (Some(&m), Some(&lo), Some(&hi)) => entry(m, lo, hi),
                        _ => "–".into(),
                    })
                    .collect()
            })
            .collect();
        let _ = writeln!(md, "Curve `{name}`:\n");
        if with.len() > 1 && rows.iter().all(|r| *r == rows[0]) {
            let every = CellSummary {
                sampler: "(every sampler)".into(),
                setting: String::new(),
                ..with[0].clone()
            };
            write_table(md, &[&every], &head, &rows[..1]);
        } else {
            write_table(md, &with, &head, &rows);
        }
    }
}

/// A curve's point: integers without decimals, else as [`fmt`].
fn abscissa(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e9 {
        format!("{x:.0}")
    } else {
        fmt(x)
    }
}
