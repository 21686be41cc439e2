//! `cargo xtask bench-report`: times every per-iteration hot path in one
//! process and writes `bench-report.md` and `bench-report.json`.
//!
//! Each path is warmed up, then timed over repetitions; one repetition times
//! a batch of calls long enough (≥ [`Sizes::min_sample_secs`]) for the clock
//! to be exact, and the report gives the median and the 10%/90% quantiles of
//! the per-call time. Next to each figure: the goal, the public
//! Python implementation's figure where the issue gives one, the speedup over
//! it, and an arithmetic floor — an estimate of the path's flops divided by
//! the measured single-thread rate of a faer GEMM on this machine — with the
//! ratio "× floor" (how far the path runs from pure arithmetic at GEMM speed).
//!
//! Two figures are not timings: the throughput of 2 chains on 2 threads
//! relative to 1 chain on 1 thread, and the peak resident memory (VmHWM) of a
//! long KAMH chain, measured in a child process (this binary re-invoked with
//! the hidden `--memory-child N`) so nothing else inflates it.

use anyhow::{Context, Result, bail};
use faer::{Accum, Mat, Par};
use kameleon_diagnostics::quantile_sorted;
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, AdaptationStop, Bandwidth, FKamh, FiniteSurrogate, Gamma, Kamh, KamhConfig,
    KmcFinite, KmcLite, LiteSurrogate, MetropolisHastings, Proposal, Refresh, RobbinsMonro,
    RunConfig, Scale, StepSchedule, SubsampleConfig, chain_rng, run_chain, run_chains,
};
use kameleon_score_matching::{FiniteEstimator, GradientModel, LiteEstimator, RidgeSchedule};
use kameleon_targets::{Banana, GpClassification, Target, glass_posterior};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

/// Flops charged for one `exp`, `sin` or `cos` (a vectorised polynomial
/// evaluation after range reduction costs about this many operations).
const TRANSCENDENTAL_FLOPS: f64 = 15.0;
/// The dimension of every banana path.
const DIM: usize = 8;
/// The KAMH paper's γ (proposal noise) and a fixed ν for the timed steps.
const KAMH_GAMMA: f64 = 0.2;
const KAMH_NU: f64 = 2.0;
/// KMC leapfrog step size range and the fixed number of steps.
const KMC_STEP_SIZE: (f64, f64) = (0.3, 0.6);

/// How large and how long: the full report, `--quick`, or the tiny size of
/// the unit test.
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
    /// Timed repetitions per path (fits: a third of it, at least 3).
    pub repetitions: usize,
    /// Untimed warm-up calls per path (fits: 1).
    pub warmup: usize,
    /// The shortest duration of one timed repetition (a batch of calls).
    pub min_sample_secs: f64,
    /// The square size of the GEMM whose rate sets the floors.
    pub gemm_size: usize,
}

impl Sizes {
    /// The sizes.
    pub fn full() -> Self {
        Self {
            n: 1000,
            fkamh_features: 350,
            fkamh_histories: [1_000, 100_000],
            m: 1000,
            leapfrog_steps: 55,
            glass_importance: 100,
            parallel_steps: 10_000,
            memory_iterations: 1_000_000,
            repetitions: 31,
            warmup: 20,
            min_sample_secs: 0.005,
            gemm_size: 512,
        }
    }

    /// The per-path sizes with few repetitions, a shorter F-KAMH
    /// history and memory chain (seconds; for CI).
    pub fn quick() -> Self {
        Self {
            fkamh_histories: [1_000, 10_000],
            parallel_steps: 1000,
            memory_iterations: 20_000,
            repetitions: 7,
            warmup: 3,
            min_sample_secs: 0.002,
            ..Self::full()
        }
    }

    /// Tiny sizes for the unit test of the report's structure.
    #[cfg(test)]
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
            gemm_size: 32,
        }
    }
}

/// A timing: the median and 10%/90% quantiles of the seconds per call.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Median seconds per call.
    pub median_secs: f64,
    /// 10% quantile of the seconds per call over repetitions.
    pub p10_secs: f64,
    /// 90% quantile.
    pub p90_secs: f64,
    /// Timed repetitions.
    pub repetitions: usize,
    /// Calls per repetition.
    pub calls_per_repetition: usize,
}

/// One timed hot path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathResult {
    /// Short identifier.
    pub name: String,
    /// What one call does.
    pub description: String,
    /// The measurement.
    pub timing: Timing,
    /// The goal (seconds per call), if it sets one.
    pub goal_secs: Option<f64>,
    /// The public Python implementation's figure from the issue, if any.
    pub python_secs: Option<f64>,
    /// Python figure / our median.
    pub speedup_vs_python: Option<f64>,
    /// Estimated flops per call (see the formulas in the source).
    pub flops: f64,
    /// flops / measured single-thread GEMM rate.
    pub floor_secs: f64,
    /// median / floor.
    pub times_floor: f64,
    /// median ≤ goal (None without a goal, or when the size is not the issue's).
    pub pass: Option<bool>,
}

/// The measured single-thread GEMM rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GemmPeak {
    /// Square size of the product.
    pub size: usize,
    /// The product's timing.
    pub timing: Timing,
    /// GFLOP/s at the median time (used for every floor).
    pub gflops_median: f64,
    /// GFLOP/s at the 10% quantile time (the best runs).
    pub gflops_best: f64,
}

/// 2 chains on 2 threads against 1 chain on 1 thread.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Parallelism {
    /// Steps per chain.
    pub steps_per_chain: u64,
    /// Seconds for one chain alone (median over repetitions).
    pub one_chain_secs: f64,
    /// Wall seconds for two chains on two threads (median).
    pub two_chains_secs: f64,
    /// Throughput ratio `2 · one_chain_secs / two_chains_secs`.
    pub throughput_ratio: f64,
    /// The goal (1.8).
    pub goal: f64,
    /// ratio ≥ goal.
    pub pass: bool,
}

/// The resident memory of a long chain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// Chain iterations (adaptation on throughout, so the history grows too).
    pub iterations: u64,
    /// Peak resident set (VmHWM) in MB (10⁶ bytes).
    pub peak_resident_mb: f64,
    /// Whether it was measured in a separate process.
    pub isolated: bool,
    /// The goal in MB (for 10⁶ iterations).
    pub goal_mb: f64,
    /// peak < goal (None unless the chain had the 10⁶ iterations).
    pub pass: Option<bool>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The sizes used.
    pub sizes: Sizes,
    /// Whether the sizes are the (pass/fail is only judged then).
    pub full_size: bool,
    /// CPU model and logical cores.
    pub machine: String,
    /// UTC time of the run (seconds since the epoch).
    pub unix_time: u64,
    /// The GEMM rate behind every floor.
    pub gemm: GemmPeak,
    /// The timed paths.
    pub paths: Vec<PathResult>,
    /// F-KAMH median at the larger history over the smaller (goal ≤ 1.1).
    pub fkamh_history_ratio: f64,
    /// 2 chains vs 1.
    pub parallelism: Parallelism,
    /// Long-chain memory.
    pub memory: Memory,
}

/// Options of the subcommand.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// The sizes.
    pub sizes: Sizes,
    /// Whether the sizes are the issue's.
    pub full_size: bool,
    /// Output directory.
    pub out: PathBuf,
    /// Measure memory in a child process (this executable re-invoked).
    pub isolate_memory: bool,
}

/// The subcommand: the sizes (or `--quick`), memory in a child
/// process; prints the Markdown table.
pub fn main(quick: bool, out: PathBuf) -> Result<()> {
    let opts = ReportOptions {
        sizes: if quick { Sizes::quick() } else { Sizes::full() },
        full_size: !quick,
        out,
        isolate_memory: true,
    };
    let report = run(&opts)?;
    print!("{}", markdown(&report));
    Ok(())
}

/// Runs the report and writes `bench-report.{md,json}` into `opts.out`.
pub fn run(opts: &ReportOptions) -> Result<Report> {
    let report = measure(opts)?;
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    let json = serde_json::to_string_pretty(&report)?;
    crate::files::write_file(&opts.out.join("bench-report.json"), json.as_bytes())?;
    crate::files::write_file(
        &opts.out.join("bench-report.md"),
        markdown(&report).as_bytes(),
    )?;
    Ok(report)
}

/// Times `call` after `warmup` calls: each of `repetitions` samples times a
/// batch of calls lasting at least `min_secs`, the batch size calibrated from
/// the warm-up.
fn time<F: FnMut()>(warmup: usize, repetitions: usize, min_secs: f64, mut call: F) -> Timing {
    let start = Instant::now();
    for _ in 0..warmup.max(1) {
        call();
    }
    let per_call = start.elapsed().as_secs_f64() / warmup.max(1) as f64;
    let batch = if per_call > 0.0 {
        ((min_secs / per_call).ceil() as usize).max(1)
    } else {
        1000
    };
    let mut samples: Vec<f64> = (0..repetitions.max(1))
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                call();
            }
            start.elapsed().as_secs_f64() / batch as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    Timing {
        median_secs: quantile_sorted(&samples, 0.5),
        p10_secs: quantile_sorted(&samples, 0.1),
        p90_secs: quantile_sorted(&samples, 0.9),
        repetitions: samples.len(),
        calls_per_repetition: batch,
    }
}

fn measure(opts: &ReportOptions) -> Result<Report> {
    let s = opts.sizes;
    let timer = |call: &mut dyn FnMut()| time(s.warmup, s.repetitions, s.min_sample_secs, call);
    let fit_timer =
        |call: &mut dyn FnMut()| time(1, (s.repetitions / 3).max(3), s.min_sample_secs, call);

    eprintln!("bench-report: GEMM peak");
    let gemm = gemm_peak(s.gemm_size, &timer);
    let rate = gemm.gflops_median * 1e9;
    let mut paths = Vec::new();
    let mut add = |name: &str,
                   description: String,
                   timing: Timing,
                   goal: Option<f64>,
                   python: Option<f64>,
                   flops: f64| {
        let floor = flops / rate;
        paths.push(PathResult {
            name: name.into(),
            description,
            timing,
            goal_secs: goal,
            python_secs: python,
            speedup_vs_python: python.map(|p| p / timing.median_secs),
            flops,
            floor_secs: floor,
            times_floor: timing.median_secs / floor,
            pass: goal
                .filter(|_| opts.full_size)
                .map(|g| timing.median_secs <= g),
        });
    };
    let target = Banana::new(DIM, 0.03, 100.0)?;
    let (n, d) = (s.n, DIM as f64);

    eprintln!("bench-report: KAMH step");
    let z = iid_draws(&target, n, 1)?;
    let mut kamh = kamh_sampler(&target, &z)?;
    let timing = timer(&mut || {
        black_box(kamh.step(&target));
    });
    add(
        "kamh_step",
        format!("KAMH iteration, n = {n}, Gaussian kernel, banana B(0.03, 100) in d = 8"),
        timing,
        Some(17e-6),
        Some(1.69e-3),
        kamh_step_flops(n as f64, d),
    );

    let big = s.fkamh_features;
    let mut fkamh_medians = Vec::new();
    for history in s.fkamh_histories {
        eprintln!("bench-report: F-KAMH step, history {history}");
        let mut sampler = fkamh_sampler(&target, big, history)?;
        let timing = timer(&mut || {
            black_box(sampler.step(&target));
        });
        fkamh_medians.push(timing.median_secs);
        add(
            &format!("fkamh_step_t{history}"),
            format!(
                "F-KAMH iteration incl. Welford update, D = {big} random Fourier features, \
                 history t = {history}"
            ),
            timing,
            Some(60e-6),
            None,
            fkamh_step_flops(big as f64, d),
        );
    }

    let steps = s.leapfrog_steps;
    eprintln!("bench-report: KMC lite step");
    let mut lite = kmc_lite_sampler(&target, n, steps)?;
    let timing = timer(&mut || {
        black_box(lite.step(&target));
    });
    add(
        "kmc_lite_step",
        format!("KMC lite iteration, {steps} leapfrog steps, n = {n}, frozen surrogate"),
        timing,
        Some(120e-6),
        Some(2.38e-3),
        f64::from(steps + 1) * lite_gradient_flops(n as f64, d),
    );

    let m = s.m;
    eprintln!("bench-report: KMC finite step");
    let mut finite = kmc_finite_sampler(&target, m, steps)?;
    let timing = timer(&mut || {
        black_box(finite.step(&target));
    });
    add(
        "kmc_finite_step",
        format!("KMC finite iteration, {steps} leapfrog steps, m = {m}, frozen surrogate"),
        timing,
        Some(200e-6),
        Some(7.07e-3),
        f64::from(steps + 1) * finite_gradient_flops(m as f64, d),
    );

    eprintln!("bench-report: finite online update");
    // fitted on 2m points: refactorisation is due only after m/4 more points,
    // more than the warm-up and repetitions add, so each call is the O(dm²)
    // rank-d update plus the preconditioned solve
    let mut model = finite_estimator(m)?;
    model.fit(uniform_points(2 * m, 4).as_ref())?;
    let x = [0.1; DIM];
    let updates = s.warmup + s.repetitions;
    if updates >= m / 4 {
        bail!("too many repetitions ({updates}) for the online update at m = {m}");
    }
    let timing = time(s.warmup, s.repetitions, 0.0, || {
        model.update(black_box(&x)).expect("online update");
    });
    add(
        "finite_online_update",
        format!("finite estimator: add one point, m = {m} (default ridge tλ on the sums)"),
        timing,
        Some(2e-3),
        None,
        finite_update_flops(m as f64, d),
    );

    eprintln!("bench-report: finite online update, fixed ridge on the sums");
    // RidgeSchedule::FixedOnSums with λ₀ = 2m · 10⁻³ (the default's ridge at
    // the fitted count 2m): a rank-d Cholesky update and two triangular
    // solves, no iteration
    let features = finite_estimator(m)?.features().clone();
    let mut model = FiniteEstimator::new(features, 2.0 * m as f64 * 1e-3)?
        .with_ridge_schedule(RidgeSchedule::FixedOnSums)?;
    model.fit(uniform_points(2 * m, 4).as_ref())?;
    let timing = time(s.warmup, s.repetitions, 0.0, || {
        model.update(black_box(&x)).expect("online update");
    });
    add(
        "finite_online_update_fixed_ridge",
        format!("finite estimator: add one point, m = {m} (RidgeSchedule::FixedOnSums)"),
        timing,
        Some(2e-3),
        None,
        finite_fixed_ridge_update_flops(m as f64, d),
    );

    eprintln!("bench-report: lite fit");
    let points = uniform_points(n, 2);
    let timing = fit_timer(&mut || {
        let mut model = LiteEstimator::new(8.0, 1e-3).expect("valid lite parameters");
        model.fit(black_box(points.as_ref())).expect("lite fit");
        black_box(model);
    });
    add(
        "lite_fit",
        format!(
            "lite estimator fit, n = {n} (faer's global parallelism: {} rayon threads)",
            rayon::current_num_threads()
        ),
        timing,
        Some(150e-3),
        Some(410e-3),
        lite_fit_flops(n as f64, d),
    );

    eprintln!("bench-report: finite fit");
    let mut model = finite_estimator(m)?;
    let points = uniform_points(m, 3);
    let timing = fit_timer(&mut || {
        model.fit(black_box(points.as_ref())).expect("finite fit");
    });
    add(
        "finite_fit",
        format!("finite estimator batch fit, m = {m} features on n = {m} points"),
        timing,
        None,
        Some(261e-3),
        finite_fit_flops(m as f64, m as f64, d),
    );

    eprintln!("bench-report: Glass likelihood estimate");
    let glass = glass_posterior(s.glass_importance)?;
    let newton_steps = GpClassification::glass(s.glass_importance)?
        .laplace(&[0.0; 9])?
        .newton_steps();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    let theta = [0.0; 9];
    let timing = timer(&mut || {
        black_box(glass.log_density(black_box(&theta), &mut rng));
    });
    add(
        "glass_estimate",
        format!(
            "one Glass log-likelihood estimate (N = 214, n_imp = {}, θ = 0, {newton_steps} \
             Newton steps)",
            s.glass_importance
        ),
        timing,
        Some(5e-3),
        None,
        glass_flops(214.0, 9.0, s.glass_importance as f64, newton_steps as f64),
    );

    eprintln!("bench-report: 2 chains vs 1");
    let parallelism = parallel_throughput(&target, &z, s)?;

    eprintln!("bench-report: memory of a long chain");
    let memory = if opts.isolate_memory {
        memory_in_child(s.memory_iterations)?
    } else {
        memory_chain(s.memory_iterations)?;
        Memory {
            iterations: s.memory_iterations,
            peak_resident_mb: vm_hwm_kb()? as f64 * 1024.0 / 1e6,
            isolated: false,
            goal_mb: 200.0,
            pass: None,
        }
    };
    let memory = Memory {
        pass: (opts.full_size && memory.iterations >= 1_000_000)
            .then_some(memory.peak_resident_mb < memory.goal_mb),
        ..memory
    };

    Ok(Report {
        sizes: s,
        full_size: opts.full_size,
        machine: crate::machine::description(),
        unix_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        gemm,
        paths,
        fkamh_history_ratio: fkamh_medians[1] / fkamh_medians[0],
        parallelism,
        memory,
    })
}

/// Flops of one KAMH step: the gradient matrix (per point: difference,
/// squared norm, one exp, scaling: 4d + exp), the lower triangle of MMᵀ and
/// the row sums (n d(d + 1) + nd), a d × d Cholesky, one draw and two
/// Gaussian log densities (triangular solves).
fn kamh_step_flops(n: f64, d: f64) -> f64 {
    n * (4.0 * d + TRANSCENDENTAL_FLOPS) + n * d * (d + 1.0) + n * d + d.powi(3) / 3.0 + 3.0 * d * d
}

/// Flops of one F-KAMH step with D features: the Jacobian at x*
/// (D(3d + sin)), J*ᵀSJ* using S's symmetry (D²d for S J through one triangle, 2Dd²
/// for the d × d form), the Welford update of the scatter's triangle (D²)
/// with the embedding (D(2d + cos)), and two d × d Cholesky factors.
fn fkamh_step_flops(big: f64, d: f64) -> f64 {
    let jacobian = big * (3.0 * d + TRANSCENDENTAL_FLOPS);
    let form = big * big * d + 2.0 * big * d * d;
    let welford = big * big + big * (2.0 * d + TRANSCENDENTAL_FLOPS);
    jacobian + form + welford + 2.0 * d.powi(3) / 3.0 + 4.0 * d * d
}

/// Flops of one lite gradient: per basis point a kernel value through
/// ‖x‖² + ‖z‖² − 2xᵀz (2d + exp) and the weighted sum of z (2d).
fn lite_gradient_flops(n: f64, d: f64) -> f64 {
    n * (4.0 * d + TRANSCENDENTAL_FLOPS)
}

/// Flops of one finite gradient `−√(2/m) Ωᵀ(θ ∘ sin(Ωx + b))`, one fused
/// pass over tiles of features: 2md for Ωx (fused multiply-adds), m sines,
/// m products with θ and 2md for Ωᵀ.
fn finite_gradient_flops(m: f64, d: f64) -> f64 {
    m * (4.0 * d + TRANSCENDENTAL_FLOPS + 1.0)
}

/// Flops of the rank-d Givens update of the m × m Cholesky factor: d
/// rotations of each of the m²/2 entries below the diagonal, 6 flops each
/// (`c·l + s·v` and `c·v − s·l`).
fn rank_update_flops(m: f64, d: f64) -> f64 {
    3.0 * d * m * m
}

/// Flops of adding `J Jᵀ` (J m × d) to the lower triangle of the sums:
/// d multiply-adds on each of the m²/2 entries.
fn sums_update_flops(m: f64, d: f64) -> f64 {
    d * m * m
}

/// Preconditioned CG iterations per online update with the default ridge at
/// the benchmark's counts (fitted on 2m points, then updated: t/t₀ < 1.125):
/// 4 after the initial residual, counted in the solver (5 products with the
/// sums per update at m = 1000, a few updates after the fit).
/// Data-dependent: the preconditioned matrix's eigenvalues lie in
/// [1, t/t₀].
const PCG_ITERATIONS: f64 = 4.0;

/// Flops of one online update with the default ridge: the sums' update, the
/// rank-d Cholesky update, and the preconditioned solve: the initial
/// residual (a product with the sums, 2m²) and [`PCG_ITERATIONS`]
/// iterations, each a preconditioner solve (two triangular solves, 2m²) and
/// a product with the sums. (The residual is tested before it is
/// preconditioned, so the converged one is never preconditioned.)
fn finite_update_flops(m: f64, d: f64) -> f64 {
    sums_update_flops(m, d) + rank_update_flops(m, d) + (1.0 + 2.0 * PCG_ITERATIONS) * 2.0 * m * m
}

/// Flops of one online update with a fixed ridge on the sums: the sums'
/// update, the rank-d Cholesky update and two triangular solves (2m²).
fn finite_fixed_ridge_update_flops(m: f64, d: f64) -> f64 {
    sums_update_flops(m, d) + rank_update_flops(m, d) + 2.0 * m * m
}

/// Flops of the lite fit: the kernel matrix's triangle (n²/2 (3d + exp)),
/// the lower triangles of KᵀK, BᵀK and KᵀB (n³ each) and a Cholesky (n³/3).
fn lite_fit_flops(n: f64, d: f64) -> f64 {
    0.5 * n * n * (3.0 * d + TRANSCENDENTAL_FLOPS) + 3.0 * n.powi(3) + n.powi(3) / 3.0
}

/// Flops of the finite fit on n points with the factored sums of random
/// Fourier features: the triangle of Σ ψ'ψ'ᵀ (nm²), that of ΩΩᵀ (dm²), the
/// features (nm(2d + 2 transcendental)) and a Cholesky (m³/3).
fn finite_fit_flops(n: f64, m: f64, d: f64) -> f64 {
    n * m * m + d * m * m + n * m * (2.0 * d + 2.0 * TRANSCENDENTAL_FLOPS) + m.powi(3) / 3.0
}

/// Flops of one Glass estimate with N points, d covariates, m draws and k
/// Newton steps: the kernel matrix's triangle (N²/2 (3d + exp)), k + 1
/// Cholesky factors of B (N³/3 each) with two mat-vecs each (4N²), V = L⁻¹W½K
/// (N³), the triangle of VᵀV (N³), the factors of K + ρI and Σ + ρI
/// (2N³/3), the draws L_Σ Z and the whitening L_K⁻¹F (N²m each).
fn glass_flops(big_n: f64, d: f64, m: f64, newton_steps: f64) -> f64 {
    let n3 = big_n.powi(3);
    0.5 * big_n * big_n * (3.0 * d + TRANSCENDENTAL_FLOPS)
        + (newton_steps + 1.0) * (n3 / 3.0 + 4.0 * big_n * big_n)
        + 2.0 * n3
        + 2.0 * n3 / 3.0
        + 2.0 * big_n * big_n * m
}

/// The single-thread rate of a size × size faer GEMM.
fn gemm_peak(size: usize, timer: &dyn Fn(&mut dyn FnMut()) -> Timing) -> GemmPeak {
    let a = Mat::<f64>::from_fn(size, size, |i, j| ((i * 7 + j * 3) % 13) as f64 / 13.0);
    let b = Mat::<f64>::from_fn(size, size, |i, j| ((i * 5 + j * 11) % 17) as f64 / 17.0);
    let mut c = Mat::<f64>::zeros(size, size);
    let timing = timer(&mut || {
        faer::linalg::matmul::matmul(
            c.as_mut(),
            Accum::Replace,
            a.as_ref(),
            b.as_ref(),
            1.0,
            Par::Seq,
        );
        black_box(&c);
    });
    let flops = 2.0 * (size as f64).powi(3);
    GemmPeak {
        size,
        timing,
        gflops_median: flops / timing.median_secs / 1e9,
        gflops_best: flops / timing.p10_secs / 1e9,
    }
}

/// n iid draws of the target, one per row.
fn iid_draws(target: &Banana, n: usize, seed: u64) -> Result<Mat<f64>> {
    let mut rng = chain_rng(seed, 0);
    let mut x = [0.0; DIM];
    let mut z = Mat::<f64>::zeros(n, DIM);
    for i in 0..n {
        target.sample_iid(&mut rng, &mut x)?;
        for (j, v) in x.iter().enumerate() {
            z[(i, j)] = *v;
        }
    }
    Ok(z)
}

/// n points uniform on [−2, 2]^8 (the score-matching fits' inputs).
fn uniform_points(n: usize, seed: u64) -> Mat<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    Mat::from_fn(n, DIM, |_, _| rng.random_range(-2.0..2.0))
}

/// KAMH with the oracle subsample `z`, fixed ν and no adaptation (a plain MH
/// step with the KAMH proposal, the per-iteration figure).
fn kamh_sampler(target: &Banana, z: &Mat<f64>) -> Result<MetropolisHastings<Kamh<Gaussian>>> {
    warmed(target, kamh_proposal(z)?, Some(0), 2)
}

/// KAMH with the fixed subsample z (bandwidth 10, γ and ν fixed).
fn kamh_proposal(z: &Mat<f64>) -> Result<Kamh<Gaussian>> {
    let config = KamhConfig {
        subsample: SubsampleConfig {
            subsample_size: z.nrows(),
            gamma: Gamma::Fixed(KAMH_GAMMA),
            refresh: Refresh::Never,
            bandwidth: Bandwidth::Fixed,
            warmup_scale: 1.0,
        },
        scale: Scale::fixed(KAMH_NU)?,
    };
    let mut kamh = Kamh::new(DIM, Gaussian::new(10.0)?, config)?;
    kamh.set_subsample(z.as_ref())?;
    Ok(kamh)
}

/// An engine from the origin, stepped 200 times.
fn warmed<P: Proposal>(
    target: &Banana,
    proposal: P,
    adapt_until: Option<u64>,
    seed: u64,
) -> Result<MetropolisHastings<P>> {
    let mut sampler = MetropolisHastings::new(
        target,
        proposal,
        &[0.0; DIM],
        chain_rng(seed, 0),
        adapt_until,
    )?;
    for _ in 0..200 {
        sampler.step(target);
    }
    Ok(sampler)
}

/// F-KAMH on D random Fourier features with `history` exact draws in its
/// feature covariance, adapting η and C̃ at every step.
fn fkamh_sampler(
    target: &Banana,
    big: usize,
    history: usize,
) -> Result<MetropolisHastings<FKamh<RandomFourierFeatures>>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(big as u64);
    let phi = RandomFourierFeatures::new(
        &Gaussian::new(10.0)?,
        DIM,
        big,
        Embedding::CosPhase,
        &mut rng,
    )?;
    let eta = Scale::Adaptive(RobbinsMonro::new(
        1.0,
        0.234,
        StepSchedule::Power { kappa: 0.7 },
    )?);
    let mut proposal = FKamh::new(phi, KAMH_GAMMA, eta)?;
    let mut x = [0.0; DIM];
    for _ in 0..history {
        target.sample_iid(&mut rng, &mut x)?;
        proposal.push_history(&x)?;
    }
    target.sample_iid(&mut rng, &mut x)?;
    Ok(MetropolisHastings::new(target, proposal, &x, rng, None)?)
}

/// KMC lite on an oracle basis of n draws, surrogate frozen.
fn kmc_lite_sampler(target: &Banana, n: usize, steps: u32) -> Result<MetropolisHastings<KmcLite>> {
    let points = iid_draws(target, n, 3)?;
    let lite = LiteSurrogate::new(
        LiteEstimator::new(200.0, 1.0)?,
        DIM,
        n,
        AdaptProbability::Always,
    )?;
    let kmc =
        KmcLite::new(lite, KMC_STEP_SIZE, (steps, steps))?.with_oracle_points(points.as_ref())?;
    warmed(target, kmc, Some(0), 4)
}

/// The finite estimator on m random Fourier features of a Gaussian kernel.
fn finite_estimator(m: usize) -> Result<FiniteEstimator<RandomFourierFeatures>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let features =
        RandomFourierFeatures::new(&Gaussian::new(2.0)?, DIM, m, Embedding::CosPhase, &mut rng)?;
    Ok(FiniteEstimator::new(features, 1e-3)?)
}

/// KMC finite on m features fitted to m oracle draws, surrogate frozen.
fn kmc_finite_sampler(
    target: &Banana,
    m: usize,
    steps: u32,
) -> Result<MetropolisHastings<KmcFinite<RandomFourierFeatures>>> {
    let points = iid_draws(target, m, 3)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let features =
        RandomFourierFeatures::new(&Gaussian::new(5.0)?, DIM, m, Embedding::CosPhase, &mut rng)?;
    let model = FiniteEstimator::new(features, 1e-4)?;
    let kmc = KmcFinite::new(
        FiniteSurrogate::new(model, 1)?,
        KMC_STEP_SIZE,
        (steps, steps),
    )?
    .with_oracle_points(points.as_ref())?;
    warmed(target, kmc, Some(0), 5)
}

/// One chain alone, then two, through the library's parallel runner
/// ([`run_chains`], rayon's global pool), repeated; medians of the times.
fn parallel_throughput(target: &Banana, z: &Mat<f64>, s: Sizes) -> Result<Parallelism> {
    let steps = s.parallel_steps;
    let proposal = kamh_proposal(z)?;
    let run = |chains: usize| -> Result<f64> {
        let start = Instant::now();
        let config = RunConfig::new(200, steps);
        let setup = |_: usize, _: &mut Xoshiro256PlusPlus| Ok((proposal.clone(), vec![0.0; DIM]));
        black_box(run_chains(target, chains, 2, config, setup, None)?);
        Ok(start.elapsed().as_secs_f64())
    };
    let reps = (s.repetitions / 4).max(3);
    let mut one = Vec::new();
    let mut two = Vec::new();
    for _ in 0..reps {
        one.push(run(1)?);
        two.push(run(2)?);
    }
    one.sort_by(f64::total_cmp);
    two.sort_by(f64::total_cmp);
    let (one_chain_secs, two_chains_secs) =
        (quantile_sorted(&one, 0.5), quantile_sorted(&two, 0.5));
    let throughput_ratio = 2.0 * one_chain_secs / two_chains_secs;
    Ok(Parallelism {
        steps_per_chain: steps,
        one_chain_secs,
        two_chains_secs,
        throughput_ratio,
        goal: 1.8,
        pass: throughput_ratio >= 1.8,
    })
}

/// The memory chain: KAMH (paper settings, n = 1000, median heuristic over
/// the whole subsample) in d = 8 on the banana, adapting at every step with
/// refresh probability t^−½ (so the history keeps growing), recording every
/// state (which the run takes from the history, see `kameleon_samplers::Run`).
pub fn memory_chain(iterations: u64) -> Result<()> {
    let target = Banana::new(DIM, 0.03, 100.0)?;
    let mut config = KamhConfig::paper(1000)?;
    config.subsample.refresh = Refresh::Probability(AdaptProbability::Power { kappa: 0.5 });
    let kamh = Kamh::new(DIM, Gaussian::new(1.0)?, config)?;
    let run = RunConfig::new(0, iterations).adaptation(AdaptationStop::Never);
    let chain = run_chain(&target, kamh, &[0.0; DIM], run, 9)?;
    black_box(&chain);
    Ok(())
}

/// The child side of the memory measurement: runs the chain, prints VmHWM (kB).
pub fn memory_child(iterations: u64) -> Result<()> {
    memory_chain(iterations)?;
    println!("{}", vm_hwm_kb()?);
    Ok(())
}

fn memory_in_child(iterations: u64) -> Result<Memory> {
    let exe = std::env::current_exe()?;
    let output = std::process::Command::new(exe)
        .args(["bench-report", "--memory-child", &iterations.to_string()])
        .output()
        .context("re-invoking xtask for the memory chain")?;
    if !output.status.success() {
        bail!(
            "memory child failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let kb: u64 = String::from_utf8_lossy(&output.stdout).trim().parse()?;
    Ok(Memory {
        iterations,
        peak_resident_mb: kb as f64 * 1024.0 / 1e6,
        isolated: true,
        goal_mb: 200.0,
        pass: None,
    })
}

/// The process's peak resident set size (VmHWM) in kB.
fn vm_hwm_kb() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM in /proc/self/status")
}

/// Seconds in the most readable unit.
fn human(secs: f64) -> String {
    if secs >= 1.0 {
        format!("{secs:.2} s")
    } else if secs >= 1e-3 {
        format!("{:.2} ms", secs * 1e3)
    } else {
        format!("{:.1} µs", secs * 1e6)
    }
}

fn verdict(pass: Option<bool>) -> &'static str {
    match pass {
        Some(true) => "pass",
        Some(false) => "FAIL",
        None => "—",
    }
}

/// The report as Markdown.
fn markdown(r: &Report) -> String {
    let mut md = String::new();
    md.push_str("# Benchmark report (issue 9)\n\n");
    md.push_str(&format!(
        "Machine: {}. Sizes: {}. Generated by `cargo xtask bench-report`.\n\n",
        r.machine,
        if r.full_size {
            "the issue's"
        } else {
            "reduced (pass/fail not judged)"
        }
    ));
    md.push_str(&format!(
        "Arithmetic floor = estimated flops / single-thread faer GEMM rate \
         ({}×{}: {:.1} GFLOP/s median, {:.1} best); `exp`/`sin`/`cos` count {} flops.\n\n",
        r.gemm.size, r.gemm.size, r.gemm.gflops_median, r.gemm.gflops_best, TRANSCENDENTAL_FLOPS
    ));
    md.push_str(
        "| path | median | 10%–90% | goal | Python | speedup | floor | × floor | result |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for p in &r.paths {
        md.push_str(&format!(
            "| {} | {} | {} – {} | {} | {} | {} | {} | {:.1} | {} |\n",
            p.name,
            human(p.timing.median_secs),
            human(p.timing.p10_secs),
            human(p.timing.p90_secs),
            p.goal_secs
                .map_or("—".into(), |g| format!("≤ {}", human(g))),
            p.python_secs.map_or("—".into(), human),
            p.speedup_vs_python
                .map_or("—".into(), |s| format!("{s:.0}×")),
            human(p.floor_secs),
            p.times_floor,
            verdict(p.pass),
        ));
    }
    md.push('\n');
    for p in &r.paths {
        md.push_str(&format!("- `{}`: {}.\n", p.name, p.description));
    }
    if r.full_size {
        md.push_str(&below_floor_note(&r.paths));
    }
    md.push_str(&format!(
        "\nF-KAMH time at history t = {} over t = {}: {:.2} (goal ≤ 1.10).\n\n",
        r.sizes.fkamh_histories[1], r.sizes.fkamh_histories[0], r.fkamh_history_ratio
    ));
    let p = &r.parallelism;
    md.push_str(&format!(
        "Two KAMH chains vs one through `run_chains` (rayon, {} steps each): {:.2} s vs \
         {:.2} s, throughput ratio {:.2} (goal ≥ {:.1}): {}. The machine is shared, so \
         other load lowers this ratio.\n\n",
        p.steps_per_chain,
        p.two_chains_secs,
        p.one_chain_secs,
        p.throughput_ratio,
        p.goal,
        if p.pass { "pass" } else { "FAIL" }
    ));
    let m = &r.memory;
    md.push_str(&format!(
        "Peak resident memory (VmHWM{}) of a KAMH chain of {} iterations in d = 8 with \
         n = 1000, adapting throughout: {:.1} MB (goal < {:.0} MB at 10⁶ iterations): {}. \
         The states themselves take {:.1} MB; they are held once, the recorded samples \
         being KAMH's history itself.\n",
        if m.isolated {
            ", separate process"
        } else {
            ", whole process"
        },
        m.iterations,
        m.peak_resident_mb,
        m.goal_mb,
        verdict(m.pass),
        (m.iterations * DIM as u64 * 8) as f64 / 1e6
    ));
    md
}

/// The sentence naming the goals that lie below this machine's
/// single-thread arithmetic floor, or nothing. A path that already runs
/// below its floor (the lite fit, on all cores) is not bound by it and is
/// left out.
fn below_floor_note(paths: &[PathResult]) -> String {
    let below: Vec<String> = paths
        .iter()
        .filter(|p| p.times_floor >= 1.0)
        .filter_map(|p| {
            let goal = p.goal_secs.filter(|&g| g < p.floor_secs)?;
            Some(format!(
                "`{}` (goal {}, floor {})",
                p.name,
                human(goal),
                human(p.floor_secs)
            ))
        })
        .collect();
    if below.is_empty() {
        return String::new();
    }
    format!(
        "\nGoals below this machine's single-thread arithmetic floor, out of \
         reach here for code on one core: {}.\n",
        below.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At a tiny size the report runs end to end, writes both files, and the
    /// JSON has every field with consistent values.
    #[test]
    fn tiny_report_has_every_field() {
        let out =
            std::env::temp_dir().join(format!("kameleon-bench-report-{}", std::process::id()));
        let opts = ReportOptions {
            sizes: Sizes::tiny(),
            full_size: false,
            out: out.clone(),
            isolate_memory: false,
        };
        let report = run(&opts).unwrap();
        let text = std::fs::read_to_string(out.join("bench-report.json")).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        for key in [
            "sizes",
            "full_size",
            "machine",
            "gemm",
            "paths",
            "fkamh_history_ratio",
            "parallelism",
            "memory",
        ] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
        let names: Vec<&str> = json["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "kamh_step",
                "fkamh_step_t50",
                "fkamh_step_t100",
                "kmc_lite_step",
                "kmc_finite_step",
                "finite_online_update",
                "finite_online_update_fixed_ridge",
                "lite_fit",
                "finite_fit",
                "glass_estimate"
            ]
        );
        for p in json["paths"].as_array().unwrap() {
            for key in [
                "timing",
                "goal_secs",
                "python_secs",
                "speedup_vs_python",
                "flops",
                "floor_secs",
                "times_floor",
                "pass",
            ] {
                assert!(p.get(key).is_some(), "{} lacks {key}", p["name"]);
            }
            let t = &p["timing"];
            let (lo, mid, hi) = (
                t["p10_secs"].as_f64().unwrap(),
                t["median_secs"].as_f64().unwrap(),
                t["p90_secs"].as_f64().unwrap(),
            );
            assert!(0.0 < lo && lo <= mid && mid <= hi, "{lo} {mid} {hi}");
            // not the sizes: nothing is judged
            assert!(p["pass"].is_null());
        }
        // the JSON round-trips into the same report
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back, report);
        assert!(report.gemm.gflops_median > 0.0);
        assert!(report.memory.peak_resident_mb > 0.0);
        assert!(report.parallelism.throughput_ratio > 0.0);
        let md = std::fs::read_to_string(out.join("bench-report.md")).unwrap();
        assert!(md.contains("| kamh_step |") && md.contains("VmHWM"));
        std::fs::remove_dir_all(&out).unwrap();
    }

    /// Only goals strictly below their floor are named; paths without a
    /// goal, or already faster than their single-thread floor (parallel),
    /// never are.
    #[test]
    fn below_floor_note_names_unreachable_goals() {
        let path = |name: &str, goal: Option<f64>, floor: f64| PathResult {
            name: name.into(),
            description: String::new(),
            timing: Timing {
                median_secs: 1.0,
                p10_secs: 1.0,
                p90_secs: 1.0,
                repetitions: 1,
                calls_per_repetition: 1,
            },
            goal_secs: goal,
            python_secs: None,
            speedup_vs_python: None,
            flops: 1.0,
            floor_secs: floor,
            times_floor: 1.0 / floor,
            pass: None,
        };
        let paths = [
            path("reachable", Some(2e-3), 1e-3),
            path("unreachable", Some(1.2e-4), 1.45e-4),
            path("no_goal", None, 1.0),
            path("parallel", Some(0.5), 2.0),
        ];
        let note = below_floor_note(&paths);
        assert!(
            note.contains("`unreachable` (goal 120.0 µs, floor 145.0 µs)"),
            "{note}"
        );
        assert!(!note.contains("`reachable`"), "{note}");
        assert!(!note.contains("no_goal") && !note.contains("parallel"));
        assert_eq!(below_floor_note(&paths[..1]), "");
    }
}
