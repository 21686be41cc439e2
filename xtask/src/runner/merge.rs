//! Merging shard outputs into one experiment directory.

use super::records::{RecordFile, check_chain, experiment_of, record_files};
use super::{
    Figures, Markdown, announce, chain_path, experiment_dir, input_experiment_dir, open_output,
    summary_files,
};
use crate::experiment::Experiment;
use crate::files::{copy_file, create_dir, replace_dir};
use crate::provenance::RunRecord;
use crate::summary::{JobRecord, RunParams, StudyRecord, Summary};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Merges the shard outputs found in `inputs` (each `DIR/<name>/` or `DIR`)
/// into `out/<name>/`: copies their records, chains and run records (so the
/// merged results still say how each shard was made) and writes the summary.
///
/// Everything is checked before anything is written: every record and run
/// record parses, no two inputs disagree on a job, the shards used the same
/// parameters, the grid (or every replicate) is complete and every chain
/// file present is whole. The merged output is made in a copy of the output
/// directory that replaces it only once whole: a failed merge leaves the
/// output untouched.
pub fn merge(experiment: &Experiment, inputs: &[PathBuf], out: &Path) -> Result<Summary> {
    let dir = experiment_dir(out, experiment);
    if let Some(study) = &experiment.study {
        let gathered = gather::<StudyRecord>(experiment, inputs)?;
        let params = agreed_params(&gathered, "replicate")?;
        let mut records: Vec<StudyRecord> = gathered.iter().map(|g| g.record.clone()).collect();
        records.sort_by_key(|r| r.replicate);
        let summary = Summary::from_study(experiment, study, params, &records)?;
        let runs = source_runs(&gathered)?;
        let outputs = (study.figures, Summary::study_markdown as Markdown);
        write_merged(&dir, &gathered, &[], &runs, &summary, outputs)?;
        return Ok(summary);
    }
    let Some(protocol) = &experiment.protocol else {
        bail!("{} is not implemented yet", experiment.name);
    };
    let gathered = gather::<JobRecord>(experiment, inputs)?;
    let params = agreed_params(&gathered, "job")?;
    let records: Vec<JobRecord> = gathered.iter().map(|g| g.record.clone()).collect();
    let cells = protocol.cells_at(params.size());
    let summary = Summary::aggregate(experiment, protocol, params, &cells, &records)?;
    let mut chains = Vec::new();
    for g in &gathered {
        let from = chain_path(&g.source, &g.record);
        if from.exists() {
            check_chain(&from, &g.record)
                .with_context(|| format!("delete {} and rerun its shard", from.display()))?;
            chains.push((from, chain_path(&dir, &g.record)));
        }
    }
    let runs = source_runs(&gathered)?;
    let outputs = (protocol.figures, Summary::markdown as Markdown);
    write_merged(&dir, &gathered, &chains, &runs, &summary, outputs)?;
    Ok(summary)
}

/// Writes the merged output into the experiment directory `dir`, whole or
/// not at all: the gathered records, the `chains` (from, to) and the run
/// record files `runs` (see [`copy_merged`]), then the figures and the
/// summary of `summary`.
fn write_merged<R: RecordFile>(
    dir: &Path,
    gathered: &[Gathered<R>],
    chains: &[(PathBuf, PathBuf)],
    runs: &[PathBuf],
    summary: &Summary,
    (figures, markdown): (Figures, Markdown),
) -> Result<()> {
    let _lock = open_output(dir, None)?;
    replace_dir(dir, |staging| {
        copy_merged(dir, staging, gathered, chains, runs)?;
        summary_files(summary, figures, staging, markdown)
    })?;
    announce(summary, dir);
    Ok(())
}

/// A record found by [`gather`], with where it came from.
pub(super) struct Gathered<R> {
    pub(super) record: R,
    /// Its file.
    file: PathBuf,
    /// The experiment directory it was found in.
    pub(super) source: PathBuf,
}

/// Every record of `experiment` in `inputs`, once per job: an error names
/// the file if a record does not parse, and both files if two inputs hold
/// different results for one job (the same results with other wall times
/// are one job run twice).
pub(super) fn gather<R: RecordFile>(
    experiment: &Experiment,
    inputs: &[PathBuf],
) -> Result<Vec<Gathered<R>>> {
    let mut by_id: BTreeMap<String, Gathered<R>> = BTreeMap::new();
    // the experiments of the records skipped as another experiment's
    let mut others: Vec<String> = Vec::new();
    for input in inputs {
        let source = input_experiment_dir(input, experiment, "jobs", "")?;
        for (file, record) in record_files::<R>(&source.join("jobs"))? {
            // another experiment's record (of another kind, it may not parse as one of ours)
            let foreign = match &record {
                Ok(r) => Some(r.experiment().to_string()),
                Err(_) => experiment_of(&file),
            }
            .filter(|name| name != experiment.name);
            if let Some(name) = foreign {
                if !others.contains(&name) {
                    others.push(name);
                }
                continue;
            }
            let record = record.with_context(|| {
                format!(
                    "{} is damaged: delete it and rerun its shard",
                    file.display()
                )
            })?;
            match by_id.entry(record.id()) {
                std::collections::btree_map::Entry::Vacant(slot) => {
                    slot.insert(Gathered {
                        record,
                        file,
                        source: source.clone(),
                    });
                }
                std::collections::btree_map::Entry::Occupied(seen) => {
                    if seen.get().record.timeless() != record.timeless() {
                        bail!(
                            "{} and {} hold different results for {} (made with other code \
                             or settings): delete the wrong one",
                            seen.get().file.display(),
                            file.display(),
                            record.id()
                        );
                    }
                }
            }
        }
    }
    if by_id.is_empty() && !others.is_empty() {
        let dirs: Vec<String> = inputs.iter().map(|d| d.display().to_string()).collect();
        bail!(
            "{} hold(s) records of {}, none of {}: another experiment's output?",
            dirs.join(", "),
            others.join(", "),
            experiment.name
        );
    }
    Ok(by_id.into_values().collect())
}

/// The parameters every gathered record was made with; an error if there
/// are none, or naming a record of each side if the shards disagree.
fn agreed_params<R: RecordFile>(gathered: &[Gathered<R>], kind: &str) -> Result<RunParams> {
    let Some(first) = gathered.first() else {
        bail!("no {kind} records found in the given directories");
    };
    let params = first.record.params();
    if let Some(other) = gathered.iter().find(|g| g.record.params() != params) {
        bail!(
            "the shards disagree: {} was made with `{params}`, {} with `{}`; every shard \
             must run with the same --size, --seed and --chains (delete the records of the \
             wrong run, or rerun its shard)",
            first.file.display(),
            other.file.display(),
            other.record.params()
        );
    }
    Ok(params)
}

/// The experiment directories the gathered records came from, each once.
pub(super) fn sources<R>(gathered: &[Gathered<R>]) -> Vec<&Path> {
    let mut sources: Vec<&Path> = gathered.iter().map(|g| g.source.as_path()).collect();
    sources.sort();
    sources.dedup();
    sources
}

/// The run record files (`runs/*.json`) of the directories the gathered
/// records came from; an error names one that does not parse.
fn source_runs<R>(gathered: &[Gathered<R>]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for source in sources(gathered) {
        files.extend(RunRecord::read_files(source)?.into_iter().map(|(f, _)| f));
    }
    Ok(files)
}

/// Copies the gathered records, the `chains` (from, to, a path in `dir`)
/// and the run record files `runs` that are not already in the experiment
/// directory `dir` into `staging`, the copy of `dir` that will replace it.
fn copy_merged<R>(
    dir: &Path,
    staging: &Path,
    gathered: &[Gathered<R>],
    chains: &[(PathBuf, PathBuf)],
    runs: &[PathBuf],
) -> Result<()>
where
    R: RecordFile,
{
    let canonical =
        |p: &Path| std::fs::canonicalize(p).with_context(|| format!("resolving {}", p.display()));
    let here = canonical(dir)?;
    let staged = |to: &Path| staging.join(to.strip_prefix(dir).expect("a path in dir"));
    let jobs = staging.join("jobs");
    for g in gathered {
        if canonical(&g.source)? != here {
            copy_file(&g.file, &jobs.join(format!("{}.json", g.record.id())))?;
        }
    }
    for (from, to) in chains {
        if canonical(from)? != canonical(to).unwrap_or_default() {
            let to = staged(to);
            create_dir(to.parent().expect("a chain path has a parent"))?;
            copy_file(from, &to)?;
        }
    }
    for from in runs {
        let to = dir
            .join("runs")
            .join(from.file_name().expect("a record file has a name"));
        if canonical(from)? != canonical(&to).unwrap_or_default() {
            create_dir(&staging.join("runs"))?;
            copy_file(from, &staged(&to))?;
        }
    }
    Ok(())
}
