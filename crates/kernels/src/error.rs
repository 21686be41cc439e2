//! The error type of the kernels crate.

/// What can go wrong when building or evaluating a kernel.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// A parameter was non-finite or outside its domain.
    #[error("invalid kernel parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// The value that was given.
        value: f64,
        /// What the parameter must satisfy.
        reason: &'static str,
    },
    /// Points of different dimensions were combined.
    #[error("dimension mismatch: expected {expected}, got {got}")]
    DimensionMismatch {
        /// The dimension that was expected.
        expected: usize,
        /// The dimension that was given.
        got: usize,
    },
    /// A bandwidth heuristic needs at least two points.
    #[error("need at least 2 points, got {got}")]
    TooFewPoints {
        /// The number of points that were available.
        got: usize,
    },
    /// A point contained a NaN or an infinite coordinate.
    #[error("point {index} has a non-finite coordinate")]
    NonFinitePoint {
        /// The row of the offending point.
        index: usize,
    },
    /// The median pairwise distance was zero (e.g. all points equal), which
    /// gives no usable bandwidth.
    #[error("the median pairwise distance is zero (more than half of the point pairs coincide)")]
    ZeroMedianDistance,
    /// The median pairwise distance overflowed (finite coordinates of
    /// magnitude beyond about 1e154), which gives no usable bandwidth.
    #[error(
        "the median pairwise distance overflows (the coordinates are too large: rescale the points)"
    )]
    MedianDistanceOverflow,
    /// A buffer sized by the caller (e.g. the pairwise distances of the
    /// median heuristic) cannot be allocated.
    #[error(transparent)]
    BufferTooLarge(#[from] kameleon_core::buffer::BufferTooLarge),
}

/// Checks that a parameter is finite and strictly positive.
pub(crate) fn positive(name: &'static str, value: f64) -> Result<f64, KernelError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(KernelError::InvalidParameter {
            name,
            value,
            reason: "must be finite and > 0",
        })
    }
}

/// Checks a length-scale ℓ: finite and positive, and such that the powers
/// the kernels compute with (ℓ², ℓ⁴ and their inverses, for values, slopes
/// and curvatures) are finite and positive too. A length-scale whose square
/// under- or overflows (roughly outside 1e-77 … 1e77) would otherwise make
/// every kernel value degenerate without any error.
pub(crate) fn check_length_scale(name: &'static str, value: f64) -> Result<f64, KernelError> {
    let l = positive(name, value)?;
    let l4 = (l * l) * (l * l);
    if l4.is_finite() && l4 > 0.0 && (1.0 / l4).is_finite() {
        Ok(l)
    } else {
        Err(KernelError::InvalidParameter {
            name,
            value,
            reason: "its square and fourth power (and their inverses) must be finite and > 0",
        })
    }
}

/// The result of building a kernel from the parameter `name` = `value` of
/// a paper's convention, with a refused length-scale (derived from it)
/// reported against that parameter, the one the caller gave.
pub(crate) fn in_terms_of<T>(
    name: &'static str,
    value: f64,
    built: Result<T, KernelError>,
) -> Result<T, KernelError> {
    built.map_err(|err| match err {
        KernelError::InvalidParameter {
            name: "length_scale",
            ..
        } => KernelError::InvalidParameter {
            name,
            value,
            reason: "gives a length-scale the kernel refuses (it must be finite and > 0, with \
                     a finite and positive square, fourth power and inverses)",
        },
        other => other,
    })
}

/// Checks that a quantity derived from the parameter `name` (e.g. `2ν/ℓ²`)
/// and its square are finite and positive.
pub(crate) fn derived_positive(
    name: &'static str,
    value: f64,
    derived: f64,
) -> Result<(), KernelError> {
    let squared = derived * derived;
    if squared.is_finite() && squared > 0.0 && derived > 0.0 {
        Ok(())
    } else {
        Err(KernelError::InvalidParameter {
            name,
            value,
            reason: "gives a derived scale (or its square) that is not finite and > 0",
        })
    }
}

/// Checks that a parameter is finite and non-negative.
pub(crate) fn non_negative(name: &'static str, value: f64) -> Result<f64, KernelError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(KernelError::InvalidParameter {
            name,
            value,
            reason: "must be finite and >= 0",
        })
    }
}
