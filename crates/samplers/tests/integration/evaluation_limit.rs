//! A chain under an evaluation limit ([`RunConfig::max_evaluations`]) makes
//! at most that many log-density evaluations, its start and a whitened
//! sampler's curvature included — counted here by the target itself, not by
//! the chain — stops within one step's evaluations of the limit, and takes
//! the steps of the unlimited chain up to where it stops: advanced alone,
//! in lockstep, or checkpointed and resumed part-way.

use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    Chain, Kamh, KamhConfig, Proposal, RandomWalk, RandomWalkConfig, Run, RunConfig, SamplerError,
    StepOutcome, Target, Whitened, WhiteningConfig, advance_lockstep,
};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use std::sync::atomic::{AtomicU64, Ordering};

/// log π(x) = −½ Σ xᵢ²/(i + 1), a Gaussian with standard deviations
/// √(i + 1) (exact), or that plus log-normal noise of unit mean (a
/// pseudo-marginal estimate); counts its calls.
struct Counted {
    dim: usize,
    noisy: bool,
    calls: AtomicU64,
}

impl Counted {
    fn new(dim: usize, noisy: bool) -> Self {
        Self {
            dim,
            noisy,
            calls: AtomicU64::new(0),
        }
    }

    fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn exact(&self, x: &[f64]) -> f64 {
        -0.5 * x
            .iter()
            .enumerate()
            .map(|(i, v)| v * v / (i + 1) as f64)
            .sum::<f64>()
    }
}

impl Target for Counted {
    fn dim(&self) -> usize {
        self.dim
    }

    fn log_density(&self, x: &[f64], rng: &mut dyn Rng) -> f64 {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.noisy {
            let noise: f64 = rng.sample(StandardNormal);
            self.exact(x) + 0.5 * noise - 0.125
        } else {
            self.exact(x)
        }
    }

    fn is_exact(&self) -> bool {
        !self.noisy
    }
}

/// Python's default sampler: KAMH with its scale-free presets, whitened
/// (a finite-difference Hessian at the start, then the pilot).
fn whitened_kamh(dim: usize) -> Whitened<Kamh<Gaussian>> {
    let kamh = Kamh::new(
        dim,
        Gaussian::new(1.0).unwrap(),
        KamhConfig::scale_free(dim),
    )
    .unwrap();
    Whitened::new(kamh, dim, WhiteningConfig::default()).unwrap()
}

fn start(dim: usize, k: u64) -> Vec<f64> {
    (0..dim)
        .map(|i| 0.3 + 0.1 * (i as f64 - k as f64))
        .collect()
}

/// Whether `short` is the start of `long`: the same draws, flags and log
/// densities up to its length.
fn assert_prefix(short: &Chain, long: &Chain) {
    let n = short.len();
    assert!(n <= long.len());
    assert_eq!(short.samples[..], long.samples[..n * long.dim]);
    assert_eq!(short.accepted[..], long.accepted[..n]);
    assert_eq!(
        short
            .log_densities
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>(),
        long.log_densities[..n]
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_whitened_chain_spends_exactly_its_limit_on_the_unlimited_path() {
    let (dim, burn_in, iterations, limit) = (10, 300, 2000, 1000);
    let config = RunConfig::new(burn_in, iterations);
    let free = Counted::new(dim, false);
    let unlimited = Run::new(&free, whitened_kamh(dim), &start(dim, 0), config, 5, 0)
        .unwrap()
        .finish(&free, None)
        .unwrap();
    // every draw of a Gaussian is finite: one evaluation per step, and the
    // rest is the start (log π at x₀ and the curvature)
    let steps = burn_in + iterations;
    assert_eq!(free.calls(), unlimited.evaluations);
    let start_cost = unlimited.evaluations - steps;
    assert!(start_cost > 2 * 10 * 10, "the curvature took {start_cost}");

    let counted = Counted::new(dim, false);
    let mut run = Run::new(
        &counted,
        whitened_kamh(dim),
        &start(dim, 0),
        config.max_evaluations(limit),
        5,
        0,
    )
    .unwrap();
    // in uneven chunks, as the Python driver advances
    for chunk in [1, 7, 100, 3, u64::MAX] {
        run.advance(&counted, chunk, None).unwrap();
    }
    assert!(run.is_finished() && run.out_of_evaluations());
    // one evaluation per step: the chain stops exactly at the limit
    assert_eq!(run.steps_done(), limit - start_cost);
    let limited = run.into_chain();
    assert_eq!((counted.calls(), limited.evaluations), (limit, limit));
    assert_eq!(limited.steps, limit - start_cost);
    assert_eq!(limited.len() as u64, limit - start_cost - burn_in);
    assert_prefix(&limited, &unlimited);
}

/// A random walk that re-estimates the current state's density at every
/// step (MCWM): two evaluations per step.
struct Mcwm(RandomWalk);

impl Proposal for Mcwm {
    fn propose(
        &mut self,
        target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        self.0.propose(target, current, proposed, rng)
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, rng: &mut dyn Rng) {
        self.0.observe(outcome, adapt, rng);
    }

    fn reestimates_current_density(&self) -> bool {
        true
    }
}

#[test]
fn a_step_of_two_evaluations_is_not_begun_with_one_left() {
    let walk = || Mcwm(RandomWalk::new(3, RandomWalkConfig::default()).unwrap());
    for (limit, steps) in [(501, 250), (500, 249)] {
        let target = Counted::new(3, true);
        let config = RunConfig::new(20, 1000).max_evaluations(limit);
        let mut run = Run::new(&target, walk(), &start(3, 1), config, 2, 1).unwrap();
        assert_eq!(run.sampler().most_step_evaluations(), 2);
        run.advance(&target, u64::MAX, None).unwrap();
        assert_eq!(run.steps_done(), steps);
        assert_eq!(target.calls(), 1 + 2 * steps);
        assert!(target.calls() <= limit && target.calls() + 2 > limit);
        assert!(run.out_of_evaluations());
    }
}

#[test]
fn runs_in_lockstep_stop_where_runs_alone_do() {
    let dim = 4;
    let config = RunConfig::new(100, 1000).max_evaluations(400);
    let target = Counted::new(dim, false);
    let alone: Vec<Chain> = (0..3)
        .map(|k| {
            Run::new(&target, whitened_kamh(dim), &start(dim, k), config, 11, k)
                .unwrap()
                .finish(&target, None)
                .unwrap()
        })
        .collect();
    let target = Counted::new(dim, false);
    let mut runs: Vec<_> = (0..3)
        .map(|k| Run::new(&target, whitened_kamh(dim), &start(dim, k), config, 11, k).unwrap())
        .collect();
    let mut evaluate = |points: &[f64], values: &mut [f64]| {
        let mut unused = kameleon_samplers::chain_rng(0, 0);
        for (value, x) in values.iter_mut().zip(points.chunks(dim)) {
            *value = target.log_density(x, &mut unused);
        }
    };
    while !runs.iter().all(Run::is_finished) {
        advance_lockstep(&mut runs, &target, 64, &mut evaluate).unwrap();
    }
    let spent: u64 = runs.iter().map(Run::evaluations).sum();
    assert_eq!(target.calls(), spent);
    for (run, single) in runs.into_iter().zip(&alone) {
        assert_eq!(run.evaluations(), 400);
        let chain = run.into_chain();
        assert_eq!(chain.steps, single.steps);
        assert_prefix(&chain, single);
        assert_prefix(single, &chain);
    }
}

#[test]
fn a_resumed_run_stops_where_the_whole_one_does() {
    let dim = 3;
    let config = RunConfig::new(50, 500).max_evaluations(300);
    let target = Counted::new(dim, false);
    let whole = Run::new(&target, whitened_kamh(dim), &start(dim, 2), config, 8, 2)
        .unwrap()
        .finish(&target, None)
        .unwrap();
    let path = std::env::temp_dir().join(format!(
        "kameleon-evaluation-limit-{}.ckpt",
        std::process::id()
    ));
    let mut part = Run::new(&target, whitened_kamh(dim), &start(dim, 2), config, 8, 2).unwrap();
    part.advance(&target, 120, None).unwrap();
    part.checkpoint(&path).unwrap();
    let resumed = Run::<Whitened<Kamh<Gaussian>>>::resume(&path, &target)
        .unwrap()
        .finish(&target, None)
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(whole.evaluations, 300);
    assert_eq!(
        resumed,
        Chain {
            wall_time_secs: resumed.wall_time_secs,
            ..whole
        }
    );
}

#[test]
fn a_limit_too_small_for_the_start_is_an_error_within_it() {
    let dim = 10;
    // tune + thin = 51 steps set aside: nothing left for the start, so
    // nothing is evaluated
    let target = Counted::new(dim, false);
    let config = RunConfig::new(50, 100).max_evaluations(51);
    let err = Run::new(&target, whitened_kamh(dim), &start(dim, 0), config, 1, 0).unwrap_err();
    assert!(
        matches!(err, SamplerError::EvaluationLimit { limit: 51, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("does not cover the start"),
        "{err}"
    );
    assert_eq!(target.calls(), 0);
    // 49 left for a start that needs more than 2d² = 200: it stops there
    let config = RunConfig::new(50, 100).max_evaluations(100);
    let err = Run::new(&target, whitened_kamh(dim), &start(dim, 0), config, 1, 0).unwrap_err();
    assert!(
        matches!(err, SamplerError::EvaluationLimit { limit: 100, .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("leaves 49 evaluations for the start"),
        "{err}"
    );
    assert_eq!(target.calls(), 49);
    // without whitening the same limit starts, and a run of no draws sets
    // aside its tuning steps only
    let walk = RandomWalk::new(dim, RandomWalkConfig::default()).unwrap();
    let config = RunConfig::new(50, 0).max_evaluations(51);
    let mut run = Run::new(&target, walk, &start(dim, 0), config, 1, 0).unwrap();
    run.advance(&target, u64::MAX, None).unwrap();
    assert_eq!((run.steps_done(), run.evaluations()), (50, 51));
    assert!(run.is_finished() && run.out_of_evaluations());
}

#[test]
fn a_run_within_its_limit_is_the_unlimited_run() {
    let dim = 2;
    let config = RunConfig::new(100, 200);
    let target = Counted::new(dim, true);
    let walk = || RandomWalk::new(dim, RandomWalkConfig::default()).unwrap();
    let free = Run::new(&target, walk(), &start(dim, 0), config, 3, 0)
        .unwrap()
        .finish(&target, None)
        .unwrap();
    // exactly enough: the start and every step
    let limited = Run::new(
        &target,
        walk(),
        &start(dim, 0),
        config.max_evaluations(301),
        3,
        0,
    )
    .unwrap()
    .finish(&target, None)
    .unwrap();
    assert_eq!(limited.evaluations, 301);
    assert_eq!(
        limited,
        Chain {
            wall_time_secs: limited.wall_time_secs,
            config: limited.config,
            ..free
        }
    );
}
