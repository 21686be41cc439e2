//! The Gram matrix `M Mᵀ` (lower triangle) and the row sums `M1` of a KAMH
//! gradient matrix M stored column by column, for kernels without the fused
//! path of [`crate::radial`] (see [`crate::Kernel::gradient_gram`]).

use crate::simd::{blocks, load_block, store_block};
use faer::linalg::matmul::triangular::{BlockStructure, matmul};
use faer::{Accum, MatMut, MatRef, Par};

/// [`crate::Kernel::gradient_gram`] by forming M (d × n, column-major) in
/// `scratch` and multiplying it out.
pub(crate) fn gradient_gram_via_matrix<K: crate::Kernel + ?Sized>(
    kernel: &K,
    x: &[f64],
    z: MatRef<'_, f64>,
    scratch: &mut [f64],
    gram: &mut [f64],
    row_sums: &mut [f64],
) {
    let (d, n) = (x.len(), z.nrows());
    let m = &mut scratch[..d * n];
    kernel.gradient_matrix(x, z, MatMut::from_column_major_slice_mut(m, d, n));
    gram_and_row_sums(m, d, gram, row_sums);
}

/// The lower triangle of `M Mᵀ` into `gram` (d × d column-major; the strict
/// upper triangle is not written) and `M1` into `row_sums`, for M (d × n
/// column-major) in `m`.
fn gram_and_row_sums(m: &[f64], d: usize, gram: &mut [f64], row_sums: &mut [f64]) {
    match d {
        1 => kameleon_core::simd::dispatch(GramPanels::<1> { m, gram, row_sums }),
        2 => kameleon_core::simd::dispatch(GramPanels::<2> { m, gram, row_sums }),
        3 => kameleon_core::simd::dispatch(GramPanels::<3> { m, gram, row_sums }),
        4 => kameleon_core::simd::dispatch(GramPanels::<4> { m, gram, row_sums }),
        5 => kameleon_core::simd::dispatch(GramPanels::<5> { m, gram, row_sums }),
        6 => kameleon_core::simd::dispatch(GramPanels::<6> { m, gram, row_sums }),
        7 => kameleon_core::simd::dispatch(GramPanels::<7> { m, gram, row_sums }),
        8 => kameleon_core::simd::dispatch(GramPanels::<8> { m, gram, row_sums }),
        9 => kameleon_core::simd::dispatch(GramPanels::<9> { m, gram, row_sums }),
        10 => kameleon_core::simd::dispatch(GramPanels::<10> { m, gram, row_sums }),
        _ => {
            let n = m.len() / d;
            let m = MatRef::from_column_major_slice(m, d, n);
            matmul(
                MatMut::from_column_major_slice_mut(gram, d, d),
                BlockStructure::TriangularLower,
                Accum::Replace,
                m,
                BlockStructure::Rectangular,
                m.transpose(),
                BlockStructure::Rectangular,
                1.0,
                Par::Seq,
            );
            row_sums.fill(0.0);
            for column in m.col_iter() {
                for (s, v) in row_sums.iter_mut().zip(column.iter()) {
                    *s += v;
                }
            }
        }
    }
}

/// [`gram_and_row_sums`] for `d = DIM` ≤ 10, with explicit SIMD vectors of
/// the running CPU's width (4 with AVX2): M's columns are read as blocks of
/// rows, and the lower triangle of `M Mᵀ` accumulated in panels of
/// [`PANEL`] columns whose sums stay in registers over a pass through M.
struct GramPanels<'a, const DIM: usize> {
    m: &'a [f64],
    gram: &'a mut [f64],
    row_sums: &'a mut [f64],
}

/// Columns of `M Mᵀ` accumulated per pass over M.
const PANEL: usize = 4;
/// The most row blocks a column of M (d ≤ 10) splits into (1 lane per
/// vector in the scalar fallback).
const MAX_BLOCKS: usize = 10;

impl<const DIM: usize> pulp::WithSimd for GramPanels<'_, DIM> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self { m, gram, row_sums } = self;
        // d ≤ 10 (the dispatch above): at most three panels; the first pass
        // also sums the rows
        gram_panel::<S, DIM, 0>(simd, m, gram, row_sums);
        if DIM > PANEL {
            gram_panel::<S, DIM, PANEL>(simd, m, gram, row_sums);
        }
        if DIM > 2 * PANEL {
            gram_panel::<S, DIM, { 2 * PANEL }>(simd, m, gram, row_sums);
        }
    }
}

/// Columns `FIRST..FIRST + PANEL` (those below `DIM`) of the lower triangle
/// of `M Mᵀ`: the row blocks from the one holding row `FIRST` down, summed
/// over all columns of M (a few entries above the diagonal come along and
/// are dropped); the pass with `FIRST = 0`, which loads every row block,
/// also writes the row sums `M1`. All bounds are constants, so the loops
/// unroll.
#[inline(always)]
fn gram_panel<S: pulp::Simd, const DIM: usize, const FIRST: usize>(
    simd: S,
    m: &[f64],
    gram: &mut [f64],
    row_sums: &mut [f64],
) {
    let zero = simd.splat_f64s(0.0);
    let first_block = FIRST / S::F64_LANES;
    let end_block = blocks::<S>(DIM);
    let mut panel = [[zero; MAX_BLOCKS]; PANEL];
    let mut totals = [zero; MAX_BLOCKS];
    for column in m.chunks_exact(DIM) {
        let mut rows = [zero; MAX_BLOCKS];
        for b in first_block..end_block {
            rows[b] = load_block(simd, column, b);
            if FIRST == 0 {
                totals[b] = simd.add_f64s(totals[b], rows[b]);
            }
        }
        for (k, sums) in panel.iter_mut().enumerate() {
            if FIRST + k < DIM {
                let mj = simd.splat_f64s(column[FIRST + k]);
                for b in first_block..end_block {
                    sums[b] = simd.mul_add_f64s(mj, rows[b], sums[b]);
                }
            }
        }
    }
    let mut column = [0.0; DIM];
    for (k, sums) in panel.iter().enumerate() {
        let j = FIRST + k;
        if j < DIM {
            for b in 0..end_block {
                store_block(simd, &mut column, b, sums[b]);
            }
            gram[j * DIM + j..(j + 1) * DIM].copy_from_slice(&column[j..]);
        }
    }
    if FIRST == 0 {
        for b in 0..end_block {
            store_block(simd, row_sums, b, totals[b]);
        }
    }
}
