//! Rank-k update of a lower Cholesky factor by Givens rotations, one column
//! at a time: the online step of [`crate::FiniteEstimator`].
//!
//! Given `A = LLᵀ` (L lower triangular with a positive diagonal) and
//! `V` (m × k), the factor `L'` of `A + VVᵀ` satisfies
//! `[L V] Q = [L' 0]` for an orthogonal Q, since
//! `[L V][L V]ᵀ = LLᵀ + VVᵀ`. Q is a product of Givens rotations, each
//! acting on one column j of L and one column p of V and chosen to zero
//! `V[j, p]` against the diagonal `L[j, j]`:
//!
//! ```text
//! r = √(L[j,j]² + V[j,p]²),  c = L[j,j]/r,  s = V[j,p]/r,  L[j,j] ← r,
//! for i > j:  (L[i,j], V[i,p]) ← (c L[i,j] + s V[i,p],  c V[i,p] − s L[i,j]).
//! ```
//!
//! Columns j = 0, 1, … are processed in order; at column j all k rotations
//! are applied one after the other (rotation p sees the diagonal left by
//! rotation p − 1), so column j is final before column j + 1 starts and every
//! rotation only touches rows below j, where V still holds what the earlier
//! columns left. Rotations never lose positive definiteness (no hyperbolic
//! downdate: the diagonal only grows, `r ≥ L[j,j] > 0`), and an orthogonal
//! transformation is backward stable: `L'L'ᵀ = A + VVᵀ + E` with
//! `‖E‖ = O(ε (‖A‖ + ‖V‖²))` whatever the condition number.
//!
//! Cost: `2km²` multiply-adds over the triangle (4 flops per rotated pair
//! and rotation, each a multiplication and a fused multiply-add), in one pass
//! over L's lower triangle: the column (contiguous in the column-major
//! storage) stays in the L1 cache while the k rotations run over it, the
//! rotation loops vectorise, and L is read and written once per update.

use faer::MatMut;

/// [`rank_update`] failed: a diagonal entry is not positive and finite
/// (non-finite input, or a factor that was not a Cholesky factor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotPositive;

/// Replaces the lower triangle of `factor` (m × m, column-major with
/// contiguous columns; the strict upper triangle is neither read nor
/// written), the Cholesky factor L of `A = LLᵀ`, by that of `A + VVᵀ`, where
/// `vectors` (m × k, contiguous columns) holds V and is overwritten (it ends
/// holding what is left of V below the diagonal: scratch). See the module
/// docs for the algorithm.
///
/// Allocates nothing. On error the factor is partly updated: refactorise.
pub(crate) fn rank_update(
    factor: MatMut<'_, f64>,
    vectors: MatMut<'_, f64>,
) -> Result<(), NotPositive> {
    debug_assert!(factor.nrows() == factor.ncols() && vectors.nrows() == factor.nrows());
    pulp::Arch::new().dispatch(RankUpdate { factor, vectors })
}

/// [`rank_update`] as a [`pulp::WithSimd`] operation, compiled for the best
/// instruction set of the running CPU (AVX2 + FMA where available), where the
/// rotation loop vectorises and `mul_add` is one instruction. Every value is
/// computed by the same scalar operations whatever the vector width, so the
/// result does not depend on the CPU.
struct RankUpdate<'a> {
    factor: MatMut<'a, f64>,
    vectors: MatMut<'a, f64>,
}

impl pulp::WithSimd for RankUpdate<'_> {
    type Output = Result<(), NotPositive>;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) -> Result<(), NotPositive> {
        let Self {
            mut factor,
            mut vectors,
        } = self;
        let (m, k) = (factor.nrows(), vectors.ncols());
        for j in 0..m {
            let column = column_mut(factor.as_mut(), j);
            let (diagonal, below) = column[j..].split_first_mut().expect("j < m");
            for p in 0..k {
                let v = column_mut(vectors.as_mut(), p);
                let (head, v_below) = v[j..].split_first_mut().expect("j < m");
                let (l, vj) = (*diagonal, *head);
                let r = l.mul_add(l, vj * vj).sqrt();
                if !(r.is_finite() && r > 0.0) {
                    return Err(NotPositive);
                }
                let (c, s) = (l / r, vj / r);
                *diagonal = r;
                rotate(c, s, below, v_below);
            }
        }
        Ok(())
    }
}

/// Column j of a matrix with contiguous columns, as a slice.
#[inline(always)]
fn column_mut(matrix: MatMut<'_, f64>, j: usize) -> &mut [f64] {
    matrix
        .col_mut(j)
        .try_as_col_major_mut()
        .expect("contiguous columns")
        .as_slice_mut()
}

/// `(a_i, b_i) ← (c a_i + s b_i, c b_i − s a_i)`: one Givens rotation of two
/// equally long slices; a plain elementwise loop, so it vectorises.
#[inline(always)]
fn rotate(c: f64, s: f64, a: &mut [f64], b: &mut [f64]) {
    for (a, b) in a.iter_mut().zip(b.iter_mut()) {
        let (x, y) = (*a, *b);
        *a = c.mul_add(x, s * y);
        *b = c.mul_add(y, -(s * x));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::linalg::cholesky::llt::update::rank_r_update_clobber;
    use faer::{Col, Mat, Side};
    use rand::{RngExt, SeedableRng};
    use rand_distr::StandardNormal;
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// A random SPD matrix `Q diag(λ) Qᵀ` with eigenvalues log-spaced from
    /// `1/condition` to 1 (Q from the QR of a Gaussian matrix).
    fn spd(m: usize, condition: f64, rng: &mut Xoshiro256PlusPlus) -> Mat<f64> {
        let g = Mat::from_fn(m, m, |_, _| rng.sample::<f64, _>(StandardNormal));
        let q = g.qr().compute_Q();
        let eigen = Col::from_fn(m, |i| condition.powf(-(i as f64) / (m.max(2) - 1) as f64));
        let scaled = Mat::from_fn(m, m, |i, j| q[(i, j)] * eigen[j]);
        let a = &scaled * q.transpose();
        // exactly symmetric
        Mat::from_fn(m, m, |i, j| 0.5 * (a[(i, j)] + a[(j, i)]))
    }

    fn lower_factor(a: &Mat<f64>) -> Mat<f64> {
        let l = a.llt(Side::Lower).expect("SPD").L().to_owned();
        Mat::from_fn(
            a.nrows(),
            a.ncols(),
            |i, j| if i >= j { l[(i, j)] } else { 0.0 },
        )
    }

    /// The largest entry of `|X|`.
    fn max_abs(x: &Mat<f64>) -> f64 {
        let mut max = 0.0f64;
        for j in 0..x.ncols() {
            for i in 0..x.nrows() {
                max = max.max(x[(i, j)].abs());
            }
        }
        max
    }

    /// Updates the factor of a random SPD matrix by k random vectors.
    fn updated(m: usize, k: usize, condition: f64, seed: u64) -> (Mat<f64>, Mat<f64>, Mat<f64>) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let a = spd(m, condition, &mut rng);
        let v = Mat::from_fn(m, k, |_, _| 0.3 * rng.sample::<f64, _>(StandardNormal));
        let mut l = lower_factor(&a);
        // junk in the strict upper triangle must be ignored and kept
        for j in 1..m {
            l[(0, j)] = 7.0;
        }
        rank_update(l.as_mut(), v.clone().as_mut()).expect("positive update");
        for j in 1..m {
            assert_eq!(l[(0, j)], 7.0, "upper triangle untouched");
            l[(0, j)] = 0.0;
        }
        let target = &a + &v * v.transpose();
        (l, target, v)
    }

    /// On a well-conditioned matrix the updated factor equals a fresh
    /// factorisation of `A + VVᵀ` (the Cholesky factor is unique, and both
    /// are computed to ~ε·cond(A) relative accuracy).
    #[test]
    fn matches_a_fresh_factorisation() {
        for (m, k, seed) in [(1, 1, 1), (7, 3, 2), (64, 8, 3), (130, 8, 4), (97, 1, 5)] {
            let (l, target, _) = updated(m, k, 10.0, seed);
            let fresh = lower_factor(&target);
            let error = max_abs(&(&l - &fresh)) / max_abs(&fresh);
            assert!(error < 1e-13, "m = {m}, k = {k}: relative error {error:e}");
        }
    }

    /// Backward stability: even at condition number 10¹², where the factor
    /// itself is determined only to ~10⁻⁴, `L'L'ᵀ` reproduces `A + VVᵀ` to
    /// a few ε relative to its norm.
    #[test]
    fn reconstructs_ill_conditioned_updates() {
        for (m, seed) in [(60, 6), (150, 7)] {
            let (l, target, _) = updated(m, 8, 1e12, seed);
            let residual = &l * l.transpose() - &target;
            let error = max_abs(&residual) / max_abs(&target);
            assert!(error < 1e-14, "m = {m}: relative residual {error:e}");
            for j in 0..m {
                assert!(l[(j, j)] > 0.0);
            }
        }
    }

    /// Agrees with faer's `rank_r_update_clobber` (a different algorithm for
    /// the same factor).
    #[test]
    fn agrees_with_faer() {
        let (m, k) = (90, 8);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
        let a = spd(m, 100.0, &mut rng);
        let v = Mat::from_fn(m, k, |_, _| rng.sample::<f64, _>(StandardNormal));
        let mut ours = lower_factor(&a);
        rank_update(ours.as_mut(), v.clone().as_mut()).expect("positive update");
        let mut theirs = lower_factor(&a);
        let mut weights = Col::<f64>::ones(k);
        rank_r_update_clobber(
            theirs.as_mut(),
            v.clone().as_mut(),
            weights.as_mut().as_diagonal_mut(),
        )
        .expect("positive update");
        let error = max_abs(&(&ours - &theirs)) / max_abs(&theirs);
        assert!(error < 1e-12, "relative difference {error:e}");
    }

    /// Non-finite input is an error, not a silently wrong factor.
    #[test]
    fn rejects_non_finite_vectors() {
        let mut l = Mat::<f64>::identity(4, 4);
        let mut v = Mat::<f64>::zeros(4, 2);
        v[(2, 1)] = f64::NAN;
        assert_eq!(rank_update(l.as_mut(), v.as_mut()), Err(NotPositive));
    }
}
