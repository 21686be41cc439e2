//! Folding the cells of a restricted run (`reproduce --setting`) into an
//! experiment's existing summary.

use super::merge::gather;
use super::{experiment_dir, read_summary, write_outputs};
use crate::aggregate::Folded;
use crate::experiment::Experiment;
use crate::files::{Access, copy_file, create_dir, lock_dir};
use crate::summary::{JobRecord, Summary};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// Folds the cells whose job records are in `inputs` (each `DIR/<name>/` or
/// `DIR`) into `out/<name>/summary.json` (see [`Summary::fold`]: new cells
/// are added, cells the summary holds must be reproduced bit for bit, every
/// other cell stays as it was), copies the inputs' run records into
/// `out/<name>/runs/` so the summary still says how each cell was made, and
/// rewrites the summary, the report and the figures.
///
/// Every input must hold a run record. Everything is checked before
/// anything is written: a failed fold leaves the output untouched.
pub fn fold(experiment: &Experiment, inputs: &[PathBuf], out: &Path) -> Result<Folded> {
    let Some(protocol) = &experiment.protocol else {
        bail!(
            "{} is not a grid of cells: fold applies to grids only",
            experiment.name
        );
    };
    let dir = experiment_dir(out, experiment);
    let mut summary: Summary = read_summary(experiment, &dir)?;
    let gathered = gather::<JobRecord>(experiment, inputs)?;
    let mut runs: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut sources: Vec<&Path> = gathered.iter().map(|g| g.source.as_path()).collect();
    sources.dedup();
    for source in sources {
        let found = run_records(source)?;
        if found.is_empty() {
            bail!(
                "{} holds no run record in runs/: the fold could not say how its cells were made",
                source.display()
            );
        }
        runs.extend(found.into_iter().map(|from| {
            (
                dir.join("runs").join(from.file_name().expect("a file")),
                from,
            )
        }));
    }
    let records: Vec<JobRecord> = gathered.into_iter().map(|g| g.record).collect();
    if records.is_empty() {
        bail!("no job record of {} in the inputs", experiment.name);
    }
    let cells = protocol.cells_at(summary.params.size());
    let folded = summary.fold(experiment, protocol, &cells, &records)?;
    let _lock = lock_dir(&dir, Access::Whole)?;
    create_dir(&dir.join("runs"))?;
    for (to, from) in &runs {
        copy_file(from, to)?;
    }
    write_outputs(&summary, protocol.figures, &dir, Summary::markdown)?;
    for cell in &folded.added {
        println!("  added {cell}");
    }
    for cell in &folded.reproduced {
        println!("  reproduced bit for bit (kept as it was): {cell}");
    }
    Ok(folded)
}

/// The run records (`runs/*.json`) of an experiment directory, sorted.
fn run_records(source: &Path) -> Result<Vec<PathBuf>> {
    let runs = source.join("runs");
    let Ok(entries) = std::fs::read_dir(&runs) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("reading {}", runs.display()))?
            .path();
        if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}
