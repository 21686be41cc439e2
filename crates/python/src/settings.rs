//! Sampler settings as the Python classes serialise them (JSON with a
//! `kind` tag), and the one dispatch from settings to a typed proposal.

use kameleon_features::{
    Embedding, Fastfood, FeatureError, FeatureMap, RadialSpectralDensity, RandomFourierFeatures,
};
use kameleon_kernels::{
    Gaussian, InverseMultiquadric, Laplacian, Matern, RationalQuadratic, SpectralDensity,
};
use kameleon_samplers::{
    AdaptProbability, AdaptiveMetropolis, AdaptiveMetropolisConfig, Bandwidth, Ckam, CkamConfig,
    CycleAdaptation, CycleDraws, FKamh, FKamhConfig, FiniteSurrogate, FiniteSurrogateConfig, Gamma,
    Hmc, HmcConfig, Kamh, KamhConfig, KmcConfig, KmcFinite, KmcLite, LiteSurrogate,
    LiteSurrogateConfig, MomentUpdate, PcaKameleon, PcaKameleonConfig, PrincipalComponents,
    PrincipalComponentsConfig, Proposal, RandomWalk, RandomWalkConfig, Refresh, RobbinsMonro,
    Scale, StepSchedule, SubsampleConfig, SwitchRule, Whitened, WhiteningConfig, chain_rng,
};
use kameleon_score_matching::{BaseMeasure, FiniteEstimator, LiteEstimator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::any_kernel::{self, AnyKernel};

/// An error building a sampler: the message of the crate that rejected a
/// parameter (it names the parameter).
pub type BuildResult<T> = Result<T, String>;

fn msg(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A proposal the Python layer can run and checkpoint.
pub trait Sampler: Proposal + Serialize + DeserializeOwned + Send + 'static {}
impl<P: Proposal + Serialize + DeserializeOwned + Send + 'static> Sampler for P {}

/// What to do with the proposal type the settings name: start chains
/// (`build` makes chain k's proposal from the base seed) or resume them
/// (`build` is unused, the type alone matters).
pub trait Job {
    /// The job's result.
    type Output;
    /// Runs the job for proposals of type `P`.
    fn run<P: Sampler>(self, build: &(dyn Fn(u64, u64) -> BuildResult<P> + Sync)) -> Self::Output;
}

/// A kernel as the Python classes describe it; `bandwidth: None` is the
/// median heuristic.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
pub enum KernelSpec {
    /// exp(−‖x − y‖²/(2ℓ²)).
    Gaussian {
        /// ℓ, or `None` for the median heuristic.
        bandwidth: Option<f64>,
    },
    /// exp(−‖x − y‖/ℓ).
    Laplacian {
        /// ℓ, or `None` for the median heuristic.
        bandwidth: Option<f64>,
    },
    /// Matérn of smoothness ν.
    Matern {
        /// The smoothness ν.
        nu: f64,
        /// ℓ, or `None` for the median heuristic.
        bandwidth: Option<f64>,
    },
    /// (1 + ‖x − y‖²/ℓ²)^(−β).
    InverseMultiquadric {
        /// The exponent β.
        beta: f64,
        /// ℓ, or `None` for the median heuristic.
        bandwidth: Option<f64>,
    },
    /// (1 + ‖x − y‖²/(2αℓ²))^(−α).
    RationalQuadratic {
        /// The shape α.
        alpha: f64,
        /// ℓ, or `None` for the median heuristic.
        bandwidth: Option<f64>,
    },
}

/// A KAMH-type sampler family, built on the one kernel type of the Python
/// classes.
trait KernelFamily: Sync {
    type P: Sampler;
    fn build(&self, kernel: &AnyKernel, median: bool) -> BuildResult<Self::P>;
}

impl KernelSpec {
    fn bandwidth(&self) -> Option<f64> {
        match *self {
            Self::Gaussian { bandwidth }
            | Self::Laplacian { bandwidth }
            | Self::Matern { bandwidth, .. }
            | Self::InverseMultiquadric { bandwidth, .. }
            | Self::RationalQuadratic { bandwidth, .. } => bandwidth,
        }
    }

    /// This kernel with length-scale `ell`.
    fn kernel(&self, ell: f64) -> BuildResult<AnyKernel> {
        Ok(match *self {
            Self::Gaussian { .. } => AnyKernel::Gaussian(Gaussian::new(ell).map_err(msg)?),
            Self::Laplacian { .. } => AnyKernel::Laplacian(Laplacian::new(ell).map_err(msg)?),
            Self::Matern { nu, .. } => AnyKernel::Matern(Matern::new(nu, ell).map_err(msg)?),
            Self::InverseMultiquadric { beta, .. } => AnyKernel::InverseMultiquadric(
                InverseMultiquadric::with_exponent(ell, beta).map_err(msg)?,
            ),
            Self::RationalQuadratic { alpha, .. } => {
                AnyKernel::RationalQuadratic(RationalQuadratic::new(ell, alpha).map_err(msg)?)
            }
        })
    }

    /// Runs `job` with the proposal `family` builds on this kernel (with
    /// length-scale 1 as the placeholder the median heuristic replaces), an
    /// [`AnyKernel`] that the job's decodes read as this kernel's kind.
    fn dispatch<J: Job, F: KernelFamily>(&self, family: F, job: J) -> BuildResult<J::Output> {
        let median = self.bandwidth().is_none();
        let kernel = self.kernel(self.bandwidth().unwrap_or(1.0))?;
        let _kind = any_kernel::decoding(kernel.kind());
        Ok(job.run(&|_, _| family.build(&kernel, median)))
    }

    /// The kernel a sampler that needs a numeric bandwidth uses: with
    /// `whiten`, `"median"` stands for √(2d), the median pairwise distance
    /// of N(0, I) points in dimension d (the whitened target's scale).
    fn resolved(&self, dim: usize, whiten: bool) -> Self {
        let mut spec = self.clone();
        if whiten && self.bandwidth().is_none() {
            let ell = Some((2.0 * dim as f64).sqrt());
            match &mut spec {
                Self::Gaussian { bandwidth }
                | Self::Laplacian { bandwidth }
                | Self::Matern { bandwidth, .. }
                | Self::InverseMultiquadric { bandwidth, .. }
                | Self::RationalQuadratic { bandwidth, .. } => *bandwidth = ell,
            }
        }
        spec
    }

    /// The fixed length-scale random features need.
    fn fixed_bandwidth(&self) -> BuildResult<f64> {
        self.bandwidth().ok_or_else(|| {
            "invalid sampler parameter `bandwidth`: random features need a number, not \"median\""
                .to_string()
        })
    }

    /// The kernel's spectral density.
    fn spectral(&self) -> BuildResult<Box<dyn SpectralDensity>> {
        Ok(Box::new(self.kernel(self.fixed_bandwidth()?)?))
    }

    /// The kernel's spectral density as a radial one (Fastfood draws only
    /// the radii of the frequencies).
    fn radial(&self) -> BuildResult<Box<dyn RadialSpectralDensity>> {
        let ell = self.fixed_bandwidth()?;
        let not_radial = || {
            "invalid sampler parameter `feature_map`: Fastfood needs a radial spectral density, \
             and the Laplacian kernel's is not radial; use \"rff\""
                .to_string()
        };
        // refused before its length-scale is checked
        if let Self::Laplacian { .. } = self {
            return Err(not_radial());
        }
        Ok(match self.kernel(ell)? {
            AnyKernel::Gaussian(k) => Box::new(k),
            AnyKernel::Matern(k) => Box::new(k),
            AnyKernel::InverseMultiquadric(k) => Box::new(k),
            AnyKernel::RationalQuadratic(k) => Box::new(k),
            AnyKernel::Laplacian(_) => return Err(not_radial()),
        })
    }
}

/// Every sampler's settings, as serialised by the Python classes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
pub enum SamplerSettings {
    /// N(x, ν²I): ν fixed (default 2.38/√d), or learned toward acceptance
    /// 0.234 with steps 1/√t from that value.
    RandomWalk {
        /// ν (None: 2.38/√d).
        scale: Option<f64>,
        /// Learn ν during tuning.
        learned: bool,
        /// Run in the coordinates a pilot learns ([`Whitened`])
        /// (lengths in the target's standard deviations); absent in older
        /// settings, which ran unwhitened.
        #[serde(default)]
        whiten: bool,
    },
    /// Adaptive Metropolis.
    AM {
        /// `"fixed"` (ν = 2.38/√d) or `"learned"` (toward 0.234).
        scale: String,
        /// Rao–Blackwellised moment updates (x* weighted by α).
        rao_blackwell: bool,
        /// Run in the coordinates a pilot learns ([`Whitened`])
        /// (lengths in the target's standard deviations); absent in older
        /// settings, which ran unwhitened.
        #[serde(default)]
        whiten: bool,
    },
    /// Principal-components AM.
    AMPCA {
        /// The number of leading directions (None: all d).
        components: Option<usize>,
        /// Run in the coordinates a pilot learns ([`Whitened`])
        /// (lengths in the target's standard deviations); absent in older
        /// settings, which ran unwhitened.
        #[serde(default)]
        whiten: bool,
    },
    /// HMC on the density's gradient.
    HMC {
        /// ε ~ U[a, b).
        step_size: (f64, f64),
        /// L ~ U{l0, …, l1}.
        steps: (u32, u32),
    },
    /// KAMH.
    KAMH {
        /// Subsample size n.
        subsample_size: usize,
        /// The kernel.
        kernel: KernelSpec,
        /// The median heuristic's bandwidth uses at most this many
        /// subsample points (its cost is quadratic in them).
        median_points: usize,
        /// The isotropic term γ (None: the scale-free preset's
        /// [`SubsampleConfig::scale_free`] γ for the dimension; a number in
        /// older settings).
        gamma: Option<f64>,
        /// The initial ν.
        scale: f64,
        /// Learn ν toward 0.234 during tuning (whitened, kept below
        /// [`KamhConfig::SCALE_FREE_MAX_SCALE_FACTOR`] times `scale`).
        learned: bool,
        /// Run in the coordinates a pilot learns ([`Whitened`])
        /// (lengths in the target's standard deviations).
        whiten: bool,
    },
    /// PCA-Kameleon.
    PCAKameleon {
        /// Subsample size n.
        subsample_size: usize,
        /// The kernel.
        kernel: KernelSpec,
        /// The median heuristic's bandwidth uses at most this many
        /// subsample points (its cost is quadratic in them).
        median_points: usize,
        /// Principal directions m.
        components: usize,
        /// The isotropic term γ (None: the scale-free preset's
        /// [`PcaKameleonConfig::scale_free`] γ for the dimension).
        gamma: Option<f64>,
        /// The initial ν_j.
        scale: f64,
        /// Learn the ν_j toward 0.234 during tuning.
        learned: bool,
        /// Redraw the subsample at tuning step t with probability t^−κ
        /// (`None`: at every tuning step, the paper's).
        refresh_kappa: Option<f64>,
        /// Run in the coordinates a pilot learns ([`Whitened`])
        /// (lengths in the target's standard deviations).
        whiten: bool,
    },
    /// F-KAMH on random Fourier features.
    FKAMH {
        /// The number of features D.
        features: usize,
        /// `"cos"` (cos(ωᵀx + b)) or `"sincos"` ([sin, cos] pairs).
        embedding: String,
        /// `"rff"` (i.i.d. frequencies) or `"fastfood"` (structured ones,
        /// O(D log d) per feature vector).
        feature_map: String,
        /// The kernel whose spectral density draws the frequencies.
        kernel: KernelSpec,
        /// The exploration noise γ (None: the scale-free preset's
        /// [`FKamhConfig::scale_free`] γ for the dimension; a number in
        /// older settings).
        gamma: Option<f64>,
        /// The initial η.
        eta: f64,
        /// Learn η toward 0.234 during tuning.
        learned: bool,
        /// Run in the coordinates a pilot learns ([`Whitened`])
        /// (lengths in the target's standard deviations).
        whiten: bool,
    },
    /// cKAM: cycles of KAMH exploration and frozen random-walk sampling.
    CKAM {
        /// Subsample size n.
        subsample_size: usize,
        /// The kernel (a numeric bandwidth).
        kernel: KernelSpec,
        /// The exploration noise γ (None: the scale-free preset's
        /// [`CkamConfig::scale_free`] γ for the dimension).
        gamma: Option<f64>,
        /// The initial exploration scale ν₀ (None: 2 · 2.38/√d).
        scale: Option<f64>,
        /// Steps per cycle L.
        cycle_length: u64,
        /// The exploring fraction β of each cycle.
        exploration_fraction: f64,
        /// `"delayed_rejection"` (exact) or `"as_written"` (the paper's Alg. 2).
        switch: String,
        /// `"between_cycles"` (exact) or `"within_cycle"` (the paper's Alg. 2).
        adaptation: String,
        /// The draws: `"all"` (every step's state) or `"sampling"` (the
        /// sampling phase's, the paper's; the default of older settings).
        #[serde(default = "sampling_phase")]
        keep: String,
        /// Run in the coordinates a pilot learns ([`Whitened`])
        /// (lengths in the target's standard deviations).
        whiten: bool,
    },
    /// KMC lite.
    KMCLite {
        /// Basis size n.
        n: usize,
        /// σ of exp(−‖x − y‖²/σ), or `None` for the median heuristic at
        /// every fit (σ = 4m², m the median pairwise distance).
        sigma: Option<f64>,
        /// Choose σ (a multiple of the above) and λ by cross-validation at
        /// the first fit.
        cross_validate: bool,
        /// The ridge λ, or `None` for
        /// [`LiteSurrogateConfig::scale_free_ridge`] in the target's
        /// dimension.
        lam: Option<f64>,
        /// ε ~ U[a, b).
        step_size: (f64, f64),
        /// L ~ U{l0, …, l1}.
        steps: (u32, u32),
        /// Refit probability t^−κ.
        kappa: f64,
        /// Run in the coordinates a pilot learns ([`Whitened`])
        /// (lengths in the target's standard deviations).
        whiten: bool,
        /// Learn a factor on the step size toward `target_accept` during
        /// tuning.
        adapt_step_size: bool,
        /// The acceptance rate the step factor is learned toward (absent in
        /// older settings: [`KmcConfig::SCALE_FREE_TARGET_ACCEPT`]).
        #[serde(default = "scale_free_target_accept")]
        target_accept: f64,
        /// The range the learned step factor is kept in (absent in older
        /// settings: [`KmcConfig::SCALE_FREE_STEP_FACTOR_RANGE`]).
        #[serde(default = "scale_free_step_factor_range")]
        step_factor_range: (f64, f64),
        /// The surrogate's base measure: "flat", "gaussian" or "student".
        #[serde(default)]
        base: SurrogateBase,
        /// Whitened, re-estimate the map from KMC's own states during tuning
        /// ([`KmcConfig::scale_free_whitening`]; no effect unwhitened);
        /// absent in older settings, which kept the pilot's map.
        #[serde(default)]
        rewhiten: bool,
    },
    /// KMC finite.
    KMCFinite {
        /// Random features m.
        features: usize,
        /// The kernel of the features.
        kernel: KernelSpec,
        /// The ridge λ.
        lam: f64,
        /// ε ~ U[a, b).
        step_size: (f64, f64),
        /// L ~ U{l0, …, l1}.
        steps: (u32, u32),
        /// States seen before trajectories start.
        min_points: usize,
        /// Run in the coordinates a pilot learns ([`Whitened`])
        /// (lengths in the target's standard deviations).
        whiten: bool,
        /// Learn a factor on the step size toward `target_accept` during
        /// tuning.
        adapt_step_size: bool,
        /// The acceptance rate the step factor is learned toward (absent in
        /// older settings: [`KmcConfig::SCALE_FREE_TARGET_ACCEPT`]).
        #[serde(default = "scale_free_target_accept")]
        target_accept: f64,
        /// The range the learned step factor is kept in (absent in older
        /// settings: [`KmcConfig::SCALE_FREE_STEP_FACTOR_RANGE`]).
        #[serde(default = "scale_free_step_factor_range")]
        step_factor_range: (f64, f64),
        /// The surrogate's base measure: "flat", "gaussian" or "student".
        #[serde(default)]
        base: SurrogateBase,
        /// Whitened, re-estimate the map from KMC's own states during tuning
        /// ([`KmcConfig::scale_free_whitening`]; no effect unwhitened);
        /// absent in older settings, which kept the pilot's map.
        #[serde(default)]
        rewhiten: bool,
    },
}

struct KamhFamily {
    dim: usize,
    config: SubsampleConfig,
    scale: Scale,
    whiten: bool,
}

impl KernelFamily for KamhFamily {
    type P = Whitened<Kamh<AnyKernel>>;
    fn build(&self, kernel: &AnyKernel, median: bool) -> BuildResult<Self::P> {
        let mut config = KamhConfig::default();
        config.subsample = with_bandwidth(self.config, median);
        config.scale = self.scale.clone();
        whitened(
            Kamh::new(self.dim, kernel.clone(), config),
            self.dim,
            self.whiten,
        )
    }
}

struct PcaKameleonFamily {
    dim: usize,
    config: SubsampleConfig,
    components: usize,
    scale: Scale,
    whiten: bool,
}

impl KernelFamily for PcaKameleonFamily {
    type P = Whitened<PcaKameleon<AnyKernel>>;
    fn build(&self, kernel: &AnyKernel, median: bool) -> BuildResult<Self::P> {
        let mut config = PcaKameleonConfig::default();
        config.subsample = with_bandwidth(self.config, median);
        config.components = self.components;
        config.scale = self.scale.clone();
        let sampler = PcaKameleon::new(self.dim, kernel.clone(), config);
        whitened(sampler, self.dim, self.whiten)
    }
}

/// cKAM's draws in settings written before they could be chosen.
fn sampling_phase() -> String {
    "sampling".into()
}

struct CkamFamily {
    dim: usize,
    gamma: f64,
    subsample_size: usize,
    nu: RobbinsMonro,
    cycle_length: u64,
    exploration_fraction: f64,
    switch: SwitchRule,
    adaptation: CycleAdaptation,
    draws: CycleDraws,
    whiten: bool,
}

impl KernelFamily for CkamFamily {
    type P = Whitened<Ckam<AnyKernel>>;
    fn build(&self, kernel: &AnyKernel, median: bool) -> BuildResult<Self::P> {
        if median {
            return Err(
                "invalid sampler parameter `bandwidth`: cKAM needs a number, not \"median\""
                    .to_string(),
            );
        }
        let mut config = CkamConfig::default();
        config.gamma = self.gamma;
        config.subsample_size = self.subsample_size;
        config.nu = Some(self.nu.clone());
        config.cycle_length = self.cycle_length;
        config.exploration_fraction = self.exploration_fraction;
        config.switch_rule = self.switch;
        config.cycle_adaptation = self.adaptation;
        config.cycle_draws = self.draws;
        whitened(
            Ckam::new(self.dim, kernel.clone(), config),
            self.dim,
            self.whiten,
        )
    }
}

/// `sampler` wrapped in [`Whitened`] (a pass-through unless `whiten`).
fn whitened<P: Proposal>(
    sampler: kameleon_samplers::Result<P>,
    dim: usize,
    whiten: bool,
) -> BuildResult<Whitened<P>> {
    let config = if whiten {
        WhiteningConfig::default()
    } else {
        WhiteningConfig::disabled()
    };
    whitened_with(sampler, dim, config)
}

/// `sampler` wrapped in [`Whitened`] with the settings `config`.
fn whitened_with<P: Proposal>(
    sampler: kameleon_samplers::Result<P>,
    dim: usize,
    config: WhiteningConfig,
) -> BuildResult<Whitened<P>> {
    Whitened::new(sampler.map_err(msg)?, dim, config).map_err(msg)
}

/// The whitening of the KMC samplers: none unless `whiten` (`rewhiten`
/// then has no effect); whitened, the pilot's map, re-estimated as
/// [`KmcConfig::scale_free_whitening`] says if `rewhiten`.
fn kmc_whitening(whiten: bool, rewhiten: bool) -> WhiteningConfig {
    match (whiten, rewhiten) {
        (false, _) => WhiteningConfig::disabled(),
        (true, false) => WhiteningConfig::default(),
        (true, true) => KmcConfig::scale_free_whitening(),
    }
}

fn with_bandwidth(mut config: SubsampleConfig, median: bool) -> SubsampleConfig {
    if !median {
        config.bandwidth = Bandwidth::Fixed;
    }
    config
}

/// The paper's subsample settings with the isotropic term γ (also the
/// standard deviation of the initial random walk, as in the paper and
/// [`SubsampleConfig::scale_free`]) and, for the median heuristic, at most
/// `median_points` subsample points.
fn subsample(size: usize, gamma: f64, median_points: usize) -> SubsampleConfig {
    let mut config = SubsampleConfig::paper(size);
    config.gamma = Gamma::Fixed(gamma);
    config.warmup_scale = gamma;
    config.bandwidth = Bandwidth::MedianHeuristic {
        max_points: median_points.min(size),
    };
    config
}

/// ν fixed at `value`, or learned from it toward 0.234 with steps 1/√t.
fn scale(value: f64, learned: bool) -> BuildResult<Scale> {
    if learned {
        Ok(Scale::Adaptive(
            RobbinsMonro::new(value, 0.234, StepSchedule::InverseSqrt).map_err(msg)?,
        ))
    } else {
        Scale::fixed(value).map_err(msg)
    }
}

/// One of the named choices of a string parameter.
fn choice<T: Copy>(parameter: &str, value: &str, choices: &[(&str, T)]) -> BuildResult<T> {
    choices
        .iter()
        .find(|(name, _)| *name == value)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<String> = choices.iter().map(|(n, _)| format!("{n:?}")).collect();
            format!(
                "invalid sampler parameter `{parameter}`: must be one of {}, got {value:?}",
                names.join(", ")
            )
        })
}

/// The stream chain k's random features are drawn from (separate from the
/// chain's own stream, so the features do not shift its draws).
fn feature_rng(seed: u64, chain: u64) -> rand_xoshiro::Xoshiro256PlusPlus {
    chain_rng(seed ^ 0xF4A7, chain)
}

impl SamplerSettings {
    /// The Python classes' defaults, one value per kind: for the kernel
    /// samplers the samplers crate's scale-free presets
    /// ([`KamhConfig::scale_free`], [`KmcConfig::scale_free`], …), whitened;
    /// the others' own defaults. `kameleon.samplers` reads them at import,
    /// so the defaults have this one home.
    pub fn defaults() -> Vec<Self> {
        // γ of these four depends on d: None here, the preset's value for
        // the target's dimension when built (`from_json`); their other
        // settings do not depend on d
        let kamh = KamhConfig::scale_free(1);
        let pca = PcaKameleonConfig::scale_free(1);
        let fkamh = FKamhConfig::scale_free(1);
        let ckam = CkamConfig::scale_free(1);
        let kmc = KmcConfig::scale_free();
        let lite = LiteSurrogateConfig::scale_free();
        let finite = FiniteSurrogateConfig::default();
        let hmc = HmcConfig::default();
        let median = KernelSpec::Gaussian { bandwidth: None };
        let median_points = |config: &SubsampleConfig| match config.bandwidth {
            Bandwidth::MedianHeuristic { max_points } => max_points,
            Bandwidth::Fixed => config.subsample_size,
        };
        let learned = |scale: &Scale| matches!(scale, Scale::Adaptive(_));
        let power = |p: AdaptProbability| match p {
            AdaptProbability::Power { kappa } => Some(kappa),
            _ => None,
        };
        let refresh_kappa = match pca.subsample.refresh {
            Refresh::Probability(p) => power(p),
            _ => None,
        };
        vec![
            Self::RandomWalk {
                scale: None,
                learned: true,
                whiten: true,
            },
            // whitened, AM's and AMPCA's empirical covariance is shrunk
            // toward the pilot's (the identity there), a prior worth d²
            // accepted moves
            Self::AM {
                scale: "fixed".into(),
                rao_blackwell: false,
                whiten: true,
            },
            Self::AMPCA {
                components: None,
                whiten: true,
            },
            Self::HMC {
                step_size: hmc.step_size,
                steps: hmc.steps,
            },
            Self::KAMH {
                subsample_size: kamh.subsample.subsample_size,
                kernel: median.clone(),
                median_points: median_points(&kamh.subsample),
                gamma: None,
                scale: kamh.scale.value(),
                learned: learned(&kamh.scale),
                whiten: true,
            },
            Self::PCAKameleon {
                subsample_size: pca.subsample.subsample_size,
                kernel: median.clone(),
                median_points: median_points(&pca.subsample),
                components: pca.components,
                gamma: None,
                scale: pca.scale.value(),
                learned: learned(&pca.scale),
                refresh_kappa,
                whiten: true,
            },
            Self::FKAMH {
                features: 100,
                embedding: "cos".into(),
                feature_map: "rff".into(),
                kernel: median.clone(),
                gamma: None,
                eta: fkamh.eta.value(),
                learned: learned(&fkamh.eta),
                whiten: true,
            },
            Self::CKAM {
                subsample_size: ckam.subsample_size,
                kernel: median.clone(),
                gamma: None,
                scale: None,
                cycle_length: ckam.cycle_length,
                exploration_fraction: ckam.exploration_fraction,
                switch: match ckam.switch_rule {
                    SwitchRule::DelayedRejection => "delayed_rejection",
                    SwitchRule::AsWritten => "as_written",
                }
                .into(),
                adaptation: match ckam.cycle_adaptation {
                    CycleAdaptation::BetweenCycles => "between_cycles",
                    CycleAdaptation::WithinCycle => "within_cycle",
                }
                .into(),
                keep: match ckam.cycle_draws {
                    CycleDraws::EveryStep => "all",
                    CycleDraws::SamplingPhase => "sampling",
                }
                .into(),
                whiten: true,
            },
            Self::KMCLite {
                n: lite.subsample_size,
                sigma: None,
                cross_validate: lite.cross_validate,
                lam: None,
                step_size: kmc.step_size,
                steps: kmc.steps,
                kappa: power(lite.refit).unwrap_or(0.5),
                whiten: true,
                adapt_step_size: kmc.step_scale.is_some(),
                target_accept: KmcConfig::SCALE_FREE_TARGET_ACCEPT,
                step_factor_range: KmcConfig::SCALE_FREE_STEP_FACTOR_RANGE,
                // flat: a Gaussian base pulls trajectories back from the tails
                // (see `LiteSurrogateConfig::scale_free_ridge`)
                base: SurrogateBase::Flat,
                // see `KmcConfig::scale_free_whitening`
                rewhiten: true,
            },
            Self::KMCFinite {
                features: 100,
                kernel: median,
                lam: FiniteSurrogateConfig::SCALE_FREE_RIDGE,
                step_size: kmc.step_size,
                steps: kmc.steps,
                min_points: finite.min_points,
                whiten: true,
                adapt_step_size: kmc.step_scale.is_some(),
                target_accept: KmcConfig::SCALE_FREE_TARGET_ACCEPT,
                step_factor_range: KmcConfig::SCALE_FREE_STEP_FACTOR_RANGE,
                base: SurrogateBase::Student,
                rewhiten: true,
            },
        ]
    }

    /// Parses the JSON the Python classes write.
    pub fn from_json(json: &str) -> BuildResult<Self> {
        serde_json::from_str(json).map_err(|e| format!("invalid sampler settings: {e}"))
    }

    /// Runs `job` with this sampler's proposal type in dimension `dim`; the
    /// parameters are validated (by building chain 0's proposal) first.
    pub fn dispatch<J: Job>(&self, dim: usize, job: J) -> BuildResult<J::Output> {
        match self {
            Self::RandomWalk {
                scale: nu,
                learned,
                whiten,
            } => {
                let s = scale(nu.unwrap_or_else(|| Scale::optimal_for(dim)), *learned)?;
                let whiten = *whiten;
                checked(job, move |_, _| {
                    let mut config = RandomWalkConfig::default();
                    config.scale = Some(s.clone());
                    whitened(RandomWalk::new(dim, config), dim, whiten)
                })
            }
            Self::AM {
                scale: kind,
                rao_blackwell,
                whiten,
            } => {
                let learned = choice("scale", kind, &[("fixed", false), ("learned", true)])?;
                let (rb, whiten) = (*rao_blackwell, *whiten);
                checked(job, move |_, _| {
                    whitened(adaptive_metropolis(dim, learned, rb, whiten), dim, whiten)
                })
            }
            Self::AMPCA { components, whiten } => {
                let (m, whiten) = (components.unwrap_or(dim), *whiten);
                checked(job, move |_, _| {
                    let mut config = PrincipalComponentsConfig::default();
                    config.components = Some(m);
                    if whiten {
                        config.moments = MomentUpdate::Shrunk { prior_moves: None };
                    }
                    whitened(PrincipalComponents::new(dim, config), dim, whiten)
                })
            }
            Self::HMC { step_size, steps } => {
                let (eps, l) = (*step_size, *steps);
                let mut config = HmcConfig::default();
                config.step_size = eps;
                config.steps = l;
                checked(job, move |_, _| Hmc::new(dim, config).map_err(msg))
            }
            Self::KAMH {
                subsample_size,
                kernel,
                median_points,
                gamma,
                scale: nu,
                learned,
                whiten,
            } => {
                let gamma =
                    gamma.unwrap_or_else(|| SubsampleConfig::scale_free(dim).gamma.value(0));
                // whitened, a learned ν is bounded as in the Rust defaults
                let scale = if *whiten && *learned {
                    KamhConfig::scale_free_scale(*nu).map_err(msg)?
                } else {
                    scale(*nu, *learned)?
                };
                let family = KamhFamily {
                    dim,
                    config: subsample(*subsample_size, gamma, *median_points),
                    scale,
                    whiten: *whiten,
                };
                kernel.dispatch(family, job)
            }
            Self::PCAKameleon {
                subsample_size,
                kernel,
                median_points,
                components,
                gamma,
                scale: nu,
                learned,
                refresh_kappa,
                whiten,
            } => {
                let gamma = gamma
                    .unwrap_or_else(|| PcaKameleonConfig::scale_free(dim).subsample.gamma.value(0));
                let mut config = subsample(*subsample_size, gamma, *median_points);
                if let Some(kappa) = *refresh_kappa {
                    config.refresh = Refresh::Probability(AdaptProbability::Power { kappa });
                }
                let family = PcaKameleonFamily {
                    dim,
                    config,
                    components: *components,
                    scale: scale(*nu, *learned)?,
                    whiten: *whiten,
                };
                kernel.dispatch(family, job)
            }
            Self::FKAMH {
                features,
                embedding: name,
                feature_map,
                kernel,
                gamma,
                eta,
                learned,
                whiten,
            } => {
                let kernel = &kernel.resolved(dim, *whiten);
                let embedding = choice(
                    "embedding",
                    name,
                    &[("cos", Embedding::CosPhase), ("sincos", Embedding::SinCos)],
                )?;
                let eta = scale(*eta, *learned)?;
                let gamma = gamma.unwrap_or_else(|| FKamhConfig::scale_free(dim).gamma);
                let (features, whiten) = (*features, *whiten);
                match choice(
                    "feature_map",
                    feature_map,
                    &[("rff", false), ("fastfood", true)],
                )? {
                    false => {
                        let density = kernel.spectral()?;
                        fkamh(job, gamma, eta, whiten, move |rng| {
                            RandomFourierFeatures::new(
                                density.as_ref(),
                                dim,
                                features,
                                embedding,
                                rng,
                            )
                        })
                    }
                    true => {
                        let density = kernel.radial()?;
                        fkamh(job, gamma, eta, whiten, move |rng| {
                            Fastfood::new(density.as_ref(), dim, features, embedding, rng)
                        })
                    }
                }
            }
            Self::CKAM {
                subsample_size,
                kernel,
                gamma,
                scale: nu0,
                cycle_length,
                exploration_fraction,
                switch,
                adaptation,
                keep,
                whiten,
            } => {
                let kernel = kernel.resolved(dim, *whiten);
                let nu0 = nu0.unwrap_or_else(|| 2.0 * Scale::optimal_for(dim));
                let family = CkamFamily {
                    dim,
                    gamma: gamma.unwrap_or_else(|| CkamConfig::scale_free(dim).gamma),
                    subsample_size: *subsample_size,
                    nu: RobbinsMonro::new(nu0, 0.234, StepSchedule::Power { kappa: 0.75 })
                        .map_err(msg)?,
                    cycle_length: *cycle_length,
                    exploration_fraction: *exploration_fraction,
                    switch: choice(
                        "switch",
                        switch,
                        &[
                            ("delayed_rejection", SwitchRule::DelayedRejection),
                            ("as_written", SwitchRule::AsWritten),
                        ],
                    )?,
                    adaptation: choice(
                        "adaptation",
                        adaptation,
                        &[
                            ("between_cycles", CycleAdaptation::BetweenCycles),
                            ("within_cycle", CycleAdaptation::WithinCycle),
                        ],
                    )?,
                    draws: choice(
                        "keep",
                        keep,
                        &[
                            ("all", CycleDraws::EveryStep),
                            ("sampling", CycleDraws::SamplingPhase),
                        ],
                    )?,
                    whiten: *whiten,
                };
                kernel.dispatch(family, job)
            }
            Self::KMCLite {
                n,
                sigma,
                cross_validate,
                lam,
                step_size,
                steps,
                kappa,
                whiten,
                adapt_step_size,
                target_accept,
                step_factor_range,
                base,
                rewhiten,
            } => {
                let (n, lam, kappa, whiten, cv) = (*n, *lam, *kappa, *whiten, *cross_validate);
                let whitening = kmc_whitening(whiten, *rewhiten);
                let base = base.measure(whiten, dim)?;
                let walk = scale(Scale::optimal_for(dim), true)?;
                let factor = adapt_step_size.then_some((*target_accept, *step_factor_range));
                let config = kmc_config(*step_size, *steps, Some(walk), factor)?;
                checked(job, move |_, _| {
                    let mut lite = LiteSurrogateConfig::default();
                    lite.subsample_size = n;
                    lite.refit = AdaptProbability::Power { kappa };
                    lite.cross_validate = cv;
                    if sigma.is_none() {
                        lite.bandwidth = Bandwidth::MedianHeuristic {
                            max_points: n.min(100),
                        };
                    }
                    // σ = 1 is the placeholder the first fit replaces
                    let lam = lam.unwrap_or_else(|| LiteSurrogateConfig::scale_free_ridge(dim));
                    let model = LiteEstimator::new(sigma.unwrap_or(1.0), lam)
                        .map_err(msg)?
                        .with_base_measure(base)
                        .map_err(msg)?;
                    let surrogate = LiteSurrogate::new(model, dim, lite).map_err(msg)?;
                    whitened_with(KmcLite::new(surrogate, config.clone()), dim, whitening)
                })
            }
            Self::KMCFinite {
                features,
                kernel,
                lam,
                step_size,
                steps,
                min_points,
                whiten,
                adapt_step_size,
                target_accept,
                step_factor_range,
                base,
                rewhiten,
            } => {
                let density = kernel.resolved(dim, *whiten).spectral()?;
                let whitening = kmc_whitening(*whiten, *rewhiten);
                let base = base.measure(*whiten, dim)?;
                let (m, lam, min_points) = (*features, *lam, *min_points);
                let factor = adapt_step_size.then_some((*target_accept, *step_factor_range));
                let config = kmc_config(*step_size, *steps, None, factor)?;
                checked(
                    job,
                    move |seed, chain| -> BuildResult<Whitened<KmcFinite<RandomFourierFeatures>>> {
                        let phi = RandomFourierFeatures::new(
                            density.as_ref(),
                            dim,
                            m,
                            Embedding::CosPhase,
                            &mut feature_rng(seed, chain),
                        )
                        .map_err(msg)?;
                        let mut finite = FiniteSurrogateConfig::default();
                        finite.min_points = min_points;
                        let surrogate = FiniteSurrogate::new(
                            FiniteEstimator::new(phi, lam)
                                .and_then(|e| e.with_base_measure(base))
                                .map_err(msg)?,
                            finite,
                        )
                        .map_err(msg)?;
                        // re-whitening refits on the points learned so far
                        let surrogate = if whitening.rewhiten_fraction.is_some() {
                            surrogate.keeping_points()
                        } else {
                            surrogate
                        };
                        whitened_with(KmcFinite::new(surrogate, config.clone()), dim, whitening)
                    },
                )
            }
        }
    }
}

/// The base measure of a KMC surrogate, by its Python name: the surrogate
/// is fitted as a correction to it, and falls back to it where its history
/// says little.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SurrogateBase {
    /// None ([`BaseMeasure::Flat`]).
    #[default]
    Flat,
    /// N(0, I) in the whitened coordinates ([`BaseMeasure::StandardNormal`]).
    Gaussian,
    /// The Student t with N(0, I)'s curvature at the origin in the whitened
    /// coordinates, ν = [`FiniteSurrogateConfig::SCALE_FREE_BASE_DOF_PER_DIM`]·d
    /// ([`BaseMeasure::StudentT`]).
    Student,
}

impl SurrogateBase {
    /// The base measure in dimension `dim`; the Gaussian and Student bases
    /// live in whitened coordinates, so without whitening they are refused.
    fn measure(self, whiten: bool, dim: usize) -> BuildResult<BaseMeasure> {
        match (self, whiten) {
            (Self::Flat, _) => Ok(BaseMeasure::Flat),
            (Self::Gaussian, true) => Ok(BaseMeasure::StandardNormal),
            (Self::Student, true) => Ok(BaseMeasure::StudentT {
                dof: FiniteSurrogateConfig::SCALE_FREE_BASE_DOF_PER_DIM * dim as f64,
            }),
            (Self::Gaussian, false) | (Self::Student, false) => Err(format!(
                "`base=\"{}\"` needs `whiten=True`: that base measure lives in the whitened \
                 coordinates (use `base=\"flat\"` in the target's own units)",
                if self == Self::Gaussian {
                    "gaussian"
                } else {
                    "student"
                }
            )),
        }
    }
}

/// AM with ν fixed at 2.38/√d or learned toward 0.234, and empirical (fixed
/// ν) or stochastic-approximation (learned ν) moments, or Rao–Blackwellised
/// ones; whitened, the empirical moments shrunk toward the identity
/// ([`MomentUpdate::Shrunk`]) for fixed and learned ν alike. Steps 1/√t,
/// ε = 10⁻⁶, identity for the first 2d updates.
fn adaptive_metropolis(
    dim: usize,
    learned: bool,
    rao_blackwell: bool,
    whiten: bool,
) -> kameleon_samplers::Result<AdaptiveMetropolis> {
    let schedule = StepSchedule::InverseSqrt;
    let learned_nu = || RobbinsMonro::new(Scale::optimal_for(dim), 0.234, schedule);
    let shrunk = MomentUpdate::Shrunk { prior_moves: None };
    let config = match (learned, rao_blackwell) {
        // whitened, the pilot's covariance (the identity) is a prior for
        // the empirical one, which stochastic approximation (a memory of
        // ~√t steps) would forget at once
        (false, false) if whiten => AdaptiveMetropolisConfig::default().with_moments(shrunk)?,
        (true, false) if whiten => AdaptiveMetropolisConfig::default()
            .with_moments(shrunk)?
            .with_scale(Scale::Adaptive(learned_nu()?))?,
        (false, false) => AdaptiveMetropolisConfig::default(),
        (true, false) => AdaptiveMetropolisConfig::learned_scale(dim, schedule)?,
        (false, true) => AdaptiveMetropolisConfig::rao_blackwellised(schedule)?,
        (true, true) => AdaptiveMetropolisConfig::rao_blackwellised(schedule)?
            .with_scale(Scale::Adaptive(learned_nu()?))?,
    };
    AdaptiveMetropolis::new(dim, config)
}

/// KMC's trajectory ranges, random-walk scale (`None`: 2.38/√d) and, if
/// `learned_factor` = (target acceptance, range), a step factor learned
/// toward that acceptance within that range.
fn kmc_config(
    step_size: (f64, f64),
    steps: (u32, u32),
    walk_scale: Option<Scale>,
    learned_factor: Option<(f64, (f64, f64))>,
) -> BuildResult<KmcConfig> {
    let mut config = KmcConfig::default();
    config.step_size = step_size;
    config.steps = steps;
    config.walk_scale = walk_scale;
    match learned_factor {
        Some((target_accept, range)) => config
            .with_learned_step_factor(target_accept, range)
            .map_err(msg),
        None => Ok(config),
    }
}

fn scale_free_target_accept() -> f64 {
    KmcConfig::SCALE_FREE_TARGET_ACCEPT
}

fn scale_free_step_factor_range() -> (f64, f64) {
    KmcConfig::SCALE_FREE_STEP_FACTOR_RANGE
}

/// F-KAMH with exploration noise γ and scale η on the feature map `draw`
/// makes from chain k's feature stream.
fn fkamh<J: Job, F>(
    job: J,
    gamma: f64,
    eta: Scale,
    whiten: bool,
    draw: impl Fn(&mut rand_xoshiro::Xoshiro256PlusPlus) -> Result<F, FeatureError> + Sync,
) -> BuildResult<J::Output>
where
    F: FeatureMap,
    Whitened<FKamh<F>>: Sampler,
{
    checked(job, move |seed, chain| {
        let phi = draw(&mut feature_rng(seed, chain)).map_err(msg)?;
        let dim = phi.dim_in();
        let mut config = FKamhConfig::default();
        config.gamma = gamma;
        config.eta = eta.clone();
        whitened(FKamh::new(phi, config), dim, whiten)
    })
}

/// Validates the settings by building chain 0's proposal, then runs `job`.
fn checked<J: Job, P: Sampler>(
    job: J,
    build: impl Fn(u64, u64) -> BuildResult<P> + Sync,
) -> BuildResult<J::Output> {
    build(0, 0)?;
    Ok(job.run(&build))
}
