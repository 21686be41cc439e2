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
}
