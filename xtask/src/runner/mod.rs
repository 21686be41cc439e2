//! Running an experiment's grid (all of it or one shard), writing one record
//! and one `.npy` per chain, and merging records into the summary; and the
//! same for studies, with one record per replicate.
//!
//! `shard` parses a shard i/N, `records` reads and writes the job and
//! replicate records and checks a job's chain, `merge` combines shard
//! outputs, `fold` adds the cells of restricted runs to a summary,
//! `recompute` adds metrics computed from stored chains; running the jobs
//! and writing the summary are here.

pub mod fold;
pub mod merge;
pub mod recompute;
pub mod records;
pub mod shard;

pub use fold::fold;
pub use merge::merge;
pub use recompute::recompute;
use records::{JobState, job_state, read_records, write_record};
pub use shard::Shard;

use crate::benchmark::{RunEnv, prepare};
use crate::experiment::{Cell, Experiment, Protocol, Replicate, Study};
use crate::files::{
    Access, DirLock, create_dir, lock_dir, remove_stale_temps, replace_dir,
    restore_interrupted_replacement, write_file,
};
use crate::ids::{fnv1a, replicate_seed, sanitize, splitmix64};
use crate::npy::write_chain;
use crate::provenance::RunRecord;
use crate::size::Size;
use crate::spec::{BuiltTarget, TargetSpec};
use crate::summary::{JobRecord, RunParams, StudyRecord, Summary};
use anyhow::{Context, Result, bail};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kameleon_samplers::chain_rng;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Instant, SystemTime};

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
    /// Run only the cells with one of these settings (empty: every cell);
    /// the run then writes records and chains only, like a shard.
    pub settings: Vec<String>,
    /// Write the raw post-burn-in chains as `.npy`.
    pub write_chains: bool,
    /// Rerun jobs whose record already exists.
    pub force: bool,
    /// Show progress bars (only on a terminal).
    pub progress: bool,
    /// Leave a record of the run (command, commit, machine, wall time) in
    /// the experiment directory's `runs/`.
    pub record_run: bool,
}

/// One chain of one cell.
#[derive(Debug, Clone)]
pub(super) struct Job<'a> {
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

/// The experiment's directory inside an input directory given on the
/// command line: `DIR/<name>/` if that holds `subdir`, else `DIR` itself,
/// which must then hold it (`hint` ends the error message otherwise).
pub(super) fn input_experiment_dir(
    input: &Path,
    experiment: &Experiment,
    subdir: &str,
    hint: &str,
) -> Result<PathBuf> {
    let nested = experiment_dir(input, experiment);
    let src = if nested.join(subdir).is_dir() {
        nested
    } else {
        input.to_path_buf()
    };
    if !src.join(subdir).is_dir() {
        let mut others: Vec<String> = std::fs::read_dir(input)
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok())
            .filter(|entry| entry.path().join(subdir).is_dir())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        others.sort();
        let found = if others.is_empty() {
            String::new()
        } else {
            format!(
                "; it holds the {subdir}/ of {}: another experiment's output?",
                others.join(", ")
            )
        };
        bail!(
            "{} holds no {}/{subdir}/ and no {subdir}/ directory{hint}{found}",
            input.display(),
            experiment.name
        );
    }
    Ok(src)
}

/// The chain file of a job's record in the experiment directory `dir`.
pub(super) fn chain_path(dir: &Path, r: &JobRecord) -> PathBuf {
    chain_file(dir, &r.target, &r.sampler, &r.setting, r.chain)
}

/// `dir/chains/<target>/<sampler>[/<setting>]/<chain>.npy`.
pub fn chain_file(dir: &Path, target: &str, sampler: &str, setting: &str, chain: usize) -> PathBuf {
    let mut p = dir
        .join("chains")
        .join(sanitize(target))
        .join(sanitize(sampler));
    if !setting.is_empty() {
        p = p.join(sanitize(setting));
    }
    p.join(format!("{chain}.npy"))
}

/// Removes the chain files `<k>.npy` with `k >= chains` from `cell`'s chain
/// directory under `dir`: an earlier run with more chains left them, and no
/// job of this run (of any shard) writes them, so a reader of the directory
/// would take them for this run's. Other files are left alone. (A job run
/// with `--no-chains` removes its own chain file likewise.)
fn remove_surplus_chains(dir: &Path, cell: &Cell, chains: usize) -> Result<()> {
    let (t, s, set) = cell.key();
    let first = chain_file(dir, &t, &s, &set, 0);
    let cell_dir = first.parent().expect("a chain path has a parent");
    let Ok(entries) = std::fs::read_dir(cell_dir) else {
        return Ok(());
    };
    for entry in entries {
        let path = entry
            .with_context(|| format!("listing {}", cell_dir.display()))?
            .path();
        let surplus = path
            .file_name()
            .and_then(|n| n.to_str()?.strip_suffix(".npy"))
            .and_then(|stem| Some((stem, stem.parse::<usize>().ok()?)))
            .is_some_and(|(stem, k)| k >= chains && stem == k.to_string());
        if surplus && path.is_file() {
            std::fs::remove_file(&path).with_context(|| {
                format!(
                    "removing {}, a chain beyond this run's {chains}",
                    path.display()
                )
            })?;
        }
    }
    Ok(())
}

/// Runs the experiment (or one shard). Returns the summary when the whole
/// grid is present in the output directory afterwards (always without
/// `--shard`).
///
/// With [`RunOptions::record_run`], the run leaves its record in the
/// experiment directory's `runs/`: written unfinished once the run holds
/// the directory, and whole when it ends.
pub fn reproduce(experiment: &Experiment, opts: &RunOptions) -> Result<Option<Summary>> {
    let start = opts.record_run.then(RunStart::now);
    let summary = match &experiment.study {
        Some(study) => reproduce_study(experiment, study, opts, start.as_ref()),
        None => reproduce_grid(experiment, opts, start.as_ref()),
    }?;
    if let Some(start) = &start {
        start
            .record(opts, true)
            .write(&experiment_dir(&opts.out, experiment))?;
    }
    Ok(summary)
}

/// When a recorded run started, and from which commit.
struct RunStart {
    /// The commit the run starts from (a commit made while it runs is not
    /// its code).
    commit: String,
    started: SystemTime,
    clock: Instant,
    load_start: Option<[f64; 3]>,
}

impl RunStart {
    fn now() -> Self {
        Self {
            started: SystemTime::now(),
            clock: Instant::now(),
            load_start: crate::machine::load_average(),
            commit: crate::provenance::commit(),
        }
    }

    /// The run's record: whole when it has `finished`, else as written at
    /// its start.
    fn record(&self, opts: &RunOptions, finished: bool) -> RunRecord {
        let record = RunRecord {
            settings: opts.settings.clone(),
            ..RunRecord::of_this_process(
                self.commit.clone(),
                self.started,
                self.clock.elapsed(),
                self.load_start,
                rayon::current_num_threads(),
                opts.size.is_quick(),
                opts.shard.map(|s| format!("{}/{}", s.index, s.count)),
            )
        };
        if finished {
            record
        } else {
            record.unfinished()
        }
    }
}

/// Opens a run's experiment directory `dir` (see [`open_output`]) and, for
/// a recorded run, writes its record there, unfinished.
fn open_run(dir: &Path, opts: &RunOptions, start: Option<&RunStart>) -> Result<DirLock> {
    let lock = open_output(dir, opts.shard)?;
    if let Some(start) = start {
        start.record(opts, false).write(dir)?;
    }
    Ok(lock)
}

/// Runs a grid experiment (or one shard of it).
fn reproduce_grid(
    experiment: &Experiment,
    opts: &RunOptions,
    start: Option<&RunStart>,
) -> Result<Option<Summary>> {
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
    if let Some(unknown) = opts
        .settings
        .iter()
        .find(|s| !cells.iter().any(|c| &c.setting == *s))
    {
        let mut known: Vec<String> = Vec::new();
        for quoted in cells.iter().map(|c| format!("{:?}", c.setting)) {
            if !known.contains(&quoted) {
                known.push(quoted);
            }
        }
        bail!(
            "no cell of {} at this size has the setting `{unknown}`; its settings: {}",
            experiment.name,
            known.join(", ")
        );
    }
    let dir = experiment_dir(&opts.out, experiment);
    let jobs_dir = dir.join("jobs");
    let _lock = open_run(&dir, opts, start)?;

    let selected: Vec<&Cell> = cells
        .iter()
        .filter(|c| c.sampler.pending().is_none())
        .filter(|c| opts.settings.is_empty() || opts.settings.contains(&c.setting))
        .collect();
    for cell in &selected {
        remove_surplus_chains(&dir, cell, params.chains)?;
    }
    let all: Vec<Job> = selected
        .iter()
        .flat_map(|&cell| (0..params.chains).map(move |chain| Job { cell, chain }))
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
        say!(
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
        keep_cached: opts.references.is_some(),
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
            let mut cell = format!("{} {}", job.cell.target.label(), job.cell.sampler.label());
            if !job.cell.setting.is_empty() {
                cell = format!("{cell} {}", job.cell.setting);
            }
            bar.set_prefix(format!("{cell} #{}", job.chain));
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
    if !opts.settings.is_empty() {
        say!(
            "{} chain(s) of the cells with setting {} run, {} record(s) in {}; add them to a \
             summary with `cargo xtask fold {} {}`",
            new_records.len(),
            opts.settings.join(" or "),
            records.len(),
            jobs_dir.display(),
            experiment.name,
            opts.out.display()
        );
        return Ok(None);
    }
    match opts.shard {
        Some(s) if s.count > 1 => {
            say!(
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
    start: Option<&RunStart>,
) -> Result<Option<Summary>> {
    if !opts.settings.is_empty() {
        bail!(
            "{} is a study of replicates, not a grid of cells: --setting does not apply",
            experiment.name
        );
    }
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
    let _lock = open_run(&dir, opts, start)?;
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
    say!(
        "  ran {} replicate(s) of {}; elapsed {:.1} s",
        mine.len(),
        experiment.name,
        started.elapsed().as_secs_f64()
    );
    let records: Vec<StudyRecord> = read_records(&jobs_dir, experiment.name, params)?;
    match opts.shard {
        Some(s) if s.count > 1 => {
            say!(
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

/// Decides an experiment's claims again from the per-chain values its
/// `summary.json` under `out` holds, without running a chain: the claims
/// and the notes come from the current code, the cells stay as recorded,
/// so regrade only while the protocol that made the cells is unchanged
/// (rerun `reproduce` otherwise). Rewrites `summary.json`, `summary.md`
/// and the figures, all of them or (if anything fails) none.
pub fn regrade(experiment: &Experiment, out: &Path) -> Result<Summary> {
    let dir = experiment_dir(out, experiment);
    let _lock = lock_dir(&dir, Access::Whole)?;
    let mut summary = read_summary(experiment, &dir)?;
    let (figures, markdown): (Figures, Markdown) = match (&experiment.protocol, &experiment.study) {
        (Some(protocol), _) => {
            summary.notes = protocol.notes.into();
            summary.claims = (protocol.claims)(&summary);
            (protocol.figures, Summary::markdown)
        }
        (None, Some(study)) => {
            summary.notes = study.notes.into();
            summary.claims = (study.claims)(&summary);
            (study.figures, Summary::study_markdown)
        }
        (None, None) => bail!("{} is not implemented", experiment.name),
    };
    replace_dir(&dir, |staging| {
        summary_files(&summary, figures, staging, markdown)
    })?;
    announce(&summary, &dir);
    Ok(summary)
}

/// Regrades every implemented experiment that has a `summary.json` under
/// `out` (see [`regrade`]); an error if none has, naming `out` (a mistyped
/// root would otherwise regrade nothing and succeed).
pub fn regrade_all(out: &Path) -> Result<Vec<Summary>> {
    let chosen: Vec<Experiment> = crate::experiments::all()
        .into_iter()
        .filter(|e| e.is_runnable() && experiment_dir(out, e).join("summary.json").exists())
        .collect();
    if chosen.is_empty() {
        bail!(
            "{} holds no summary.json of any experiment (<name>/summary.json): give the root \
             that `reproduce --out` wrote to",
            out.display()
        );
    }
    chosen.iter().map(|e| regrade(e, out)).collect()
}

/// The `summary.json` of `experiment` in its directory `dir`, with its
/// claims dropped (they are decided again, and their schema may be an
/// older one).
pub(super) fn read_summary(experiment: &Experiment, dir: &Path) -> Result<Summary> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {} (run `reproduce` first)", path.display()))?;
    let mut value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    if let Some(object) = value.as_object_mut() {
        object.insert("claims".into(), serde_json::Value::Array(Vec::new()));
    }
    let summary: Summary = serde_json::from_value(value)
        .with_context(|| format!("reading the cells of {}", path.display()))?;
    summary
        .check()
        .with_context(|| format!("checking {}", path.display()))?;
    if summary.experiment != experiment.name {
        bail!(
            "{} holds experiment {}, not {}",
            path.display(),
            summary.experiment,
            experiment.name
        );
    }
    Ok(summary)
}

/// Writes the figures of a summary into a directory, giving their names.
pub(super) type Figures = fn(&Summary, &Path) -> Result<Vec<String>>;

/// The report (`summary.md`) of a summary with its figures.
pub(super) type Markdown = fn(&Summary, &[String]) -> String;

/// Writes the figures, `summary.json` and `summary.md` of `summary` into
/// `dir` and says so (see [`summary_files`] and [`announce`]).
pub(super) fn write_outputs(
    summary: &Summary,
    figures: Figures,
    dir: &Path,
    markdown: Markdown,
) -> Result<()> {
    summary_files(summary, figures, dir, markdown)?;
    announce(summary, dir);
    Ok(())
}

/// Writes the figures, `summary.json` and `summary.md` of `summary` into
/// `dir`.
pub(super) fn summary_files(
    summary: &Summary,
    figures: Figures,
    dir: &Path,
    markdown: Markdown,
) -> Result<()> {
    let figures = figures(summary, dir)?;
    summary.write_json(&dir.join("summary.json"))?;
    write_file(
        &dir.join("summary.md"),
        markdown(summary, &figures).as_bytes(),
    )
}

/// Prints the console table of `summary`, written into `dir`.
pub(super) fn announce(summary: &Summary, dir: &Path) {
    say!("{}", summary_table(summary));
    say!("wrote {}", dir.display());
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
                    .map(|st| format!("{m} {}", crate::verdict::fmt(st.mean)))
            })
            .collect();
        if metrics.is_empty() {
            // A study's metrics have names of their own: show the first few.
            metrics = c
                .metrics
                .iter()
                .take(4)
                .map(|(m, st)| format!("{m} {}", crate::verdict::fmt(st.mean)))
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
        say!("  ran {n} chain(s) of {s} {set} on {t}: {secs:.1} s of sampling");
    }
    say!("  elapsed {elapsed:.1} s");
}

/// Creates the experiment directory `dir` with its `jobs/` and locks it:
/// shared with the other shards for a shard of several, exclusively
/// otherwise.
pub fn open_output(dir: &Path, shard: Option<Shard>) -> Result<DirLock> {
    // before `dir` is created anew over a copy that a killed run left aside
    restore_interrupted_replacement(dir)?;
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
            say_err!(
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
    let x0 = cell.start.point(&cell.target, built, &mut setup)?;
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
    let path = chain_path(dir, &record);
    if opts.write_chains {
        create_dir(path.parent().expect("a chain path has a parent"))?;
        write_chain(&path, &chain.samples, chain.dim)?;
    } else {
        // a chain file there is an earlier run's (this job is rerun): a
        // reader of the directory would take it for this run's
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| {
                    format!("removing {}, an earlier run's chain", path.display())
                });
            }
            _ => {}
        }
    }
    // A record is written only once its chain is complete.
    write_record(&dir.join("jobs"), &record)?;
    Ok(record)
}
