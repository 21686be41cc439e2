//! Small helpers shared by the synthetic targets.

use crate::TargetError;
use kameleon_core::buffer::{BufferTooLarge, ensure_room};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;

/// log(2π).
pub(crate) const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// Errors unless `got == expected`.
pub(crate) fn check_dim(expected: usize, got: usize) -> Result<(), TargetError> {
    if expected == got {
        Ok(())
    } else {
        Err(TargetError::DimensionMismatch { expected, got })
    }
}

/// Errors unless `value` is finite and `> 0`.
pub(crate) fn check_positive(name: &'static str, value: f64) -> Result<(), TargetError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(TargetError::InvalidParameter {
            name,
            reason: format!("must be finite and positive, got {value}"),
        })
    }
}

/// Errors unless `value` is finite.
pub(crate) fn check_finite(name: &'static str, value: f64) -> Result<(), TargetError> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(TargetError::InvalidParameter {
            name,
            reason: format!("must be finite, got {value}"),
        })
    }
}

/// Fills `out` with independent standard normal draws.
pub(crate) fn fill_standard_normal(rng: &mut dyn Rng, out: &mut [f64]) {
    for v in out.iter_mut() {
        *v = rng.sample(StandardNormal);
    }
}

/// The error for a buffer that cannot be allocated, attributed to the
/// parameter `name` that sizes it.
pub(crate) fn too_large(name: &'static str) -> impl Fn(BufferTooLarge) -> TargetError {
    move |err| TargetError::InvalidParameter {
        name,
        reason: err.to_string(),
    }
}

/// Checks that a point of dimension `dim` can be allocated: a target whose
/// points cannot exist (e.g. `dim = usize::MAX`) is refused at construction,
/// not when a sampler asks for its first point.
pub(crate) fn check_point_dim(dim: usize) -> Result<(), TargetError> {
    check_allocatable("dim", "a point of the target, d values", &[dim])
}

/// Checks that a buffer of the product of `factors` values (`what`, sized
/// by the parameter `name`) can be allocated ([`ensure_room`]), as a
/// [`TargetError`] naming `name`.
pub(crate) fn check_allocatable(
    name: &'static str,
    what: &'static str,
    factors: &[usize],
) -> Result<(), TargetError> {
    ensure_room(what, &[factors]).map_err(too_large(name))
}
