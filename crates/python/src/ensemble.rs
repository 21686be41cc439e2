//! The affine-invariant ensemble sampler (stretch move) from Python.

use kameleon_samplers::{EnsembleConfig, chain_rng, initial_ball, run_ensemble_with};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

/// The standard deviation of the ball around a single starting point.
const BALL_SCALE: f64 = 1e-3;

/// How often the progress callback is called and signals are checked.
const POLL: Duration = Duration::from_millis(100);

/// Runs `walkers` walkers for `tune` discarded and `draws` kept sweeps and
/// returns `{"samples": (draws, walkers, d), "lp": (draws, walkers),
/// "accepted": (draws, walkers), "accepted_total", "evaluations",
/// "rejected_non_finite", "sweeps_done", "interrupted"}`.
///
/// `x0` is either one row (the walkers start at `x0 + 1e-3·ξ`, ξ ~ N(0, I)
/// drawn from stream 1 of `seed`; the ensemble uses stream 0) or `walkers`
/// rows. `progress` is called with `[sweeps done]` about every 0.1 s;
/// Ctrl-C stops the run and returns the sweeps so far with
/// `interrupted = True`; an exception raised by the log density stops it and
/// is re-raised.
#[pyfunction]
// one argument per keyword of the Python function it implements
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (kind, function, x0, walkers, a, seed, draws, tune, progress))]
pub fn sample_ensemble<'py>(
    py: Python<'py>,
    kind: &str,
    function: &Bound<'py, PyAny>,
    x0: PyReadonlyArray2<'py, f64>,
    walkers: usize,
    a: f64,
    seed: u64,
    draws: u64,
    tune: u64,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let x0 = x0.as_array();
    let (rows, dim) = (x0.nrows(), x0.ncols());
    if dim == 0 {
        return Err(PyValueError::new_err("x0 must have dimension at least 1"));
    }
    let config = EnsembleConfig::default()
        .with_walkers(walkers)
        .and_then(|c| c.with_stretch_scale(a))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let points: Vec<f64> = x0.iter().copied().collect();
    let initial = if rows == 1 {
        initial_ball(&points, walkers, BALL_SCALE, &mut chain_rng(seed, 1))
            .map_err(|e| PyValueError::new_err(e.to_string()))?
    } else if rows == walkers {
        points
    } else {
        return Err(PyValueError::new_err(format!(
            "x0 has {rows} rows: give one point or one row per walker ({walkers})"
        )));
    };
    let density = crate::density(py, kind, function, None, dim)?;
    let mut interrupted = false;
    let mut callback_error = None;
    let mut last_poll = Instant::now();
    let density_ref = &density;
    // a `Bound` cannot cross `detach`: hold the callback by reference count
    let callback = progress.as_ref().map(|p| p.clone().unbind());
    let outcome = py.detach(|| {
        run_ensemble_with(
            density_ref,
            &config,
            &initial,
            draws,
            tune,
            seed,
            &mut |done| {
                if density_ref.has_failed() {
                    return ControlFlow::Break(());
                }
                if last_poll.elapsed() < POLL {
                    return ControlFlow::Continue(());
                }
                last_poll = Instant::now();
                Python::attach(|py| {
                    if let Some(callback) = &callback
                        && let Err(err) = callback.bind(py).call1((vec![done],))
                    {
                        callback_error = Some(err);
                        return ControlFlow::Break(());
                    }
                    if py.check_signals().is_err() {
                        interrupted = true;
                        return ControlFlow::Break(());
                    }
                    ControlFlow::Continue(())
                })
            },
        )
    });
    if let Some(err) = density.take_error().or(callback_error) {
        return Err(err);
    }
    let run = outcome.map_err(|e| PyValueError::new_err(e.to_string()))?;
    if let Some(callback) = &progress {
        callback.call1((vec![run.sweeps_done],))?;
    }
    let kept = run.kept_sweeps();
    let out = PyDict::new(py);
    out.set_item(
        "samples",
        PyArray1::from_vec(py, run.samples).reshape([kept, walkers, dim])?,
    )?;
    out.set_item(
        "lp",
        PyArray1::from_vec(py, run.log_densities).reshape([kept, walkers])?,
    )?;
    out.set_item(
        "accepted",
        PyArray1::from_vec(py, run.accepted).reshape([kept, walkers])?,
    )?;
    out.set_item("accepted_total", run.accepted_total)?;
    out.set_item("evaluations", run.evaluations)?;
    out.set_item("rejected_non_finite", run.rejected_non_finite)?;
    out.set_item("sweeps_done", run.sweeps_done)?;
    out.set_item("interrupted", interrupted)?;
    Ok(out)
}
