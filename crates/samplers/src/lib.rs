//! Gradient-free kernel adaptive MCMC samplers on one Metropolis–Hastings engine.
//!
//! ```
//! use kameleon_samplers::{FnTarget, RandomWalk, RandomWalkConfig, RunConfig, run_chain};
//! let target = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + x[1] * x[1]));
//! let sampler = RandomWalk::new(2, RandomWalkConfig::default())?;
//! let chain = run_chain(&target, sampler, &[0.0, 0.0], RunConfig::new(500, 2000), 42)?;
//! println!("{} samples, mean {:?}, acceptance {:.2}", chain.len(), chain.mean(), chain.acceptance_rate());
//! # Ok::<(), kameleon_samplers::SamplerError>(())
//! ```
//!
//! # Configuring a sampler
//!
//! Every sampler is built one way: `Sampler::new(components, config)`. The
//! components are what it cannot run without and has no default for — its
//! dimension, kernel, feature map or surrogate — and the config is a plain
//! struct `SamplerConfig` of documented public fields with a sensible
//! [`Default`], a `paper(…)` constructor where a paper fixes the settings,
//! and chainable setters `with_<field>(value)` that check the value and
//! return a [`Result`] (or `Self` where no value is invalid). `new` checks
//! the whole config again (cross-field rules included), so fields may also
//! be assigned directly on a value. Config structs are
//! `#[non_exhaustive]`: start from `Default::default()` or `paper(…)`.
//! The rule has no exception for simple samplers: even the random walk
//! takes a [`RandomWalkConfig`], so going from a fixed to an adaptive scale
//! changes a setting, not the constructor. Data given to a built sampler
//! (an oracle sample, a pilot history) goes through methods on the sampler,
//! such as [`Kmc::with_oracle_points`] and [`Kamh::set_subsample`].
//!
//! | sampler | components | config |
//! |---|---|---|
//! | [`RandomWalk`] | dim | [`RandomWalkConfig`] |
//! | [`AdaptiveMetropolis`] | dim | [`AdaptiveMetropolisConfig`] |
//! | [`PrincipalComponents`] | dim | [`PrincipalComponentsConfig`] |
//! | [`Hmc`] | dim | [`HmcConfig`] |
//! | [`Kamh`] | dim, kernel | [`KamhConfig`] |
//! | [`PcaKameleon`] | dim, kernel | [`PcaKameleonConfig`] |
//! | [`Ckam`] | dim, kernel | [`CkamConfig`] |
//! | [`FKamh`] | feature map | [`FKamhConfig`] |
//! | [`KmcLite`], [`KmcFinite`] | surrogate | [`KmcConfig`] |
//! | [`LiteSurrogate`] | estimator, dim | [`LiteSurrogateConfig`] |
//! | [`FiniteSurrogate`] | estimator | [`FiniteSurrogateConfig`] |
//! | [`Habc`] | synthetic likelihood, prior | [`HabcConfig`] |
//! | [`Ensemble`] | target, start, seed | [`EnsembleConfig`] |
//! | [`Whitened`] | any proposal, dim | [`WhiteningConfig`] |
//!
//! How long a chain runs and what it records is the separate [`RunConfig`].
//!
//! # Scale-free sampling
//!
//! The lengths in a sampler's config (γ, bandwidths, step sizes) are in the
//! target's units. [`Whitened`] wraps any proposal: a pilot (a
//! finite-difference Hessian at the start, then a random walk re-estimating
//! its covariance in windows) learns the target's location and covariance,
//! then the wrapped
//! proposal runs in coordinates where the target is roughly N(0, I), so its
//! lengths are in standard deviations — what the Python package does by
//! default for every gradient-free sampler.
//!
//! # Architecture
//!
//! Every sampler is a [`Proposal`] run by the one engine [`MetropolisHastings`]
//! (see the `engine` module docs for the exact step). Adaptation is built from
//! the small parts in [`adaptation`]: [`StepSchedule`], [`RobbinsMonro`],
//! [`Scale`], [`AdaptProbability`], [`RunningMoments`] (Welford) and
//! [`History`] (subsampling without replacement). [`Run`] drives the engine,
//! records a [`Chain`] (burn-in, thinning, counters) and checkpoints to a file;
//! [`run_chain`] and [`run_chains`] (rayon, thread-count independent) are the
//! one-call entry points.
//!
//! Kernel adaptive samplers: [`Kamh`] (KAMH / MCMC Kameleon, configured by
//! [`KamhConfig`]; its covariance γ²I + ν²MHMᵀ at a point is the reusable
//! [`KamhCovariance`]) and [`PcaKameleon`] (the arXiv Appendix C mixture of
//! kernel principal directions).
//!
//! [`Hmc`] and Kernel Hamiltonian Monte Carlo ([`KmcLite`], [`KmcFinite`],
//! see the [`kmc`] module) share one leapfrog move, [`HamiltonianMove`]; KMC
//! plugs in a score-matching surrogate gradient learned from the chain.
//!
//! [`ensemble`] is the affine-invariant ensemble sampler with the stretch
//! move (Goodman & Weare 2010, as in emcee), a gradient-free baseline that
//! runs W walkers instead of one chain: [`run_ensemble`], configured by
//! [`EnsembleConfig`].
//!
//! [`Habc`] is the Hamiltonian ABC baseline (Meeds et al. 2015): a friction
//! integrator on SPSA gradients of a sticky-random-number
//! [`SyntheticLikelihood`], with no MH correction — biased by design.

pub mod adaptation;
mod am;
mod chain;
pub mod checkpoint;
pub mod ckam;
mod covariance;
pub mod engine;
pub mod ensemble;
mod error;
pub mod fkamh;
pub mod habc;
mod hmc;
mod kamh;
mod kamh_covariance;
pub mod kmc;
mod pca;
mod pca_kameleon;
mod random_walk;
pub mod whitening;

pub use adaptation::{
    AdaptProbability, History, RobbinsMonro, RunningMoments, Scale, StepSchedule, StochasticMoments,
};
pub use am::{AdaptiveMetropolis, AdaptiveMetropolisConfig, MomentEstimator, MomentUpdate};
pub use chain::{
    AdaptationStop, Chain, MAX_CHAIN_INDEX, Progress, ProgressFn, Run, RunConfig, advance_lockstep,
    chain_rng, run_chain, run_chains,
};
pub use ckam::{
    Ckam, CkamConfig, CycleAdaptation, CycleDraws, SwitchRule, run_ckam, run_ckam_with_burn_in,
};
pub use covariance::ProposalCovariance;
pub use engine::{
    AdaptationSummary, CoordinateChange, KeptStates, MetropolisHastings, PendingStep, Proposal,
    StepInfo, StepOutcome,
};
pub use ensemble::{
    Ensemble, EnsembleConfig, EnsembleRun, StretchFactor, initial_ball, run_ensemble,
    run_ensemble_with,
};
pub use error::{CheckpointProblem, Result, SamplerError};
pub use fkamh::{FKamh, FKamhConfig};
pub use habc::{Habc, HabcConfig, SyntheticLikelihood};
pub use hmc::{HamiltonianMove, Hmc, HmcConfig};
pub use kameleon_core::{
    FnTarget, IsotropicGaussianPrior, LogPrior, SummarySimulator, Target, TargetError,
};
pub use kamh::{Bandwidth, Gamma, Kamh, KamhConfig, LengthScale, Refresh, SubsampleConfig};
pub use kamh_covariance::KamhCovariance;
pub use kmc::{
    CurrentDensity, FiniteSurrogate, FiniteSurrogateConfig, Kmc, KmcConfig, KmcFinite, KmcLite,
    KmcSurrogate, LiteSurrogate, LiteSurrogateConfig,
};
pub use pca::{PrincipalComponents, PrincipalComponentsConfig};
pub use pca_kameleon::{PcaKameleon, PcaKameleonConfig};
pub use random_walk::{RandomWalk, RandomWalkConfig};
pub use whitening::{Whitened, WhiteningConfig};
