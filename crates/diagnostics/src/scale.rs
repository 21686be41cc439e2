//! Exact power-of-two rescaling of draws far from unit scale, so that the sums of squares and
//! products behind variances, autocovariances and norms neither overflow nor underflow.

use std::borrow::Cow;

/// Draws whose largest magnitude lies within 2^±`NEAR_UNIT` are used as they are: the centred
/// FFT of n such draws stays below n·2^(NEAR_UNIT+1), its square below 2^1024 for any n that fits
/// in memory, and their squares stay far above the smallest normal double.
const NEAR_UNIT: f64 = 64.0;

/// The exponent e = ⌊log₂ max |v|⌋ of the largest magnitude over `chains`, when it lies outside
/// 2^±64; `None` otherwise and for draws that are all 0. Multiplying by 2^−e (see [`times_pow2`])
/// brings the largest magnitude to [1, 2).
pub(crate) fn far_exponent(chains: &[&[f64]]) -> Option<i32> {
    let largest = chains
        .iter()
        .flat_map(|c| c.iter())
        .fold(0.0_f64, |m, v| m.max(v.abs()));
    let exponent = largest.log2().floor();
    if largest == 0.0 || exponent.abs() <= NEAR_UNIT {
        return None;
    }
    Some(exponent as i32)
}

/// v·2^k for |k| ≤ 1074, exact unless the result leaves the range of normal doubles. Applied in
/// two halves: 2^±1074 itself is not a finite double.
pub(crate) fn times_pow2(v: f64, k: i32) -> f64 {
    v * 2.0_f64.powi(k / 2) * 2.0_f64.powi(k - k / 2)
}

/// The values times 2^k ([`times_pow2`]).
pub(crate) fn scaled(values: &[f64], k: i32) -> Vec<f64> {
    values.iter().map(|&v| times_pow2(v, k)).collect()
}

/// The series at unit scale: x·2^−e and e when [`far_exponent`] finds an exponent e, else x
/// itself and 0.
pub(crate) fn at_unit_scale(x: &[f64]) -> (Cow<'_, [f64]>, i32) {
    match far_exponent(&[x]) {
        Some(e) => (Cow::Owned(scaled(x, -e)), e),
        None => (Cow::Borrowed(x), 0),
    }
}
