//! The papers' targets by their parameters ([`TargetSpec`]), built into
//! concrete targets with their reference samples ([`BuiltTarget`]).

use crate::reference::Reference;
use anyhow::{Context, Result, bail};
use kameleon_diagnostics::{Axis, ReferenceHistogram};
use kameleon_samplers::Target;
use kameleon_targets::{
    AbcSkewNormal, Banana, Flower, GaussianMixture, GpClassification, GridMixture,
    IsotropicGaussianPrior, PseudoMarginal, QuantileRegions, abc_skew_normal_posterior,
    glass_posterior,
};
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
        /// Whether ρ is the norm of the whole vector, as in the KAMH code's
        /// log density ([`Flower::with_whole_norm`]), rather than of the first
        /// two coordinates (the paper's).
        whole_norm: bool,
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
                whole_norm,
            } => format!(
                "flower{}-r{radius}-a{amplitude}-w{petals}-s{sigma}-d{dim}",
                if whole_norm { "-whole" } else { "" }
            ),
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
                whole_norm,
            } => format!(
                "{dim}-d F({radius}, {amplitude}, {petals}, {sigma}){}",
                if whole_norm {
                    " with ‖x‖ of the whole vector"
                } else {
                    ""
                }
            ),
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
                whole_norm,
            } => BuiltTarget::Flower(if whole_norm {
                Flower::new(dim, radius, amplitude, petals, sigma)?.with_whole_norm()?
            } else {
                Flower::new(dim, radius, amplitude, petals, sigma)?
            }),
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

    pub(crate) fn require_reference(&self) -> Result<&Reference> {
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
pub(crate) fn quantile(cdf: &dyn Fn(f64) -> f64, p: f64) -> f64 {
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
