//! `kameleon._core`: the Rust side of the `kameleon` Python package.
//!
//! Rust owns the chains, the threads and the checkpoint files; Python owns
//! the user's log density and the output objects. `sample` and
//! `resume` run chains on a thread pool (or, for a vectorised density, all
//! chains in lockstep on one thread) while the calling thread polls
//! progress counters and signals; `sample` also runs any subset of a run's
//! chains by index, which is how worker processes run theirs, and
//! `regroup_checkpoints` and `extend_checkpoint` gather, split and lengthen
//! checkpoints. `sample_ensemble` and `resume_ensemble` run the
//! affine-invariant ensemble sampler; [`BuiltinTarget`] exposes the Rust
//! targets; [`CompiledLikelihood`] estimates ABC and synthetic
//! likelihoods from a compiled simulator without the GIL; the
//! `ess_*`/`rhat`/`mmd` functions wrap the diagnostics crate;
//! `habc_sample` runs the HABC baseline on a simulator.

mod any_kernel;
mod builtin;
mod density;
mod diagnostics;
mod driver;
mod ensemble;
mod settings;
mod simulators;

pub use builtin::BuiltinTarget;
pub use density::{CompiledFn, Density, Source};
pub use driver::{CheckpointFile, DensityRecord, RunHeader, load_checkpoint, save_checkpoint};
pub use settings::{Job, KernelSpec, Sampler, SamplerSettings};
pub use simulators::{
    CompiledLikelihood, CompiledSimulator, CompiledSimulatorFn, SimulationLikelihood,
};

use driver::{Control, Extend, Outcome, Positions, Regroup, Resume, Start};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::Arc;

/// Builds the density of dimension `dim` named by `kind`: `"callable"`
/// (`function`, optional `gradient`), `"vectorized"` (`function` takes a
/// `(k, d)` array, returns `k` values), `"pseudo_marginal"` (`function`),
/// `"compiled"` (`function` is the address), `"simulation"` (`function`
/// is a [`CompiledLikelihood`]) or `"builtin"` (`function` is a
/// [`BuiltinTarget`]).
fn density(
    py: Python<'_>,
    kind: &str,
    function: &Bound<'_, PyAny>,
    gradient: Option<Py<PyAny>>,
    dim: usize,
) -> PyResult<Density> {
    let source = match kind {
        "callable" => Source::Callable {
            function: function.clone().unbind(),
            gradient,
        },
        "pseudo_marginal" => {
            let random = py.import("numpy.random")?;
            Source::PseudoMarginal {
                function: function.clone().unbind(),
                bit_generator: random.getattr("PCG64")?.unbind(),
                generator: random.getattr("Generator")?.unbind(),
            }
        }
        "vectorized" => Source::Batched {
            function: function.clone().unbind(),
        },
        "compiled" => Source::Compiled(density::compiled_from_address(function.extract()?)?),
        "simulation" => {
            let likelihood = function.cast::<CompiledLikelihood>()?.get().build(dim)?;
            Source::Simulation(likelihood)
        }
        "builtin" => {
            let target = function.cast::<BuiltinTarget>()?.get();
            if target.inner.dim() != dim {
                return Err(PyValueError::new_err(format!(
                    "x0 has dimension {dim} but the target has dimension {}",
                    target.inner.dim()
                )));
            }
            Source::Builtin(Arc::clone(&target.inner))
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown log density kind {other:?}"
            )));
        }
    };
    Ok(Density::new(dim, source))
}

/// The chains as a list of dicts of numpy arrays and counters
/// (`out_of_evaluations`: whether the chain's evaluation limit stopped it
/// before its last step).
fn outcome_to_python<'py>(py: Python<'py>, outcome: Outcome) -> PyResult<Bound<'py, PyDict>> {
    let chains = outcome
        .chains
        .into_iter()
        .zip(outcome.out_of_evaluations)
        .map(|(chain, out)| {
            let dict = PyDict::new(py);
            let n = chain.len();
            let samples = PyArray1::from_vec(py, chain.samples).reshape([n, chain.dim])?;
            dict.set_item("samples", samples)?;
            dict.set_item("lp", PyArray1::from_vec(py, chain.log_densities))?;
            dict.set_item("accepted", PyArray1::from_vec(py, chain.accepted))?;
            dict.set_item(
                "acceptance_probability",
                PyArray1::from_vec(py, chain.accept_probabilities),
            )?;
            dict.set_item("accepted_total", chain.accepted_total)?;
            dict.set_item("rejected_non_finite", chain.rejected_non_finite)?;
            dict.set_item("covariance_jitters", chain.covariance_jitters)?;
            dict.set_item("evaluations", chain.evaluations)?;
            dict.set_item("wall_time", chain.wall_time_secs)?;
            dict.set_item("scale", chain.adaptation.scale)?;
            dict.set_item("out_of_evaluations", out)?;
            Ok(dict)
        })
        .collect::<PyResult<Vec<_>>>()?;
    let out = PyDict::new(py);
    out.set_item("chains", chains)?;
    out.set_item("interrupted", outcome.interrupted)?;
    Ok(out)
}

fn settings(json: &str) -> PyResult<SamplerSettings> {
    SamplerSettings::from_json(json).map_err(PyValueError::new_err)
}

/// Runs `x0.shape[0]` chains of the sampler `settings` (JSON) on a log
/// density and returns `{"chains": [...], "interrupted": bool}`. Row i of
/// `x0` is chain `chain_ids[i]` of the seed (chain i if `chain_ids` is
/// None), so a subset of a run's chains gives the same chains as the run.
/// `evaluation_limit`: each chain's most log-density evaluations, start
/// included (a chain stops before a step that could exceed it).
/// `density_record`: what the checkpoint records of the log density (see
/// [`DensityRecord::from_python`]).
#[pyfunction]
// one argument per keyword of the Python function it implements
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (settings_json, kind, function, gradient, x0, seed, draws, tune, thin, cores, progress, checkpoint, checkpoint_every, chain_ids=None, evaluation_limit=None, density_record=None))]
fn sample<'py>(
    py: Python<'py>,
    settings_json: &str,
    kind: &str,
    function: &Bound<'py, PyAny>,
    gradient: Option<Py<PyAny>>,
    x0: PyReadonlyArray2<'py, f64>,
    seed: u64,
    draws: u64,
    tune: u64,
    thin: u64,
    cores: usize,
    progress: Option<Bound<'py, PyAny>>,
    checkpoint: Option<PathBuf>,
    checkpoint_every: f64,
    chain_ids: Option<Vec<u64>>,
    evaluation_limit: Option<u64>,
    density_record: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let parsed = settings(settings_json)?;
    let x0 = x0.as_array();
    let (chains, dim) = (x0.nrows(), x0.ncols());
    if chains == 0 || dim == 0 {
        return Err(PyValueError::new_err(
            "x0 must hold at least one chain of dimension at least 1",
        ));
    }
    let chain_ids = chain_ids.unwrap_or_else(|| (0..chains as u64).collect());
    if chain_ids.len() != chains {
        return Err(PyValueError::new_err(format!(
            "chain_ids has {} entries for {chains} rows of x0",
            chain_ids.len()
        )));
    }
    if thin == 0 {
        return Err(PyValueError::new_err("thin must be at least 1"));
    }
    let density = density(py, kind, function, gradient, dim)?;
    let header = RunHeader {
        settings: settings_json.to_owned(),
        dim,
        seed,
        draws,
        tune,
        thin,
        chains,
        density: DensityRecord::from_python(density_record.as_ref())?,
    };
    let job = Start {
        header,
        density: &density,
        x0: x0.rows().into_iter().map(|r| r.to_vec()).collect(),
        chain_ids,
        evaluation_limit,
        control: Control {
            py,
            cores,
            progress,
            checkpoint,
            checkpoint_every: driver::checkpoint_interval(checkpoint_every)?,
        },
    };
    let outcome = parsed.dispatch(dim, job).map_err(PyValueError::new_err)??;
    outcome_to_python(py, outcome)
}

/// The header of a checkpoint as a dict (settings JSON, seed, draws, …,
/// and `density`, its record of the log density, as
/// [`DensityRecord::to_python`] gives it), with each chain's current point
/// (`positions`), the log density it stored there (`log_densities`) and its
/// steps done (`steps_done`).
#[pyfunction]
fn checkpoint_header<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let file = load_checkpoint(&path)?;
    let chains = settings(&file.header.settings)?
        .dispatch(file.header.dim, Positions { file: &file })
        .map_err(PyValueError::new_err)??;
    let header = file.header;
    let dict = PyDict::new(py);
    dict.set_item("positions", chains.positions)?;
    dict.set_item("log_densities", chains.log_densities)?;
    dict.set_item("steps_done", chains.steps_done)?;
    dict.set_item("settings", header.settings)?;
    dict.set_item("dim", header.dim)?;
    dict.set_item("seed", header.seed)?;
    dict.set_item("draws", header.draws)?;
    dict.set_item("tune", header.tune)?;
    dict.set_item("thin", header.thin)?;
    dict.set_item("chains", header.chains)?;
    dict.set_item("density", DensityRecord::to_python(&header.density, py)?)?;
    Ok(dict)
}

/// Continues the run saved in the checkpoint at `path`.
#[pyfunction]
// one argument per keyword of the Python function it implements
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (path, kind, function, gradient, cores, progress, checkpoint_every))]
fn resume<'py>(
    py: Python<'py>,
    path: PathBuf,
    kind: &str,
    function: &Bound<'py, PyAny>,
    gradient: Option<Py<PyAny>>,
    cores: usize,
    progress: Option<Bound<'py, PyAny>>,
    checkpoint_every: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let file = load_checkpoint(&path)?;
    let parsed = settings(&file.header.settings)?;
    let dim = file.header.dim;
    let density = density(py, kind, function, gradient, dim)?;
    let job = Resume {
        file,
        density: &density,
        control: Control {
            py,
            cores,
            progress,
            checkpoint: Some(path),
            checkpoint_every: driver::checkpoint_interval(checkpoint_every)?,
        },
    };
    let outcome = parsed.dispatch(dim, job).map_err(PyValueError::new_err)??;
    outcome_to_python(py, outcome)
}

/// Writes to `out` the chains of the checkpoints `sources` (one run's
/// chains, split over several files), in order, or only those at `keep`.
#[pyfunction]
#[pyo3(signature = (sources, out, keep=None))]
fn regroup_checkpoints(
    sources: Vec<PathBuf>,
    out: PathBuf,
    keep: Option<Vec<usize>>,
) -> PyResult<()> {
    let files = sources
        .iter()
        .map(|p| load_checkpoint(p))
        .collect::<PyResult<Vec<_>>>()?;
    let Some(first) = files.first() else {
        return Err(PyValueError::new_err("no checkpoint to regroup"));
    };
    let parsed = settings(&first.header.settings)?;
    let dim = first.header.dim;
    let job = Regroup {
        sources: files,
        keep,
    };
    let file = parsed.dispatch(dim, job).map_err(PyValueError::new_err)??;
    save_checkpoint(&out, &file)
}

/// Lengthens the run checkpointed at `path` by `draws` kept draws per
/// chain, in place (see [`Extend`]); the chains' evaluation limit is lifted
/// unless `keep_evaluation_limit`.
#[pyfunction]
#[pyo3(signature = (path, draws, keep_evaluation_limit=false))]
fn extend_checkpoint(path: PathBuf, draws: u64, keep_evaluation_limit: bool) -> PyResult<()> {
    let file = load_checkpoint(&path)?;
    let parsed = settings(&file.header.settings)?;
    let dim = file.header.dim;
    let file = parsed
        .dispatch(
            dim,
            Extend {
                file,
                draws,
                keep_evaluation_limit,
            },
        )
        .map_err(PyValueError::new_err)??;
    save_checkpoint(&path, &file)
}

/// The Python sampler classes' defaults as JSON: a list of settings
/// objects, one per `kind` (see `SamplerSettings::defaults`).
#[pyfunction]
fn sampler_defaults() -> PyResult<String> {
    serde_json::to_string(&settings::SamplerSettings::defaults())
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The extension module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sample, m)?)?;
    // whether the extension was built with debug assertions (the dev
    // profile); the benchmarks report it
    m.add("debug_assertions", cfg!(debug_assertions))?;
    m.add_function(wrap_pyfunction!(resume, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint_header, m)?)?;
    m.add_function(wrap_pyfunction!(regroup_checkpoints, m)?)?;
    m.add_function(wrap_pyfunction!(extend_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(sampler_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(density::log_density_value, m)?)?;
    m.add_function(wrap_pyfunction!(density::log_density_values, m)?)?;
    m.add_function(wrap_pyfunction!(ensemble::sample_ensemble, m)?)?;
    m.add_function(wrap_pyfunction!(ensemble::resume_ensemble, m)?)?;
    m.add_function(wrap_pyfunction!(ensemble::ensemble_checkpoint_header, m)?)?;
    m.add_class::<BuiltinTarget>()?;
    diagnostics::register(m)?;
    simulators::register(m)?;
    Ok(())
}
