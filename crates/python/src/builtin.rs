//! The Rust targets, built from a JSON description the Python classes in
//! `kameleon.targets` write.

use faer::Mat;
use kameleon_samplers::{Target, chain_rng};
use kameleon_targets::{
    Banana, Flower, GaussianMixture, GridMixture, abc_skew_normal_posterior, glass_posterior,
};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde::Deserialize;
use std::sync::Arc;

/// A target as `kameleon.targets` describes it.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
enum TargetSpec {
    /// The twisted Gaussian B(b, v).
    Banana { dim: usize, b: f64, v: f64 },
    /// The flower F(r₀, A, ω, σ).
    Flower {
        dim: usize,
        radius: f64,
        amplitude: f64,
        petals: u32,
        sigma: f64,
    },
    /// The ring (a flower without petals).
    Ring { dim: usize, radius: f64, sigma: f64 },
    /// A Gaussian mixture with full covariances (d × d, row-major).
    GaussianMixture {
        weights: Vec<f64>,
        means: Vec<Vec<f64>>,
        covariances: Vec<Vec<f64>>,
    },
    /// cKAM's bimodal mixture.
    CkamBimodal { code_weights: bool },
    /// cKAM's five-component mixture.
    CkamFiveComponents {},
    /// A product-grid mixture (cKAM's 32-d target with its defaults).
    GridMixture {
        dim: usize,
        centres: Vec<f64>,
        variance: f64,
    },
    /// The Glass GP-classification posterior (pseudo-marginal).
    Glass { n_importance: usize },
    /// The ABC skew-normal posterior (pseudo-marginal).
    AbcSkewNormal {},
}

impl TargetSpec {
    fn build(self) -> Result<Arc<dyn Target>, String> {
        let e = |e: kameleon_targets::TargetError| e.to_string();
        Ok(match self {
            Self::Banana { dim, b, v } => Arc::new(Banana::new(dim, b, v).map_err(e)?),
            Self::Flower {
                dim,
                radius,
                amplitude,
                petals,
                sigma,
            } => Arc::new(Flower::new(dim, radius, amplitude, petals, sigma).map_err(e)?),
            Self::Ring { dim, radius, sigma } => {
                Arc::new(Flower::ring(dim, radius, sigma).map_err(e)?)
            }
            Self::GaussianMixture {
                weights,
                means,
                covariances,
            } => {
                let d = means.first().map_or(0, Vec::len);
                let covariances = covariances
                    .iter()
                    .map(|c| {
                        if c.len() != d * d {
                            return Err(format!(
                                "invalid target parameter `covariances`: each must be {d} × {d}"
                            ));
                        }
                        Ok(Mat::from_fn(d, d, |i, j| c[i * d + j]))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Arc::new(GaussianMixture::new(&weights, &means, &covariances).map_err(e)?)
            }
            Self::CkamBimodal { code_weights } => {
                Arc::new(GaussianMixture::ckam_bimodal(code_weights))
            }
            Self::CkamFiveComponents {} => Arc::new(GaussianMixture::ckam_five_components()),
            Self::GridMixture {
                dim,
                centres,
                variance,
            } => Arc::new(GridMixture::new(dim, &centres, variance).map_err(e)?),
            Self::Glass { n_importance } => Arc::new(glass_posterior(n_importance).map_err(e)?),
            Self::AbcSkewNormal {} => Arc::new(abc_skew_normal_posterior().map_err(e)?),
        })
    }
}

/// A built-in Rust target (constructed by the classes of `kameleon.targets`).
#[pyclass(frozen, module = "kameleon._core")]
pub struct BuiltinTarget {
    pub(crate) inner: Arc<dyn Target>,
}

#[pymethods]
impl BuiltinTarget {
    /// Builds the target described by `spec_json`.
    #[new]
    fn new(spec_json: &str) -> PyResult<Self> {
        let spec: TargetSpec = serde_json::from_str(spec_json)
            .map_err(|e| PyValueError::new_err(format!("invalid target description: {e}")))?;
        Ok(Self {
            inner: spec.build().map_err(PyValueError::new_err)?,
        })
    }

    /// The dimension.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// Whether the log density is exact (false for pseudo-marginal targets).
    #[getter]
    fn is_exact(&self) -> bool {
        self.inner.is_exact()
    }

    /// The log density at `x`; pseudo-marginal targets draw their estimate
    /// from a stream seeded with `seed`.
    #[pyo3(signature = (x, seed = 0))]
    fn log_density(&self, x: PyReadonlyArray1<'_, f64>, seed: u64) -> PyResult<f64> {
        let x = x.as_slice()?;
        self.check(x)?;
        Ok(self.inner.log_density(x, &mut chain_rng(seed, 0)))
    }

    /// The gradient of the log density at `x`.
    fn grad_log_density<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray1<'py, f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let x = x.as_slice()?;
        self.check(x)?;
        let mut out = vec![0.0; x.len()];
        self.inner
            .grad_log_density(x, &mut out)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// `n` exact independent draws (n × d) from a stream seeded with `seed`.
    fn sample_iid<'py>(
        &self,
        py: Python<'py>,
        n: usize,
        seed: u64,
    ) -> PyResult<Bound<'py, numpy::PyArray2<f64>>> {
        let d = self.inner.dim();
        let mut rng = chain_rng(seed, 0);
        let mut out = kameleon_core::buffer::zeros("the draws (n × d)", &[n, d])
            .map_err(|e| pyo3::exceptions::PyMemoryError::new_err(e.to_string()))?;
        for row in out.chunks_exact_mut(d) {
            self.inner
                .sample_iid(&mut rng, row)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
        }
        PyArray1::from_vec(py, out).reshape([n, d])
    }
}

impl BuiltinTarget {
    fn check(&self, x: &[f64]) -> PyResult<()> {
        if x.len() == self.inner.dim() {
            Ok(())
        } else {
            Err(PyValueError::new_err(format!(
                "x has length {}, the target has dimension {}",
                x.len(),
                self.inner.dim()
            )))
        }
    }
}
