//! Runs advanced in lockstep ([`advance_lockstep`]: every run's proposal
//! first, one batched evaluation, every run's decision) take the steps of
//! runs advanced alone, bit for bit: with non-finite log densities, draws
//! the engine rejects without evaluating them, a proposal that keeps the
//! chain's states, runs of different lengths and a run resumed part-way.

use crate::common;

use kameleon_samplers::{
    AdaptiveMetropolis, AdaptiveMetropolisConfig, Chain, FnTarget, Proposal, RandomWalk,
    RandomWalkConfig, Run, RunConfig, StepOutcome, Target, advance_lockstep,
};
use rand::{Rng, RngExt};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::SeedableRng;

/// A 3-d Gaussian with NaN on one side and −∞ beyond a wall: both rejected
/// and counted.
fn walled() -> impl Target {
    FnTarget::new(3, |x: &[f64]| {
        if x[0] > 2.0 {
            f64::NAN
        } else if x[1] < -1.5 {
            f64::NEG_INFINITY
        } else {
            -0.5 * (x[0] * x[0] + 2.0 * x[1] * x[1] + 0.5 * x[2] * x[2])
        }
    })
}

/// A random walk whose correction is NaN for about one draw in eight: the
/// engine rejects those steps without evaluating the point.
struct Flaky(RandomWalk);

impl Proposal for Flaky {
    fn propose(
        &mut self,
        target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        let correction = self.0.propose(target, current, proposed, rng);
        if rng.random::<f64>() < 0.125 {
            f64::NAN
        } else {
            correction
        }
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, rng: &mut dyn Rng) {
        self.0.observe(outcome, adapt, rng);
    }
}

/// Adaptive Metropolis with its defaults.
fn am() -> AdaptiveMetropolis {
    AdaptiveMetropolis::new(3, AdaptiveMetropolisConfig::default()).unwrap()
}

/// The starting point of chain `k`.
fn start(k: u64) -> Vec<f64> {
    vec![0.1 * k as f64, -0.2, 0.3]
}

/// `runs` advanced in lockstep in chunks of `chunk` steps; also returns
/// the number of points of each batched call.
fn in_lockstep<P: Proposal>(
    target: &dyn Target,
    mut runs: Vec<Run<P>>,
    chunk: u64,
) -> (Vec<Chain>, Vec<usize>) {
    let mut batches = Vec::new();
    let mut evaluate = |points: &[f64], values: &mut [f64]| {
        batches.push(values.len());
        assert_eq!(points.len(), values.len() * target.dim());
        let mut unused = Xoshiro256PlusPlus::seed_from_u64(0);
        for (value, x) in values.iter_mut().zip(points.chunks(target.dim())) {
            *value = target.log_density(x, &mut unused);
        }
    };
    while runs.iter().any(|r| !r.is_finished()) {
        advance_lockstep(&mut runs, target, chunk, &mut evaluate).unwrap();
    }
    (runs.into_iter().map(Run::into_chain).collect(), batches)
}

/// The chains without their wall times.
fn timeless(chains: Vec<Chain>) -> Vec<Chain> {
    chains
        .into_iter()
        .map(|mut c| {
            c.wall_time_secs = 0.0;
            c
        })
        .collect()
}

/// Chain `k` of seed 5 with `config`, advanced alone to the end.
fn alone<P: Proposal>(target: &dyn Target, proposal: P, config: RunConfig, k: u64) -> Chain {
    Run::new(target, proposal, &start(k), config, 5, k)
        .unwrap()
        .finish(target, None)
        .unwrap()
}

#[test]
fn lockstep_runs_take_the_steps_of_runs_advanced_alone() {
    let target = walled();
    // chain k runs 200 + 100 k steps: the shorter ones leave the batch
    let config = |k: u64| RunConfig::new(100, 100 + 100 * k).thin(3);
    let walk = || Flaky(RandomWalk::new(3, RandomWalkConfig::default()).unwrap());

    let expected: Vec<Chain> = (0..3)
        .map(|k| alone(&target, walk(), config(k), k))
        .collect();
    let runs = (0..3)
        .map(|k| Run::new(&target, walk(), &start(k), config(k), 5, k).unwrap())
        .collect();
    let (chains, batches) = in_lockstep(&target, runs, 7);
    assert!(expected.iter().all(|c| c.rejected_non_finite > 20));
    assert_eq!(timeless(chains), timeless(expected.clone()));
    // at most one call per step (none when every running chain's draw is
    // flaky), holding exactly the points the chains evaluate alone (all
    // but their start)
    assert!(batches.len() <= 400 && batches.iter().all(|&n| (1..=3).contains(&n)));
    assert!(batches.iter().any(|&n| n < 3) && batches.contains(&3));
    let evaluated: u64 = batches.iter().map(|&n| n as u64).sum();
    assert_eq!(
        evaluated,
        expected.iter().map(|c| c.evaluations - 1).sum::<u64>()
    );

    // adaptive proposals, and one with kept states, in chunks of 1 and 64
    let expected: Vec<Chain> = (0..3).map(|k| alone(&target, am(), config(k), k)).collect();
    for chunk in [1, 64] {
        let runs = (0..3)
            .map(|k| Run::new(&target, am(), &start(k), config(k), 5, k).unwrap())
            .collect();
        let (chains, _) = in_lockstep(&target, runs, chunk);
        assert_eq!(
            timeless(chains),
            timeless(expected.clone()),
            "chunk {chunk}"
        );
    }
    let expected: Vec<Chain> = (0..3)
        .map(|k| alone(&target, common::history_kamh(), config(k), k))
        .collect();
    let runs = (0..3)
        .map(|k| Run::new(&target, common::history_kamh(), &start(k), config(k), 5, k).unwrap())
        .collect();
    assert_eq!(
        timeless(in_lockstep(&target, runs, 16).0),
        timeless(expected)
    );
}

#[test]
fn a_resumed_run_joins_the_lockstep_where_it_stopped() {
    let target = walled();
    let config = RunConfig::new(50, 250);
    let expected: Vec<Chain> = (0..2).map(|k| alone(&target, am(), config, k)).collect();
    let mut runs: Vec<_> = (0..2)
        .map(|k| Run::new(&target, am(), &start(k), config, 5, k).unwrap())
        .collect();
    runs[1].advance(&target, 77, None).unwrap();
    let (chains, batches) = in_lockstep(&target, runs, 10);
    assert_eq!(timeless(chains), timeless(expected));
    // chain 1 runs its last 223 steps beside chain 0's first 223
    assert_eq!(batches.len(), 300);
    assert!(batches[..223].iter().all(|&n| n == 2) && batches[223..].iter().all(|&n| n == 1));
}

#[test]
fn lockstep_refuses_a_target_of_another_dimension() {
    let target = walled();
    let other = FnTarget::new(2, |_: &[f64]| 0.0);
    let mut runs = vec![Run::new(&target, am(), &start(0), RunConfig::new(0, 5), 5, 0).unwrap()];
    let mut evaluate = |_: &[f64], _: &mut [f64]| panic!("no step may be taken");
    assert!(advance_lockstep(&mut runs, &other, 5, &mut evaluate).is_err());
    assert_eq!(runs[0].steps_done(), 0);
}
