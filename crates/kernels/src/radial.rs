//! Shared machinery of the radial kernels `k(x, y) = f(‖x − y‖₂)` and the
//! column-wise driver of the KAMH gradient matrix.
//!
//! A radial kernel describes itself through `s = ‖x − y‖²`: its value, the
//! slope `a(s)` with `∇ₓk = a (x − y)`, and the curvature `b(s)` with
//! `∂²k/∂x_l² = a + b (x_l − y_l)²`. In terms of `f(r)`, `a = f′(r)/r` and
//! `b = (f″(r) − f′(r)/r)/r²`.

use faer::reborrow::ReborrowMut;
use faer::{MatMut, MatRef, RowRef};

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
    for_each_column(z, out, |col, zi| {
        let mut s = 0.0;
        for ((v, xl), zl) in col.iter_mut().zip(x).zip(zi.iter()) {
            *v = xl - zl;
            s += *v * *v;
        }
        let (_, a) = kernel.value_slope(s);
        let scale = 2.0 * a;
        col.iter_mut().for_each(|v| *v *= scale);
    });
}

/// Calls `column(out_i, z_i)` for every column `out_i` of `out` (d × n) and
/// the matching row `z_i` of `z` (n × d); `column` fills `out_i`.
///
/// `out_i` is a contiguous slice when `out` is column-major (faer's `Mat`
/// layout): that path allocates nothing. Other layouts of `out` go through
/// one d-length scratch buffer allocated per call (`Vec::new()` itself
/// does not allocate). Measured: writing `out`
/// column by column while reading `z` along its (strided) rows beats both a
/// transposing first pass and element-wise faer indexing.
pub(crate) fn for_each_column(
    z: MatRef<'_, f64>,
    mut out: MatMut<'_, f64>,
    mut column: impl FnMut(&mut [f64], RowRef<'_, f64>),
) {
    let (n, d) = (z.nrows(), z.ncols());
    debug_assert!(out.nrows() == d && out.ncols() == n);
    let mut scratch = Vec::new();
    for i in 0..n {
        if let Some(col) = out.rb_mut().col_mut(i).try_as_col_major_mut() {
            column(col.as_slice_mut(), z.row(i));
        } else {
            scratch.resize(d, 0.0);
            column(&mut scratch, z.row(i));
            for (o, v) in out.rb_mut().col_mut(i).iter_mut().zip(&scratch) {
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
