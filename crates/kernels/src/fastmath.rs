//! Elementary functions that the compiler vectorises in loops over slices.
//!
//! Kernel sums (the KAMH gradient matrix, the KMC lite gradient) need `exp`
//! of n arguments per evaluation; the scalar libm call costs more than all
//! the arithmetic around it and blocks vectorisation of the loop.
//!
//! [`exp`] is branch-free: it reduces `x = k ln 2 + r` with
//! `k = round(x / ln 2)` (round-to-nearest by the 1.5·2⁵² shift trick) and
//! `|r| ≤ ln 2 / 2`, two-part Cody–Waite constants for `ln 2`, evaluates
//! `exp(r)` by its Taylor polynomial of degree 13 (truncation error
//! `|r|¹⁴/14! < 5·10⁻¹⁸`, far below an ulp), and scales by `2ᵏ` as the
//! product of two powers of two built from the exponent bits, so results in
//! the subnormal range are right too. The error is within a few ulp of the
//! correctly rounded value (tested against `f64::exp`).
//!
//! [`sin_cos`] (and [`sin`], [`cos`]) reduce `x = k π/2 + r` with
//! `k = round(2x/π)` (the same shift trick) and `|r| ≤ π/4`, using a
//! three-part Cody–Waite split of `π/2` (two 33-bit parts, so `k · part` is
//! exact for `|k| < 2²⁰`, and a full-precision tail); evaluate `sin r` and
//! `cos r` by their Taylor polynomials of degree 17 and 18 (truncation
//! error below `(π/4)¹⁹/19! < 10⁻¹⁹`); and pick and negate the pair by the
//! quadrant `k mod 4` with bit operations, no branches. Accurate to 2 ulp
//! (absolute error 2⁻⁵³ near the zeros) for `|x| ≤` [`SIN_COS_MAX_ARG`]
//! (≈ 1.6·10⁶); outside, and for NaN, both are NaN, so a loop over a slice
//! can check its arguments once (a vectorisable max) and call libm instead.

/// `1.5 · 2⁵²`: adding it rounds a double of magnitude < 2⁵¹ to an integer
/// held in the low mantissa bits.
const SHIFT: f64 = 6_755_399_441_055_744.0;
/// `ln 2` split so that `k · LN2_HI` is exact for |k| < 2¹¹.
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
/// Below this `exp` is 0 in double precision; above [`MAX_ARG`] it is +∞.
const MIN_ARG: f64 = -746.0;
const MAX_ARG: f64 = 709.79;
/// `1/k!` for k = 13 down to 2.
const INV_FACTORIALS: [f64; 12] = [
    1.0 / 6_227_020_800.0,
    1.0 / 479_001_600.0,
    1.0 / 39_916_800.0,
    1.0 / 3_628_800.0,
    1.0 / 362_880.0,
    1.0 / 40_320.0,
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
];

/// `exp(x)` within 2 ulp of the correctly rounded value, by the branch-free
/// algorithm of the module docs (NaN → NaN, saturating to 0 and +∞);
/// inlined, so a loop over a slice calling it vectorises.
///
/// ```
/// let x = [-1.0, 0.0, 2.5];
/// let y = x.map(kameleon_kernels::fastmath::exp);
/// assert!((y[2] - 2.5f64.exp()).abs() < 1e-14);
/// ```
#[inline(always)]
pub fn exp(x: f64) -> f64 {
    let clamped = x.clamp(MIN_ARG, MAX_ARG);
    let shifted = clamped * std::f64::consts::LOG2_E + SHIFT;
    let kf = shifted - SHIFT;
    let r = (clamped - kf * LN2_HI) - kf * LN2_LO;
    let mut p = INV_FACTORIALS[0];
    for c in &INV_FACTORIALS[1..] {
        p = p * r + c;
    }
    p = (p * r + 1.0) * r + 1.0;
    // k sits in the low bits of `shifted` as k + 2⁵¹ (two's complement
    // arithmetic on the bit pattern); split 2ᵏ = 2^(k₁) · 2^(k − k₁), k₁ = ⌊k/2⌋,
    // so both factors are normal even when 2ᵏ is not.
    let k = (shifted.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    let k1 = k >> 1;
    let scale1 = f64::from_bits(((k1 + 1023) as u64) << 52);
    let scale2 = f64::from_bits(((k - k1 + 1023) as u64) << 52);
    let result = p * scale1 * scale2;
    if x.is_nan() { x } else { result }
}

/// `π/2` in three parts: two of 33 significant bits (so `k · part` is exact
/// for `|k| < 2²⁰`) and the rest rounded to a double; the remainder is
/// ≈ 10⁻³⁷.
const PIO2_1: f64 = f64::from_bits(0x3FF9_21FB_5440_0000);
const PIO2_2: f64 = f64::from_bits(0x3DD0_B461_1A60_0000);
const PIO2_3: f64 = f64::from_bits(0x3BA3_198A_2E03_7073);
/// The largest `|x|` for which [`sin_cos`] is accurate: `2²⁰ · π/2`.
pub const SIN_COS_MAX_ARG: f64 = 1_647_099.0;
/// `(−1)ᵏ/(2k + 1)!` for k = 8 down to 1: the Taylor series of `sin r / r − 1`
/// in `r²` (divided by `r²`).
const SIN_TAYLOR: [f64; 8] = [
    1.0 / 355_687_428_096_000.0,
    -1.0 / 1_307_674_368_000.0,
    1.0 / 6_227_020_800.0,
    -1.0 / 39_916_800.0,
    1.0 / 362_880.0,
    -1.0 / 5_040.0,
    1.0 / 120.0,
    -1.0 / 6.0,
];
/// `(−1)ᵏ/(2k)!` for k = 9 down to 2: the Taylor series of
/// `cos r − 1 + r²/2` in `r²` (divided by `r⁴`).
const COS_TAYLOR: [f64; 8] = [
    -1.0 / 6_402_373_705_728_000.0,
    1.0 / 20_922_789_888_000.0,
    -1.0 / 87_178_291_200.0,
    1.0 / 479_001_600.0,
    -1.0 / 3_628_800.0,
    1.0 / 40_320.0,
    -1.0 / 720.0,
    1.0 / 24.0,
];

/// `(sin x, cos x)`, each within 2 ulp of the correctly rounded value (or
/// 2⁻⁵³ absolute near its zeros) for `|x| ≤` [`SIN_COS_MAX_ARG`], by the
/// branch-free algorithm of the module docs; `(NaN, NaN)` outside that range
/// and for NaN. Inlined, so a loop over a slice calling it vectorises.
///
/// ```
/// use kameleon_kernels::fastmath::{SIN_COS_MAX_ARG, sin_cos};
/// let (s, c) = sin_cos(2.0);
/// assert!((s - 2.0f64.sin()).abs() < 1e-15 && (c - 2.0f64.cos()).abs() < 1e-15);
/// assert!(sin_cos(2.0 * SIN_COS_MAX_ARG).0.is_nan());
/// ```
#[inline(always)]
pub fn sin_cos(x: f64) -> (f64, f64) {
    let in_range = x.abs() <= SIN_COS_MAX_ARG;
    let clamped = if in_range { x } else { 0.0 };
    let shifted = clamped * std::f64::consts::FRAC_2_PI + SHIFT;
    let kf = shifted - SHIFT;
    let r = ((clamped - kf * PIO2_1) - kf * PIO2_2) - kf * PIO2_3;
    let r2 = r * r;
    let mut ps = SIN_TAYLOR[0];
    for c in &SIN_TAYLOR[1..] {
        ps = ps * r2 + c;
    }
    let sin_r = r + r * r2 * ps;
    let mut pc = COS_TAYLOR[0];
    for c in &COS_TAYLOR[1..] {
        pc = pc * r2 + c;
    }
    let cos_r = (1.0 - 0.5 * r2) + r2 * r2 * pc;
    // the quadrant q = k mod 4 sits in the low bits of `shifted` (two's
    // complement, since SHIFT's low bits are zero): sin x = (s, c, −s, −c)[q],
    // cos x = (c, −s, −c, s)[q]
    let q = shifted.to_bits();
    let swap = q & 1 == 1;
    let (s, c) = if swap { (cos_r, sin_r) } else { (sin_r, cos_r) };
    let sin_sign = (q & 2) << 62;
    let cos_sign = (q.wrapping_add(1) & 2) << 62;
    let sin_x = f64::from_bits(s.to_bits() ^ sin_sign);
    let cos_x = f64::from_bits(c.to_bits() ^ cos_sign);
    if in_range {
        (sin_x, cos_x)
    } else {
        (f64::NAN, f64::NAN)
    }
}

/// `sin x` by [`sin_cos`] (same accuracy and range).
///
/// ```
/// assert!((kameleon_kernels::fastmath::sin(1.0) - 1.0f64.sin()).abs() < 1e-15);
/// ```
#[inline(always)]
pub fn sin(x: f64) -> f64 {
    sin_cos(x).0
}

/// `cos x` by [`sin_cos`] (same accuracy and range).
///
/// ```
/// assert!((kameleon_kernels::fastmath::cos(1.0) - 1.0f64.cos()).abs() < 1e-15);
/// ```
#[inline(always)]
pub fn cos(x: f64) -> f64 {
    sin_cos(x).1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    /// Agrees with libm's `exp` to 2 ulp over the whole range, including the
    /// subnormal results, and saturates to 0 and +∞.
    #[test]
    fn matches_libm() {
        let mut args: Vec<f64> = (0..200_001)
            .map(|i| -745.0 + 1454.7 * i as f64 / 200_000.0)
            .collect();
        args.extend((0..20_001).map(|i| -1.0 + i as f64 / 10_000.0));
        args.extend([0.0, -0.0, 1e-300, -1e-300, 0.5 * std::f64::consts::LN_2]);
        let values: Vec<f64> = args.iter().map(|&x| exp(x)).collect();
        for (x, v) in args.iter().zip(&values) {
            let exact = x.exp();
            if exact < f64::MIN_POSITIVE {
                // subnormal: a couple of units of the smallest subnormal
                assert!((v - exact).abs() <= 4.0 * 5e-324, "{x}: {v} vs {exact}");
            } else {
                assert!(ulps(*v, exact) <= 2, "{x}: {v} vs {exact}");
            }
        }
        let edge = [-1e4, 1e4, f64::NEG_INFINITY, f64::INFINITY, f64::NAN].map(exp);
        assert_eq!(edge[0], 0.0);
        assert_eq!(edge[1], f64::INFINITY);
        assert_eq!(edge[2], 0.0);
        assert_eq!(edge[3], f64::INFINITY);
        assert!(edge[4].is_nan());
    }

    /// Agrees with libm's `sin` and `cos` to 2 ulp (2⁻⁵³ absolute where the
    /// value is below 1/4 in magnitude: near the zeros the reduction's
    /// absolute error dominates) over the whole accurate range, densely
    /// near 0 and the quadrant boundaries, and is NaN outside it.
    #[test]
    fn sin_cos_match_libm() {
        let mut args: Vec<f64> = (0..400_001)
            .map(|i| SIN_COS_MAX_ARG * (2.0 * i as f64 / 400_000.0 - 1.0))
            .collect();
        args.extend((0..200_001).map(|i| -10.0 + i as f64 / 10_000.0));
        for k in -1000..=1000 {
            let centre = k as f64 * std::f64::consts::FRAC_PI_2;
            args.extend((-20..=20).map(|i| centre + i as f64 * 1e-9));
            args.push(f64::from_bits(centre.to_bits() + 1));
        }
        args.extend([0.0, -0.0, 1e-300, -1e-300, 5e-324, SIN_COS_MAX_ARG]);
        for &x in &args {
            let (s, c) = sin_cos(x);
            for (v, exact) in [(s, x.sin()), (c, x.cos())] {
                if exact.abs() < 0.25 {
                    assert!(
                        (v - exact).abs() <= f64::EPSILON / 2.0,
                        "{x}: {v} vs {exact}"
                    );
                } else {
                    assert!(ulps(v, exact) <= 2, "{x}: {v} vs {exact}");
                }
            }
            assert_eq!((sin(x), cos(x)), (s, c));
        }
        for x in [
            f64::NAN,
            f64::INFINITY,
            -f64::INFINITY,
            1e7,
            -2.0 * SIN_COS_MAX_ARG,
        ] {
            let (s, c) = sin_cos(x);
            assert!(s.is_nan() && c.is_nan(), "{x}");
        }
    }
}
