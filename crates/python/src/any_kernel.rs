//! One type for every kernel of the KAMH-type samplers the Python classes
//! offer, so that KAMH, PCA-Kameleon and cKAM are each compiled once rather
//! than once per kernel type (five), which about halves the extension's
//! code.
//!
//! An [`AnyKernel`] is serialised as the kernel it holds, with no tag, so a
//! checkpoint has the layout it had when the samplers were generic over the
//! kernel's own type. Which kernel a checkpoint holds is in its settings:
//! [`KernelSpec::dispatch`](crate::settings::KernelSpec) names it with
//! [`decoding`] for every decode on its thread while the job runs.
//!
//! Tested through pytest (this crate has no Rust test binary):
//! `test_checkpoint_format.py` extends committed checkpoints of KAMH,
//! PCA-Kameleon and cKAM with each kind of kernel, written before the
//! samplers held an `AnyKernel`, and gets their stored chains back bit for
//! bit.

use faer::{MatMut, MatRef};
use kameleon_kernels::{
    Gaussian, InverseMultiquadric, Kernel, Laplacian, Matern, RationalQuadratic, SpectralDensity,
};
use kameleon_samplers::LengthScale;
use rand::Rng;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::Cell;

/// A kernel of the Python classes' `kernel` argument.
#[derive(Debug, Clone)]
pub enum AnyKernel {
    /// exp(−‖x − y‖²/(2ℓ²)).
    Gaussian(Gaussian),
    /// exp(−‖x − y‖/ℓ).
    Laplacian(Laplacian),
    /// Matérn of smoothness ν.
    Matern(Matern),
    /// (1 + ‖x − y‖²/ℓ²)^−β.
    InverseMultiquadric(InverseMultiquadric),
    /// (1 + ‖x − y‖²/(2αℓ²))^−α.
    RationalQuadratic(RationalQuadratic),
}

/// Which variant of [`AnyKernel`] a decode reads (the serialised form has
/// no tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelKind {
    /// [`AnyKernel::Gaussian`].
    Gaussian,
    /// [`AnyKernel::Laplacian`].
    Laplacian,
    /// [`AnyKernel::Matern`].
    Matern,
    /// [`AnyKernel::InverseMultiquadric`].
    InverseMultiquadric,
    /// [`AnyKernel::RationalQuadratic`].
    RationalQuadratic,
}

/// `expr` with `k` bound to the kernel `kernel` holds, whatever its type.
macro_rules! with_kernel {
    ($kernel:expr, $k:ident => $expr:expr) => {
        match $kernel {
            AnyKernel::Gaussian($k) => $expr,
            AnyKernel::Laplacian($k) => $expr,
            AnyKernel::Matern($k) => $expr,
            AnyKernel::InverseMultiquadric($k) => $expr,
            AnyKernel::RationalQuadratic($k) => $expr,
        }
    };
}

impl AnyKernel {
    /// The variant.
    pub fn kind(&self) -> KernelKind {
        match self {
            Self::Gaussian(_) => KernelKind::Gaussian,
            Self::Laplacian(_) => KernelKind::Laplacian,
            Self::Matern(_) => KernelKind::Matern,
            Self::InverseMultiquadric(_) => KernelKind::InverseMultiquadric,
            Self::RationalQuadratic(_) => KernelKind::RationalQuadratic,
        }
    }
}

impl Kernel for AnyKernel {
    fn eval(&self, x: &[f64], y: &[f64]) -> f64 {
        with_kernel!(self, k => k.eval(x, y))
    }

    fn grad_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
        with_kernel!(self, k => k.grad_x(x, y, out))
    }

    fn hessian_diag_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
        with_kernel!(self, k => k.hessian_diag_x(x, y, out))
    }

    fn gradient_matrix(&self, x: &[f64], z: MatRef<'_, f64>, out: MatMut<'_, f64>) {
        with_kernel!(self, k => k.gradient_matrix(x, z, out))
    }

    fn gradient_gram(
        &self,
        x: &[f64],
        z: MatRef<'_, f64>,
        scratch: &mut [f64],
        gram: &mut [f64],
        row_sums: &mut [f64],
    ) {
        with_kernel!(self, k => k.gradient_gram(x, z, scratch, gram, row_sums))
    }
}

impl SpectralDensity for AnyKernel {
    fn sample_frequency(&self, rng: &mut dyn Rng, out: &mut [f64]) {
        with_kernel!(self, k => k.sample_frequency(rng, out))
    }
}

impl LengthScale for AnyKernel {
    fn with_length_scale(&self, length_scale: f64) -> Option<Self> {
        Some(match self {
            Self::Gaussian(k) => Self::Gaussian(k.with_length_scale(length_scale)?),
            Self::Laplacian(k) => Self::Laplacian(k.with_length_scale(length_scale)?),
            Self::Matern(k) => Self::Matern(k.with_length_scale(length_scale)?),
            Self::InverseMultiquadric(k) => {
                Self::InverseMultiquadric(k.with_length_scale(length_scale)?)
            }
            Self::RationalQuadratic(k) => {
                Self::RationalQuadratic(k.with_length_scale(length_scale)?)
            }
        })
    }
}

impl Serialize for AnyKernel {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        with_kernel!(self, k => k.serialize(serializer))
    }
}

thread_local! {
    /// The variant decodes on this thread read ([`decoding`]).
    static DECODING: Cell<Option<KernelKind>> = const { Cell::new(None) };
}

/// Makes every [`AnyKernel`] decoded on this thread a `kind` until the
/// returned guard is dropped (which restores the kind before).
pub fn decoding(kind: KernelKind) -> DecodingGuard {
    DecodingGuard(DECODING.with(|c| c.replace(Some(kind))))
}

/// Restores the kind [`decoding`] replaced when dropped.
pub struct DecodingGuard(Option<KernelKind>);

impl Drop for DecodingGuard {
    fn drop(&mut self) {
        DECODING.with(|c| c.set(self.0));
    }
}

impl<'de> Deserialize<'de> for AnyKernel {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let kind = DECODING.with(Cell::get).ok_or_else(|| {
            serde::de::Error::custom("a kernel decoded without its settings naming its kind")
        })?;
        Ok(match kind {
            KernelKind::Gaussian => Self::Gaussian(Gaussian::deserialize(deserializer)?),
            KernelKind::Laplacian => Self::Laplacian(Laplacian::deserialize(deserializer)?),
            KernelKind::Matern => Self::Matern(Matern::deserialize(deserializer)?),
            KernelKind::InverseMultiquadric => {
                Self::InverseMultiquadric(InverseMultiquadric::deserialize(deserializer)?)
            }
            KernelKind::RationalQuadratic => {
                Self::RationalQuadratic(RationalQuadratic::deserialize(deserializer)?)
            }
        })
    }
}
