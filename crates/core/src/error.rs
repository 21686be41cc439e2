//! The error type of targets and of the operations on them.

/// What can go wrong when building or querying a target.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// The target does not provide this optional capability.
    #[error("this target does not support {0}")]
    Unsupported(&'static str),
    /// A parameter was non-finite or outside its domain.
    #[error("invalid target parameter `{name}`: {reason}")]
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// What the parameter must satisfy.
        reason: String,
    },
    /// Points or parameters of different dimensions were combined.
    #[error("dimension mismatch: expected {expected}, got {got}")]
    DimensionMismatch {
        /// The dimension that was expected.
        expected: usize,
        /// The dimension that was given.
        got: usize,
    },
    /// Embedded or user-supplied data could not be parsed or is unusable.
    #[error("invalid data: {0}")]
    Data(String),
    /// A numerical step (e.g. a Cholesky factorisation) failed.
    #[error("numerical failure: {0}")]
    Numerical(String),
}
