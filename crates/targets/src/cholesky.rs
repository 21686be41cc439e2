//! A left-looking blocked Cholesky factorisation, and the matching
//! triangular solve from the right, for the small dense matrices of the
//! Glass estimate (n ≈ 200), where faer's recursive algorithms spend much of
//! their time outside their matrix products.
//!
//! **Algorithm.** The columns are factorised in panels of [`PANEL`] columns.
//! Panel `J = j₀..j₀+w`, rows `j₀..n`, first receives the contributions of
//! every factorised column at once, `A[j₀.., J] −= L[j₀.., ..j₀] L[J, ..j₀]ᵀ`
//! (one faer `matmul`, which does almost all of the n³/3 flops), then
//! [`FactorPanel`] finishes it: the w × w diagonal block is factorised by the
//! textbook scalar recurrence and the rows below are solved against it,
//! `L[j₀+w.., J] = A[j₀+w.., J] L[J, J]⁻ᵀ`, [`ROWS`] rows at a time in
//! registers. Narrow panels keep the non-product work small (n²w/2 flops),
//! and faer's product with w = 4 output columns runs at its full rate at
//! this size. Hand-written because it beats faer's `cholesky_in_place` at
//! these sizes (measurements, and the panel widths tried, in PERFORMANCE.md).
//!
//! [`solve_lower_transposed_right_in_place`] runs the same panels for
//! `X L⁻ᵀ`, which likewise beats faer's solve of the transposed problem.
//!
//! The result equals faer's factor up to rounding (the sums are the same,
//! grouped differently). Like faer, a pivot that is not positive and finite
//! stops the factorisation with [`LltError::NonPositivePivot`] at its
//! column; the columns before it are then factorised and the rest is
//! unspecified.

use faer::linalg::cholesky::llt::factor::LltError;
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatMut, Par};

/// Columns per panel.
const PANEL: usize = 4;

/// Rows per register block of the panel solve: `PANEL × ROWS` values, i.e.
/// eight 4-lane vectors, stay in registers while a block is solved.
const ROWS: usize = 8;

/// Factorises the symmetric positive-definite `a = LLᵀ` in place,
/// sequentially (no faer parallelism: these targets run inside parallel
/// chains). Only the lower triangle of `a` is read; afterwards it holds `L`.
/// The strict upper triangle is left unspecified (entries inside the
/// diagonal blocks are overwritten) and must not be read.
pub(crate) fn cholesky_lower_in_place(a: &mut Mat<f64>) -> Result<(), LltError> {
    let n = a.nrows();
    debug_assert_eq!(n, a.ncols(), "the matrix must be square");
    let mut j0 = 0;
    while j0 < n {
        let w = PANEL.min(n - j0);
        if j0 > 0 {
            // A[j₀.., J] −= L[j₀.., ..j₀] L[J, ..j₀]ᵀ. This also writes the
            // strict upper part of the diagonal block, which nobody reads.
            let (done, mut rest) = a.as_mut().split_at_col_mut(j0);
            let below = done.as_ref().subrows(j0, n - j0);
            matmul(
                rest.as_mut().subcols_mut(0, w).subrows_mut(j0, n - j0),
                Accum::Add,
                below,
                below.subrows(0, w).transpose(),
                -1.0,
                Par::Seq,
            );
        }
        kameleon_core::simd::dispatch(FactorPanel {
            a: a.as_mut(),
            j0,
            w,
        })
        .map_err(|index| LltError::NonPositivePivot { index })?;
        j0 += w;
    }
    Ok(())
}

/// `X ← X L⁻ᵀ` in place (solves `Y Lᵀ = X`), with `L` the lower triangle of
/// the n × n `l` (e.g. from [`cholesky_lower_in_place`]; its strict upper
/// triangle is not read) and `x` m × n, sequentially. The same panels as the
/// factorisation: the columns `J = j₀..j₀+w` of `X` first lose the solved
/// columns' contributions, `X[:, J] −= Y[:, ..j₀] L[J, ..j₀]ᵀ` (one faer
/// `matmul`), then are solved against the diagonal block, row by row
/// ([`solve_rows`]). Equal to faer's triangular solve up to rounding.
pub(crate) fn solve_lower_transposed_right_in_place(l: &Mat<f64>, x: &mut Mat<f64>) {
    let n = l.nrows();
    debug_assert_eq!((n, n), (l.ncols(), x.ncols()), "shapes must agree");
    let mut j0 = 0;
    while j0 < n {
        let w = PANEL.min(n - j0);
        if j0 > 0 {
            let (done, mut rest) = x.as_mut().split_at_col_mut(j0);
            matmul(
                rest.as_mut().subcols_mut(0, w),
                Accum::Add,
                done.as_ref(),
                l.as_ref().submatrix(j0, 0, w, j0).transpose(),
                -1.0,
                Par::Seq,
            );
        }
        let mut block = [[0.0; PANEL]; PANEL];
        let mut inverse = [0.0; PANEL];
        for c in 0..w {
            for i in c..w {
                block[i][c] = l[(j0 + i, j0 + c)];
            }
            inverse[c] = block[c][c].recip();
        }
        kameleon_core::simd::dispatch(SolvePanel {
            columns: panel_columns(x.as_mut(), j0, w, 0),
            w,
            block,
            inverse,
        });
        j0 += w;
    }
}

/// The columns `j₀..j₀+w` of `a` from row `first` on, as slices (the unused
/// trailing entries stay empty).
fn panel_columns(a: MatMut<'_, f64>, j0: usize, w: usize, first: usize) -> [&mut [f64]; PANEL] {
    let mut columns: [&mut [f64]; PANEL] = Default::default();
    for (slot, column) in columns.iter_mut().zip(a.subcols_mut(j0, w).col_iter_mut()) {
        let column = column
            .try_as_col_major_mut()
            .expect("a Mat's columns are contiguous");
        *slot = &mut column.as_slice_mut()[first..];
    }
    columns
}

/// One panel of [`solve_lower_transposed_right_in_place`] after the
/// update: [`solve_rows`] under a `pulp` dispatch (see [`FactorPanel`]).
struct SolvePanel<'a> {
    columns: [&'a mut [f64]; PANEL],
    w: usize,
    /// The diagonal block `L[J, J]`, `block[i][c]` for `i ≥ c`.
    block: [[f64; PANEL]; PANEL],
    /// The reciprocals of its diagonal.
    inverse: [f64; PANEL],
}

impl pulp::WithSimd for SolvePanel<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let Self {
            mut columns,
            w,
            block,
            inverse,
        } = self;
        solve_rows(&mut columns, w, 0, &block, &inverse);
    }
}

/// Finishes panel `j₀..j₀+w` of [`cholesky_lower_in_place`] once the
/// factorised columns' contributions are subtracted, as a `pulp` operation
/// (the fused multiply-adds compile to FMA instructions where the CPU has
/// them, and round the same in software elsewhere). Returns the column of a
/// non-positive (or non-finite) pivot.
struct FactorPanel<'a> {
    a: MatMut<'a, f64>,
    j0: usize,
    w: usize,
}

impl pulp::WithSimd for FactorPanel<'_> {
    type Output = Result<(), usize>;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) -> Result<(), usize> {
        let Self { a, j0, w } = self;
        let mut columns = panel_columns(a, j0, w, j0);
        // The diagonal block by the scalar recurrence, row by row below each
        // pivot; `l[i][c]` = L[j₀+i, j₀+c].
        let mut l = [[0.0_f64; PANEL]; PANEL];
        let mut inverse = [0.0_f64; PANEL];
        for c in 0..w {
            for i in c..w {
                let mut v = columns[c][i];
                for k in 0..c {
                    v = (-l[i][k]).mul_add(l[c][k], v);
                }
                if i > c {
                    l[i][c] = v * inverse[c];
                } else if v > 0.0 && v.is_finite() {
                    l[c][c] = v.sqrt();
                    inverse[c] = l[c][c].recip();
                } else {
                    return Err(j0 + c);
                }
            }
        }
        for (c, column) in columns.iter_mut().enumerate().take(w) {
            for (i, row) in l.iter().enumerate().take(w).skip(c) {
                column[i] = row[c];
            }
        }
        solve_rows(&mut columns, w, w, &l, &inverse);
        Ok(())
    }
}

/// `X ← X L_JJ⁻ᵀ` for the rows `first..` of the w columns `columns`, with the
/// lower-triangular `l` (`l[i][c]`, w × w) and the reciprocals of its
/// diagonal: row by row, `x_c = (x_c − Σ_{k<c} x_k l_ck) · (1/l_cc)` —
/// forward substitution on each row (multiplying by the reciprocal, as faer
/// does), [`ROWS`] rows at once ([`solve_block`]). Only called inside a
/// `pulp` dispatch.
#[inline(always)]
fn solve_rows(
    columns: &mut [&mut [f64]; PANEL],
    w: usize,
    first: usize,
    l: &[[f64; PANEL]; PANEL],
    inverse: &[f64; PANEL],
) {
    let n = columns[0].len();
    let mut start = first;
    // Full blocks with a literal length, so that after inlining the copies
    // are plain vector moves rather than `memcpy` calls; then the rest.
    while start + ROWS <= n {
        solve_block(columns, w, start, ROWS, l, inverse);
        start += ROWS;
    }
    if start < n {
        solve_block(columns, w, start, n - start, l, inverse);
    }
}

/// [`solve_rows`] on the `len ≤ ROWS` rows from `start`, in registers
/// (zero-padded to [`ROWS`]).
#[inline(always)]
fn solve_block(
    columns: &mut [&mut [f64]; PANEL],
    w: usize,
    start: usize,
    len: usize,
    l: &[[f64; PANEL]; PANEL],
    inverse: &[f64; PANEL],
) {
    let mut x = [[0.0; ROWS]; PANEL];
    for (x, column) in x.iter_mut().zip(columns.iter()).take(w) {
        x[..len].copy_from_slice(&column[start..start + len]);
    }
    for k in 0..w {
        for v in &mut x[k] {
            *v *= inverse[k];
        }
        let xk = x[k];
        for c in k + 1..w {
            let factor = -l[c][k];
            for (v, xk) in x[c].iter_mut().zip(&xk) {
                *v = factor.mul_add(*xk, *v);
            }
        }
    }
    for (x, column) in x.iter().zip(columns.iter_mut()).take(w) {
        column[start..start + len].copy_from_slice(&x[..len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Side;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// A random SPD matrix `G Gᵀ / n + δ I` with Gaussian `G` (n × n), whose
    /// condition number grows as δ shrinks.
    fn random_spd(n: usize, delta: f64, seed: u64) -> Mat<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let g = Mat::<f64>::from_fn(n, n, |_, _| StandardNormal.sample(&mut rng));
        let mut a = &g * g.transpose() * (1.0 / n as f64);
        for i in 0..n {
            a[(i, i)] += delta;
        }
        a
    }

    /// The largest entry of the lower triangle of `a − b`, relative to the
    /// largest entry of `b`'s lower triangle.
    fn lower_relative_difference(a: &Mat<f64>, b: &Mat<f64>) -> f64 {
        let n = a.nrows();
        let (mut diff, mut scale) = (0.0_f64, 0.0_f64);
        for j in 0..n {
            for i in j..n {
                diff = diff.max((a[(i, j)] - b[(i, j)]).abs());
                scale = scale.max(b[(i, j)].abs());
            }
        }
        diff / scale
    }

    /// Against faer's factor and against the matrix itself (`LLᵀ = A`), for
    /// sizes below, at and around multiples of the panel width and of the
    /// row block, with well- and badly-conditioned matrices, and garbage
    /// (NaN) in the strict upper triangle, which must not be read. Both
    /// errors are rounding: the factor's backward error is ≲ n ε ‖A‖ and,
    /// with δ ≥ 10⁻³ and ‖A‖ ≈ 4, its forward error is bounded by
    /// cond(A) ≈ 4/δ times that; the tolerances allow that with a margin.
    #[test]
    fn factor_matches_faer_and_reconstructs_the_matrix() {
        for (n, delta) in [
            (1, 1.0),
            (2, 1.0),
            (3, 0.5),
            (4, 1.0),
            (5, 1e-3),
            (7, 1.0),
            (8, 1e-3),
            (9, 1.0),
            (13, 0.1),
            (17, 1e-3),
            (64, 1.0),
            (101, 1e-3),
            (214, 1e-3),
        ] {
            let a = random_spd(n, delta, n as u64);
            let faer_factor = a.llt(Side::Lower).unwrap().L().to_owned();
            let mut factor = Mat::from_fn(n, n, |i, j| if i >= j { a[(i, j)] } else { f64::NAN });
            cholesky_lower_in_place(&mut factor).unwrap();
            let lower = Mat::from_fn(n, n, |i, j| if i >= j { factor[(i, j)] } else { 0.0 });
            let reconstruction = &lower * lower.transpose();
            let eps_n = n as f64 * f64::EPSILON;
            let backward = lower_relative_difference(&reconstruction, &a);
            assert!(backward < 2.0 * eps_n, "n = {n}: ‖LLᵀ − A‖ {backward:e}");
            let forward = lower_relative_difference(&lower, &faer_factor);
            assert!(
                forward < 4.0 * eps_n / delta.min(1.0),
                "n = {n}, δ = {delta}: vs faer {forward:e}"
            );
        }
    }

    /// `X L⁻ᵀ` against faer's triangular solve (on the transpose) and the
    /// residual `‖Y Lᵀ − X‖`, for factors of several sizes (panel multiples
    /// and not) with NaN in their strict upper triangle (never read), and
    /// right-hand sides with 1 to 214 rows (row blocks full and partial).
    /// Rounding only: the residual is ≲ n ε ‖Y‖ ‖L‖ and the difference to
    /// faer ≲ cond(L) times that, cond(L) = √cond(A) ≤ √(4/δ) here.
    #[test]
    fn right_solve_matches_faer_and_the_residual() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        for (n, m, delta) in [
            (1, 3, 1.0),
            (4, 1, 1.0),
            (7, 9, 0.1),
            (17, 8, 1e-3),
            (64, 13, 1.0),
            (214, 214, 1e-3),
        ] {
            let a = random_spd(n, delta, n as u64 + 100);
            let l = a.llt(Side::Lower).unwrap().L().to_owned();
            let l_with_garbage =
                Mat::from_fn(n, n, |i, j| if i >= j { l[(i, j)] } else { f64::NAN });
            let x = Mat::<f64>::from_fn(m, n, |_, _| StandardNormal.sample(&mut rng));
            let mut y = x.clone();
            solve_lower_transposed_right_in_place(&l_with_garbage, &mut y);
            let mut expected_t = x.transpose().to_owned();
            faer::linalg::triangular_solve::solve_lower_triangular_in_place(
                l.as_ref(),
                expected_t.as_mut(),
                Par::Seq,
            );
            let max_abs = |m: &Mat<f64>| {
                (0..m.ncols())
                    .flat_map(|j| m.col(j).iter().copied().collect::<Vec<_>>())
                    .fold(0.0_f64, |acc, v| acc.max(v.abs()))
            };
            let scale = max_abs(&y) * max_abs(&l);
            let residual = max_abs(&(&y * l.transpose() - &x)) / scale;
            let eps_n = n as f64 * f64::EPSILON;
            assert!(
                residual < 2.0 * eps_n,
                "n = {n}, m = {m}: residual {residual:e}"
            );
            let forward = max_abs(&(&y - expected_t.transpose())) / max_abs(&y);
            assert!(
                forward < 4.0 * eps_n * (4.0 / delta.min(1.0)).sqrt(),
                "n = {n}, m = {m}: vs faer {forward:e}"
            );
        }
    }

    /// A matrix that is not positive definite stops at the first
    /// non-positive pivot, the column faer reports too: a negative or zero
    /// diagonal entry of a diagonal matrix, a singular 2 × 2 block, a NaN.
    #[test]
    fn non_positive_pivots_are_reported_at_faers_column() {
        let faer_pivot = |a: &Mat<f64>| match a.llt(Side::Lower) {
            Err(LltError::NonPositivePivot { index }) => index,
            other => panic!("faer should fail, got {other:?}"),
        };
        let n = 11;
        for bad in [0, 3, 4, 5, 10] {
            for value in [-1.0, 0.0, f64::NAN, f64::INFINITY] {
                let mut a = random_spd(n, 1.0, 7);
                a[(bad, bad)] = value;
                let expected = faer_pivot(&a);
                let mut factor = a.clone();
                match cholesky_lower_in_place(&mut factor) {
                    Err(LltError::NonPositivePivot { index }) => {
                        assert_eq!(index, expected, "bad {bad}, value {value}");
                    }
                    Ok(()) => panic!("bad {bad}, value {value}: no error"),
                }
            }
        }
        // Rows 5 and 6 equal (a singular 2 × 2 block of ones): the pivot of
        // column 6 is exactly 1 − 1·1 = 0.
        let mut a = Mat::<f64>::identity(8, 8);
        for (i, j) in [(5, 5), (5, 6), (6, 5), (6, 6)] {
            a[(i, j)] = 1.0;
        }
        assert!(matches!(
            cholesky_lower_in_place(&mut a.clone()),
            Err(LltError::NonPositivePivot { index: 6 })
        ));
        assert_eq!(faer_pivot(&a), 6);
    }
}
