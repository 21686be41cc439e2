//! The error type of this crate.

use thiserror::Error;

/// Why a diagnostic could not be computed.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum DiagnosticsError {
    /// A sample, chain or argument list was empty.
    #[error("empty input: {0}")]
    Empty(&'static str),
    /// Too few draws for the requested diagnostic.
    #[error("too few draws: {what} needs at least {needed}, got {got}")]
    TooFewDraws {
        /// Which diagnostic complained.
        what: &'static str,
        /// Minimum number of draws (per chain where applicable).
        needed: usize,
        /// Number of draws supplied.
        got: usize,
    },
    /// A NaN or infinite value was found in the input.
    #[error("non-finite value in {0}")]
    NonFinite(&'static str),
    /// The series has zero variance, so an ESS or R-hat is undefined.
    #[error("zero variance: {0} is undefined for a constant series")]
    ZeroVariance(&'static str),
    /// Lengths of slices do not agree with each other or with the dimension.
    #[error("dimension mismatch: {0}")]
    DimensionMismatch(String),
    /// An argument is outside its valid range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, DiagnosticsError>;

/// Checks that every value is finite.
pub(crate) fn check_finite(x: &[f64], what: &'static str) -> Result<()> {
    if x.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(DiagnosticsError::NonFinite(what))
    }
}

/// Checks that a row-major buffer holds a whole number of rows of width `d` and at least one row;
/// returns the number of rows.
pub(crate) fn rows(samples: &[f64], d: usize, what: &'static str) -> Result<usize> {
    if d == 0 {
        return Err(DiagnosticsError::InvalidArgument(format!(
            "{what}: dimension d must be positive"
        )));
    }
    if samples.is_empty() {
        return Err(DiagnosticsError::Empty(what));
    }
    if !samples.len().is_multiple_of(d) {
        return Err(DiagnosticsError::DimensionMismatch(format!(
            "{what}: length {} is not a multiple of d = {d}",
            samples.len()
        )));
    }
    Ok(samples.len() / d)
}
