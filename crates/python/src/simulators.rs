//! Simulator models: likelihoods estimated in Rust from a compiled
//! simulator ([`CompiledLikelihood`]), the set-up of the KMC paper's ABC
//! skew-normal target, and the Hamiltonian ABC baseline ([`Habc`]) run on
//! that target's simulator or on a Python simulator.
//!
//! [`Habc`] is biased by design (no Metropolis–Hastings correction; see
//! `kameleon_samplers::habc`). Its chains run one after another on a worker
//! thread (a Python simulator takes the GIL for every simulation) while the
//! calling thread draws progress and watches for Ctrl-C, as
//! [`crate::driver::poll_while`] does for every run.

use crate::driver::poll_while;
use kameleon_samplers::{
    Chain, Habc, HabcConfig, RunConfig, SummarySimulator, SyntheticLikelihood, chain_rng,
};
use kameleon_targets::{
    AbcLikelihood, AbcSkewNormal, GaussianSyntheticLikelihood, IsotropicGaussianPrior,
    LikelihoodEstimator, abc_skew_normal_posterior,
};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rand::{Rng, RngExt};
use rand_distr::{Open01, StandardNormal};
use std::cell::RefCell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The C signature of a compiled simulator:
/// `int64_t simulate(const double *theta, int64_t dim, const double *noise,
/// int64_t n_noise, double *summaries, int64_t n_summaries)`. It writes the
/// summaries of one simulation at `theta`, a deterministic function of
/// `theta` and the `noise` Rust drew for it, and returns 0, or a nonzero
/// status that stops the run.
pub type CompiledSimulatorFn =
    extern "C" fn(*const f64, i64, *const f64, i64, *mut f64, i64) -> i64;

/// The distribution of the noise a compiled simulator is given.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Noise {
    /// Independent standard normals.
    Normal,
    /// Independent uniforms on the open interval (0, 1).
    Uniform,
}

thread_local! {
    /// This thread's noise buffer.
    static NOISE: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
}

/// A compiled simulator with the observed summaries, as a
/// [`SummarySimulator`]. Each simulation draws `n_noise` values from the
/// chain's stream and passes them to the function, so the simulations are
/// reproducible whatever thread runs them. The first nonzero status is
/// kept (with its θ); every simulation from then on is NaN without a call,
/// and the run stops. Summary j, observed and simulated, is multiplied by
/// `factors[j]`, a power of two (exact; empty: by none).
pub struct CompiledSimulator {
    function: CompiledSimulatorFn,
    dim: usize,
    observed: Vec<f64>,
    factors: Vec<f64>,
    n_noise: usize,
    noise: Noise,
    failed: AtomicBool,
    failure: Mutex<Option<(i64, Vec<f64>)>>,
}

impl CompiledSimulator {
    /// Fills `noise` with draws from `rng`.
    fn draw(&self, rng: &mut dyn Rng, noise: &mut [f64]) {
        match self.noise {
            Noise::Normal => noise
                .iter_mut()
                .for_each(|v| *v = rng.sample(StandardNormal)),
            Noise::Uniform => noise.iter_mut().for_each(|v| *v = rng.sample(Open01)),
        }
    }

    /// Runs the function on `noise`; a nonzero status is recorded.
    fn call(&self, theta: &[f64], noise: &[f64], out: &mut [f64]) {
        if self.failed.load(Ordering::Relaxed) {
            out.fill(f64::NAN);
            return;
        }
        let status = (self.function)(
            theta.as_ptr(),
            theta.len() as i64,
            noise.as_ptr(),
            noise.len() as i64,
            out.as_mut_ptr(),
            out.len() as i64,
        );
        if status != 0 {
            out.fill(f64::NAN);
            let mut first = self.failure.lock().unwrap_or_else(|e| e.into_inner());
            first.get_or_insert_with(|| (status, theta.to_vec()));
            self.failed.store(true, Ordering::Relaxed);
        }
        out.iter_mut()
            .zip(&self.factors)
            .for_each(|(v, factor)| *v *= factor);
    }

    /// The first failure as a Python error, if any.
    fn take_error(&self) -> Option<PyErr> {
        let (status, theta) = self
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        Some(PyRuntimeError::new_err(format!(
            "the compiled simulator returned status {status} at theta = {theta:?} (a nonzero status \
             stops the run; to reject a parameter, write NaN summaries and return 0)"
        )))
    }
}

impl SummarySimulator for CompiledSimulator {
    fn parameter_dim(&self) -> usize {
        self.dim
    }

    fn observed_summary(&self) -> &[f64] {
        &self.observed
    }

    fn simulate_summary(&self, theta: &[f64], rng: &mut dyn Rng, out: &mut [f64]) {
        // the noise is drawn even after a failure: the stream's layout is fixed
        NOISE.with(|cell| match cell.try_borrow_mut() {
            Ok(mut noise) => {
                noise.resize(self.n_noise, 0.0);
                self.draw(rng, &mut noise);
                self.call(theta, &noise, out);
            }
            Err(_) => {
                let mut noise = vec![0.0; self.n_noise];
                self.draw(rng, &mut noise);
                self.call(theta, &noise, out);
            }
        });
    }
}

/// An estimator of [`CompiledLikelihood`] with its own failure record:
/// the log density of one run (or of one call from Python).
pub enum SimulationLikelihood {
    /// Gaussian-kernel ABC.
    Abc(AbcLikelihood<CompiledSimulator>),
    /// Gaussian synthetic likelihood (Wood's or unbiased) of the scaled
    /// summaries, and the log of the scaling's Jacobian, which turns it into
    /// that of the summaries.
    Synthetic(GaussianSyntheticLikelihood<CompiledSimulator>, f64),
}

impl SimulationLikelihood {
    fn simulator(&self) -> &CompiledSimulator {
        match self {
            Self::Abc(abc) => abc.simulator(),
            Self::Synthetic(sl, _) => sl.simulator(),
        }
    }

    /// The log likelihood estimate at `theta` from fresh simulations drawn
    /// with `rng` (NaN if `theta` has the wrong length).
    pub fn log_likelihood_estimate(&self, theta: &[f64], rng: &mut dyn Rng) -> f64 {
        match self {
            Self::Abc(abc) => abc.log_likelihood_estimate(theta, rng),
            Self::Synthetic(sl, log_jacobian) => {
                sl.log_likelihood_estimate(theta, rng) + log_jacobian
            }
        }
    }

    /// Whether the simulator returned a nonzero status.
    pub fn has_failed(&self) -> bool {
        self.simulator().failed.load(Ordering::Relaxed)
    }

    /// The simulator's first nonzero status as a `RuntimeError`.
    pub fn take_error(&self) -> Option<PyErr> {
        self.simulator().take_error()
    }
}

/// What an estimator of a compiled simulator computes.
#[derive(Debug, Clone)]
enum Estimate {
    Abc {
        epsilon: Vec<f64>,
    },
    /// `exponents`: summary j is scaled by 2^`exponents[j]` (empty: none).
    Synthetic {
        unbiased: bool,
        exponents: Vec<i32>,
    },
}

/// What a [`CompiledSimulator`] is made of, checked once: the function,
/// its `dim` parameters, the observed summaries and the noise it is given.
struct SimulatorParts {
    function: CompiledSimulatorFn,
    dim: usize,
    observed: Vec<f64>,
    n_noise: usize,
    noise: Noise,
}

impl SimulatorParts {
    /// The simulator at `address` (see [`CompiledSimulatorFn`]) with `dim`
    /// parameters, the `observed` summaries and `n_noise` values of `noise`
    /// (`"normal"` or `"uniform"`) per simulation.
    fn new(
        address: usize,
        dim: usize,
        observed: Vec<f64>,
        n_noise: usize,
        noise: &str,
    ) -> PyResult<Self> {
        // each simulation fills a buffer of n_noise values: refuse one that
        // could never be had, rather than abort at the first simulation
        kameleon_core::buffer::ensure_room("the simulator's noise (n_noise values)", &[&[n_noise]])
            .map_err(|e| pyo3::exceptions::PyMemoryError::new_err(e.to_string()))?;
        let noise = match noise {
            "normal" => Noise::Normal,
            "uniform" => Noise::Uniform,
            other => {
                return Err(PyValueError::new_err(format!(
                    "`noise` must be 'normal' or 'uniform', got {other:?}"
                )));
            }
        };
        Ok(Self {
            function: crate::density::function_at(address, "CompiledSimulator")?,
            dim,
            observed,
            n_noise,
            noise,
        })
    }

    /// The simulator, with a fresh failure record, its summaries scaled by
    /// 2^`exponents[j]` (none if empty).
    fn simulator(&self, exponents: &[i32]) -> CompiledSimulator {
        let factors: Vec<f64> = exponents.iter().map(|&e| 2f64.powi(e)).collect();
        let mut observed = self.observed.clone();
        observed
            .iter_mut()
            .zip(&factors)
            .for_each(|(v, factor)| *v *= factor);
        CompiledSimulator {
            function: self.function,
            dim: self.dim,
            observed,
            factors,
            n_noise: self.n_noise,
            noise: self.noise,
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
        }
    }
}

/// A likelihood estimated in Rust from a compiled simulator: ABC with a
/// Gaussian kernel or a Gaussian synthetic likelihood. `kameleon.ABC` and
/// `kameleon.SyntheticLikelihood` build it for a
/// `kameleon.CompiledSimulator`; a run builds its estimator from it (see
/// [`CompiledLikelihood::build`]) and evaluates it on its own threads.
#[pyclass(frozen, module = "kameleon._core")]
pub struct CompiledLikelihood {
    parts: SimulatorParts,
    n_simulations: usize,
    estimate: Estimate,
}

#[pymethods]
impl CompiledLikelihood {
    /// The estimator of the simulator at `address` (see
    /// [`CompiledSimulatorFn`]) with `dim` parameters, the `observed`
    /// summaries, `n_noise` values of `noise` (`"normal"` or `"uniform"`)
    /// per simulation and `n_simulations` simulations per estimate: ABC
    /// with kernel widths `epsilon` (one, or one per summary), or, without
    /// `epsilon`, the Gaussian synthetic likelihood (`unbiased` or Wood's)
    /// of the summaries scaled by 2^`exponents[j]` (powers in
    /// [-1022, 1022]; exact), corrected by the scaling's Jacobian.
    #[new]
    #[pyo3(signature = (address, dim, observed, n_noise, noise, n_simulations, epsilon=None, unbiased=false, exponents=Vec::new()))]
    // one argument per field of the Python classes it implements
    #[allow(clippy::too_many_arguments)]
    fn new(
        address: usize,
        dim: usize,
        observed: Vec<f64>,
        n_noise: usize,
        noise: &str,
        n_simulations: usize,
        epsilon: Option<Vec<f64>>,
        unbiased: bool,
        exponents: Vec<i32>,
    ) -> PyResult<Self> {
        if !exponents.is_empty() && exponents.len() != observed.len() {
            return Err(PyValueError::new_err(format!(
                "`exponents` has {} powers of two for {} summaries",
                exponents.len(),
                observed.len()
            )));
        }
        if let Some(e) = exponents.iter().find(|e| e.abs() > 1022) {
            return Err(PyValueError::new_err(format!(
                "a summary's scale 2^{e} is not a normal float (powers from -1022 to 1022)"
            )));
        }
        let likelihood = Self {
            parts: SimulatorParts::new(address, dim, observed, n_noise, noise)?,
            n_simulations,
            estimate: match epsilon {
                Some(epsilon) => Estimate::Abc { epsilon },
                None => Estimate::Synthetic {
                    unbiased,
                    exponents,
                },
            },
        };
        // the estimator's own checks, once
        likelihood.build(dim)?;
        Ok(likelihood)
    }

    /// The number of parameters.
    #[getter]
    fn dim(&self) -> usize {
        self.parts.dim
    }

    /// The log likelihood estimate at `theta` from simulations drawn with a
    /// stream seeded with `seed`, computed without the GIL. A nonzero
    /// status of the simulator raises `RuntimeError`.
    fn log_likelihood(&self, py: Python<'_>, theta: Vec<f64>, seed: u64) -> PyResult<f64> {
        let likelihood = self.build(theta.len())?;
        let value =
            py.detach(|| likelihood.log_likelihood_estimate(&theta, &mut chain_rng(seed, 0)));
        likelihood.take_error().map_or(Ok(value), Err)
    }

    /// The `n_simulations` summaries (n, s) that
    /// [`CompiledLikelihood::log_likelihood`] with the same `theta` and
    /// `seed` computes its estimate from (unscaled).
    fn simulate<'py>(
        &self,
        py: Python<'py>,
        theta: Vec<f64>,
        seed: u64,
    ) -> PyResult<Bound<'py, numpy::PyArray2<f64>>> {
        self.build(theta.len())?;
        let simulator = self.parts.simulator(&[]);
        let (n, s) = (self.n_simulations, self.parts.observed.len());
        let summaries = py.detach(|| {
            let mut rng = chain_rng(seed, 0);
            let mut out = vec![0.0; n * s];
            for row in out.chunks_exact_mut(s) {
                simulator.simulate_summary(&theta, &mut rng, row);
            }
            out
        });
        if let Some(error) = simulator.take_error() {
            return Err(error);
        }
        PyArray1::from_vec(py, summaries).reshape([n, s])
    }
}

impl CompiledLikelihood {
    /// A new estimator (with a fresh failure record) for points of
    /// dimension `dim`, which must be the simulator's.
    pub fn build(&self, dim: usize) -> PyResult<SimulationLikelihood> {
        if dim != self.parts.dim {
            return Err(PyValueError::new_err(format!(
                "the compiled simulator has {} parameters, but theta (or x0) has dimension {dim}",
                self.parts.dim
            )));
        }
        let likelihood = match &self.estimate {
            Estimate::Abc { epsilon } => {
                AbcLikelihood::new(self.parts.simulator(&[]), epsilon, self.n_simulations)
                    .map(SimulationLikelihood::Abc)
            }
            Estimate::Synthetic {
                unbiased,
                exponents,
            } => {
                // the density of D y, D = diag(2^e), is that of y over |D|
                let log_jacobian =
                    exponents.iter().map(|&e| f64::from(e)).sum::<f64>() * std::f64::consts::LN_2;
                GaussianSyntheticLikelihood::new(
                    self.parts.simulator(exponents),
                    self.n_simulations,
                    *unbiased,
                )
                .map(|sl| SimulationLikelihood::Synthetic(sl, log_jacobian))
            }
        };
        likelihood.map_err(value_error)
    }
}

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

/// Runs one chain per row of `starts` (chain k with stream k of `seed`),
/// one after another on a worker thread, while this thread calls
/// `progress` with the steps done per chain and watches for Ctrl-C, which
/// stops the run with a `KeyboardInterrupt` ([`poll_while`]).
fn run_chains<S: SummarySimulator + Send>(
    py: Python<'_>,
    habc: &mut Habc<S>,
    starts: &[Vec<f64>],
    run: RunConfig,
    seed: u64,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<Chain>> {
    let steps: Vec<AtomicU64> = starts.iter().map(|_| AtomicU64::new(0)).collect();
    let cancel = AtomicBool::new(false);
    let chains = || {
        starts
            .iter()
            .zip(&steps)
            .enumerate()
            .map(|(k, (start, done))| {
                habc.run_observed(start, run, seed, k as u64, done, &cancel)
                    .map_err(value_error)
            })
            .collect::<PyResult<Vec<Chain>>>()
    };
    // attached once, the worker keeps its Python thread state, so each
    // simulation of a Python simulator re-takes the GIL cheaply
    let work = || Python::attach(|py| py.detach(chains));
    let (chains, polled) = poll_while(py, work, &steps, progress, &cancel, || false);
    if let Some(err) = polled.callback_error {
        return Err(err);
    }
    if polled.interrupted {
        return Err(PyKeyboardInterrupt::new_err("the HABC run was interrupted"));
    }
    chains
}

/// Runs HABC and returns `{"chains": [...]}` (see [`chains_to_python`]).
/// `simulator`: None for the KMC skew-normal simulator with its observed
/// summary (then `observed` must be None), a compiled simulator given as
/// `(address, dim, n_noise, noise)` (see [`SimulatorParts::new`]; run
/// without the GIL), or a Python function as in [`PythonSimulator`]; the
/// latter two with the `observed` summary. `settings`: (step-size
/// low, high, steps, friction, perturbation). `x0`: one start per chain,
/// shape (chains, d). `progress`: None, or called with the steps done per
/// chain about every 0.1 s and at the end ([`poll_while`]); a truthy return
/// stops the run as Ctrl-C does.
#[pyfunction]
// one argument per setting of the Python class it implements
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (simulator, observed, n_simulations, epsilon, prior_variance, settings, x0, seed, tune, draws, thin, progress=None))]
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
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let progress = progress.as_ref();
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
    let run = RunConfig::for_draws(tune, draws, thin).map_err(value_error)?;
    let compiled = simulator
        .as_ref()
        .and_then(|f| f.bind(py).extract::<(usize, usize, usize, String)>().ok());
    let chains = match (compiled, simulator, observed) {
        (Some((address, dim, n_noise, noise)), _, Some(observed)) => {
            let simulator =
                SimulatorParts::new(address, dim, observed, n_noise, &noise)?.simulator(&[]);
            let likelihood =
                SyntheticLikelihood::new(simulator, n_simulations, epsilon).map_err(value_error)?;
            let mut habc = Habc::new(likelihood, prior, config).map_err(value_error)?;
            let chains = run_chains(py, &mut habc, &starts, run, seed, progress);
            if let Some(error) = habc.likelihood().simulator().take_error() {
                return Err(error);
            }
            chains?
        }
        (None, None, None) => {
            let abc = AbcSkewNormal::kmc_paper().map_err(value_error)?;
            let likelihood =
                SyntheticLikelihood::new(abc, n_simulations, epsilon).map_err(value_error)?;
            let mut habc = Habc::new(likelihood, prior, config).map_err(value_error)?;
            run_chains(py, &mut habc, &starts, run, seed, progress)?
        }
        (None, Some(function), Some(observed)) => {
            let simulator = PythonSimulator {
                function,
                observed,
                dim: x0.ncols(),
                error: Mutex::new(None),
            };
            let likelihood =
                SyntheticLikelihood::new(simulator, n_simulations, epsilon).map_err(value_error)?;
            let mut habc = Habc::new(likelihood, prior, config).map_err(value_error)?;
            let chains = run_chains(py, &mut habc, &starts, run, seed, progress);
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
    m.add_class::<CompiledLikelihood>()?;
    Ok(())
}
