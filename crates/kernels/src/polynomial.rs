//! The linear and polynomial kernels (not translation invariant: no spectral
//! density).

use crate::error::non_negative;
use crate::radial::for_each_column;
use crate::{Kernel, KernelError};
use faer::{MatMut, MatRef};

fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

/// The linear kernel `k(x, y) = ⟨x, y⟩`.
///
/// With it the KAMH proposal reduces to Adaptive Metropolis: `M = 2Zᵀ` does
/// not depend on `x`, so `ν² M H Mᵀ = 4ν² ZᵀHZ`.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Linear;

impl Kernel for Linear {
    fn eval(&self, x: &[f64], y: &[f64]) -> f64 {
        debug_assert_eq!(x.len(), y.len());
        dot(x, y)
    }

    fn grad_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
        debug_assert!(x.len() == y.len() && y.len() == out.len());
        out.copy_from_slice(y);
        dot(x, y)
    }

    fn hessian_diag_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
        debug_assert!(x.len() == y.len() && y.len() == out.len());
        out.fill(0.0);
        dot(x, y)
    }

    fn gradient_matrix(&self, _x: &[f64], z: MatRef<'_, f64>, out: MatMut<'_, f64>) {
        debug_assert_eq!(_x.len(), z.ncols());
        for_each_column(z, out, |_, col, zi| {
            for (v, zl) in col.iter_mut().zip(zi) {
                *v = 2.0 * zl;
            }
        });
    }
}

/// The polynomial kernel `k(x, y) = (c + ⟨x, y⟩)^p` with offset `c ≥ 0` and
/// integer degree `p ≥ 1`.
///
/// The MMD of the KAMH and KMC papers uses `(1 + ⟨x, y⟩)³` in the text and
/// `(0.2 + ⟨x, y⟩)³` in their code: `Polynomial::new(1.0, 3)` and
/// `Polynomial::new(0.2, 3)`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "PolynomialParts")]
pub struct Polynomial {
    offset: f64,
    degree: u32,
}

/// The serialised form of [`Polynomial`], validated by its constructor.
#[derive(serde::Deserialize)]
struct PolynomialParts {
    offset: f64,
    degree: u32,
}

impl TryFrom<PolynomialParts> for Polynomial {
    type Error = KernelError;
    fn try_from(p: PolynomialParts) -> Result<Self, KernelError> {
        Self::new(p.offset, p.degree)
    }
}

impl Polynomial {
    /// A polynomial kernel with offset `c ≥ 0` (finite) and degree
    /// `1 ≤ p ≤ 2³¹ − 1` (the powers are taken with `f64::powi`, whose
    /// exponent is an `i32`).
    pub fn new(offset: f64, degree: u32) -> Result<Self, KernelError> {
        if degree == 0 || i32::try_from(degree).is_err() {
            return Err(KernelError::InvalidParameter {
                name: "degree",
                value: f64::from(degree),
                reason: "must be between 1 and 2^31 - 1",
            });
        }
        Ok(Self {
            offset: non_negative("offset", offset)?,
            degree,
        })
    }

    /// The offset `c`.
    pub fn offset(&self) -> f64 {
        self.offset
    }

    /// The degree `p`.
    pub fn degree(&self) -> u32 {
        self.degree
    }

    /// `(t^p, p t^{p−1}, p(p−1) t^{p−2})` at `t = c + ⟨x, y⟩`.
    fn powers(&self, t: f64) -> (f64, f64, f64) {
        let p = self.degree as i32;
        let pf = p as f64;
        let second = if p >= 2 {
            pf * (pf - 1.0) * t.powi(p - 2)
        } else {
            0.0
        };
        (t.powi(p), pf * t.powi(p - 1), second)
    }
}

impl Kernel for Polynomial {
    fn eval(&self, x: &[f64], y: &[f64]) -> f64 {
        debug_assert_eq!(x.len(), y.len());
        self.powers(self.offset + dot(x, y)).0
    }

    fn grad_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
        debug_assert!(x.len() == y.len() && y.len() == out.len());
        let (k, first, _) = self.powers(self.offset + dot(x, y));
        for (o, yl) in out.iter_mut().zip(y) {
            *o = first * yl;
        }
        k
    }

    fn hessian_diag_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
        debug_assert!(x.len() == y.len() && y.len() == out.len());
        let (k, _, second) = self.powers(self.offset + dot(x, y));
        for (o, yl) in out.iter_mut().zip(y) {
            *o = second * yl * yl;
        }
        k
    }

    fn gradient_matrix(&self, x: &[f64], z: MatRef<'_, f64>, out: MatMut<'_, f64>) {
        debug_assert_eq!(x.len(), z.ncols());
        for_each_column(z, out, |_, col, zi| {
            let mut t = self.offset;
            for ((v, xl), zl) in col.iter_mut().zip(x).zip(zi) {
                *v = *zl;
                t += xl * zl;
            }
            let scale = 2.0 * self.powers(t).1;
            col.iter_mut().for_each(|v| *v *= scale);
        });
    }
}
