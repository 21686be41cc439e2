//! `cargo xtask bench-report`: every per-iteration hot path, frozen and
//! adapting, timed in one process next to three yardsticks measured in the
//! same run, and written as `bench-report.md` and `bench-report.json`.
//!
//! Every goal is a ratio measured on the machine the report runs on, so it
//! means the same on every CPU:
//! - **floor**: the path's flop count at this machine's measured FMA peak,
//!   or, for a path whose data outgrow the caches near the core, its bytes at
//!   the measured streaming rate of its working set, whichever is longer
//!   ([`peak`]); the figure of merit is `time / floor`;
//! - **peer**: a vectorised numpy implementation of the same algorithm on
//!   the same inputs, with one BLAS thread ([`peers`]), whose results are
//!   checked against ours;
//! - **frozen form**: an adapting step against the same sampler's frozen
//!   step.
//!
//! Plus the throughput of 2 chains against 1, the memory of a long chain
//! ([`system`]), and each experiment's recorded wall time and CPU-seconds
//! per 1000 iterations ([`walltime`]). Each path is warmed up, then timed
//! over repetitions ([`timing`]); the report gives medians with 10%/90%
//! quantiles.
//!
//! Modules: `timing` and `peak` are leaves; `paths` builds the samplers the
//! experiments build; `fixtures` writes their inputs for the peers, which
//! `peers` runs; `markdown` renders the [`Report`].

pub mod fixtures;
pub mod markdown;
pub mod paths;
pub mod peak;
pub mod peers;
pub mod system;
pub mod timing;
pub mod walltime;

pub use system::memory_child;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use peak::Peak;
use peers::PeerRun;
use system::{Memory, PARALLEL_GOAL, Parallelism};
use timing::Timing;
use walltime::ExperimentCost;

/// The goal for every path: at most this many times its floor.
pub const FLOOR_GOAL: f64 = 1.5;
/// The goal for every path but the BLAS-bound ones: at least this many
/// times faster than its peer.
pub const PEER_GOAL: f64 = 8.0;
/// The goal for the adapting KAMH step: at most this many times the frozen
/// step.
pub const ADAPTING_GOAL: f64 = 2.0;

/// How large and how long: the full report, `--quick`, or the tiny size of
/// the unit tests and the peers' tests.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sizes {
    /// KAMH subsample size n and KMC lite basis size.
    pub n: usize,
    /// Random features D of F-KAMH.
    pub fkamh_features: usize,
    /// The F-KAMH history sizes t compared.
    pub fkamh_histories: [usize; 2],
    /// Random features m of KMC finite (and of the finite fit and update).
    pub m: usize,
    /// Leapfrog steps per KMC iteration.
    pub leapfrog_steps: u32,
    /// Importance draws of the Glass estimate.
    pub glass_importance: usize,
    /// Steps per chain (after 200 burn-in steps) in the 2-vs-1 chain
    /// comparison.
    pub parallel_steps: u64,
    /// Iterations of the memory chain.
    pub memory_iterations: u64,
    /// Timed repetitions per path (fits and amortised steps: a third of it,
    /// at least 3).
    pub repetitions: usize,
    /// Untimed warm-up calls per path (fits: 1).
    pub warmup: usize,
    /// The shortest duration of one timed repetition (a batch of calls).
    pub min_sample_secs: f64,
    /// The shortest repetition of an adapting step whose cost comes in rare
    /// bursts (KMC refits), so that each repetition averages over them.
    pub amortised_secs: f64,
    /// The square size of the GEMM compared with the FMA peak.
    pub gemm_size: usize,
}

impl Sizes {
    /// The experiments' sizes.
    pub fn full() -> Self {
        Self {
            n: 1000,
            fkamh_features: 350,
            fkamh_histories: [1_000, 100_000],
            m: 1000,
            leapfrog_steps: 55,
            glass_importance: 100,
            parallel_steps: 50_000,
            memory_iterations: 1_000_000,
            repetitions: 31,
            warmup: 20,
            min_sample_secs: 0.005,
            amortised_secs: 1.0,
            gemm_size: 512,
        }
    }

    /// The same per-path sizes with few repetitions, a shorter F-KAMH
    /// history and memory chain (seconds; for CI).
    pub fn quick() -> Self {
        Self {
            fkamh_histories: [1_000, 10_000],
            parallel_steps: 1000,
            memory_iterations: 20_000,
            repetitions: 7,
            warmup: 3,
            min_sample_secs: 0.002,
            amortised_secs: 0.05,
            ..Self::full()
        }
    }

    /// Tiny sizes for tests.
    pub fn tiny() -> Self {
        Self {
            n: 40,
            fkamh_features: 20,
            fkamh_histories: [50, 100],
            m: 30,
            leapfrog_steps: 5,
            glass_importance: 5,
            parallel_steps: 20,
            memory_iterations: 200,
            repetitions: 3,
            warmup: 1,
            min_sample_secs: 0.0,
            amortised_secs: 0.0,
            gemm_size: 32,
        }
    }

    /// The sizes by name: `tiny`, `quick` or `full`.
    pub fn named(name: &str) -> Result<Self> {
        match name {
            "tiny" => Ok(Self::tiny()),
            "quick" => Ok(Self::quick()),
            "full" => Ok(Self::full()),
            other => bail!("unknown size `{other}` (tiny, quick or full)"),
        }
    }
}

/// One timed path with its yardsticks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathResult {
    /// Short identifier.
    pub name: String,
    /// What one call does.
    pub description: String,
    /// Our measurement.
    pub timing: Timing,
    /// Estimated flops per call.
    pub flops: f64,
    /// Bytes moved per call, for a path bound by memory traffic.
    pub bytes: Option<f64>,
    /// flops at the measured FMA peak.
    pub compute_floor_secs: f64,
    /// bytes at the measured streaming rate of the path's working set.
    pub memory_floor_secs: Option<f64>,
    /// The larger of the two floors.
    pub floor_secs: f64,
    /// median / floor.
    pub times_floor: f64,
    /// The numpy peer's measurement, if the path has a peer.
    pub peer: Option<Timing>,
    /// Peer median / our median.
    pub vs_peer: Option<f64>,
    /// Largest relative difference of the peer's result from ours.
    pub peer_max_rel_err: Option<f64>,
    /// The public Python implementation's recorded figure, if any.
    pub python_original_secs: Option<f64>,
    /// That figure / our median.
    pub vs_python_original: Option<f64>,
    /// For an adapting path, its frozen form.
    pub frozen_form: Option<String>,
    /// Our median / the frozen form's median.
    pub vs_frozen: Option<f64>,
    /// Bound by dense factorisations and products, which the numpy peer
    /// runs through the same kind of LAPACK and BLAS kernels: judged
    /// against the floor only (absent in older reports: false).
    #[serde(default)]
    pub blas_bound: bool,
    /// On a CPU with wider vectors than 256 bits, the same path with the
    /// kernels capped at 256 bits (`kameleon_core::simd::set_max_width`),
    /// measured in the same run (None: no wider vectors, or an older
    /// report).
    #[serde(default)]
    pub at_256_bits: Option<Timing>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The sizes used.
    pub sizes: Sizes,
    /// Whether the sizes are the full ones.
    pub full_size: bool,
    /// CPU model and logical cores.
    pub machine: String,
    /// UTC time of the run (seconds since the epoch).
    pub unix_time: u64,
    /// The peaks behind every floor.
    pub peak: Peak,
    /// numpy and Python versions of the peers (None: run without them).
    pub peers: Option<PeerVersions>,
    /// The timed paths.
    pub paths: Vec<PathResult>,
    /// Adapting F-KAMH median at the larger history over the smaller.
    pub fkamh_history_ratio: f64,
    /// 2 chains vs 1.
    pub parallelism: Parallelism,
    /// Long-chain memory.
    pub memory: Memory,
    /// The experiments' recorded costs.
    pub experiments: Vec<ExperimentCost>,
}

/// What the peers ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerVersions {
    /// numpy's version.
    pub numpy: String,
    /// Python's version.
    pub python: String,
    /// BLAS threads.
    pub blas_threads: u32,
}

/// Options of the subcommand.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// The sizes.
    pub sizes: Sizes,
    /// Whether the sizes are the full ones.
    pub full_size: bool,
    /// Output directory.
    pub out: PathBuf,
    /// Measure memory in a child process (this executable re-invoked).
    pub isolate_memory: bool,
    /// Run the numpy peers.
    pub peers: bool,
    /// The experiments' results directory (for their recorded costs).
    pub results: PathBuf,
}

/// The subcommand: full sizes (or `--quick`), memory in a child process;
/// prints the Markdown.
pub fn main(quick: bool, out: PathBuf, peers: bool, results: PathBuf) -> Result<()> {
    let opts = ReportOptions {
        sizes: if quick { Sizes::quick() } else { Sizes::full() },
        full_size: !quick,
        out,
        isolate_memory: true,
        peers,
        results,
    };
    let report = run(&opts)?;
    // the report is in its files; a closed stdout loses only this copy
    let _ = std::io::Write::write_all(&mut std::io::stdout(), markdown::render(&report).as_bytes());
    Ok(())
}

/// The `peer-fixtures` subcommand: writes the peers' fixtures at `size`.
pub fn write_fixtures(size: &str, out: &Path) -> Result<()> {
    fixtures::write(&Sizes::named(size)?, out)
}

/// Runs the report and writes `bench-report.{md,json}` into `opts.out`.
pub fn run(opts: &ReportOptions) -> Result<Report> {
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    let report = measure(opts)?;
    let json = serde_json::to_string_pretty(&report)?;
    crate::files::write_file(&opts.out.join("bench-report.json"), json.as_bytes())?;
    crate::files::write_file(
        &opts.out.join("bench-report.md"),
        markdown::render(&report).as_bytes(),
    )?;
    Ok(report)
}

fn measure(opts: &ReportOptions) -> Result<Report> {
    use kameleon_core::simd::{Width, set_max_width};
    let s = opts.sizes;
    let rust = paths::measure(&s)?;
    // the same paths with 256-bit kernels, where the CPU has wider ones
    let narrow = if crate::machine::has_wider_vectors_than_256_bits() {
        say_err!("bench-report: the paths again, capped at 256 bits");
        set_max_width(Width::Bits256);
        let narrow = paths::measure(&s);
        set_max_width(Width::Widest);
        Some(narrow?)
    } else {
        None
    };
    say_err!("bench-report: FMA, GEMM and streaming peaks");
    let mut working_sets: Vec<usize> = rust
        .iter()
        .filter_map(|p| p.traffic.map(|t| t.working_set))
        .collect();
    working_sets.sort_unstable();
    working_sets.dedup();
    let peak = Peak::measure(&paths::Timers::new(&s).step, s.gemm_size, &working_sets);
    let peer_run: Option<PeerRun> = if opts.peers {
        Some(peers::run(&s, &opts.out.join("peers"))?)
    } else {
        None
    };
    let median = |name: &str| {
        rust.iter()
            .find(|p| p.name == name)
            .map(|p| p.timing.median_secs)
    };
    let paths: Vec<PathResult> = rust
        .iter()
        .map(|p| {
            let ours = p.timing.median_secs;
            let compute_floor_secs = peak.floor_secs(p.flops);
            let memory_floor_secs = p
                .traffic
                .and_then(|t| peak.memory_floor_secs(t.bytes, t.working_set));
            let floor_secs =
                memory_floor_secs.map_or(compute_floor_secs, |m| m.max(compute_floor_secs));
            let peer = peer_run.as_ref().and_then(|r| r.paths.get(&p.name));
            let at_256_bits = narrow
                .as_ref()
                .and_then(|n| n.iter().find(|q| q.name == p.name))
                .map(|q| q.timing);
            PathResult {
                name: p.name.clone(),
                description: p.description.clone(),
                timing: p.timing,
                flops: p.flops,
                bytes: p.traffic.map(|t| t.bytes),
                compute_floor_secs,
                memory_floor_secs,
                floor_secs,
                times_floor: ours / floor_secs,
                peer: peer.map(|q| q.timing()),
                vs_peer: peer.map(|q| q.median_secs / ours),
                peer_max_rel_err: peer.and_then(|q| q.max_rel_err),
                python_original_secs: p.python_original_secs,
                vs_python_original: p.python_original_secs.map(|py| py / ours),
                frozen_form: p.frozen_form.clone(),
                vs_frozen: p
                    .frozen_form
                    .as_deref()
                    .and_then(median)
                    .map(|frozen| ours / frozen),
                blas_bound: p.blas_bound,
                at_256_bits,
            }
        })
        .collect();
    let [short, long] = s.fkamh_histories;
    let fkamh_history_ratio = match (
        median(&format!("fkamh_adapting_step_t{long}")),
        median(&format!("fkamh_adapting_step_t{short}")),
    ) {
        (Some(l), Some(h)) => l / h,
        _ => bail!("the adapting F-KAMH paths are missing"),
    };

    say_err!("bench-report: 2 chains vs 1");
    let parallelism = system::parallel_throughput(&s)?;
    say_err!("bench-report: memory of a long chain");
    let memory = system::memory(s.memory_iterations, opts.isolate_memory)?;
    let experiments = walltime::read(&opts.results)?;

    Ok(Report {
        sizes: s,
        full_size: opts.full_size,
        machine: crate::machine::description(),
        unix_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        peak,
        peers: peer_run.map(|r| PeerVersions {
            numpy: r.numpy,
            python: r.python,
            blas_threads: r.blas_threads,
        }),
        paths,
        fkamh_history_ratio,
        parallelism,
        memory,
        experiments,
    })
}

/// A goal and whether it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct GoalCheck {
    /// What is asked.
    pub goal: String,
    /// What was measured.
    pub measured: String,
    /// Whether it holds (None: nothing to judge).
    pub pass: Option<bool>,
}

impl Report {
    /// Every goal of the report, judged.
    pub fn goals(&self) -> Vec<GoalCheck> {
        let mut goals = Vec::new();
        for p in &self.paths {
            goals.push(GoalCheck {
                goal: format!("`{}` ≤ {FLOOR_GOAL}× floor", p.name),
                measured: format!("{:.1}×", p.times_floor),
                pass: Some(p.times_floor <= FLOOR_GOAL),
            });
        }
        // a BLAS-bound path's peer runs the same kind of kernels: no goal
        for p in self
            .paths
            .iter()
            .filter(|p| p.vs_peer.is_some() && !p.blas_bound)
        {
            let ratio = p.vs_peer.unwrap_or(f64::NAN);
            goals.push(GoalCheck {
                goal: format!("`{}` ≥ {PEER_GOAL}× faster than its numpy peer", p.name),
                measured: format!("{ratio:.1}×"),
                pass: Some(ratio >= PEER_GOAL),
            });
        }
        if let Some(p) = self.paths.iter().find(|p| p.name == "kamh_adapting_step") {
            let ratio = p.vs_frozen.unwrap_or(f64::NAN);
            goals.push(GoalCheck {
                goal: format!("adapting KAMH step ≤ {ADAPTING_GOAL}× the frozen step"),
                measured: format!("{ratio:.2}×"),
                pass: Some(ratio <= ADAPTING_GOAL),
            });
        }
        let ratio = self.parallelism.throughput_ratio;
        goals.push(GoalCheck {
            goal: format!("2 chains on 2 cores ≥ {PARALLEL_GOAL}× the throughput of 1"),
            measured: format!("{ratio:.2}×"),
            pass: Some(ratio >= PARALLEL_GOAL),
        });
        goals
    }
}
