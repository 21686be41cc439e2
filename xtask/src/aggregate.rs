//! Aggregating per-job records into an experiment's [`Summary`]: the
//! statistics of every metric over the chains of each cell (or the
//! replicates of a study), then the paper's claims checked against them.

use crate::experiment::{Cell, Experiment, Protocol, Study};
use crate::summary::{
    CellSummary, Curve, CurveStats, JobRecord, MetricStats, RunParams, StudyRecord, Summary,
    depends_on_clock,
};
use anyhow::{Result, bail};
use std::collections::BTreeMap;

/// A job's identity: (target key, sampler label, setting, chain).
type JobKey = (String, String, String, usize);

/// The records by job; an error names a record run with other parameters
/// or for another experiment.
fn by_job<'a>(
    experiment: &Experiment,
    params: RunParams,
    records: &'a [JobRecord],
) -> Result<BTreeMap<JobKey, &'a JobRecord>> {
    let mut out = BTreeMap::new();
    for r in records {
        if r.params != params || r.experiment != experiment.name {
            bail!(
                "job {}/{}/{}#{} was run with {} of {}, expected {} of {}",
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
        out.insert(
            (
                r.target.clone(),
                r.sampler.clone(),
                r.setting.clone(),
                r.chain,
            ),
            r,
        );
    }
    Ok(out)
}

/// One cell's summary from its chains' records (chains in index order);
/// the ids of the chains without a record are pushed to `missing`.
fn cell_summary(
    cell: &Cell,
    params: RunParams,
    by_job: &BTreeMap<JobKey, &JobRecord>,
    missing: &mut Vec<String>,
) -> Result<CellSummary> {
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
        return Ok(summary);
    }
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut curves: BTreeMap<String, Vec<&Curve>> = BTreeMap::new();
    for k in 0..params.chains {
        let key = (target.clone(), sampler.clone(), setting.clone(), k);
        let Some(r) = by_job.get(&key) else {
            missing.push(crate::ids::job_id(&target, &sampler, &setting, k));
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
    Ok(summary)
}

/// What [`Summary::fold`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Folded {
    /// Cells added to the summary, or that replaced a pending one.
    pub added: Vec<FoldedCell>,
    /// Cells the summary already held, whose records reproduced every
    /// clock-independent value bit for bit; the summary keeps its own.
    pub reproduced: Vec<FoldedCell>,
}

/// A cell [`Summary::fold`] added or checked.
#[derive(Debug, Clone, PartialEq)]
pub struct FoldedCell {
    /// (target key, sampler label, setting), as in the job records.
    pub key: (String, String, String),
    /// `target sampler setting` in the papers' notation.
    pub label: String,
}

impl CellSummary {
    /// The cell without what depends on the clock: wall time and the
    /// per-second metrics and curves.
    pub fn timeless(&self) -> Self {
        let mut c = self.clone();
        c.wall_time_secs = 0.0;
        c.metrics.retain(|name, _| !depends_on_clock(name));
        c.curves.retain(|name, _| !depends_on_clock(name));
        c
    }

    /// The cell as [`Summary::fold`] reports it.
    fn folded(&self) -> FoldedCell {
        FoldedCell {
            key: (
                self.target.clone(),
                self.sampler.clone(),
                self.setting.clone(),
            ),
            label: self.name(),
        }
    }

    /// `target sampler setting`, for messages and run records.
    pub fn name(&self) -> String {
        format!("{} {} {}", self.target_label, self.sampler, self.setting)
            .trim_end()
            .to_string()
    }
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
        let by_job = by_job(experiment, params, records)?;
        let mut missing = Vec::new();
        let out = cells
            .iter()
            .map(|cell| cell_summary(cell, params, &by_job, &mut missing))
            .collect::<Result<Vec<_>>>()?;
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

    /// Folds into this summary the grid cells `records` hold (all chains of
    /// each, run with this summary's parameters), then decides the claims
    /// again.
    ///
    /// A cell the summary lacks or holds as pending is added; a cell it
    /// already holds must be reproduced bit for bit by the records in
    /// everything that does not depend on the clock, and keeps its own
    /// values (an error names the first difference otherwise: the records
    /// were made by other code, and the grid must be rerun whole). Every
    /// other cell stays as it was. The cells end in grid order. Nothing is
    /// changed when an error is returned.
    pub fn fold(
        &mut self,
        experiment: &Experiment,
        protocol: &Protocol,
        cells: &[Cell],
        records: &[JobRecord],
    ) -> Result<Folded> {
        if self.experiment != experiment.name {
            bail!(
                "the summary is of {}, not {}",
                self.experiment,
                experiment.name
            );
        }
        let by_job = by_job(experiment, self.params, records)?;
        let in_grid = |t: &str, s: &str, set: &str| {
            cells.iter().any(|c| {
                let (ct, cs, cset) = c.key();
                (ct.as_str(), cs.as_str(), cset.as_str()) == (t, s, set)
            })
        };
        if let Some((t, s, set, k)) = by_job.keys().find(|(t, s, set, _)| !in_grid(t, s, set)) {
            bail!("job {t}/{s}/{set}#{k} is of no cell of the current grid");
        }
        if let Some(c) = self
            .cells
            .iter()
            .find(|c| !in_grid(&c.target, &c.sampler, &c.setting))
        {
            bail!(
                "the summary holds {}, which the current grid has no more: rerun the grid",
                c.name()
            );
        }
        let mut missing = Vec::new();
        let mut folded = Folded::default();
        let mut out = Vec::with_capacity(cells.len());
        for cell in cells {
            let (t, s, set) = cell.key();
            let held = self
                .cells
                .iter()
                .find(|c| (&c.target, &c.sampler, &c.setting) == (&t, &s, &set));
            let has_records = by_job
                .range((t.clone(), s.clone(), set.clone(), 0)..)
                .next()
                .is_some_and(|((rt, rs, rset, _), _)| (rt, rs, rset) == (&t, &s, &set));
            if !has_records {
                out.extend(held.cloned());
                continue;
            }
            let new = cell_summary(cell, self.params, &by_job, &mut missing)?;
            match held.filter(|c| c.status == "done") {
                Some(old) => {
                    if new.timeless() != old.timeless() {
                        bail!(
                            "the records of {} differ from the summary's values ({}): they were \
                             made by other code, so the grid must be rerun whole",
                            old.name(),
                            first_difference(&old.timeless(), &new.timeless())
                        );
                    }
                    folded.reproduced.push(old.folded());
                    out.push(old.clone());
                }
                None => {
                    folded.added.push(new.folded());
                    out.push(new);
                }
            }
        }
        if !missing.is_empty() {
            bail!(
                "{} job(s) of the cells to fold are missing: {}",
                missing.len(),
                missing.join(", ")
            );
        }
        self.cells = out;
        self.notes = protocol.notes.into();
        self.claims = (protocol.claims)(self);
        Ok(folded)
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
                    "replicate {} was run with {} of {}, expected {} of {}",
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
            .map(crate::ids::replicate_id)
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
}

/// Where two cells' clock-free contents first differ, in words.
fn first_difference(old: &CellSummary, new: &CellSummary) -> String {
    if (old.chains, old.iterations, old.burn_in) != (new.chains, new.iterations, new.burn_in) {
        return format!(
            "{} chains of {} + {} iterations against {} of {} + {}",
            old.chains, old.burn_in, old.iterations, new.chains, new.burn_in, new.iterations
        );
    }
    for (name, a) in &old.metrics {
        let Some(b) = new.metrics.get(name) else {
            return format!("metric {name} is missing from the records");
        };
        if let Some(k) = (0..a.values.len().max(b.values.len()))
            .find(|&k| a.values.get(k).map(|v| v.to_bits()) != b.values.get(k).map(|v| v.to_bits()))
        {
            return format!(
                "{name} of chain {k}: {:?} in the summary, {:?} in the records",
                a.values.get(k),
                b.values.get(k)
            );
        }
    }
    if let Some(name) = new.metrics.keys().find(|n| !old.metrics.contains_key(*n)) {
        return format!("metric {name} is not in the summary");
    }
    "the curves differ".into()
}
