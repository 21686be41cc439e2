//! The diagnostics crate on numpy arrays of shape (chains, draws, d) or
//! (n, d).

use kameleon_diagnostics::{
    MmdEstimator, PolynomialKernel, ess_bulk, ess_multi_chain, ess_tail, mmd2, mmd2_polynomial,
    rhat_rank, rhat_rank_and_ess_bulk,
};
use kameleon_kernels::{Gaussian, Kernel, Laplacian};
use numpy::{PyReadonlyArray2, PyReadonlyArray3, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

type Diagnostic = fn(&[&[f64]]) -> kameleon_diagnostics::Result<f64>;

/// The diagnostic a name gives: `"ess_bulk"` (rank-normalised bulk ESS),
/// `"ess_tail"` (tail ESS at the 5 % and 95 % quantiles), `"ess"` (the
/// multi-chain ESS of Geyer's initial monotone sequence, without rank
/// normalisation) or `"rhat"` (rank-normalised split R-hat).
fn diagnostic(name: &str) -> PyResult<Diagnostic> {
    Ok(match name {
        "ess_bulk" => ess_bulk,
        "ess_tail" => ess_tail,
        "ess" => ess_multi_chain,
        "rhat" => rhat_rank,
        _ => {
            return Err(PyValueError::new_err(format!(
                "unknown diagnostic {name:?}"
            )));
        }
    })
}

/// The diagnostic `name` of each parameter of draws (chains, draws, d), the
/// parameters in parallel without the GIL (each parameter's figure is the
/// same whatever the thread). A parameter whose diagnostic fails (e.g. a
/// constant one) is NaN if `nan_on_error`; otherwise the first such
/// parameter's error is a `ValueError`.
#[pyfunction]
fn per_parameter(
    py: Python<'_>,
    draws: PyReadonlyArray3<'_, f64>,
    name: &str,
    nan_on_error: bool,
) -> PyResult<Vec<f64>> {
    let f = diagnostic(name)?;
    each_parameter(py, &draws, f)
        .into_iter()
        .map(|r| match r {
            Ok(v) => Ok(v),
            Err(_) if nan_on_error => Ok(f64::NAN),
            Err(e) => Err(PyValueError::new_err(e.to_string())),
        })
        .collect()
}

/// The rank-normalised split R-hat and bulk ESS of each parameter of draws
/// (chains, draws, d), as `per_parameter`'s `"rhat"` and `"ess_bulk"` with
/// `nan_on_error` give them, computed together (they share the rank
/// normalisation).
#[pyfunction]
fn rhat_and_ess_bulk_per_parameter(
    py: Python<'_>,
    draws: PyReadonlyArray3<'_, f64>,
) -> (Vec<f64>, Vec<f64>) {
    let or_nan = |r: kameleon_diagnostics::Result<f64>| r.unwrap_or(f64::NAN);
    each_parameter(py, &draws, rhat_rank_and_ess_bulk)
        .into_iter()
        .map(|(rhat, ess)| (or_nan(rhat), or_nan(ess)))
        .unzip()
}

/// `f` of each parameter's chains of draws (chains, draws, d), the
/// parameters in parallel without the GIL.
fn each_parameter<T: Send>(
    py: Python<'_>,
    draws: &PyReadonlyArray3<'_, f64>,
    f: impl Fn(&[&[f64]]) -> T + Sync + Send,
) -> Vec<T> {
    use rayon::prelude::*;
    let array = draws.as_array();
    let (chains, n, d) = array.dim();
    py.detach(|| {
        (0..d)
            .into_par_iter()
            .map(|j| {
                // this parameter's draws, a contiguous row per chain, copied
                // here: a copy of every parameter at once would hold the
                // draws' memory a second time
                let column: Vec<f64> = array
                    .index_axis(numpy::ndarray::Axis(2), j)
                    .iter()
                    .copied()
                    .collect();
                let rows: Vec<&[f64]> = (0..chains).map(|c| &column[c * n..(c + 1) * n]).collect();
                f(&rows)
            })
            .collect()
    })
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
    m.add_function(wrap_pyfunction!(per_parameter, m)?)?;
    m.add_function(wrap_pyfunction!(rhat_and_ess_bulk_per_parameter, m)?)?;
    m.add_function(wrap_pyfunction!(mmd2_2d, m)?)?;
    Ok(())
}
