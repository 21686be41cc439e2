//! Gradient-free kernel adaptive MCMC samplers on one Metropolis–Hastings engine.
//!
//! ```
//! use kameleon_samplers::{FnTarget, RandomWalk, RunConfig, run_chain};
//! let target = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + x[1] * x[1]));
//! let chain = run_chain(&target, RandomWalk::new(2)?, &[0.0, 0.0], RunConfig::new(500, 2000), 42)?;
//! println!("{} samples, mean {:?}, acceptance {:.2}", chain.len(), chain.mean(), chain.acceptance_rate());
//! # Ok::<(), kameleon_samplers::SamplerError>(())
//! ```
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

pub use adaptation::{
    AdaptProbability, History, RobbinsMonro, RunningMoments, Scale, StepSchedule, StochasticMoments,
};
pub use am::{AdaptiveMetropolis, MomentEstimator};
pub use chain::{
    AdaptationStop, Chain, Progress, ProgressFn, Run, RunConfig, chain_rng, run_chain, run_chains,
};
pub use ckam::{Ckam, CycleAdaptation, SwitchRule, run_ckam, run_ckam_with_burn_in};
pub use covariance::ProposalCovariance;
pub use engine::{
    AdaptationSummary, KeptStates, MetropolisHastings, Proposal, StepInfo, StepOutcome,
};
pub use ensemble::{
    Ensemble, EnsembleConfig, EnsembleRun, StretchFactor, initial_ball, run_ensemble,
    run_ensemble_with,
};
pub use error::{CheckpointProblem, Result, SamplerError};
pub use fkamh::FKamh;
pub use habc::{Habc, HabcConfig, SyntheticLikelihood};
pub use hmc::{HamiltonianMove, Hmc};
pub use kameleon_core::{
    FnTarget, IsotropicGaussianPrior, LogPrior, SummarySimulator, Target, TargetError,
};
pub use kamh::{Bandwidth, Gamma, Kamh, KamhConfig, LengthScale, Refresh, SubsampleConfig};
pub use kamh_covariance::KamhCovariance;
pub use kmc::{
    CurrentDensity, FiniteSurrogate, Kmc, KmcFinite, KmcLite, KmcSurrogate, LiteSurrogate,
};
pub use pca::PrincipalComponents;
pub use pca_kameleon::{PcaKameleon, PcaKameleonConfig};
pub use random_walk::RandomWalk;
