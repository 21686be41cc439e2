//! What a grid cell runs: a target, a sampler with its settings, and the
//! per-chain metrics computed on its post-burn-in draws.

use crate::benchmark::{Reference, ReferenceKey};
use anyhow::{Context, Result, bail};
use faer::MatRef;
use kameleon_diagnostics::{
    MmdEstimator, PolynomialKernel, autocorrelation, column, ess_geyer_per_dim, mmd2_polynomial,
    quantile_coverage_errors,
};
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, AdaptationStop, AdaptiveMetropolis, Bandwidth, Chain, FKamh, FiniteSurrogate,
    Gamma, Habc, HabcConfig, Hmc, Kamh, KamhConfig, KmcFinite, KmcLite, LiteSurrogate, ProgressFn,
    Proposal, RandomWalk, Refresh, RobbinsMonro, Run, RunConfig, Scale, StepSchedule,
    SyntheticLikelihood, Target, chain_rng,
};
use kameleon_score_matching::{FiniteEstimator, LiteEstimator};
use kameleon_targets::{
    AbcSkewNormal, Banana, Flower, GpClassification, IsotropicGaussianPrior, PseudoMarginal,
    QuantileRegions, abc_skew_normal_posterior, glass_posterior,
};
use std::path::PathBuf;
use std::sync::Arc;

/// A target of the papers, by its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TargetSpec {
    /// The banana B(b, v) in `dim` dimensions.
    Banana {
        /// Dimension d.
        dim: usize,
        /// Bananicity b.
        b: f64,
        /// Variance v of the first coordinate.
        v: f64,
    },
    /// The flower F(r₀, A, ω, σ) in `dim` dimensions.
    Flower {
        /// Dimension d.
        dim: usize,
        /// Radius r₀.
        radius: f64,
        /// Amplitude A.
        amplitude: f64,
        /// Number of petals ω.
        petals: u32,
        /// Width σ.
        sigma: f64,
    },
    /// The pseudo-marginal posterior of the 9 GP-classification
    /// length-scales on UCI Glass (KAMH §5.1), each log-density an
    /// importance-sampling estimate with `n_importance` draws.
    GlassPosterior {
        /// Importance draws per estimate (the papers: 100).
        n_importance: usize,
    },
    /// The KMC paper's 10-d ABC posterior of a skew-normal location
    /// (`abc_skew_normal_posterior`).
    AbcSkewNormal,
}

/// The ABC target's θ_true = α = 10·1 (KMC §6), where its chains start.
pub const ABC_THETA_TRUE: f64 = 10.0;

impl TargetSpec {
    /// A file-system-safe key, e.g. `banana-b0.03-v100-d8`.
    pub fn key(&self) -> String {
        match *self {
            Self::Banana { dim, b, v } => format!("banana-b{b}-v{v}-d{dim}"),
            Self::Flower {
                dim,
                radius,
                amplitude,
                petals,
                sigma,
            } => format!("flower-r{radius}-a{amplitude}-w{petals}-s{sigma}-d{dim}"),
            Self::GlassPosterior { n_importance } => format!("glass-nimp{n_importance}"),
            Self::AbcSkewNormal => "abc-skew-normal-d10".into(),
        }
    }

    /// The paper's notation, e.g. `8-d B(0.03, 100)`.
    pub fn label(&self) -> String {
        match *self {
            Self::Banana { dim, b, v } => format!("{dim}-d B({b}, {v})"),
            Self::Flower {
                dim,
                radius,
                amplitude,
                petals,
                sigma,
            } => format!("{dim}-d F({radius}, {amplitude}, {petals}, {sigma})"),
            Self::GlassPosterior { n_importance } => {
                format!("GP Glass posterior (n_imp = {n_importance})")
            }
            Self::AbcSkewNormal => "10-d ABC skew-normal".into(),
        }
    }

    /// Constructs the target (without a reference sample).
    pub fn build(&self) -> Result<BuiltTarget> {
        Ok(match *self {
            Self::Banana { dim, b, v } => BuiltTarget::Banana(Banana::new(dim, b, v)?),
            Self::Flower {
                dim,
                radius,
                amplitude,
                petals,
                sigma,
            } => BuiltTarget::Flower(Flower::new(dim, radius, amplitude, petals, sigma)?),
            Self::GlassPosterior { n_importance } => BuiltTarget::Glass {
                posterior: glass_posterior(n_importance)?,
                reference: None,
            },
            Self::AbcSkewNormal => BuiltTarget::Abc {
                posterior: abc_skew_normal_posterior()?,
                reference: None,
            },
        })
    }

    /// Constructs the target with its reference sample when it needs one
    /// (targets without exact draws: loaded from, or computed once into,
    /// `env.out`; see [`crate::benchmark`]).
    pub fn prepare(&self, env: &RunEnv) -> Result<BuiltTarget> {
        let mut built = self.build()?;
        let key = match *self {
            Self::GlassPosterior { n_importance } => Some(ReferenceKey::Glass { n_importance }),
            Self::AbcSkewNormal => Some(ReferenceKey::Abc),
            Self::Banana { .. } | Self::Flower { .. } => None,
        };
        if let Some(key) = key {
            let loaded = crate::benchmark::load_or_compute(key, env)?;
            match &mut built {
                BuiltTarget::Glass { reference, .. } | BuiltTarget::Abc { reference, .. } => {
                    *reference = Some(loaded);
                }
                BuiltTarget::Banana(_) | BuiltTarget::Flower(_) => {}
            }
        }
        Ok(built)
    }

    /// The starting point of a chain: an exact draw where the target has
    /// them (from `rng`), θ = 0 on Glass (KAMH's start), θ_true = 10·1 on
    /// the ABC target (the KMC code's start).
    pub fn start(&self, built: &BuiltTarget, rng: &mut dyn rand::Rng) -> Result<Vec<f64>> {
        let target = built.target();
        let mut x0 = vec![0.0; target.dim()];
        match self {
            Self::Banana { .. } | Self::Flower { .. } => target.sample_iid(rng, &mut x0)?,
            Self::GlassPosterior { .. } => {}
            Self::AbcSkewNormal => x0.fill(ABC_THETA_TRUE),
        }
        Ok(x0)
    }
}

/// Where and at which size a run happens: what targets with a cached
/// reference sample need to find or compute it.
#[derive(Debug, Clone)]
pub struct RunEnv {
    /// The output root (`--out`); references live in `out/<reference>/`.
    pub out: PathBuf,
    /// `--quick`.
    pub quick: bool,
    /// The master seed.
    pub seed: u64,
}

/// A constructed target, keeping the concrete type for optional capabilities.
pub enum BuiltTarget {
    /// A banana.
    Banana(Banana),
    /// A flower or ring.
    Flower(Flower),
    /// The pseudo-marginal Glass posterior.
    Glass {
        /// The target.
        posterior: PseudoMarginal<GpClassification, IsotropicGaussianPrior>,
        /// The benchmark sample (long SM chains), once prepared.
        reference: Option<Arc<Reference>>,
    },
    /// The ABC skew-normal posterior.
    Abc {
        /// The target.
        posterior: PseudoMarginal<AbcSkewNormal, IsotropicGaussianPrior>,
        /// The ground-truth sample (long random-walk chains), once prepared.
        reference: Option<Arc<Reference>>,
    },
}

impl BuiltTarget {
    /// The target as the samplers see it.
    pub fn target(&self) -> &dyn Target {
        match self {
            Self::Banana(t) => t,
            Self::Flower(t) => t,
            Self::Glass { posterior, .. } => posterior,
            Self::Abc { posterior, .. } => posterior,
        }
    }

    /// Its exactly known quantile regions, if it has them.
    pub fn regions(&self) -> Option<&dyn QuantileRegions> {
        match self {
            Self::Banana(t) => Some(t),
            Self::Flower(t) => Some(t),
            Self::Glass { .. } | Self::Abc { .. } => None,
        }
    }

    /// Its reference sample, if it has one (prepared targets without exact draws).
    pub fn reference(&self) -> Option<&Reference> {
        match self {
            Self::Glass { reference, .. } | Self::Abc { reference, .. } => reference.as_deref(),
            Self::Banana(_) | Self::Flower(_) => None,
        }
    }

    fn require_reference(&self) -> Result<&Reference> {
        self.reference()
            .context("the target has no reference sample (it was not prepared)")
    }
}

/// A sampler with its settings, named as in the papers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SamplerSpec {
    /// Standard Metropolis N(x, ν²I), ν = 2.38/√d.
    Sm,
    /// Random walk N(x, ν²I) with ν learned toward acceptance 0.234 during
    /// burn-in (steps 1/√t, from 2.38/√d): the KMC paper's tuned RW.
    RwTuned,
    /// HMC on the true gradient, ε ~ U[ε₀, ε₁), L ~ U{L₀, …, L₁}.
    Hmc {
        /// Step-size range.
        step_size: (f64, f64),
        /// Leapfrog-step range.
        steps: (u32, u32),
    },
    /// KAMH on an oracle subsample of n exact target draws with hand-tuned
    /// ν and γ (the KMC paper's baseline).
    KamhOracle {
        /// Subsample size n.
        n: usize,
    },
    /// KMC finite (random features, m = n) with HMC's parameters.
    KmcFinite {
        /// Number of random features m (= n).
        m: usize,
        /// Step-size range.
        step_size: (f64, f64),
        /// Leapfrog-step range.
        steps: (u32, u32),
    },
    /// F-KAMH on D random Fourier features of a Gaussian kernel whose
    /// length-scale is the median distance of 1000 exact target draws
    /// (thesis §5), with γ and η learned toward 0.234 from η₀.
    FKamh {
        /// Number of features D.
        features: usize,
        /// The embedding (thesis eq. 2.4 or 2.5).
        embedding: Embedding,
        /// Exploration noise γ.
        gamma: f64,
        /// Initial η.
        eta: f64,
    },
    /// Adaptive Metropolis with fixed scale 2.38/√d (Haario et al. 2001).
    AmFs,
    /// Adaptive Metropolis with learned global scale (Andrieu & Thoms Alg. 4),
    /// step sizes 1/√t as in the KAMH code.
    AmLs,
    /// KAMH with learned scale: subsample size `n`, exploration γ.
    KamhLs {
        /// Subsample size n.
        n: usize,
        /// Isotropic exploration term γ.
        gamma: f64,
    },
    /// KMC lite (KMC §4.1): f̂ = Σ αᵢ exp(−‖zᵢ − x‖²/σ) on n basis points,
    /// momentum N(0, I), ε ~ U[ε₀, ε₁), L ~ U{L₀, …, L₁}.
    KmcLite {
        /// Basis size n.
        n: usize,
        /// The lite bandwidth σ of exp(−‖x − y‖²/σ).
        sigma: f64,
        /// The ridge λ.
        lambda: f64,
        /// Step-size range.
        step_size: (f64, f64),
        /// Leapfrog-step range.
        steps: (u32, u32),
        /// Where the basis comes from.
        basis: LiteBasis,
    },
    /// Isotropic random walk N(x, s²I) with a fixed s (the KMC ABC RW).
    RwFixed {
        /// The proposal standard deviation s.
        scale: f64,
    },
    /// Hamiltonian ABC (Meeds et al. 2015) on the KMC ABC target with
    /// `HabcConfig::kmc_paper` and a synthetic likelihood of 10 simulations,
    /// ε = 0.55 — no MH correction, biased by design.
    Habc,
    /// The inner sampler adapting at every step instead of during burn-in
    /// only (protocols without burn-in, KMC Fig. 4 left); same label.
    Adapting(&'static SamplerSpec),
}

/// Where KMC lite's basis points come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LiteBasis {
    /// n rows of the target's reference sample drawn per chain, fixed for
    /// the whole run (the public KMC code's Glass and ABC runs).
    Oracle,
    /// A subsample of the chain history, refitted with probability t^−κ
    /// (random-walk steps until the history holds n states; the KMC text).
    History {
        /// The exponent κ ∈ (0, 1] of the refit probability.
        kappa: f64,
    },
}

/// The KMC code's hand-tuned oracle-KAMH (ν², γ²) per subsample size on the
/// 8-d B(0.03, 100) (kamiltonian `mcmc_banana_target.py`): the entry with the
/// largest n not above the given one.
const KAMH_ORACLE_TUNING: [(usize, f64, f64); 7] = [
    (50, 2.0, 1.0),
    (100, 2.0, 1.0),
    (200, 1.0, 1.0),
    (500, 0.8, 0.5),
    (1000, 0.8, 0.1),
    (1500, 0.7, 0.1),
    (2000, 0.5, 0.1),
];

/// KMC finite's Gaussian kernel on the banana: the KMC code's `sigma = 0.46`
/// gives frequencies ω ~ N(0, γ² I) with γ = ½σ² (kamiltonian
/// `KMCRandomFeatsJob`), i.e. length-scale 1/γ ≈ 9.45; ridge λ = 10⁻⁶.
const KMC_FINITE_FREQUENCY_SCALE: f64 = 0.5 * 0.46 * 0.46;
const KMC_FINITE_LAMBDA: f64 = 1e-6;

impl SamplerSpec {
    /// The name used in the papers' figures (also the directory name).
    pub fn label(&self) -> &'static str {
        match self {
            Self::Sm => "SM",
            Self::RwTuned => "RW",
            Self::Hmc { .. } => "HMC",
            Self::KmcFinite { .. } => "KMC",
            Self::KamhOracle { .. } => "KAMH",
            Self::FKamh {
                embedding: Embedding::CosPhase,
                ..
            } => "F-KAMH-cos",
            Self::FKamh {
                embedding: Embedding::SinCos,
                ..
            } => "F-KAMH-sincos",
            Self::AmFs => "AM-FS",
            Self::AmLs => "AM-LS",
            Self::KamhLs { .. } => "KAMH-LS",
            Self::KmcLite { .. } => "KMC",
            Self::RwFixed { .. } => "RW",
            Self::Habc => "HABC",
            Self::Adapting(inner) => inner.label(),
        }
    }

    /// `None` when the sampler exists in `kameleon-samplers`, otherwise why
    /// the cell is pending.
    pub fn pending(&self) -> Option<&'static str> {
        match self {
            Self::Sm
            | Self::RwTuned
            | Self::Hmc { .. }
            | Self::FKamh { .. }
            | Self::KamhLs { .. }
            | Self::AmFs
            | Self::AmLs
            | Self::KmcFinite { .. }
            | Self::KamhOracle { .. }
            | Self::KmcLite { .. }
            | Self::RwFixed { .. }
            | Self::Habc => None,
            Self::Adapting(inner) => inner.pending(),
        }
    }

    /// Runs chain `chain` on a prepared target: [`SamplerSpec::run`], plus
    /// the samplers that need the target's reference sample (oracle KMC lite).
    pub fn run_on(
        &self,
        built: &BuiltTarget,
        x0: &[f64],
        config: RunConfig,
        seed: u64,
        chain: u64,
        progress: ProgressFn<'_>,
    ) -> Result<Chain> {
        let target = built.target();
        match *self {
            Self::KmcLite {
                n,
                sigma,
                lambda,
                step_size,
                steps,
                basis: LiteBasis::Oracle,
            } => {
                let reference = built.require_reference()?;
                let mut rng = chain_rng(seed ^ 0x0EAC_1E5A_u64, chain);
                let z = reference.random_rows(n, &mut rng)?;
                let d = target.dim();
                let surrogate = LiteSurrogate::new(
                    LiteEstimator::new(sigma, lambda)?,
                    d,
                    n,
                    AdaptProbability::Always,
                )?;
                let kmc = KmcLite::new(surrogate, step_size, steps)?
                    .with_oracle_points(MatRef::from_row_major_slice(&z, n, d))?;
                // The oracle basis stays fixed: no adaptation at all.
                let config = config.adaptation(AdaptationStop::After(0));
                run(target, kmc, x0, config, seed, chain, progress)
            }
            Self::Adapting(inner) => inner.run_on(
                built,
                x0,
                config.adaptation(AdaptationStop::Never),
                seed,
                chain,
                progress,
            ),
            _ => self.run(target, x0, config, seed, chain, progress),
        }
    }

    /// Runs chain `chain` of base `seed` from `x0`.
    pub fn run(
        &self,
        target: &dyn Target,
        x0: &[f64],
        config: RunConfig,
        seed: u64,
        chain: u64,
        progress: ProgressFn<'_>,
    ) -> Result<Chain> {
        let d = target.dim();
        match self {
            Self::Sm => run(
                target,
                RandomWalk::new(d)?,
                x0,
                config,
                seed,
                chain,
                progress,
            ),
            Self::AmFs => run(
                target,
                AdaptiveMetropolis::fixed_scale(d)?,
                x0,
                config,
                seed,
                chain,
                progress,
            ),
            Self::AmLs => run(
                target,
                AdaptiveMetropolis::learned_scale(d, StepSchedule::InverseSqrt)?,
                x0,
                config,
                seed,
                chain,
                progress,
            ),
            Self::RwTuned => {
                let scale =
                    RobbinsMonro::new(Scale::optimal_for(d), 0.234, StepSchedule::InverseSqrt)?;
                let proposal = RandomWalk::with_scale(d, Scale::Adaptive(scale))?;
                run(target, proposal, x0, config, seed, chain, progress)
            }
            Self::Hmc { step_size, steps } => run(
                target,
                Hmc::new(d, *step_size, *steps)?,
                x0,
                config,
                seed,
                chain,
                progress,
            ),
            Self::FKamh {
                features,
                embedding,
                gamma,
                eta,
            } => {
                let length_scale = median_distance_of_draws(target, seed, 1000)?;
                // Chain k's frequencies come from a stream of their own.
                let mut rng = chain_rng(seed ^ 0xF4A7_u64, chain);
                let phi = RandomFourierFeatures::new(
                    &Gaussian::new(length_scale)?,
                    d,
                    *features,
                    *embedding,
                    &mut rng,
                )?;
                let eta = RobbinsMonro::new(*eta, 0.234, StepSchedule::InverseSqrt)?;
                let proposal = FKamh::new(phi, *gamma, Scale::Adaptive(eta))?;
                run(target, proposal, x0, config, seed, chain, progress)
            }
            Self::KamhLs { n, gamma } => {
                let mut kamh = KamhConfig::paper(*n)?;
                kamh.subsample.gamma = Gamma::Fixed(*gamma);
                kamh.subsample.bandwidth = Bandwidth::MedianHeuristic {
                    max_points: (*n).min(KAMH_MEDIAN_POINTS),
                };
                // The median heuristic replaces this length-scale at the
                // first subsample.
                let proposal = Kamh::new(d, Gaussian::new(1.0)?, kamh)?;
                run(target, proposal, x0, config, seed, chain, progress)
            }
            Self::KamhOracle { n } => {
                let n = *n;
                let z = iid_draws(target, seed ^ 0x0A4C_u64, chain, n)?;
                let median_sq = median_squared_distance(&z, d);
                let (nu2, gamma2) = kamh_oracle_tuning(n);
                let mut kamh = KamhConfig::paper(n)?;
                kamh.subsample.gamma = Gamma::Fixed(gamma2.sqrt());
                kamh.subsample.refresh = Refresh::Never;
                kamh.subsample.bandwidth = Bandwidth::Fixed;
                // ν starts at the code's hand-tuned value and is learned
                // toward 0.234 during burn-in (the paper: "tuned to 23%").
                kamh.scale = Scale::Adaptive(RobbinsMonro::new(
                    nu2.sqrt(),
                    0.234,
                    StepSchedule::InverseSqrt,
                )?);
                // The KMC code's kernel exp(−‖x − y‖²/σ) with σ = ½·median
                // squared distance of the oracle points.
                let kernel = Gaussian::from_lite_sigma(0.5 * median_sq)?;
                let mut proposal = Kamh::new(d, kernel, kamh)?;
                proposal.set_subsample(MatRef::from_row_major_slice(&z, n, d))?;
                run(target, proposal, x0, config, seed, chain, progress)
            }
            Self::KmcFinite {
                m,
                step_size,
                steps,
            } => {
                let m = *m;
                let z = iid_draws(target, seed ^ 0x0F1E_u64, chain, m)?;
                let mut rng = chain_rng(seed ^ 0xF4A7_u64, chain);
                let phi = RandomFourierFeatures::new(
                    &Gaussian::new(1.0 / KMC_FINITE_FREQUENCY_SCALE)?,
                    d,
                    m,
                    Embedding::CosPhase,
                    &mut rng,
                )?;
                let surrogate =
                    FiniteSurrogate::new(FiniteEstimator::new(phi, KMC_FINITE_LAMBDA)?, m)?;
                let kmc = KmcFinite::new(surrogate, *step_size, *steps)?
                    .with_oracle_points(MatRef::from_row_major_slice(&z, m, d))?;
                // The oracle surrogate stays fixed, as in the KMC code.
                let config = config.adaptation(AdaptationStop::After(0));
                run(target, kmc, x0, config, seed, chain, progress)
            }
            Self::KmcLite {
                n,
                sigma,
                lambda,
                step_size,
                steps,
                basis: LiteBasis::History { kappa },
            } => {
                let surrogate = LiteSurrogate::new(
                    LiteEstimator::new(*sigma, *lambda)?,
                    d,
                    *n,
                    AdaptProbability::Power { kappa: *kappa },
                )?;
                let walk =
                    RobbinsMonro::new(Scale::optimal_for(d), 0.234, StepSchedule::InverseSqrt)?;
                let kmc = KmcLite::new(surrogate, *step_size, *steps)?
                    .with_walk_scale(Scale::Adaptive(walk))?;
                run(target, kmc, x0, config, seed, chain, progress)
            }
            Self::KmcLite {
                basis: LiteBasis::Oracle,
                ..
            } => bail!("oracle KMC lite needs the target's reference sample (use run_on)"),
            Self::RwFixed { scale } => run(
                target,
                RandomWalk::with_scale(d, Scale::fixed(*scale)?)?,
                x0,
                config,
                seed,
                chain,
                progress,
            ),
            Self::Habc => {
                let abc = AbcSkewNormal::kmc_paper()?;
                if abc.simulator().dim() != d {
                    bail!(
                        "HABC runs on the KMC ABC target only (d = {})",
                        abc.simulator().dim()
                    );
                }
                let epsilon = abc.epsilon();
                let likelihood = SyntheticLikelihood::new(abc, HABC_SIMULATIONS, epsilon)?;
                let prior = IsotropicGaussianPrior::new(ABC_PRIOR_VARIANCE)?;
                let mut habc = Habc::new(likelihood, prior, HabcConfig::kmc_paper())?;
                Ok(habc.run(x0, config, seed, chain)?)
            }
            Self::Adapting(inner) => inner.run(
                target,
                x0,
                config.adaptation(AdaptationStop::Never),
                seed,
                chain,
                progress,
            ),
        }
    }
}

/// HABC's simulations per synthetic-likelihood estimate (the KMC code: 10).
const HABC_SIMULATIONS: usize = 10;
/// The ABC prior N(0, 5² I).
const ABC_PRIOR_VARIANCE: f64 = 25.0;

/// The oracle-KAMH (ν², γ²) for subsample size n ([`KAMH_ORACLE_TUNING`]).
fn kamh_oracle_tuning(n: usize) -> (f64, f64) {
    let (_, nu2, gamma2) = KAMH_ORACLE_TUNING
        .iter()
        .rev()
        .find(|(size, _, _)| *size <= n)
        .unwrap_or(&KAMH_ORACLE_TUNING[0]);
    (*nu2, *gamma2)
}

/// `n` exact draws from the target (row-major), from chain `chain`'s own
/// stream of `seed`.
fn iid_draws(target: &dyn Target, seed: u64, chain: u64, n: usize) -> Result<Vec<f64>> {
    let d = target.dim();
    let mut rng = chain_rng(seed, chain);
    let mut draws = vec![0.0; n * d];
    for x in draws.chunks_exact_mut(d) {
        target.sample_iid(&mut rng, x)?;
    }
    Ok(draws)
}

/// The median of the squared pairwise distances of the rows (upper median).
fn median_squared_distance(points: &[f64], d: usize) -> f64 {
    let rows: Vec<&[f64]> = points.chunks_exact(d).collect();
    let mut squared = Vec::with_capacity(rows.len() * rows.len().saturating_sub(1) / 2);
    for i in 0..rows.len() {
        for j in 0..i {
            squared.push(
                rows[i]
                    .iter()
                    .zip(rows[j])
                    .map(|(a, b)| (a - b).powi(2))
                    .sum::<f64>(),
            );
        }
    }
    if squared.is_empty() {
        return 1.0;
    }
    let mid = squared.len() / 2;
    let (_, median, _) = squared.select_nth_unstable_by(mid, f64::total_cmp);
    *median
}

/// The median pairwise distance of `n` exact draws from the target (one
/// stream per cell seed, so every chain of a cell gets the same value).
fn median_distance_of_draws(target: &dyn Target, seed: u64, n: usize) -> Result<f64> {
    let draws = iid_draws(target, seed ^ 0x003E_D1A4_u64, 0, n)?;
    Ok(median_squared_distance(&draws, target.dim()).sqrt())
}

fn run<P: Proposal>(
    target: &dyn Target,
    proposal: P,
    x0: &[f64],
    config: RunConfig,
    seed: u64,
    chain: u64,
    progress: ProgressFn<'_>,
) -> Result<Chain> {
    Ok(Run::new(target, proposal, x0, config, seed, chain)?.finish(target, Some(progress)))
}

/// KAMH's median heuristic uses at most this many points of each new
/// subsample (itself a random draw from the history): the median of their
/// 4950 pairwise distances, recomputed at every adapting step. Over all
/// n = 1000 points (the paper) that median costs O(n²d) per step and
/// dominates the run (perf, quick kamh-banana: ~75% of the time already at
/// 200 points).
pub const KAMH_MEDIAN_POINTS: usize = 100;

/// The quantile levels of the KAMH coverage metric.
pub const QUANTILE_LEVELS: [f64; 9] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];

/// A per-chain metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// `accept`: the post-burn-in acceptance rate.
    Acceptance,
    /// `mean_norm`: ‖mean of the post-burn-in draws − exact mean‖₂.
    MeanNorm,
    /// `q0.1` … `q0.9`: |fraction inside the exact q-region − q|, and
    /// `q_avg`, their average over the nine levels (KMC's summary).
    QuantileErrors,
    /// `ess_min`: the smallest per-dimension Geyer ESS, and `ess_min_per_s`
    /// per second of sampling (burn-in included).
    MinEss,
    /// `ess_12`: the mean Geyer ESS of the first two dimensions (the F-KAMH
    /// thesis' measure), and `ess_12_per_s` per second of sampling.
    EssFirstTwo,
    /// Against the target's reference sample, on the recorded chain thinned
    /// by `thin` (every `thin`-th draw): the curves `mmd2` (squared MMD,
    /// polynomial kernel (1 + ⟨x, y⟩)³ of the papers' text) and `mean_norm`
    /// (‖mean − reference mean‖) on `checkpoints` evenly spaced prefixes,
    /// x = recorded iterations; and the scalar `mmd2` of the whole chain.
    BenchmarkTrace {
        /// Number of prefixes.
        checkpoints: usize,
        /// Thinning before the MMD.
        thin: usize,
        /// Unbiased (KAMH's code) or biased (KMC's code) MMD².
        estimator: MmdEstimator,
    },
    /// The curve `acf`: the autocorrelation at lags 0…`max_lag`, averaged
    /// over dimensions (a dimension that never moved counts as 1).
    Autocorrelation {
        /// The largest lag.
        max_lag: usize,
    },
    /// The marginal of coordinate `dim` (0-based; named θ_{dim+1}) against
    /// the reference sample: the curve `theta{k}_density` (a histogram with
    /// `bins` bins over the reference's range), the scalars `theta{k}_mean`
    /// and `theta{k}_ks` (Kolmogorov–Smirnov distance to the reference's
    /// marginal).
    Marginal {
        /// The coordinate.
        dim: usize,
        /// Histogram bins.
        bins: usize,
    },
}

/// A metric's curve for one chain: y at x (checkpoints, lags, bin centres).
pub type Curve = crate::summary::Trace;

impl Metric {
    /// Computes this metric family on a chain, as (name, value) pairs.
    pub fn compute(&self, chain: &Chain, target: &BuiltTarget) -> Result<Vec<(String, f64)>> {
        let d = chain.dim;
        if chain.is_empty() {
            bail!("the chain recorded no post-burn-in draws");
        }
        Ok(match self {
            Self::Acceptance => {
                let accepted = chain.accepted.iter().filter(|&&a| a).count();
                vec![("accept".into(), accepted as f64 / chain.len() as f64)]
            }
            Self::MeanNorm => {
                let mut exact = vec![0.0; d];
                if target.target().exact_mean(&mut exact).is_err() {
                    exact.copy_from_slice(&target.require_reference()?.mean);
                }
                vec![("mean_norm".into(), distance(&chain.mean(), &exact))]
            }
            Self::QuantileErrors => {
                let Some(regions) = target.regions() else {
                    bail!("the target has no exact quantile regions");
                };
                let statistic: Vec<f64> = chain
                    .samples
                    .chunks_exact(d)
                    .map(|x| regions.region_statistic(x))
                    .collect();
                let thresholds = QUANTILE_LEVELS
                    .iter()
                    .map(|&q| regions.region_threshold(q))
                    .collect::<Result<Vec<_>, _>>()?;
                let errors = quantile_coverage_errors(&statistic, &thresholds, &QUANTILE_LEVELS)?;
                let avg = errors.iter().sum::<f64>() / errors.len() as f64;
                let mut out: Vec<(String, f64)> = QUANTILE_LEVELS
                    .iter()
                    .zip(errors)
                    .map(|(q, e)| (quantile_metric_name(*q), e))
                    .collect();
                out.push(("q_avg".into(), avg));
                out
            }
            Self::MinEss => {
                let ess = ess_geyer_per_dim(&chain.samples, d)?;
                let min = ess.iter().copied().fold(f64::INFINITY, f64::min);
                vec![
                    ("ess_min".into(), min),
                    ("ess_min_per_s".into(), min / chain.wall_time_secs.max(1e-9)),
                ]
            }
            Self::EssFirstTwo => {
                if d < 2 {
                    bail!("ess_12 needs at least two dimensions");
                }
                let ess = ess_geyer_per_dim(&chain.samples, d)?;
                let mean = 0.5 * (ess[0] + ess[1]);
                vec![
                    ("ess_12".into(), mean),
                    ("ess_12_per_s".into(), mean / chain.wall_time_secs.max(1e-9)),
                ]
            }
            Self::BenchmarkTrace {
                thin, estimator, ..
            } => {
                let reference = target.require_reference()?;
                let thinned = thinned_rows(&chain.samples, d, *thin);
                let kernel = PolynomialKernel::paper();
                let mmd = mmd2_polynomial(&thinned, &reference.samples, d, &kernel, *estimator)?;
                vec![("mmd2".into(), mmd)]
            }
            Self::Autocorrelation { .. } => Vec::new(),
            Self::Marginal { dim, .. } => {
                let reference = target.require_reference()?;
                let ours = column(&chain.samples, d, *dim)?;
                let theirs = column(&reference.samples, d, *dim)?;
                let mean = ours.iter().sum::<f64>() / ours.len() as f64;
                let k = dim + 1;
                vec![
                    (format!("theta{k}_mean"), mean),
                    (format!("theta{k}_ks"), ks_distance(&ours, &theirs)),
                ]
            }
        })
    }

    /// Computes this metric family's curves on a chain (empty for scalar
    /// metrics), as (name, curve) pairs.
    pub fn compute_curves(
        &self,
        chain: &Chain,
        target: &BuiltTarget,
    ) -> Result<Vec<(String, Curve)>> {
        let d = chain.dim;
        if chain.is_empty() {
            bail!("the chain recorded no post-burn-in draws");
        }
        Ok(match self {
            Self::Acceptance
            | Self::MeanNorm
            | Self::QuantileErrors
            | Self::MinEss
            | Self::EssFirstTwo => Vec::new(),
            Self::BenchmarkTrace {
                checkpoints,
                thin,
                estimator,
            } => {
                let reference = target.require_reference()?;
                let thinned = thinned_rows(&chain.samples, d, *thin);
                let rows = thinned.len() / d;
                let kernel = PolynomialKernel::paper();
                let mut mmd = Curve::default();
                let mut norm = Curve::default();
                for c in 1..=*checkpoints {
                    let prefix = (c * rows).div_ceil(*checkpoints).clamp(2.min(rows), rows);
                    let part = &thinned[..prefix * d];
                    let x = (prefix * thin) as f64;
                    let value = mmd2_polynomial(part, &reference.samples, d, &kernel, *estimator)?;
                    mmd.push(x, value);
                    norm.push(x, distance(&row_mean(part, d), &reference.mean));
                }
                vec![("mmd2".into(), mmd), ("mean_norm".into(), norm)]
            }
            Self::Autocorrelation { max_lag } => {
                let lags = (*max_lag).min(chain.len().saturating_sub(1));
                let mut acf = vec![0.0; lags + 1];
                for j in 0..d {
                    let x = column(&chain.samples, d, j)?;
                    match autocorrelation(&x, lags) {
                        Ok(rho) => acf.iter_mut().zip(rho).for_each(|(a, r)| *a += r),
                        // A coordinate that never moved is perfectly correlated.
                        Err(_) => acf.iter_mut().for_each(|a| *a += 1.0),
                    }
                }
                let mut curve = Curve::default();
                for (lag, a) in acf.into_iter().enumerate() {
                    curve.push(lag as f64, a / d as f64);
                }
                vec![("acf".into(), curve)]
            }
            Self::Marginal { dim, bins } => {
                let reference = target.require_reference()?;
                let ours = column(&chain.samples, d, *dim)?;
                let (lo, hi) = reference.range(*dim)?;
                let curve = histogram_density(&ours, lo, hi, *bins);
                vec![(format!("theta{}_density", dim + 1), curve)]
            }
        })
    }
}

/// Euclidean distance.
fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// The mean of the rows of a row-major n × d sample.
fn row_mean(samples: &[f64], d: usize) -> Vec<f64> {
    let mut mean = vec![0.0; d];
    let n = samples.len() / d;
    for x in samples.chunks_exact(d) {
        mean.iter_mut().zip(x).for_each(|(m, v)| *m += v);
    }
    mean.iter_mut().for_each(|m| *m /= n.max(1) as f64);
    mean
}

/// Rows thin−1, 2·thin−1, … (the last of each block of `thin`), or all rows
/// if the chain is shorter than two blocks.
fn thinned_rows(samples: &[f64], d: usize, thin: usize) -> Vec<f64> {
    let rows = samples.len() / d;
    if thin <= 1 || rows < 2 * thin {
        return samples.to_vec();
    }
    samples
        .chunks_exact(d)
        .skip(thin - 1)
        .step_by(thin)
        .flatten()
        .copied()
        .collect()
}

/// The Kolmogorov–Smirnov distance sup_t |F_a(t) − F_b(t)| of two samples'
/// empirical distribution functions.
pub fn ks_distance(a: &[f64], b: &[f64]) -> f64 {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (n, m) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut sup) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        // Step past every copy of the smaller value in both samples, so ties
        // are compared after both jumps.
        let t = a[i].min(b[j]);
        while i < a.len() && a[i] <= t {
            i += 1;
        }
        while j < b.len() && b[j] <= t {
            j += 1;
        }
        sup = sup.max((i as f64 / n - j as f64 / m).abs());
    }
    sup
}

/// A histogram of `x` on `bins` equal bins over [lo, hi] as a density
/// (count / (n · width); draws outside the range are counted in n only).
fn histogram_density(x: &[f64], lo: f64, hi: f64, bins: usize) -> Curve {
    let width = (hi - lo) / bins as f64;
    let mut counts = vec![0usize; bins];
    for &v in x {
        if v >= lo && v <= hi {
            let b = (((v - lo) / width) as usize).min(bins - 1);
            counts[b] += 1;
        }
    }
    let mut curve = Curve::default();
    for (b, c) in counts.into_iter().enumerate() {
        curve.push(
            lo + (b as f64 + 0.5) * width,
            c as f64 / (x.len() as f64 * width),
        );
    }
    curve
}

/// The metric name of the coverage error at level `q`, e.g. `q0.3`.
pub fn quantile_metric_name(q: f64) -> String {
    format!("q{q}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kameleon_samplers::{AdaptationSummary, RunConfig};

    fn chain_from(samples: Vec<f64>, dim: usize, accepted: Vec<bool>) -> Chain {
        let n = accepted.len();
        Chain {
            dim,
            samples,
            accepted,
            log_densities: vec![0.0; n],
            wall_time_secs: 2.0,
            adaptation: AdaptationSummary::default(),
            seed: 0,
            chain_index: 0,
            config: RunConfig::new(0, n as u64),
            accepted_total: 0,
            rejected_non_finite: 0,
            covariance_jitters: 0,
        }
    }

    /// Metrics against hand computations on a tiny 2-d banana chain.
    #[test]
    fn metrics_match_direct_computations() {
        let spec = TargetSpec::Banana {
            dim: 2,
            b: 0.1,
            v: 1.0,
        };
        let target = spec.build().unwrap();
        let BuiltTarget::Banana(banana) = &target else {
            unreachable!()
        };
        // Four draws: mean (0.5, 1.0) → norm √1.25.
        let samples = vec![0.0, 0.0, 1.0, 2.0, 0.0, 2.0, 1.0, 0.0];
        let chain = chain_from(samples.clone(), 2, vec![true, false, true, true]);
        let acc = Metric::Acceptance.compute(&chain, &target).unwrap();
        assert_eq!(acc, vec![("accept".to_string(), 0.75)]);
        let norm = Metric::MeanNorm.compute(&chain, &target).unwrap();
        assert!((norm[0].1 - 1.25f64.sqrt()).abs() < 1e-15);
        let q = Metric::QuantileErrors.compute(&chain, &target).unwrap();
        assert_eq!(q.len(), 10);
        let mut sum = 0.0;
        for (level, (name, err)) in QUANTILE_LEVELS.iter().zip(&q) {
            let inside = samples
                .chunks_exact(2)
                .filter(|x| banana.in_region(x, *level).unwrap())
                .count() as f64;
            assert_eq!(name, &quantile_metric_name(*level));
            assert!((err - (inside / 4.0 - level).abs()).abs() < 1e-15);
            sum += err;
        }
        assert!((q[9].1 - sum / 9.0).abs() < 1e-15);
    }

    #[test]
    fn min_ess_is_the_smallest_dimension_and_scaled_by_time() {
        let target = TargetSpec::Banana {
            dim: 2,
            b: 0.03,
            v: 100.0,
        }
        .build()
        .unwrap();
        // Dimension 0 alternates (antithetic, large ESS); dimension 1 is a
        // slow ramp (tiny ESS), so the minimum is dimension 1's Geyer ESS.
        let n = 200;
        let mut samples = Vec::with_capacity(2 * n);
        for t in 0..n {
            samples.push(if t % 2 == 0 { 1.0 } else { -1.0 });
            samples.push(t as f64);
        }
        let chain = chain_from(samples.clone(), 2, vec![true; n]);
        let out = Metric::MinEss.compute(&chain, &target).unwrap();
        let per_dim = ess_geyer_per_dim(&samples, 2).unwrap();
        assert_eq!(out[0].1, per_dim[0].min(per_dim[1]));
        assert_eq!(out[1].1, out[0].1 / 2.0);
        let two = Metric::EssFirstTwo.compute(&chain, &target).unwrap();
        assert_eq!(two[0].1, 0.5 * (per_dim[0] + per_dim[1]));
        assert_eq!(two[1].1, two[0].1 / 2.0);
    }

    /// The median distance against a brute-force sort, on a target whose
    /// draws we can reproduce.
    #[test]
    fn median_distance_matches_a_sorted_brute_force() {
        let target = TargetSpec::Banana {
            dim: 3,
            b: 0.1,
            v: 4.0,
        }
        .build()
        .unwrap();
        let t = target.target();
        let n = 41;
        let got = median_distance_of_draws(t, 5, n).unwrap();
        let mut rng = chain_rng(5 ^ 0x003E_D1A4_u64, 0);
        let draws: Vec<Vec<f64>> = (0..n)
            .map(|_| {
                let mut x = vec![0.0; 3];
                t.sample_iid(&mut rng, &mut x).unwrap();
                x
            })
            .collect();
        let mut all = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                let s: f64 = (0..3).map(|k| (draws[i][k] - draws[j][k]).powi(2)).sum();
                all.push(s.sqrt());
            }
        }
        all.sort_by(f64::total_cmp);
        // 820 distances: the upper median, index 410.
        assert_eq!(got, all[all.len() / 2]);
    }

    /// The KS distance against a brute-force sup over all sample points
    /// (the sup of |F_a − F_b| is attained at a data point, right-continuous).
    #[test]
    fn ks_distance_matches_brute_force() {
        let a = [0.3, -1.0, 2.0, 0.3, 5.0, 1.1];
        let b = [0.3, 0.7, -2.0, 4.0];
        let cdf = |s: &[f64], t: f64| s.iter().filter(|&&v| v <= t).count() as f64 / s.len() as f64;
        let brute = a
            .iter()
            .chain(&b)
            .map(|&t| (cdf(&a, t) - cdf(&b, t)).abs())
            .fold(0.0, f64::max);
        assert_eq!(ks_distance(&a, &b), brute);
        assert_eq!(ks_distance(&a, &a), 0.0);
        assert_eq!(ks_distance(&[0.0, 1.0], &[5.0, 6.0]), 1.0);
    }

    #[test]
    fn histogram_density_counts_and_normalises() {
        let x = [0.1, 0.2, 0.6, 0.99, 1.0, -3.0, 7.0];
        let h = histogram_density(&x, 0.0, 1.0, 2);
        assert_eq!(h.x, vec![0.25, 0.75]);
        // Bins [0, .5): 2 draws; [.5, 1]: 3 (1.0 goes to the last bin);
        // density = count / (7 · 0.5).
        assert_eq!(h.y, vec![2.0 / 3.5, 3.0 / 3.5]);
    }

    #[test]
    fn thinning_keeps_the_last_row_of_each_block() {
        let samples: Vec<f64> = (0..10).map(f64::from).collect(); // 5 rows × 2
        assert_eq!(thinned_rows(&samples, 2, 2), vec![2.0, 3.0, 6.0, 7.0]);
        assert_eq!(thinned_rows(&samples, 2, 1), samples);
        // Shorter than two blocks: everything.
        assert_eq!(thinned_rows(&samples, 2, 3), samples);
    }

    #[test]
    fn oracle_kamh_tuning_follows_the_code_table() {
        assert_eq!(kamh_oracle_tuning(1000), (0.8, 0.1));
        assert_eq!(kamh_oracle_tuning(1200), (0.8, 0.1));
        assert_eq!(kamh_oracle_tuning(2000), (0.5, 0.1));
        assert_eq!(kamh_oracle_tuning(10), (2.0, 1.0));
    }

    fn reference_target(samples: Vec<f64>, dim: usize) -> BuiltTarget {
        use crate::benchmark::{ReferenceDiagnostics, ReferenceKey, ReferenceRecord};
        let record = ReferenceRecord {
            plan: ReferenceKey::Abc.plan(true, 0),
            diagnostics: ReferenceDiagnostics {
                rows: samples.len() / dim,
                rhat_max: 1.0,
                ess_bulk_min: 1.0,
                acceptance: 1.0,
                wall_time_secs: 0.0,
            },
        };
        let reference = Reference::new_for_test(dim, samples, record);
        let mut built = TargetSpec::AbcSkewNormal.build().unwrap();
        if let BuiltTarget::Abc { reference: r, .. } = &mut built {
            *r = Some(Arc::new(reference));
        }
        built
    }

    /// Reference-based metrics against direct computations: the MMD curve
    /// against O(nm) kernel sums (`mmd2`), the mean distance by hand, the
    /// autocorrelation curve against the per-dimension average.
    #[test]
    fn reference_metrics_match_direct_computations() {
        let d = 10;
        let rows = |n: usize, shift: f64| -> Vec<f64> {
            (0..n * d)
                .map(|i| ((i * 7919) % 23) as f64 / 7.0 + shift)
                .collect()
        };
        let built = reference_target(rows(30, 0.0), d);
        let samples = rows(40, 0.3);
        let chain = chain_from(samples.clone(), d, vec![true; 40]);
        let metric = Metric::BenchmarkTrace {
            checkpoints: 4,
            thin: 2,
            estimator: MmdEstimator::Unbiased,
        };
        let curves = metric.compute_curves(&chain, &built).unwrap();
        let (mmd, norm) = (&curves[0].1, &curves[1].1);
        let thinned = thinned_rows(&samples, d, 2); // 20 rows
        let reference = built.reference().unwrap();
        for (k, &x) in mmd.x.iter().enumerate() {
            let prefix = 5 * (k + 1);
            assert_eq!(x, (prefix * 2) as f64);
            let part = &thinned[..prefix * d];
            let direct = kameleon_diagnostics::mmd2(
                part,
                &reference.samples,
                d,
                &PolynomialKernel::paper(),
                MmdEstimator::Unbiased,
            )
            .unwrap();
            assert!((mmd.y[k] - direct).abs() <= 1e-9 * direct.abs().max(1.0));
            let dist = distance(&row_mean(part, d), &reference.mean);
            assert!((norm.y[k] - dist).abs() < 1e-12);
        }
        let scalar = metric.compute(&chain, &built).unwrap();
        assert_eq!(scalar[0].1, *mmd.y.last().unwrap());
        let mean_norm = Metric::MeanNorm.compute(&chain, &built).unwrap();
        assert!((mean_norm[0].1 - distance(&chain.mean(), &reference.mean)).abs() < 1e-12);

        let acf = Metric::Autocorrelation { max_lag: 5 }
            .compute_curves(&chain, &built)
            .unwrap();
        let curve = &acf[0].1;
        assert_eq!(curve.x, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        for lag in 0..=5 {
            let expected = (0..d)
                .map(|j| autocorrelation(&column(&samples, d, j).unwrap(), 5).unwrap()[lag])
                .sum::<f64>()
                / d as f64;
            assert!((curve.y[lag] - expected).abs() < 1e-12);
        }
        let marginal = Metric::Marginal { dim: 0, bins: 8 };
        let scalars = marginal.compute(&chain, &built).unwrap();
        let first = column(&samples, d, 0).unwrap();
        assert_eq!(scalars[0].1, first.iter().sum::<f64>() / 40.0);
        let density = &marginal.compute_curves(&chain, &built).unwrap()[0].1;
        // The histogram integrates to the fraction of draws in the range.
        let (lo, hi) = reference.range(0).unwrap();
        let inside = first.iter().filter(|&&v| v >= lo && v <= hi).count() as f64 / 40.0;
        let integral: f64 = density.y.iter().sum::<f64>() * (hi - lo) / 8.0;
        assert!((integral - inside).abs() < 1e-12);
        // Without a reference these metrics are errors, not silent values.
        let plain = TargetSpec::AbcSkewNormal.build().unwrap();
        assert!(metric.compute(&chain, &plain).is_err());
        assert!(Metric::MeanNorm.compute(&chain, &plain).is_err());
    }

    #[test]
    fn empty_chains_and_pending_samplers_are_errors() {
        let target = TargetSpec::Banana {
            dim: 2,
            b: 0.03,
            v: 100.0,
        }
        .build()
        .unwrap();
        let chain = chain_from(vec![], 2, vec![]);
        assert!(Metric::Acceptance.compute(&chain, &target).is_err());
        let pending = [
            SamplerSpec::AmFs,
            SamplerSpec::AmLs,
            SamplerSpec::KamhOracle { n: 10 },
            SamplerSpec::KmcFinite {
                m: 10,
                step_size: (0.1, 0.2),
                steps: (1, 2),
            },
        ];
        for s in pending.into_iter().filter(|s| s.pending().is_some()) {
            let r = s.run(
                target.target(),
                &[0.0, 0.0],
                RunConfig::new(1, 1),
                0,
                0,
                &|_| {},
            );
            assert!(r.is_err());
        }
    }
}
