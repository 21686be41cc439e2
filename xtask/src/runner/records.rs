//! The job and replicate records on disk: writing, reading, checking a
//! job's state and its chain file.

use super::{Job, chain_path};
use crate::files::write_file;
use crate::ids::{job_id, replicate_id};
use crate::npy::read_chain_header;
use crate::summary::{JobRecord, RunParams, StudyRecord, depends_on_clock};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// Writes a record as `jobs_dir/<id>.json`, atomically.
pub fn write_record<R: RecordFile>(jobs_dir: &Path, record: &R) -> Result<()> {
    let path = jobs_dir.join(format!("{}.json", record.id()));
    write_file(&path, serde_json::to_string_pretty(record)?.as_bytes())
}

/// Whether a job's results are complete in the output directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum JobState {
    /// Its record parses, matches the job, and its chain file (if kept) is whole.
    Done,
    /// Its record is fine but its chain file is missing.
    NoChainFile,
    /// No usable record (none, another run's, or damaged: reported).
    Absent,
}

/// The state of `job` in `dir`. A damaged record or chain file is reported
/// (naming it) and counts as absent, so the job is rerun and the file
/// replaced.
pub(super) fn job_state(
    dir: &Path,
    job: &Job,
    params: RunParams,
    experiment: &str,
    write_chains: bool,
) -> JobState {
    let (t, s, set) = job.cell.key();
    let path = dir
        .join("jobs")
        .join(format!("{}.json", job_id(&t, &s, &set, job.chain)));
    let record: JobRecord = match read_record(&path) {
        Ok(Some(r)) => r,
        Ok(None) => return JobState::Absent,
        Err(e) => {
            say_err!("warning: {e:#}; rerunning that chain");
            return JobState::Absent;
        }
    };
    if record.params != params || record.experiment != experiment {
        return JobState::Absent;
    }
    if (
        &record.target,
        &record.sampler,
        &record.setting,
        record.chain,
        record.iterations,
    ) != (&t, &s, &set, job.chain, job.cell.iterations)
    {
        say_err!(
            "warning: {} belongs to another chain; rerunning this one",
            path.display()
        );
        return JobState::Absent;
    }
    if !write_chains {
        return JobState::Done;
    }
    let chain = chain_path(dir, &record);
    if !chain.exists() {
        return JobState::NoChainFile;
    }
    match check_chain(&chain, &record) {
        Ok(()) => JobState::Done,
        Err(e) => {
            say_err!("warning: {e:#}; rerunning that chain");
            JobState::Absent
        }
    }
}

/// Checks that the chain file at `path` is whole and has `record`'s draws.
pub(super) fn check_chain(path: &Path, record: &JobRecord) -> Result<()> {
    let header = read_chain_header(path)?;
    if header.rows as u64 != record.iterations {
        bail!(
            "{} has {} draws but its record says {}",
            path.display(),
            header.rows,
            record.iterations
        );
    }
    Ok(())
}

/// A record file (`jobs/*.json`) of a chain or of a study's replicate.
pub trait RecordFile: serde::Serialize + serde::de::DeserializeOwned + PartialEq + Clone {
    /// The experiment that wrote it.
    fn experiment(&self) -> &str;
    /// The run parameters it was made with.
    fn params(&self) -> RunParams;
    /// Its file stem.
    fn id(&self) -> String;
    /// The record without its wall times: what two runs of one job share.
    fn timeless(&self) -> Self;
}

impl RecordFile for JobRecord {
    fn experiment(&self) -> &str {
        &self.experiment
    }
    fn params(&self) -> RunParams {
        self.params
    }
    fn id(&self) -> String {
        job_id(&self.target, &self.sampler, &self.setting, self.chain)
    }
    fn timeless(&self) -> Self {
        let mut r = self.clone();
        r.wall_time_secs = 0.0;
        r.metrics.retain(|name, _| !depends_on_clock(name));
        r.curves.retain(|name, _| !depends_on_clock(name));
        r
    }
}

impl RecordFile for StudyRecord {
    fn experiment(&self) -> &str {
        &self.experiment
    }
    fn params(&self) -> RunParams {
        self.params
    }
    fn id(&self) -> String {
        replicate_id(self.replicate)
    }
    fn timeless(&self) -> Self {
        let mut r = self.clone();
        r.wall_time_secs = 0.0;
        for row in &mut r.rows {
            row.wall_time_secs = 0.0;
            row.metrics.retain(|name, _| !depends_on_clock(name));
        }
        r
    }
}

/// Reads the record at `path`: `None` if there is no such file, an error
/// naming the file if it cannot be read or parsed.
pub fn read_record<R: RecordFile>(path: &Path) -> Result<Option<R>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let record = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a valid record", path.display()))?;
    Ok(Some(record))
}

/// The experiment a record file names, if it is JSON with an `experiment`
/// field (whether or not it is a record of the kind expected).
pub(super) fn experiment_of(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["experiment"].as_str().map(str::to_string)
}

/// Every record file (`*.json`) in `jobs_dir`, parsed or with the error
/// that names it.
pub(super) fn record_files<R: RecordFile>(jobs_dir: &Path) -> Result<Vec<(PathBuf, Result<R>)>> {
    let entries =
        std::fs::read_dir(jobs_dir).with_context(|| format!("listing {}", jobs_dir.display()))?;
    let mut out = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("listing {}", jobs_dir.display()))?
            .path();
        if path.extension().is_some_and(|e| e == "json") {
            let record = read_record(&path)
                .and_then(|r| r.with_context(|| format!("{} vanished", path.display())));
            out.push((path, record));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The records of `experiment` made with `params` in `jobs_dir`; damaged
/// ones are reported and skipped (their jobs were rerun, or belong to
/// another shard).
pub(super) fn read_records<R: RecordFile>(
    jobs_dir: &Path,
    experiment: &str,
    params: RunParams,
) -> Result<Vec<R>> {
    let mut out = Vec::new();
    for (_, record) in record_files::<R>(jobs_dir)? {
        match record {
            Ok(r) if r.experiment() == experiment && r.params() == params => out.push(r),
            Ok(_) => {}
            Err(e) => say_err!("warning: {e:#}; skipped"),
        }
    }
    Ok(out)
}
