//! Shared helpers for the statistical tests.
//!
//! Tolerance derivation. Every checked quantity is a chain average
//! f̄ = (1/n) Σ f(x_t) of some f (a coordinate, a centred product, a
//! quantile-region indicator). By the Markov-chain CLT,
//! f̄ ≈ N(E_π f, σ_f²/ESS_f), so its Monte Carlo standard error is
//! se_f = σ_f/√ESS_f, with σ_f the sample standard deviation of f(x_t) and
//! ESS_f the effective sample size of the series f(x_t) by Geyer's initial
//! monotone sequence estimator (kameleon-diagnostics). We require
//! |f̄ − E_π f| ≤ Z_TOL · se_f. With Z_TOL = 5 a correct sampler fails one
//! check with probability ≈ 6·10⁻⁷ under the normal approximation; the ESS
//! estimate's own error (tens of percent for chains with ESS in the
//! hundreds) shrinks the effective threshold to about 4σ, still negligible
//! over the few thousand checks of the suite. Tests use fixed seeds, so they
//! are deterministic; the broken-ratio tests show the same statistics flag a
//! wrong sampler by a wide margin.
#![allow(dead_code)]

use faer::{Mat, Side};
use kameleon_features::FeatureMap;
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, AdaptationStop, Bandwidth, Chain, FiniteSurrogate, FiniteSurrogateConfig,
    Gamma, Kamh, KamhConfig, KmcConfig, KmcFinite, Proposal, Refresh, RobbinsMonro, RunConfig,
    Scale, StepOutcome, StepSchedule, SubsampleConfig, Target, chain_rng, run_chain,
};
use kameleon_score_matching::FiniteEstimator;
use kameleon_targets::{Banana, GaussianMixture, QuantileRegions};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Standard errors allowed for a chain average.
pub const Z_TOL: f64 = 5.0;

/// |f̄ − expected| / se_f for the series f(x_t), and ESS_f.
pub fn z_and_ess(series: &[f64], expected: f64) -> (f64, f64) {
    let n = series.len() as f64;
    let mean = series.iter().sum::<f64>() / n;
    let var = series.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
    if var == 0.0 {
        let z = if mean == expected { 0.0 } else { f64::INFINITY };
        return (z, n);
    }
    let ess = kameleon_diagnostics::ess_geyer(series).expect("finite series of positive variance");
    ((mean - expected).abs() / (var / ess).sqrt(), ess)
}

/// The worst z-score of the chain's means and covariance entries against
/// the exact `mean` and `cov` (d × d row-major), and the smallest ESS among
/// the coordinates. The covariance entry (i, j) is the chain average of
/// (x_i − μ_i)(x_j − μ_j) with the exact μ.
pub fn worst_moment_z(chain: &Chain, mean: &[f64], cov: &[f64]) -> (f64, f64) {
    let (z, ess, _) = worst_moment_z_at(chain, mean, cov, &|_, _| true);
    (z, ess)
}

/// Like [`worst_moment_z`], checking only the covariance entries (i, j) with
/// `check_cov(i, j)`, and also returning which statistic was worst.
pub fn worst_moment_z_at(
    chain: &Chain,
    mean: &[f64],
    cov: &[f64],
    check_cov: &dyn Fn(usize, usize) -> bool,
) -> (f64, f64, String) {
    let mut which = String::new();
    let d = chain.dim;
    let mut worst: f64 = 0.0;
    let mut min_ess = f64::INFINITY;
    let column = |f: &dyn Fn(&[f64]) -> f64| -> Vec<f64> {
        (0..chain.len()).map(|t| f(chain.sample(t))).collect()
    };
    for i in 0..d {
        let (z, ess) = z_and_ess(&column(&|x| x[i]), mean[i]);
        if z > worst {
            worst = z;
            which = format!("mean {i}");
        }
        min_ess = min_ess.min(ess);
        for j in (0..=i).filter(|&j| check_cov(i, j)) {
            let (z, _) = z_and_ess(
                &column(&|x| (x[i] - mean[i]) * (x[j] - mean[j])),
                cov[i * d + j],
            );
            if z > worst {
                worst = z;
                which = format!("cov {i},{j}");
            }
        }
    }
    (worst, min_ess, which)
}

/// Σ_ij = s_i s_j ρ^|i−j| with s_i = 1 + i/2 and ρ = 0.8, mean m_i = i − 1.
pub fn correlated_gaussian(d: usize) -> (GaussianMixture, Vec<f64>, Vec<f64>) {
    let s: Vec<f64> = (0..d).map(|i| 1.0 + i as f64 / 2.0).collect();
    let cov: Vec<f64> = (0..d * d)
        .map(|k| {
            let (i, j) = (k / d, k % d);
            s[i] * s[j] * 0.8f64.powi((i as i32 - j as i32).abs())
        })
        .collect();
    let mean: Vec<f64> = (0..d).map(|i| i as f64 - 1.0).collect();
    let c = Mat::from_fn(d, d, |i, j| cov[i * d + j]);
    (GaussianMixture::gaussian(&mean, &c).unwrap(), mean, cov)
}

/// B(b, v) has mean 0 and a diagonal covariance: Var y₁ = v,
/// Var y₂ = b² Var(y₁²) + 1 = 2 b² v² + 1, the rest 1 (y₁ is symmetric, so
/// Cov(y₁, y₂) = b E[y₁³ − v y₁] = 0).
pub fn banana(d: usize) -> (Banana, Vec<f64>, Vec<f64>) {
    let (b, v) = (0.03, 100.0);
    let mut cov = vec![0.0; d * d];
    for i in 0..d {
        cov[i * d + i] = 1.0;
    }
    cov[0] = v;
    cov[d + 1] = 2.0 * b * b * v * v + 1.0;
    (Banana::new(d, b, v).unwrap(), vec![0.0; d], cov)
}

/// The worst coverage z-score over the levels q of the exact quantile regions.
pub fn worst_coverage_z(chain: &Chain, target: &Banana) -> f64 {
    [0.1, 0.5, 0.9]
        .iter()
        .map(|&q| {
            let threshold = target.region_threshold(q).unwrap();
            let inside: Vec<f64> = (0..chain.len())
                .map(|t| {
                    f64::from(u8::from(
                        target.region_statistic(chain.sample(t)) <= threshold,
                    ))
                })
                .collect();
            z_and_ess(&inside, q).0
        })
        .fold(0.0, f64::max)
}

// ------------------------------------------------------------------------
// Invariance checks shared by the kernel adaptive samplers' tests (KAMH,
// PCA-Kameleon, F-KAMH, cKAM): an exact reference per target, z-scores of
// any set of draws against it, and the broken-sampler wrapper.

/// A z-score of a series of f(x) values against E_π f: the chain CLT one
/// ([`z_chain`]), the iid one ([`z_iid`]) or a blocked one ([`z_blocks`]).
pub type ZScore<'a> = &'a dyn Fn(&[f64], f64) -> f64;

/// |f̄ − expected| / (sd/√ESS) with Geyer's ESS (the first value of [`z_and_ess`]).
pub fn z_chain(series: &[f64], expected: f64) -> f64 {
    z_and_ess(series, expected).0
}

/// |f̄ − expected| / (sd/√n) for independent draws.
pub fn z_iid(series: &[f64], expected: f64) -> f64 {
    let n = series.len() as f64;
    let mean = series.iter().sum::<f64>() / n;
    let var = series.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
    (mean - expected).abs() / (var / n).sqrt()
}

/// The chain z-score of the means of consecutive blocks of `block` values
/// (a trailing partial block is dropped). For cyclical samplers whose kept
/// states come in blocks (one per cycle) of strongly dependent states: the
/// block means form a stationary series of expectation E_π f, and Geyer's
/// ESS of that series absorbs the remaining dependence between blocks.
pub fn z_blocks(block: usize) -> impl Fn(&[f64], f64) -> f64 {
    move |series, expected| {
        let means: Vec<f64> = series
            .chunks_exact(block)
            .map(|b| b.iter().sum::<f64>() / block as f64)
            .collect();
        z_chain(&means, expected)
    }
}

/// Quantile levels whose exact regions are checked.
pub const LEVELS: [f64; 5] = [0.1, 0.3, 0.5, 0.7, 0.9];

/// x ↦ T(x), written into the second argument.
type Transform = Box<dyn Fn(&[f64], &mut [f64])>;
/// x ↦ s(x).
type Statistic = Box<dyn Fn(&[f64]) -> f64>;

/// An exact reference for draws of a target: a map T whose image T(x) has a
/// known mean and covariance under π, and a statistic s(x) with known
/// quantiles, so that the regions {s ≤ t_q} have mass q.
pub struct Reference {
    /// The dimension of x and of T(x).
    pub dim: usize,
    transform: Transform,
    mean: Vec<f64>,
    cov: Vec<f64>,
    statistic: Statistic,
    /// t_q for q in [`LEVELS`].
    thresholds: Vec<f64>,
}

impl Reference {
    /// The banana B(b, v) through its untwisting map
    /// T(y) = (y₁/√v, y₂ − b(y₁² − v), y₃, …), which is exactly N(0, I) under
    /// the target, and the regions ‖T(y)‖² ≤ χ²_d⁻¹(q). (The raw second
    /// moments of y₂ involve y₁⁴ and are too heavy-tailed for short chains.)
    pub fn banana(target: &Banana) -> Self {
        let d = target.dim();
        let (b, v) = (target.bananicity(), target.variance());
        let mut identity = vec![0.0; d * d];
        (0..d).for_each(|i| identity[i * d + i] = 1.0);
        let regions = target.clone();
        Self {
            dim: d,
            transform: Box::new(move |x, out| {
                out.copy_from_slice(x);
                out[0] = x[0] / v.sqrt();
                out[1] = x[1] - b * (x[0] * x[0] - v);
            }),
            mean: vec![0.0; d],
            cov: identity,
            statistic: Box::new(move |x| regions.region_statistic(x)),
            thresholds: LEVELS.iter().map(|&q| chi2_quantile(d, q)).collect(),
        }
    }

    /// N(mean, cov) (d even, cov d × d row-major): raw moments, and the
    /// Mahalanobis regions (x − μ)ᵀΣ⁻¹(x − μ) ≤ χ²_d⁻¹(q).
    pub fn gaussian(mean: &[f64], cov: &[f64]) -> Self {
        let d = mean.len();
        let c = Mat::<f64>::from_fn(d, d, |i, j| cov[i * d + j]);
        let l = c
            .llt(Side::Lower)
            .expect("positive definite")
            .L()
            .to_owned();
        let mu = mean.to_vec();
        Self {
            dim: d,
            transform: Box::new(|x, out| out.copy_from_slice(x)),
            mean: mean.to_vec(),
            cov: cov.to_vec(),
            statistic: Box::new(move |x| {
                // ‖L⁻¹(x − μ)‖² by forward substitution
                let mut w = vec![0.0; d];
                for i in 0..d {
                    let s: f64 = (0..i).map(|k| l[(i, k)] * w[k]).sum();
                    w[i] = (x[i] - mu[i] - s) / l[(i, i)];
                }
                w.iter().map(|v| v * v).sum()
            }),
            thresholds: LEVELS.iter().map(|&q| chi2_quantile(d, q)).collect(),
        }
    }

    /// The worst z-score (by `z`) of the draws (n × d row-major) over the
    /// means and covariance entries of T(x) (chain averages of
    /// (T_i − μ_i)(T_j − μ_j) with the exact μ) and the coverage of the
    /// regions of every level in [`LEVELS`], with the name of the worst
    /// statistic.
    pub fn worst_z(&self, samples: &[f64], z: ZScore<'_>) -> (f64, String) {
        let d = self.dim;
        let mut image = vec![0.0; samples.len()];
        for (x, t) in samples.chunks_exact(d).zip(image.chunks_exact_mut(d)) {
            (self.transform)(x, t);
        }
        let series =
            |f: &dyn Fn(&[f64]) -> f64| -> Vec<f64> { image.chunks_exact(d).map(f).collect() };
        let mut worst = (0.0, String::new());
        let mut record = |value: f64, name: String| {
            if value > worst.0 || value.is_nan() {
                worst = (value, name);
            }
        };
        for i in 0..d {
            record(z(&series(&|t| t[i]), self.mean[i]), format!("mean {i}"));
            for j in 0..=i {
                let centred = series(&|t| (t[i] - self.mean[i]) * (t[j] - self.mean[j]));
                record(z(&centred, self.cov[i * d + j]), format!("cov {i},{j}"));
            }
        }
        let stats: Vec<f64> = samples
            .chunks_exact(d)
            .map(|x| (self.statistic)(x))
            .collect();
        for (&q, &t) in LEVELS.iter().zip(&self.thresholds) {
            let inside: Vec<f64> = stats.iter().map(|&s| f64::from(u8::from(s <= t))).collect();
            record(z(&inside, q), format!("coverage {q}"));
        }
        worst
    }
}

/// χ²_d⁻¹(q) for even d, inverting the closed-form CDF
/// P(χ²_d ≤ t) = 1 − e^{−t/2} Σ_{j<d/2} (t/2)^j / j! by bisection.
pub fn chi2_quantile(d: usize, q: f64) -> f64 {
    assert!(d.is_multiple_of(2) && d > 0, "closed form for even d only");
    let cdf = |t: f64| {
        let (mut term, mut sum) = (1.0, 0.0);
        for j in 0..d / 2 {
            if j > 0 {
                term *= t / 2.0 / j as f64;
            }
            sum += term;
        }
        1.0 - (-t / 2.0).exp() * sum
    };
    let (mut lo, mut hi) = (0.0, 10.0 * d as f64 + 100.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid) < q {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Seeds of the invariance checks: 0..SEEDS.
pub const SEEDS: u64 = 3;

/// The invariance checks shared by the kernel samplers (KAMH,
/// PCA-Kameleon): a chain from the origin scored against an exact reference
/// with [`z_chain`].
#[derive(Debug, Clone, Copy)]
pub enum Invariance {
    /// The 8-d banana B(0.1, 100), 30 000 steps (5 000 burn-in), scored
    /// with [`Reference::banana`].
    Banana,
    /// [`correlated_gaussian`]`(4)`, 20 000 steps (3 000 burn-in), scored
    /// with [`Reference::gaussian`].
    Gaussian,
}

impl Invariance {
    /// The worst z-score (and its statistic) of a chain of `proposal`.
    pub fn score(self, proposal: impl Proposal, seed: u64) -> (f64, String) {
        match self {
            Self::Banana => {
                let target = Self::banana();
                let config = RunConfig::new(5_000, 30_000);
                let chain = run_chain(&target, proposal, &[0.0; 8], config, seed).unwrap();
                Reference::banana(&target).worst_z(&chain.samples, &z_chain)
            }
            Self::Gaussian => {
                let (target, mean, cov) = correlated_gaussian(4);
                let config = RunConfig::new(3_000, 20_000);
                let chain = run_chain(&target, proposal, &[0.0; 4], config, seed).unwrap();
                Reference::gaussian(&mean, &cov).worst_z(&chain.samples, &z_chain)
            }
        }
    }

    /// Asserts for every seed in 0..[`SEEDS`] that the chain of
    /// `proposal(seed)` passes, or, with the reverse density at the wrong
    /// point ([`ReverseAtCurrent`], `broken`), fails.
    pub fn assert<P: Proposal>(self, label: &str, proposal: impl Fn(u64) -> P, broken: bool) {
        for seed in 0..SEEDS {
            let score = if broken {
                self.score(ReverseAtCurrent(proposal(seed)), seed)
            } else {
                self.score(proposal(seed), seed)
            };
            let name = if broken { "broken " } else { "" };
            assert_verdict(
                &format!("{name}{label} {self:?} seed {seed}"),
                score,
                !broken,
            );
        }
    }

    /// The banana of [`Invariance::Banana`].
    pub fn banana() -> Banana {
        Banana::new(8, 0.1, 100.0).unwrap()
    }
}

/// A subsample of `subsample_size` points with a fixed γ and bandwidth, the
/// given refresh and no warm-up shrinkage.
pub fn subsample_config(subsample_size: usize, gamma: f64, refresh: Refresh) -> SubsampleConfig {
    SubsampleConfig::default()
        .with_subsample_size(subsample_size)
        .unwrap()
        .with_gamma(Gamma::Fixed(gamma))
        .unwrap()
        .with_refresh(refresh)
        .unwrap()
        .with_bandwidth(Bandwidth::Fixed)
        .unwrap()
        .with_warmup_scale(1.0)
        .unwrap()
}

/// ν learned by Robbins–Monro from √0.1 toward 0.234 with steps t^(−1/2).
pub fn adaptive_scale() -> Scale {
    Scale::Adaptive(RobbinsMonro::new(0.1f64.sqrt(), 0.234, StepSchedule::InverseSqrt).unwrap())
}

/// KAMH in 3 dimensions with z (n = 20) redrawn from the history with
/// probability t^(−1/2) while adapting, γ = 0.2, ℓ = 2, ν learned: it keeps
/// the chain's states.
pub fn history_kamh() -> Kamh<Gaussian> {
    let refresh = Refresh::Probability(AdaptProbability::Power { kappa: 0.5 });
    let config = KamhConfig::default()
        .with_subsample(subsample_config(20, 0.2, refresh))
        .unwrap()
        .with_scale(adaptive_scale())
        .unwrap();
    Kamh::new(3, Gaussian::new(2.0).unwrap(), config).unwrap()
}

/// A proposal whose Hastings correction is computed as if the reverse
/// density q(x_t | x*) used the proposal's shape at x_t instead of at x*
/// (the bug of several public implementations): forward and reverse
/// densities are then the same function of x* − x_t, and the correction is
/// 0. Non-finite corrections (the inner proposal's rejections) pass through.
#[derive(Clone)]
pub struct ReverseAtCurrent<P>(pub P);

impl<P: Proposal> Proposal for ReverseAtCurrent<P> {
    fn plan_adaptation(&mut self, adapt_until: Option<u64>) {
        self.0.plan_adaptation(adapt_until);
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
        let correction = self.0.propose(target, current, proposed, rng);
        if correction.is_finite() {
            0.0
        } else {
            correction
        }
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, rng: &mut dyn Rng) {
        self.0.observe(outcome, adapt, rng);
    }
}

/// Invariance by stationarity: `chains` chains started at exact draws of π
/// with the same frozen kernel (adaptation off). If the kernel leaves π
/// invariant, each chain's state after `steps` steps is again an exact draw
/// and the chains are independent, so the final states are iid π whatever
/// the mixing speed (check them with [`z_iid`]). Returns them (chains × d).
pub fn final_states<P: Proposal + Clone>(
    target: &dyn Target,
    proposal: &P,
    chains: u64,
    steps: u64,
    seed: u64,
) -> Vec<f64> {
    let d = target.dim();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x57a7);
    let mut x0 = vec![0.0; d];
    let mut out = Vec::with_capacity(chains as usize * d);
    let config = RunConfig::new(0, steps).adaptation(AdaptationStop::After(0));
    for r in 0..chains {
        target.sample_iid(&mut rng, &mut x0).unwrap();
        let chain = run_chain(target, proposal.clone(), &x0, config, seed * chains + r).unwrap();
        out.extend_from_slice(chain.sample(chain.len() - 1));
    }
    out
}

/// An n × d matrix of iid draws of `target` (an oracle subsample).
pub fn oracle_subsample(target: &dyn Target, n: usize, seed: u64) -> Mat<f64> {
    let d = target.dim();
    let mut rng = chain_rng(seed, 1);
    let mut z = Mat::<f64>::zeros(n, d);
    let mut x = vec![0.0; d];
    for i in 0..n {
        target.sample_iid(&mut rng, &mut x).unwrap();
        for j in 0..d {
            z[(i, j)] = x[j];
        }
    }
    z
}

/// Prints a worst z-score (from [`Reference::worst_z`]) and asserts that a
/// correct sampler passes (z < Z_TOL) and a broken one fails (z > Z_TOL).
pub fn assert_verdict(label: &str, (z, which): (f64, String), correct: bool) {
    eprintln!("{label}: worst z {z:.2} ({which})");
    if correct {
        assert!(z < Z_TOL, "{label}: z {z} ({which})");
    } else {
        assert!(
            z > Z_TOL,
            "{label}: the broken sampler passed, z {z} ({which})"
        );
    }
}

/// KMC finite on `features`, learning from every state once 30 are seen,
/// with ε ∈ [0.1, 0.3) and L ∈ {1, …, 5}.
pub fn kmc_finite<F: FeatureMap>(features: F) -> KmcFinite<F> {
    let model = FiniteEstimator::new(features, 1e-3).unwrap();
    KmcFinite::new(
        FiniteSurrogate::new(
            model,
            FiniteSurrogateConfig::default()
                .with_min_points(30)
                .unwrap(),
        )
        .unwrap(),
        KmcConfig::default()
            .with_step_size((0.1, 0.3))
            .unwrap()
            .with_steps((1, 5))
            .unwrap(),
    )
    .unwrap()
}
