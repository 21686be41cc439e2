//! Maximum mean discrepancy (squared) between two samples.

use crate::error::{DiagnosticsError, Result, check_finite, rows};

/// A positive-definite kernel k(x, y) on vectors of equal length.
///
/// Implemented for [`PolynomialKernel`] and for any closure `Fn(&[f64], &[f64]) -> f64`.
pub trait MmdKernel {
    /// Evaluates k(x, y); `x` and `y` have the same length.
    fn eval(&self, x: &[f64], y: &[f64]) -> f64;
}

impl<F: Fn(&[f64], &[f64]) -> f64> MmdKernel for F {
    fn eval(&self, x: &[f64], y: &[f64]) -> f64 {
        self(x, y)
    }
}

/// Polynomial kernel k(x, y) = (c + ⟨x, y⟩)^p.
///
/// The KAMH/KMC papers write c = 1, p = 3 ([`PolynomialKernel::paper`]); their code uses c = 0.2
/// ([`PolynomialKernel::code`]). Record which one a result used.
///
/// Every kernel is positive definite: the fields are private, so a kernel comes from
/// [`PolynomialKernel::new`] (or its named presets) or from deserialising `{"offset", "degree"}`,
/// which checks the same way.
///
/// ```compile_fail,E0451
/// # use kameleon_diagnostics::PolynomialKernel;
/// let not_positive_definite = PolynomialKernel { offset: -1.0, degree: 0 };
/// ```
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "PolynomialKernelFields")]
pub struct PolynomialKernel {
    offset: f64,
    degree: i32,
}

/// The serialised fields of a [`PolynomialKernel`], checked by [`PolynomialKernel::new`] when
/// deserialised.
#[derive(serde::Deserialize)]
struct PolynomialKernelFields {
    offset: f64,
    degree: i32,
}

impl TryFrom<PolynomialKernelFields> for PolynomialKernel {
    type Error = DiagnosticsError;

    fn try_from(f: PolynomialKernelFields) -> Result<Self> {
        Self::new(f.offset, f.degree)
    }
}

impl PolynomialKernel {
    /// Creates (c + ⟨x, y⟩)^p; errors unless c is finite and ≥ 0 and p ≥ 1 (so the kernel is
    /// positive definite).
    pub fn new(offset: f64, degree: i32) -> Result<Self> {
        if !(offset.is_finite() && offset >= 0.0) || degree < 1 {
            return Err(DiagnosticsError::InvalidArgument(format!(
                "polynomial kernel needs offset >= 0 and degree >= 1, got ({offset}, {degree})"
            )));
        }
        Ok(Self { offset, degree })
    }

    /// The papers' kernel (1 + ⟨x, y⟩)³.
    pub fn paper() -> Self {
        Self {
            offset: 1.0,
            degree: 3,
        }
    }

    /// The anchor code's kernel (0.2 + ⟨x, y⟩)³ (kameleon-mcmc `PolynomialKernel` defaults).
    pub fn code() -> Self {
        Self {
            offset: 0.2,
            degree: 3,
        }
    }

    /// The offset c ≥ 0.
    pub fn offset(&self) -> f64 {
        self.offset
    }

    /// The degree p ≥ 1.
    pub fn degree(&self) -> i32 {
        self.degree
    }
}

impl MmdKernel for PolynomialKernel {
    fn eval(&self, x: &[f64], y: &[f64]) -> f64 {
        let dot: f64 = x.iter().zip(y).map(|(a, b)| a * b).sum();
        (self.offset + dot).powi(self.degree)
    }
}

/// Which MMD² estimator to compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MmdEstimator {
    /// V-statistic: all pairs including i = j; always ≥ 0 for a positive-definite kernel
    /// (KMC's code).
    Biased,
    /// U-statistic: within-sample sums exclude i = j, divided by n(n − 1); unbiased, can be
    /// negative (KAMH's code).
    Unbiased,
}

/// Neumaier-compensated running sum (the three MMD terms can be large and cancel).
#[derive(Default)]
struct CompensatedSum {
    sum: f64,
    compensation: f64,
}

impl CompensatedSum {
    fn add(&mut self, v: f64) {
        let t = self.sum + v;
        if self.sum.abs() >= v.abs() {
            self.compensation += (self.sum - t) + v;
        } else {
            self.compensation += (v - t) + self.sum;
        }
        self.sum = t;
    }

    fn value(&self) -> f64 {
        self.sum + self.compensation
    }
}

/// Sum of k(a_i, b_j) over all pairs (or over i ≠ j when `skip_diagonal`, for a = b).
fn kernel_sum<K: MmdKernel + ?Sized>(
    k: &K,
    a: &[f64],
    b: &[f64],
    d: usize,
    skip_diagonal: bool,
) -> f64 {
    let mut acc = CompensatedSum::default();
    for (i, x) in a.chunks_exact(d).enumerate() {
        for (j, y) in b.chunks_exact(d).enumerate() {
            if !(skip_diagonal && i == j) {
                acc.add(k.eval(x, y));
            }
        }
    }
    acc.value()
}

/// Squared MMD between samples `x` (n × d) and `y` (m × d), both row-major, with kernel `k`.
///
/// Biased: (1/n²)ΣΣ k(xᵢ,xⱼ) + (1/m²)ΣΣ k(yᵢ,yⱼ) − (2/nm)ΣΣ k(xᵢ,yⱼ).
/// Unbiased: the within-sample sums skip i = j and are divided by n(n−1) and m(m−1) (needs
/// n, m ≥ 2). Cost O((n + m)²·d); sums are compensated against cancellation. This is the squared
/// MMD (as both anchors report), not its square root. Errors on non-finite draws, and when the
/// kernel values are not finite or their sums overflow (rescale the draws).
/// For the polynomial kernel on large samples prefer [`mmd2_polynomial`] (same value, linear cost).
pub fn mmd2<K: MmdKernel + ?Sized>(
    x: &[f64],
    y: &[f64],
    d: usize,
    kernel: &K,
    estimator: MmdEstimator,
) -> Result<f64> {
    let n = rows(x, d, "mmd2 x")?;
    let m = rows(y, d, "mmd2 y")?;
    check_finite(x, "mmd2 x")?;
    check_finite(y, "mmd2 y")?;
    let (nf, mf) = (n as f64, m as f64);
    let cross = kernel_sum(kernel, x, y, d, false) / (nf * mf);
    finite_mmd2(match estimator {
        MmdEstimator::Biased => {
            kernel_sum(kernel, x, x, d, false) / (nf * nf)
                + kernel_sum(kernel, y, y, d, false) / (mf * mf)
                - 2.0 * cross
        }
        MmdEstimator::Unbiased => {
            if n < 2 || m < 2 {
                return Err(DiagnosticsError::TooFewDraws {
                    what: "unbiased mmd2",
                    needed: 2,
                    got: n.min(m),
                });
            }
            kernel_sum(kernel, x, x, d, true) / (nf * (nf - 1.0))
                + kernel_sum(kernel, y, y, d, true) / (mf * (mf - 1.0))
                - 2.0 * cross
        }
    })
}

/// The MMD² value, or an error when it is not finite: then a kernel sum behind it was not (kernel
/// values past the largest double, or NaN from the kernel), since finite draws were checked.
fn finite_mmd2(value: f64) -> Result<f64> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(DiagnosticsError::NonFinite(
            "the kernel sums of the MMD² (kernel values overflow or are NaN: rescale the draws)",
        ))
    }
}

/// The binomial coefficient C(n, k) in floating point, by the product Π_{j≤k} (n − k + j)/j whose
/// partial products are the integers C(n − k + j, j): exact while they stay below 2⁵³, +∞ past
/// the largest double.
fn binomial(n: usize, k: usize) -> f64 {
    let k = k.min(n - k);
    (1..=k).fold(1.0, |c, j| c * (n - k + j) as f64 / j as f64)
}

/// Explicit feature map of (c + ⟨a, b⟩)^p = ⟨φ(a), φ(b)⟩ by the multinomial theorem: one
/// entry per multi-index (k₀, k₁, …, k_d) with Σk = p, equal to
/// √(p!/(k₀!⋯k_d!)·c^{k₀}) · Π_{i≥1} a_i^{k_i}. There are C(d + p, p) entries (220 for d = 9, p = 3).
struct PolynomialFeatures {
    /// Per multi-index: the coefficient √(p!/Πk!·c^{k₀}) and the exponents k₁…k_d.
    terms: Vec<(f64, Vec<i32>)>,
}

impl PolynomialFeatures {
    /// Whether the feature map, C(d + p, p) features per row, costs less than kernel sums over
    /// `rows` rows in all, `rows` kernel evaluations per row.
    fn cheaper(kernel: &PolynomialKernel, d: usize, rows: usize) -> bool {
        let p = kernel.degree as usize;
        binomial(d.saturating_add(p), p) < rows as f64
    }

    fn new(kernel: &PolynomialKernel, d: usize) -> Self {
        let p = kernel.degree;
        let mut terms = Vec::new();
        let mut exps = vec![0i32; d];
        // Enumerate (k₁…k_d) with Σ ≤ p; k₀ = p − Σ.
        fn visit(i: usize, left: i32, exps: &mut [i32], out: &mut dyn FnMut(&[i32], i32)) {
            if i == exps.len() {
                out(exps, left);
                return;
            }
            for k in 0..=left {
                exps[i] = k;
                visit(i + 1, left - k, exps, out);
            }
            exps[i] = 0;
        }
        visit(0, p, &mut exps, &mut |e: &[i32], k0: i32| {
            // p!/(k₀!k₁!⋯k_d!) = C(p, k₀)·C(p − k₀, k₁)·…, without the factorials that overflow
            // from 171! on.
            let mut left = p as usize;
            let mut multinomial = 1.0;
            for &k in std::iter::once(&k0).chain(e) {
                multinomial *= binomial(left, k as usize);
                left -= k as usize;
            }
            let coef = multinomial.sqrt() * kernel.offset.sqrt().powi(k0);
            terms.push((coef, e.to_vec()));
        });
        Self { terms }
    }

    /// Adds φ(row) to `acc` (compensated) and returns ‖φ(row)‖².
    fn accumulate(&self, row: &[f64], acc: &mut [CompensatedSum]) -> f64 {
        let mut norm2 = 0.0;
        for ((coef, exps), a) in self.terms.iter().zip(acc.iter_mut()) {
            let v = coef
                * row
                    .iter()
                    .zip(exps)
                    .map(|(x, &k)| x.powi(k))
                    .product::<f64>();
            a.add(v);
            norm2 += v * v;
        }
        norm2
    }

    /// Feature sums S = Σ_i φ(x_i) and Σ_i ‖φ(x_i)‖² over the rows of `x`.
    fn sums(&self, x: &[f64], d: usize) -> (Vec<f64>, f64) {
        let mut acc: Vec<CompensatedSum> = (0..self.terms.len())
            .map(|_| CompensatedSum::default())
            .collect();
        let mut diag = CompensatedSum::default();
        for row in x.chunks_exact(d) {
            diag.add(self.accumulate(row, &mut acc));
        }
        (
            acc.iter().map(CompensatedSum::value).collect(),
            diag.value(),
        )
    }
}

/// Same value as [`mmd2`] with a [`PolynomialKernel`], computed exactly through the explicit
/// feature map (F = C(d + p, p) features) in O((n + m)·F·d) when F < n + m, else by the kernel
/// sums of [`mmd2`] in O((n + m)²·d): the cost is O((n + m)·d·min(F, n + m)), so it stays cheap
/// for large samples and for many dimensions. Through the features the biased estimator is
/// ‖φ̄_X − φ̄_Y‖² (no cancellation, never negative); the unbiased one is
/// (‖S_X‖² − Σ‖φ(xᵢ)‖²)/(n(n−1)) + (same for Y) − 2⟨S_X, S_Y⟩/(nm) with S = Σφ.
/// A feature sum that is not finite hands over to the kernel sums. Errors as [`mmd2`].
pub fn mmd2_polynomial(
    x: &[f64],
    y: &[f64],
    d: usize,
    kernel: &PolynomialKernel,
    estimator: MmdEstimator,
) -> Result<f64> {
    let n = rows(x, d, "mmd2_polynomial x")?;
    let m = rows(y, d, "mmd2_polynomial y")?;
    check_finite(x, "mmd2_polynomial x")?;
    check_finite(y, "mmd2_polynomial y")?;
    if !PolynomialFeatures::cheaper(kernel, d, n + m) {
        return mmd2(x, y, d, kernel, estimator);
    }
    let features = PolynomialFeatures::new(kernel, d);
    let (sx, dx) = features.sums(x, d);
    let (sy, dy) = features.sums(y, d);
    let (nf, mf) = (n as f64, m as f64);
    let value = match estimator {
        MmdEstimator::Biased => sx
            .iter()
            .zip(&sy)
            .map(|(a, b)| (a / nf - b / mf).powi(2))
            .sum(),
        MmdEstimator::Unbiased => {
            if n < 2 || m < 2 {
                return Err(DiagnosticsError::TooFewDraws {
                    what: "unbiased mmd2_polynomial",
                    needed: 2,
                    got: n.min(m),
                });
            }
            let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(u, v)| u * v).sum::<f64>();
            (dot(&sx, &sx) - dx) / (nf * (nf - 1.0)) + (dot(&sy, &sy) - dy) / (mf * (mf - 1.0))
                - 2.0 * dot(&sx, &sy) / (nf * mf)
        }
    };
    if value.is_finite() {
        Ok(value)
    } else {
        // Past the feature map's range (its coefficients reach C(p, p/2), infinite from p ≈ 1030
        // on, while the kernel's values may not be): the kernel sums decide.
        mmd2(x, y, d, kernel, estimator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn normals(rng: &mut Xoshiro256PlusPlus, n: usize, shift: f64) -> Vec<f64> {
        (0..n)
            .map(|i| {
                let z: f64 = StandardNormal.sample(rng);
                if i % 2 == 0 { z + shift } else { z }
            })
            .collect()
    }

    #[test]
    fn matches_hand_expanded_formula_on_tiny_inputs() {
        // d = 1, x = {0, 1}, y = {2, 0}, k = (1 + xy)^3, expanded by hand:
        // k(0,0)=1, k(0,1)=1, k(1,1)=8, k(0,2)=1, k(1,2)=27, k(2,2)=125.
        let k = PolynomialKernel::paper();
        let x = [0.0, 1.0];
        let y = [2.0, 0.0];
        // Biased: xx = (1+1+1+8)/4, yy = (125+1+1+1)/4, xy = (1+1+27+1)/4.
        let biased = (11.0 + 128.0 - 2.0 * 30.0) / 4.0;
        assert!((mmd2(&x, &y, 1, &k, MmdEstimator::Biased).unwrap() - biased).abs() < 1e-12);
        // Unbiased: xx = (1+1)/2, yy = (1+1)/2, xy unchanged.
        let unbiased = 1.0 + 1.0 - 2.0 * 30.0 / 4.0;
        assert!((mmd2(&x, &y, 1, &k, MmdEstimator::Unbiased).unwrap() - unbiased).abs() < 1e-12);
    }

    #[test]
    fn closure_kernel_and_feature_space_identity() {
        // For the linear kernel ⟨x,y⟩ the biased MMD² equals ‖x̄ − ȳ‖² exactly.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let x = normals(&mut rng, 90, 0.4);
        let y = normals(&mut rng, 60, 0.0);
        let linear = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(u, v)| u * v).sum::<f64>();
        let mean =
            |s: &[f64], j: usize| s.iter().skip(j).step_by(3).sum::<f64>() * 3.0 / s.len() as f64;
        let direct: f64 = (0..3).map(|j| (mean(&x, j) - mean(&y, j)).powi(2)).sum();
        let v = mmd2(&x, &y, 3, &linear, MmdEstimator::Biased).unwrap();
        assert!((v - direct).abs() < 1e-12);
    }

    #[test]
    fn same_law_near_zero_and_shift_detected() {
        // d = 2, n = m = 600, five seeds. Under the same law E MMD²_u = 0, so the seed mean must
        // be within 4 standard errors (estimated from the seeds themselves) of 0. A 1-sd mean
        // shift in one coordinate must give a value far above that noise level.
        let k = PolynomialKernel::code();
        let (mut same, mut shifted) = (Vec::new(), Vec::new());
        for seed in 0..5 {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(10 + seed);
            let x = normals(&mut rng, 600, 0.0);
            let y = normals(&mut rng, 600, 0.0);
            let z = normals(&mut rng, 600, 1.0);
            same.push(mmd2(&x, &y, 2, &k, MmdEstimator::Unbiased).unwrap());
            shifted.push(mmd2(&x, &z, 2, &k, MmdEstimator::Unbiased).unwrap());
            assert!(mmd2(&x, &y, 2, &k, MmdEstimator::Biased).unwrap() >= 0.0);
        }
        let mean = same.iter().sum::<f64>() / 5.0;
        let sd = (same.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
        assert!(
            mean.abs() < 4.0 * sd / 5f64.sqrt(),
            "same-law mean {mean}, sd {sd}"
        );
        let min_shift = shifted.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(
            min_shift > 10.0 * sd,
            "shifted {min_shift}, same-law sd {sd}"
        );
        // Biased MMD² of a sample with itself is exactly 0 (up to rounding).
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
        let x = normals(&mut rng, 100, 0.0);
        assert!(mmd2(&x, &x, 2, &k, MmdEstimator::Biased).unwrap().abs() < 1e-10);
    }

    #[test]
    fn feature_map_path_matches_kernel_sums() {
        // Independent computations of the same quantity: O(n²) kernel sums vs the explicit
        // multinomial feature map; they agree to rounding (1e-9 relative to the kernel scale).
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
        for (d, kernel) in [
            (1, PolynomialKernel::paper()),
            (3, PolynomialKernel::code()),
            (4, PolynomialKernel::new(0.7, 2).unwrap()),
        ] {
            let x = normals(&mut rng, 40 * d, 0.3);
            let y = normals(&mut rng, 25 * d, 0.0);
            for est in [MmdEstimator::Biased, MmdEstimator::Unbiased] {
                let direct = mmd2(&x, &y, d, &kernel, est).unwrap();
                let fast = mmd2_polynomial(&x, &y, d, &kernel, est).unwrap();
                let scale = kernel.eval(&x[..d], &x[..d]).abs().max(1.0);
                assert!(
                    (direct - fast).abs() < 1e-9 * scale,
                    "d {d} {est:?}: {direct} vs {fast}"
                );
            }
        }
        // Feature count C(d + p, p): 220 for d = 9, p = 3.
        assert_eq!(
            PolynomialFeatures::new(&PolynomialKernel::paper(), 9)
                .terms
                .len(),
            220
        );
    }

    #[test]
    fn binomials_are_exact_integers() {
        assert_eq!(binomial(0, 0), 1.0);
        assert_eq!(binomial(5, 2), 10.0);
        assert_eq!(binomial(203, 3), 1_373_701.0);
        // C(60, 30) = 118264581564861424 is above 2⁵³: exact to rounding.
        assert!((binomial(60, 30) / 118_264_581_564_861_424.0 - 1.0).abs() < 1e-15);
        assert_eq!(binomial(2000, 1000), f64::INFINITY);
    }

    #[test]
    fn feature_map_of_high_degree_matches_kernel_sums() {
        // Degree 200: p! overflows from 171! on, so coefficients from factorials were ∞/∞ = NaN.
        // Small draws keep (1 + ⟨x, y⟩)^200 near 1; rounding only separates the two paths.
        let kernel = PolynomialKernel::new(1.0, 200).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(23);
        let x: Vec<f64> = normals(&mut rng, 120, 0.0)
            .iter()
            .map(|v| 0.1 * v)
            .collect();
        let y: Vec<f64> = normals(&mut rng, 100, 0.0)
            .iter()
            .map(|v| 0.1 * v)
            .collect();
        assert!(PolynomialFeatures::cheaper(&kernel, 1, 220));
        for est in [MmdEstimator::Biased, MmdEstimator::Unbiased] {
            let direct = mmd2(&x, &y, 1, &kernel, est).unwrap();
            let fast = mmd2_polynomial(&x, &y, 1, &kernel, est).unwrap();
            assert!(
                (direct - fast).abs() < 1e-9 * direct.abs(),
                "{est:?}: {direct} vs {fast}"
            );
        }
    }

    #[test]
    fn degrees_past_the_feature_maps_range_use_kernel_sums() {
        // Degree 2000: C(2000, 1000) ≈ 1e600 makes feature coefficients infinite, whose products
        // with vanishing powers of small draws are NaN, while (1 + ⟨x, y⟩)^2000 itself stays
        // near 1. The feature map's count (2001 features < 2100 rows) chose it all the same.
        let kernel = PolynomialKernel::new(1.0, 2000).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(31);
        let small = |v: Vec<f64>| v.iter().map(|u| 1e-3 * u).collect::<Vec<_>>();
        let x = small(normals(&mut rng, 1100, 0.0));
        let y = small(normals(&mut rng, 1000, 0.5));
        assert!(PolynomialFeatures::cheaper(&kernel, 1, 2100));
        for est in [MmdEstimator::Biased, MmdEstimator::Unbiased] {
            assert_eq!(
                mmd2_polynomial(&x, &y, 1, &kernel, est),
                mmd2(&x, &y, 1, &kernel, est)
            );
        }
    }

    #[test]
    fn many_dimensions_use_kernel_sums() {
        // d = 200, p = 3: 1 373 701 features per row, against 40 kernel evaluations per row.
        let kernel = PolynomialKernel::paper();
        assert!(!PolynomialFeatures::cheaper(&kernel, 200, 40));
        assert!(PolynomialFeatures::cheaper(&kernel, 2, 40));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(29);
        let x = normals(&mut rng, 20 * 200, 0.2);
        let y = normals(&mut rng, 20 * 200, 0.0);
        for est in [MmdEstimator::Biased, MmdEstimator::Unbiased] {
            assert_eq!(
                mmd2_polynomial(&x, &y, 200, &kernel, est).unwrap(),
                mmd2(&x, &y, 200, &kernel, est).unwrap()
            );
        }
    }

    #[test]
    fn invariant_to_row_permutation_and_rejects_bad_input() {
        let k = PolynomialKernel::paper();
        let x = [0.1, 0.2, -0.3, 0.4, 1.0, -1.0];
        let x_perm = [1.0, -1.0, 0.1, 0.2, -0.3, 0.4];
        let y = [0.5, 0.5, -0.5, 0.0];
        let a = mmd2(&x, &y, 2, &k, MmdEstimator::Unbiased).unwrap();
        let b = mmd2(&x_perm, &y, 2, &k, MmdEstimator::Unbiased).unwrap();
        assert!((a - b).abs() < 1e-12);
        assert!(mmd2(&x, &y[..3], 2, &k, MmdEstimator::Biased).is_err());
        assert!(mmd2(&x, &y[..2], 2, &k, MmdEstimator::Unbiased).is_err());
        assert!(mmd2(&[f64::NAN, 0.0], &y, 2, &k, MmdEstimator::Biased).is_err());
        assert!(PolynomialKernel::new(-1.0, 3).is_err());
    }

    #[test]
    fn kernel_sums_past_the_largest_double_are_an_error() {
        // (1 + 1e200·1e200)³ overflows: the sums were ∞ − ∞ and the MMD² came out as NaN.
        let k = PolynomialKernel::paper();
        let (x, y) = ([1e200, 1.0, 0.5], [0.0, 1.0, 2.0]);
        for est in [MmdEstimator::Biased, MmdEstimator::Unbiased] {
            assert!(matches!(
                mmd2(&x, &y, 1, &k, est),
                Err(DiagnosticsError::NonFinite(_))
            ));
            // The feature map (4 features for d = 1, against 6 rows) overflows the same way.
            assert!(PolynomialFeatures::cheaper(&k, 1, 6));
            assert!(matches!(
                mmd2_polynomial(&x, &y, 1, &k, est),
                Err(DiagnosticsError::NonFinite(_))
            ));
        }
        let nan = |_: &[f64], _: &[f64]| f64::NAN;
        assert!(mmd2(&x, &y, 1, &nan, MmdEstimator::Biased).is_err());
    }

    #[test]
    fn kernels_deserialise_through_the_checks_of_new() {
        // The field names are the serialised form of committed results: keep them.
        let json = r#"{"offset":0.2,"degree":3}"#;
        let k: PolynomialKernel = serde_json::from_str(json).unwrap();
        assert_eq!(k, PolynomialKernel::code());
        assert_eq!(serde_json::to_string(&k).unwrap(), json);
        // These deserialised into kernels that are not positive definite.
        for bad in [
            r#"{"offset":-1.0,"degree":3}"#,
            r#"{"offset":1.0,"degree":0}"#,
            r#"{"offset":1.0,"degree":-2}"#,
        ] {
            assert!(
                serde_json::from_str::<PolynomialKernel>(bad).is_err(),
                "{bad}"
            );
        }
    }
}
