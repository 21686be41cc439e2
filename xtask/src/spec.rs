//! What a grid cell runs: a target, a sampler with its settings, and the
//! per-chain metrics computed on its post-burn-in draws.

use crate::reference::Reference;
use crate::summary::Curve;
use anyhow::{Context, Result, bail};
use faer::MatRef;
use kameleon_diagnostics::{
    Axis, MmdEstimator, PolynomialKernel, ReferenceHistogram, autocorrelation, column,
    ess_geyer_per_dim, ess_multi_chain, mmd2_polynomial, per_dimension, quantile_coverage_errors,
};
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::{Gaussian, Kernel, Matern};
use kameleon_samplers::{
    AdaptProbability, AdaptationStop, AdaptationSummary, AdaptiveMetropolis, Bandwidth, Chain,
    Ckam, CycleAdaptation, EnsembleConfig, FKamh, FiniteSurrogate, Gamma, Habc, HabcConfig, Hmc,
    Kamh, KamhConfig, KmcFinite, KmcLite, LiteSurrogate, MomentEstimator, Progress, ProgressFn,
    Proposal, RandomWalk, Refresh, RobbinsMonro, Run, RunConfig, Scale, StepSchedule,
    SubsampleConfig, SwitchRule, SyntheticLikelihood, Target, chain_rng, initial_ball,
    run_ensemble_with,
};
use kameleon_score_matching::{FiniteEstimator, LiteEstimator};
use kameleon_targets::{
    AbcSkewNormal, Banana, Flower, GaussianMixture, GpClassification, GridMixture,
    IsotropicGaussianPrior, PseudoMarginal, QuantileRegions, abc_skew_normal_posterior,
    glass_posterior,
};
use rand::Rng;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

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
    // ── The cKAM paper's mixtures (Li et al. 2022, Appendix A) ──
    /// The 2-d bimodal ½N((−8, 0), 0.5I) + ½N((8, 0), 2I) (A.1).
    CkamBimodal,
    /// The 2-d mixture (1/5) Σᵢ N(2.5(i−1)(1, 1), √i·I) (A.2).
    CkamFiveComponents,
    /// The 32-d equal-weight mixture of the 5³² Gaussians N(μ, 15I),
    /// μ ∈ {−30, −15, 0, 15, 30}³² (A.3).
    CkamGrid32,
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
            Self::CkamBimodal => "ckam-bimodal-d2".into(),
            Self::CkamFiveComponents => "ckam-gmm5-d2".into(),
            Self::CkamGrid32 => "ckam-grid-d32".into(),
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
            Self::CkamBimodal => "2-d bimodal mixture".into(),
            Self::CkamFiveComponents => "2-d five-component mixture".into(),
            Self::CkamGrid32 => "32-d grid mixture".into(),
        }
    }

    /// The paper's fixed starting point, for targets whose experiments
    /// prescribe one (cKAM: μ₁ = (−8, 0) on the bimodal target, the origin
    /// on the others); `None`: see [`TargetSpec::start`].
    pub fn fixed_start(&self) -> Option<Vec<f64>> {
        match self {
            Self::Banana { .. }
            | Self::Flower { .. }
            | Self::GlassPosterior { .. }
            | Self::AbcSkewNormal => None,
            Self::CkamBimodal => Some(vec![-8.0, 0.0]),
            Self::CkamFiveComponents => Some(vec![0.0; 2]),
            Self::CkamGrid32 => Some(vec![0.0; 32]),
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
            Self::CkamBimodal => BuiltTarget::Mixture(GaussianMixture::ckam_bimodal(false)),
            Self::CkamFiveComponents => {
                BuiltTarget::Mixture(GaussianMixture::ckam_five_components())
            }
            Self::CkamGrid32 => BuiltTarget::Grid(GridMixture::ckam_high_dim()),
        })
    }

    /// The starting point of a chain: the paper's fixed one
    /// ([`TargetSpec::fixed_start`]), θ = 0 on Glass (KAMH's start),
    /// θ_true = 10·1 on the ABC target (the KMC code's start), else an exact
    /// draw (from `rng`).
    pub fn start(&self, built: &BuiltTarget, rng: &mut dyn rand::Rng) -> Result<Vec<f64>> {
        if let Some(x0) = self.fixed_start() {
            return Ok(x0);
        }
        let target = built.target();
        let mut x0 = vec![0.0; target.dim()];
        match self {
            Self::GlassPosterior { .. } => {}
            Self::AbcSkewNormal => x0.fill(ABC_THETA_TRUE),
            _ => target.sample_iid(rng, &mut x0)?,
        }
        Ok(x0)
    }
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
    /// A Gaussian mixture with axis-aligned covariances (cKAM's 2-d targets).
    Mixture(GaussianMixture),
    /// A product-grid mixture (cKAM's 32-d target).
    Grid(GridMixture),
}

impl BuiltTarget {
    /// The target as the samplers see it.
    pub fn target(&self) -> &dyn Target {
        match self {
            Self::Banana(t) => t,
            Self::Flower(t) => t,
            Self::Glass { posterior, .. } => posterior,
            Self::Abc { posterior, .. } => posterior,
            Self::Mixture(t) => t,
            Self::Grid(t) => t,
        }
    }

    /// Its exactly known quantile regions, if it has them.
    pub fn regions(&self) -> Option<&dyn QuantileRegions> {
        match self {
            Self::Banana(t) => Some(t),
            Self::Flower(t) => Some(t),
            Self::Glass { .. } | Self::Abc { .. } | Self::Mixture(_) | Self::Grid(_) => None,
        }
    }

    /// Its reference sample, if it has one (prepared targets without exact draws).
    pub fn reference(&self) -> Option<&Reference> {
        match self {
            Self::Glass { reference, .. } | Self::Abc { reference, .. } => reference.as_deref(),
            Self::Banana(_) | Self::Flower(_) | Self::Mixture(_) | Self::Grid(_) => None,
        }
    }

    fn require_reference(&self) -> Result<&Reference> {
        self.reference()
            .context("the target has no reference sample (it was not prepared)")
    }

    /// The exact CDF of coordinate `coord`'s marginal, for the targets that
    /// have one in closed form.
    pub fn marginal_cdf(&self, coord: usize) -> Option<Box<dyn Fn(f64) -> f64 + '_>> {
        match self {
            Self::Mixture(m) if coord < m.dim() => Some(Box::new(move |t| {
                m.marginal_cdf(coord, t).expect("coordinate checked")
            })),
            Self::Grid(g) if coord < g.dim() => Some(Box::new(move |t| {
                g.coordinate_marginal()
                    .marginal_cdf(0, t)
                    .expect("1-d mixture")
            })),
            _ => None,
        }
    }

    /// The exact reference histograms of the symmetric-KL metric: the joint histogram of a 2-d mixture on
    /// [`KL_BINS_2D`]² bins, or one marginal histogram of [`KL_BINS_1D`] bins
    /// per coordinate of the grid mixture (whose coordinates are
    /// independent); J is averaged over them. Each box covers the target's
    /// marginal quantiles 10⁻¹⁰ … 1 − 10⁻¹⁰ of its axis, plus an overflow bin.
    pub fn kl_reference(&self) -> Result<Vec<ReferenceHistogram>> {
        let axis = |coord: usize, bins: usize| -> Result<Axis> {
            let cdf = self
                .marginal_cdf(coord)
                .expect("called for targets with marginals");
            let (lo, hi) = (quantile(&cdf, 1e-10), quantile(&cdf, 1.0 - 1e-10));
            Ok(Axis::new(lo, hi, bins)?)
        };
        Ok(match self {
            Self::Mixture(m) if m.dim() == 2 => {
                let (x, y) = (axis(0, KL_BINS_2D)?, axis(1, KL_BINS_2D)?);
                vec![ReferenceHistogram::joint(
                    x,
                    y,
                    (0, 1),
                    |x0, x1, y0, y1| {
                        m.pair_box_probability(0, 1, (x0, x1), (y0, y1))
                            .unwrap_or(f64::NAN)
                    },
                )?]
            }
            Self::Grid(g) => {
                let cdf = self.marginal_cdf(0).expect("grid marginals");
                let a = axis(0, KL_BINS_1D)?;
                (0..g.dim())
                    .map(|j| Ok(ReferenceHistogram::marginal(a, j, &cdf)?))
                    .collect::<Result<_>>()?
            }
            _ => bail!("the symmetric KL needs a 2-d axis-aligned mixture or the grid mixture"),
        })
    }
}

/// Bins per axis of the 2-d KL histograms: 2 500 bins, ≲ N_eff/10 at the
/// full runs' 10⁵-scale effective sizes.
pub const KL_BINS_2D: usize = 50;

/// Bins of each 1-d marginal histogram of the 32-d KL (width ≈ 1 on the grid
/// mixture's axis, a quarter of a component's standard deviation √15).
pub const KL_BINS_1D: usize = 120;

/// The p-quantile of a continuous CDF by bisection on [−10⁶, 10⁶].
fn quantile(cdf: &dyn Fn(f64) -> f64, p: f64) -> f64 {
    let (mut lo, mut hi) = (-1e6, 1e6);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
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
    /// Hamiltonian ABC (Meeds et al. 2015) on the KMC ABC target with
    /// `HabcConfig::kmc_paper` and a synthetic likelihood of 10 simulations,
    /// ε = 0.55 — no MH correction, biased by design.
    Habc,
    /// The inner sampler adapting at every step instead of during burn-in
    /// only (protocols without burn-in, KMC Fig. 4 left); same label.
    Adapting(&'static SamplerSpec),
    /// The affine-invariant ensemble (Goodman & Weare 2010) with emcee's
    /// default stretch move, [`ENSEMBLE_WALKERS_PER_DIM`]·d walkers started
    /// in a ball of radius [`ENSEMBLE_BALL`] around the chain's start: the
    /// baseline gradient-free users pick. It runs at the cell's number of
    /// log-density evaluations (W per sweep), and its chain pools the walkers
    /// sweep by sweep, so a prefix of k draws cost k evaluations.
    Ensemble {
        /// The stretch scale a (emcee: 2).
        a: f64,
    },
    // ── The cKAM paper's samplers (Li et al. 2022, §3 and Tables 1–3) ──
    /// RW: N(x, ν²I) with a fixed ν.
    RwFixed {
        /// The step size ν.
        nu: f64,
        /// Keep every `thin`-th post-burn-in state (see [`SamplerSpec::thin`]).
        thin: u64,
    },
    /// AM (Andrieu & Thoms Alg. 2): ν = 2.38/√d fixed, mean and covariance
    /// learned by stochastic approximation with the constant step η from
    /// Σ₀ = I.
    AmConstant {
        /// The Robbins–Monro step η.
        eta: f64,
        /// Keep every `thin`-th post-burn-in state.
        thin: u64,
    },
    /// RBAM (Andrieu & Thoms Alg. 3): AM whose moments are fed x* with
    /// weight α and x with weight 1 − α, constant step η, Σ₀ = I.
    RbamConstant {
        /// The Robbins–Monro step η.
        eta: f64,
        /// Keep every `thin`-th post-burn-in state.
        thin: u64,
    },
    /// GAM (Andrieu & Thoms Alg. 4): moments and log ν learned with steps
    /// t^−ε toward acceptance 0.234, ν₀ = 2.38/√d.
    Gam {
        /// The rate ε.
        epsilon: f64,
        /// Keep every `thin`-th post-burn-in state.
        thin: u64,
    },
    /// KAM: KAMH with cKAM's Matérn kernel ([`CKAM_MATERN`]), subsample
    /// redrawn at every burn-in step, γ decaying from 4 to 1 (the cKAM code's
    /// noise schedule), log ν learned toward 0.234 with steps t^−0.75 from ν₀.
    KamMatern {
        /// Subsample size n.
        n: usize,
        /// The initial ν.
        nu0: f64,
        /// Keep every `thin`-th post-burn-in state.
        thin: u64,
    },
    /// cKAM with cKAM's Matérn kernel: cycles of L steps, the first
    /// fraction β exploring with KAMH on the cycle's history (fixed γ, log ν
    /// learned toward 0.234 with steps t^−0.75 from ν₀), the rest sampling.
    /// The cell's burn-in counts the exploration steps, its iterations the
    /// kept sampling steps.
    Ckam {
        /// Subsample size n.
        n: usize,
        /// The initial ν.
        nu0: f64,
        /// Exploration noise γ.
        gamma: f64,
        /// Cycle length L (the paper's T/M).
        cycle: u64,
        /// Exploration fraction β.
        beta: f64,
        /// How exploration passes to sampling (the paper's Alg. 2:
        /// [`SwitchRule::AsWritten`]).
        switch: SwitchRule,
        /// When z and ν adapt (the paper's Alg. 2:
        /// [`CycleAdaptation::WithinCycle`]).
        adaptation: CycleAdaptation,
    },
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

/// cKAM's kernel for KAM and cKAM (Appendix A.1): Matérn with smoothness
/// ν = 4 and length-scale ℓ = 2 (`k = 2^{1−ν}/Γ(ν) (√(2ν) r/ℓ)^ν K_ν(√(2ν) r/ℓ)`).
pub const CKAM_MATERN: (f64, f64) = (4.0, 2.0);

/// The Robbins–Monro rate ε of GAM's, KAM's and cKAM's step sizes t^−ε (Tables 1–3).
pub const CKAM_RM_RATE: f64 = 0.75;

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
            Self::Habc => "HABC",
            Self::Adapting(inner) => inner.label(),
            Self::Ensemble { .. } => "Ensemble",
            Self::RwFixed { .. } => "RW",
            Self::AmConstant { .. } => "AM",
            Self::RbamConstant { .. } => "RBAM",
            Self::Gam { .. } => "GAM",
            Self::KamMatern { .. } => "KAM",
            Self::Ckam { .. } => "cKAM",
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
            | Self::Habc
            | Self::RwFixed { .. }
            | Self::AmConstant { .. }
            | Self::RbamConstant { .. }
            | Self::Gam { .. }
            | Self::KamMatern { .. }
            | Self::Ckam { .. }
            | Self::Ensemble { .. } => None,
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
    ) -> Result<TimedChain> {
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

    /// The thinning of a sampler that keeps every `thin`-th post-burn-in
    /// state: its cell's `iterations` counts the kept states, so it runs
    /// `thin` × `iterations` steps after burn-in (and reports progress in
    /// kept states). 1 for the others.
    pub fn thin(&self) -> u64 {
        match *self {
            Self::RwFixed { thin, .. }
            | Self::AmConstant { thin, .. }
            | Self::RbamConstant { thin, .. }
            | Self::Gam { thin, .. }
            | Self::KamMatern { thin, .. } => thin.max(1),
            _ => 1,
        }
    }

    /// Runs chain `chain` of base `seed` from `x0`, recording the wall time
    /// at the [`checkpoints`] of its post-burn-in draws; `config.iterations`
    /// counts kept states ([`SamplerSpec::thin`]).
    pub fn run(
        &self,
        target: &dyn Target,
        x0: &[f64],
        config: RunConfig,
        seed: u64,
        chain: u64,
        progress: ProgressFn<'_>,
    ) -> Result<TimedChain> {
        let d = target.dim();
        let thin = self.thin();
        let config = RunConfig {
            iterations: config.iterations * thin,
            thin: config.thin * thin,
            ..config
        };
        let kept_steps =
            |step: u64| step.min(config.burn_in) + step.saturating_sub(config.burn_in) / thin;
        let report = |p: Progress| {
            progress(Progress {
                step: kept_steps(p.step),
                total: kept_steps(p.total),
                ..p
            })
        };
        let progress: ProgressFn<'_> = &report;
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
            Self::RwFixed { nu, .. } => {
                let proposal = RandomWalk::with_scale(d, Scale::fixed(*nu)?)?;
                run(target, proposal, x0, config, seed, chain, progress)
            }
            Self::AmConstant { eta, .. } | Self::RbamConstant { eta, .. } => {
                let schedule = StepSchedule::Constant { gamma: *eta };
                let moments = if matches!(self, Self::AmConstant { .. }) {
                    MomentEstimator::stochastic(d, schedule)?
                } else {
                    MomentEstimator::rao_blackwellised(d, schedule)?
                };
                let scale = Scale::fixed(Scale::optimal_for(d))?;
                // ε and the warm-up of 2d updates as in the library's presets.
                let proposal = AdaptiveMetropolis::new(d, scale, moments, 1e-6, 2 * d as u64)?;
                run(target, proposal, x0, config, seed, chain, progress)
            }
            Self::Gam { epsilon, .. } => run(
                target,
                AdaptiveMetropolis::learned_scale(d, StepSchedule::Power { kappa: *epsilon })?,
                x0,
                config,
                seed,
                chain,
                progress,
            ),
            Self::KamMatern { n, nu0, .. } => {
                let kamh = KamhConfig {
                    subsample: SubsampleConfig {
                        subsample_size: *n,
                        gamma: Gamma::Decaying {
                            initial: 4.0,
                            floor: 1.0,
                            schedule: StepSchedule::Power { kappa: 0.55 },
                        },
                        refresh: Refresh::Probability(AdaptProbability::Always),
                        bandwidth: Bandwidth::Fixed,
                        warmup_scale: 1.0,
                    },
                    scale: Scale::Adaptive(ckam_nu(*nu0)?),
                };
                let proposal = Kamh::new(d, ckam_kernel()?, kamh)?;
                run(target, proposal, x0, config, seed, chain, progress)
            }
            Self::Ckam {
                n,
                nu0,
                gamma,
                cycle,
                beta,
                switch,
                adaptation,
            } => {
                let ckam = Ckam::new(ckam_kernel()?, d, *gamma, *n, ckam_nu(*nu0)?, *cycle, *beta)?
                    .with_switch_rule(*switch)
                    .with_cycle_adaptation(*adaptation);
                run_cyclical(target, ckam, x0, config, seed, chain, progress)
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
                let chain = habc.run(x0, config, seed, chain)?;
                // HABC runs in one go: its timeline has the final point only.
                let mut timeline = Timeline::default();
                timeline.record(
                    chain.len() as u64,
                    config.burn_in + config.iterations,
                    chain.wall_time_secs,
                );
                Ok(TimedChain {
                    chain,
                    timeline,
                    walkers: 1,
                })
            }
            Self::Adapting(inner) => inner.run(
                target,
                x0,
                config.adaptation(AdaptationStop::Never),
                seed,
                chain,
                progress,
            ),
            Self::Ensemble { a } => run_stretch(target, *a, x0, config, seed, chain, progress),
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
) -> Result<TimedChain> {
    let start = Instant::now();
    let mut run = Run::new(target, proposal, x0, config, seed, chain)?;
    run.advance(target, config.burn_in, Some(progress))?;
    let mut timeline = Timeline::default();
    for n in checkpoints(config.iterations / config.thin) {
        let recorded = (run.steps_done() - config.burn_in) / config.thin;
        run.advance(target, (n - recorded) * config.thin, Some(progress))?;
        timeline.record(n, run.steps_done(), start.elapsed().as_secs_f64());
    }
    Ok(TimedChain {
        chain: run.into_chain(),
        timeline,
        walkers: 1,
    })
}

/// The ensemble baseline as emcee runs it by default: stretch scale a = 2.
pub const EMCEE: SamplerSpec = SamplerSpec::Ensemble { a: 2.0 };

/// The notes' sentence on the ensemble baseline of the experiments that
/// have it (a macro so that `concat!` can append it to their notes).
macro_rules! ensemble_note {
    () => {
        " Ensemble: emcee's affine-invariant stretch move (a = 2) with W = 2d walkers started in a \
        ball of radius 0.1 around the chain's start, at the cell's number of log-density evaluations \
        (burn-in/W sweeps, rounded, then ⌈iterations/W⌉ sweeps); its draws pool the walkers sweep by \
        sweep, cut to the cell's iterations, and its ESS is the multi-chain ESS of the whole sweeps \
        with the walkers as chains."
    };
}
pub(crate) use ensemble_note;

/// Walkers per dimension of the ensemble baseline: W = 2d, the fewest emcee
/// accepts, and so the most sweeps for a given number of evaluations.
pub const ENSEMBLE_WALKERS_PER_DIM: usize = 2;

/// The radius of the Gaussian ball the ensemble's walkers start in, around
/// the chain's start (the usual emcee start near one point).
pub const ENSEMBLE_BALL: f64 = 0.1;

/// Runs the ensemble baseline as chain `chain` of a cell of `config`: W =
/// [`ENSEMBLE_WALKERS_PER_DIM`]·d walkers, burn_in/W sweeps discarded
/// (rounded) and ⌈iterations/W⌉ kept, so that it spends the cell's
/// log-density evaluations. The chain pools the kept walkers' states sweep
/// by sweep, truncated to the cell's `iterations` draws (so a prefix of k
/// draws cost k evaluations after burn-in; the last sweep's unrecorded
/// walkers, fewer than W, are the only evaluations beyond the cell's). Its
/// `accept_probabilities` are NaN (the stretch move's are not recorded), and
/// [`TimedChain::walkers`] says how to split it back into walkers.
fn run_stretch(
    target: &dyn Target,
    a: f64,
    x0: &[f64],
    config: RunConfig,
    seed: u64,
    chain: u64,
    progress: ProgressFn<'_>,
) -> Result<TimedChain> {
    let d = target.dim();
    let walkers = ENSEMBLE_WALKERS_PER_DIM * d;
    let ensemble = EnsembleConfig::new(walkers, a)?;
    let w = walkers as u64;
    let burn_in = (config.burn_in + w / 2) / w;
    let sweeps = config.iterations.div_ceil(w);
    if sweeps == 0 {
        bail!("the ensemble needs at least one iteration");
    }
    // The ball and the ensemble's moves come from streams of their own, one
    // per chain.
    let mut ball_rng = chain_rng(seed ^ 0xBA11_u64, chain);
    let initial = initial_ball(x0, walkers, ENSEMBLE_BALL, &mut ball_rng)?;
    let ensemble_seed = chain_rng(seed ^ 0xE45E_u64, chain).next_u64();
    let draws_wanted = config.iterations;
    let marks = checkpoints(draws_wanted);
    let mut next_mark = 0;
    let mut timeline = Timeline::default();
    let start = Instant::now();
    let out = run_ensemble_with(
        target,
        &ensemble,
        &initial,
        sweeps,
        burn_in,
        ensemble_seed,
        &mut |done| {
            let draws = (done.saturating_sub(burn_in) * w).min(draws_wanted);
            while next_mark < marks.len() && marks[next_mark] <= draws {
                timeline.record(marks[next_mark], done * w, start.elapsed().as_secs_f64());
                next_mark += 1;
            }
            progress(Progress {
                chain_index: chain,
                step: done * w,
                total: (burn_in + sweeps) * w,
            });
            ControlFlow::Continue(())
        },
    )?;
    let (mut samples, mut accepted, mut log_densities) =
        (out.samples, out.accepted, out.log_densities);
    let kept = draws_wanted as usize;
    samples.truncate(kept * d);
    accepted.truncate(kept);
    log_densities.truncate(kept);
    let chain = Chain {
        dim: d,
        samples,
        accepted,
        log_densities,
        accept_probabilities: vec![f64::NAN; kept],
        wall_time_secs: start.elapsed().as_secs_f64(),
        adaptation: AdaptationSummary::default(),
        seed: ensemble_seed,
        chain_index: chain,
        config: RunConfig::new(burn_in * w, draws_wanted),
        accepted_total: out.accepted_total.iter().sum(),
        rejected_non_finite: out.rejected_non_finite,
        covariance_jitters: 0,
    };
    Ok(TimedChain {
        chain,
        timeline,
        walkers,
    })
}

/// The kernel of KAM and cKAM in the cKAM experiments.
fn ckam_kernel() -> Result<Matern> {
    Ok(Matern::new(CKAM_MATERN.0, CKAM_MATERN.1)?)
}

/// The Robbins–Monro learner of ν of KAM and cKAM: from `nu0` toward 0.234
/// with steps t^−0.75.
fn ckam_nu(nu0: f64) -> Result<RobbinsMonro> {
    Ok(RobbinsMonro::new(
        nu0,
        0.234,
        StepSchedule::Power {
            kappa: CKAM_RM_RATE,
        },
    )?)
}

/// Runs cKAM for `config.burn_in + config.iterations` steps (whole cycles),
/// adapting at every step and keeping the sampling steps' states only, whose
/// number must be `config.iterations`: `kameleon_samplers::run_ckam` for
/// chain `chain`, through a [`Run`] so that progress and the timeline are
/// recorded on the way. The chain reports the cell's `config` (adaptation
/// never stopping), in which the burn-in counts the exploration steps.
fn run_cyclical<K: Kernel>(
    target: &dyn Target,
    ckam: Ckam<K>,
    x0: &[f64],
    config: RunConfig,
    seed: u64,
    chain: u64,
    progress: ProgressFn<'_>,
) -> Result<TimedChain> {
    let total = config.total_steps();
    let cycle = ckam.cycle_length();
    let kept_per_cycle = (1..=cycle).filter(|&t| ckam.is_sampling_step(t)).count() as u64;
    if !total.is_multiple_of(cycle) || config.iterations != total / cycle * kept_per_cycle {
        bail!(
            "cKAM runs whole cycles of {cycle} steps keeping {kept_per_cycle} each: \
             {} kept of {total} steps does not fit",
            config.iterations
        );
    }
    let start = Instant::now();
    let steps = RunConfig::new(0, total).adaptation(AdaptationStop::Never);
    let mut run = Run::new(target, ckam, x0, steps, seed, chain)?;
    let mut timeline = Timeline::default();
    for n in checkpoints(config.iterations) {
        run.advance_until_recorded(target, n as usize, Some(progress))?;
        timeline.record(n, run.steps_done(), start.elapsed().as_secs_f64());
    }
    // the last kept state is the run's last step: nothing is left to do
    run.advance(target, u64::MAX, Some(progress))?;
    let mut chain = run.into_chain();
    chain.config = config.adaptation(AdaptationStop::Never);
    Ok(TimedChain {
        chain,
        timeline,
        walkers: 1,
    })
}

/// A chain with the wall time at checkpoints of its post-burn-in draws.
#[derive(Debug, Clone)]
pub struct TimedChain {
    /// The chain.
    pub chain: Chain,
    /// When its checkpoints were reached.
    pub timeline: Timeline,
    /// 1 for a Markov chain; W for an ensemble, whose chain holds the W
    /// walkers' states interleaved (sweep × walker × d).
    pub walkers: usize,
}

/// Wall-clock seconds since the chain started (burn-in included) at which
/// it had recorded `draws[k]` post-burn-in draws, after `steps[k]` steps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// Post-burn-in draws at the checkpoints ([`checkpoints`]).
    pub draws: Vec<u64>,
    /// Steps taken (burn-in included).
    pub steps: Vec<u64>,
    /// Seconds since the start.
    pub seconds: Vec<f64>,
}

impl Timeline {
    fn record(&mut self, draws: u64, steps: u64, seconds: f64) {
        self.draws.push(draws);
        self.steps.push(steps);
        self.seconds.push(seconds);
    }
}

/// The W walkers' trajectories (each sweep × d, row-major) of an
/// ensemble's pooled states (sweep × walker × d).
fn split_walkers(pooled: &[f64], d: usize, walkers: usize) -> Vec<Vec<f64>> {
    let mut out = vec![Vec::with_capacity(pooled.len() / walkers.max(1)); walkers];
    for (k, x) in pooled.chunks_exact(d).enumerate() {
        out[k % walkers].extend_from_slice(x);
    }
    out
}

/// Checkpoints of the curve metrics along a chain of `n` post-burn-in
/// draws: [`CHECKPOINTS`] draw counts spaced geometrically from
/// max(n/1000, 50) (or n if smaller) to n, without duplicates, ending at n.
pub fn checkpoints(n: u64) -> Vec<u64> {
    if n == 0 {
        return Vec::new();
    }
    let first = (n / 1000).max(50).min(n) as f64;
    let ratio = (n as f64 / first).powf(1.0 / (CHECKPOINTS - 1) as f64);
    let mut out: Vec<u64> = (0..CHECKPOINTS)
        .map(|k| (first * ratio.powi(k as i32)).round() as u64)
        .map(|v| v.clamp(1, n))
        .collect();
    *out.last_mut().expect("CHECKPOINTS > 0") = n;
    out.dedup();
    out
}

/// The number of checkpoints of a curve metric.
pub const CHECKPOINTS: usize = 40;

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
    // ── Curve metrics of the cKAM experiments (need the run's timeline) ──
    /// The symmetric KL (Jeffreys divergence J) of the draws from the target
    /// on exact reference histograms ([`BuiltTarget::kl_reference`]),
    /// averaged over the histograms: the curves `kl` (J of the first n
    /// draws), `kl_floor` (the same J for n exact iid draws, mean over
    /// [`KL_FLOOR_REPLICATES`] sets) and `seconds` (wall time since the
    /// chain's start when it had n draws) at the [`checkpoints`] n, and the
    /// scalars `kl`, `kl_floor`, `kl_p_q` (KL(p‖q̂), the part charged for
    /// missed mass) of all draws.
    SymmetricKl,
    /// The curves `marginal_x1` (histogram density of the first coordinate
    /// on [`MARGINAL_BINS`] bins over the KL box) and `marginal_x1_exact`
    /// (the exact bin mass over the bin width), at the bin centres.
    MarginalFirst,
    /// `mass_x1_pos`: the fraction of draws with a positive first coordinate,
    /// and `mass_x1_pos_err`, its distance to the exact mass.
    PositiveMass,
}

/// Independent exact iid sample sets behind each point of the `kl_floor` curve.
pub const KL_FLOOR_REPLICATES: usize = 8;

/// Bins of the first-coordinate marginal histograms.
pub const MARGINAL_BINS: usize = 80;

/// What a metric family computes on one chain: scalars and curves.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    /// (name, value) pairs.
    pub scalars: Vec<(String, f64)>,
    /// (name, curve) pairs.
    pub curves: Vec<(String, Curve)>,
}

impl Metric {
    /// Computes this metric family on a timed chain; `seed` is the cell's
    /// seed (the iid floor's draws come from a stream of it, the same for
    /// every chain of the cell).
    pub fn evaluate(
        &self,
        run: &TimedChain,
        target: &BuiltTarget,
        seed: u64,
    ) -> Result<Evaluation> {
        let chain = &run.chain;
        if chain.is_empty() {
            bail!("the chain recorded no post-burn-in draws");
        }
        match self {
            Self::SymmetricKl => symmetric_kl(run, target, seed),
            Self::MarginalFirst => marginal_first(chain, target),
            Self::MinEss | Self::EssFirstTwo => Ok(Evaluation {
                scalars: self.ess(chain, run.walkers)?,
                curves: Vec::new(),
            }),
            _ => Ok(Evaluation {
                scalars: self.compute(chain, target)?,
                curves: self.compute_curves(chain, target)?,
            }),
        }
    }

    /// Computes a scalar metric family on a chain, as (name, value) pairs
    /// (curve metrics need [`Metric::evaluate`]).
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
            Self::MinEss | Self::EssFirstTwo => self.ess(chain, 1)?,
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
            Self::PositiveMass => {
                let Some(cdf) = target.marginal_cdf(0) else {
                    bail!("mass_x1_pos needs the exact marginal of the first coordinate");
                };
                let positive = chain.samples.chunks_exact(d).filter(|x| x[0] > 0.0).count();
                let fraction = positive as f64 / chain.len() as f64;
                vec![
                    ("mass_x1_pos".into(), fraction),
                    (
                        "mass_x1_pos_err".into(),
                        (fraction - (1.0 - cdf(0.0))).abs(),
                    ),
                ]
            }
            Self::SymmetricKl | Self::MarginalFirst => {
                bail!("{self:?} is a curve metric: use Metric::evaluate")
            }
        })
    }

    /// The ESS metrics ([`Metric::MinEss`], [`Metric::EssFirstTwo`]) of a
    /// Markov chain (`walkers` = 1: Geyer's ESS per dimension) or of an
    /// ensemble's pooled chain (`walkers` = W: the multi-chain ESS with the
    /// walkers as chains, which counts their correlation over sweeps; Geyer's
    /// on the interleaved sequence would take neighbouring walkers for
    /// independent draws).
    fn ess(&self, chain: &Chain, walkers: usize) -> Result<Vec<(String, f64)>> {
        let d = chain.dim;
        let ess = if walkers <= 1 {
            ess_geyer_per_dim(&chain.samples, d)?
        } else {
            // whole sweeps only: the walkers' chains must have equal lengths
            let whole = chain.len() / walkers * walkers;
            let split = split_walkers(&chain.samples[..whole * d], d, walkers);
            let views: Vec<&[f64]> = split.iter().map(Vec::as_slice).collect();
            per_dimension(&views, d, ess_multi_chain)?
        };
        let per_second = |v: f64| v / chain.wall_time_secs.max(1e-9);
        Ok(match self {
            Self::MinEss => {
                let min = ess.iter().copied().fold(f64::INFINITY, f64::min);
                vec![
                    ("ess_min".into(), min),
                    ("ess_min_per_s".into(), per_second(min)),
                ]
            }
            Self::EssFirstTwo => {
                if d < 2 {
                    bail!("ess_12 needs at least two dimensions");
                }
                let mean = 0.5 * (ess[0] + ess[1]);
                vec![
                    ("ess_12".into(), mean),
                    ("ess_12_per_s".into(), per_second(mean)),
                ]
            }
            _ => bail!("{self:?} is not an ESS metric"),
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
            | Self::EssFirstTwo
            | Self::PositiveMass => Vec::new(),
            Self::SymmetricKl | Self::MarginalFirst => {
                bail!("{self:?} needs the run's timeline: use Metric::evaluate")
            }
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

/// J and KL(p‖q̂) of draws, averaged over the reference histograms.
fn mean_divergence(
    references: &[ReferenceHistogram],
    draws: &[f64],
    d: usize,
) -> Result<(f64, f64)> {
    let (mut j, mut p_q) = (0.0, 0.0);
    for r in references {
        let e = r.divergence(draws, d)?;
        j += e.jeffreys;
        p_q += e.kl_reference_to_sample;
    }
    let m = references.len() as f64;
    Ok((j / m, p_q / m))
}

/// [`Metric::SymmetricKl`].
fn symmetric_kl(run: &TimedChain, target: &BuiltTarget, seed: u64) -> Result<Evaluation> {
    let (chain, timeline) = (&run.chain, &run.timeline);
    let d = chain.dim;
    if timeline.draws.last() != Some(&(chain.len() as u64)) {
        bail!("the timeline does not end at the chain's last draw");
    }
    let references = target.kl_reference()?;
    let mut kl = Vec::with_capacity(timeline.draws.len());
    let mut kl_p_q = 0.0;
    for &n in &timeline.draws {
        let (j, p_q) = mean_divergence(&references, &chain.samples[..n as usize * d], d)?;
        kl.push(j);
        kl_p_q = p_q;
    }
    // The floor: nested prefixes of independent exact iid sets, one stream
    // per cell (so every chain of a cell gets the same floor).
    let mut rng = chain_rng(seed ^ 0x0F10_0F10_u64, 0);
    let mut iid = vec![0.0; chain.samples.len()];
    let mut floor = vec![0.0; timeline.draws.len()];
    for _ in 0..KL_FLOOR_REPLICATES {
        for x in iid.chunks_exact_mut(d) {
            target.target().sample_iid(&mut rng, x)?;
        }
        for (f, &n) in floor.iter_mut().zip(&timeline.draws) {
            *f += mean_divergence(&references, &iid[..n as usize * d], d)?.0
                / KL_FLOOR_REPLICATES as f64;
        }
    }
    let x: Vec<f64> = timeline.draws.iter().map(|&n| n as f64).collect();
    let curve = |y: Vec<f64>| Curve { x: x.clone(), y };
    Ok(Evaluation {
        scalars: vec![
            ("kl".into(), *kl.last().expect("non-empty")),
            ("kl_floor".into(), *floor.last().expect("non-empty")),
            ("kl_p_q".into(), kl_p_q),
        ],
        curves: vec![
            ("kl".into(), curve(kl)),
            ("kl_floor".into(), curve(floor)),
            ("seconds".into(), curve(timeline.seconds.clone())),
        ],
    })
}

/// [`Metric::MarginalFirst`].
fn marginal_first(chain: &Chain, target: &BuiltTarget) -> Result<Evaluation> {
    let Some(cdf) = target.marginal_cdf(0) else {
        bail!("the marginal needs the exact CDF of the first coordinate");
    };
    let (lo, hi) = (quantile(&cdf, 1e-6), quantile(&cdf, 1.0 - 1e-6));
    let width = (hi - lo) / MARGINAL_BINS as f64;
    let mut counts = vec![0usize; MARGINAL_BINS];
    for x in chain.samples.chunks_exact(chain.dim) {
        let bin = ((x[0] - lo) / width).floor();
        if bin >= 0.0 && bin < MARGINAL_BINS as f64 {
            counts[bin as usize] += 1;
        }
    }
    let n = chain.len() as f64;
    let edge = |i: usize| lo + i as f64 * width;
    let centres = (0..MARGINAL_BINS)
        .map(|i| edge(i) + 0.5 * width)
        .collect::<Vec<_>>();
    let density = counts.iter().map(|&c| c as f64 / (n * width)).collect();
    let exact = (0..MARGINAL_BINS)
        .map(|i| (cdf(edge(i + 1)) - cdf(edge(i))) / width)
        .collect();
    Ok(Evaluation {
        scalars: Vec::new(),
        curves: vec![
            (
                "marginal_x1".into(),
                Curve {
                    x: centres.clone(),
                    y: density,
                },
            ),
            (
                "marginal_x1_exact".into(),
                Curve {
                    x: centres,
                    y: exact,
                },
            ),
        ],
    })
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
            accept_probabilities: vec![0.0; n],
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
        let record = crate::reference::tests::record(samples.len() / dim);
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

    // ── cKAM experiments: curves, timelines, thinning ──

    /// A timed chain of the given draws with a synthetic timeline.
    fn timed(samples: Vec<f64>, dim: usize) -> TimedChain {
        let n = samples.len() / dim;
        let draws = checkpoints(n as u64);
        TimedChain {
            chain: chain_from(samples, dim, vec![true; n]),
            timeline: Timeline {
                steps: draws.clone(),
                seconds: draws.iter().map(|&k| k as f64 * 1e-3).collect(),
                draws,
            },
            walkers: 1,
        }
    }

    fn iid_draws(target: &BuiltTarget, n: usize, seed: u64) -> Vec<f64> {
        let t = target.target();
        let mut rng = chain_rng(seed, 0);
        let mut out = vec![0.0; n * t.dim()];
        for x in out.chunks_exact_mut(t.dim()) {
            t.sample_iid(&mut rng, x).unwrap();
        }
        out
    }

    #[test]
    fn checkpoints_grow_geometrically_to_the_last_draw() {
        assert!(checkpoints(0).is_empty());
        assert_eq!(checkpoints(7), vec![7]);
        let c = checkpoints(1_000_000);
        assert_eq!(
            (c[0], *c.last().unwrap(), c.len()),
            (1000, 1_000_000, CHECKPOINTS)
        );
        // constant ratio 1000^(1/39) up to rounding
        let ratio = 1000f64.powf(1.0 / 39.0);
        for w in c.windows(2) {
            assert!((w[1] as f64 / w[0] as f64 - ratio).abs() < 2e-3, "{w:?}");
        }
        let small = checkpoints(120);
        assert!(small.windows(2).all(|w| w[0] < w[1]));
        assert_eq!((small[0], *small.last().unwrap()), (50, 120));
    }

    /// Exact iid draws reach the iid floor: their J differs from the floor
    /// (a mean of 8 replicates) by less than 4 standard deviations of
    /// J − floor, sd(J)·√(1 + 1/8), with sd(J) estimated from 8 more
    /// replicates. A chain stuck in the left mode is far above it.
    #[test]
    fn symmetric_kl_of_exact_draws_sits_on_the_floor_and_a_missed_mode_does_not() {
        let target = TargetSpec::CkamBimodal.build().unwrap();
        let n = 20_000;
        let run = timed(iid_draws(&target, n, 11), 2);
        let out = Metric::SymmetricKl.evaluate(&run, &target, 3).unwrap();
        let scalar = |name: &str| out.scalars.iter().find(|(k, _)| k == name).unwrap().1;
        let curve = |name: &str| &out.curves.iter().find(|(k, _)| k == name).unwrap().1;
        let references = target.kl_reference().unwrap();
        let js: Vec<f64> = (0..8)
            .map(|r| {
                references[0]
                    .divergence(&iid_draws(&target, n, 100 + r), 2)
                    .unwrap()
                    .jeffreys
            })
            .collect();
        let mean = js.iter().sum::<f64>() / 8.0;
        let sd = (js.iter().map(|j| (j - mean).powi(2)).sum::<f64>() / 7.0).sqrt();
        let (kl, floor) = (scalar("kl"), scalar("kl_floor"));
        assert!(
            (kl - floor).abs() < 4.0 * sd * (1.0 + 1.0 / 8.0f64).sqrt(),
            "{kl} {floor} {sd}"
        );
        assert!(
            (floor - mean).abs() < 4.0 * sd * (0.25f64).sqrt(),
            "{floor} {mean}"
        );
        // the curves run along the checkpoints and end at the scalars
        let kl_curve = curve("kl");
        assert_eq!(
            kl_curve.x,
            run.timeline
                .draws
                .iter()
                .map(|&d| d as f64)
                .collect::<Vec<_>>()
        );
        assert_eq!(*kl_curve.y.last().unwrap(), kl);
        assert_eq!(curve("seconds").y, run.timeline.seconds);
        // the floor falls with n (≈ (bins − 1)/n to first order)
        let floor_curve = &curve("kl_floor").y;
        assert!(floor_curve[0] > 5.0 * floor_curve.last().unwrap());
        // a chain in the left mode only: J ≥ ½ ln(½ / q̂(right)) ≫ floor, and
        // mass_x1_pos = 0 against the exact ≈ ½
        let left: Vec<f64> = iid_draws(&target, 4 * n, 12)
            .chunks_exact(2)
            .filter(|x| x[0] < 0.0)
            .take(n)
            .flatten()
            .copied()
            .collect();
        let stuck = timed(left, 2);
        let out = Metric::SymmetricKl.evaluate(&stuck, &target, 3).unwrap();
        assert!(out.scalars[0].1 > 2.0, "{:?}", out.scalars);
        let mass = Metric::PositiveMass.evaluate(&stuck, &target, 3).unwrap();
        assert_eq!(mass.scalars[0], ("mass_x1_pos".to_string(), 0.0));
        // exact mass ½(1 − Φ(−8/√2)) + ½(1 − Φ(8/√0.5)) = ½ − 3.8·10⁻⁹
        assert!((mass.scalars[1].1 - 0.5).abs() < 1e-8);
    }

    /// The 32-d KL is the mean of the 32 per-coordinate J values.
    #[test]
    fn grid_kl_averages_the_coordinates() {
        let target = TargetSpec::CkamGrid32.build().unwrap();
        let draws = iid_draws(&target, 500, 5);
        let references = target.kl_reference().unwrap();
        assert_eq!(references.len(), 32);
        let out = Metric::SymmetricKl
            .evaluate(&timed(draws.clone(), 32), &target, 1)
            .unwrap();
        let mean: f64 = (0..32)
            .map(|j| {
                // zero every other coordinate: only coordinate j may matter
                let mut padded = vec![0.0; draws.len()];
                for (row, x) in padded.chunks_exact_mut(32).zip(draws.chunks_exact(32)) {
                    row[j] = x[j];
                }
                references[j].divergence(&padded, 32).unwrap().jeffreys
            })
            .sum::<f64>()
            / 32.0;
        assert!((out.scalars[0].1 - mean).abs() < 1e-12);
    }

    /// The marginal histogram of exact draws matches the exact bin
    /// densities within 5 binomial standard errors per bin, and the exact
    /// curve integrates to the covered mass 1 − 2·10⁻⁶.
    #[test]
    fn marginal_of_exact_draws_matches_the_exact_density() {
        let target = TargetSpec::CkamFiveComponents.build().unwrap();
        let n = 50_000;
        let out = Metric::MarginalFirst
            .evaluate(&timed(iid_draws(&target, n, 2), 2), &target, 0)
            .unwrap();
        let (hist, exact) = (&out.curves[0].1, &out.curves[1].1);
        let width = hist.x[1] - hist.x[0];
        let total: f64 = exact.y.iter().sum::<f64>() * width;
        assert!((total - (1.0 - 2e-6)).abs() < 1e-9, "{total}");
        for (h, e) in hist.y.iter().zip(&exact.y) {
            let p = e * width;
            let se = (p * (1.0 - p) / n as f64).sqrt() / width;
            assert!((h - e).abs() <= 5.0 * se + 1e-12, "{h} {e} {se}");
        }
    }

    /// cKAM through the runner's loop keeps exactly the states of the
    /// library's `run_ckam` for chain 0, with one timeline point per
    /// checkpoint; a cell that does not hold whole cycles is an error.
    #[test]
    fn cyclical_runs_match_run_ckam_and_record_the_checkpoints() {
        let target = TargetSpec::CkamBimodal.build().unwrap();
        let t = target.target();
        let spec = SamplerSpec::Ckam {
            n: 10,
            nu0: 3.0,
            gamma: 4.0,
            cycle: 100,
            beta: 0.4,
            switch: SwitchRule::AsWritten,
            adaptation: CycleAdaptation::WithinCycle,
        };
        // 41 exploration and 59 sampling steps per cycle
        let config = RunConfig::new(3 * 41, 3 * 59);
        let run = spec.run(t, &[-8.0, 0.0], config, 9, 0, &|_| {}).unwrap();
        let ckam = Ckam::new(
            ckam_kernel().unwrap(),
            2,
            4.0,
            10,
            ckam_nu(3.0).unwrap(),
            100,
            0.4,
        )
        .unwrap()
        .with_switch_rule(SwitchRule::AsWritten)
        .with_cycle_adaptation(CycleAdaptation::WithinCycle);
        let reference = kameleon_samplers::run_ckam(t, ckam, &[-8.0, 0.0], 3, 9).unwrap();
        assert_eq!(run.chain.samples, reference.samples);
        assert_eq!(run.timeline.draws, checkpoints(3 * 59));
        assert!(run.timeline.seconds.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*run.timeline.steps.last().unwrap(), 300);
        let bad = spec.run(t, &[-8.0, 0.0], RunConfig::new(41, 60), 9, 0, &|_| {});
        assert!(bad.is_err());
    }

    /// A thinned sampler keeps every `thin`-th post-burn-in state of the
    /// same stream, and its cell's iterations count the kept states.
    #[test]
    fn thinning_keeps_every_thin_th_state_of_the_same_stream() {
        let target = TargetSpec::CkamFiveComponents.build().unwrap();
        let t = target.target();
        let spec = |thin| SamplerSpec::RwFixed { nu: 1.5, thin };
        let full = spec(1)
            .run(t, &[0.0, 0.0], RunConfig::new(10, 300), 4, 2, &|_| {})
            .unwrap();
        let thinned = spec(3)
            .run(t, &[0.0, 0.0], RunConfig::new(10, 100), 4, 2, &|_| {})
            .unwrap();
        assert_eq!(thinned.chain.len(), 100);
        let every_third: Vec<f64> = full
            .chain
            .samples
            .chunks_exact(2)
            .skip(2)
            .step_by(3)
            .flatten()
            .copied()
            .collect();
        assert_eq!(thinned.chain.samples, every_third);
        assert_eq!(thinned.timeline.draws, checkpoints(100));
    }

    /// N(0, diag(4, 1)): the banana with b = 0.
    fn gaussian_4_1() -> BuiltTarget {
        TargetSpec::Banana {
            dim: 2,
            b: 0.0,
            v: 4.0,
        }
        .build()
        .unwrap()
    }

    /// The ensemble cell is `run_ensemble` from its own ball and seed, at
    /// the cell's evaluations, with the walkers pooled sweep by sweep.
    #[test]
    fn ensemble_cell_pools_the_walkers_at_the_cells_evaluations() {
        let target = gaussian_4_1();
        let t = target.target();
        let x0 = [0.5, -0.5];
        // W = 4: 41 burn-in evaluations round to 10 sweeps, 203 iterations
        // take 51 sweeps, of which the first 203 pooled states are kept.
        let run = EMCEE
            .run(t, &x0, RunConfig::new(41, 203), 11, 3, &|_| {})
            .unwrap();
        assert_eq!(run.walkers, 4);
        assert_eq!(run.chain.len(), 203);
        assert_eq!(run.chain.config, RunConfig::new(40, 203));
        let mut ball = chain_rng(11 ^ 0xBA11_u64, 3);
        let initial = initial_ball(&x0, 4, ENSEMBLE_BALL, &mut ball).unwrap();
        let seed = chain_rng(11 ^ 0xE45E_u64, 3).next_u64();
        let config = EnsembleConfig::new(4, 2.0).unwrap();
        let direct = kameleon_samplers::run_ensemble(t, &config, &initial, 51, 10, seed).unwrap();
        assert_eq!(run.chain.samples, direct.samples[..203 * 2]);
        assert_eq!(run.chain.accepted, direct.accepted[..203]);
        assert_eq!(run.timeline.draws, checkpoints(203));
        assert_eq!(*run.timeline.steps.last().unwrap(), 244);
        assert!(run.timeline.seconds.windows(2).all(|w| w[0] <= w[1]));
        // The ESS uses the 50 whole sweeps.
        let ess = Metric::MinEss.evaluate(&run, &target, 11).unwrap();
        assert!(ess.scalars[0].1 > 0.0 && ess.scalars[0].1 <= 200.0);
        // No iterations is an error, not an empty chain.
        assert!(
            EMCEE
                .run(t, &x0, RunConfig::new(0, 0), 11, 3, &|_| {})
                .is_err()
        );
    }

    /// On N(0, diag(4, 1)) the pooled ensemble's means lie within 4 standard
    /// errors of 0, with the standard error from the walkers-as-chains ESS
    /// (a false failure has probability ~6e-5 per coordinate if that ESS is
    /// right; an ESS overstated several-fold would make the bound too tight
    /// to hold reliably). The ESS lies between 1/100 of the draws and the
    /// draws.
    #[test]
    fn ensemble_cell_recovers_a_gaussian_with_an_honest_ess() {
        let target = gaussian_4_1();
        let t = target.target();
        let run = EMCEE
            .run(t, &[1.0, 1.0], RunConfig::new(4_000, 40_000), 5, 0, &|_| {})
            .unwrap();
        let chain = &run.chain;
        let split = split_walkers(&chain.samples, 2, run.walkers);
        let views: Vec<&[f64]> = split.iter().map(Vec::as_slice).collect();
        let ess = per_dimension(&views, 2, ess_multi_chain).unwrap();
        let n = chain.len() as f64;
        for (j, sd) in [2.0, 1.0].into_iter().enumerate() {
            assert!(ess[j] > n / 100.0 && ess[j] <= n, "ESS {} of {n}", ess[j]);
            let mean = column(&chain.samples, 2, j).unwrap().iter().sum::<f64>() / n;
            assert!(
                mean.abs() < 4.0 * sd / ess[j].sqrt(),
                "mean {mean}, ESS {}",
                ess[j]
            );
        }
        let metric = Metric::MinEss.evaluate(&run, &target, 5).unwrap();
        let min = ess[0].min(ess[1]);
        assert_eq!(metric.scalars[0], ("ess_min".to_string(), min));
    }

    #[test]
    fn split_walkers_undoes_the_sweep_major_pooling() {
        // 3 sweeps × 2 walkers × d = 2: walker k, sweep s holds (10s + k, −(10s + k)).
        let pooled: Vec<f64> = (0..3)
            .flat_map(|s| (0..2).flat_map(move |k| [(10 * s + k) as f64, -((10 * s + k) as f64)]))
            .collect();
        let split = split_walkers(&pooled, 2, 2);
        assert_eq!(split[0], [0.0, -0.0, 10.0, -10.0, 20.0, -20.0]);
        assert_eq!(split[1], [1.0, -1.0, 11.0, -11.0, 21.0, -21.0]);
    }
}
