//! Aggregating per-job records into an experiment's [`Summary`]: the
//! statistics of every metric over the chains of each cell (or the
//! replicates of a study), then the paper's claims checked against them.

use crate::experiment::{Cell, Experiment, Protocol, Study};
use crate::summary::{
    CellSummary, Curve, CurveStats, JobRecord, MetricStats, RunParams, StudyRecord, Summary,
};
use anyhow::{Result, bail};
use std::collections::BTreeMap;

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
