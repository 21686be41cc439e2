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
//! and rotation, each a multiplication and a fused multiply-add).
//!
//! # Register blocking
//!
//! The `(c, s)` of rotation p at column j depend only on the diagonal (left
//! by rotation p − 1) and `V[j, p]`, which no rotation of column j touches;
//! so all k pairs of a column are computed first, and then the rows below j
//! are swept in blocks of [`BLOCK_VECTORS`] SIMD vectors: a block of
//! `L[·, j]` is loaded into registers once, receives the k rotations one
//! after the other (each loading and storing only its own rows of V), and is
//! stored once. Every entry sees exactly the operations of the plain
//! one-rotation-at-a-time loop, in the same order, so the factor is bitwise
//! the same; only the loads and stores of L drop from 2k to 2 per entry.
//!
//! The columns of V are taken in groups of at most [`GROUP`] (the pairs of
//! a group live in registers and on the stack): a group's rotations touch
//! only its own columns of V, and column j of L receives them after those
//! of the earlier groups, exactly as in the one-pass order; so updating by
//! one group after the other (a rank-`GROUP` update per pass over L) applies
//! the same operations in the same order to every entry.

use faer::MatMut;
use pulp::Simd;

/// Columns of V rotated together in one pass over the triangle.
const GROUP: usize = 8;
/// SIMD vectors of a column of L kept in registers while the rotations of a
/// group run over them (4 vectors of L, 4 of V and the 3 splatted
/// coefficients fit the 16 AVX2 registers).
const BLOCK_VECTORS: usize = 4;

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
    mut factor: MatMut<'_, f64>,
    mut vectors: MatMut<'_, f64>,
) -> Result<(), NotPositive> {
    debug_assert!(factor.nrows() == factor.ncols() && vectors.nrows() == factor.nrows());
    let k = vectors.ncols();
    for first in (0..k).step_by(GROUP) {
        let count = GROUP.min(k - first);
        let mut columns: [&mut [f64]; GROUP] = Default::default();
        for (slot, column) in columns
            .iter_mut()
            .zip(vectors.as_mut().subcols_mut(first, count).col_iter_mut())
        {
            *slot = column
                .try_as_col_major_mut()
                .expect("contiguous columns")
                .as_slice_mut();
        }
        kameleon_core::simd::dispatch(GroupUpdate {
            factor: factor.as_mut(),
            columns: &mut columns[..count],
        })?;
    }
    Ok(())
}

/// The update by one group of at most [`GROUP`] columns of V, as a
/// [`pulp::WithSimd`] operation compiled for the best instruction set of the
/// running CPU (AVX-512 or AVX2 + FMA where available). Every value is computed by the
/// same scalar operations whatever the vector width (`mul_add` is one fused
/// operation on every back-end), so the result does not depend on the CPU.
struct GroupUpdate<'a, 'v> {
    factor: MatMut<'a, f64>,
    columns: &'a mut [&'v mut [f64]],
}

impl pulp::WithSimd for GroupUpdate<'_, '_> {
    type Output = Result<(), NotPositive>;

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) -> Result<(), NotPositive> {
        let Self {
            mut factor,
            columns,
        } = self;
        let count = columns.len();
        let zero = simd.splat_f64s(0.0);
        for j in 0..factor.nrows() {
            let column = factor
                .as_mut()
                .col_mut(j)
                .try_as_col_major_mut()
                .expect("contiguous columns")
                .as_slice_mut();
            let (diagonal, below) = column[j..].split_first_mut().expect("j < m");
            // the pairs of the group, in order: rotation p sees the diagonal
            // left by rotation p − 1
            let mut rotations = [Rotation {
                c: zero,
                s: zero,
                minus_s: zero,
            }; GROUP];
            let mut scalars = [(0.0, 0.0); GROUP];
            for ((v, rotation), scalar) in columns.iter().zip(&mut rotations).zip(&mut scalars) {
                let (l, vj) = (*diagonal, v[j]);
                let r = l.mul_add(l, vj * vj).sqrt();
                if !(r.is_finite() && r > 0.0) {
                    return Err(NotPositive);
                }
                let (c, s) = (l / r, vj / r);
                *diagonal = r;
                *scalar = (c, s);
                // −s·x is computed as (−s)·x: the same value, exactly
                *rotation = Rotation {
                    c: simd.splat_f64s(c),
                    s: simd.splat_f64s(s),
                    minus_s: simd.splat_f64s(-s),
                };
            }
            let rotations = &rotations[..count];
            // the rows below j: whole blocks of BLOCK_VECTORS vectors, then
            // single vectors, then the scalar tail (the same split for L and
            // every column of V, which all have the length m − j − 1)
            let (l_vectors, l_tail) = S::as_mut_simd_f64s(below);
            let mut v_vectors: [&mut [S::f64s]; GROUP] = Default::default();
            let mut v_tails: [&mut [f64]; GROUP] = Default::default();
            for ((v, vectors), tail) in columns.iter_mut().zip(&mut v_vectors).zip(&mut v_tails) {
                (*vectors, *tail) = S::as_mut_simd_f64s(&mut v[j + 1..]);
            }
            let (l_blocks, l_single) = l_vectors.as_chunks_mut::<BLOCK_VECTORS>();
            for (b, l_block) in l_blocks.iter_mut().enumerate() {
                let mut l = *l_block;
                for (rotation, v) in rotations.iter().zip(&mut v_vectors) {
                    let v = &mut v[b * BLOCK_VECTORS..(b + 1) * BLOCK_VECTORS];
                    for (x, y) in l.iter_mut().zip(v) {
                        (*x, *y) = rotation.apply(simd, *x, *y);
                    }
                }
                *l_block = l;
            }
            let single_start = l_blocks.len() * BLOCK_VECTORS;
            for (i, x) in l_single.iter_mut().enumerate() {
                for (rotation, v) in rotations.iter().zip(&mut v_vectors) {
                    let y = &mut v[single_start + i];
                    (*x, *y) = rotation.apply(simd, *x, *y);
                }
            }
            for (i, x) in l_tail.iter_mut().enumerate() {
                for (&(c, s), v) in scalars[..count].iter().zip(&mut v_tails) {
                    let y = v[i];
                    (*x, v[i]) = (c.mul_add(*x, s * y), c.mul_add(y, -(s * *x)));
                }
            }
        }
        Ok(())
    }
}

/// One Givens rotation `(x, y) ← (c x + s y, c y − s x)` with its
/// coefficients splatted over a SIMD vector.
#[derive(Clone, Copy)]
struct Rotation<V> {
    c: V,
    s: V,
    minus_s: V,
}

impl<V: Copy> Rotation<V> {
    /// The rotated pair, computed as `(fma(c, x, s·y), fma(c, y, (−s)·x))`.
    #[inline(always)]
    fn apply<S: Simd<f64s = V>>(&self, simd: S, x: V, y: V) -> (V, V) {
        (
            simd.mul_add_f64s(self.c, x, simd.mul_f64s(self.s, y)),
            simd.mul_add_f64s(self.c, y, simd.mul_f64s(self.minus_s, x)),
        )
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

    /// The plain loop the register-blocked sweep reorganises: at each
    /// column, the k rotations one after the other, each a full pass over
    /// the rows below the diagonal.
    fn rank_update_one_rotation_at_a_time(l: &mut Mat<f64>, v: &mut Mat<f64>) {
        let (m, k) = (l.nrows(), v.ncols());
        for j in 0..m {
            for p in 0..k {
                let (x, y) = (l[(j, j)], v[(j, p)]);
                let r = x.mul_add(x, y * y).sqrt();
                let (c, s) = (x / r, y / r);
                l[(j, j)] = r;
                for i in j + 1..m {
                    let (x, y) = (l[(i, j)], v[(i, p)]);
                    l[(i, j)] = c.mul_add(x, s * y);
                    v[(i, p)] = c.mul_add(y, -(s * x));
                }
            }
        }
    }

    /// The register-blocked sweep applies exactly the operations of the
    /// plain loop, in the same order, to every entry: bitwise the same
    /// factor and the same leftover V, for sizes around the block and vector
    /// lengths and for more columns of V than one group holds.
    #[test]
    fn is_bitwise_the_one_rotation_at_a_time_loop() {
        for (m, k, seed) in [
            (1, 1, 9),
            (3, 2, 10),
            (17, 8, 11),
            (33, 5, 12),
            (70, 11, 13),
        ] {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let a = spd(m, 100.0, &mut rng);
            let v = Mat::from_fn(m, k, |_, _| rng.sample::<f64, _>(StandardNormal));
            let (mut ours, mut our_v) = (lower_factor(&a), v.clone());
            rank_update(ours.as_mut(), our_v.as_mut()).expect("positive update");
            let (mut plain, mut plain_v) = (lower_factor(&a), v.clone());
            rank_update_one_rotation_at_a_time(&mut plain, &mut plain_v);
            for j in 0..m {
                for i in j..m {
                    assert_eq!(
                        ours[(i, j)].to_bits(),
                        plain[(i, j)].to_bits(),
                        "m = {m}, k = {k}: L[{i}, {j}]"
                    );
                }
                for p in 0..k {
                    assert_eq!(
                        our_v[(j, p)].to_bits(),
                        plain_v[(j, p)].to_bits(),
                        "m = {m}, k = {k}: V[{j}, {p}]"
                    );
                }
            }
        }
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
