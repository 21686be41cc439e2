//! The affine-invariant ensemble sampler (stretch move) from Python.

use crate::density::Density;
use kameleon_samplers::{
    Ensemble, EnsembleConfig, Target, chain_rng, initial_ball, run_ensemble_with,
};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rand::Rng;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Mutex;
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
    let prefetch = Prefetch::new(&density, config, initial.clone(), seed);
    let target: &dyn Target = if density.is_batched() {
        &prefetch
    } else {
        &density
    };
    let mut interrupted = false;
    let mut callback_error = None;
    let mut last_poll = Instant::now();
    let density_ref = &density;
    // a `Bound` cannot cross `detach`: hold the callback by reference count
    let callback = progress.as_ref().map(|p| p.clone().unbind());
    let outcome = py.detach(|| {
        run_ensemble_with(target, &config, &initial, draws, tune, seed, &mut |done| {
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
        })
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

/// Points and their log densities, by the points' bits.
type Known = HashMap<Vec<u64>, f64>;

fn key(x: &[f64]) -> Vec<u64> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// A target that serves the log densities of `known` points and, if
/// `missing` is given, records each other point asked for (answering NaN).
struct Replay<'a> {
    dim: usize,
    known: &'a Known,
    missing: Option<Mutex<Vec<Vec<f64>>>>,
}

impl Target for Replay<'_> {
    fn dim(&self) -> usize {
        self.dim
    }

    fn log_density(&self, x: &[f64], _rng: &mut dyn Rng) -> f64 {
        if let Some(&value) = self.known.get(&key(x)) {
            return value;
        }
        if let Some(missing) = &self.missing {
            missing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(x.to_vec());
        }
        f64::NAN
    }
}

/// The walkers' log densities from a vectorised density, one call per half
/// sweep (emcee's convention), with the chain of the per-point density.
///
/// The ensemble asks for its points one at a time, and the points of a half
/// sweep depend on the values of the previous half only. So this target
/// keeps a shadow of the ensemble (built and swept exactly as the real one,
/// so in the same state at the start of each sweep), and at the first
/// request of a sweep replays the sweep on copies of the shadow: points not
/// yet known are recorded (answered NaN), the first half sweep's worth of
/// them evaluated in one call, until a replay asks for no unknown point.
/// The real sweep then asks for exactly those points. Points are known by
/// their bits, so a point recorded by a replay that went astray (after a
/// proposal with a non-finite coordinate shifts the halves) costs an
/// evaluation but changes no value.
struct Prefetch<'a> {
    density: &'a Density,
    state: Mutex<Shadow>,
}

struct Shadow {
    config: EnsembleConfig,
    initial: Vec<f64>,
    seed: u64,
    /// The ensemble as the real one is at the end of its last sweep (None
    /// before the start).
    ensemble: Option<Ensemble>,
    known: Known,
    /// Requests of the current sweep (or start) still to come.
    pending: u64,
}

impl<'a> Prefetch<'a> {
    fn new(density: &'a Density, config: EnsembleConfig, initial: Vec<f64>, seed: u64) -> Self {
        Self {
            density,
            state: Mutex::new(Shadow {
                config,
                initial,
                seed,
                ensemble: None,
                known: Known::new(),
                pending: 0,
            }),
        }
    }

    /// Evaluates `points` in one call and adds them to `known`.
    fn evaluate(&self, known: &mut Known, points: &[Vec<f64>]) {
        let flat: Vec<f64> = points.concat();
        let values = self
            .density
            .evaluate_batch(&flat, points.len())
            .unwrap_or_else(|| vec![f64::NAN; points.len()]);
        for (x, value) in points.iter().zip(values) {
            known.insert(key(x), value);
        }
    }

    /// Prepares the next block of requests: the walkers' starts, or the
    /// next sweep's points (see the type's docs).
    fn prefetch(&self, shadow: &mut Shadow) {
        let dim = self.density.dim();
        shadow.known.clear();
        let Some(ensemble) = &mut shadow.ensemble else {
            let starts: Vec<Vec<f64>> = shadow.initial.chunks(dim).map(<[f64]>::to_vec).collect();
            self.evaluate(&mut shadow.known, &starts);
            let replay = Replay {
                dim,
                known: &shadow.known,
                missing: None,
            };
            shadow.pending = starts.len() as u64;
            // an invalid start fails the real ensemble too, which then asks
            // for nothing more
            shadow.ensemble =
                Ensemble::new(&replay, &shadow.config, &shadow.initial, shadow.seed).ok();
            return;
        };
        let half = ensemble.walkers().div_ceil(2);
        loop {
            let replay = Replay {
                dim,
                known: &shadow.known,
                missing: Some(Mutex::new(Vec::new())),
            };
            let mut copy = ensemble.clone();
            // the dimensions agree: a sweep cannot fail
            let _ = copy.sweep(&replay);
            let missing = replay
                .missing
                .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
                .unwrap_or_default();
            if missing.is_empty() {
                break;
            }
            self.evaluate(&mut shadow.known, &missing[..half.min(missing.len())]);
        }
        let before = ensemble.evaluations();
        let replay = Replay {
            dim,
            known: &shadow.known,
            missing: None,
        };
        let _ = ensemble.sweep(&replay);
        shadow.pending = ensemble.evaluations() - before;
    }
}

impl Target for Prefetch<'_> {
    fn dim(&self) -> usize {
        self.density.dim()
    }

    fn log_density(&self, x: &[f64], rng: &mut dyn Rng) -> f64 {
        let mut shadow = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if shadow.pending == 0 {
            self.prefetch(&mut shadow);
        }
        shadow.pending = shadow.pending.saturating_sub(1);
        match shadow.known.get(&key(x)) {
            Some(&value) => value,
            // not expected (the replay asked for the same points); evaluated
            // alone, the value is the same
            None => self.density.log_density(x, rng),
        }
    }
}
