//! KAMH leaves the target invariant: on the strongly twisted banana
//! B(0.1, 100) in d = 8 and on a correlated 4-d Gaussian, chains pass mean,
//! covariance and quantile-coverage checks over several seeds, and the same
//! sampler with the reverse density evaluated at the wrong point fails them.
//! PCA-Kameleon is checked the same way on the Gaussian.
//!
//! Tolerances. Every checked quantity is a chain average f̄ of some f (a
//! coordinate, a centred product, a quantile-region indicator). By the
//! Markov-chain CLT f̄ ≈ N(E_π f, Var_π f / ESS_f); we estimate ESS_f by
//! Geyer's initial monotone sequence (kameleon-diagnostics) on the series
//! f(x_t) itself and require |f̄ − E_π f| ≤ Z_TOL · sd(f)/√ESS_f. (The
//! batch-means helper of `tests/common` assumes the batch length √n exceeds
//! the autocorrelation time, which KAMH on the banana (ESS ≈ 10²–10³ in
//! 3·10⁴ steps) violates.) With Z_TOL = 5 a correct sampler fails one check
//! with probability ≈ 6·10⁻⁷ under the normal approximation; the generous 5
//! absorbs the noise of the ESS estimate. Seeds are fixed, so the tests are
//! deterministic.
//!
//! Banana moments: the raw second moments of y₂ involve y₁⁴ and are too
//! heavy-tailed for a short chain, so the covariance check is done on the
//! untwisted coordinates T(y) = (y₁/√v, y₂ − b(y₁² − v), y₃, …), which are
//! exactly N(0, I) under the target (their means and covariance are
//! checked), together with the coverage of the exact regions ‖T(y)‖² ≤ χ²₈⁻¹(q).

use faer::Mat;
use kameleon_diagnostics::ess_geyer;
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, Bandwidth, Chain, Gamma, Kamh, KamhConfig, PcaKameleon, PcaKameleonConfig,
    Proposal, Refresh, RobbinsMonro, RunConfig, Scale, StepOutcome, StepSchedule, SubsampleConfig,
    Target, chain_rng, run_chain,
};
use kameleon_targets::{Banana, GaussianMixture, QuantileRegions};
use rand::Rng;

const Z_TOL: f64 = 5.0;
const LEVELS: [f64; 5] = [0.1, 0.3, 0.5, 0.7, 0.9];
const SEEDS: u64 = 3;

/// A KAMH-type proposal whose Hastings correction is computed as if the
/// reverse density q(x_t | x*) used the proposal's shape at x_t instead of at
/// x* (the bug of the public R code): forward and reverse densities are then
/// the same function of x* − x_t, even in x* − x_t, and the correction is 0.
struct ReverseAtCurrent<P>(P);

impl<P: Proposal> Proposal for ReverseAtCurrent<P> {
    fn propose(
        &mut self,
        target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        self.0.propose(target, current, proposed, rng);
        0.0
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, rng: &mut dyn Rng) {
        self.0.observe(outcome, adapt, rng);
    }
}

/// |chain average − expected| in units of sd/√ESS.
fn z_score(series: &[f64], expected: f64) -> f64 {
    let n = series.len() as f64;
    let mean = series.iter().sum::<f64>() / n;
    let var = series.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let ess = ess_geyer(series).unwrap();
    (mean - expected).abs() / (var / ess).sqrt()
}

/// The worst z-score of the means of `f(x)` against `mean` and of the
/// covariance entries of `f(x)` (chain averages of (f_i − μ_i)(f_j − μ_j)
/// with the exact μ) against `cov` (k × k row-major).
fn worst_moment_z(chain: &Chain, f: impl Fn(&[f64], &mut [f64]), mean: &[f64], cov: &[f64]) -> f64 {
    let k = mean.len();
    let mut values = vec![0.0; chain.len() * k];
    for t in 0..chain.len() {
        f(chain.sample(t), &mut values[t * k..(t + 1) * k]);
    }
    let series =
        |g: &dyn Fn(&[f64]) -> f64| -> Vec<f64> { values.chunks_exact(k).map(g).collect() };
    let mut worst: f64 = 0.0;
    for i in 0..k {
        worst = worst.max(z_score(&series(&|v| v[i]), mean[i]));
        for j in 0..=i {
            let centred = series(&|v| (v[i] - mean[i]) * (v[j] - mean[j]));
            worst = worst.max(z_score(&centred, cov[i * k + j]));
        }
    }
    worst
}

/// The worst z-score of the fractions of states inside the regions
/// {s(x) ≤ t_q} of exact mass q, over `LEVELS`.
fn worst_coverage_z(
    chain: &Chain,
    statistic: impl Fn(&[f64]) -> f64,
    threshold: impl Fn(f64) -> f64,
) -> f64 {
    let stats: Vec<f64> = (0..chain.len())
        .map(|t| statistic(chain.sample(t)))
        .collect();
    LEVELS
        .iter()
        .map(|&q| {
            let t = threshold(q);
            let inside: Vec<f64> = stats.iter().map(|&s| f64::from(u8::from(s <= t))).collect();
            z_score(&inside, q)
        })
        .fold(0.0, f64::max)
}

fn adaptive_scale() -> Scale {
    Scale::Adaptive(RobbinsMonro::new(0.1f64.sqrt(), 0.234, StepSchedule::InverseSqrt).unwrap())
}

// ---------------------------------------------------------------- banana

const BANANA_N: usize = 300;

/// KAMH-LS with an oracle subsample of n iid banana draws (as the KMC
/// paper's KAMH baselines), frozen; ν adapted during burn-in.
fn banana_kamh(target: &Banana, seed: u64) -> Kamh<Gaussian> {
    let config = KamhConfig {
        subsample: SubsampleConfig {
            subsample_size: BANANA_N,
            gamma: Gamma::Fixed(0.2),
            refresh: Refresh::Never,
            bandwidth: Bandwidth::Fixed,
            warmup_scale: 1.0,
        },
        scale: adaptive_scale(),
    };
    let mut kamh = Kamh::new(8, Gaussian::new(15.0).unwrap(), config).unwrap();
    let mut rng = chain_rng(seed, 1);
    let mut z = Mat::<f64>::zeros(BANANA_N, 8);
    let mut x = [0.0; 8];
    for i in 0..BANANA_N {
        target.sample_iid(&mut rng, &mut x).unwrap();
        for j in 0..8 {
            z[(i, j)] = x[j];
        }
    }
    kamh.set_subsample(z.as_ref()).unwrap();
    kamh
}

/// The worst z-scores of a banana chain: moments of the untwisted T(y)
/// against N(0, I), and the coverage of the exact quantile regions
/// {‖T(y)‖² ≤ χ²₈⁻¹(q)}.
fn banana_scores(target: &Banana, proposal: impl Proposal, seed: u64) -> (f64, f64) {
    let chain = run_chain(
        target,
        proposal,
        &[0.0; 8],
        RunConfig::new(5_000, 30_000),
        seed,
    )
    .unwrap();
    let (b, v) = (target.bananicity(), target.variance());
    let mut identity = vec![0.0; 64];
    (0..8).for_each(|i| identity[i * 9] = 1.0);
    let untwisted = worst_moment_z(
        &chain,
        |x, out| {
            out.copy_from_slice(x);
            out[0] = x[0] / v.sqrt();
            out[1] = x[1] - b * (x[0] * x[0] - v);
        },
        &[0.0; 8],
        &identity,
    );
    let coverage = worst_coverage_z(
        &chain,
        |x| target.region_statistic(x),
        |q| target.region_threshold(q).unwrap(),
    );
    (untwisted, coverage)
}

#[test]
fn kamh_is_invariant_on_the_strongly_twisted_banana() {
    let target = Banana::new(8, 0.1, 100.0).unwrap();
    for seed in 0..SEEDS {
        let (moments, coverage) = banana_scores(&target, banana_kamh(&target, seed), seed);
        assert!(
            moments < Z_TOL && coverage < Z_TOL,
            "seed {seed}: moment z {moments}, coverage z {coverage}"
        );
    }
}

#[test]
fn kamh_with_the_reverse_density_at_the_wrong_point_fails_on_the_banana() {
    let target = Banana::new(8, 0.1, 100.0).unwrap();
    for seed in 0..SEEDS {
        let proposal = ReverseAtCurrent(banana_kamh(&target, seed));
        let (moments, coverage) = banana_scores(&target, proposal, seed);
        assert!(
            moments.max(coverage) > Z_TOL,
            "seed {seed}: the broken sampler passed (moment z {moments}, coverage z {coverage})"
        );
    }
}

// -------------------------------------------------------------- Gaussian

fn correlated_gaussian() -> (GaussianMixture, Vec<f64>, Vec<f64>) {
    let d = 4;
    let mean = vec![1.0, -1.0, 0.5, 2.0];
    let sd = [1.0, 3.0, 0.5, 2.0];
    let cov = Mat::<f64>::from_fn(d, d, |i, j| {
        0.9f64.powi((i as i32 - j as i32).abs()) * sd[i] * sd[j]
    });
    let flat = (0..d * d).map(|k| cov[(k / d, k % d)]).collect();
    (GaussianMixture::gaussian(&mean, &cov).unwrap(), mean, flat)
}

/// The χ²₄ quantile: P(χ²₄ ≤ t) = 1 − e^{−t/2}(1 + t/2), inverted by bisection.
fn chi2_4_quantile(q: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, 100.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if 1.0 - (-mid / 2.0f64).exp() * (1.0 + mid / 2.0) < q {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Full adaptive KAMH-LS: z from the chain history, redrawn with
/// probability t^(−1/2) during burn-in, ν by Robbins–Monro.
fn gaussian_kamh() -> Kamh<Gaussian> {
    let config = KamhConfig {
        subsample: SubsampleConfig {
            subsample_size: 100,
            gamma: Gamma::Fixed(0.2),
            refresh: Refresh::Probability(AdaptProbability::Power { kappa: 0.5 }),
            bandwidth: Bandwidth::Fixed,
            warmup_scale: 1.0,
        },
        scale: adaptive_scale(),
    };
    Kamh::new(4, Gaussian::new(3.0).unwrap(), config).unwrap()
}

fn gaussian_scores(proposal: impl Proposal, seed: u64) -> (f64, f64) {
    let (target, mean, cov) = correlated_gaussian();
    let chain = run_chain(
        &target,
        proposal,
        &[0.0; 4],
        RunConfig::new(3_000, 20_000),
        seed,
    )
    .unwrap();
    let moments = worst_moment_z(&chain, |x, out| out.copy_from_slice(x), &mean, &cov);
    // Mahalanobis distance² ~ χ²₄ under the target
    let cm = Mat::<f64>::from_fn(4, 4, |i, j| cov[i * 4 + j]);
    let llt = cm.llt(faer::Side::Lower).unwrap();
    let l = llt.L();
    let maha = |x: &[f64]| {
        let mut w = [0.0; 4];
        for i in 0..4 {
            let s: f64 = (0..i).map(|k| l[(i, k)] * w[k]).sum();
            w[i] = (x[i] - mean[i] - s) / l[(i, i)];
        }
        w.iter().map(|v| v * v).sum::<f64>()
    };
    let coverage = worst_coverage_z(&chain, maha, chi2_4_quantile);
    (moments, coverage)
}

#[test]
fn kamh_is_invariant_on_a_correlated_gaussian() {
    for seed in 0..SEEDS {
        let (moments, coverage) = gaussian_scores(gaussian_kamh(), seed);
        assert!(
            moments < Z_TOL && coverage < Z_TOL,
            "seed {seed}: moment z {moments}, coverage z {coverage}"
        );
    }
}

#[test]
fn kamh_with_the_reverse_density_at_the_wrong_point_fails_on_a_correlated_gaussian() {
    for seed in 0..SEEDS {
        let (moments, coverage) = gaussian_scores(ReverseAtCurrent(gaussian_kamh()), seed);
        assert!(
            moments.max(coverage) > Z_TOL,
            "seed {seed}: the broken sampler passed (moment z {moments}, coverage z {coverage})"
        );
    }
}

/// PCA-Kameleon with the same adaptation as `gaussian_kamh`, 3 directions,
/// one Robbins–Monro scale per direction.
fn gaussian_pca() -> PcaKameleon<Gaussian> {
    let config = PcaKameleonConfig {
        subsample: SubsampleConfig {
            subsample_size: 100,
            gamma: Gamma::Fixed(0.2),
            refresh: Refresh::Probability(AdaptProbability::Power { kappa: 0.5 }),
            bandwidth: Bandwidth::Fixed,
            warmup_scale: 1.0,
        },
        components: 3,
        scale: adaptive_scale(),
    };
    PcaKameleon::new(4, Gaussian::new(3.0).unwrap(), config).unwrap()
}

#[test]
fn pca_kameleon_is_invariant_on_a_correlated_gaussian() {
    for seed in 0..SEEDS {
        let (moments, coverage) = gaussian_scores(gaussian_pca(), seed);
        assert!(
            moments < Z_TOL && coverage < Z_TOL,
            "seed {seed}: moment z {moments}, coverage z {coverage}"
        );
    }
}

#[test]
fn pca_kameleon_with_the_reverse_density_at_the_wrong_point_fails() {
    for seed in 0..SEEDS {
        let (moments, coverage) = gaussian_scores(ReverseAtCurrent(gaussian_pca()), seed);
        assert!(
            moments.max(coverage) > Z_TOL,
            "seed {seed}: the broken sampler passed (moment z {moments}, coverage z {coverage})"
        );
    }
}
