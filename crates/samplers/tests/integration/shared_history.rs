//! A run whose proposal keeps every adapting state (KAMH, PCA-Kameleon, KMC
//! lite) takes its recorded samples from that history instead of copying
//! them ([`Proposal::kept_states`]). These tests check that the chain is the
//! one a copying run gives, bit for bit, for every way adaptation and
//! recording can overlap, across checkpoints, for partial chains and for a
//! proposal that arrives with states of another chain; and that the second
//! copy is really gone (the checkpoint is smaller by exactly the recorded
//! states).

use crate::common;

use common::{correlated_gaussian, subsample_config};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, AdaptationStop, AdaptationSummary, Chain, Kamh, KmcConfig, KmcLite,
    LiteSurrogate, LiteSurrogateConfig, MetropolisHastings, PcaKameleon, PcaKameleonConfig,
    Proposal, Refresh, Run, RunConfig, StepOutcome, Target, chain_rng,
};
use kameleon_score_matching::LiteEstimator;
use rand::Rng;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// `P` with the default [`Proposal::kept_states`] (`None`): a run records
/// every state itself, as all runs did before states were shared.
#[derive(Clone, Serialize, Deserialize)]
struct Copying<P>(P);

impl<P: Proposal> Proposal for Copying<P> {
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

    fn reestimates_current_density(&self) -> bool {
        self.0.reestimates_current_density()
    }

    fn summary(&self) -> AdaptationSummary {
        self.0.summary()
    }

    fn covariance_jitters(&self) -> u64 {
        self.0.covariance_jitters()
    }
}

fn pca_kameleon() -> PcaKameleon<Gaussian> {
    let refresh = Refresh::Probability(AdaptProbability::Power { kappa: 0.5 });
    let config = PcaKameleonConfig::default()
        .with_subsample(subsample_config(20, 0.2, refresh))
        .unwrap()
        .with_components(2)
        .unwrap()
        .with_scale(common::adaptive_scale())
        .unwrap();
    PcaKameleon::new(3, Gaussian::new(2.0).unwrap(), config).unwrap()
}

fn kmc_lite() -> KmcLite {
    let surrogate = LiteSurrogate::new(
        LiteEstimator::new(4.0, 1e-2).unwrap(),
        3,
        LiteSurrogateConfig::default()
            .with_subsample_size(15)
            .unwrap()
            .with_refit(AdaptProbability::Power { kappa: 0.5 })
            .unwrap(),
    )
    .unwrap();
    KmcLite::new(
        surrogate,
        KmcConfig::default()
            .with_step_size((0.2, 0.4))
            .unwrap()
            .with_steps((2, 4))
            .unwrap(),
    )
    .unwrap()
}

/// Every way adaptation (steps 1..=a) and recording (burn-in b, thin) can
/// overlap: a < b, a = b, b < a < end, a past the end, always.
fn configs() -> Vec<RunConfig> {
    vec![
        RunConfig::new(60, 240),
        RunConfig::new(60, 240).adaptation(AdaptationStop::After(25)),
        RunConfig::new(60, 241)
            .thin(3)
            .adaptation(AdaptationStop::After(131)),
        RunConfig::new(60, 240)
            .thin(2)
            .adaptation(AdaptationStop::After(1_000)),
        RunConfig::new(0, 300).adaptation(AdaptationStop::Never),
        RunConfig::new(7, 293)
            .thin(4)
            .adaptation(AdaptationStop::Never),
    ]
}

/// The chain of a run advanced in pieces of `pieces` steps, through a
/// checkpoint after each piece, then finished; wall time zeroed.
fn run_in_pieces<P>(target: &dyn Target, proposal: P, config: RunConfig, pieces: &[u64]) -> Chain
where
    P: Proposal + Serialize + DeserializeOwned,
{
    let path = std::env::temp_dir().join(format!(
        "kameleon-shared-history-{}-{:?}.bin",
        std::process::id(),
        std::thread::current().id()
    ));
    let mut run = Run::new(target, proposal, &[0.5, -0.5, 0.25], config, 9, 1).unwrap();
    for &steps in pieces {
        run.advance(target, steps, None).unwrap();
        run.checkpoint(&path).unwrap();
        run = Run::resume(&path, target).unwrap();
    }
    std::fs::remove_file(&path).ok();
    let mut chain = run.finish(target, None).unwrap();
    chain.wall_time_secs = 0.0;
    chain
}

/// The chains of `make()` as it is (sharing its history) and wrapped in
/// [`Copying`] agree bit for bit, uninterrupted and through checkpoints.
fn check_sharing_matches_copying<P>(make: impl Fn() -> P)
where
    P: Proposal + Serialize + DeserializeOwned,
{
    let (target, _, _) = correlated_gaussian(3);
    for config in configs() {
        let copied = run_in_pieces(&target, Copying(make()), config, &[]);
        let shared = run_in_pieces(&target, make(), config, &[]);
        assert_eq!(shared, copied, "{config:?}");
        assert_eq!(copied.len() as u64, config.iterations / config.thin);
        let resumed = run_in_pieces(&target, make(), config, &[17, 100, 1]);
        assert_eq!(resumed, copied, "{config:?}, through checkpoints");
    }
}

#[test]
fn kamh_chains_from_the_history_equal_copied_chains() {
    check_sharing_matches_copying(common::history_kamh);
}

#[test]
fn pca_kameleon_chains_from_the_history_equal_copied_chains() {
    check_sharing_matches_copying(pca_kameleon);
}

#[test]
fn kmc_lite_chains_from_the_history_equal_copied_chains() {
    check_sharing_matches_copying(kmc_lite);
}

#[test]
fn kmc_lite_chains_after_pilot_states_equal_copied_chains() {
    // 20 states of a pilot lead the history: the chain's samples start
    // after them, and the history still holds x_1 … x_t after its leading
    // rows (else a run would copy the states instead of sharing them)
    let make = || {
        let mut lite = kmc_lite();
        let pilot: Vec<f64> = (0..60).map(|k| (k as f64 * 0.37).sin()).collect();
        lite.learn_from_pilot(&pilot);
        lite
    };
    check_sharing_matches_copying(make);
    let (target, _, _) = correlated_gaussian(3);
    let mut mh =
        MetropolisHastings::new(&target, make(), &[0.5, -0.5, 0.25], chain_rng(2, 0), None)
            .unwrap();
    for _ in 0..10 {
        mh.step(&target);
    }
    let kept = mh
        .proposal()
        .kept_states()
        .expect("KMC lite keeps its states");
    assert_eq!((kept.leading, kept.rows), (21, 31));
}

#[test]
fn partial_chains_from_the_history_equal_copied_partial_chains() {
    let (target, _, _) = correlated_gaussian(3);
    for config in configs() {
        for steps in [0, 1, 59, 60, 61, 130, 131, 132, 299] {
            let partial = |shared: bool| {
                let x0 = [0.5, -0.5, 0.25];
                let mut chain = if shared {
                    let mut run =
                        Run::new(&target, common::history_kamh(), &x0, config, 3, 0).unwrap();
                    run.advance(&target, steps, None).unwrap();
                    run.into_chain()
                } else {
                    let mut run =
                        Run::new(&target, Copying(common::history_kamh()), &x0, config, 3, 0)
                            .unwrap();
                    run.advance(&target, steps, None).unwrap();
                    run.into_chain()
                };
                chain.wall_time_secs = 0.0;
                chain
            };
            assert_eq!(
                partial(true),
                partial(false),
                "{config:?} after {steps} steps"
            );
        }
    }
}

/// A proposal that already holds states of another chain does not describe
/// the new chain alone: the run copies, and the chain is still right.
#[test]
fn a_proposal_with_another_chains_history_is_copied_not_shared() {
    let (target, _, _) = correlated_gaussian(3);
    let mut first = MetropolisHastings::new(
        &target,
        common::history_kamh(),
        &[0.0; 3],
        chain_rng(5, 0),
        None,
    )
    .unwrap();
    for _ in 0..50 {
        first.step(&target);
    }
    let used = first.proposal().clone();
    assert_eq!(used.kept_states().map(|k| k.rows), Some(50));
    for config in configs() {
        let reused = run_in_pieces(&target, used.clone(), config, &[]);
        let copied = run_in_pieces(&target, Copying(used.clone()), config, &[]);
        assert_eq!(reused, copied, "{config:?}");
    }
}

/// The second copy is gone: a checkpoint of a sharing run, adapting
/// throughout, is smaller than the copying run's by exactly the recorded
/// states (8 bytes per coordinate in postcard; the two length prefixes of
/// the sample vectors differ by at most 2 bytes of varint).
#[test]
fn a_sharing_run_holds_each_state_once() {
    let (target, _, _) = correlated_gaussian(3);
    let config = RunConfig::new(100, 2_000)
        .thin(2)
        .adaptation(AdaptationStop::Never);
    let dir = std::env::temp_dir();
    let size = |name: &str, run: &dyn Fn(&std::path::Path)| {
        let path = dir.join(format!("kameleon-{name}-{}.bin", std::process::id()));
        run(&path);
        let bytes = std::fs::metadata(&path).unwrap().len();
        std::fs::remove_file(&path).unwrap();
        bytes
    };
    let x0 = [0.0; 3];
    let shared = size("shared", &|path| {
        let mut run = Run::new(&target, common::history_kamh(), &x0, config, 1, 0).unwrap();
        run.advance(&target, u64::MAX, None).unwrap();
        run.checkpoint(path).unwrap();
    });
    let copied = size("copied", &|path| {
        let mut run =
            Run::new(&target, Copying(common::history_kamh()), &x0, config, 1, 0).unwrap();
        run.advance(&target, u64::MAX, None).unwrap();
        run.checkpoint(path).unwrap();
    });
    let recorded_bytes = 1_000 * 3 * 8;
    // the files' headers name the proposal types, of different lengths
    let kinds = std::any::type_name::<Copying<Kamh<Gaussian>>>().len()
        - std::any::type_name::<Kamh<Gaussian>>().len();
    let saved = copied - shared - kinds as u64;
    assert!(
        (recorded_bytes..=recorded_bytes + 2).contains(&saved),
        "saved {saved} bytes, the recorded states are {recorded_bytes}"
    );
}

/// The equality tests above are only as strong as the adaptation they
/// exercise: KAMH's z is redrawn and its ν moves.
#[test]
fn the_compared_proposals_adapt() {
    let (target, _, _) = correlated_gaussian(3);
    let config = RunConfig::new(0, 300).adaptation(AdaptationStop::Never);
    let chain = run_in_pieces(&target, common::history_kamh(), config, &[]);
    let refreshes = chain
        .adaptation
        .extra
        .iter()
        .find(|(k, _)| k == "subsample_refreshes")
        .map(|(_, v)| *v)
        .unwrap();
    assert!(refreshes > 5.0, "z redrawn {refreshes} times");
    assert_ne!(chain.adaptation.scale, Some(0.1f64.sqrt()));
}
