//! Shared machinery of the radial kernels `k(x, y) = f(‖x − y‖₂)` and the
//! column-wise driver of the KAMH gradient matrix.
//!
//! A radial kernel describes itself through `s = ‖x − y‖²`: its value, the
//! slope `a(s)` with `∇ₓk = a (x − y)`, and the curvature `b(s)` with
//! `∂²k/∂x_l² = a + b (x_l − y_l)²`. In terms of `f(r)`, `a = f′(r)/r` and
//! `b = (f″(r) − f′(r)/r)/r²`.

use faer::reborrow::ReborrowMut;
use faer::{MatMut, MatRef};

/// A kernel that depends on `x − y` only through `s = ‖x − y‖²`.
pub(crate) trait Radial {
    /// `k` at squared distance `s`.
    fn value(&self, s: f64) -> f64;

    /// `(k, a)` at squared distance `s`, with `∇ₓk = a (x − y)`. At `s = 0`
    /// the returned `a` must be finite (the gradient there is `a · 0`).
    fn value_slope(&self, s: f64) -> (f64, f64);

    /// `(k, a, b)` at squared distance `s`, with `∂²k/∂x_l² = a + b (x_l − y_l)²`.
    /// At `s = 0` only `a` is used: it must be the limit of the second
    /// derivative (possibly `−∞` for kernels that are not twice differentiable).
    fn value_slope_curvature(&self, s: f64) -> (f64, f64, f64);
}

/// `‖x − y‖²`.
pub(crate) fn squared_distance(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum()
}

pub(crate) fn eval<R: Radial>(kernel: &R, x: &[f64], y: &[f64]) -> f64 {
    debug_assert_eq!(x.len(), y.len());
    kernel.value(squared_distance(x, y))
}

pub(crate) fn grad_x<R: Radial>(kernel: &R, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
    debug_assert!(x.len() == y.len() && y.len() == out.len());
    let (k, a) = kernel.value_slope(squared_distance(x, y));
    for ((o, xl), yl) in out.iter_mut().zip(x).zip(y) {
        *o = a * (xl - yl);
    }
    k
}

pub(crate) fn hessian_diag_x<R: Radial>(kernel: &R, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
    debug_assert!(x.len() == y.len() && y.len() == out.len());
    let s = squared_distance(x, y);
    let (k, a, b) = kernel.value_slope_curvature(s);
    if s == 0.0 {
        out.fill(a);
    } else {
        for ((o, xl), yl) in out.iter_mut().zip(x).zip(y) {
            let diff = xl - yl;
            *o = a + b * diff * diff;
        }
    }
    k
}

pub(crate) fn gradient_matrix<R: Radial>(
    kernel: &R,
    x: &[f64],
    z: MatRef<'_, f64>,
    out: MatMut<'_, f64>,
) {
    debug_assert_eq!(x.len(), z.ncols());
    // One body, compiled with the dimension as a constant for the small
    // dimensions of the experiments (the per-point loops are then unrolled
    // and vectorised) and once for any other d.
    match x.len() {
        1 => gradient_columns::<R, 1>(kernel, x, z, out),
        2 => gradient_columns::<R, 2>(kernel, x, z, out),
        3 => gradient_columns::<R, 3>(kernel, x, z, out),
        4 => gradient_columns::<R, 4>(kernel, x, z, out),
        5 => gradient_columns::<R, 5>(kernel, x, z, out),
        6 => gradient_columns::<R, 6>(kernel, x, z, out),
        7 => gradient_columns::<R, 7>(kernel, x, z, out),
        8 => gradient_columns::<R, 8>(kernel, x, z, out),
        9 => gradient_columns::<R, 9>(kernel, x, z, out),
        10 => gradient_columns::<R, 10>(kernel, x, z, out),
        _ => gradient_columns::<R, 0>(kernel, x, z, out),
    }
}

/// The gradient matrix with `d = DIM` if `DIM > 0`, else `d = x.len()`.
///
/// Per point: the difference and the scaling vectorise; the sum of squares
/// stays sequential, so the values are bit-identical to `grad_x`'s.
/// Measured with callgrind (n = 1000, d = 8, Gaussian): 87 instructions per
/// point plus the `exp`, against 123 for the dynamic-length loop over faer's
/// strided row iterators it replaces.
fn gradient_columns<R: Radial, const DIM: usize>(
    kernel: &R,
    x: &[f64],
    z: MatRef<'_, f64>,
    out: MatMut<'_, f64>,
) {
    for_each_column(z, out, |col, zi| {
        let d = if DIM > 0 { DIM } else { col.len() };
        let (col, x, zi) = (&mut col[..d], &x[..d], &zi[..d]);
        for l in 0..d {
            col[l] = x[l] - zi[l];
        }
        let mut s = 0.0;
        for v in col.iter() {
            s += v * v;
        }
        let (_, a) = kernel.value_slope(s);
        let scale = 2.0 * a;
        for v in col.iter_mut() {
            *v *= scale;
        }
    });
}

/// Calls `column(out_i, z_i)` for every column `out_i` of `out` (d × n) and
/// the matching row `z_i` of `z` (n × d); `column` fills `out_i`.
///
/// Both are handed over as slices. When `out` is column-major (faer's `Mat`
/// layout) and `z` row-major (how the samplers store a subsample), they are
/// views of the matrices and nothing is allocated; other layouts go through
/// d-length scratch buffers allocated once per call (`Vec::new()` itself
/// does not allocate). Measured (callgrind, n = 1000, d = 8, Gaussian):
/// with `gradient_matrix`'s constant dimension, slices instead of faer's
/// strided row iterators cut the gradient matrix from 174 to 138
/// instructions per point, 51 of which are the `exp`.
pub(crate) fn for_each_column(
    z: MatRef<'_, f64>,
    mut out: MatMut<'_, f64>,
    mut column: impl FnMut(&mut [f64], &[f64]),
) {
    let (n, d) = (z.nrows(), z.ncols());
    debug_assert!(out.nrows() == d && out.ncols() == n);
    let rows = z.try_as_row_major();
    let (mut z_scratch, mut out_scratch) = (Vec::new(), Vec::new());
    for i in 0..n {
        let zi: &[f64] = match rows {
            Some(rows) => rows.row(i).as_slice(),
            None => {
                z_scratch.clear();
                z_scratch.extend(z.row(i).iter().copied());
                &z_scratch
            }
        };
        if let Some(col) = out.rb_mut().col_mut(i).try_as_col_major_mut() {
            column(col.as_slice_mut(), zi);
        } else {
            out_scratch.resize(d, 0.0);
            column(&mut out_scratch, zi);
            for (o, v) in out.rb_mut().col_mut(i).iter_mut().zip(&out_scratch) {
                *o = *v;
            }
        }
    }
}

/// Implements [`crate::Kernel`] for a type that implements [`Radial`].
macro_rules! impl_radial_kernel {
    ($ty:ty) => {
        impl $crate::Kernel for $ty {
            fn eval(&self, x: &[f64], y: &[f64]) -> f64 {
                $crate::radial::eval(self, x, y)
            }

            fn grad_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
                $crate::radial::grad_x(self, x, y, out)
            }

            fn hessian_diag_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
                $crate::radial::hessian_diag_x(self, x, y, out)
            }

            fn gradient_matrix(
                &self,
                x: &[f64],
                z: faer::MatRef<'_, f64>,
                out: faer::MatMut<'_, f64>,
            ) {
                $crate::radial::gradient_matrix(self, x, z, out)
            }
        }
    };
}
pub(crate) use impl_radial_kernel;
