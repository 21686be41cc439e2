//! Elementary functions that the compiler vectorises in loops over slices.
//!
//! Kernel sums (the KAMH gradient matrix, the KMC lite gradient) need `exp`
//! of n arguments per evaluation; the scalar libm call costs more than all
//! the arithmetic around it and blocks vectorisation of the loop.
//!
//! # Two variants of each function
//!
//! Every function comes twice, with one body ([`exp`] and [`exp_fma`],
//! [`sin_cos`] and [`sin_cos_fma`], [`sin`] and [`sin_fma`], [`cos`] and
//! [`cos_fma`]). They differ only in how a polynomial step `a·b + c` is
//! evaluated: a multiply and an add, or one fused multiply-add (one rounding,
//! so the `_fma` results may differ from the others in the last bit).
//!
//! **Call the `_fma` variants only from code compiled with FMA enabled**: in
//! practice inside a `pulp::WithSimd::with_simd` run by
//! [`crate::simd::dispatch`] (AVX2 + FMA or AVX-512 on x86-64), where the functions, being
//! `#[inline(always)]`, are compiled into the caller's vectorised loop and
//! every `mul_add` is one instruction. Elsewhere (code built for baseline
//! x86-64, or pulp's scalar fallback on a CPU without FMA) `f64::mul_add`
//! is a call to a software or libm `fma`: the results are identical, since a
//! fused multiply-add is exact-then-rounded everywhere, but slow.
//!
//! # Algorithms
//!
//! [`exp`] is branch-free: it reduces `x = k ln 2 + r` with
//! `k = round(x / ln 2)` (round-to-nearest by the 1.5·2⁵² shift trick) and
//! `|r| ≤ ln 2 / 2`, two-part Cody–Waite constants for `ln 2`, evaluates
//! `exp(r) ≈ 1 + r + r² q(r)` with `q` of degree 9 (so a polynomial of
//! degree 11), `q` by second-order Horner (Horner's rule in `r²` over the
//! pairs `a₂ᵢ + a₂ᵢ₊₁ r`, half the dependency chain of plain Horner), and
//! scales by `2ᵏ` as the product of two powers of two built from the
//! exponent bits, so results in the subnormal range are
//! right too. [`exp_nonpositive_fma`] (the Gaussian kernel's weights, the
//! lite estimator's kernel values) gives the same bits for `x ≤ 0` with one
//! scale factor built by a single shift and an exact rescaling.
//!
//! [`sin_cos`] (and [`cos`]) reduce `x = k π/2 + r` with `k = round(2x/π)`
//! (the same shift trick) and `|r| ≤ π/4`, using a three-part Cody–Waite
//! split of `π/2` (two 33-bit parts, so `k · part` is exact for `|k| < 2²⁰`,
//! and a full-precision tail); evaluate `sin r ≈ r + r³ s(r²)` and
//! `cos r ≈ 1 − r²/2 + r⁴ c(r²)` with `s` and `c` of degree 5 in `r²`; and
//! pick and negate the pair by the quadrant `k mod 4` with bit operations, no
//! branches. [`sin`] needs no cosine: it reduces `x = k π + r` (the same
//! split of `π/2`, doubled, which is exact) with `|r| ≤ π/2`, evaluates
//! `sin r ≈ r + r³ s(r²)` with `s` of degree 7, and negates for odd `k`.
//! Accurate to 2 ulp (absolute error 2⁻⁵³ near the zeros) for `|x| ≤`
//! [`SIN_COS_MAX_ARG`] (≈ 1.6·10⁶); outside, and for NaN, the results are
//! NaN, so a loop over a slice can check its arguments once (a vectorisable
//! max) and call libm instead. [`sin_fma_in_range`] leaves out even that
//! test, for callers that bound their arguments beforehand.
//!
//! # The polynomial coefficients
//!
//! `q`, `s` and `c` are minimax polynomials for the relative error of the
//! whole function (`exp r`, `sin r`, `cos r`) on the reduced interval, with
//! the leading terms (`1 + r`, `r`, `1 − r²/2`) fixed so that they are added
//! exactly. They were computed by a weighted Remez exchange in 60-digit
//! arithmetic (mpmath; the script is `crates/kernels/tools/fastmath_remez.py`,
//! `exp 11`, `sin 6`, `cos 6`, `sinpi 8`; it prints the coefficients lowest
//! degree first, the tables here are highest first) and rounded to the
//! nearest double. The levelled maximum relative errors of the approximations are
//! 3.6·10⁻¹⁸ (`exp`, degree 11 on `|r| ≤ ln 2/2`; degree 10 would give
//! 2.9·10⁻¹⁶), 3.6·10⁻¹⁸ (`sin`, `|r| ≤ π/4`), 5.6·10⁻²⁰ (`cos`,
//! `|r| ≤ π/4`) and 2.8·10⁻¹⁹ (the sine-only `sin`, `|r| ≤ π/2`), all
//! below 2⁻⁵³ ≈ 1.1·10⁻¹⁶ by a factor of 30 or more, so the rounding of the
//! arithmetic dominates the error (tested against libm).

/// `1.5 · 2⁵²`: adding it rounds a double of magnitude < 2⁵¹ to an integer
/// held in the low mantissa bits.
const SHIFT: f64 = 6_755_399_441_055_744.0;
/// `ln 2` split so that `k · LN2_HI` is exact for |k| < 2¹¹.
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
/// Below this `exp` is 0 in double precision; above [`MAX_ARG`] it is +∞.
const MIN_ARG: f64 = -746.0;
const MAX_ARG: f64 = 709.79;
/// `q(r)` of `exp r ≈ 1 + r + r² q(r)`, highest degree first (minimax on
/// `|r| ≤ ln 2/2`, see the module docs); close to `1/k!`, k = 11 … 2.
const EXP_POLY: [f64; 10] = [
    f64::from_bits(0x3E5A_D7F7_B109_6349),
    f64::from_bits(0x3E92_8AD6_89E8_AEE0),
    f64::from_bits(0x3EC7_1DF2_53A0_8086),
    f64::from_bits(0x3EFA_0199_A16E_68ED),
    f64::from_bits(0x3F2A_01A0_12A6_9CF4),
    f64::from_bits(0x3F56_C16C_1842_66B4),
    f64::from_bits(0x3F81_1111_1112_7B9B),
    f64::from_bits(0x3FA5_5555_5555_088C),
    f64::from_bits(0x3FC5_5555_5555_54FA),
    f64::from_bits(0x3FE0_0000_0000_000A),
];

/// `a·b + c`: one fused multiply-add (a single rounding) if `FUSED`, else a
/// multiply and an add (see the module docs on where `FUSED` is fast).
#[inline(always)]
fn mul_add<const FUSED: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FUSED { a.mul_add(b, c) } else { a * b + c }
}

/// The polynomial with the given coefficients (highest degree first) at `t`,
/// by Horner's rule: the fewest operations, one dependency chain. Used for
/// the sines and cosines, which in the random-feature kernels share the loop
/// with other arithmetic: there [`polynomial_in_pairs`] and full Estrin add
/// instructions without saving time (measurements in PERFORMANCE.md).
#[inline(always)]
fn polynomial<const FUSED: bool, const N: usize>(coefficients: &[f64; N], t: f64) -> f64 {
    let (first, rest) = coefficients.split_first().expect("N ≥ 1");
    rest.iter().fold(*first, |p, c| mul_add::<FUSED>(p, t, *c))
}

/// The same polynomial as [`polynomial`] by second-order Horner: with
/// `u = t²`, `p(t) = Σᵢ (a₂ᵢ + a₂ᵢ₊₁ t) uⁱ` (`aᵢ` the coefficient of `tⁱ`)
/// by Horner's rule in `u`. The pairs `a₂ᵢ + a₂ᵢ₊₁ t` are independent of
/// one another, so the dependency chain is half as long, for one
/// multiplication (`u`) more; only the rounding differs. Used for the
/// exponentials, whose callers run little else per vector, so the shorter
/// chain pays off (more than full Estrin; measurements in PERFORMANCE.md).
#[inline(always)]
fn polynomial_in_pairs<const FUSED: bool, const N: usize>(coefficients: &[f64; N], t: f64) -> f64 {
    // a(i), the coefficient of tⁱ
    let a = |i: usize| coefficients[N - 1 - i];
    let u = t * t;
    // the highest pair (or the lone highest coefficient for odd N), then the
    // lower pairs down to (a₀ + a₁ t)
    let (mut p, pairs_below) = if N % 2 == 1 {
        (a(N - 1), (N - 1) / 2)
    } else {
        (mul_add::<FUSED>(a(N - 1), t, a(N - 2)), N / 2 - 1)
    };
    for i in (0..pairs_below).rev() {
        p = mul_add::<FUSED>(p, u, mul_add::<FUSED>(a(2 * i + 1), t, a(2 * i)));
    }
    p
}

/// The reduction and polynomial shared by the exponentials: for
/// `x = k ln 2 + r`, returns `k + shift` (exactly; `shift` is
/// [`SHIFT`] plus an even integer, so `k` in its low bits is rounded the
/// same way, ties to even, whatever the even part) and `p ≈ exp(r)`.
#[inline(always)]
fn exp_reduce<const FUSED: bool>(x: f64, shift: f64) -> (f64, f64) {
    let shifted = mul_add::<FUSED>(x, std::f64::consts::LOG2_E, shift);
    let kf = shifted - shift;
    let r = mul_add::<FUSED>(-kf, LN2_LO, mul_add::<FUSED>(-kf, LN2_HI, x));
    let q = polynomial_in_pairs::<FUSED, 10>(&EXP_POLY, r);
    (
        shifted,
        mul_add::<FUSED>(mul_add::<FUSED>(q, r, 1.0), r, 1.0),
    )
}

/// The body of [`exp`] and [`exp_fma`].
#[inline(always)]
fn exp_with<const FUSED: bool>(x: f64) -> f64 {
    let clamped = x.clamp(MIN_ARG, MAX_ARG);
    let (shifted, p) = exp_reduce::<FUSED>(clamped, SHIFT);
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

/// The exponent offset of [`exp_nonpositive_fma`]'s first scale factor
/// `2^(k + 65)`: large enough that it is normal for the smallest `k`
/// (−1076, at [`MIN_ARG`]) even times `p ≥ 1/√2`.
const NONPOSITIVE_OFFSET: i32 = 65;

/// `exp(x)` for `x ≤ 0`, bitwise equal to [`exp_fma`] there (NaN → NaN,
/// saturating to 0), in fewer instructions: no upper clamp, no NaN select,
/// and `2ᵏ` rebuilt by one shift.
///
/// How: the shift constant carries the exponent bias, `SHIFT + 1023 + 65`
/// (an even addend, so `k` is rounded exactly as in [`exp`]), so the low 12
/// bits of `shifted` are the biased exponent of `2^(k + 65)`, and shifting
/// them into the exponent field builds it. For `−1076 ≤ k ≤ 0` that factor
/// is a normal number and `p · 2^(k + 65)` is exact; the final `· 2⁻⁶⁵` is
/// the only rounding, so the result is `p · 2ᵏ` correctly rounded — exactly
/// what [`exp`]'s two-factor scaling gives, subnormal results included.
/// Positive arguments are outside the contract (up to `k = 957`,
/// `x ≈ 663`, the result is still [`exp_fma`]'s; beyond it is meaningless).
/// Call only where FMA is enabled (see the module docs).
///
/// ```
/// use kameleon_core::fastmath::{exp_fma, exp_nonpositive_fma};
/// for x in [0.0, -1e-300, -0.5, -30.0, -708.0, -740.0, -1e4] {
///     assert_eq!(exp_nonpositive_fma(x).to_bits(), exp_fma(x).to_bits());
/// }
/// ```
#[inline(always)]
pub fn exp_nonpositive_fma(x: f64) -> f64 {
    // NaN fails the comparison and passes through, making the result NaN
    let clamped = if x < MIN_ARG { MIN_ARG } else { x };
    let bias = f64::from(1023 + NONPOSITIVE_OFFSET);
    let (shifted, p) = exp_reduce::<true>(clamped, SHIFT + bias);
    let scale = f64::from_bits(shifted.to_bits() << 52);
    let unscale = f64::from_bits(((1023 - NONPOSITIVE_OFFSET) as u64) << 52);
    p * scale * unscale
}

/// `exp(x)` within 2 ulp of the correctly rounded value, by the branch-free
/// algorithm of the module docs (NaN → NaN, saturating to 0 and +∞);
/// inlined, so a loop over a slice calling it vectorises. Inside FMA
/// contexts use [`exp_fma`].
///
/// ```
/// let x = [-1.0, 0.0, 2.5];
/// let y = x.map(kameleon_core::fastmath::exp);
/// assert!((y[2] - 2.5f64.exp()).abs() < 1e-14);
/// ```
#[inline(always)]
pub fn exp(x: f64) -> f64 {
    exp_with::<false>(x)
}

/// [`exp`] with fused multiply-adds (same accuracy): call only from code
/// compiled with FMA enabled, e.g. inside a `pulp` dispatch; elsewhere
/// `mul_add` is a slow software call, though the results are identical (see
/// the module docs).
///
/// ```
/// use kameleon_core::fastmath::exp_fma;
/// assert!((exp_fma(2.5) - 2.5f64.exp()).abs() < 1e-14);
/// ```
#[inline(always)]
pub fn exp_fma(x: f64) -> f64 {
    exp_with::<true>(x)
}

/// `π/2` in three parts: two of 33 significant bits (so `k · part` is exact
/// for `|k| < 2²⁰`) and the rest rounded to a double; the remainder is
/// ≈ 10⁻³⁷.
const PIO2: [f64; 3] = [
    f64::from_bits(0x3FF9_21FB_5440_0000),
    f64::from_bits(0x3DD0_B461_1A60_0000),
    f64::from_bits(0x3BA3_198A_2E03_7073),
];
/// `π` in three parts: [`PIO2`] doubled (exactly), so `k · part` is exact for
/// `|k| < 2²⁰` too.
const PI: [f64; 3] = [2.0 * PIO2[0], 2.0 * PIO2[1], 2.0 * PIO2[2]];
/// The largest `|x|` for which [`sin_cos`] and [`sin`] are accurate:
/// `2²⁰ · π/2`.
pub const SIN_COS_MAX_ARG: f64 = 1_647_099.0;
/// `s(t)` of `sin r ≈ r + r³ s(r²)`, highest degree first (minimax on
/// `|r| ≤ π/4`); close to `(−1)ᵏ/(2k + 1)!`, k = 6 … 1.
const SIN_POLY: [f64; 6] = [
    f64::from_bits(0x3DE5_D8FD_1FED_6450),
    f64::from_bits(0xBE5A_E5E5_A929_87BF),
    f64::from_bits(0x3EC7_1DE3_567D_4933),
    f64::from_bits(0xBF2A_01A0_19BF_DF04),
    f64::from_bits(0x3F81_1111_1110_F7D0),
    f64::from_bits(0xBFC5_5555_5555_5548),
];
/// `c(t)` of `cos r ≈ 1 − r²/2 + r⁴ c(r²)`, highest degree first (minimax on
/// `|r| ≤ π/4`); close to `(−1)ᵏ/(2k)!`, k = 7 … 2.
const COS_POLY: [f64; 6] = [
    f64::from_bits(0xBDA8_FA49_A060_94C6),
    f64::from_bits(0x3E21_EE9D_7B4D_F119),
    f64::from_bits(0xBE92_7E4F_7EAC_4B49),
    f64::from_bits(0x3EFA_01A0_19C8_44F4),
    f64::from_bits(0xBF56_C16C_16C1_4F91),
    f64::from_bits(0x3FA5_5555_5555_554B),
];
/// `s(t)` of `sin r ≈ r + r³ s(r²)` on the wider `|r| ≤ π/2` of the
/// sine-only [`sin`], highest degree first (minimax); close to
/// `(−1)ᵏ/(2k + 1)!`, k = 8 … 1.
const SIN_HALF_PERIOD_POLY: [f64; 8] = [
    f64::from_bits(0x3CE8_829A_30B5_325D),
    f64::from_bits(0xBD6A_E431_D993_B519),
    f64::from_bits(0x3DE6_123C_B290_572F),
    f64::from_bits(0xBE5A_E645_4CB5_750E),
    f64::from_bits(0x3EC7_1DE3_A528_7C76),
    f64::from_bits(0xBF2A_01A0_1A01_48BC),
    f64::from_bits(0x3F81_1111_1111_10C1),
    f64::from_bits(0xBFC5_5555_5555_5555),
];

/// The common start of the sines and cosines: `x` (0 if out of range),
/// multiplied by `inverse_period` and rounded to an integer `k` by the shift
/// trick, and `r = x − k · period` with the three-part `period`. Returns
/// whether `x` is in range, `r`, and `k + 1.5·2⁵²` whose low bits hold `k`
/// in two's complement (SHIFT's low bits are zero). Without `CHECKED` the
/// caller guarantees the range: no test, and "in range" is always true.
#[inline(always)]
fn reduce<const FUSED: bool, const CHECKED: bool>(
    x: f64,
    inverse_period: f64,
    period: &[f64; 3],
) -> (bool, f64, u64) {
    let in_range = !CHECKED || x.abs() <= SIN_COS_MAX_ARG;
    let clamped = if in_range { x } else { 0.0 };
    let shifted = mul_add::<FUSED>(clamped, inverse_period, SHIFT);
    let kf = shifted - SHIFT;
    let r = period
        .iter()
        .fold(clamped, |r, part| mul_add::<FUSED>(-kf, *part, r));
    (in_range, r, shifted.to_bits())
}

/// `sin r ≈ r + r³ s(r²)` for the coefficients `s` (ending in ≈ −1/6).
#[inline(always)]
fn odd_series<const FUSED: bool, const N: usize>(r: f64, r2: f64, s: &[f64; N]) -> f64 {
    mul_add::<FUSED>(r * r2, polynomial::<FUSED, N>(s, r2), r)
}

/// The body of [`sin_cos`] and [`sin_cos_fma`].
#[inline(always)]
fn sin_cos_with<const FUSED: bool>(x: f64) -> (f64, f64) {
    let (in_range, r, q) = reduce::<FUSED, true>(x, std::f64::consts::FRAC_2_PI, &PIO2);
    let r2 = r * r;
    let sin_r = odd_series::<FUSED, 6>(r, r2, &SIN_POLY);
    let one_minus_half_r2 = mul_add::<FUSED>(-0.5 * r, r, 1.0);
    let cos_r = mul_add::<FUSED>(
        r2 * r2,
        polynomial::<FUSED, 6>(&COS_POLY, r2),
        one_minus_half_r2,
    );
    // the quadrant q = k mod 4: sin x = (s, c, −s, −c)[q],
    // cos x = (c, −s, −c, s)[q]
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

/// The body of [`sin`], [`sin_fma`] and [`sin_fma_in_range`]:
/// `sin x = (−1)ᵏ sin r` for `x = kπ + r`; NaN out of range if `CHECKED`.
#[inline(always)]
fn sin_with<const FUSED: bool, const CHECKED: bool>(x: f64) -> f64 {
    let (in_range, r, k) = reduce::<FUSED, CHECKED>(x, std::f64::consts::FRAC_1_PI, &PI);
    // (−1)ᵏ sin r = sin((−1)ᵏ r): the odd series negates exactly
    let r = f64::from_bits(r.to_bits() ^ ((k & 1) << 63));
    let sin_x = odd_series::<FUSED, 8>(r, r * r, &SIN_HALF_PERIOD_POLY);
    if in_range { sin_x } else { f64::NAN }
}

/// `(sin x, cos x)`, each within 2 ulp of the correctly rounded value (or
/// 2⁻⁵³ absolute near its zeros) for `|x| ≤` [`SIN_COS_MAX_ARG`], by the
/// branch-free algorithm of the module docs; `(NaN, NaN)` outside that range
/// and for NaN. Inlined, so a loop over a slice calling it vectorises. Inside
/// FMA contexts use [`sin_cos_fma`].
///
/// ```
/// use kameleon_core::fastmath::{SIN_COS_MAX_ARG, sin_cos};
/// let (s, c) = sin_cos(2.0);
/// assert!((s - 2.0f64.sin()).abs() < 1e-15 && (c - 2.0f64.cos()).abs() < 1e-15);
/// assert!(sin_cos(2.0 * SIN_COS_MAX_ARG).0.is_nan());
/// ```
#[inline(always)]
pub fn sin_cos(x: f64) -> (f64, f64) {
    sin_cos_with::<false>(x)
}

/// [`sin_cos`] with fused multiply-adds (same accuracy and range): call only
/// from code compiled with FMA enabled, e.g. inside a `pulp` dispatch (see
/// the module docs).
///
/// ```
/// let (s, c) = kameleon_core::fastmath::sin_cos_fma(2.0);
/// assert!((s - 2.0f64.sin()).abs() < 1e-15 && (c - 2.0f64.cos()).abs() < 1e-15);
/// ```
#[inline(always)]
pub fn sin_cos_fma(x: f64) -> (f64, f64) {
    sin_cos_with::<true>(x)
}

/// `sin x` without a cosine polynomial (reduced by π instead of π/2), with
/// the accuracy and range of [`sin_cos`] (NaN outside it). Inside FMA
/// contexts use [`sin_fma`].
///
/// ```
/// assert!((kameleon_core::fastmath::sin(1.0) - 1.0f64.sin()).abs() < 1e-15);
/// ```
#[inline(always)]
pub fn sin(x: f64) -> f64 {
    sin_with::<false, true>(x)
}

/// [`sin`] with fused multiply-adds (same accuracy and range): call only
/// from code compiled with FMA enabled, e.g. inside a `pulp` dispatch (see
/// the module docs).
///
/// ```
/// assert!((kameleon_core::fastmath::sin_fma(1.0) - 1.0f64.sin()).abs() < 1e-15);
/// ```
#[inline(always)]
pub fn sin_fma(x: f64) -> f64 {
    sin_with::<true, true>(x)
}

/// [`sin_fma`] without its range test, for callers that have bounded their
/// arguments once (e.g. from a bound on their inputs) instead of testing
/// each: the same bits for `|x| ≤` [`SIN_COS_MAX_ARG`]; outside that range
/// (and for ±∞) the result is unspecified, though NaN stays NaN. Saves the
/// test and the selection of NaN.
///
/// ```
/// use kameleon_core::fastmath::{sin_fma, sin_fma_in_range};
/// assert_eq!(sin_fma_in_range(1.0).to_bits(), sin_fma(1.0).to_bits());
/// ```
#[inline(always)]
pub fn sin_fma_in_range(x: f64) -> f64 {
    sin_with::<true, false>(x)
}

/// `cos x` by [`sin_cos`] (same accuracy and range).
///
/// ```
/// assert!((kameleon_core::fastmath::cos(1.0) - 1.0f64.cos()).abs() < 1e-15);
/// ```
#[inline(always)]
pub fn cos(x: f64) -> f64 {
    sin_cos(x).1
}

/// `cos x` by [`sin_cos_fma`] (same accuracy and range): call only from code
/// compiled with FMA enabled, e.g. inside a `pulp` dispatch.
///
/// ```
/// assert!((kameleon_core::fastmath::cos_fma(1.0) - 1.0f64.cos()).abs() < 1e-15);
/// ```
#[inline(always)]
pub fn cos_fma(x: f64) -> f64 {
    sin_cos_fma(x).1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    /// `f` applied to every argument inside a `pulp` dispatch: on a CPU with
    /// AVX2 + FMA the loop is vectorised and `mul_add` is the hardware
    /// instruction, the code path the callers use.
    fn map_dispatched<T: Copy + Default>(args: &[f64], f: impl Fn(f64) -> T) -> Vec<T> {
        struct Map<'a, T, F>(&'a [f64], &'a mut [T], F);
        impl<T, F: Fn(f64) -> T> pulp::WithSimd for Map<'_, T, F> {
            type Output = ();
            #[inline(always)]
            fn with_simd<S: pulp::Simd>(self, _simd: S) {
                for (o, x) in self.1.iter_mut().zip(self.0) {
                    *o = (self.2)(*x);
                }
            }
        }
        let mut out = vec![T::default(); args.len()];
        crate::simd::dispatch(Map(args, &mut out, f));
        out
    }

    /// SplitMix64: `n` pseudo-random 64-bit words from a fixed seed.
    fn random_words(n: usize) -> impl Iterator<Item = u64> {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        (0..n).map(move |_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
    }

    /// The polynomial evaluated at `t` term by term, `Σᵢ aᵢ tⁱ`.
    fn term_by_term<const N: usize>(coefficients: &[f64; N], t: f64) -> f64 {
        let powers = (0..N as i32).map(|i| t.powi(i));
        coefficients
            .iter()
            .rev()
            .zip(powers)
            .map(|(a, p)| a * p)
            .sum()
    }

    /// `polynomial_in_pairs` and `polynomial` (with and without FMA) are the
    /// polynomial, for every number of coefficients up to 11 (odd ones have a
    /// lone highest coefficient): with small integer coefficients and
    /// arguments ±2^−2, ±2^−1, ±2, 3 every product and sum is exact (at
    /// most ~40 significant bits), so all three must equal the term-by-term
    /// sum to the bit, whatever the evaluation order. A pair put together
    /// from the wrong coefficients, or a coefficient dropped, changes it.
    #[test]
    fn polynomial_orders_evaluate_the_same_polynomial() {
        fn check<const N: usize>() {
            let coefficients: [f64; N] = std::array::from_fn(|i| (3 * i) as f64 - 7.0);
            for t in [0.25, -0.25, 0.5, -0.5, 2.0, -2.0, 3.0] {
                let exact = term_by_term(&coefficients, t);
                let results = [
                    polynomial::<false, N>(&coefficients, t),
                    polynomial::<true, N>(&coefficients, t),
                    polynomial_in_pairs::<false, N>(&coefficients, t),
                    polynomial_in_pairs::<true, N>(&coefficients, t),
                ];
                for v in results {
                    assert_eq!(v, exact, "N = {N}, t = {t}");
                }
            }
        }
        check::<1>();
        check::<2>();
        check::<3>();
        check::<4>();
        check::<5>();
        check::<6>();
        check::<7>();
        check::<8>();
        check::<9>();
        check::<10>();
        check::<11>();
    }

    /// The odd series negates exactly (`s(−r) = −s(r)` bit for bit for
    /// `r ≠ 0`), with and without FMA, which [`sin_with`] relies on to put
    /// the sign `(−1)ᵏ` on `r` rather than on the result: round-to-nearest
    /// is symmetric, and `r²` does not depend on the sign. Dense grid over
    /// the reduced range `|r| ≤ π/2`, random points in it, and the smallest
    /// magnitudes. (At `r = ±0` the last fused add gives +0 either way; the
    /// reduction gives `r = 0` with an odd `k` only if `x` equals `k` times
    /// the three-part π to the last bit, and the sine is then +0 instead of
    /// −0.)
    #[test]
    fn odd_series_is_odd() {
        let half_period = std::f64::consts::FRAC_PI_2;
        let mut points: Vec<f64> = (1..=200_000)
            .map(|i| half_period * i as f64 / 200_000.0)
            .collect();
        let unit = |w: u64| (w >> 11) as f64 / (1u64 << 53) as f64;
        points.extend(random_words(100_000).map(|w| half_period * unit(w)));
        points.extend([5e-324, 1e-300]);
        let s = &SIN_HALF_PERIOD_POLY;
        for r in points {
            for (plus, minus) in [
                (
                    odd_series::<true, 8>(r, r * r, s),
                    odd_series::<true, 8>(-r, r * r, s),
                ),
                (
                    odd_series::<false, 8>(r, r * r, s),
                    odd_series::<false, 8>(-r, r * r, s),
                ),
            ] {
                assert_eq!((-plus).to_bits(), minus.to_bits(), "r = {r}");
            }
        }
    }

    /// Both variants of `exp` agree with libm's to 2 ulp over the whole
    /// range, including the subnormal results, and saturate to 0 and +∞;
    /// the FMA variant gives the same bits inside a `pulp` dispatch
    /// (vectorised, hardware FMA where available) as outside it.
    ///
    /// Arguments: a dense grid over the whole range (step ≈ 7·10⁻³), a
    /// denser one on [−1, 1], 10⁶ uniformly random ones over the range, and
    /// edges.
    ///
    /// The bound: `exp x = 2ᵏ p(r)` with `p = 1 + r(1 + r q(r))`,
    /// `|r| ≤ ln 2/2`, `p ∈ [0.70, 1.42]`. The approximation error is
    /// 3.6·10⁻¹⁸ relative (module docs), 0.03 ulp. `q ≈ 1/2` is computed
    /// to a few ulp (its terms fall off by `|r| ≤ 0.35` per degree, each
    /// operation rounds once), and reaches `p` multiplied by `r² ≤ 0.12`:
    /// below 0.2 ulp of `p`. The inner step `1 + r q` rounds to
    /// `≤ 2⁻⁵³`, multiplied by `|r| ≤ 0.35`: ≤ 0.35 ulp; the outer one
    /// rounds to half an ulp of `p`, at most one ulp relative to the
    /// smaller `p < 1`. The scaling by `2ᵏ` is exact for normal results.
    /// Without FMA each step has one more rounding, of the same size. So
    /// the error is below ~1.6 ulp, and libm's (< 1 ulp) brings the
    /// difference to at most 2 ulp; the test prints the largest seen.
    #[test]
    fn matches_libm() {
        let (low, high) = (-745.0, 709.7);
        let mut args: Vec<f64> = (0..200_001)
            .map(|i| low + (high - low) * i as f64 / 200_000.0)
            .collect();
        args.extend((0..20_001).map(|i| -1.0 + i as f64 / 10_000.0));
        let unit = |w: u64| (w >> 11) as f64 / (1u64 << 53) as f64;
        args.extend(random_words(1_000_000).map(|w| low + (high - low) * unit(w)));
        args.extend([0.0, -0.0, 1e-300, -1e-300, 0.5 * std::f64::consts::LN_2]);
        let dispatched = map_dispatched(&args, exp_fma);
        let variants = [("exp", exp as fn(f64) -> f64), ("exp_fma", exp_fma)];
        for (name, f) in variants {
            let mut largest = 0;
            for (x, fast) in args.iter().zip(&dispatched) {
                let (v, exact) = (f(*x), x.exp());
                if exact < f64::MIN_POSITIVE {
                    // subnormal: a couple of units of the smallest subnormal
                    assert!(
                        (v - exact).abs() <= 4.0 * 5e-324,
                        "{name}({x}): {v} vs {exact}"
                    );
                } else {
                    largest = largest.max(ulps(v, exact));
                    assert!(ulps(v, exact) <= 2, "{name}({x}): {v} vs {exact}");
                }
                if name == "exp_fma" {
                    assert_eq!(v.to_bits(), fast.to_bits(), "{x}");
                }
            }
            println!("{name}: at most {largest} ulp from libm");
            let edge = [-1e4, 1e4, f64::NEG_INFINITY, f64::INFINITY, f64::NAN].map(f);
            assert_eq!(edge[0], 0.0);
            assert_eq!(edge[1], f64::INFINITY);
            assert_eq!(edge[2], 0.0);
            assert_eq!(edge[3], f64::INFINITY);
            assert!(edge[4].is_nan());
        }
    }

    /// `exp_nonpositive_fma` gives `exp_fma`'s bits for every non-positive
    /// argument: a dense grid over the whole range (step ≈ 1.9·10⁻⁴), a
    /// denser one over the subnormal results and the underflow to 0
    /// (x < −708.4; step 10⁻⁵), 10⁶ random negative bit patterns (every
    /// magnitude, most of them tiny or below the clamp), the exact
    /// multiples of ln 2 / 2 around the scale boundaries, the edges (±0,
    /// the smallest subnormal, the clamp, −∞, NaN), and positive arguments
    /// up to the documented 663. Both run inside a `pulp` dispatch, the
    /// callers' code path.
    #[test]
    fn exp_nonpositive_matches_exp_bitwise() {
        let mut args: Vec<f64> = (0..4_000_001)
            .map(|i| -750.0 * i as f64 / 4_000_000.0)
            .collect();
        args.extend((0..4_000_001).map(|i| -708.0 - 40.0 * i as f64 / 4_000_000.0));
        // random words with the sign bit set: negative numbers of every
        // exponent, NaNs and −∞ included
        args.extend(random_words(1_000_000).map(|w| f64::from_bits(w | 1 << 63)));
        for k in -2160..=0 {
            let x = f64::from(k) * 0.5 * std::f64::consts::LN_2;
            args.extend([x, f64::from_bits(x.to_bits() + 1), x.next_up()]);
        }
        args.extend((0..100_001).map(|i| 663.0 * i as f64 / 100_000.0));
        args.extend([
            0.0,
            -0.0,
            -5e-324,
            -1e-300,
            MIN_ARG,
            MIN_ARG.next_up(),
            MIN_ARG.next_down(),
            f64::MIN,
            f64::NEG_INFINITY,
        ]);
        let want = map_dispatched(&args, exp_fma);
        let got = map_dispatched(&args, exp_nonpositive_fma);
        for ((x, w), g) in args.iter().zip(&want).zip(&got) {
            // NaN → NaN, not necessarily with the same payload
            if x.is_nan() {
                assert!(g.is_nan() && w.is_nan(), "exp({x}): {g} vs {w}");
            } else {
                assert_eq!(g.to_bits(), w.to_bits(), "exp({x}): {g} vs {w}");
            }
        }
    }

    /// The arguments of the sine and cosine tests: the whole accurate range,
    /// densely near 0, near the multiples of π/2 (the quadrant boundaries of
    /// [`sin_cos`], the zeros, and the reduction boundaries of [`sin`] at the
    /// odd multiples), plus edge values.
    fn trig_args() -> Vec<f64> {
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
        args
    }

    /// Arguments outside the accurate range, where every function is NaN.
    const OUT_OF_RANGE: [f64; 5] = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e7,
        -2.0 * SIN_COS_MAX_ARG,
    ];

    /// `v` is within 2 ulp of `exact`, or 2⁻⁵³ absolute where `exact` is
    /// below 1/4 in magnitude (near the zeros the reduction's absolute error
    /// dominates).
    fn assert_close(name: &str, x: f64, v: f64, exact: f64) {
        if exact.abs() < 0.25 {
            assert!(
                (v - exact).abs() <= f64::EPSILON / 2.0,
                "{name}({x}): {v} vs {exact}"
            );
        } else {
            assert!(ulps(v, exact) <= 2, "{name}({x}): {v} vs {exact}");
        }
    }

    /// Both variants of `sin_cos` (and `cos`) agree with libm's `sin` and
    /// `cos` to 2 ulp (2⁻⁵³ absolute near the zeros) over the whole accurate
    /// range and are NaN outside it; the FMA variant gives the same bits
    /// inside a `pulp` dispatch as outside it.
    #[test]
    fn sin_cos_match_libm() {
        let args = trig_args();
        let dispatched = map_dispatched(&args, sin_cos_fma);
        let variants = [
            (
                "sin_cos",
                sin_cos as fn(f64) -> (f64, f64),
                cos as fn(f64) -> f64,
            ),
            ("sin_cos_fma", sin_cos_fma, cos_fma),
        ];
        for (name, f, cos_only) in variants {
            for (&x, fast) in args.iter().zip(&dispatched) {
                let (s, c) = f(x);
                assert_close(name, x, s, x.sin());
                assert_close(name, x, c, x.cos());
                assert_eq!(cos_only(x).to_bits(), c.to_bits());
                if name == "sin_cos_fma" {
                    assert_eq!(
                        (s.to_bits(), c.to_bits()),
                        (fast.0.to_bits(), fast.1.to_bits())
                    );
                }
            }
            for x in OUT_OF_RANGE {
                let (s, c) = f(x);
                assert!(
                    s.is_nan() && c.is_nan() && cos_only(x).is_nan(),
                    "{name}({x})"
                );
            }
        }
    }

    /// `sin_fma_in_range` gives the bits of `sin_fma` over the whole accurate
    /// range, inside a `pulp` dispatch and outside it, and NaN for NaN.
    #[test]
    fn sin_in_range_matches_sin() {
        let args = trig_args();
        let dispatched = map_dispatched(&args, sin_fma_in_range);
        for (&x, fast) in args.iter().zip(&dispatched) {
            let v = sin_fma(x);
            assert_eq!(sin_fma_in_range(x).to_bits(), v.to_bits(), "{x}");
            assert_eq!(fast.to_bits(), v.to_bits(), "{x}");
        }
        assert!(sin_fma_in_range(f64::NAN).is_nan());
    }

    /// Both variants of the sine-only `sin` agree with libm's `sin` to 2 ulp
    /// (2⁻⁵³ absolute near the zeros) over the whole accurate range and are
    /// NaN outside it; the FMA variant gives the same bits inside a `pulp`
    /// dispatch as outside it.
    #[test]
    fn sin_matches_libm() {
        let args = trig_args();
        let dispatched = map_dispatched(&args, sin_fma);
        let variants = [("sin", sin as fn(f64) -> f64), ("sin_fma", sin_fma)];
        for (name, f) in variants {
            for (&x, fast) in args.iter().zip(&dispatched) {
                let v = f(x);
                assert_close(name, x, v, x.sin());
                if name == "sin_fma" {
                    assert_eq!(v.to_bits(), fast.to_bits(), "{x}");
                }
            }
            for x in OUT_OF_RANGE {
                assert!(f(x).is_nan(), "{name}({x})");
            }
        }
    }
}
