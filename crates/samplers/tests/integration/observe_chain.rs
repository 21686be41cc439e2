//! The engine tells a proposal the outcome of a step through
//! [`Proposal::observe_chain`], with the chain's generator as its own type;
//! KAMH, PCA-Kameleon and the whitening wrapper override it to draw their adaptation's
//! words inline. These tests check that the override makes exactly the
//! draws of [`Proposal::observe`] through a `dyn Rng`: the same chain, bit
//! for bit, and the same generator state.

use crate::common;

use common::{adaptive_scale, correlated_gaussian, subsample_config};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, Bandwidth, CoordinateChange, Kamh, KamhConfig, MetropolisHastings,
    PcaKameleon, PcaKameleonConfig, Proposal, Refresh, StepOutcome, SubsampleConfig, Target,
    Whitened, WhiteningConfig, chain_rng,
};
use rand::Rng;

/// `P` told every outcome through [`Proposal::observe`] (the default
/// `observe_chain`), so its draws go through a `dyn Rng`.
struct Dynamic<P>(P);

impl<P: Proposal> Proposal for Dynamic<P> {
    fn plan_adaptation(&mut self, adapt_until: Option<u64>) {
        self.0.plan_adaptation(adapt_until);
    }

    fn state_dim(&self) -> Option<usize> {
        self.0.state_dim()
    }

    fn initialise(
        &mut self,
        target: &dyn Target,
        x: &[f64],
        adapts: bool,
    ) -> kameleon_samplers::Result<()> {
        self.0.initialise(target, x, adapts)
    }

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

    fn change_coordinates(&mut self, change: &CoordinateChange, rng: &mut dyn Rng) -> bool {
        self.0.change_coordinates(change, rng)
    }

    fn records_last_step(&self) -> bool {
        self.0.records_last_step()
    }

    fn target_evaluations(&self) -> u64 {
        self.0.target_evaluations()
    }
}

/// KAMH in 3 dimensions with z (n = 30) redrawn at every adapting step and
/// the median heuristic over 10 of its points (the row sample draws from
/// the generator too), ν learned.
fn subsample() -> SubsampleConfig {
    subsample_config(30, 0.2, Refresh::Probability(AdaptProbability::Always))
        .with_bandwidth(Bandwidth::MedianHeuristic { max_points: 10 })
        .unwrap()
}

fn kamh() -> Kamh<Gaussian> {
    let config = KamhConfig::default()
        .with_subsample(subsample())
        .unwrap()
        .with_scale(adaptive_scale())
        .unwrap();
    Kamh::new(3, Gaussian::new(2.0).unwrap(), config).unwrap()
}

/// PCA-Kameleon with the same subsample adaptation and two components.
fn pca_kameleon() -> PcaKameleon<Gaussian> {
    let config = PcaKameleonConfig::default()
        .with_subsample(subsample())
        .unwrap()
        .with_components(2)
        .unwrap()
        .with_scale(adaptive_scale())
        .unwrap();
    PcaKameleon::new(3, Gaussian::new(2.0).unwrap(), config).unwrap()
}

/// Runs `direct` and `dynamic` side by side for `steps` steps, adapting
/// for the first `adapt_until`, and asserts equal states after every step
/// and equal generators at the end.
fn assert_same_chains<A: Proposal, B: Proposal>(
    direct: A,
    dynamic: B,
    steps: u64,
    adapt_until: u64,
) {
    let (target, mean, _) = correlated_gaussian(3);
    let mut a = MetropolisHastings::new(&target, direct, &mean, chain_rng(9, 0), Some(adapt_until))
        .unwrap();
    let mut b =
        MetropolisHastings::new(&target, dynamic, &mean, chain_rng(9, 0), Some(adapt_until))
            .unwrap();
    for t in 1..=steps {
        assert_eq!(a.step(&target), b.step(&target), "step {t}");
        assert_eq!(a.position(), b.position(), "step {t}");
    }
    assert_eq!(a.rng(), b.rng());
    assert!(a.accepted() > steps / 20, "the chain barely moved");
}

#[test]
fn kamh_told_with_the_chains_generator_draws_as_through_dyn_rng() {
    assert_same_chains(kamh(), Dynamic(kamh()), 600, 500);
}

#[test]
fn pca_kameleon_told_with_the_chains_generator_draws_as_through_dyn_rng() {
    assert_same_chains(pca_kameleon(), Dynamic(pca_kameleon()), 600, 500);
}

#[test]
fn whitened_kamh_told_with_the_chains_generator_draws_as_through_dyn_rng() {
    let whitened = || Whitened::new(kamh(), 3, WhiteningConfig::default()).unwrap();
    assert_same_chains(whitened(), Dynamic(whitened()), 1200, 1000);
}
