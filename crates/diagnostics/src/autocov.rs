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
/// `im_is_zero` says that `im` holds only zeros (the transform of real
/// data): the bit-reversal permutation then leaves it as it is.
fn fft_in_place(re: &mut [f64], im: &mut [f64], inverse: bool, im_is_zero: bool) {
    let n = re.len();
    debug_assert!(n.is_power_of_two() && im.len() == n);
    debug_assert!(!im_is_zero || im.iter().all(|&v| v == 0.0));
    let twiddles = twiddles(n);
    for &(i, j) in &twiddles.swaps {
        re.swap(i, j);
        if !im_is_zero {
            im.swap(i, j);
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
/// entry k of its second, t = w_k·b, (a, b) ← (a + t, a − t). A stage whose
/// half-blocks hold whole SIMD vectors runs a vector of k at a time; the
/// arithmetic per entry is the scalar one, a multiplication and an addition
/// or subtraction each (no fused multiply-add), so the result is the same
/// on every CPU and at every vector width.
struct Butterflies<'a> {
    re: &'a mut [f64],
    im: &'a mut [f64],
    factors: &'a StagedFactors,
}

impl pulp::WithSimd for Butterflies<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self { re, im, factors } = self;
        let n = re.len();
        let mut len = 2;
        while len <= n {
            let half = len / 2;
            let (cos, sin) = (
                &factors.cos[half - 1..len - 1],
                &factors.sin[half - 1..len - 1],
            );
            for (re, im) in re.chunks_exact_mut(len).zip(im.chunks_exact_mut(len)) {
                let (re_a, re_b) = re.split_at_mut(half);
                let (im_a, im_b) = im.split_at_mut(half);
                if half % S::F64_LANES == 0 {
                    let (re_a, _) = S::as_mut_simd_f64s(re_a);
                    let (re_b, _) = S::as_mut_simd_f64s(re_b);
                    let (im_a, _) = S::as_mut_simd_f64s(im_a);
                    let (im_b, _) = S::as_mut_simd_f64s(im_b);
                    let (cos, _) = S::as_simd_f64s(cos);
                    let (sin, _) = S::as_simd_f64s(sin);
                    for k in 0..cos.len() {
                        let (c, s) = (cos[k], sin[k]);
                        let tr =
                            simd.sub_f64s(simd.mul_f64s(re_b[k], c), simd.mul_f64s(im_b[k], s));
                        let ti =
                            simd.add_f64s(simd.mul_f64s(re_b[k], s), simd.mul_f64s(im_b[k], c));
                        re_b[k] = simd.sub_f64s(re_a[k], tr);
                        im_b[k] = simd.sub_f64s(im_a[k], ti);
                        re_a[k] = simd.add_f64s(re_a[k], tr);
                        im_a[k] = simd.add_f64s(im_a[k], ti);
                    }
                } else {
                    for k in 0..half {
                        let (c, s) = (cos[k], sin[k]);
                        let tr = re_b[k] * c - im_b[k] * s;
                        let ti = re_b[k] * s + im_b[k] * c;
                        re_b[k] = re_a[k] - tr;
                        im_b[k] = im_a[k] - ti;
                        re_a[k] += tr;
                        im_a[k] += ti;
                    }
                }
            }
            len *= 2;
        }
    }
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
    fft_in_place(&mut re, &mut im, false, true);
    for (r, i) in re.iter_mut().zip(im.iter_mut()) {
        *r = *r * *r + *i * *i;
        *i = 0.0;
    }
    fft_in_place(&mut re, &mut im, true, true);
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
        fft_in_place(&mut re, &mut im, false, false);
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
        fft_in_place(&mut re, &mut im, true, false);
        for t in 0..n {
            assert!((re[t] / n as f64 - re0[t]).abs() < 1e-13);
            assert!((im[t] / n as f64 - im0[t]).abs() < 1e-13);
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
