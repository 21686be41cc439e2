//! ESS per second of every sampler on a fixed budget: the 8-d banana
//! B(0.03, 100), one chain of 10 000 burn-in and 20 000 kept iterations from
//! the origin, seed 1. Prints the minimum and mean Geyer ESS over the
//! dimensions, the wall time of the whole run (burn-in included) and min-ESS/s.
//!
//! Not a criterion benchmark (one run is the measurement: a chain's ESS has
//! no meaning per iteration); run it with
//! `cargo bench -p kameleon-benches --bench ess_per_second`.

use kameleon_diagnostics::{ess_geyer_per_dim, ess_summary};
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptiveMetropolis, AdaptiveMetropolisConfig, FKamh, FKamhConfig, Hmc, HmcConfig, Kamh,
    KamhConfig, PrincipalComponents, PrincipalComponentsConfig, Proposal, RandomWalk,
    RandomWalkConfig, RobbinsMonro, RunConfig, Scale, StepSchedule, run_chain,
};
use kameleon_targets::Banana;
use rand::SeedableRng;

const DIM: usize = 8;
const BURN_IN: u64 = 10_000;
const KEPT: u64 = 20_000;

fn measure<P: Proposal>(name: &str, proposal: P) {
    let target = Banana::new(DIM, 0.03, 100.0).expect("valid banana");
    let chain = run_chain(
        &target,
        proposal,
        &[0.0; DIM],
        RunConfig::new(BURN_IN, KEPT),
        1,
    )
    .expect("chain runs");
    let ess = ess_geyer_per_dim(&chain.samples, DIM).expect("ESS of a finite chain");
    let summary = ess_summary(&ess).expect("non-empty");
    println!(
        "{name:<22} {:>9.1} {:>9.1} {:>10.3} {:>12.1} {:>8.3}",
        summary.min,
        summary.mean,
        chain.wall_time_secs,
        summary.min / chain.wall_time_secs,
        chain.acceptance_rate(),
    );
}

fn main() {
    // `cargo test --benches` and `cargo bench -- --list` call every bench
    // binary; only run the chains when benchmarking.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    println!(
        "banana B(0.03, 100), d = {DIM}, burn-in {BURN_IN}, kept {KEPT}, seed 1\n{:<22} {:>9} {:>9} {:>10} {:>12} {:>8}",
        "sampler", "min ESS", "mean ESS", "wall s", "min ESS/s", "accept"
    );
    measure(
        "SM",
        RandomWalk::new(DIM, RandomWalkConfig::default()).unwrap(),
    );
    measure(
        "AM-FS",
        AdaptiveMetropolis::new(DIM, AdaptiveMetropolisConfig::default()).unwrap(),
    );
    measure(
        "AM-LS",
        AdaptiveMetropolis::new(
            DIM,
            AdaptiveMetropolisConfig::learned_scale(DIM, StepSchedule::InverseSqrt).unwrap(),
        )
        .unwrap(),
    );
    measure(
        "RBAM",
        AdaptiveMetropolis::new(
            DIM,
            AdaptiveMetropolisConfig::rao_blackwellised(StepSchedule::InverseSqrt).unwrap(),
        )
        .unwrap(),
    );
    measure(
        "PCA-AM",
        PrincipalComponents::new(DIM, PrincipalComponentsConfig::default()).unwrap(),
    );
    measure(
        "HMC(L=5..15)",
        Hmc::new(
            DIM,
            HmcConfig::default()
                .with_step_size((0.1, 0.3))
                .unwrap()
                .with_steps((5, 15))
                .unwrap(),
        )
        .unwrap(),
    );
    measure(
        "KAMH-LS(n=200)",
        Kamh::new(
            DIM,
            Gaussian::new(1.0).unwrap(),
            KamhConfig::paper(200).unwrap(),
        )
        .unwrap(),
    );
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
    // Bandwidth: the median inter-point distance of the banana's bulk is ~15.
    let features = RandomFourierFeatures::new(
        &Gaussian::new(15.0).unwrap(),
        DIM,
        350,
        Embedding::CosPhase,
        &mut rng,
    )
    .unwrap();
    let eta = Scale::Adaptive(RobbinsMonro::new(1.0, 0.234, StepSchedule::InverseSqrt).unwrap());
    measure(
        "F-KAMH(D=350)",
        FKamh::new(
            features,
            FKamhConfig::default()
                .with_gamma(0.2)
                .unwrap()
                .with_eta(eta)
                .unwrap(),
        )
        .unwrap(),
    );
}
