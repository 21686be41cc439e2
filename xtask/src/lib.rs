//! `cargo xtask`: reproduces the experiments of the kernel adaptive MCMC papers.
//!
//! `cargo xtask list` names every experiment with its source, sizes and
//! status; `cargo xtask reproduce <name> [--size quick|full|paper] [--seed S]
//! [--chains K] [--out DIR] [--threads T] [--shard i/N]` runs one (or `all`)
//! and writes `DIR/<name>/summary.json`, `summary.md`, SVG figures and the
//! raw chains; `cargo xtask reference glass|abc` computes a reference sample
//! ahead of sharded runs; `cargo xtask merge <name> DIR…` combines shard
//! outputs; `cargo xtask fold <name> DIR…` adds the cells of runs
//! restricted to some settings (`reproduce --setting S`) to a summary;
//! `cargo xtask recompute <name> DIR` adds to a summary the metrics that
//! are functions of the recorded draws alone, from the chains stored in
//! `DIR`, once they reproduce the metrics the summary holds bit for bit;
//! `cargo xtask regrade <name>` decides the claims again from a
//! `summary.json` without running chains; `cargo xtask gallery` writes
//! `RESULTS.md` from the results;
//! `cargo xtask bench-report` times the hot paths against this machine's peak
//! and numpy peers (`peer-fixtures` writes the peers' inputs for their
//! tests). Each run leaves a record of its command, commit, machine and wall
//! time in `DIR/<name>/runs/`, written when it starts and marked unfinished
//! until it ends.
//!
//! `--shard-from-env` takes the shard from Slurm: in a job array from
//! `SLURM_ARRAY_TASK_ID`, `SLURM_ARRAY_TASK_MIN`, `SLURM_ARRAY_TASK_STEP` and
//! `SLURM_ARRAY_TASK_COUNT`; otherwise, in an `srun` step, from
//! `SLURM_PROCID` and `SLURM_NTASKS` (the array variables take precedence).
//!
//! Every output file is written atomically, and a run locks its experiment's
//! output directory: a second run into the same directory fails at once
//! naming the holder (the shards of one grid may share a directory). An
//! interrupted run can simply be rerun: finished chains are kept, and a
//! damaged record or chain file is reported and its chain rerun.
//!
//! The modules form layers, each using only those below it (a test checks
//! that no import cycle appears):
//!
//! 1. `files`, `npy`, `machine`, `ids`, `size`: atomic files, `.npy` chains,
//!    the CPU description, job names and seeds, the run size;
//! 2. `summary` (records and summaries), `reference` (a cached reference
//!    sample), `plot` (SVG figures), `provenance` (run records);
//! 3. `spec`: the targets, samplers and metrics an experiment names;
//! 4. `benchmark` (computing reference samples), `experiment` (what an
//!    experiment is), `aggregate` (records into a summary);
//! 5. `experiments/`: the papers' experiments;
//! 6. `runner` (running, merging and folding grids), `gallery`, `bench_report`, and
//!    the subcommands in this file.

/// Prints a line on stdout as `println!` does, except that a stdout that
/// cannot be written (a pipe whose reader quit, as in `xtask list | head`)
/// is no panic: the command goes on and ends as it would have.
macro_rules! say {
    ($($line:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($line)*);
    }};
}

/// `say!` on stderr (progress, warnings).
macro_rules! say_err {
    ($($line:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($line)*);
    }};
}

pub mod aggregate;
pub mod bench_report;
pub mod benchmark;
pub mod cli;
pub mod experiment;
pub mod experiments;
pub mod files;
pub mod gallery;
pub mod ids;
pub mod machine;
pub mod npy;
pub mod plot;
pub mod provenance;
pub mod reference;
pub mod runner;
pub mod size;
pub mod spec;
pub mod summary;
pub mod verdict;

use anyhow::Result;
use runner::{RunOptions, Shard};
use size::Size;
use std::path::PathBuf;

/// A subcommand and its arguments, as [`cli::parse`] reads them.
pub enum Command {
    /// `list`: names every experiment with its source, sizes and status.
    List,
    /// `reproduce`: runs an experiment (or `all`) and writes its results.
    Reproduce {
        /// The experiment's name, or `all`.
        name: String,
        /// How large (`--size`).
        size: Size,
        /// `--quick`, the same as `--size quick`.
        quick: bool,
        /// The master seed every chain's stream derives from.
        seed: u64,
        /// Chains per cell, or replicates of a study (`None`: the size's).
        chains: Option<usize>,
        /// The output root; results go to `out/<name>/`.
        out: PathBuf,
        /// Where reference samples are read from or computed into (`None`:
        /// the output root).
        references: Option<PathBuf>,
        /// Worker threads (`None`: all cores).
        threads: Option<usize>,
        /// The part of the grid to run (`--shard i/N`).
        shard: Option<Shard>,
        /// `--shard-from-env`: take the shard from Slurm's environment.
        shard_from_env: bool,
        /// Run only the cells with these settings (`--setting`).
        settings: Vec<String>,
        /// `--no-chains`: do not write the raw chains.
        no_chains: bool,
        /// `--force`: rerun chains whose results already exist.
        force: bool,
    },
    /// `reference`: computes (or checks) a reference sample.
    Reference {
        /// Which reference: the Glass benchmark or the ABC reference.
        name: benchmark::ReferenceName,
        /// How large.
        size: Size,
        /// The master seed the reference's stream derives from.
        seed: u64,
        /// The directory of reference samples.
        out: PathBuf,
        /// Worker threads (`None`: all cores).
        threads: Option<usize>,
    },
    /// `merge`: combines the outputs of shards into one summary.
    Merge {
        /// The experiment's name.
        name: String,
        /// The shards' output directories.
        dirs: Vec<PathBuf>,
        /// The output root for the merged results.
        out: PathBuf,
    },
    /// `fold`: adds the cells of runs restricted to some settings to a
    /// summary.
    Fold {
        /// The experiment's name.
        name: String,
        /// The restricted runs' output directories.
        dirs: Vec<PathBuf>,
        /// The results root holding the summary to fold into.
        out: PathBuf,
    },
    /// `recompute`: adds to a summary the metrics that are functions of the
    /// recorded draws alone, from stored chains.
    Recompute {
        /// The experiment's name.
        name: String,
        /// The output directory of the run that stored the chains.
        chains: PathBuf,
        /// The results root holding the summary to add the metrics to.
        out: PathBuf,
    },
    /// `regrade`: decides an experiment's claims again from its summary.
    Regrade {
        /// The experiment's name, or `all`.
        name: String,
        /// The results root.
        results: PathBuf,
    },
    /// `gallery`: writes `RESULTS.md` from the results.
    Gallery {
        /// The results root.
        results: PathBuf,
        /// The Markdown file to write.
        out: PathBuf,
    },
    /// `bench-report`: times the hot paths against the machine's peak and
    /// the numpy peers.
    BenchReport {
        /// `--quick`: few repetitions and short chains.
        quick: bool,
        /// The output directory.
        out: PathBuf,
        /// `--no-peers`: skip the numpy peers.
        no_peers: bool,
        /// The experiments' results, for their recorded wall times.
        results: PathBuf,
        /// Run only the memory chain of this many iterations and print its
        /// peak resident memory (the report runs itself as this child).
        memory_child: Option<u64>,
    },
    /// `peer-fixtures`: writes the inputs and Rust results the numpy peers
    /// are run and checked on.
    PeerFixtures {
        /// `tiny`, `quick` or `full`.
        size: String,
        /// The output directory.
        out: PathBuf,
    },
}

/// Runs the subcommand named on the command line.
pub fn main() -> Result<()> {
    match cli::parse() {
        Command::List => list(),
        Command::Reproduce {
            name,
            size,
            quick,
            seed,
            chains,
            out,
            references,
            threads,
            shard,
            shard_from_env,
            settings,
            no_chains,
            force,
        } => {
            let shard = if shard_from_env {
                Some(Shard::from_env()?)
            } else {
                shard
            };
            let opts = RunOptions {
                size: if quick { Size::Quick } else { size },
                seed,
                chains,
                out,
                references,
                shard,
                settings,
                write_chains: !no_chains,
                force,
                progress: true,
                record_run: true,
            };
            with_threads(threads, || reproduce(&name, &opts))
        }
        Command::Reference {
            name,
            size,
            seed,
            out,
            threads,
        } => with_threads(threads, || benchmark::compute_into(name, size, seed, out)),
        Command::Merge { name, dirs, out } => {
            runner::merge(&experiments::named(&name)?, &dirs, &out)?;
            Ok(())
        }
        Command::Fold { name, dirs, out } => {
            runner::fold(&experiments::named(&name)?, &dirs, &out)?;
            Ok(())
        }
        Command::Recompute { name, chains, out } => {
            runner::recompute(&experiments::named(&name)?, &chains, &out)?;
            Ok(())
        }
        Command::Regrade { name, results } => regrade(&name, &results),
        Command::Gallery { results, out } => gallery::main(&results, &out),
        Command::BenchReport {
            quick,
            out,
            no_peers,
            results,
            memory_child,
        } => match memory_child {
            Some(iterations) => bench_report::memory_child(iterations),
            None => bench_report::main(quick, out, !no_peers, results),
        },
        Command::PeerFixtures { size, out } => bench_report::write_fixtures(&size, &out),
    }
}

/// How the binary reports an error: its message, then its causes, as
/// anyhow lists them, but never a stack backtrace (which anyhow adds when
/// `RUST_BACKTRACE` is set): an error here is the user's to fix, and a
/// backtrace would bury what to do.
pub fn error_report(error: &anyhow::Error) -> String {
    let mut report = format!("Error: {error}");
    let causes: Vec<String> = error.chain().skip(1).map(|c| c.to_string()).collect();
    if !causes.is_empty() {
        report.push_str("\n\nCaused by:");
    }
    for (i, cause) in causes.iter().enumerate() {
        if causes.len() == 1 {
            report.push_str(&format!("\n    {cause}"));
        } else {
            report.push_str(&format!("\n    {i}: {cause}"));
        }
    }
    report
}

fn list() -> Result<()> {
    for e in experiments::all() {
        say!("{:<18} {}", e.name, e.status());
        say!("    source: {}", e.source);
        say!("    what:   {}", e.description);
        say!("    full:   {}", e.size_description(Size::Full));
        if e.full_is_reduced() {
            say!("    paper:  {}", e.size_description(Size::Paper));
        }
        say!("    quick:  {}", e.size_description(Size::Quick));
    }
    Ok(())
}

fn reproduce(name: &str, opts: &RunOptions) -> Result<()> {
    if name == "all" {
        for e in experiments::all().into_iter().filter(|e| e.is_runnable()) {
            runner::reproduce(&e, opts)?;
        }
        return Ok(());
    }
    runner::reproduce(&experiments::named(name)?, opts)?;
    Ok(())
}

/// Regrades one experiment, or every one with a summary under `results`
/// (`all`).
fn regrade(name: &str, results: &std::path::Path) -> Result<()> {
    if name == "all" {
        runner::regrade_all(results)?;
    } else {
        runner::regrade(&experiments::named(name)?, results)?;
    }
    Ok(())
}

/// Runs `f` in a rayon pool of `threads` workers. Chains run in parallel, so
/// faer's own parallelism is switched off.
fn with_threads(threads: Option<usize>, f: impl FnOnce() -> Result<()> + Send) -> Result<()> {
    faer::set_global_parallelism(faer::Par::Seq);
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(t) = threads {
        builder = builder.num_threads(t);
    }
    builder.build()?.install(f)
}
