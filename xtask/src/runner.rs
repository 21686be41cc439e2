//! Running an experiment's grid (all of it or one shard), writing one record
//! and one `.npy` per chain, and merging records into the summary; and the
//! same for studies, with one record per replicate.

use crate::benchmark::{RunEnv, prepare};
use crate::experiment::{Cell, Experiment, Protocol, Replicate, Study};
use crate::files::{
    Access, DirLock, copy_file, create_dir, lock_dir, remove_stale_temps, write_file,
};
use crate::ids::{fnv1a, job_id, replicate_id, replicate_seed, sanitize, splitmix64};
use crate::npy::{read_chain_header, write_chain};
use crate::size::Size;
use crate::spec::{BuiltTarget, TargetSpec};
use crate::summary::{JobRecord, RunParams, StudyRecord, Summary, depends_on_clock};
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

    /// The shard of this process from Slurm's environment (see
    /// [`Shard::from_vars`]).
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
    }

    /// The shard from Slurm's variables, read through `var`:
    ///
    /// 1. In a job array (`SLURM_ARRAY_TASK_ID` is set): shard
    ///    `1 + (SLURM_ARRAY_TASK_ID − SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP`
    ///    of `SLURM_ARRAY_TASK_COUNT`, so `--array=0-7`, `1-8` and `1-15:2`
    ///    all give shards 1/8 … 8/8 (`MIN` defaults to 0 and `STEP` to 1
    ///    when unset).
    /// 2. Otherwise in an `srun` step of several tasks: shard
    ///    `SLURM_PROCID + 1` of `SLURM_NTASKS`.
    ///
    /// Every variable is parsed strictly; an error names the variable, its
    /// value and what was expected.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let number = |name: &str| -> Result<Option<usize>> {
            var(name)
                .map(|v| {
                    v.trim()
                        .parse::<usize>()
                        .map_err(|_| anyhow::anyhow!("{name}={v:?} is not a non-negative integer"))
                })
                .transpose()
        };
        let required = |name: &str, why: &str| -> Result<usize> {
            number(name)?.ok_or_else(|| anyhow::anyhow!("{name} is not set ({why})"))
        };
        let (index, count) = if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
            let why = "SLURM_ARRAY_TASK_ID is set, so this is taken for a job array";
            let count = required("SLURM_ARRAY_TASK_COUNT", why)?;
            let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let step = number("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1);
            if step == 0 {
                bail!("SLURM_ARRAY_TASK_STEP=0: the array's step must be at least 1");
            }
            let Some(offset) = id.checked_sub(min) else {
                bail!("SLURM_ARRAY_TASK_ID={id} is below SLURM_ARRAY_TASK_MIN={min}");
            };
            if offset % step != 0 {
                bail!(
                    "SLURM_ARRAY_TASK_ID={id} is not SLURM_ARRAY_TASK_MIN={min} plus a multiple \
                     of SLURM_ARRAY_TASK_STEP={step}: --shard-from-env needs an array of evenly \
                     spaced ids (e.g. --array=1-8); pass --shard i/N instead"
                );
            }
            let index = offset / step + 1;
            if index > count {
                bail!(
                    "SLURM_ARRAY_TASK_ID={id} is task {index} of the array, but \
                     SLURM_ARRAY_TASK_COUNT={count}: --shard-from-env needs an array of evenly \
                     spaced ids (e.g. --array=1-8); pass --shard i/N instead"
                );
            }
            (index, count)
        } else if let Some(rank) = number("SLURM_PROCID")? {
            let count = required(
                "SLURM_NTASKS",
                "SLURM_PROCID is set, so this is taken for an srun step",
            )?;
            if rank >= count {
                bail!("SLURM_PROCID={rank} must be below SLURM_NTASKS={count}");
            }
            (rank + 1, count)
        } else {
            bail!(
                "--shard-from-env needs SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (a job \
                 array) or SLURM_PROCID and SLURM_NTASKS (an srun step), and none is set; \
                 pass --shard i/N outside Slurm"
            );
        };
        if count == 0 {
            bail!("the number of Slurm tasks is 0");
        }
        Ok(Self { index, count })
    }
}

/// How to run an experiment.
///
/// For a study, `chains` is the number of replicates, `shard` splits the
/// replicates round robin, and `write_chains` does not apply.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The size.
    pub size: Size,
    /// The master seed.
    pub seed: u64,
    /// Chains per cell (default: the protocol's).
    pub chains: Option<usize>,
    /// The output root; the experiment writes into `out/<name>/`.
    pub out: PathBuf,
    /// Where reference samples are cached (default: `out`).
    pub references: Option<PathBuf>,
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

/// The seed of a cell's streams: from the master seed and the cell's key,
/// never from its position, so adding cells changes no other cell's numbers.
pub fn cell_seed(master: u64, cell: &Cell) -> u64 {
    let (t, s, set) = cell.key();
    splitmix64(master ^ fnv1a(&format!("{t}|{s}|{set}")))
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
    let params = RunParams::new(
        opts.size,
        opts.seed,
        opts.chains.unwrap_or(protocol.chains_at(opts.size)),
    );
    if params.chains == 0 {
        bail!("--chains must be at least 1");
    }
    let cells = protocol.cells_at(opts.size);
    let dir = experiment_dir(&opts.out, experiment);
    let jobs_dir = dir.join("jobs");
    let _lock = open_output(&dir, opts.shard)?;

    let all: Vec<Job> = cells
        .iter()
        .filter(|c| c.sampler.pending().is_none())
        .flat_map(|cell| (0..params.chains).map(move |chain| Job { cell, chain }))
        .collect();
    let mut chainless = 0;
    let mine: Vec<Job> = all
        .into_iter()
        .enumerate()
        .filter(|(i, _)| opts.shard.is_none_or(|s| s.contains(*i)))
        .map(|(_, j)| j)
        .filter(|j| {
            opts.force
                || match job_state(&dir, j, params, experiment.name, opts.write_chains) {
                    JobState::Done => false,
                    JobState::NoChainFile => {
                        chainless += 1;
                        true
                    }
                    JobState::Absent => true,
                }
        })
        .collect();
    if chainless > 0 {
        println!(
            "  {chainless} chain(s) have a record but no .npy (a --no-chains run, or deleted \
             files): rerunning them to write their chains"
        );
    }

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
        references: opts.references.clone().unwrap_or_else(|| opts.out.clone()),
        size: opts.size,
        seed: opts.seed,
    };
    let mut targets: Vec<(TargetSpec, BuiltTarget)> = Vec::new();
    for job in &mine {
        if !targets.iter().any(|(t, _)| *t == job.cell.target) {
            targets.push((job.cell.target, prepare(job.cell.target, &env)?));
        }
    }
    let grid = GridRun {
        experiment,
        protocol,
        params,
        dir: &dir,
        opts,
    };
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
            let record = run_job(&grid, job, built, &bar)?;
            bar.finish_and_clear();
            bars.remove(&bar);
            overall.inc(1);
            tracker.finished(&bar.prefix());
            Ok(record)
        })
        .collect::<Result<_>>()?;
    overall.finish_and_clear();
    report_wall_times(&new_records, started.elapsed().as_secs_f64());

    let records: Vec<JobRecord> = read_records(&jobs_dir, experiment.name, params)?;
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
    let quick = opts.size.is_quick();
    let params = RunParams::new(
        opts.size,
        opts.seed,
        opts.chains.unwrap_or(if quick {
            study.quick_replicates
        } else {
            study.replicates
        }),
    );
    if params.chains == 0 {
        bail!("--chains (replicates of a study) must be at least 1");
    }
    let dir = experiment_dir(&opts.out, experiment);
    let jobs_dir = dir.join("jobs");
    let _lock = open_output(&dir, opts.shard)?;
    let existing: Vec<usize> = read_records(&jobs_dir, experiment.name, params)?
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
            write_record(&jobs_dir, &record)?;
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
    let records: Vec<StudyRecord> = read_records(&jobs_dir, experiment.name, params)?;
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
///
/// Everything is checked before anything is written: every record parses,
/// no two inputs disagree on a job, the shards used the same parameters,
/// the grid (or every replicate) is complete and every chain file present
/// is whole. A failed merge leaves the output untouched.
pub fn merge(experiment: &Experiment, inputs: &[PathBuf], out: &Path) -> Result<Summary> {
    let dir = experiment_dir(out, experiment);
    if let Some(study) = &experiment.study {
        let gathered = gather::<StudyRecord>(experiment, inputs)?;
        let mut records: Vec<StudyRecord> = gathered.iter().map(|g| g.record.clone()).collect();
        records.sort_by_key(|r| r.replicate);
        let params = agreed_params(&records, "replicate")?;
        let summary = Summary::from_study(experiment, study, params, &records)?;
        let _lock = open_output(&dir, None)?;
        copy_merged(&dir, &gathered, &[])?;
        write_outputs(&summary, study.figures, &dir, Summary::study_markdown)?;
        return Ok(summary);
    }
    let Some(protocol) = &experiment.protocol else {
        bail!("{} is not implemented yet", experiment.name);
    };
    let gathered = gather::<JobRecord>(experiment, inputs)?;
    let records: Vec<JobRecord> = gathered.iter().map(|g| g.record.clone()).collect();
    let params = agreed_params(&records, "job")?;
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
    let _lock = open_output(&dir, None)?;
    copy_merged(&dir, &gathered, &chains)?;
    write_outputs(&summary, protocol.figures, &dir, Summary::markdown)?;
    Ok(summary)
}

/// A record found by [`gather`], with where it came from.
struct Gathered<R> {
    record: R,
    /// Its file.
    file: PathBuf,
    /// The experiment directory it was found in.
    source: PathBuf,
}

/// Every record of `experiment` in `inputs`, once per job: an error names
/// the file if a record does not parse, and both files if two inputs hold
/// different results for one job (the same results with other wall times
/// are one job run twice).
fn gather<R: RecordFile>(experiment: &Experiment, inputs: &[PathBuf]) -> Result<Vec<Gathered<R>>> {
    let mut by_id: BTreeMap<String, Gathered<R>> = BTreeMap::new();
    for input in inputs {
        let source = shard_source(input, experiment)?;
        for (file, record) in record_files::<R>(&source.join("jobs"))? {
            let record = record.with_context(|| {
                format!(
                    "{} is damaged: delete it and rerun its shard",
                    file.display()
                )
            })?;
            if record.experiment() != experiment.name {
                continue;
            }
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
    Ok(by_id.into_values().collect())
}

/// Copies the gathered records and the `chains` (from, to) into `dir`
/// (those not already there).
fn copy_merged<R>(dir: &Path, gathered: &[Gathered<R>], chains: &[(PathBuf, PathBuf)]) -> Result<()>
where
    R: RecordFile,
{
    let canonical =
        |p: &Path| std::fs::canonicalize(p).with_context(|| format!("resolving {}", p.display()));
    let here = canonical(dir)?;
    let jobs = dir.join("jobs");
    for g in gathered {
        if canonical(&g.source)? != here {
            copy_file(&g.file, &jobs.join(format!("{}.json", g.record.id())))?;
        }
    }
    for (from, to) in chains {
        if canonical(from)? != canonical(to).unwrap_or_default() {
            create_dir(to.parent().expect("a chain path has a parent"))?;
            copy_file(from, to)?;
        }
    }
    Ok(())
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
    write_file(
        &dir.join("summary.md"),
        markdown(summary, &figures).as_bytes(),
    )?;
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

/// Creates the experiment directory `dir` with its `jobs/` and locks it:
/// shared with the other shards for a shard of several, exclusively
/// otherwise.
fn open_output(dir: &Path, shard: Option<Shard>) -> Result<DirLock> {
    create_dir(&dir.join("jobs"))?;
    let access = match shard {
        Some(s) if s.count > 1 => Access::Shard {
            index: s.index,
            count: s.count,
        },
        _ => Access::Whole,
    };
    let lock = lock_dir(dir, access)?;
    if access == Access::Whole {
        remove_stale_temps(dir)?;
    }
    Ok(lock)
}

/// Writes a record as `jobs_dir/<id>.json`, atomically.
fn write_record<R: RecordFile>(jobs_dir: &Path, record: &R) -> Result<()> {
    let path = jobs_dir.join(format!("{}.json", record.id()));
    write_file(&path, serde_json::to_string_pretty(record)?.as_bytes())
}

/// Whether a job's results are complete in the output directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobState {
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
fn job_state(
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
            eprintln!("warning: {e:#}; rerunning that chain");
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
        eprintln!(
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
            eprintln!("warning: {e:#}; rerunning that chain");
            JobState::Absent
        }
    }
}

/// Checks that the chain file at `path` is whole and has `record`'s draws.
fn check_chain(path: &Path, record: &JobRecord) -> Result<()> {
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
trait RecordFile: serde::Serialize + serde::de::DeserializeOwned + PartialEq + Clone {
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
fn read_record<R: RecordFile>(path: &Path) -> Result<Option<R>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let record = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a valid record", path.display()))?;
    Ok(Some(record))
}

/// Every record file (`*.json`) in `jobs_dir`, parsed or with the error
/// that names it.
fn record_files<R: RecordFile>(jobs_dir: &Path) -> Result<Vec<(PathBuf, Result<R>)>> {
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
fn read_records<R: RecordFile>(
    jobs_dir: &Path,
    experiment: &str,
    params: RunParams,
) -> Result<Vec<R>> {
    let mut out = Vec::new();
    for (_, record) in record_files::<R>(jobs_dir)? {
        match record {
            Ok(r) if r.experiment() == experiment && r.params() == params => out.push(r),
            Ok(_) => {}
            Err(e) => eprintln!("warning: {e:#}; skipped"),
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
            "shards disagree: {:?} and {:?} (different --size, --seed or --chains)",
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

/// What every job of one grid run shares.
struct GridRun<'a> {
    experiment: &'a Experiment,
    protocol: &'a Protocol,
    params: RunParams,
    /// The experiment's output directory.
    dir: &'a Path,
    opts: &'a RunOptions,
}

fn run_job(run: &GridRun, job: &Job, built: &BuiltTarget, bar: &ProgressBar) -> Result<JobRecord> {
    let GridRun {
        experiment,
        protocol,
        params,
        dir,
        opts,
    } = *run;
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
        create_dir(path.parent().expect("a chain path has a parent"))?;
        write_chain(&path, &chain.samples, chain.dim)?;
    }
    // A record is written only once its chain is complete.
    write_record(&dir.join("jobs"), &record)?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments;
    use serde_json::Value;

    /// The fastest grid experiment at --quick size.
    const FAST_GRID: &str = "kamh-banana";

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("xtask-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn options(out: &Path, shard: Option<Shard>) -> RunOptions {
        RunOptions {
            size: Size::Quick,
            seed: 7,
            chains: None,
            out: out.to_path_buf(),
            references: None,
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
    /// With `--references`, reference samples are read from and cached in
    /// that directory, not the output root, so shards with outputs of their
    /// own can share one benchmark.
    #[test]
    fn reference_samples_live_where_references_points() {
        let (out, refs) = (temp_dir("refs-out"), temp_dir("refs"));
        let mut opts = options(&out, None);
        opts.references = Some(refs.clone());
        opts.write_chains = false;
        let e = experiments::find("kmc-abc").unwrap();
        reproduce(&e, &opts).unwrap();
        assert!(refs.join("abc-benchmark/quick/benchmark.json").exists());
        assert!(!out.join("abc-benchmark").exists());
        assert!(out.join("kmc-abc/summary.json").exists());
        std::fs::remove_dir_all(&out).unwrap();
        std::fs::remove_dir_all(&refs).unwrap();
    }

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
        // A failed merge writes nothing, not even the output directory.
        assert!(!root.join("bad").exists());
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
        assert!(!root.join("bad").exists());
        let merged = merge(&e, &shard_dirs, &root.join("merged")).unwrap();
        assert_eq!(timeless(merged), timeless(single));
        let md =
            std::fs::read_to_string(root.join("merged").join(e.name).join("summary.md")).unwrap();
        assert!(md.contains("5 replicate(s)") && md.contains("![fixture.svg](fixture.svg)"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The files under `dir` (relative paths) with their bytes.
    fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let rel = path.strip_prefix(dir).unwrap().to_path_buf();
                    out.insert(rel, std::fs::read(&path).unwrap());
                }
            }
        }
        out
    }

    /// The chain files under an experiment directory.
    fn chains(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        tree(&dir.join("chains"))
    }

    /// A rerun repairs what an interrupted or careless run left: a torn
    /// `.npy` (its record exists), a deleted `.npy`, the chains of a
    /// `--no-chains` run, and a damaged record (reported, not fatal). Each
    /// repaired file is identical to the original.
    #[test]
    fn reruns_repair_damaged_and_missing_outputs() {
        let e = experiments::find(FAST_GRID).unwrap();
        let root = temp_dir("repair");
        let dir = root.join(e.name);
        let first = reproduce(&e, &options(&root, None)).unwrap().unwrap();
        let good_chains = chains(&dir);
        let good_jobs = tree(&dir.join("jobs"));
        let (torn, whole) = good_chains.iter().next().unwrap();
        let torn = dir.join("chains").join(torn);
        std::fs::write(&torn, &whole[..whole.len() - 8]).unwrap();
        let (deleted, _) = good_chains.iter().nth(1).unwrap();
        std::fs::remove_file(dir.join("chains").join(deleted)).unwrap();
        let (damaged, _) = good_jobs.iter().next().unwrap();
        let damaged = dir.join("jobs").join(damaged);
        std::fs::write(&damaged, b"{\"experiment\": ").unwrap();
        let again = reproduce(&e, &options(&root, None)).unwrap().unwrap();
        assert_eq!(timeless(again), timeless(first.clone()));
        assert_eq!(chains(&dir), good_chains);
        let record: JobRecord = read_record(&damaged).unwrap().unwrap();
        let original: JobRecord =
            serde_json::from_slice(&good_jobs[damaged.strip_prefix(dir.join("jobs")).unwrap()])
                .unwrap();
        assert_eq!(record.timeless(), original.timeless());

        // A --no-chains run, then a run that keeps chains writes them all.
        let bare = temp_dir("repair-bare");
        let opts = RunOptions {
            write_chains: false,
            ..options(&bare, None)
        };
        reproduce(&e, &opts).unwrap();
        assert!(!bare.join(e.name).join("chains").exists());
        let full = reproduce(&e, &options(&bare, None)).unwrap().unwrap();
        assert_eq!(timeless(full), timeless(first));
        assert_eq!(chains(&bare.join(e.name)), good_chains);
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::remove_dir_all(&bare).unwrap();
    }

    /// A run into a directory another run holds fails at once, naming the
    /// holder's pid and the lock file; it runs once the lock is released.
    #[test]
    fn a_second_run_into_a_locked_directory_fails_at_once() {
        let e = fixture_study();
        let root = temp_dir("locked");
        let dir = experiment_dir(&root, &e);
        let lock = open_output(&dir, None).unwrap();
        let message = format!("{:#}", reproduce(&e, &options(&root, None)).unwrap_err());
        assert!(
            message.contains(&format!("pid {}", std::process::id()))
                && message.contains(&dir.join(".lock").display().to_string()),
            "{message}"
        );
        assert!(!dir.join("summary.json").exists());
        drop(lock);
        reproduce(&e, &options(&root, None)).unwrap().unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A merge refuses damaged records and two shards that disagree on a
    /// job, naming the files, and writes nothing.
    #[test]
    fn merge_refuses_damaged_and_conflicting_records() {
        let e = fixture_study();
        let root = temp_dir("merge-bad");
        let (a, b) = (root.join("a"), root.join("b"));
        reproduce(&e, &options(&a, None)).unwrap();
        reproduce(&e, &options(&b, None)).unwrap();
        // The same results with other wall times merge (one job run twice).
        let path = |dir: &Path| dir.join(e.name).join("jobs").join("replicate-1.json");
        let mut record: StudyRecord = read_record(&path(&b)).unwrap().unwrap();
        record.wall_time_secs += 1.0;
        write_record(&b.join(e.name).join("jobs"), &record).unwrap();
        merge(&e, &[a.clone(), b.clone()], &root.join("ok")).unwrap();
        // Other results do not.
        record.rows[0].metrics.insert("mean".into(), 42.0);
        write_record(&b.join(e.name).join("jobs"), &record).unwrap();
        let out = root.join("out");
        let message = format!(
            "{:#}",
            merge(&e, &[a.clone(), b.clone()], &out).unwrap_err()
        );
        assert!(
            message.contains(&path(&a).display().to_string())
                && message.contains(&path(&b).display().to_string()),
            "{message}"
        );
        std::fs::write(path(&b), b"not json").unwrap();
        let message = format!("{:#}", merge(&e, &[a, b.clone()], &out).unwrap_err());
        assert!(
            message.contains(&path(&b).display().to_string()),
            "{message}"
        );
        assert!(!out.exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Slurm's variables are parsed strictly (an error names the variable
    /// and its value), arrays may start anywhere and have a step, and an
    /// srun step shards by its task rank.
    #[test]
    fn shards_come_from_slurm_variables() {
        let shard = |vars: &[(&str, &str)]| {
            Shard::from_vars(|name| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            })
        };
        let ok = |vars: &[(&str, &str)], index, count| {
            assert_eq!(shard(vars).unwrap(), Shard { index, count }, "{vars:?}");
        };
        let fails = |vars: &[(&str, &str)], expected: &str| {
            let message = format!("{:#}", shard(vars).unwrap_err());
            assert!(message.contains(expected), "{vars:?}: {message}");
        };
        let id = "SLURM_ARRAY_TASK_ID";
        let (min, count, step) = (
            "SLURM_ARRAY_TASK_MIN",
            "SLURM_ARRAY_TASK_COUNT",
            "SLURM_ARRAY_TASK_STEP",
        );
        ok(&[(id, "0"), (min, "0"), (count, "8")], 1, 8);
        ok(&[(id, "8"), (min, "1"), (count, "8")], 8, 8);
        ok(&[(id, "3"), (count, "4")], 4, 4);
        ok(&[(id, "15"), (min, "1"), (step, "2"), (count, "8")], 8, 8);
        ok(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "3")], 1, 3);
        // The array takes precedence over the step's tasks.
        ok(
            &[
                (id, "2"),
                (min, "1"),
                (count, "2"),
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "3"),
            ],
            2,
            2,
        );
        fails(
            &[(id, "1"), (min, "x1"), (count, "8")],
            "SLURM_ARRAY_TASK_MIN=\"x1\"",
        );
        fails(&[(id, "-1"), (count, "8")], "SLURM_ARRAY_TASK_ID=\"-1\"");
        fails(
            &[(id, "1"), (min, "2"), (count, "8")],
            "SLURM_ARRAY_TASK_ID=1 is below SLURM_ARRAY_TASK_MIN=2",
        );
        fails(
            &[(id, "9"), (min, "1"), (count, "8")],
            "SLURM_ARRAY_TASK_COUNT=8",
        );
        fails(
            &[(id, "2"), (min, "1"), (step, "2"), (count, "8")],
            "SLURM_ARRAY_TASK_STEP=2",
        );
        fails(
            &[(id, "1"), (min, "1"), (step, "0"), (count, "8")],
            "SLURM_ARRAY_TASK_STEP=0",
        );
        fails(&[(id, "1")], "SLURM_ARRAY_TASK_COUNT is not set");
        fails(&[(id, "0"), (count, "0")], "SLURM_ARRAY_TASK_COUNT=0");
        fails(
            &[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "3")],
            "SLURM_PROCID=3",
        );
        fails(
            &[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "three")],
            "SLURM_NTASKS=\"three\"",
        );
        fails(&[], "none is set");
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

    mod record_fuzz {
        //! Job and study records are files a user may hand us (copied
        //! between machines, cut by a full disk, edited by hand): reading
        //! any bytes gives a record or an error naming the file, never a
        //! panic.
        use super::super::{JobRecord, StudyRecord, read_record};
        use proptest::prelude::*;
        use std::path::Path;

        fn read_both(path: &Path, bytes: &[u8]) {
            std::fs::write(path, bytes).unwrap();
            for outcome in [
                read_record::<JobRecord>(path).map(|r| r.is_some()),
                read_record::<StudyRecord>(path).map(|r| r.is_some()),
            ] {
                match outcome {
                    Ok(found) => assert!(found, "an existing file reads as missing"),
                    Err(e) => assert!(
                        format!("{e:#}").contains(&path.display().to_string()),
                        "the error does not name the file: {e:#}"
                    ),
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
                let dir = tempdir("bytes");
                read_both(&dir.join("job.json"), &bytes);
            }

            #[test]
            fn json_like_text_never_panics(text in r#"[{}\[\]":,0-9a-z_.eE+\- ]{0,300}"#) {
                let dir = tempdir("json");
                read_both(&dir.join("job.json"), text.as_bytes());
            }
        }

        fn tempdir(tag: &str) -> std::path::PathBuf {
            let dir = std::env::temp_dir()
                .join(format!("xtask-record-fuzz-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            dir
        }
    }
}
