//! The error type of the features crate.

/// What can go wrong when building or using a feature map.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FeatureError {
    /// A dimension was zero.
    #[error("the {what} must be at least 1")]
    ZeroDimension {
        /// Which dimension.
        what: &'static str,
    },
    /// The [sin, cos] embedding needs an even number of features.
    #[error("the [sin, cos] embedding needs an even output dimension, got {dim_out}")]
    OddOutputDimension {
        /// The output dimension that was asked for.
        dim_out: usize,
    },
    /// Sizes of inputs, outputs or stored parameters do not fit together.
    #[error("dimension mismatch in {what}: expected {expected}, got {got}")]
    DimensionMismatch {
        /// What was being checked.
        what: &'static str,
        /// The size that was expected.
        expected: usize,
        /// The size that was given.
        got: usize,
    },
    /// A parameter (or a drawn frequency) was non-finite or outside its domain.
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// The offending value.
        value: f64,
        /// What the parameter must satisfy.
        reason: &'static str,
    },
    /// The map's parameters (sized by the dimensions asked for) cannot be
    /// allocated.
    #[error(transparent)]
    BufferTooLarge(#[from] kameleon_core::buffer::BufferTooLarge),
}

/// Checks that `got == expected`.
pub(crate) fn check_len(
    what: &'static str,
    expected: usize,
    got: usize,
) -> Result<(), FeatureError> {
    if expected == got {
        Ok(())
    } else {
        Err(FeatureError::DimensionMismatch {
            what,
            expected,
            got,
        })
    }
}

/// Checks that every value is finite.
pub(crate) fn check_finite(name: &'static str, values: &[f64]) -> Result<(), FeatureError> {
    match values.iter().find(|v| !v.is_finite()) {
        None => Ok(()),
        Some(&value) => Err(FeatureError::InvalidParameter {
            name,
            value,
            reason: "must be finite",
        }),
    }
}
