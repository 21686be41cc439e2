//! Folding the cells of a restricted run (`reproduce --setting`) into an
//! experiment's existing summary.

use super::merge::{Gathered, gather, sources};
use super::{announce, experiment_dir, read_summary, summary_files};
use crate::aggregate::Folded;
use crate::experiment::Experiment;
use crate::files::{Access, create_dir, lock_dir, replace_dir};
use crate::provenance::RunRecord;
use crate::summary::{JobRecord, Summary};
use anyhow::{Result, bail};
use std::path::{Path, PathBuf};

/// Folds the cells whose job records are in `inputs` (each `DIR/<name>/` or
/// `DIR`) into `out/<name>/summary.json` (see [`Summary::fold`]: new cells
/// are added, cells the summary holds must be reproduced bit for bit, every
/// other cell stays as it was), copies the inputs' run records into
/// `out/<name>/runs/` so the summary still says how each cell was made
/// (each restricted run with the held cells of its settings that its
/// records reproduced), and rewrites the summary, the report and the
/// figures.
///
/// An input whose run records include restricted runs folds only the job
/// records of their settings (the others, in the directory a whole run
/// also wrote to, are that run's own). Every input must hold a run
/// record. Everything is checked before anything is written, and the new
/// output is made in a copy of the directory that replaces it only once
/// whole: a failed fold leaves the output untouched.
pub fn fold(experiment: &Experiment, inputs: &[PathBuf], out: &Path) -> Result<Folded> {
    let Some(protocol) = &experiment.protocol else {
        bail!(
            "{} is not a grid of cells: fold applies to grids only",
            experiment.name
        );
    };
    let dir = experiment_dir(out, experiment);
    // locked before the summary is read, so no run rewrites it in between
    let _lock = lock_dir(&dir, Access::Whole)?;
    let mut summary: Summary = read_summary(experiment, &dir)?;
    let gathered = gather::<JobRecord>(experiment, inputs)?;
    let mut runs: Vec<(PathBuf, RunRecord, &Path)> = Vec::new();
    for source in sources(&gathered) {
        let found = RunRecord::read_files(source)?;
        if found.is_empty() {
            bail!(
                "{} holds no run record in runs/: the fold could not say how its cells were made",
                source.display()
            );
        }
        for (file, record) in found {
            let name = file.file_name().expect("a record file has a name");
            runs.push((PathBuf::from(name), record, source));
        }
    }
    // An input that also holds the records of a run of every cell (the
    // directory the summary was made in) folds only the cells of its
    // restricted runs' settings: the others are that run's own.
    let restricted_to = |source: &Path| -> Vec<&String> {
        runs.iter()
            .filter(|(_, _, from)| *from == source)
            .flat_map(|(_, record, _)| &record.settings)
            .collect()
    };
    let records: Vec<JobRecord> = gathered
        .iter()
        .filter(|g| {
            let settings = restricted_to(&g.source);
            settings.is_empty() || settings.contains(&&g.record.setting)
        })
        .map(|g| g.record.clone())
        .collect();
    if records.is_empty() {
        bail!("no job record of {} in the inputs", experiment.name);
    }
    let cells = protocol.cells_at(summary.params.size());
    let folded = summary.fold(experiment, protocol, &cells, &records)?;
    replace_dir(&dir, |staging| {
        create_dir(&staging.join("runs"))?;
        for (name, record, source) in &runs {
            credited(record, source, &folded, &gathered)
                .write_as(&staging.join("runs").join(name))?;
        }
        summary_files(&summary, protocol.figures, staging, Summary::markdown)
    })?;
    announce(&summary, &dir);
    for cell in &folded.added {
        say!("  added {}", cell.label);
    }
    for cell in &folded.reproduced {
        say!("  reproduced bit for bit (kept as it was): {}", cell.label);
    }
    Ok(folded)
}

/// The run record `record` of the input `source`, crediting it with the
/// held cells of its settings that the input's records reproduced (a run
/// of every cell, such as the one that made the summary in the same
/// directory, reproduced nothing).
fn credited(
    record: &RunRecord,
    source: &Path,
    folded: &Folded,
    gathered: &[Gathered<JobRecord>],
) -> RunRecord {
    let mut record = record.clone();
    for cell in folded
        .reproduced
        .iter()
        .filter(|cell| record.settings.contains(&cell.key.2))
    {
        let from_here = gathered.iter().any(|g| {
            g.source == source
                && (&g.record.target, &g.record.sampler, &g.record.setting)
                    == (&cell.key.0, &cell.key.1, &cell.key.2)
        });
        if from_here && !record.reproduced.contains(&cell.label) {
            record.reproduced.push(cell.label.clone());
        }
    }
    record
}
