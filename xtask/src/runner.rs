//! Running an experiment's grid (all of it or one shard), writing one record
//! and one `.npy` per chain, and merging records into the summary; and the
//! same for studies, with one record per replicate.

use crate::experiment::{Cell, Experiment, Protocol, Replicate, Study};
use crate::npy::write_chain;
use crate::spec::{BuiltTarget, RunEnv, TargetSpec};
use crate::summary::{JobRecord, RunParams, StudyRecord, Summary};
use anyhow::{Context, Result, bail};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kameleon_samplers::chain_rng;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// One shard i/N (1-based i) of a grid's jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based index.
    pub index: usize,
    /// Number of shards.
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("expected i/N, got `{s}`"))?;
        let index: usize = i.trim().parse().map_err(|e| format!("shard index: {e}"))?;
        let count: usize = n.trim().parse().map_err(|e| format!("shard count: {e}"))?;
        if count == 0 || index == 0 || index > count {
            return Err(format!("need 1 ≤ i ≤ N, got {index}/{count}"));
        }
        Ok(Self { index, count })
    }
}

impl Shard {
    /// Whether the job at position `job` of the canonical job list belongs
    /// to this shard (round robin, so shards get balanced mixes of cells).
    pub fn contains(&self, job: usize) -> bool {
        job % self.count == self.index - 1
    }
}

/// How to run an experiment.
///
/// For a study, `chains` is the number of replicates, `shard` splits the
/// replicates round robin, and `write_chains` does not apply.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The small size.
    pub quick: bool,
    /// The master seed.
    pub seed: u64,
    /// Chains per cell (default: the protocol's).
    pub chains: Option<usize>,
    /// The output root; the experiment writes into `out/<name>/`.
    pub out: PathBuf,
    /// Run only this shard of the jobs.
    pub shard: Option<Shard>,
    /// Write the raw post-burn-in chains as `.npy`.
    pub write_chains: bool,
    /// Rerun jobs whose record already exists.
    pub force: bool,
    /// Show progress bars (only on a terminal).
    pub progress: bool,
}

/// One chain of one cell.
#[derive(Debug, Clone)]
struct Job<'a> {
    cell: &'a Cell,
    chain: usize,
}

/// The id of a job (its record's file stem).
pub fn job_id(target: &str, sampler: &str, setting: &str, chain: usize) -> String {
    let setting = if setting.is_empty() { "-" } else { setting };
    sanitize(&format!("{target}__{sampler}__{setting}__{chain}"))
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.=".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// SplitMix64 finaliser: decorrelates nearby seeds.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a hash of a string: stable across platforms and Rust versions.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The seed of a cell's streams: from the master seed and the cell's key,
/// never from its position, so adding cells changes no other cell's numbers.
pub fn cell_seed(master: u64, cell: &Cell) -> u64 {
    let (t, s, set) = cell.key();
    splitmix64(master ^ fnv1a(&format!("{t}|{s}|{set}")))
}

/// The id of a study's replicate (its record's file stem).
pub fn replicate_id(replicate: usize) -> String {
    format!("replicate-{replicate}")
}

/// The seed of a study's replicate: from the master seed, the experiment's
/// name and the replicate's index.
pub fn replicate_seed(master: u64, experiment: &str, replicate: usize) -> u64 {
    splitmix64(splitmix64(master ^ fnv1a(experiment)) ^ replicate as u64)
}

/// The experiment's output directory.
pub fn experiment_dir(out: &Path, experiment: &Experiment) -> PathBuf {
    out.join(experiment.name)
}

fn chain_path(dir: &Path, r: &JobRecord) -> PathBuf {
    let mut p = dir
        .join("chains")
        .join(sanitize(&r.target))
        .join(sanitize(&r.sampler));
    if !r.setting.is_empty() {
        p = p.join(sanitize(&r.setting));
    }
    p.join(format!("{}.npy", r.chain))
}

/// Runs the experiment (or one shard). Returns the summary when the whole
/// grid is present in the output directory afterwards (always without
/// `--shard`).
pub fn reproduce(experiment: &Experiment, opts: &RunOptions) -> Result<Option<Summary>> {
    if let Some(study) = &experiment.study {
        return reproduce_study(experiment, study, opts);
    }
    let Some(protocol) = &experiment.protocol else {
        bail!(
            "{} is not implemented yet: {}",
            experiment.name,
            experiment.missing
        );
    };
    let params = RunParams {
        quick: opts.quick,
        seed: opts.seed,
        chains: opts.chains.unwrap_or(if opts.quick {
            protocol.quick_chains
        } else {
            protocol.chains
        }),
    };
    if params.chains == 0 {
        bail!("--chains must be at least 1");
    }
    let cells = (protocol.cells)(opts.quick);
    let dir = experiment_dir(&opts.out, experiment);
    let jobs_dir = dir.join("jobs");
    std::fs::create_dir_all(&jobs_dir)
        .with_context(|| format!("creating {}", jobs_dir.display()))?;

    let all: Vec<Job> = cells
        .iter()
        .filter(|c| c.sampler.pending().is_none())
        .flat_map(|cell| (0..params.chains).map(move |chain| Job { cell, chain }))
        .collect();
    let mine: Vec<Job> = all
        .into_iter()
        .enumerate()
        .filter(|(i, _)| opts.shard.is_none_or(|s| s.contains(*i)))
        .map(|(_, j)| j)
        .filter(|j| opts.force || existing_record(&jobs_dir, j, &params, experiment).is_none())
        .collect();

    let tracker = Progress::new(opts, experiment.name, mine.len());
    let bars = &tracker.bars;
    let overall = bars.add(ProgressBar::new(mine.len() as u64));
    overall.set_style(
        ProgressStyle::with_template("{prefix} chains {pos}/{len} [{elapsed_precise}] ETA {eta}")
            .expect("static template"),
    );
    overall.set_prefix(experiment.name);
    let chain_style = ProgressStyle::with_template(
        "{prefix:>40} [{bar:30}] {percent:>3}% {per_sec:>10} ETA {eta}",
    )
    .expect("static template")
    .progress_chars("=> ");
    // Each target is built once, with its reference sample if it needs one
    // (computed here, before the chains, if not cached in the output root).
    let env = RunEnv {
        out: opts.out.clone(),
        quick: opts.quick,
        seed: opts.seed,
    };
    let mut targets: Vec<(TargetSpec, BuiltTarget)> = Vec::new();
    for job in &mine {
        if !targets.iter().any(|(t, _)| *t == job.cell.target) {
            targets.push((job.cell.target, job.cell.target.prepare(&env)?));
        }
    }
    let started = Instant::now();
    let new_records: Vec<JobRecord> = mine
        .par_iter()
        .map(|job| {
            let bar = bars.insert_before(
                &overall,
                ProgressBar::new(job.cell.burn_in + job.cell.iterations),
            );
            bar.set_style(chain_style.clone());
            bar.set_prefix(format!(
                "{} {} {} #{}",
                job.cell.target.label(),
                job.cell.sampler.label(),
                job.cell.setting,
                job.chain
            ));
            let built = targets
                .iter()
                .find(|(t, _)| *t == job.cell.target)
                .map(|(_, b)| b)
                .expect("every job's target was prepared");
            let record = run_job(experiment, protocol, params, &dir, job, built, opts, &bar)?;
            bar.finish_and_clear();
            bars.remove(&bar);
            overall.inc(1);
            tracker.finished(&bar.prefix());
            Ok(record)
        })
        .collect::<Result<_>>()?;
    overall.finish_and_clear();
    report_wall_times(&new_records, started.elapsed().as_secs_f64());

    let records: Vec<JobRecord> = read_records(&jobs_dir, experiment.name, Some(params))?;
    match opts.shard {
        Some(s) if s.count > 1 => {
            println!(
                "shard {}/{}: {} chain(s) run, {} record(s) in {}; combine the shards with \
                 `cargo xtask merge {} DIR…`",
                s.index,
                s.count,
                new_records.len(),
                records.len(),
                jobs_dir.display(),
                experiment.name
            );
            Ok(None)
        }
        _ => {
            let summary = Summary::aggregate(experiment, protocol, params, &cells, &records)?;
            write_outputs(&summary, protocol.figures, &dir, Summary::markdown)?;
            Ok(Some(summary))
        }
    }
}

/// Runs a study (or the replicates of one shard), writing one record per
/// replicate; like [`reproduce`] for grids.
fn reproduce_study(
    experiment: &Experiment,
    study: &Study,
    opts: &RunOptions,
) -> Result<Option<Summary>> {
    let params = RunParams {
        quick: opts.quick,
        seed: opts.seed,
        chains: opts.chains.unwrap_or(if opts.quick {
            study.quick_replicates
        } else {
            study.replicates
        }),
    };
    if params.chains == 0 {
        bail!("--chains (replicates of a study) must be at least 1");
    }
    let dir = experiment_dir(&opts.out, experiment);
    let jobs_dir = dir.join("jobs");
    std::fs::create_dir_all(&jobs_dir)
        .with_context(|| format!("creating {}", jobs_dir.display()))?;
    let existing: Vec<usize> = read_records(&jobs_dir, experiment.name, Some(params))?
        .into_iter()
        .map(|r: StudyRecord| r.replicate)
        .collect();
    let mine: Vec<usize> = (0..params.chains)
        .filter(|&k| opts.shard.is_none_or(|s| s.contains(k)))
        .filter(|k| opts.force || !existing.contains(k))
        .collect();

    let tracker = Progress::new(opts, experiment.name, mine.len());
    let bars = &tracker.bars;
    let style = ProgressStyle::with_template("{prefix:>40} [{bar:30}] {pos}/{len} ETA {eta}")
        .expect("static template")
        .progress_chars("=> ");
    let started = Instant::now();
    mine.par_iter()
        .map(|&k| {
            let bar = bars.add(ProgressBar::new(1));
            bar.set_style(style.clone());
            bar.set_prefix(format!("{} replicate {k}", experiment.name));
            let progress = |done: u64, total: u64| {
                bar.set_length(total);
                bar.set_position(done);
            };
            let seed = replicate_seed(params.seed, experiment.name, k);
            let replicate = Replicate {
                quick: params.quick,
                seed,
                progress: &progress,
            };
            let clock = Instant::now();
            let rows = (study.run)(&replicate)
                .with_context(|| format!("{} replicate {k}", experiment.name))?;
            for row in &rows {
                if let Some((name, v)) = row.metrics.iter().find(|(_, v)| !v.is_finite()) {
                    bail!(
                        "{} replicate {k}: {name} of {} {} {} is {v}",
                        experiment.name,
                        row.target,
                        row.method,
                        row.setting
                    );
                }
            }
            let record = StudyRecord {
                experiment: experiment.name.into(),
                params,
                replicate: k,
                seed,
                wall_time_secs: clock.elapsed().as_secs_f64(),
                rows,
            };
            let id = replicate_id(k);
            let tmp = jobs_dir.join(format!("{id}.json.tmp"));
            std::fs::write(&tmp, serde_json::to_string_pretty(&record)?)?;
            std::fs::rename(&tmp, jobs_dir.join(format!("{id}.json")))?;
            bar.finish_and_clear();
            bars.remove(&bar);
            tracker.finished(&bar.prefix());
            Ok(())
        })
        .collect::<Result<()>>()?;
    println!(
        "  ran {} replicate(s) of {}; elapsed {:.1} s",
        mine.len(),
        experiment.name,
        started.elapsed().as_secs_f64()
    );
    let records: Vec<StudyRecord> = read_records(&jobs_dir, experiment.name, Some(params))?;
    match opts.shard {
        Some(s) if s.count > 1 => {
            println!(
                "shard {}/{}: {} replicate(s) run, {} record(s) in {}; combine the shards with \
                 `cargo xtask merge {} DIR…`",
                s.index,
                s.count,
                mine.len(),
                records.len(),
                jobs_dir.display(),
                experiment.name
            );
            Ok(None)
        }
        _ => {
            let summary = Summary::from_study(experiment, study, params, &records)?;
            write_outputs(&summary, study.figures, &dir, Summary::study_markdown)?;
            Ok(Some(summary))
        }
    }
}

/// Merges the shard outputs found in `inputs` (each `DIR/<name>/` or `DIR`)
/// into `out/<name>/`: copies their records and chains and writes the summary.
pub fn merge(experiment: &Experiment, inputs: &[PathBuf], out: &Path) -> Result<Summary> {
    if let Some(study) = &experiment.study {
        return merge_study(experiment, study, inputs, out);
    }
    let Some(protocol) = &experiment.protocol else {
        bail!("{} is not implemented yet", experiment.name);
    };
    let dir = experiment_dir(out, experiment);
    std::fs::create_dir_all(dir.join("jobs"))?;
    let mut records = Vec::new();
    for input in inputs {
        let src = shard_source(input, experiment)?;
        let found: Vec<JobRecord> = read_records(&src.join("jobs"), experiment.name, None)?;
        let same_dir = std::fs::canonicalize(&src)? == std::fs::canonicalize(&dir)?;
        if !same_dir {
            for r in &found {
                let id = job_id(&r.target, &r.sampler, &r.setting, r.chain);
                let from = src.join("jobs").join(format!("{id}.json"));
                std::fs::copy(&from, dir.join("jobs").join(format!("{id}.json")))
                    .with_context(|| format!("copying {}", from.display()))?;
                let chain_from = chain_path(&src, r);
                if chain_from.exists() {
                    let chain_to = chain_path(&dir, r);
                    std::fs::create_dir_all(chain_to.parent().expect("has a parent"))?;
                    std::fs::copy(&chain_from, &chain_to)?;
                }
            }
        }
        records.extend(found);
    }
    let params = agreed_params(&records, "job")?;
    let cells = (protocol.cells)(params.quick);
    let summary = Summary::aggregate(experiment, protocol, params, &cells, &records)?;
    write_outputs(&summary, protocol.figures, &dir, Summary::markdown)?;
    Ok(summary)
}

/// [`merge`] for a study: takes each replicate from whichever input holds it.
fn merge_study(
    experiment: &Experiment,
    study: &Study,
    inputs: &[PathBuf],
    out: &Path,
) -> Result<Summary> {
    let dir = experiment_dir(out, experiment);
    std::fs::create_dir_all(dir.join("jobs"))?;
    let mut records: BTreeMap<usize, StudyRecord> = BTreeMap::new();
    for input in inputs {
        let src = shard_source(input, experiment)?;
        let same_dir = std::fs::canonicalize(&src)? == std::fs::canonicalize(&dir)?;
        for r in read_records::<StudyRecord>(&src.join("jobs"), experiment.name, None)? {
            if !same_dir {
                let file = format!("{}.json", replicate_id(r.replicate));
                let from = src.join("jobs").join(&file);
                std::fs::copy(&from, dir.join("jobs").join(&file))
                    .with_context(|| format!("copying {}", from.display()))?;
            }
            records.entry(r.replicate).or_insert(r);
        }
    }
    let records: Vec<StudyRecord> = records.into_values().collect();
    let params = agreed_params(&records, "replicate")?;
    let summary = Summary::from_study(experiment, study, params, &records)?;
    write_outputs(&summary, study.figures, &dir, Summary::study_markdown)?;
    Ok(summary)
}

/// The figures and the report of a summary.
type Figures = fn(&Summary, &Path) -> Result<Vec<String>>;

fn write_outputs(
    summary: &Summary,
    figures: Figures,
    dir: &Path,
    markdown: fn(&Summary, &[String]) -> String,
) -> Result<()> {
    let figures = figures(summary, dir)?;
    summary.write_json(&dir.join("summary.json"))?;
    std::fs::write(dir.join("summary.md"), markdown(summary, &figures))?;
    println!("{}", summary_table(summary));
    println!("wrote {}", dir.display());
    Ok(())
}

/// A short console table: wall time and the first metrics per cell.
fn summary_table(summary: &Summary) -> String {
    let mut s = format!("{}:\n", summary.experiment);
    for c in &summary.cells {
        let mut metrics: Vec<String> = ["accept", "mean_norm", "q_avg", "ess_min"]
            .iter()
            .filter_map(|m| {
                c.metrics
                    .get(*m)
                    .map(|st| format!("{m} {}", crate::summary::fmt(st.mean)))
            })
            .collect();
        if metrics.is_empty() {
            // A study's metrics have names of their own: show the first few.
            metrics = c
                .metrics
                .iter()
                .take(4)
                .map(|(m, st)| format!("{m} {}", crate::summary::fmt(st.mean)))
                .collect();
        }
        let state = if c.status == "done" {
            format!("{:>8.1} s  {}", c.wall_time_secs, metrics.join("  "))
        } else {
            c.status.clone()
        };
        s.push_str(&format!(
            "  {:<18} {:<14} {:<8} {state}\n",
            c.target_label, c.sampler, c.setting
        ));
    }
    s
}

fn report_wall_times(records: &[JobRecord], elapsed: f64) {
    let mut per_cell: BTreeMap<(&str, &str, &str), (usize, f64)> = BTreeMap::new();
    for r in records {
        let e = per_cell
            .entry((&r.target, &r.sampler, &r.setting))
            .or_default();
        e.0 += 1;
        e.1 += r.wall_time_secs;
    }
    for ((t, s, set), (n, secs)) in per_cell {
        println!("  ran {n} chain(s) of {s} {set} on {t}: {secs:.1} s of sampling");
    }
    println!("  elapsed {elapsed:.1} s");
}

fn existing_record(
    jobs_dir: &Path,
    job: &Job,
    params: &RunParams,
    experiment: &Experiment,
) -> Option<JobRecord> {
    let (t, s, set) = job.cell.key();
    let path = jobs_dir.join(format!("{}.json", job_id(&t, &s, &set, job.chain)));
    let text = std::fs::read_to_string(path).ok()?;
    let r: JobRecord = serde_json::from_str(&text).ok()?;
    (r.params == *params && r.experiment == experiment.name).then_some(r)
}

/// A record file (`jobs/*.json`) of a chain or of a study's replicate.
trait RecordFile: serde::de::DeserializeOwned {
    /// The experiment that wrote it.
    fn experiment(&self) -> &str;
    /// The run parameters it was made with.
    fn params(&self) -> RunParams;
}

impl RecordFile for JobRecord {
    fn experiment(&self) -> &str {
        &self.experiment
    }
    fn params(&self) -> RunParams {
        self.params
    }
}

impl RecordFile for StudyRecord {
    fn experiment(&self) -> &str {
        &self.experiment
    }
    fn params(&self) -> RunParams {
        self.params
    }
}

/// The records of `experiment` in `jobs_dir`, only those made with `params`
/// if given.
fn read_records<R: RecordFile>(
    jobs_dir: &Path,
    experiment: &str,
    params: Option<RunParams>,
) -> Result<Vec<R>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(jobs_dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path)?;
            let r: R = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", path.display()))?;
            if r.experiment() == experiment && params.is_none_or(|p| r.params() == p) {
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// The parameters every merged record was made with; an error if there are
/// none or the shards disagree.
fn agreed_params<R: RecordFile>(records: &[R], kind: &str) -> Result<RunParams> {
    let Some(first) = records.first() else {
        bail!("no {kind} records found in the given directories");
    };
    let params = first.params();
    if let Some(r) = records.iter().find(|r| r.params() != params) {
        bail!(
            "shards disagree: {:?} and {:?} (different --quick, --seed or --chains)",
            params,
            r.params()
        );
    }
    Ok(params)
}

/// The experiment's directory inside a merge input (`DIR/<name>/` or `DIR`
/// itself), which must hold a `jobs/` directory.
fn shard_source(input: &Path, experiment: &Experiment) -> Result<PathBuf> {
    let src = if input.join(experiment.name).join("jobs").is_dir() {
        input.join(experiment.name)
    } else {
        input.to_path_buf()
    };
    if !src.join("jobs").is_dir() {
        bail!("{} holds no jobs/ directory", input.display());
    }
    Ok(src)
}

/// Progress of a run: bars on a terminal; otherwise (a log file, CI) one
/// line on stderr per finished chain or replicate, so long runs still show
/// how far they are.
struct Progress {
    /// The bars (drawn only on a terminal).
    bars: MultiProgress,
    /// Whether to print a line per finished unit.
    lines: bool,
    experiment: &'static str,
    total: usize,
    done: AtomicUsize,
    started: Instant,
}

impl Progress {
    fn new(opts: &RunOptions, experiment: &'static str, total: usize) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bars = if opts.progress && terminal {
            MultiProgress::new()
        } else {
            MultiProgress::with_draw_target(ProgressDrawTarget::hidden())
        };
        Self {
            bars,
            lines: opts.progress && !terminal,
            experiment,
            total,
            done: AtomicUsize::new(0),
            started: Instant::now(),
        }
    }

    /// Notes that the unit `label` finished.
    fn finished(&self, label: &str) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if self.lines {
            eprintln!(
                "{}: {done}/{} done ({}, {:.1} s elapsed)",
                self.experiment,
                self.total,
                label.trim().trim_start_matches(self.experiment).trim(),
                self.started.elapsed().as_secs_f64()
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_job(
    experiment: &Experiment,
    protocol: &Protocol,
    params: RunParams,
    dir: &Path,
    job: &Job,
    built: &BuiltTarget,
    opts: &RunOptions,
    bar: &ProgressBar,
) -> Result<JobRecord> {
    let cell = job.cell;
    let seed = cell_seed(params.seed, cell);
    // The starting point (the paper's fixed one if it has one, else an exact
    // draw from the target) comes from a stream of its own, so it does not
    // shift the sampler's stream.
    let mut setup = chain_rng(splitmix64(seed), job.chain as u64);
    let x0 = cell.target.start(built, &mut setup)?;
    let config = kameleon_samplers::RunConfig::new(cell.burn_in, cell.iterations);
    let run = cell
        .sampler
        .run_on(built, &x0, config, seed, job.chain as u64, &|p| {
            bar.set_position(p.step)
        })?;
    let chain = &run.chain;
    let mut metrics = BTreeMap::new();
    let mut curves = BTreeMap::new();
    for m in protocol.metrics {
        let evaluation = m.evaluate(&run, built, seed)?;
        metrics.extend(evaluation.scalars);
        curves.extend(evaluation.curves);
    }
    let (t, s, set) = cell.key();
    let record = JobRecord {
        experiment: experiment.name.into(),
        params,
        target: t.clone(),
        sampler: s.clone(),
        setting: set.clone(),
        chain: job.chain,
        cell_seed: seed,
        iterations: cell.iterations,
        burn_in: cell.burn_in,
        wall_time_secs: chain.wall_time_secs,
        final_scale: chain.adaptation.scale,
        metrics,
        curves,
    };
    if opts.write_chains {
        let path = chain_path(dir, &record);
        std::fs::create_dir_all(path.parent().expect("has a parent"))?;
        write_chain(&path, &chain.samples, chain.dim)?;
    }
    // Atomic: a record exists only once its chain is complete.
    let id = job_id(&t, &s, &set, job.chain);
    let tmp = dir.join("jobs").join(format!("{id}.json.tmp"));
    std::fs::write(&tmp, serde_json::to_string_pretty(&record)?)?;
    std::fs::rename(&tmp, dir.join("jobs").join(format!("{id}.json")))?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments;
    use crate::summary::depends_on_clock;
    use serde_json::Value;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn options(out: &Path, shard: Option<Shard>) -> RunOptions {
        RunOptions {
            quick: true,
            seed: 7,
            chains: None,
            out: out.to_path_buf(),
            shard,
            write_chains: true,
            force: false,
            progress: false,
        }
    }

    /// Checks a summary.json against the schema, reading it as untyped JSON
    /// (so a field renamed in the struct breaks this test). A grid's cells
    /// must have `accept` and `mean_norm`; a study's cells have
    /// `iterations` = `burn_in` = 0 and metrics of their own.
    fn check_schema(path: &Path, name: &str, study: bool) {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(v["experiment"], name);
        assert!(v["source"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(v["params"]["quick"].as_bool().unwrap());
        assert!(v["params"]["seed"].is_u64());
        let chains = v["params"]["chains"].as_u64().unwrap() as usize;
        let cells = v["cells"].as_array().unwrap();
        assert!(!cells.is_empty());
        let mut done = 0;
        for c in cells {
            for key in ["target", "target_label", "sampler", "setting", "status"] {
                assert!(c[key].is_string(), "{key} in {c}");
            }
            for key in ["chains", "iterations", "burn_in"] {
                assert!(c[key].is_u64(), "{key} in {c}");
            }
            assert!(c["wall_time_secs"].as_f64().unwrap() >= 0.0);
            let metrics = c["metrics"].as_object().unwrap();
            if c["status"] != "done" {
                assert!(c["status"].as_str().unwrap().starts_with("pending"));
                assert!(metrics.is_empty());
                continue;
            }
            done += 1;
            assert_eq!(c["chains"].as_u64().unwrap() as usize, chains);
            if study {
                assert_eq!(c["iterations"], 0);
                assert_eq!(c["burn_in"], 0);
                assert!(!metrics.is_empty(), "no metric in {c}");
            } else {
                for required in ["accept", "mean_norm"] {
                    assert!(metrics.contains_key(required), "{required} missing in {c}");
                }
            }
            for (name, m) in metrics {
                let values: Vec<f64> = m["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap())
                    .collect();
                assert_eq!(values.len(), chains, "{name}");
                let mean = values.iter().sum::<f64>() / chains as f64;
                assert!((m["mean"].as_f64().unwrap() - mean).abs() <= 1e-12 * mean.abs().max(1.0));
                let (lo, hi) = (m["q10"].as_f64().unwrap(), m["q90"].as_f64().unwrap());
                let min = values.iter().copied().fold(f64::INFINITY, f64::min);
                let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                assert!(min <= lo && lo <= hi && hi <= max, "{name}: {lo} {hi}");
                assert!(m["ci80_half_width"].as_f64().unwrap() >= 0.0);
            }
            if let Some(accept) = metrics.get("accept") {
                assert!((0.0..=1.0).contains(&accept["mean"].as_f64().unwrap()));
            }
            // Curves (optional): per-chain curves on common abscissae, with
            // pointwise mean and 10%/90% quantiles.
            let Some(curves) = c.get("curves") else {
                continue;
            };
            for (name, t) in curves.as_object().unwrap() {
                let floats = |v: &Value| -> Vec<f64> {
                    v.as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_f64().unwrap())
                        .collect()
                };
                let x = floats(&t["x"]);
                assert!(!x.is_empty(), "{name}");
                let values: Vec<Vec<f64>> =
                    t["chains"].as_array().unwrap().iter().map(floats).collect();
                assert_eq!(values.len(), chains, "{name}");
                let (mean, q10, q90) = (floats(&t["mean"]), floats(&t["q10"]), floats(&t["q90"]));
                for i in 0..x.len() {
                    let column: Vec<f64> = values.iter().map(|v| v[i]).collect();
                    let m = column.iter().sum::<f64>() / chains as f64;
                    assert!(
                        (mean[i] - m).abs() <= 1e-12 * m.abs().max(1.0),
                        "{name}[{i}]"
                    );
                    let min = column.iter().copied().fold(f64::INFINITY, f64::min);
                    let max = column.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    assert!(
                        min <= q10[i] && q10[i] <= q90[i] && q90[i] <= max,
                        "{name}[{i}]"
                    );
                }
            }
        }
        assert!(done > 0, "no cell ran");
        for claim in v["claims"].as_array().unwrap() {
            assert!(claim["claim"].is_string() && claim["evidence"].is_string());
            let verdict = claim["verdict"].as_str().unwrap();
            assert!(["reproduced", "not_reproduced", "pending"].contains(&verdict));
        }
    }

    /// Every implemented experiment (grid or study) runs end to end at
    /// --quick size and writes a summary.json that fits the schema,
    /// summary.md, its figures and (grids) one .npy per chain.
    #[test]
    fn every_implemented_experiment_runs_at_quick_size() {
        let out = temp_dir("quick");
        for e in experiments::all().iter().filter(|e| e.is_runnable()) {
            let summary = reproduce(e, &options(&out, None)).unwrap().unwrap();
            let dir = out.join(e.name);
            check_schema(&dir.join("summary.json"), e.name, e.study.is_some());
            assert_eq!(
                Summary::read_json(&dir.join("summary.json")).unwrap(),
                summary
            );
            let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
            assert!(md.contains("## The paper's claims"));
            let figures: Vec<&str> = md
                .lines()
                .filter_map(|l| l.strip_prefix("![")?.split_once("](")?.1.strip_suffix(')'))
                .collect();
            assert!(!figures.is_empty());
            for f in figures {
                let svg = std::fs::read_to_string(dir.join(f)).unwrap();
                assert!(svg.starts_with("<svg"), "{f}");
            }
            for c in summary
                .cells
                .iter()
                .filter(|c| c.status == "done" && e.study.is_none())
            {
                for k in 0..c.chains {
                    let mut npy = dir.join("chains").join(&c.target).join(&c.sampler);
                    if !c.setting.is_empty() {
                        npy = npy.join(&c.setting);
                    }
                    let npy = npy.join(format!("{k}.npy"));
                    let bytes = std::fs::read(&npy).unwrap();
                    let file = npyz::NpyFile::new(&bytes[..]).unwrap();
                    assert_eq!(file.shape()[0], c.iterations);
                }
            }
        }
        std::fs::remove_dir_all(&out).unwrap();
    }

    /// The summary without what depends on the clock.
    fn timeless(mut s: Summary) -> Summary {
        for c in &mut s.cells {
            c.wall_time_secs = 0.0;
            c.metrics.retain(|name, _| !depends_on_clock(name));
            c.curves.retain(|name, _| !depends_on_clock(name));
        }
        s.claims
            .retain(|c| !c.claim.contains("per second") && !c.claim.contains("wall time"));
        s
    }

    /// Three shards merged give the one-run summary and the same chain files,
    /// whatever the thread count; a merge with a shard missing fails and names
    /// the missing jobs. Checked on a plain grid and on one with curves and a
    /// cached reference sample.
    #[test]
    fn shards_merge_into_the_single_run_summary() {
        // a grid experiment with scalar metrics, one with curves, and one with
        // curves and a cached reference sample
        for name in ["kamh-banana", "ckam-bimodal", "kmc-abc"] {
            check_shards_merge(name);
        }
    }

    fn check_shards_merge(name: &str) {
        let e = experiments::find(name).unwrap();
        let root = temp_dir(&format!("shards-{name}"));
        let single_dir = root.join("single");
        let single = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| reproduce(&e, &options(&single_dir, None)))
            .unwrap()
            .unwrap();
        let shard_dirs: Vec<PathBuf> = (1..=3).map(|i| root.join(format!("shard{i}"))).collect();
        for (i, dir) in shard_dirs.iter().enumerate() {
            let shard = Shard {
                index: i + 1,
                count: 3,
            };
            assert!(reproduce(&e, &options(dir, Some(shard))).unwrap().is_none());
        }
        let incomplete = merge(&e, &shard_dirs[..2], &root.join("bad"));
        let message = format!("{:#}", incomplete.unwrap_err());
        assert!(message.contains("missing"), "{message}");
        let merged_dir = root.join("merged");
        let merged = merge(&e, &shard_dirs, &merged_dir).unwrap();
        assert_eq!(timeless(merged), timeless(single.clone()));
        for c in single.cells.iter().filter(|c| c.status == "done") {
            for k in 0..c.chains {
                let rel = PathBuf::from(name)
                    .join("chains")
                    .join(&c.target)
                    .join(&c.sampler)
                    .join(format!("{k}.npy"));
                let a = std::fs::read(single_dir.join(&rel)).unwrap();
                let b = std::fs::read(merged_dir.join(&rel)).unwrap();
                assert_eq!(a, b, "{}", rel.display());
            }
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A study for the framework's tests: two rows, each the mean of
    /// normal draws from the replicate's seed, and a figure.
    fn fixture_study() -> Experiment {
        fn run(r: &Replicate) -> Result<Vec<crate::summary::Measurement>> {
            use rand::RngExt;
            let mut rng = chain_rng(r.seed, 0);
            (r.progress)(0, 2);
            let rows = (0..2)
                .map(|row| {
                    let draws = (0..100).map(|_| rng.sample::<f64, _>(rand_distr::StandardNormal));
                    crate::summary::Measurement {
                        target: "normal".into(),
                        target_label: "N(0, 1)".into(),
                        method: "mean".into(),
                        setting: format!("row={row}"),
                        wall_time_secs: 0.0,
                        metrics: BTreeMap::from([("mean".into(), draws.sum::<f64>() / 100.0)]),
                    }
                })
                .collect();
            (r.progress)(2, 2);
            Ok(rows)
        }
        fn figures(_: &Summary, dir: &Path) -> Result<Vec<String>> {
            std::fs::write(dir.join("fixture.svg"), "<svg/>")?;
            Ok(vec!["fixture.svg".into()])
        }
        Experiment {
            name: "fixture-study",
            source: "the framework's tests",
            description: "means of normal draws",
            paper_size: "-",
            protocol: None,
            study: Some(Study {
                replicates: 5,
                quick_replicates: 5,
                size: |_| "two means of 100 draws".into(),
                run,
                notes: "A test fixture.",
                claims: |_| Vec::new(),
                figures,
            }),
            missing: "",
        }
    }

    /// A study runs, fits the schema, and three shards merged give the
    /// one-run summary (replicates split round robin); a merge with a shard
    /// missing fails naming the missing replicates.
    #[test]
    fn study_shards_merge_into_the_single_run_summary() {
        let e = fixture_study();
        let root = temp_dir("study-shards");
        let single = reproduce(&e, &options(&root.join("single"), None))
            .unwrap()
            .unwrap();
        check_schema(
            &root.join("single").join(e.name).join("summary.json"),
            e.name,
            true,
        );
        assert_eq!(single.cells.len(), 2);
        assert_eq!(single.cells[0].metrics["mean"].values.len(), 5);
        // Replicates differ (own seeds) and are N(0, 1/100) means: |mean| < 5/√100.
        let values = &single.cells[0].metrics["mean"].values;
        assert!(values.windows(2).all(|w| w[0] != w[1]));
        assert!(values.iter().all(|v| v.abs() < 0.5));
        let shard_dirs: Vec<PathBuf> = (1..=3).map(|i| root.join(format!("shard{i}"))).collect();
        for (i, dir) in shard_dirs.iter().enumerate() {
            let shard = Shard {
                index: i + 1,
                count: 3,
            };
            assert!(reproduce(&e, &options(dir, Some(shard))).unwrap().is_none());
        }
        let message = format!(
            "{:#}",
            merge(&e, &shard_dirs[1..], &root.join("bad")).unwrap_err()
        );
        assert!(
            message.contains("missing") && message.contains("replicate-0"),
            "{message}"
        );
        let merged = merge(&e, &shard_dirs, &root.join("merged")).unwrap();
        assert_eq!(timeless(merged), timeless(single));
        let md =
            std::fs::read_to_string(root.join("merged").join(e.name).join("summary.md")).unwrap();
        assert!(md.contains("5 replicate(s)") && md.contains("![fixture.svg](fixture.svg)"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn shards_parse_and_partition_the_jobs() {
        assert_eq!(
            "2/5".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 5 }
        );
        for bad in ["0/3", "4/3", "1/0", "3", "a/b"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        // Every job lands in exactly one shard, and shard sizes differ by at most one.
        let n_jobs = 17;
        for count in 1..6 {
            let shards: Vec<Shard> = (1..=count).map(|index| Shard { index, count }).collect();
            for job in 0..n_jobs {
                assert_eq!(shards.iter().filter(|s| s.contains(job)).count(), 1);
            }
            let sizes: Vec<usize> = shards
                .iter()
                .map(|s| (0..n_jobs).filter(|&j| s.contains(j)).count())
                .collect();
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(max - min <= 1, "{sizes:?}");
        }
    }

    #[test]
    fn cells_get_distinct_seeds_that_follow_the_master_seed() {
        let cells = (experiments::find("kamh-banana")
            .unwrap()
            .protocol
            .unwrap()
            .cells)(true);
        let seeds: Vec<u64> = cells.iter().map(|c| cell_seed(7, c)).collect();
        let mut unique = seeds.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), seeds.len());
        assert_ne!(cell_seed(8, &cells[0]), seeds[0]);
    }
}
