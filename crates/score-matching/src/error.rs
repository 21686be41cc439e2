//! The error type of the score-matching crate.

use kameleon_core::buffer::BufferTooLarge;
use kameleon_kernels::KernelError;

/// What can go wrong when building, fitting or evaluating a score-matching model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScoreMatchingError {
    /// A hyperparameter was non-finite or outside its domain.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// The value that was given.
        value: f64,
        /// What the parameter must satisfy.
        reason: &'static str,
    },
    /// Points or buffers of the wrong dimension were given.
    #[error("dimension mismatch: expected {expected}, got {got}")]
    DimensionMismatch {
        /// The dimension that was expected.
        expected: usize,
        /// The dimension that was given.
        got: usize,
    },
    /// Too few points to fit or to cross-validate.
    #[error("too few points: need at least {needed}, got {got}")]
    TooFewPoints {
        /// The minimum number of points.
        needed: usize,
        /// The number of points that was given.
        got: usize,
    },
    /// A point contained NaN or an infinite coordinate.
    #[error("point {index} has a non-finite coordinate")]
    NonFinitePoint {
        /// The row of the offending point (0 for a single point).
        index: usize,
    },
    /// The regularised system was not numerically positive definite
    /// (increase λ; the lite estimator's system also loses precision with
    /// the points' distance from the origin).
    #[error(
        "the regularised system is not numerically positive definite (increase lambda; a lite \
         fit also loses precision as the points move away from the origin: centre them)"
    )]
    NotPositiveDefinite,
    /// The feature map's derivatives at a point (or their squares, which
    /// the system sums) are not finite: the features' arguments overflow.
    #[error(
        "the feature map's derivatives at a point are not finite (the point is too large for \
         the features' frequencies: rescale the points)"
    )]
    NonFiniteFeatures,
    /// A kernel could not be built.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A buffer sized by the caller (the n × n system of a lite fit, the
    /// m × m system of a finite one) cannot be allocated.
    #[error(transparent)]
    BufferTooLarge(#[from] BufferTooLarge),
}

/// Checks that a parameter is finite and strictly positive.
pub(crate) fn positive(name: &'static str, value: f64) -> Result<f64, ScoreMatchingError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(ScoreMatchingError::InvalidParameter {
            name,
            value,
            reason: "must be finite and > 0",
        })
    }
}

/// Checks that every point (row) has `dim` finite coordinates.
pub(crate) fn check_points(
    points: faer::MatRef<'_, f64>,
    dim: usize,
) -> Result<(), ScoreMatchingError> {
    if points.ncols() != dim {
        return Err(ScoreMatchingError::DimensionMismatch {
            expected: dim,
            got: points.ncols(),
        });
    }
    for i in 0..points.nrows() {
        if (0..dim).any(|l| !points[(i, l)].is_finite()) {
            return Err(ScoreMatchingError::NonFinitePoint { index: i });
        }
    }
    Ok(())
}
