//! Gradient-free kernel adaptive MCMC samplers. Under construction.

pub use kameleon_targets::Target;
