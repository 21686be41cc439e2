//! cKAM through the one runner: `run_ckam` and `run_ckam_with_burn_in` give
//! the chains of the dedicated cycle loop they replaced (digests of chains
//! recorded from that loop at fixed seeds), and a cKAM run can be advanced in
//! chunks (its checkpoint and resume are tested in `resume.rs`).

use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptationStop, Chain, Ckam, CkamConfig, CycleAdaptation, RobbinsMonro, Run, RunConfig,
    StepSchedule, SwitchRule, run_ckam, run_ckam_with_burn_in,
};
use kameleon_targets::GaussianMixture;

/// FNV-1a over everything a chain records except the wall-clock time.
fn digest(chain: &Chain) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |v: u64| {
        for b in v.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    feed(chain.len() as u64);
    chain.samples.iter().for_each(|v| feed(v.to_bits()));
    chain.log_densities.iter().for_each(|v| feed(v.to_bits()));
    chain
        .accept_probabilities
        .iter()
        .for_each(|v| feed(v.to_bits()));
    chain.accepted.iter().for_each(|&a| feed(a as u64));
    feed(chain.accepted_total);
    feed(chain.rejected_non_finite);
    feed(chain.covariance_jitters);
    feed(chain.config.burn_in);
    feed(chain.config.iterations);
    if let Some(scale) = chain.adaptation.scale {
        feed(scale.to_bits());
    }
    h
}

fn ckam(rule: SwitchRule, adaptation: CycleAdaptation) -> Ckam<Gaussian> {
    let nu = RobbinsMonro::new(3.0, 0.234, StepSchedule::Power { kappa: 0.75 }).unwrap();
    Ckam::new(
        2,
        Gaussian::new(2.0).unwrap(),
        CkamConfig::default()
            .with_gamma(4.0)
            .unwrap()
            .with_subsample_size(10)
            .unwrap()
            .with_nu(nu)
            .with_cycle_length(50)
            .unwrap()
            .with_exploration_fraction(0.4)
            .unwrap()
            .with_switch_rule(rule)
            .with_cycle_adaptation(adaptation),
    )
    .unwrap()
}

const VARIANTS: [(SwitchRule, CycleAdaptation); 4] = [
    (SwitchRule::AsWritten, CycleAdaptation::WithinCycle),
    (SwitchRule::DelayedRejection, CycleAdaptation::WithinCycle),
    (SwitchRule::AsWritten, CycleAdaptation::BetweenCycles),
    (SwitchRule::DelayedRejection, CycleAdaptation::BetweenCycles),
];

/// The digests of `run_ckam` (6 cycles) and `run_ckam_with_burn_in` (3 + 4
/// cycles), seed 17, from [-8, 0] on the bimodal mixture, per variant.
fn digests() -> Vec<(u64, u64)> {
    let target = GaussianMixture::ckam_bimodal(false);
    VARIANTS
        .iter()
        .map(|&(rule, adaptation)| {
            let plain = run_ckam(&target, ckam(rule, adaptation), &[-8.0, 0.0], 6, 17).unwrap();
            let frozen =
                run_ckam_with_burn_in(&target, ckam(rule, adaptation), &[-8.0, 0.0], 3, 4, 17)
                    .unwrap();
            assert_eq!(plain.len(), 6 * (50 - 21));
            assert_eq!(frozen.len(), 4 * (50 - 21));
            (digest(&plain), digest(&frozen))
        })
        .collect()
}

/// The digests of the same runs by the dedicated cycle loop (chain 0 of the
/// seed, stepping the engine and keeping the sampling steps after the
/// burn-in), recorded before it was replaced by [`Run`].
const OLD_LOOP_DIGESTS: [(u64, u64); 4] = [
    (0x1445_da64_c8a5_2af9, 0xf4c3_f662_23b2_c779),
    (0x4319_454c_3e5a_7dde, 0xb4c7_034e_0691_679f),
    (0xb91b_f584_9627_14ef, 0xc2ca_a79c_8dd3_9287),
    (0xded5_92d6_b89c_e07c, 0xca9a_4568_c224_489a),
];

#[test]
fn the_runner_gives_the_chains_of_the_old_cycle_loop() {
    assert_eq!(digests(), OLD_LOOP_DIGESTS);
}

/// A cKAM run advanced in uneven chunks (cutting cycles and phases) gives
/// the chain of `run_ckam`.
#[test]
fn a_chunked_ckam_run_gives_the_one_call_chain() {
    let target = GaussianMixture::ckam_bimodal(false);
    for (rule, adaptation) in VARIANTS {
        let mut whole = run_ckam(&target, ckam(rule, adaptation), &[-8.0, 0.0], 6, 17).unwrap();
        let config = RunConfig::new(0, 6 * 50).adaptation(AdaptationStop::Never);
        let mut run =
            Run::new(&target, ckam(rule, adaptation), &[-8.0, 0.0], config, 17, 0).unwrap();
        for chunk in [7, 13, 21, 1, 40].into_iter().cycle() {
            if run.is_finished() {
                break;
            }
            run.advance(&target, chunk, None).unwrap();
        }
        let mut chunked = run.into_chain();
        whole.wall_time_secs = 0.0;
        chunked.wall_time_secs = 0.0;
        assert_eq!(whole, chunked, "{rule:?} {adaptation:?}");
        // a run stopped at a given number of kept states stops right there
        let mut run =
            Run::new(&target, ckam(rule, adaptation), &[-8.0, 0.0], config, 17, 0).unwrap();
        run.advance_until_recorded(&target, 30, None).unwrap();
        assert_eq!(run.recorded(), 30);
        // 29 kept per cycle: the 30th is the first sampling step of cycle 2
        assert_eq!(run.steps_done(), 50 + 22);
    }
}
