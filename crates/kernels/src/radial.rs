//! Shared machinery of the radial kernels `k(x, y) = f(‖x − y‖₂)` and the
//! column-wise driver of the KAMH gradient matrix.
//!
//! A radial kernel describes itself through `s = ‖x − y‖²`: its value, the
//! slope `a(s)` with `∇ₓk = a (x − y)`, and the curvature `b(s)` with
//! `∂²k/∂x_l² = a + b (x_l − y_l)²`. In terms of `f(r)`, `a = f′(r)/r` and
//! `b = (f″(r) − f′(r)/r)/r²`.

use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{ColMut, MatMut, MatRef};

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
    write_differences(x, z, out, |col| {
        let s: f64 = col.rb().iter().map(|v| v * v).sum();
        let (_, a) = kernel.value_slope(s);
        let scale = 2.0 * a;
        col.iter_mut().for_each(|v| *v *= scale);
    });
}

/// Writes `x − z_i` into column `i` of `out` (d × n) for every row `z_i` of
/// `z` (n × d), then hands each column to `finish`.
///
/// `z` is read one column at a time (contiguous for faer's column-major
/// matrices) and `out` is written with its column stride (d values apart,
/// within a cache line or two for small d); `finish` then works on each
/// contiguous column of `out`. Measured faster than reading `z` row by row.
pub(crate) fn write_differences(
    x: &[f64],
    z: MatRef<'_, f64>,
    out: MatMut<'_, f64>,
    finish: impl FnMut(ColMut<'_, f64>),
) {
    fill_columns(x, z, out, |xl, zil| xl - zil, finish);
}

/// Writes `map(x_l, z_il)` into `out[(l, i)]`, then calls `finish` on every
/// column of `out`.
pub(crate) fn fill_columns(
    x: &[f64],
    z: MatRef<'_, f64>,
    mut out: MatMut<'_, f64>,
    map: impl Fn(f64, f64) -> f64,
    mut finish: impl FnMut(ColMut<'_, f64>),
) {
    let (n, d) = (z.nrows(), z.ncols());
    debug_assert!(x.len() == d && out.nrows() == d && out.ncols() == n);
    for (l, &xl) in x.iter().enumerate() {
        let zl = z.col(l);
        match zl.try_as_col_major() {
            Some(zl) => {
                for (i, &zil) in zl.as_slice().iter().enumerate() {
                    out[(l, i)] = map(xl, zil);
                }
            }
            None => {
                for i in 0..n {
                    out[(l, i)] = map(xl, zl[i]);
                }
            }
        }
    }
    for i in 0..n {
        finish(out.rb_mut().col_mut(i));
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
