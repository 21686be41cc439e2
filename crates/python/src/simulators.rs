//! Simulator models from the Rust crates: the set-up of the KMC paper's ABC
//! skew-normal target, and the Hamiltonian ABC baseline ([`Habc`]) run on
//! that target's simulator or on a Python simulator.
//!
//! [`Habc`] is biased by design (no Metropolis–Hastings correction; see
//! `kameleon_samplers::habc`). Its chains run one after another on the
//! calling thread: a Python simulator needs the GIL for every simulation.

use kameleon_samplers::{
    Chain, Habc, HabcConfig, RunConfig, SummarySimulator, SyntheticLikelihood,
};
use kameleon_targets::{AbcSkewNormal, IsotropicGaussianPrior, abc_skew_normal_posterior};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rand::Rng;
use std::sync::Mutex;

fn value_error(error: impl ToString) -> PyErr {
    PyValueError::new_err(error.to_string())
}

/// The KMC ABC skew-normal posterior's set-up: `observed` (the observed
/// summary), `epsilon`, `n_samples` (draws per data set), `n_pseudo`
/// (data sets per estimate), `alpha` (the skew-normal shape) and
/// `prior_variance` (of the isotropic Gaussian prior).
#[pyfunction]
fn abc_skew_normal_setup(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let target = abc_skew_normal_posterior().map_err(value_error)?;
    let abc = target.estimator();
    let dict = PyDict::new(py);
    dict.set_item("observed", PyArray1::from_slice(py, abc.observed_summary()))?;
    dict.set_item("epsilon", abc.epsilon())?;
    dict.set_item("n_samples", abc.n_samples())?;
    dict.set_item("n_pseudo", abc.n_pseudo())?;
    dict.set_item("alpha", PyArray1::from_slice(py, abc.simulator().shape()))?;
    dict.set_item("prior_variance", target.prior().variance())?;
    Ok(dict)
}

/// A Python simulator `function(theta, seed) -> summaries` (a float64
/// array of the observed summary's length; the Python side checks it). The
/// seed is drawn from the Rust stream, so the simulations are a
/// deterministic function of it, as HABC's sticky seeds need. The first
/// error is kept, and every simulation from then on is NaN without calling
/// Python (the rest of the run rejects every trajectory quickly); the
/// caller raises it.
struct PythonSimulator {
    function: Py<PyAny>,
    observed: Vec<f64>,
    dim: usize,
    error: Mutex<Option<PyErr>>,
}

impl PythonSimulator {
    fn simulate(&self, py: Python<'_>, theta: &[f64], seed: u64, out: &mut [f64]) -> PyResult<()> {
        let value = self
            .function
            .bind(py)
            .call1((PyArray1::from_slice(py, theta), seed))?;
        let summaries: PyReadonlyArray1<'_, f64> = value.extract()?;
        let summaries = summaries.as_slice()?;
        if summaries.len() != out.len() {
            return Err(PyValueError::new_err(format!(
                "the simulator returned {} summaries; expected {}",
                summaries.len(),
                out.len()
            )));
        }
        out.copy_from_slice(summaries);
        Ok(())
    }

    fn take_error(&self) -> Option<PyErr> {
        self.error.lock().map_or(None, |mut e| e.take())
    }
}

impl SummarySimulator for PythonSimulator {
    fn parameter_dim(&self) -> usize {
        self.dim
    }

    fn observed_summary(&self) -> &[f64] {
        &self.observed
    }

    fn simulate_summary(&self, theta: &[f64], rng: &mut dyn Rng, out: &mut [f64]) {
        let seed = rng.next_u64();
        let mut error = match self.error.lock() {
            Ok(guard) => guard,
            Err(_) => {
                out.fill(f64::NAN);
                return;
            }
        };
        if error.is_some() {
            out.fill(f64::NAN);
            return;
        }
        if let Err(e) = Python::attach(|py| self.simulate(py, theta, seed, out)) {
            *error = Some(e);
            out.fill(f64::NAN);
        }
    }
}

/// The chains as a list of dicts: `samples` (n, d), `lp`, `accepted`,
/// `accepted_total`, `rejected_non_finite`.
fn chains_to_python<'py>(py: Python<'py>, chains: Vec<Chain>) -> PyResult<Vec<Bound<'py, PyDict>>> {
    chains
        .into_iter()
        .map(|chain| {
            let dict = PyDict::new(py);
            let n = chain.accepted.len();
            let samples = PyArray1::from_vec(py, chain.samples).reshape([n, chain.dim])?;
            dict.set_item("samples", samples)?;
            dict.set_item("lp", PyArray1::from_vec(py, chain.log_densities))?;
            dict.set_item("accepted", PyArray1::from_vec(py, chain.accepted))?;
            dict.set_item("accepted_total", chain.accepted_total)?;
            dict.set_item("rejected_non_finite", chain.rejected_non_finite)?;
            Ok(dict)
        })
        .collect()
}

/// Runs one chain per row of `starts` (chain k with stream k of `seed`).
fn run_chains<S: SummarySimulator>(
    habc: &mut Habc<S>,
    starts: &[Vec<f64>],
    run: RunConfig,
    seed: u64,
) -> PyResult<Vec<Chain>> {
    starts
        .iter()
        .enumerate()
        .map(|(k, start)| habc.run(start, run, seed, k as u64).map_err(value_error))
        .collect()
}

/// Runs HABC and returns `{"chains": [...]}` (see [`chains_to_python`]).
/// `simulator`: None for the KMC skew-normal simulator with its observed
/// summary (then `observed` must be None), or a Python function as in
/// [`PythonSimulator`] with the `observed` summary. `settings`: (step-size
/// low, high, steps, friction, perturbation). `x0`: one start per chain,
/// shape (chains, d).
#[pyfunction]
// one argument per setting of the Python class it implements
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (simulator, observed, n_simulations, epsilon, prior_variance, settings, x0, seed, tune, draws, thin))]
fn habc_sample<'py>(
    py: Python<'py>,
    simulator: Option<Py<PyAny>>,
    observed: Option<Vec<f64>>,
    n_simulations: usize,
    epsilon: f64,
    prior_variance: f64,
    settings: (f64, f64, u32, f64, f64),
    x0: numpy::PyReadonlyArray2<'py, f64>,
    seed: u64,
    tune: u64,
    draws: u64,
    thin: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let (low, high, steps, friction, perturbation) = settings;
    let config = HabcConfig::kmc_paper()
        .with_step_size((low, high))
        .and_then(|c| c.with_steps(steps))
        .and_then(|c| c.with_friction(friction))
        .and_then(|c| c.with_perturbation(perturbation))
        .map_err(value_error)?;
    let prior = IsotropicGaussianPrior::new(prior_variance).map_err(value_error)?;
    let x0 = x0.as_array();
    let starts: Vec<Vec<f64>> = x0.rows().into_iter().map(|r| r.to_vec()).collect();
    let run = RunConfig::new(tune, draws * thin).thin(thin);
    let chains = match (simulator, observed) {
        (None, None) => {
            let abc = AbcSkewNormal::kmc_paper().map_err(value_error)?;
            let likelihood =
                SyntheticLikelihood::new(abc, n_simulations, epsilon).map_err(value_error)?;
            let mut habc = Habc::new(likelihood, prior, config).map_err(value_error)?;
            // the Rust simulator needs no GIL
            py.detach(|| run_chains(&mut habc, &starts, run, seed))?
        }
        (Some(function), Some(observed)) => {
            let simulator = PythonSimulator {
                function,
                observed,
                dim: x0.ncols(),
                error: Mutex::new(None),
            };
            let likelihood =
                SyntheticLikelihood::new(simulator, n_simulations, epsilon).map_err(value_error)?;
            let mut habc = Habc::new(likelihood, prior, config).map_err(value_error)?;
            let chains = run_chains(&mut habc, &starts, run, seed);
            if let Some(error) = habc.likelihood().simulator().take_error() {
                return Err(error);
            }
            chains?
        }
        _ => {
            return Err(PyValueError::new_err(
                "pass both a simulator and its observed summary, or neither (the skew-normal target)",
            ));
        }
    };
    let out = PyDict::new(py);
    out.set_item("chains", chains_to_python(py, chains)?)?;
    Ok(out)
}

/// Adds this module's functions to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(abc_skew_normal_setup, m)?)?;
    m.add_function(wrap_pyfunction!(habc_sample, m)?)?;
    Ok(())
}
