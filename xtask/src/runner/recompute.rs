//! Adding to a summary the metrics that are functions of the recorded draws
//! alone, computed from the chains a run stored, without running a chain.

use super::{
    announce, chain_file, experiment_dir, input_experiment_dir, read_summary, summary_files,
};
use crate::experiment::Experiment;
use crate::files::{Access, lock_dir, replace_dir};
use crate::npy::read_chain;
use crate::provenance::{Recomputation, RunRecord};
use crate::spec::Metric;
use crate::summary::{MetricStats, Summary};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

/// Adds to `out/<name>/summary.json` the metrics of the experiment's
/// protocol that are functions of the recorded draws alone
/// ([`Metric::draw_statistic`]) and that some of its cells lack, computed
/// from the chains stored under `chains` (`DIR/<name>/` or `DIR`, holding
/// `chains/`); then decides the claims again, rewrites the report and the
/// figures, and leaves a run record in `out/<name>/runs/` that says what
/// was added, to which cells, from which chains and at which commit.
///
/// The cells touched are the done cells that lack such a metric. Every
/// chain of each must be stored with the cell's number of draws, and must
/// first reproduce bit for bit every such metric the cell holds (at least
/// one: otherwise nothing shows that they are the chains that made it).
/// Every other cell stays as it was. Everything is checked before anything
/// is written: a failed recompute, or one with nothing to add, leaves the
/// output untouched. Returns what was added (no cells: nothing was).
pub fn recompute(experiment: &Experiment, chains: &Path, out: &Path) -> Result<Recomputation> {
    let (started, clock) = (SystemTime::now(), Instant::now());
    let load_start = crate::machine::load_average();
    // the commit whose code computes the metrics
    let commit = crate::provenance::commit();
    let Some(protocol) = &experiment.protocol else {
        bail!(
            "{} is not a grid of chains: recompute applies to grids only",
            experiment.name
        );
    };
    let families: Vec<(&Metric, &str)> = protocol
        .metrics
        .iter()
        .filter_map(|m| m.draw_statistic().map(|name| (m, name)))
        .collect();
    if families.is_empty() {
        bail!(
            "no metric of {} is a function of the stored draws alone: there is nothing to \
             recompute",
            experiment.name
        );
    }
    let source = chains_source(chains, experiment)?;
    let dir = experiment_dir(out, experiment);
    // locked before the summary is read, so no run rewrites it in between
    let _lock = lock_dir(&dir, Access::Whole)?;
    let mut summary = read_summary(experiment, &dir)?;
    let grid = protocol.cells_at(summary.params.size());
    let mut done = Recomputation {
        chains: source.display().to_string(),
        metrics: Vec::new(),
        checked: Vec::new(),
        cells: Vec::new(),
    };
    for held in summary.cells.iter_mut().filter(|c| c.status == "done") {
        let (lacking, check): (Vec<&str>, Vec<&str>) = families
            .iter()
            .map(|(_, name)| *name)
            .partition(|name| !held.metrics.contains_key(*name));
        if lacking.is_empty() {
            continue;
        }
        let label = held.name();
        let key = (
            held.target.clone(),
            held.sampler.clone(),
            held.setting.clone(),
        );
        let Some(cell) = grid.iter().find(|c| c.key() == key) else {
            bail!("the summary holds {label}, which the current grid has no more: rerun the grid");
        };
        if (cell.iterations, cell.burn_in) != (held.iterations, held.burn_in) {
            bail!(
                "{label} ran {} + {} iterations, the current grid {} + {}: rerun the grid",
                held.burn_in,
                held.iterations,
                cell.burn_in,
                cell.iterations
            );
        }
        if check.is_empty() {
            bail!(
                "{label} holds none of {}: nothing shows that the stored chains are the ones \
                 that made it",
                families
                    .iter()
                    .map(|(_, n)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let mut values: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for k in 0..held.chains {
            let path = chain_file(&source, &held.target, &held.sampler, &held.setting, k);
            let (samples, d) =
                read_chain(&path).with_context(|| format!("chain {k} of {label}"))?;
            let draws = samples.len().checked_div(d).unwrap_or(0);
            if draws as u64 != held.iterations {
                bail!(
                    "{} holds {draws} draws, but {label} recorded {} per chain",
                    path.display(),
                    held.iterations
                );
            }
            let walkers = cell.sampler.walkers(d);
            for (metric, name) in &families {
                let value = metric
                    .on_draws(&samples, d, walkers)
                    .with_context(|| format!("{name} of {}", path.display()))?;
                values.entry(name).or_default().push(value);
            }
        }
        for name in &check {
            let summary_values = &held.metrics[*name].values;
            let stored = &values[name];
            let bits = |v: &[f64], k: usize| v.get(k).map(|x| x.to_bits());
            if let Some(k) = (0..summary_values.len().max(stored.len()))
                .find(|&k| bits(summary_values, k) != bits(stored, k))
            {
                bail!(
                    "the stored chain {k} of {label} gives {name} = {:?}, the summary holds {:?}: \
                     these are not the chains that made the summary (or {name} is now computed \
                     otherwise), so nothing was recomputed",
                    stored.get(k),
                    summary_values.get(k)
                );
            }
        }
        for name in &lacking {
            let stats = MetricStats::new(values.remove(name).expect("computed above"));
            held.metrics.insert(name.to_string(), stats);
        }
        for (names, into) in [(&lacking, &mut done.metrics), (&check, &mut done.checked)] {
            for name in names.iter() {
                if !into.iter().any(|n| n == name) {
                    into.push(name.to_string());
                }
            }
        }
        done.cells.push(label);
    }
    if done.cells.is_empty() {
        say!(
            "every done cell of {} holds {} already: nothing to recompute",
            experiment.name,
            families
                .iter()
                .map(|(_, n)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(done);
    }
    summary.notes = protocol.notes.into();
    summary.claims = (protocol.claims)(&summary);
    // the summary with the metrics and the record saying where they came
    // from, together or not at all
    replace_dir(&dir, |staging| {
        summary_files(&summary, protocol.figures, staging, Summary::markdown)?;
        RunRecord {
            recomputed: Some(done.clone()),
            ..RunRecord::of_this_process(
                commit,
                started,
                clock.elapsed(),
                load_start,
                1,
                summary.params.quick,
                None,
            )
        }
        .write(staging)
    })?;
    announce(&summary, &dir);
    say!(
        "  added {} to {} cell(s) from {}, after their chains reproduced {} bit for bit",
        done.metrics.join(", "),
        done.cells.len(),
        done.chains,
        done.checked.join(", ")
    );
    Ok(done)
}

/// The experiment directory holding the stored chains (`DIR/<name>/` or
/// `DIR` itself, with a `chains/` directory), resolved to an absolute path
/// for the run record.
fn chains_source(input: &Path, experiment: &Experiment) -> Result<PathBuf> {
    let src = input_experiment_dir(
        input,
        experiment,
        "chains",
        " (a run with --no-chains stores none)",
    )?;
    std::fs::canonicalize(&src).with_context(|| format!("resolving {}", src.display()))
}
