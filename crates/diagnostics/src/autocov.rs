//! Autocovariance and autocorrelation of a scalar series, by FFT or by a direct bounded-lag sum.

use crate::error::{DiagnosticsError, Result, check_finite};
use crate::scale::{at_unit_scale, times_pow2};

/// The twiddle factors of a radix-2 FFT of one length n, forward and
/// inverse, laid out stage by stage: stage `len` (2, 4, …, n) reads the
/// cosines and sines of its len/2 factors w_k = exp(∓2πik/len) =
/// exp(∓2πi(k·n/len)/n) contiguously from offset len/2 − 1.
struct Twiddles {
    n: usize,
    /// The pairs (i, j), i < j, that the bit-reversal permutation swaps.
    swaps: Vec<(usize, usize)>,
    forward: StagedFactors,
    inverse: StagedFactors,
}

/// Cosines and sines of the factors, stage after stage.
struct StagedFactors {
    cos: Vec<f64>,
    sin: Vec<f64>,
}

impl Twiddles {
    /// The factors for length `n` (a power of two), each from sin/cos of its
    /// angle directly (no recurrence, so rounding does not accumulate).
    fn new(n: usize) -> Self {
        let staged = |sign: f64| {
            let all: Vec<(f64, f64)> = (0..n / 2)
                .map(|k| (sign * 2.0 * std::f64::consts::PI * k as f64 / n as f64).sin_cos())
                .collect();
            let mut factors = StagedFactors {
                cos: Vec::with_capacity(n.saturating_sub(1)),
                sin: Vec::with_capacity(n.saturating_sub(1)),
            };
            let mut len = 2;
            while len <= n {
                let stride = n / len;
                for k in 0..len / 2 {
                    let (s, c) = all[k * stride];
                    factors.cos.push(c);
                    factors.sin.push(s);
                }
                len *= 2;
            }
            factors
        };
        let mut swaps = Vec::new();
        let mut j = 0usize;
        for i in 1..n {
            let mut bit = n >> 1;
            while j & bit != 0 {
                j ^= bit;
                bit >>= 1;
            }
            j |= bit;
            if i < j {
                swaps.push((i, j));
            }
        }
        Self {
            n,
            swaps,
            forward: staged(-1.0),
            inverse: staged(1.0),
        }
    }
}

thread_local! {
    /// The last length's twiddles: the autocovariances of one diagnostic
    /// (the split chains of an ESS, every parameter of a run) share a length.
    static TWIDDLES: std::cell::RefCell<Option<std::rc::Rc<Twiddles>>> =
        const { std::cell::RefCell::new(None) };
}

/// The twiddles of length `n`, computed once per thread for a run of calls
/// of the same length.
fn twiddles(n: usize) -> std::rc::Rc<Twiddles> {
    TWIDDLES.with(|cell| {
        let mut cached = cell.borrow_mut();
        match cached.as_ref() {
            Some(t) if t.n == n => t.clone(),
            _ => {
                let t = std::rc::Rc::new(Twiddles::new(n));
                *cached = Some(t.clone());
                t
            }
        }
    })
}

/// In-place iterative radix-2 complex FFT of `re + i·im` (length a power of two).
/// `inverse` selects the sign +i of the exponent; no 1/n scaling is applied.
/// Each butterfly multiplies and adds separately (no fused multiply-add), so
/// the result does not depend on the order the butterflies of a stage run in.
///
/// `real` = `Some(m)` says that the data are real with zeros from entry m
/// on (`im` holds only zeros, as does `re[m..]`): the bit-reversal
/// permutation then leaves `im` as it is and skips the swaps of two zeros.
fn fft_in_place(re: &mut [f64], im: &mut [f64], inverse: bool, real: Option<usize>) {
    let n = re.len();
    debug_assert!(n.is_power_of_two() && im.len() == n);
    let twiddles = twiddles(n);
    match real {
        Some(m) => {
            debug_assert!(im.iter().chain(&re[m.min(n)..]).all(|&v| v == 0.0));
            // the swaps come in increasing order of their first entry
            for &(i, j) in twiddles.swaps.iter().take_while(|&&(i, _)| i < m) {
                re.swap(i, j);
            }
        }
        None => {
            for &(i, j) in &twiddles.swaps {
                re.swap(i, j);
                im.swap(i, j);
            }
        }
    }
    butterflies(re, im, &twiddles, inverse);
}

/// The butterfly stages on bit-reversed data, with the forward or inverse
/// factors.
fn butterflies(re: &mut [f64], im: &mut [f64], twiddles: &Twiddles, inverse: bool) {
    let factors = if inverse {
        &twiddles.inverse
    } else {
        &twiddles.forward
    };
    kameleon_core::simd::dispatch(Butterflies { re, im, factors });
}

/// The butterfly stages of a radix-2 FFT on bit-reversed data: in stage
/// `len` each block of len entries pairs entry k of its first half with
/// entry k of its second, t = w_k·b, (a, b) ← (a + t, a − t). The
/// arithmetic per entry is a multiplication and an addition or subtraction
/// each (no fused multiply-add), at any vector width, so the result is the
/// same on every CPU.
///
/// Two stages run in one pass where they can (stages len and 2·len on each
/// block of 2·len entries, the four quarters' entries k in registers), and
/// the passes run in groups, each group on blocks that stay in a cache
/// level: stages up to [`L1_BLOCK`] entries on blocks of that many, then up
/// to [`L2_BLOCK`], then the rest on the whole array. Every butterfly reads
/// the values its stage would read over the whole array and computes them
/// the same way, so the result is the stage-by-stage one bit for bit.
struct Butterflies<'a> {
    re: &'a mut [f64],
    im: &'a mut [f64],
    factors: &'a StagedFactors,
}

/// Entries whose real and imaginary parts (32 KiB) stay in a core's L1 cache.
const L1_BLOCK: usize = 1 << 11;
/// Entries whose real and imaginary parts (1 MiB) stay in a core's L2 cache.
const L2_BLOCK: usize = 1 << 16;

impl pulp::WithSimd for Butterflies<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self { re, im, factors } = self;
        let n = re.len();
        let mut first = 2;
        for block in [L1_BLOCK, L2_BLOCK, n] {
            let block = block.min(n);
            if first > block {
                continue;
            }
            for (re, im) in re.chunks_exact_mut(block).zip(im.chunks_exact_mut(block)) {
                let mut len = first;
                while 2 * len <= block {
                    stage_pair(simd, re, im, factors, len);
                    len *= 4;
                }
                if len <= block {
                    stage(simd, re, im, factors, len);
                }
            }
            first = 2 * block;
        }
    }
}

/// The factors (cos, sin) of stage `len`.
fn stage_factors(factors: &StagedFactors, len: usize) -> (&[f64], &[f64]) {
    let half = len / 2;
    (
        &factors.cos[half - 1..len - 1],
        &factors.sin[half - 1..len - 1],
    )
}

/// Complex numbers as (real parts, imaginary parts), a vector of each.
type Complex<S> = (<S as pulp::Simd>::f64s, <S as pulp::Simd>::f64s);

/// The butterfly of (a, b) with the factor w = c + i·s: t = w·b,
/// (a + t, a − t).
#[inline(always)]
fn butterfly<S: pulp::Simd>(
    simd: S,
    a: Complex<S>,
    b: Complex<S>,
    (c, s): Complex<S>,
) -> (Complex<S>, Complex<S>) {
    let tr = simd.sub_f64s(simd.mul_f64s(b.0, c), simd.mul_f64s(b.1, s));
    let ti = simd.add_f64s(simd.mul_f64s(b.0, s), simd.mul_f64s(b.1, c));
    (
        (simd.add_f64s(a.0, tr), simd.add_f64s(a.1, ti)),
        (simd.sub_f64s(a.0, tr), simd.sub_f64s(a.1, ti)),
    )
}

/// Stage `len` on every block of `len` entries: whole vectors of k where
/// the half-blocks hold them, else one entry at a time.
#[inline(always)]
fn stage<S: pulp::Simd>(
    simd: S,
    re: &mut [f64],
    im: &mut [f64],
    factors: &StagedFactors,
    len: usize,
) {
    if !(len / 2).is_multiple_of(S::F64_LANES) {
        return stage(pulp::Scalar::new(), re, im, factors, len);
    }
    let (cos, sin) = stage_factors(factors, len);
    let (cos, sin) = (lanes::<S>(cos), lanes::<S>(sin));
    for (re, im) in re.chunks_exact_mut(len).zip(im.chunks_exact_mut(len)) {
        let (re_a, re_b) = re.split_at_mut(len / 2);
        let (im_a, im_b) = im.split_at_mut(len / 2);
        let (re_a, re_b) = (S::as_mut_simd_f64s(re_a).0, S::as_mut_simd_f64s(re_b).0);
        let (im_a, im_b) = (S::as_mut_simd_f64s(im_a).0, S::as_mut_simd_f64s(im_b).0);
        for k in 0..cos.len() {
            let (a, b) = butterfly(
                simd,
                (re_a[k], im_a[k]),
                (re_b[k], im_b[k]),
                (cos[k], sin[k]),
            );
            (re_a[k], im_a[k]) = a;
            (re_b[k], im_b[k]) = b;
        }
    }
}

/// Stages `len` and 2·`len` in one pass over every block of 2·`len`
/// entries, split into quarters Q0 … Q3 of `len`/2: stage `len` pairs Q0
/// with Q1 and Q2 with Q3 (factor k of its own), then stage 2·`len` pairs
/// Q0 with Q2 (factor k) and Q1 with Q3 (factor `len`/2 + k).
#[inline(always)]
fn stage_pair<S: pulp::Simd>(
    simd: S,
    re: &mut [f64],
    im: &mut [f64],
    factors: &StagedFactors,
    len: usize,
) {
    let quarter = len / 2;
    if !quarter.is_multiple_of(S::F64_LANES) {
        return stage_pair(pulp::Scalar::new(), re, im, factors, len);
    }
    let (cos1, sin1) = stage_factors(factors, len);
    let (cos2, sin2) = stage_factors(factors, 2 * len);
    let (cos2_low, cos2_high) = cos2.split_at(quarter);
    let (sin2_low, sin2_high) = sin2.split_at(quarter);
    let (cos1, sin1) = (lanes::<S>(cos1), lanes::<S>(sin1));
    let (cos2_low, sin2_low) = (lanes::<S>(cos2_low), lanes::<S>(sin2_low));
    let (cos2_high, sin2_high) = (lanes::<S>(cos2_high), lanes::<S>(sin2_high));
    for (re, im) in re
        .chunks_exact_mut(2 * len)
        .zip(im.chunks_exact_mut(2 * len))
    {
        let [r0, r1, r2, r3] = quarters(re, quarter);
        let [i0, i1, i2, i3] = quarters(im, quarter);
        let (r0, r1, r2, r3) = (
            S::as_mut_simd_f64s(r0).0,
            S::as_mut_simd_f64s(r1).0,
            S::as_mut_simd_f64s(r2).0,
            S::as_mut_simd_f64s(r3).0,
        );
        let (i0, i1, i2, i3) = (
            S::as_mut_simd_f64s(i0).0,
            S::as_mut_simd_f64s(i1).0,
            S::as_mut_simd_f64s(i2).0,
            S::as_mut_simd_f64s(i3).0,
        );
        for k in 0..cos1.len() {
            let w1 = (cos1[k], sin1[k]);
            let (q0, q1) = butterfly(simd, (r0[k], i0[k]), (r1[k], i1[k]), w1);
            let (q2, q3) = butterfly(simd, (r2[k], i2[k]), (r3[k], i3[k]), w1);
            let (q0, q2) = butterfly(simd, q0, q2, (cos2_low[k], sin2_low[k]));
            let (q1, q3) = butterfly(simd, q1, q3, (cos2_high[k], sin2_high[k]));
            (r0[k], i0[k]) = q0;
            (r1[k], i1[k]) = q1;
            (r2[k], i2[k]) = q2;
            (r3[k], i3[k]) = q3;
        }
    }
}

/// The whole vectors of `x`.
fn lanes<S: pulp::Simd>(x: &[f64]) -> &[S::f64s] {
    S::as_simd_f64s(x).0
}

/// `x` split into four consecutive quarters of `quarter` entries.
fn quarters(x: &mut [f64], quarter: usize) -> [&mut [f64]; 4] {
    let (low, high) = x.split_at_mut(2 * quarter);
    let (q0, q1) = low.split_at_mut(quarter);
    let (q2, q3) = high.split_at_mut(quarter);
    [q0, q1, q2, q3]
}

/// Sample autocovariances γ̂_k = (1/n) Σ_{t=0}^{n−1−k} (x_t − x̄)(x_{t+k} − x̄) for all lags
/// k = 0…n−1, by zero-padded FFT in O(n log n).
///
/// The divisor is n for every lag (not n − k), which makes the sequence positive semi-definite
/// as Geyer's estimators require. Draws far from unit scale are summed at unit scale (an exact
/// power-of-two rescaling), so a result is infinite or 0 only where the autocovariance itself
/// leaves the range of doubles. Errors on an empty or non-finite series.
pub fn autocovariance(x: &[f64]) -> Result<Vec<f64>> {
    check_series(x)?;
    let (unit, e) = at_unit_scale(x);
    Ok(scaled_back(fft_autocovariance(&unit), e))
}

/// Same autocovariances as [`autocovariance`] (divisor n), for lags 0…`max_lag` only, by the
/// direct O(n·max_lag) sum. `max_lag` is clamped to n − 1.
pub fn autocovariance_direct(x: &[f64], max_lag: usize) -> Result<Vec<f64>> {
    check_series(x)?;
    let (unit, e) = at_unit_scale(x);
    let n = unit.len();
    let mean = unit.iter().sum::<f64>() / n as f64;
    let max_lag = max_lag.min(n - 1);
    let acov = (0..=max_lag)
        .map(|k| {
            unit[..n - k]
                .iter()
                .zip(&unit[k..])
                .map(|(a, b)| (a - mean) * (b - mean))
                .sum::<f64>()
                / n as f64
        })
        .collect();
    Ok(scaled_back(acov, e))
}

/// Autocorrelation ρ̂_k = γ̂_k / γ̂_0 for lags 0…`max_lag` (clamped to n − 1), by FFT.
/// Errors on a constant series.
pub fn autocorrelation(x: &[f64], max_lag: usize) -> Result<Vec<f64>> {
    check_series(x)?;
    // The ratios do not depend on the scale: no need to scale back.
    let mut acov = fft_autocovariance(&at_unit_scale(x).0);
    let g0 = acov[0];
    if g0 <= 0.0 {
        return Err(DiagnosticsError::ZeroVariance("autocorrelation"));
    }
    acov.truncate(max_lag.saturating_add(1));
    acov.iter_mut().for_each(|v| *v /= g0);
    Ok(acov)
}

/// Errors unless the series is non-empty and finite.
fn check_series(x: &[f64]) -> Result<()> {
    if x.is_empty() {
        return Err(DiagnosticsError::Empty("autocovariance series"));
    }
    check_finite(x, "autocovariance series")
}

/// Autocovariances of x·2^−e turned into those of x (times 2^2e, in two steps of 2^e).
fn scaled_back(acov: Vec<f64>, e: i32) -> Vec<f64> {
    if e == 0 {
        return acov;
    }
    acov.into_iter()
        .map(|g| times_pow2(times_pow2(g, e), e))
        .collect()
}

/// The autocovariances of [`autocovariance`] on a non-empty finite series, as they are.
fn fft_autocovariance(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    let mean = x.iter().sum::<f64>() / n as f64;
    // Padding to ≥ 2n prevents circular wrap-around of the correlation.
    let len = (2 * n).next_power_of_two();
    let mut re = vec![0.0; len];
    let mut im = vec![0.0; len];
    for (r, &v) in re.iter_mut().zip(x) {
        *r = v - mean;
    }
    fft_in_place(&mut re, &mut im, false, Some(n));
    for (r, i) in re.iter_mut().zip(im.iter_mut()) {
        *r = *r * *r + *i * *i;
        *i = 0.0;
    }
    fft_in_place(&mut re, &mut im, true, Some(len));
    let scale = 1.0 / (len as f64 * n as f64);
    re.truncate(n);
    re.iter_mut().for_each(|v| *v *= scale);
    re
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn fft_matches_naive_dft() {
        // long enough for stages in whole vectors of every SIMD width
        let n = 64;
        let re0: Vec<f64> = (0..n)
            .map(|i| ((i * 7 % 5) as f64).sin() + i as f64 * 0.1)
            .collect();
        let im0: Vec<f64> = (0..n).map(|i| (i as f64 * 0.3).cos()).collect();
        let (mut re, mut im) = (re0.clone(), im0.clone());
        fft_in_place(&mut re, &mut im, false, None);
        for k in 0..n {
            let (mut sr, mut si) = (0.0, 0.0);
            for t in 0..n {
                let a = -2.0 * std::f64::consts::PI * (k * t) as f64 / n as f64;
                sr += re0[t] * a.cos() - im0[t] * a.sin();
                si += re0[t] * a.sin() + im0[t] * a.cos();
            }
            assert!((re[k] - sr).abs() < 1e-12 && (im[k] - si).abs() < 1e-12);
        }
        // Inverse recovers the input up to the factor n.
        fft_in_place(&mut re, &mut im, true, None);
        for t in 0..n {
            assert!((re[t] / n as f64 - re0[t]).abs() < 1e-13);
            assert!((im[t] / n as f64 - im0[t]).abs() < 1e-13);
        }
    }

    /// The butterflies one stage after another over the whole array, one
    /// entry at a time: the order of operations the cache-blocked, paired
    /// and vectorised stages must reproduce bit for bit.
    fn stage_by_stage(re: &mut [f64], im: &mut [f64], factors: &StagedFactors) {
        let n = re.len();
        let mut len = 2;
        while len <= n {
            let half = len / 2;
            for start in (0..n).step_by(len) {
                for k in 0..half {
                    let (c, s) = (factors.cos[half - 1 + k], factors.sin[half - 1 + k]);
                    let (a, b) = (start + k, start + k + half);
                    let tr = re[b] * c - im[b] * s;
                    let ti = re[b] * s + im[b] * c;
                    (re[b], im[b]) = (re[a] - tr, im[a] - ti);
                    (re[a], im[a]) = (re[a] + tr, im[a] + ti);
                }
            }
            len *= 2;
        }
    }

    #[test]
    fn butterflies_equal_the_stage_by_stage_radix_2_bit_for_bit() {
        // every length from 2 to past both cache blocks: odd and even
        // numbers of stages in each group, quarters shorter than a vector
        // (one entry at a time) and whole vectors of every width
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for log_n in 1..=18 {
            let n = 1usize << log_n;
            let re0: Vec<f64> = (0..n).map(|_| StandardNormal.sample(&mut rng)).collect();
            let im0: Vec<f64> = (0..n).map(|_| StandardNormal.sample(&mut rng)).collect();
            let twiddles = Twiddles::new(n);
            for (inverse, factors) in [(false, &twiddles.forward), (true, &twiddles.inverse)] {
                let (mut re, mut im) = (re0.clone(), im0.clone());
                butterflies(&mut re, &mut im, &twiddles, inverse);
                let (mut re_ref, mut im_ref) = (re0.clone(), im0.clone());
                stage_by_stage(&mut re_ref, &mut im_ref, factors);
                let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&re), bits(&re_ref), "n = {n}, inverse = {inverse}");
                assert_eq!(bits(&im), bits(&im_ref), "n = {n}, inverse = {inverse}");
            }
        }
    }

    #[test]
    fn real_data_skip_only_swaps_of_two_zeros() {
        // the permutation of real data zero from m on equals the full one
        let n = 1 << 10;
        for m in [1, 100, n / 2, n / 2 + 1, n] {
            let re0: Vec<f64> = (0..n)
                .map(|i| if i < m { i as f64 + 0.5 } else { 0.0 })
                .collect();
            let (mut re, mut im) = (re0.clone(), vec![0.0; n]);
            fft_in_place(&mut re, &mut im, false, Some(m));
            let (mut re_full, mut im_full) = (re0, vec![0.0; n]);
            fft_in_place(&mut re_full, &mut im_full, false, None);
            let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&re), bits(&re_full), "m = {m}");
            assert_eq!(bits(&im), bits(&im_full), "m = {m}");
        }
    }

    #[test]
    fn fft_autocovariance_matches_direct_sum() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for n in [1usize, 2, 3, 7, 100, 1000] {
            let x: Vec<f64> = (0..n)
                .map(|_| {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    3.0 + z
                })
                .collect();
            let fft = autocovariance(&x).unwrap();
            let direct = autocovariance_direct(&x, n).unwrap();
            assert_eq!(fft.len(), n);
            for (a, b) in fft.iter().zip(&direct) {
                assert!((a - b).abs() < 1e-12 * direct[0].max(1e-300), "n = {n}");
            }
        }
    }

    #[test]
    fn autocorrelation_of_ar1_is_geometric() {
        // Stationary AR(1) with ρ = 0.8 has autocorrelation ρ^k. Bartlett's formula gives
        // sd(ρ̂_k) ≤ √((1+ρ²)/(1−ρ²)/n) ≈ 0.0068 at n = 10⁵; 4 sd = 0.027.
        let (rho, n) = (0.8, 100_000);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let mut v: f64 = StandardNormal.sample(&mut rng);
        let x: Vec<f64> = (0..n)
            .map(|_| {
                let out = v;
                let e: f64 = StandardNormal.sample(&mut rng);
                v = rho * v + (1.0 - rho * rho).sqrt() * e;
                out
            })
            .collect();
        let acf = autocorrelation(&x, 10).unwrap();
        assert_eq!(acf.len(), 11);
        for (k, r) in acf.iter().enumerate() {
            assert!((r - rho.powi(k as i32)).abs() < 0.027, "lag {k}: {r}");
        }
    }

    #[test]
    fn autocorrelation_of_constant_series_is_an_error() {
        assert!(autocorrelation(&[2.0; 10], 3).is_err());
        assert!(autocovariance(&[]).is_err());
        assert!(autocovariance(&[1.0, f64::NAN]).is_err());
    }

    #[test]
    fn draws_far_from_unit_scale_neither_overflow_nor_underflow() {
        // Halves at two levels: the centred FFT's lowest frequency holds ≈ 0.3·n·max|x|, whose
        // square overflowed at n = 2^15 draws of 2^499 (NaN autocovariances); squares of draws
        // of 2^-600 underflowed to a zero variance.
        let n = 1 << 15;
        let x: Vec<f64> = (0..n)
            .map(|t| if t < n / 2 { 1.0 } else { -0.5 } + 0.01 * ((t * 7919 % 101) as f64))
            .collect();
        let (big, small) = (2.0_f64.powi(499), 2.0_f64.powi(-300));
        let large: Vec<f64> = x.iter().map(|v| v * big).collect();
        let tiny: Vec<f64> = x.iter().map(|v| v * small * small).collect();
        let scaled = |g: &[f64], f: f64| g.iter().map(|v| v * f * f).collect::<Vec<_>>();
        let unit = autocovariance(&x).unwrap();
        // (assert! rather than assert_eq!: 2^15 values are too many to print)
        assert!(autocovariance(&large).unwrap() == scaled(&unit, big));
        let unit_direct = autocovariance_direct(&x, 3).unwrap();
        assert_eq!(
            autocovariance_direct(&large, 3).unwrap(),
            scaled(&unit_direct, big)
        );
        let acf = autocorrelation(&x, 10).unwrap();
        assert_eq!(autocorrelation(&large, 10).unwrap(), acf);
        assert_eq!(autocorrelation(&tiny, 10).unwrap(), acf);
        // Autocovariances past the largest double are infinite, not NaN.
        assert_eq!(
            autocovariance(&[1e308, -1e308]).unwrap(),
            [f64::INFINITY, f64::NEG_INFINITY]
        );
    }
}
