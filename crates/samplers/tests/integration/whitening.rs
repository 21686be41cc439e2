//! Scale-free sampling with [`Whitened`]: a kernel sampler whose lengths
//! are in the target's standard deviations works on a correlated Gaussian
//! whose scales are 10⁻³ (where the same sampler in the target's units never
//! accepts), stays exactly invariant once adaptation stops (the pilot, the
//! switch to whitened coordinates and the wrapped proposal's own adaptation
//! all happen during burn-in). The wrapper returns the wrapped proposal's
//! Hastings correction unchanged (an affine map's Jacobian cancels), so the
//! wrapped samplers' own broken-correction tests cover it.
//!
//! Tolerances: as in `kamh_invariance.rs`, every checked chain average must
//! lie within Z_TOL = 5 Monte Carlo standard errors (sd/√ESS, ESS estimated
//! on the series itself) of the exact value.

use crate::common;

use common::{Invariance, Reference, assert_verdict, final_states, z_chain, z_iid};
use faer::Mat;
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptiveMetropolis, AdaptiveMetropolisConfig, CoordinateChange, FKamh, FKamhConfig,
    FiniteSurrogate, FiniteSurrogateConfig, FnTarget, Kamh, KamhConfig, KmcConfig, KmcFinite,
    KmcLite, LiteSurrogate, LiteSurrogateConfig, MetropolisHastings, MomentUpdate, PcaKameleon,
    PcaKameleonConfig, PrincipalComponents, PrincipalComponentsConfig, Proposal, RandomWalk,
    RandomWalkConfig, RobbinsMonro, Run, RunConfig, Scale, StepSchedule, Whitened, WhiteningConfig,
    chain_rng, run_chain,
};
use kameleon_score_matching::{BaseMeasure, FiniteEstimator, GradientModel, LiteEstimator};
use kameleon_targets::GaussianMixture;

/// KAMH with its scale-free presets ([`KamhConfig::scale_free`]: n = 200,
/// γ = 2.38/√d, the median heuristic) — lengths that suit a target of unit
/// scale.
fn unit_scale_kamh(dim: usize) -> Kamh<Gaussian> {
    Kamh::new(
        dim,
        Gaussian::new(1.0).unwrap(),
        KamhConfig::scale_free(dim),
    )
    .unwrap()
}

/// KMC lite with its scale-free presets: 200 history points, σ by the
/// median heuristic at every fit, λ = 5 000 max(d, 2), the step size
/// learned toward 0.65.
fn unit_scale_kmc_lite(dim: usize) -> KmcLite {
    let ridge = LiteSurrogateConfig::scale_free_ridge(dim);
    let model = LiteEstimator::new(1.0, ridge).unwrap();
    let surrogate = LiteSurrogate::new(model, dim, LiteSurrogateConfig::scale_free()).unwrap();
    KmcLite::new(surrogate, KmcConfig::scale_free()).unwrap()
}

/// KMC finite with its scale-free presets (the Python package's defaults):
/// 100 random Fourier features of the Gaussian kernel of length-scale
/// √(2d), λ = 1, the Student-t base of ν = 3d, ready after 100 points, the
/// step size learned toward 0.65.
fn unit_scale_kmc_finite(dim: usize) -> KmcFinite<RandomFourierFeatures> {
    let mut rng = chain_rng(78, 0);
    let kernel = Gaussian::new((2.0 * dim as f64).sqrt()).unwrap();
    let phi = RandomFourierFeatures::new(&kernel, dim, 100, Embedding::CosPhase, &mut rng).unwrap();
    let base = BaseMeasure::StudentT {
        dof: FiniteSurrogateConfig::SCALE_FREE_BASE_DOF_PER_DIM * dim as f64,
    };
    let model = FiniteEstimator::new(phi, FiniteSurrogateConfig::SCALE_FREE_RIDGE)
        .and_then(|m| m.with_base_measure(base))
        .unwrap();
    let surrogate = FiniteSurrogate::new(model, FiniteSurrogateConfig::default())
        .unwrap()
        .keeping_points();
    KmcFinite::new(surrogate, KmcConfig::scale_free()).unwrap()
}

/// The pilot for half the adaptation period, the map re-estimated after
/// three quarters of it.
fn rewhitening() -> WhiteningConfig {
    WhiteningConfig::default()
        .with_rewhiten_fraction(Some(0.75))
        .unwrap()
}

/// `correlated_gaussian(4)` (correlation 0.8 between neighbours, standard
/// deviations 1–2.5) shrunk by 10⁻³ and moved to 5: the mean, the
/// covariance and the target.
fn tiny_gaussian() -> (GaussianMixture, Vec<f64>, Vec<f64>) {
    let (_, mean, cov) = common::correlated_gaussian(4);
    let mean: Vec<f64> = mean.iter().map(|m| 5.0 + 1e-3 * m).collect();
    let cov: Vec<f64> = cov.iter().map(|c| 1e-6 * c).collect();
    let c = Mat::from_fn(4, 4, |i, j| cov[i * 4 + j]);
    (GaussianMixture::gaussian(&mean, &c).unwrap(), mean, cov)
}

/// The worst z-score of a chain of `proposal` on [`tiny_gaussian`] from
/// its mean (3 000 burn-in steps, 20 000 kept), and its acceptance rate.
fn tiny_gaussian_score(proposal: impl Proposal, seed: u64) -> ((f64, String), f64) {
    let (target, mean, cov) = tiny_gaussian();
    let chain = run_chain(
        &target,
        proposal,
        &mean,
        RunConfig::new(3_000, 20_000),
        seed,
    )
    .unwrap();
    let score = Reference::gaussian(&mean, &cov).worst_z(&chain.samples, &z_chain);
    (score, chain.acceptance_rate())
}

fn whitened<P: Proposal>(inner: P) -> Whitened<P> {
    Whitened::new(inner, 4, WhiteningConfig::default()).unwrap()
}

#[test]
fn unit_scale_kamh_never_accepts_on_a_gaussian_of_scale_one_thousandth() {
    // the failure the wrapper exists for: γ = 0.2 is 100 standard
    // deviations here
    let (_, acceptance) = tiny_gaussian_score(unit_scale_kamh(4), 0);
    assert!(acceptance < 0.01, "acceptance {acceptance}");
}

#[test]
fn whitened_kamh_samples_a_gaussian_of_scale_one_thousandth() {
    for seed in 0..common::SEEDS {
        let (score, acceptance) = tiny_gaussian_score(whitened(unit_scale_kamh(4)), seed);
        assert!(acceptance > 0.15, "seed {seed}: acceptance {acceptance}");
        assert_verdict(&format!("whitened kamh seed {seed}"), score, true);
    }
}

/// The Student t with 3 degrees of freedom in dimension `dim` (unit
/// scale): heavy tails where a chain far out accepts almost every short step.
fn student_t3(dim: usize) -> FnTarget<impl Fn(&[f64]) -> f64 + Send + Sync> {
    FnTarget::new(dim, move |x: &[f64]| {
        let q: f64 = x.iter().map(|v| v * v).sum();
        -0.5 * (3.0 + dim as f64) * (q / 3.0).ln_1p()
    })
}

/// Whitened KAMH (`scale`: its ν) after 5 000 adapting steps from 0.1·1:
/// the final ν and the largest distance from the centre over the next
/// 1 000 (frozen) states.
fn nu_and_reach(scale: Scale, dim: usize, seed: u64) -> (f64, f64) {
    let config = KamhConfig::scale_free(dim).with_scale(scale).unwrap();
    let kamh = Kamh::new(dim, Gaussian::new(1.0).unwrap(), config).unwrap();
    let sampler = Whitened::new(kamh, dim, WhiteningConfig::default()).unwrap();
    let target = student_t3(dim);
    let mut run = Run::new(
        &target,
        sampler,
        &vec![0.1; dim],
        RunConfig::new(5_000, 1_000),
        seed,
        0,
    )
    .unwrap();
    run.advance(&target, 5_000, None).unwrap();
    let nu = run.sampler().proposal().inner().nu();
    let mut reach: f64 = 0.0;
    for _ in 0..1_000 {
        run.advance(&target, 1, None).unwrap();
        reach = reach.max(
            run.sampler()
                .position()
                .iter()
                .map(|v| v * v)
                .sum::<f64>()
                .sqrt(),
        );
    }
    (nu, reach)
}

#[test]
fn scale_free_kamh_keeps_its_kernel_scale_bounded_on_a_heavy_tailed_target() {
    // Unbounded, Robbins–Monro ran away on this target in 2 of these 5
    // seeds (ν 7·10² and 1.5·10⁹, the kept chains 2.5·10² and 5.6·10⁵ from
    // the centre); the median distance under the target is 3.4, and the
    // farthest of 1 000 states of the bounded runs were 5.6–28 (the target
    // puts 2·10⁻⁴ of its mass beyond 60).
    let (dim, start) = (10, 0.1f64.sqrt());
    let max = KamhConfig::SCALE_FREE_MAX_SCALE_FACTOR * start;
    let unbounded = Scale::learned_from(start).unwrap();
    let runaway = (1..=5)
        .map(|seed| nu_and_reach(unbounded.clone(), dim, seed))
        .filter(|&(nu, reach)| nu > 100.0 * max && reach > 100.0)
        .count();
    assert!(
        runaway >= 1,
        "no unbounded run ran away: the test lost its case"
    );
    for seed in 1..=5 {
        let (nu, reach) = nu_and_reach(KamhConfig::scale_free(dim).scale, dim, seed);
        assert!(nu <= max, "seed {seed}: ν {nu}");
        assert!(
            reach < 60.0,
            "seed {seed}: a kept state {reach} from the centre"
        );
    }
}

#[test]
fn the_scale_free_bound_on_kamhs_scale_changes_no_run_it_never_reaches() {
    // on a standard normal ν stays at 0.2–1.5, below its bound 3.16: the
    // bounded and the unbounded learner give the same chain bit for bit
    let target = GaussianMixture::isotropic(&[1.0], &[vec![0.0; 5]], &[1.0]).unwrap();
    let chain = |scale: Scale| {
        let config = KamhConfig::scale_free(5).with_scale(scale).unwrap();
        let kamh = Kamh::new(5, Gaussian::new(1.0).unwrap(), config).unwrap();
        let sampler = Whitened::new(kamh, 5, WhiteningConfig::default()).unwrap();
        run_chain(&target, sampler, &[0.1; 5], RunConfig::new(2_000, 2_000), 3).unwrap()
    };
    let bounded = chain(KamhConfig::scale_free(5).scale);
    let unbounded = chain(Scale::learned_from(0.1f64.sqrt()).unwrap());
    assert_eq!(bounded.samples, unbounded.samples);
    assert!(KamhConfig::scale_free_scale(f64::MAX).is_err());
}

#[test]
fn whitened_kmc_lite_samples_a_gaussian_of_scale_one_thousandth() {
    for seed in 0..common::SEEDS {
        let (score, acceptance) = tiny_gaussian_score(whitened(unit_scale_kmc_lite(4)), seed);
        // the step size is learned toward 0.65; a poor surrogate lowers it
        assert!(acceptance > 0.3, "seed {seed}: acceptance {acceptance}");
        assert_verdict(&format!("whitened kmc lite seed {seed}"), score, true);
    }
}

/// The banana stationarity check (`common::final_states`): a whitened
/// sampler adapted for 5 000 steps from the origin on B(0.1, 100) in d = 8
/// (pilot, switch and the wrapped sampler's own adaptation included), then
/// frozen and run as 1 000 chains of `STEPS` steps from exact draws. If the
/// frozen kernel leaves π invariant, their final states are iid π however
/// slowly it mixes along the banana; the worst iid z-score of 49 statistics
/// (untwisted moments, region coverages) is returned.
const STEPS: u64 = 30;

fn whitened_banana_stationarity<P: Proposal + Clone>(
    inner: P,
    config: WhiteningConfig,
    seed: u64,
) -> (f64, String) {
    let target = Invariance::banana();
    let rewhitens = config.rewhiten_fraction.is_some();
    let sampler = Whitened::new(inner, 8, config).unwrap();
    let mut mh =
        MetropolisHastings::new(&target, sampler, &[0.0; 8], chain_rng(seed, 0), Some(5_000))
            .unwrap();
    for _ in 0..5_000 {
        mh.step(&target);
    }
    let adapted = mh.proposal().clone();
    assert!(adapted.whitening().is_some(), "the pilot has ended");
    assert_eq!(adapted.rewhitened(), rewhitens, "seed {seed}: re-whitened");
    let states = final_states(&target, &adapted, 1_000, STEPS, seed);
    Reference::banana(&target).worst_z(&states, &z_iid)
}

fn assert_whitened_invariant<P: Proposal + Clone>(label: &str, inner: impl Fn() -> P) {
    assert_invariant_with(label, WhiteningConfig::default(), inner);
}

fn assert_invariant_with<P: Proposal + Clone>(
    label: &str,
    config: WhiteningConfig,
    inner: impl Fn() -> P,
) {
    for seed in 0..common::SEEDS {
        let score = whitened_banana_stationarity(inner(), config, seed);
        assert_verdict(&format!("whitened {label} seed {seed}"), score, true);
    }
}

#[test]
fn whitened_kamh_is_invariant_on_the_strongly_twisted_banana() {
    assert_whitened_invariant("kamh", || unit_scale_kamh(8));
}

#[test]
fn whitened_kmc_lite_is_invariant_on_the_strongly_twisted_banana() {
    assert_whitened_invariant("kmc lite", || unit_scale_kmc_lite(8));
}

#[test]
fn whitened_fkamh_is_invariant_on_the_strongly_twisted_banana() {
    // 100 random Fourier features of the Gaussian kernel of length-scale
    // √(2d) = 4, the median distance of N(0, I₈) points
    assert_whitened_invariant("fkamh", || {
        let mut rng = chain_rng(77, 0);
        let phi = RandomFourierFeatures::new(
            &Gaussian::new(4.0).unwrap(),
            8,
            100,
            Embedding::CosPhase,
            &mut rng,
        )
        .unwrap();
        FKamh::new(phi, FKamhConfig::scale_free(8)).unwrap()
    });
}

#[test]
fn whitened_pca_kameleon_is_invariant_on_the_strongly_twisted_banana() {
    assert_whitened_invariant("pca-kameleon", || {
        PcaKameleon::new(
            8,
            Gaussian::new(1.0).unwrap(),
            PcaKameleonConfig::scale_free(8),
        )
        .unwrap()
    });
}

/// The empirical covariance shrunk toward the pilot's (the identity in
/// whitened coordinates) with the weight of d² accepted moves.
const SHRUNK: MomentUpdate = MomentUpdate::Shrunk { prior_moves: None };

#[test]
fn whitened_am_with_shrunk_moments_is_invariant_on_the_strongly_twisted_banana() {
    // ν fixed at 2.38/√d, and learned toward 0.234 with steps 1/√t
    let learned =
        || RobbinsMonro::new(Scale::optimal_for(8), 0.234, StepSchedule::InverseSqrt).unwrap();
    for learn in [false, true] {
        assert_whitened_invariant(&format!("am (shrunk, ν learned: {learn})"), || {
            let config = AdaptiveMetropolisConfig::default()
                .with_moments(SHRUNK)
                .unwrap();
            let config = if learn {
                config.with_scale(Scale::Adaptive(learned())).unwrap()
            } else {
                config
            };
            AdaptiveMetropolis::new(8, config).unwrap()
        });
    }
}

#[test]
fn whitened_pca_am_with_shrunk_moments_is_invariant_on_the_strongly_twisted_banana() {
    assert_whitened_invariant("pca-am (shrunk)", || {
        let mut config = PrincipalComponentsConfig::default();
        config.moments = SHRUNK;
        PrincipalComponents::new(8, config).unwrap()
    });
}

#[test]
fn disabled_whitening_is_the_wrapped_sampler_step_for_step() {
    let (target, mean, _) = common::correlated_gaussian(4);
    let config = RunConfig::new(500, 1_000);
    let plain = run_chain(&target, unit_scale_kamh(4), &mean, config, 9).unwrap();
    let wrapped = Whitened::new(unit_scale_kamh(4), 4, WhiteningConfig::disabled()).unwrap();
    let wrapped = run_chain(&target, wrapped, &mean, config, 9).unwrap();
    assert_eq!(plain.samples, wrapped.samples);
}

#[test]
fn the_pilot_takes_its_share_of_the_adaptation_and_learns_the_covariance() {
    let (target, mean, cov) = tiny_gaussian();
    let sampler = whitened(unit_scale_kamh(4));
    let mut mh =
        MetropolisHastings::new(&target, sampler, &mean, chain_rng(4, 0), Some(4_000)).unwrap();
    assert!(mh.proposal().whitening().is_none());
    for _ in 0..2_000 {
        mh.step(&target);
    }
    let sampler = mh.proposal();
    assert_eq!(sampler.pilot_length(), 2_000);
    let (mu, l) = sampler.whitening().expect("the pilot has ended");
    // L Lᵀ estimates Σ from ~1 000 correlated pilot states: each variance
    // within a factor 2 (a scale error of √2 is harmless for the wrapped
    // sampler, which adapts its own scale), the mean within 3 sd
    for i in 0..4 {
        let var: f64 = (0..4).map(|k| l[i * 4 + k] * l[i * 4 + k]).sum();
        let ratio = var / cov[i * 4 + i];
        assert!((0.5..2.0).contains(&ratio), "var {i}: ratio {ratio}");
        let z = (mu[i] - mean[i]) / cov[i * 4 + i].sqrt();
        assert!(z.abs() < 3.0, "mean {i}: z {z}");
    }
}

/// A random walk that records the pilot states [`Whitened`] hands it.
struct PilotRecorder {
    walk: RandomWalk,
    received: Vec<Vec<f64>>,
}

impl Proposal for PilotRecorder {
    fn propose(
        &mut self,
        target: &dyn kameleon_samplers::Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn rand::Rng,
    ) -> f64 {
        self.walk.propose(target, current, proposed, rng)
    }

    fn observe(
        &mut self,
        outcome: &kameleon_samplers::StepOutcome<'_>,
        adapt: bool,
        rng: &mut dyn rand::Rng,
    ) {
        self.walk.observe(outcome, adapt, rng);
    }

    fn learn_from_pilot(&mut self, states: &[f64]) {
        self.received.push(states.to_vec());
    }

    fn learns_from_pilot(&self) -> bool {
        true
    }
}

#[test]
fn the_wrapped_proposal_learns_from_the_pilots_last_window() {
    // adaptation for 1 000 steps, the pilot for 500 in windows of 25, 50
    // and 100 steps, then the last stretched to step 500: steps 176 … 500,
    // 325 states, handed over once, in the map's coordinates
    // u = L⁻¹(x − μ), when the wrapped proposal starts
    let (target, mean, _) = tiny_gaussian();
    let recorder = PilotRecorder {
        walk: RandomWalk::new(4, RandomWalkConfig::default()).unwrap(),
        received: Vec::new(),
    };
    let mut mh = MetropolisHastings::new(
        &target,
        whitened(recorder),
        &mean,
        chain_rng(5, 0),
        Some(1_000),
    )
    .unwrap();
    let mut states = Vec::new();
    for _ in 0..500 {
        mh.step(&target);
        states.push(mh.position().to_vec());
    }
    assert!(mh.proposal().inner().received.is_empty());
    mh.step(&target);
    mh.step(&target);
    let received = &mh.proposal().inner().received;
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].len(), 325 * 4);
    let (mu, l) = mh.proposal().whitening().expect("the pilot has ended");
    for (row, x) in received[0].chunks_exact(4).zip(&states[175..]) {
        // L u = x − μ, L lower triangular: x back from u by hand
        for i in 0..4 {
            let back = mu[i] + (0..=i).map(|k| l[i * 4 + k] * row[k]).sum::<f64>();
            assert!(
                (back - x[i]).abs() <= 1e-12 * x[i].abs(),
                "{back} vs {}",
                x[i]
            );
        }
    }
}

#[test]
fn rewhitened_kmc_lite_is_invariant_on_the_strongly_twisted_banana() {
    // the map changes twice (steps 2 500 and 3 750), KMC lite's history and
    // surrogate follow it, all before adaptation stops at 5 000
    assert_invariant_with("kmc lite (re-whitened)", rewhitening(), || {
        unit_scale_kmc_lite(8)
    });
}

#[test]
fn rewhitened_kmc_finite_is_invariant_on_the_strongly_twisted_banana() {
    assert_invariant_with("kmc finite (re-whitened)", rewhitening(), || {
        unit_scale_kmc_finite(8)
    });
}

/// The whitened target's errors under the map (μ, L) for N(m, Σ): the
/// length of its mean, |L⁻¹(m − μ)|, and the Frobenius distance of its
/// covariance L⁻¹ Σ L⁻ᵀ from I.
fn map_errors(map: &(Vec<f64>, Vec<f64>), mean: &[f64], cov: &[f64]) -> (f64, f64) {
    let d = mean.len();
    let (mu, l) = map;
    let l = Mat::from_fn(d, d, |i, j| l[i * d + j]);
    let sigma = Mat::from_fn(d, d, |i, j| cov[i * d + j]);
    let offset = Mat::from_fn(d, 1, |i, _| mean[i] - mu[i]);
    let l_inv = faer::linalg::solvers::DenseSolveCore::inverse(&l.partial_piv_lu());
    let u = &l_inv * &offset;
    let w = &l_inv * &sigma * l_inv.transpose();
    let mean_error = (0..d).map(|i| u[(i, 0)].powi(2)).sum::<f64>().sqrt();
    let cov_error = (0..d * d)
        .map(|k| {
            let (i, j) = (k / d, k % d);
            (w[(i, j)] - if i == j { 1.0 } else { 0.0 }).powi(2)
        })
        .sum::<f64>()
        .sqrt();
    (mean_error, cov_error)
}

#[test]
fn the_map_re_estimated_from_kmc_states_is_closer_to_the_truth_than_the_pilots() {
    // correlated_gaussian(20) (sds 1–10.5, neighbour correlation 0.8),
    // started 3 sd out along every axis, adaptation over 2 000 steps: the
    // pilot's map at step 1 000, the re-estimate from KMC lite's states of
    // steps 1 250 … 1 500 at step 1 500.
    //
    // Tolerances. The re-estimate's errors are Monte Carlo errors of n_eff
    // effectively independent states: E|ū − mean|² = d/n_eff for the mean
    // (in whitened units), and for the covariance of n_eff Gaussian draws
    // E‖S − I‖²_F ≈ (d² + d)/n_eff, before the shrinkage (which pulls S
    // toward a multiple of I). KMC's 250 states hold n_eff ≥ 50
    // conservatively (acceptance ≳ 0.3, near-independent accepted
    // trajectories), so the re-estimate's mean error is held to
    // 3·√(d/50) = 1.9 and its covariance error to 3·√((d² + d)/50) = 8.7,
    // three times their expected size. The pilot, a random walk with ~d
    // accepted moves per effectively independent state, is compared on the
    // sum of both errors over the seeds (each seed's pair is noisy).
    let d = 20;
    let (target, mean, cov) = common::correlated_gaussian(d);
    let start: Vec<f64> = (0..d)
        .map(|i| mean[i] + 3.0 * cov[i * d + i].sqrt())
        .collect();
    let (mut pilot_total, mut rewhitened_total) = (0.0, 0.0);
    for seed in 0..common::SEEDS {
        let sampler = Whitened::new(unit_scale_kmc_lite(d), d, rewhitening()).unwrap();
        let mut mh =
            MetropolisHastings::new(&target, sampler, &start, chain_rng(seed, 0), Some(2_000))
                .unwrap();
        for _ in 0..1_000 {
            mh.step(&target);
        }
        let pilot = mh.proposal().whitening().expect("the pilot has ended");
        for _ in 0..500 {
            mh.step(&target);
        }
        assert!(mh.proposal().rewhitened(), "seed {seed}");
        let rewhitened = mh.proposal().whitening().unwrap();
        let (pilot_mean, pilot_cov) = map_errors(&pilot, &mean, &cov);
        let (mean_error, cov_error) = map_errors(&rewhitened, &mean, &cov);
        eprintln!(
            "seed {seed}: pilot {pilot_mean:.3} {pilot_cov:.3}, re-estimate {mean_error:.3} {cov_error:.3}"
        );
        let n_eff = 50.0;
        let mean_tolerance = 3.0 * (d as f64 / n_eff).sqrt();
        let cov_tolerance = 3.0 * (((d * d + d) as f64) / n_eff).sqrt();
        assert!(
            mean_error < mean_tolerance,
            "seed {seed}: mean error {mean_error}"
        );
        assert!(
            cov_error < cov_tolerance,
            "seed {seed}: covariance error {cov_error}"
        );
        pilot_total += pilot_mean + pilot_cov;
        rewhitened_total += mean_error + cov_error;
    }
    assert!(
        rewhitened_total < pilot_total,
        "re-estimates {rewhitened_total} vs pilots {pilot_total}"
    );
}

/// B (d × d) and c for a change of coordinates in d = 3: a well-conditioned
/// non-triangular B.
fn a_change() -> (Vec<f64>, Vec<f64>) {
    let b = vec![1.3, 0.2, -0.4, 0.1, 0.8, 0.3, -0.2, 0.5, 1.1];
    (b, vec![0.7, -1.2, 2.0])
}

/// B(u − c) by the definition, one entry at a time.
fn changed(u: &[f64], b: &[f64], c: &[f64]) -> Vec<f64> {
    let d = u.len();
    (0..d)
        .map(|i| (0..d).map(|j| b[i * d + j] * (u[j] - c[j])).sum())
        .collect()
}

#[test]
fn kmc_lite_rewrites_its_history_into_the_new_coordinates_and_refits() {
    let (target, mean, _) = common::correlated_gaussian(3);
    let mut mh = MetropolisHastings::new(
        &target,
        unit_scale_kmc_lite(3),
        &mean,
        chain_rng(5, 0),
        None,
    )
    .unwrap();
    for _ in 0..400 {
        mh.step(&target);
    }
    let mut kmc = mh.proposal().clone();
    let old = kmc.surrogate().history().points().to_vec();
    let refits = kmc.surrogate().refits();
    assert!(refits >= 1 && old.len() == 401 * 3);
    let (b, c) = a_change();
    let change = CoordinateChange::new(b.clone(), c.clone()).unwrap();
    assert!(kmc.change_coordinates(&change, &mut chain_rng(6, 0)));
    let new = kmc.surrogate().history().points();
    assert_eq!(new.len(), old.len());
    for (row, (was, is)) in old.chunks(3).zip(new.chunks(3)).enumerate() {
        let expected = changed(was, &b, &c);
        for k in 0..3 {
            assert!(
                (is[k] - expected[k]).abs() < 1e-12 * (1.0 + expected[k].abs()),
                "row {row}: {is:?} vs {expected:?}"
            );
        }
    }
    assert_eq!(kmc.surrogate().refits(), refits + 1, "refitted at once");
    // the refit's basis is a subsample of the rewritten history
    let basis = kmc.surrogate().model().basis();
    for i in 0..basis.nrows() {
        let point: Vec<f64> = (0..3).map(|k| basis[(i, k)]).collect();
        assert!(
            new.chunks(3).any(|p| p == point.as_slice()),
            "basis row {i}"
        );
    }
}

#[test]
fn kmc_finite_refits_on_its_states_in_the_new_coordinates() {
    // the surrogate after the change equals a batch fit on the chain's
    // states x₀ … x_T (all learned while adapting) rewritten by hand
    let (target, mean, _) = common::correlated_gaussian(3);
    let mut mh = MetropolisHastings::new(
        &target,
        unit_scale_kmc_finite(3),
        &mean,
        chain_rng(7, 0),
        None,
    )
    .unwrap();
    let mut states = mean.clone();
    for _ in 0..300 {
        mh.step(&target);
        states.extend_from_slice(mh.position());
    }
    let mut kmc = mh.proposal().clone();
    let (b, c) = a_change();
    let change = CoordinateChange::new(b.clone(), c.clone()).unwrap();
    assert!(kmc.change_coordinates(&change, &mut chain_rng(8, 0)));
    let rewritten: Vec<f64> = states.chunks(3).flat_map(|u| changed(u, &b, &c)).collect();
    let mut batch = unit_scale_kmc_finite(3).surrogate().model().clone();
    batch
        .fit(faer::MatRef::from_row_major_slice(&rewritten, 301, 3))
        .unwrap();
    let theta = kmc.surrogate().model().theta();
    let scale = batch.theta().iter().map(|t| t.abs()).fold(0.0, f64::max);
    for (k, (a, e)) in theta.iter().zip(batch.theta()).enumerate() {
        assert!((a - e).abs() < 1e-8 * scale, "θ[{k}]: {a} vs {e}");
    }
}

#[test]
fn kmc_finite_refuses_a_change_unless_it_keeps_its_points() {
    // without `keeping_points` the surrogate stores nothing it could refit
    // on, so it refuses and its fit stays as it was, bit for bit; one that
    // keeps them accepts once, then lets them go and refuses a second change
    let (target, mean, _) = common::correlated_gaussian(3);
    let (b, c) = a_change();
    let change = CoordinateChange::new(b, c).unwrap();
    let plain = {
        let mut rng = chain_rng(78, 0);
        let kernel = Gaussian::new(6f64.sqrt()).unwrap();
        let phi =
            RandomFourierFeatures::new(&kernel, 3, 100, Embedding::CosPhase, &mut rng).unwrap();
        let model = FiniteEstimator::new(phi, FiniteSurrogateConfig::SCALE_FREE_RIDGE).unwrap();
        let surrogate = FiniteSurrogate::new(model, FiniteSurrogateConfig::default()).unwrap();
        KmcFinite::new(surrogate, KmcConfig::scale_free()).unwrap()
    };
    for (keeps, kmc) in [(false, plain), (true, unit_scale_kmc_finite(3))] {
        let mut mh = MetropolisHastings::new(&target, kmc, &mean, chain_rng(7, 0), None).unwrap();
        for _ in 0..200 {
            mh.step(&target);
        }
        let mut kmc = mh.proposal().clone();
        let theta = kmc.surrogate().model().theta().to_vec();
        assert_eq!(kmc.change_coordinates(&change, &mut chain_rng(8, 0)), keeps);
        if !keeps {
            assert_eq!(kmc.surrogate().model().theta(), &theta[..]);
        }
        assert!(!kmc.change_coordinates(&change, &mut chain_rng(9, 0)));
    }
}

#[test]
fn a_proposal_that_refuses_the_change_keeps_the_pilots_map_bit_for_bit() {
    // KAMH and the random walk do not support a change of coordinates: with
    // re-whitening on they run exactly as with it off
    let (target, mean, _) = common::correlated_gaussian(4);
    let config = RunConfig::new(1_000, 500);
    let walk = || RandomWalk::new(4, RandomWalkConfig::default()).unwrap();
    for (label, on, off) in [
        (
            "kamh",
            run_chain(
                &target,
                Whitened::new(unit_scale_kamh(4), 4, rewhitening()).unwrap(),
                &mean,
                config,
                3,
            ),
            run_chain(&target, whitened(unit_scale_kamh(4)), &mean, config, 3),
        ),
        (
            "random walk",
            run_chain(
                &target,
                Whitened::new(walk(), 4, rewhitening()).unwrap(),
                &mean,
                config,
                3,
            ),
            run_chain(&target, whitened(walk()), &mean, config, 3),
        ),
    ] {
        let (on, off) = (on.unwrap(), off.unwrap());
        assert_eq!(on.samples, off.samples, "{label}");
    }
}

#[test]
fn the_rewhitening_fraction_must_follow_the_pilots() {
    for bad in [0.5, 0.3, 1.0, f64::NAN] {
        assert!(
            WhiteningConfig::default()
                .with_rewhiten_fraction(Some(bad))
                .is_err(),
            "{bad}"
        );
    }
}

/// A wrapped proposal built for another dimension is refused when the
/// wrapper is made: before, it failed to start only once the pilot ended,
/// and the wrapper then rejected every later step without a word.
#[test]
fn a_wrapped_proposal_of_another_dimension_is_refused() {
    for (inner_dim, dim) in [(2, 3), (3, 2)] {
        let inner = RandomWalk::new(inner_dim, RandomWalkConfig::default()).unwrap();
        assert_eq!(inner.state_dim(), Some(inner_dim));
        let result = Whitened::new(inner, dim, WhiteningConfig::default());
        assert!(
            matches!(
                result,
                Err(kameleon_samplers::SamplerError::DimensionMismatch { expected, got, .. })
                    if expected == dim && got == inner_dim
            ),
            "inner {inner_dim}, wrapper {dim}"
        );
        // the message says which two disagree
        let message = result.err().unwrap().to_string();
        assert_eq!(
            message,
            format!(
                "dimension mismatch: the inner sampler's dimension is {inner_dim}, \
                 the whitening's is {dim}"
            )
        );
    }
    let kamh = Whitened::new(unit_scale_kamh(3), 3, WhiteningConfig::default()).unwrap();
    assert_eq!(kamh.state_dim(), Some(3));
}
