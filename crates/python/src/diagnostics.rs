//! The diagnostics crate on numpy arrays of shape (chains, draws) or
//! (n, d).

use kameleon_diagnostics::{
    MmdEstimator, PolynomialKernel, ess_bulk, ess_multi_chain, ess_tail, mmd2, mmd2_polynomial,
    rhat_rank,
};
use kameleon_kernels::{Gaussian, Kernel, Laplacian};
use numpy::{PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

type Diagnostic = fn(&[&[f64]]) -> kameleon_diagnostics::Result<f64>;

/// Applies `f` to the rows (chains) of a (chains, draws) array.
fn on_chains(chains: PyReadonlyArray2<'_, f64>, f: Diagnostic) -> PyResult<f64> {
    let array = chains.as_array();
    let rows: Vec<Vec<f64>> = array.rows().into_iter().map(|r| r.to_vec()).collect();
    let slices: Vec<&[f64]> = rows.iter().map(Vec::as_slice).collect();
    f(&slices).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Rank-normalised bulk ESS of a (chains, draws) array.
#[pyfunction]
fn ess_bulk_2d(chains: PyReadonlyArray2<'_, f64>) -> PyResult<f64> {
    on_chains(chains, ess_bulk)
}

/// Tail ESS (5% and 95% quantiles) of a (chains, draws) array.
#[pyfunction]
fn ess_tail_2d(chains: PyReadonlyArray2<'_, f64>) -> PyResult<f64> {
    on_chains(chains, ess_tail)
}

/// Multi-chain ESS with Geyer's initial monotone sequence (no rank
/// normalisation) of a (chains, draws) array.
#[pyfunction]
fn ess_2d(chains: PyReadonlyArray2<'_, f64>) -> PyResult<f64> {
    on_chains(chains, ess_multi_chain)
}

/// Rank-normalised split R-hat of a (chains, draws) array.
#[pyfunction]
fn rhat_2d(chains: PyReadonlyArray2<'_, f64>) -> PyResult<f64> {
    on_chains(chains, rhat_rank)
}

/// Squared MMD between samples `x` (n × d) and `y` (m × d) with the
/// `"gaussian"` or `"laplacian"` kernel of length-scale `bandwidth`, or the
/// `"polynomial"` kernel (offset + xᵀy)^degree; `unbiased` picks the
/// U-statistic.
#[pyfunction]
#[pyo3(signature = (x, y, kernel, bandwidth, offset, degree, unbiased))]
fn mmd2_2d(
    x: PyReadonlyArray2<'_, f64>,
    y: PyReadonlyArray2<'_, f64>,
    kernel: &str,
    bandwidth: f64,
    offset: f64,
    degree: i32,
    unbiased: bool,
) -> PyResult<f64> {
    let d = x.shape()[1];
    if y.shape()[1] != d {
        return Err(PyValueError::new_err(format!(
            "x has {d} columns but y has {}",
            y.shape()[1]
        )));
    }
    let (x, y) = (x.as_array(), y.as_array());
    let x: Vec<f64> = x.iter().copied().collect();
    let y: Vec<f64> = y.iter().copied().collect();
    let estimator = if unbiased {
        MmdEstimator::Unbiased
    } else {
        MmdEstimator::Biased
    };
    let value = |e: String| PyValueError::new_err(e);
    let result = match kernel {
        "gaussian" => {
            let k = Gaussian::new(bandwidth).map_err(|e| value(e.to_string()))?;
            mmd2(&x, &y, d, &|a: &[f64], b: &[f64]| k.eval(a, b), estimator)
        }
        "laplacian" => {
            let k = Laplacian::new(bandwidth).map_err(|e| value(e.to_string()))?;
            mmd2(&x, &y, d, &|a: &[f64], b: &[f64]| k.eval(a, b), estimator)
        }
        "polynomial" => {
            let k = PolynomialKernel::new(offset, degree).map_err(|e| value(e.to_string()))?;
            mmd2_polynomial(&x, &y, d, &k, estimator)
        }
        other => {
            return Err(value(format!(
                "invalid parameter `kernel`: must be \"gaussian\", \"laplacian\" or \"polynomial\", got {other:?}"
            )));
        }
    };
    result.map_err(|e| value(e.to_string()))
}

/// Adds the diagnostics to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(ess_bulk_2d, m)?)?;
    m.add_function(wrap_pyfunction!(ess_tail_2d, m)?)?;
    m.add_function(wrap_pyfunction!(ess_2d, m)?)?;
    m.add_function(wrap_pyfunction!(rhat_2d, m)?)?;
    m.add_function(wrap_pyfunction!(mmd2_2d, m)?)?;
    Ok(())
}
