//! Running a built sampler: the MH engine, the ensemble and the cyclical
//! sampler, each returning a chain with its timeline ([`TimedChain`]).

use super::*;
use anyhow::{Result, bail};
use kameleon_kernels::{Kernel, Matern};
use kameleon_samplers::{
    AdaptationStop, AdaptationSummary, Chain, Ckam, EnsembleConfig, Progress, ProgressFn, Proposal,
    RobbinsMonro, Run, RunConfig, StepSchedule, Target, chain_rng, initial_ball, run_ensemble_with,
};
use rand::Rng;
use std::ops::ControlFlow;
use std::time::Instant;

pub(crate) fn run<P: Proposal>(
    target: &dyn Target,
    proposal: P,
    x0: &[f64],
    config: RunConfig,
    seed: u64,
    chain: u64,
    progress: ProgressFn<'_>,
) -> Result<TimedChain> {
    let start = Instant::now();
    let mut run = Run::new(target, proposal, x0, config, seed, chain)?;
    run.advance(target, config.burn_in, Some(progress))?;
    let mut timeline = Timeline::default();
    for n in checkpoints(config.iterations / config.thin) {
        let recorded = (run.steps_done() - config.burn_in) / config.thin;
        run.advance(target, (n - recorded) * config.thin, Some(progress))?;
        timeline.record(n, run.steps_done(), start.elapsed().as_secs_f64());
    }
    Ok(TimedChain {
        chain: run.into_chain(),
        timeline,
        walkers: 1,
    })
}

/// The ensemble baseline as emcee runs it by default: stretch scale a = 2.
pub const EMCEE: SamplerSpec = SamplerSpec::Ensemble { a: 2.0 };

/// The notes' sentence on the ensemble baseline of the experiments that
/// have it (a macro so that `concat!` can append it to their notes).
macro_rules! ensemble_note {
    () => {
        " Ensemble: emcee's affine-invariant stretch move (a = 2) with W = 2d walkers started in a \
        ball of radius 0.1 around the chain's start, at the cell's number of log-density evaluations \
        (burn-in/W sweeps, rounded, then ⌈iterations/W⌉ sweeps); its draws pool the walkers sweep by \
        sweep, cut to the cell's iterations, and its ESS is the multi-chain ESS of the whole sweeps \
        with the walkers as chains."
    };
}
pub(crate) use ensemble_note;

/// Walkers per dimension of the ensemble baseline: W = 2d, the fewest emcee
/// accepts, and so the most sweeps for a given number of evaluations.
pub const ENSEMBLE_WALKERS_PER_DIM: usize = 2;

/// The ensemble's walkers on a target of dimension `d`:
/// [`ENSEMBLE_WALKERS_PER_DIM`]·d.
pub fn ensemble_walkers(d: usize) -> usize {
    ENSEMBLE_WALKERS_PER_DIM * d
}

/// The radius of the Gaussian ball the ensemble's walkers start in, around
/// the chain's start (the usual emcee start near one point).
pub const ENSEMBLE_BALL: f64 = 0.1;

/// Runs the ensemble baseline as chain `chain` of a cell of `config`: W =
/// [`ENSEMBLE_WALKERS_PER_DIM`]·d walkers, burn_in/W sweeps discarded
/// (rounded) and ⌈iterations/W⌉ kept, so that it spends the cell's
/// log-density evaluations. The chain pools the kept walkers' states sweep
/// by sweep, truncated to the cell's `iterations` draws (so a prefix of k
/// draws cost k evaluations after burn-in; the last sweep's unrecorded
/// walkers, fewer than W, are the only evaluations beyond the cell's). Its
/// `accept_probabilities` are NaN (the stretch move's are not recorded), and
/// [`TimedChain::walkers`] says how to split it back into walkers.
pub(crate) fn run_stretch(
    target: &dyn Target,
    a: f64,
    x0: &[f64],
    config: RunConfig,
    seed: u64,
    chain: u64,
    progress: ProgressFn<'_>,
) -> Result<TimedChain> {
    let d = target.dim();
    let walkers = ensemble_walkers(d);
    let ensemble = EnsembleConfig::default()
        .with_walkers(walkers)?
        .with_stretch_scale(a)?;
    let w = walkers as u64;
    let burn_in = (config.burn_in + w / 2) / w;
    let sweeps = config.iterations.div_ceil(w);
    if sweeps == 0 {
        bail!("the ensemble needs at least one iteration");
    }
    // The ball and the ensemble's moves come from streams of their own, one
    // per chain.
    let mut ball_rng = chain_rng(seed ^ 0xBA11_u64, chain);
    let initial = initial_ball(x0, walkers, ENSEMBLE_BALL, &mut ball_rng)?;
    let ensemble_seed = chain_rng(seed ^ 0xE45E_u64, chain).next_u64();
    let draws_wanted = config.iterations;
    let marks = checkpoints(draws_wanted);
    let mut next_mark = 0;
    let mut timeline = Timeline::default();
    let start = Instant::now();
    let out = run_ensemble_with(
        target,
        &ensemble,
        &initial,
        sweeps,
        burn_in,
        ensemble_seed,
        &mut |done| {
            let draws = (done.saturating_sub(burn_in) * w).min(draws_wanted);
            while next_mark < marks.len() && marks[next_mark] <= draws {
                timeline.record(marks[next_mark], done * w, start.elapsed().as_secs_f64());
                next_mark += 1;
            }
            progress(Progress {
                chain_index: chain,
                step: done * w,
                total: (burn_in + sweeps) * w,
            });
            ControlFlow::Continue(())
        },
    )?;
    let (mut samples, mut accepted, mut log_densities) =
        (out.samples, out.accepted, out.log_densities);
    let kept = draws_wanted as usize;
    samples.truncate(kept * d);
    accepted.truncate(kept);
    log_densities.truncate(kept);
    let chain = Chain {
        dim: d,
        samples,
        accepted,
        log_densities,
        accept_probabilities: vec![f64::NAN; kept],
        wall_time_secs: start.elapsed().as_secs_f64(),
        adaptation: AdaptationSummary::default(),
        seed: ensemble_seed,
        chain_index: chain,
        config: RunConfig::new(burn_in * w, draws_wanted),
        // every walker's move of every sweep, as accepted_total counts them
        steps: (burn_in + sweeps) * w,
        accepted_total: out.accepted_total.iter().sum(),
        rejected_non_finite: out.rejected_non_finite,
        covariance_jitters: 0,
        evaluations: out.evaluations,
    };
    Ok(TimedChain {
        chain,
        timeline,
        walkers,
    })
}

/// The kernel of KAM and cKAM in the cKAM experiments.
pub fn ckam_kernel() -> Result<Matern> {
    Ok(Matern::new(CKAM_MATERN.0, CKAM_MATERN.1)?)
}

/// The Robbins–Monro learner of ν of KAM and cKAM: from `nu0` toward 0.234
/// with steps t^−0.75.
pub fn ckam_nu(nu0: f64) -> Result<RobbinsMonro> {
    Ok(RobbinsMonro::new(
        nu0,
        0.234,
        StepSchedule::Power {
            kappa: CKAM_RM_RATE,
        },
    )?)
}

/// Runs cKAM for `config.burn_in + config.iterations` steps (whole cycles),
/// adapting at every step and keeping the sampling steps' states only, whose
/// number must be `config.iterations`: `kameleon_samplers::run_ckam` for
/// chain `chain`, through a [`Run`] so that progress and the timeline are
/// recorded on the way. The chain reports the cell's `config` (adaptation
/// never stopping), in which the burn-in counts the exploration steps.
pub(crate) fn run_cyclical<K: Kernel>(
    target: &dyn Target,
    ckam: Ckam<K>,
    x0: &[f64],
    config: RunConfig,
    seed: u64,
    chain: u64,
    progress: ProgressFn<'_>,
) -> Result<TimedChain> {
    let total = config.total_steps();
    let cycle = ckam.cycle_length();
    let kept_per_cycle = (1..=cycle).filter(|&t| ckam.is_draw_step(t)).count() as u64;
    if !total.is_multiple_of(cycle) || config.iterations != total / cycle * kept_per_cycle {
        bail!(
            "cKAM runs whole cycles of {cycle} steps keeping {kept_per_cycle} each: \
             {} kept of {total} steps does not fit",
            config.iterations
        );
    }
    let start = Instant::now();
    let steps = RunConfig::new(0, total).adaptation(AdaptationStop::Never);
    let mut run = Run::new(target, ckam, x0, steps, seed, chain)?;
    let mut timeline = Timeline::default();
    for n in checkpoints(config.iterations) {
        run.advance_until_recorded(target, n as usize, Some(progress))?;
        timeline.record(n, run.steps_done(), start.elapsed().as_secs_f64());
    }
    // the last kept state is the run's last step: nothing is left to do
    run.advance(target, u64::MAX, Some(progress))?;
    let mut chain = run.into_chain();
    chain.config = config.adaptation(AdaptationStop::Never);
    Ok(TimedChain {
        chain,
        timeline,
        walkers: 1,
    })
}

/// A chain with the wall time at checkpoints of its post-burn-in draws.
#[derive(Debug, Clone)]
pub struct TimedChain {
    /// The chain.
    pub chain: Chain,
    /// When its checkpoints were reached.
    pub timeline: Timeline,
    /// 1 for a Markov chain; W for an ensemble, whose chain holds the W
    /// walkers' states interleaved (sweep × walker × d).
    pub walkers: usize,
}

/// Wall-clock seconds since the chain started (burn-in included) at which
/// it had recorded `draws[k]` post-burn-in draws, after `steps[k]` steps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// Post-burn-in draws at the checkpoints ([`checkpoints`]).
    pub draws: Vec<u64>,
    /// Steps taken (burn-in included).
    pub steps: Vec<u64>,
    /// Seconds since the start.
    pub seconds: Vec<f64>,
}

impl Timeline {
    pub(crate) fn record(&mut self, draws: u64, steps: u64, seconds: f64) {
        self.draws.push(draws);
        self.steps.push(steps);
        self.seconds.push(seconds);
    }
}

/// The W walkers' trajectories (each sweep × d, row-major) of an
/// ensemble's pooled states (sweep × walker × d).
pub fn split_walkers(pooled: &[f64], d: usize, walkers: usize) -> Vec<Vec<f64>> {
    let mut out = vec![Vec::with_capacity(pooled.len() / walkers.max(1)); walkers];
    for (k, x) in pooled.chunks_exact(d).enumerate() {
        out[k % walkers].extend_from_slice(x);
    }
    out
}

/// Checkpoints of the curve metrics along a chain of `n` post-burn-in
/// draws: [`CHECKPOINTS`] draw counts spaced geometrically from
/// max(n/1000, 50) (or n if smaller) to n, without duplicates, ending at n.
pub fn checkpoints(n: u64) -> Vec<u64> {
    if n == 0 {
        return Vec::new();
    }
    let first = (n / 1000).max(50).min(n) as f64;
    let ratio = (n as f64 / first).powf(1.0 / (CHECKPOINTS - 1) as f64);
    let mut out: Vec<u64> = (0..CHECKPOINTS)
        .map(|k| (first * ratio.powi(k as i32)).round() as u64)
        .map(|v| v.clamp(1, n))
        .collect();
    *out.last_mut().expect("CHECKPOINTS > 0") = n;
    out.dedup();
    out
}

/// The number of checkpoints of a curve metric.
pub const CHECKPOINTS: usize = 40;

/// KAMH's median heuristic uses at most this many points of each new
/// subsample (itself a random draw from the history): the median of their
/// 4950 pairwise distances, recomputed at every adapting step. Over all
/// n = 1000 points (the paper) that median costs O(n²d) per step and
/// dominates the run (perf, quick kamh-banana: ~75% of the time already at
/// 200 points).
pub const KAMH_MEDIAN_POINTS: usize = 100;

/// The quantile levels of the KAMH coverage metric.
pub const QUANTILE_LEVELS: [f64; 9] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];
