//! The affine-invariant ensemble sampler (stretch move) from Python.

use crate::density::Density;
use crate::driver::{DensityRecord, load_kind};
use kameleon_samplers::{
    Ensemble, EnsembleConfig, Target, chain_rng, initial_ball, run_ensemble_with,
};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The standard deviation of the ball around a single starting point.
const BALL_SCALE: f64 = 1e-3;

/// How often the progress callback is called and signals are checked.
const POLL: Duration = Duration::from_millis(100);

/// A run of the ensemble as its checkpoint records it: what it started
/// from and the log densities it has computed, in the order asked for.
///
/// The ensemble's moves depend on its seed, its start and the values of
/// the log density only, so replaying the run with the logged values (no
/// evaluation) brings it back to the state it had, bit for bit, and it
/// continues from there.
#[derive(Serialize, Deserialize)]
struct EnsembleRun {
    dim: usize,
    walkers: usize,
    a: f64,
    seed: u64,
    draws: u64,
    tune: u64,
    /// The walkers' starting points, W × d row-major.
    initial: Vec<f64>,
    /// Every log density evaluated, in order.
    values: Vec<f64>,
}

/// An ensemble checkpoint: the run, then what the run's log density was,
/// for `resume_ensemble` to check the one it is given (`None`: not
/// recorded).
#[derive(Serialize, Deserialize)]
struct EnsembleCheckpoint {
    run: EnsembleRun,
    density: Option<DensityRecord>,
}

/// The kind recorded in an ensemble checkpoint's header.
const ENSEMBLE_CHECKPOINT_KIND: &str = "kameleon-python ensemble run v2";

/// Runs `walkers` walkers for `tune` discarded and `draws` kept sweeps and
/// returns `{"samples": (draws, walkers, d), "lp": (draws, walkers),
/// "accepted": (draws, walkers), "accepted_total", "evaluations",
/// "rejected_non_finite", "sweeps_done", "interrupted"}`.
///
/// `x0` is either one row (the walkers start at `x0 + 1e-3·ξ`, ξ ~ N(0, I)
/// drawn from stream 1 of `seed`; the ensemble uses stream 0) or `walkers`
/// rows. `progress` is called with `[sweeps done]` about every 0.1 s (a
/// truthy return value stops the run as Ctrl-C does); Ctrl-C stops the run and returns the sweeps so far with
/// `interrupted = True`; an exception raised by the log density stops it and
/// is re-raised. With `checkpoint`, the run is saved there every
/// `checkpoint_every` seconds and at the end (see [`resume_ensemble`]),
/// with `density_record`, what it records of the log density (see
/// [`DensityRecord::from_python`]).
#[pyfunction]
// one argument per keyword of the Python function it implements
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (kind, function, x0, walkers, a, seed, draws, tune, progress, checkpoint=None, checkpoint_every=60.0, density_record=None))]
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
    checkpoint: Option<PathBuf>,
    checkpoint_every: f64,
    density_record: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let x0 = x0.as_array();
    let (rows, dim) = (x0.nrows(), x0.ncols());
    if dim == 0 {
        return Err(PyValueError::new_err("x0 must have dimension at least 1"));
    }
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
    let file = EnsembleCheckpoint {
        run: EnsembleRun {
            dim,
            walkers,
            a,
            seed,
            draws,
            tune,
            initial,
            values: Vec::new(),
        },
        density: DensityRecord::from_python(density_record.as_ref())?,
    };
    let density = crate::density(py, kind, function, None, dim)?;
    drive(py, file, &density, progress, checkpoint, checkpoint_every)
}

/// Continues the ensemble run checkpointed at `path` (see
/// [`sample_ensemble`]): returns what `sample_ensemble` returns.
#[pyfunction]
#[pyo3(signature = (path, kind, function, progress, checkpoint_every))]
pub fn resume_ensemble<'py>(
    py: Python<'py>,
    path: PathBuf,
    kind: &str,
    function: &Bound<'py, PyAny>,
    progress: Option<Bound<'py, PyAny>>,
    checkpoint_every: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let file = load(&path)?;
    let density = crate::density(py, kind, function, None, file.run.dim)?;
    drive(py, file, &density, progress, Some(path), checkpoint_every)
}

/// The settings of the ensemble run checkpointed at `path`: `dim`,
/// `walkers`, `a`, `seed`, `draws`, `tune`, `evaluations` (how many log
/// densities it holds), and walker 0's starting point with the log density
/// recorded there (`first_point`, `first_log_density`, None before the
/// first evaluation), and its record of the log density (`density`, as
/// [`DensityRecord::to_python`] gives it).
#[pyfunction]
pub fn ensemble_checkpoint_header<'py>(
    py: Python<'py>,
    path: PathBuf,
) -> PyResult<Bound<'py, PyDict>> {
    let EnsembleCheckpoint { run, density } = load(&path)?;
    let dict = PyDict::new(py);
    dict.set_item("dim", run.dim)?;
    dict.set_item("walkers", run.walkers)?;
    dict.set_item("a", run.a)?;
    dict.set_item("seed", run.seed)?;
    dict.set_item("draws", run.draws)?;
    dict.set_item("tune", run.tune)?;
    dict.set_item("evaluations", run.values.len())?;
    dict.set_item("first_point", &run.initial[..run.dim])?;
    dict.set_item("first_log_density", run.values.first())?;
    dict.set_item("density", DensityRecord::to_python(&density, py)?)?;
    Ok(dict)
}

/// Reads an ensemble checkpoint; a damaged or foreign file is a
/// `ValueError`, an unreadable one an `OSError`, each naming the file.
fn load(path: &std::path::Path) -> PyResult<EnsembleCheckpoint> {
    load_kind(path, ENSEMBLE_CHECKPOINT_KIND)
}

/// Runs (or, replaying the run's logged values, continues) the ensemble
/// run of `file`.
fn drive<'py>(
    py: Python<'py>,
    file: EnsembleCheckpoint,
    density: &Density,
    progress: Option<Bound<'py, PyAny>>,
    checkpoint: Option<PathBuf>,
    checkpoint_every: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let EnsembleCheckpoint {
        run,
        density: record,
    } = file;
    let (dim, walkers) = (run.dim, run.walkers);
    let config = EnsembleConfig::default()
        .with_walkers(walkers)
        .and_then(|c| c.with_stretch_scale(run.a))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let prefetch = Prefetch::new(density, config, run.initial.clone(), run.seed, &run.values);
    let inner: &dyn Target = if density.is_batched() {
        &prefetch
    } else {
        density
    };
    let logged = Logged {
        inner: Some(inner),
        dim,
        // a pseudo-marginal density draws one number from the stream per
        // call (see `Density`): a replayed call draws it too
        noisy: !density.is_exact(),
        log: Mutex::new((run.values.clone(), 0)),
    };
    let save = |logged: &Logged<'_>| -> PyResult<()> {
        let Some(path) = &checkpoint else {
            return Ok(());
        };
        let values = logged
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clone();
        let file = EnsembleCheckpoint {
            run: EnsembleRun {
                values,
                initial: run.initial.clone(),
                ..run
            },
            density: record.clone(),
        };
        kameleon_samplers::checkpoint::save(path, ENSEMBLE_CHECKPOINT_KIND, &file)
            .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))
    };
    let every = crate::driver::checkpoint_interval(checkpoint_every)?;
    let mut interrupted = false;
    let mut callback_error = None;
    let mut save_error = None;
    let mut last_poll = Instant::now();
    let mut last_save = Instant::now();
    // a `Bound` cannot cross `detach`: hold the callback by reference count
    let callback = progress.as_ref().map(|p| p.clone().unbind());
    let outcome = py.detach(|| {
        run_ensemble_with(
            &logged,
            &config,
            &run.initial,
            run.draws,
            run.tune,
            run.seed,
            &mut |done| {
                if density.has_failed() {
                    return ControlFlow::Break(());
                }
                if checkpoint.is_some() && every.is_some_and(|e| last_save.elapsed() >= e) {
                    last_save = Instant::now();
                    if let Err(err) = save(&logged) {
                        save_error = Some(err);
                        return ControlFlow::Break(());
                    }
                }
                if last_poll.elapsed() < POLL {
                    return ControlFlow::Continue(());
                }
                last_poll = Instant::now();
                Python::attach(|py| {
                    if let Some(callback) = &callback {
                        match callback
                            .bind(py)
                            .call1((vec![done],))
                            .and_then(|v| v.is_truthy())
                        {
                            Ok(false) => {}
                            Ok(true) => {
                                interrupted = true;
                                return ControlFlow::Break(());
                            }
                            Err(err) => {
                                callback_error = Some(err);
                                return ControlFlow::Break(());
                            }
                        }
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
    if let Some(err) = density.take_error().or(callback_error).or(save_error) {
        return Err(err);
    }
    let result = outcome.map_err(|e| PyValueError::new_err(e.to_string()))?;
    save(&logged)?;
    if let Some(callback) = &progress {
        callback.call1((vec![result.sweeps_done],))?;
    }
    let kept = result.kept_sweeps();
    let out = PyDict::new(py);
    out.set_item(
        "samples",
        PyArray1::from_vec(py, result.samples).reshape([kept, walkers, dim])?,
    )?;
    out.set_item(
        "lp",
        PyArray1::from_vec(py, result.log_densities).reshape([kept, walkers])?,
    )?;
    out.set_item(
        "accepted",
        PyArray1::from_vec(py, result.accepted).reshape([kept, walkers])?,
    )?;
    out.set_item("accepted_total", result.accepted_total)?;
    out.set_item("evaluations", result.evaluations)?;
    out.set_item("rejected_non_finite", result.rejected_non_finite)?;
    out.set_item("sweeps_done", result.sweeps_done)?;
    out.set_item("interrupted", interrupted)?;
    Ok(out)
}

/// A target that answers from a log of values first, in order, then (with
/// an `inner` target) evaluates and logs each value.
struct Logged<'a> {
    inner: Option<&'a dyn Target>,
    dim: usize,
    /// A replayed call draws one number from the stream, as the noisy
    /// density it stands for does.
    noisy: bool,
    /// The values so far, and how many of them were answered.
    log: Mutex<(Vec<f64>, usize)>,
}

impl Target for Logged<'_> {
    fn dim(&self) -> usize {
        self.dim
    }

    fn log_density(&self, x: &[f64], rng: &mut dyn Rng) -> f64 {
        {
            let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
            let (values, next) = &mut *log;
            if let Some(&value) = values.get(*next) {
                *next += 1;
                if self.noisy {
                    rng.next_u64();
                }
                return value;
            }
        }
        let Some(inner) = self.inner else {
            return f64::NAN;
        };
        let value = inner.log_density(x, rng);
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.0.push(value);
        log.1 += 1;
        value
    }
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
    /// The values of a resumed run (replayed to bring the shadow to where
    /// the real ensemble is when it first asks for a new value).
    replay: Vec<f64>,
    /// The ensemble as the real one is at the end of its last sweep (None
    /// before the start).
    ensemble: Option<Ensemble>,
    known: Known,
    /// Requests of the current sweep (or start) still to come.
    pending: u64,
}

impl<'a> Prefetch<'a> {
    fn new(
        density: &'a Density,
        config: EnsembleConfig,
        initial: Vec<f64>,
        seed: u64,
        replay: &[f64],
    ) -> Self {
        Self {
            density,
            state: Mutex::new(Shadow {
                config,
                initial,
                seed,
                replay: replay.to_vec(),
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
        if shadow.ensemble.is_none() && !shadow.replay.is_empty() {
            // resumed: the shadow replays the logged run up to its end
            let logged = Logged {
                inner: None,
                dim,
                noisy: false,
                log: Mutex::new((std::mem::take(&mut shadow.replay), 0)),
            };
            let mut ensemble =
                Ensemble::new(&logged, &shadow.config, &shadow.initial, shadow.seed).ok();
            let replayed = || {
                let log = logged.log.lock().unwrap_or_else(|e| e.into_inner());
                log.1 >= log.0.len()
            };
            while let Some(e) = &mut ensemble {
                if replayed() {
                    break;
                }
                let _ = e.sweep(&logged);
            }
            shadow.ensemble = ensemble;
        }
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
