//! The error type of the samplers crate.

use kameleon_targets::TargetError;

/// What can go wrong when building, running, checkpointing or resuming a sampler.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// A parameter was non-finite or outside its domain.
    #[error("invalid sampler parameter `{name}`: {reason}")]
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// What the parameter must satisfy.
        reason: String,
    },
    /// Points, targets or proposals of different dimensions were combined.
    #[error("dimension mismatch: expected {expected}, got {got}")]
    DimensionMismatch {
        /// The dimension that was expected.
        expected: usize,
        /// The dimension that was given.
        got: usize,
    },
    /// The starting point has a log density that is not finite (outside the
    /// support, or NaN): a chain cannot start there.
    #[error("the starting point has log density {0}; start inside the support")]
    StartOutsideSupport(f64),
    /// The target lacks a capability the sampler needs (e.g. a gradient for HMC).
    #[error(transparent)]
    Target(#[from] TargetError),
    /// A covariance matrix could not be Cholesky-factored even after jitter.
    #[error("covariance is not positive definite even after adding jitter {jitter:e}")]
    NotPositiveDefinite {
        /// The largest jitter tried.
        jitter: f64,
    },
    /// Reading or writing a checkpoint file failed.
    #[error("checkpoint i/o: {0}")]
    Io(#[from] std::io::Error),
    /// A checkpoint could not be encoded or decoded.
    #[error("checkpoint encoding: {0}")]
    Encoding(#[from] postcard::Error),
    /// A checkpoint was written by an incompatible version of this crate.
    #[error("checkpoint format version {found}, this build reads version {expected}")]
    CheckpointVersion {
        /// The version this build writes and reads.
        expected: u32,
        /// The version found in the file.
        found: u32,
    },
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, SamplerError>;

/// Returns an [`SamplerError::InvalidParameter`] unless `ok`.
pub(crate) fn ensure(ok: bool, name: &'static str, reason: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(SamplerError::InvalidParameter {
            name,
            reason: reason.to_string(),
        })
    }
}

/// Returns [`SamplerError::DimensionMismatch`] unless `got == expected`.
pub(crate) fn check_dim(expected: usize, got: usize) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(SamplerError::DimensionMismatch { expected, got })
    }
}
