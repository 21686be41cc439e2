//! Runs chains on a thread pool while the calling (Python) thread polls
//! progress, signals and checkpoints.

use crate::density::Density;
use crate::settings::{BuildResult, Job, Sampler};
use kameleon_samplers::{
    Chain, MetropolisHastings, Run, RunConfig, SamplerError, advance_lockstep,
};
use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use rayon::prelude::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The settings of a multi-chain run, stored in its checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunHeader {
    /// The sampler settings (the Python classes' JSON).
    pub settings: String,
    /// The dimension.
    pub dim: usize,
    /// The base seed.
    pub seed: u64,
    /// Kept draws per chain.
    pub draws: u64,
    /// Tuning (burn-in) steps per chain.
    pub tune: u64,
    /// Thinning.
    pub thin: u64,
    /// The number of chains.
    pub chains: usize,
    /// What the run's log density was, for `resume` to check the one it is
    /// given; `None` for a run that did not record it (one not meant to be
    /// resumed by a user).
    pub density: Option<DensityRecord>,
}

/// What a checkpoint records of its run's log density.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum DensityRecord {
    /// An exact log density: the chains' states hold its value at their
    /// current points.
    Exact,
    /// A noisy one (an estimator), with its estimate `value` at `point`
    /// drawn, when the run started, with a generator of a fixed seed (see
    /// the Python `resume`), so that the same estimator gives it again.
    Noisy {
        /// The point.
        point: Vec<f64>,
        /// The estimate there.
        value: f64,
    },
}

impl DensityRecord {
    /// The record as Python passes it: None, `"exact"`, or `(point, value)`
    /// for a noisy log density.
    pub fn from_python(value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Self>> {
        match value {
            None => Ok(None),
            Some(v) if v.extract::<String>().is_ok_and(|s| s == "exact") => Ok(Some(Self::Exact)),
            Some(v) => {
                let (point, value) = v.extract::<(Vec<f64>, f64)>().map_err(|_| {
                    PyValueError::new_err(format!(
                        "a density record is None, \"exact\" or (point, value), got {v}"
                    ))
                })?;
                Ok(Some(Self::Noisy { point, value }))
            }
        }
    }

    /// `record` as Python takes it (see [`DensityRecord::from_python`]).
    pub fn to_python<'py>(record: &Option<Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match record {
            None => py.None().into_bound(py),
            Some(Self::Exact) => "exact".into_pyobject(py)?.into_any(),
            Some(Self::Noisy { point, value }) => {
                (point.clone(), *value).into_pyobject(py)?.into_any()
            }
        })
    }
}

impl RunHeader {
    /// The run configuration of every chain: `tune` adapting steps, then
    /// `draws × thin` steps keeping every `thin`-th (a `ValueError` if that
    /// overflows).
    pub fn config(&self) -> PyResult<RunConfig> {
        RunConfig::for_draws(self.tune, self.draws, self.thin)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }
}

/// The kind recorded in the checkpoint header: a file of another kind (e.g.
/// a single Rust `Run`) is refused with a message saying what it holds.
const CHECKPOINT_KIND: &str = "kameleon-python multi-chain run v2";

/// A checkpoint: the run's header and its chains' [`Run`] states (postcard
/// bytes of a `Vec<Run<P>>` for the proposal type the settings name).
#[derive(Serialize, Deserialize)]
pub struct CheckpointFile {
    /// The run's settings.
    pub header: RunHeader,
    /// The encoded runs.
    pub runs: Vec<u8>,
}

/// Writes `value` to `path` with [`kameleon_samplers::checkpoint::save`]
/// (checksummed header, unique temporary file, fsync, atomic rename).
pub fn save_checkpoint(path: &Path, value: &CheckpointFile) -> PyResult<()> {
    kameleon_samplers::checkpoint::save(path, CHECKPOINT_KIND, value)
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))
}

/// Reads a checkpoint written by [`save_checkpoint`]; a damaged, truncated
/// or foreign file is a `ValueError`, an unreadable one an `OSError`, each
/// naming the file and the problem.
pub fn load_checkpoint(path: &Path) -> PyResult<CheckpointFile> {
    load_kind(path, CHECKPOINT_KIND)
}

/// Reads a checkpoint of `kind`; a damaged, truncated or foreign file is a
/// `ValueError`, an unreadable one an `OSError`, each naming the file and
/// the problem.
pub fn load_kind<T: DeserializeOwned>(path: &Path, kind: &str) -> PyResult<T> {
    use kameleon_samplers::checkpoint::load;
    use kameleon_samplers::{CheckpointProblem, SamplerError};
    load::<T>(path, kind).map_err(|e| match e {
        // a file that cannot be read (missing, permissions) is an OSError
        SamplerError::Checkpoint {
            problem: CheckpointProblem::Io(_),
            ..
        } => pyo3::exceptions::PyOSError::new_err(e.to_string()),
        other => PyValueError::new_err(other.to_string()),
    })
}

/// How to run: threads, progress, checkpoints.
pub struct Control<'py> {
    /// The GIL token of the calling thread.
    pub py: Python<'py>,
    /// Worker threads.
    pub cores: usize,
    /// Called with the list of steps done per chain every ~0.1 s; a truthy
    /// return value stops the run as Ctrl-C does (partial chains, marked
    /// interrupted).
    pub progress: Option<Bound<'py, PyAny>>,
    /// Where to checkpoint, if anywhere.
    pub checkpoint: Option<PathBuf>,
    /// Time between checkpoints (`None`: only at the end and on
    /// interruption), from [`checkpoint_interval`].
    pub checkpoint_every: Option<Duration>,
}

/// The interval between checkpoints for `seconds` (Python's
/// `checkpoint_every`): a positive number; infinite, or too long to count
/// (beyond about 10¹⁹ s), saves only at the end and on interruption.
/// NaN, zero and negative values are a `ValueError`.
pub fn checkpoint_interval(seconds: f64) -> PyResult<Option<Duration>> {
    if seconds.is_nan() || seconds <= 0.0 {
        return Err(PyValueError::new_err(format!(
            "`checkpoint_every` must be a positive number of seconds (math.inf: only at the \
             end and on interruption), got {seconds}"
        )));
    }
    Ok(Duration::try_from_secs_f64(seconds).ok())
}

/// The chains of a run, and whether it was interrupted before the end.
pub struct Outcome {
    /// The chains (possibly partial).
    pub chains: Vec<Chain>,
    /// For each chain, whether its evaluation limit stopped it before its
    /// last step.
    pub out_of_evaluations: Vec<bool>,
    /// Whether Ctrl-C stopped the run.
    pub interrupted: bool,
}

/// Starts new chains at the given points.
pub struct Start<'a, 'py> {
    /// The run.
    pub header: RunHeader,
    /// The log density.
    pub density: &'a Density,
    /// One starting point per chain.
    pub x0: Vec<Vec<f64>>,
    /// The index of each chain (its stream of the seed): a subset of a
    /// larger run's chains runs exactly as in that run.
    pub chain_ids: Vec<u64>,
    /// Each chain's log-density evaluation limit, start included
    /// ([`kameleon_samplers::RunConfig::max_evaluations`]): a chain stops
    /// before a step that could take it past the limit. Kept in the
    /// checkpoint, so a resumed run stops where this one would.
    pub evaluation_limit: Option<u64>,
    /// How to run.
    pub control: Control<'py>,
}

impl Job for Start<'_, '_> {
    type Output = PyResult<Outcome>;

    fn run<P: Sampler>(
        self,
        build: &(dyn Fn(u64, u64) -> BuildResult<P> + Sync),
    ) -> PyResult<Outcome> {
        let mut config = self.header.config()?;
        if let Some(limit) = self.evaluation_limit {
            config = config.max_evaluations(limit);
        }
        let mut runs = Vec::with_capacity(self.x0.len());
        // The chains start one after the other, so a limit too small for a
        // start stops the run before the later chains evaluate anything.
        for (x0, &k) in self.x0.iter().zip(&self.chain_ids) {
            let proposal = build(self.header.seed, k).map_err(PyValueError::new_err)?;
            let run = Run::new(self.density, proposal, x0, config, self.header.seed, k);
            if let Some(err) = self.density.take_error() {
                return Err(err);
            }
            runs.push(run.map_err(|e| match e {
                SamplerError::EvaluationLimit { .. } => PyValueError::new_err(format!(
                    "chain {k}: {e}. `max_evaluations` gives each chain max_evaluations // \
                     chains evaluations: raise it, or run fewer chains or tuning steps"
                )),
                other => PyValueError::new_err(format!("chain {k}: {other}")),
            })?);
        }
        drive(&self.header, self.density, runs, &self.control)
    }
}

/// Continues the chains of a checkpoint.
pub struct Resume<'a, 'py> {
    /// The checkpoint.
    pub file: CheckpointFile,
    /// The log density.
    pub density: &'a Density,
    /// How to run.
    pub control: Control<'py>,
}

impl Job for Resume<'_, '_> {
    type Output = PyResult<Outcome>;

    fn run<P: Sampler>(
        self,
        _build: &(dyn Fn(u64, u64) -> BuildResult<P> + Sync),
    ) -> PyResult<Outcome> {
        let runs: Vec<Run<P>> = postcard::from_bytes(&self.file.runs).map_err(|e| {
            PyValueError::new_err(format!(
                "the checkpoint's chains do not match its sampler settings: {e}"
            ))
        })?;
        drive(&self.file.header, self.density, runs, &self.control)
    }
}

/// Sets a flag when dropped (also when a worker panics).
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// How often the calling thread wakes to draw progress and check signals.
const POLL: Duration = Duration::from_millis(100);

/// What the calling thread saw while [`poll_while`] ran its work.
pub struct Polled {
    /// Whether the run was asked to stop: the progress callback returned a
    /// truthy value, or Ctrl-C was pressed.
    pub interrupted: bool,
    /// The exception the progress callback raised (it is not called again).
    pub callback_error: Option<PyErr>,
}

/// Runs `work` on a scoped thread while the calling thread, which holds the
/// GIL only between sleeps, wakes every [`POLL`] to call `progress` (if
/// any) with the counts in `steps` and to check for Ctrl-C and `failed()`;
/// a truthy return, an exception, Ctrl-C (also when it arrives as a
/// `KeyboardInterrupt` raised inside `progress`) or a failure sets `cancel`, which
/// `work` is expected to watch. Once `work` is done, `progress` is called a
/// last time with the final counts (unless it raised; its return value is
/// then ignored). Returns `work`'s result; a panic in `work` is resumed
/// here.
pub fn poll_while<R: Send>(
    py: Python<'_>,
    work: impl FnOnce() -> R + Send,
    steps: &[AtomicU64],
    progress: Option<&Bound<'_, PyAny>>,
    cancel: &AtomicBool,
    failed: impl Fn() -> bool,
) -> (R, Polled) {
    let mut polled = Polled {
        interrupted: false,
        callback_error: None,
    };
    // the callback's answer, or None once it has raised (or if there is none)
    let report = |polled: &mut Polled| -> Option<bool> {
        let callback = progress.filter(|_| polled.callback_error.is_none())?;
        let counts: Vec<u64> = steps.iter().map(|s| s.load(Ordering::Relaxed)).collect();
        match callback.call1((counts,)).and_then(|v| v.is_truthy()) {
            Ok(stop) => Some(stop),
            // Ctrl-C that Python delivered inside the callback: the same
            // stop as one seen by `check_signals`, with the draws so far
            Err(err) if err.is_instance_of::<PyKeyboardInterrupt>(py) => {
                polled.interrupted = true;
                None
            }
            Err(err) => {
                polled.callback_error = Some(err);
                None
            }
        }
    };
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        let done = &done;
        let worker = scope.spawn(move || {
            let _done = SetOnDrop(done);
            work()
        });
        // This thread holds the GIL only between sleeps, and leaves the
        // loop only once the worker is done, so the join never waits while
        // holding it.
        while !done.load(Ordering::Acquire) {
            py.detach(|| {
                let until = Instant::now() + POLL;
                while !done.load(Ordering::Acquire) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(2));
                }
            });
            let stop = report(&mut polled) == Some(true);
            let errored = polled.callback_error.is_some();
            if stop || py.check_signals().is_err() {
                polled.interrupted = true;
            }
            if polled.interrupted || errored || failed() {
                cancel.store(true, Ordering::Relaxed);
            }
        }
        worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    report(&mut polled);
    (result, polled)
}

/// Runs every chain to its end (or until Ctrl-C or a Python error), writing
/// checkpoints every `checkpoint_every` seconds and at the end.
fn drive<P: Sampler>(
    header: &RunHeader,
    density: &Density,
    mut runs: Vec<Run<P>>,
    control: &Control<'_>,
) -> PyResult<Outcome> {
    let py = control.py;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(control.cores.max(1))
        .build()
        .map_err(|e| PyValueError::new_err(format!("cannot start the thread pool: {e}")))?;
    let steps: Vec<AtomicU64> = runs
        .iter()
        .map(|r| AtomicU64::new(r.steps_done()))
        .collect();
    let cancel = AtomicBool::new(false);
    // With one worker there is no other chain to overlap with: it keeps the
    // GIL for a whole chunk instead of taking it at every evaluation.
    let hold_gil = control.cores.max(1).min(runs.len()) == 1;
    // the first sampler error of any chain (e.g. a resumed run whose target
    // has another dimension)
    let failure = std::sync::Mutex::new(None::<String>);
    let segment = control.checkpoint.as_ref().and(control.checkpoint_every);
    let interrupted = loop {
        // an interval too long to add to now is no deadline at all
        let deadline = segment.and_then(|s| Instant::now().checked_add(s));
        let runs_ref = &mut runs;
        let (steps, cancel, pool, failure) = (&steps, &cancel, &pool, &failure);
        let work = move || {
            // more chains than threads: they take turns, so that a run
            // stopped early (a wall-time budget, Ctrl-C) has advanced every
            // chain, not finished some and left the others at their start
            let turns = runs_ref.len() > pool.current_num_threads();
            let chunks = Chunks {
                density,
                deadline,
                cancel,
                turn: turns.then_some(TURN),
            };
            let fail = |err: kameleon_samplers::SamplerError| {
                cancel.store(true, Ordering::Relaxed);
                let mut first = failure.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert(err.to_string());
            };
            if density.is_batched() {
                if let Err(err) = chunks.lockstep(runs_ref, steps) {
                    fail(err);
                }
            } else {
                pool.install(|| {
                    loop {
                        runs_ref
                            .par_iter_mut()
                            .zip(steps.par_iter())
                            .for_each(|(run, counter)| {
                                if let Err(err) = chunks.run(run, counter, hold_gil) {
                                    fail(err);
                                }
                            });
                        if !turns
                            || chunks.stopped()
                            || !chunks.before_deadline()
                            || runs_ref.iter().all(|r| r.is_finished())
                        {
                            break;
                        }
                    }
                });
            }
        };
        let ((), polled) = poll_while(py, work, steps, control.progress.as_ref(), cancel, || {
            density.has_failed()
        });
        if let Some(err) = density.take_error().or(polled.callback_error) {
            return Err(err);
        }
        if let Some(message) = failure.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Err(PyValueError::new_err(message));
        }
        let finished = runs.iter().all(|r| r.is_finished());
        if let Some(path) = &control.checkpoint {
            let bytes = postcard::to_stdvec(&runs)
                .map_err(|e| PyValueError::new_err(format!("cannot encode the chains: {e}")))?;
            save_checkpoint(
                path,
                &CheckpointFile {
                    header: header.clone(),
                    runs: bytes,
                },
            )?;
        }
        if finished || polled.interrupted {
            break polled.interrupted;
        }
    };
    let (chains, out_of_evaluations) = runs
        .into_iter()
        .map(|run| {
            let out = run.out_of_evaluations();
            let chain = run.into_chain();
            let cut = out && chain.steps < chain.config.total_steps();
            (chain, cut)
        })
        .unzip();
    Ok(Outcome {
        chains,
        out_of_evaluations,
        interrupted,
    })
}

/// Chunks shorter than this double, longer than `4 ×` this halve, so each
/// lasts roughly 10–40 ms whatever one step costs.
const CHUNK: Duration = Duration::from_millis(10);

/// How long a chain advances at a turn when there are more chains than
/// threads.
const TURN: Duration = Duration::from_millis(100);

/// How chains advance: until they end, the deadline passes or the run is
/// cancelled (or, with `turn`, for about that long at a time), in chunks
/// whose steps are counted in the chains' counters.
struct Chunks<'a> {
    density: &'a Density,
    deadline: Option<Instant>,
    cancel: &'a AtomicBool,
    turn: Option<Duration>,
}

impl Chunks<'_> {
    /// Calls `advance(chunk)`, which takes up to `chunk` steps and says
    /// whether the chains are finished, until they are, the run stops or
    /// the turn (if any) ends; chunking does not change the chains. The first chunk is taken even
    /// if the deadline has passed, so that a checkpoint interval shorter
    /// than starting a segment still lets the chains advance between saves.
    fn in_chunks(
        &self,
        mut advance: impl FnMut(u64) -> kameleon_samplers::Result<bool>,
    ) -> kameleon_samplers::Result<()> {
        let mut chunk = 1u64;
        let mut first = true;
        let turn_end = self.turn.and_then(|t| Instant::now().checked_add(t));
        while !self.stopped()
            && (first || (self.before_deadline() && turn_end.is_none_or(|t| Instant::now() < t)))
        {
            first = false;
            let start = Instant::now();
            if advance(chunk)? {
                break;
            }
            let took = start.elapsed();
            if took < CHUNK {
                chunk = chunk.saturating_mul(2);
            } else if took > 4 * CHUNK {
                chunk = (chunk / 2).max(1);
            }
        }
        Ok(())
    }

    /// Whether the run was cancelled or the density failed.
    fn stopped(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || self.density.has_failed()
    }

    /// Whether the segment's deadline (if any) is still ahead.
    fn before_deadline(&self) -> bool {
        self.deadline.is_none_or(|d| Instant::now() < d)
    }

    /// Advances one chain; `hold_gil`: keep the GIL for a whole chunk (a
    /// single worker) rather than taking it at each evaluation.
    fn run<P: Sampler>(
        &self,
        run: &mut Run<P>,
        counter: &AtomicU64,
        hold_gil: bool,
    ) -> kameleon_samplers::Result<()> {
        let density = self.density;
        self.in_chunks(|chunk| {
            if run.is_finished() {
                return Ok(true);
            }
            if !density.needs_gil() {
                run.advance(density, chunk, None)?;
            } else if hold_gil {
                // each evaluation's own attach is then a counter increment;
                // Python code run by the density still lets the polling
                // thread in at CPython's switch interval
                Python::attach(|_| run.advance(density, chunk, None))?;
            } else {
                // Attach once per chunk so this thread keeps its Python
                // state, then release the GIL: each evaluation re-acquires it
                // (cheap with the state kept), so other chains run their Rust
                // work and their own calls in between.
                Python::attach(|py| py.detach(|| run.advance(density, chunk, None)))?;
            }
            counter.store(run.steps_done(), Ordering::Relaxed);
            Ok(run.is_finished())
        })
    }

    /// Advances every chain in lockstep on this one thread: each step's
    /// proposed points of all running chains go into one call of the
    /// vectorised density. The thread calls Python at every step, so it
    /// keeps the GIL for a whole chunk (the polling thread gets in at
    /// CPython's switch interval while the density runs).
    fn lockstep<P: Sampler>(
        &self,
        runs: &mut [Run<P>],
        counters: &[AtomicU64],
    ) -> kameleon_samplers::Result<()> {
        let density = self.density;
        let mut evaluate = |points: &[f64], values: &mut [f64]| match density
            .evaluate_batch(points, values.len())
        {
            Some(batch) => values.copy_from_slice(&batch),
            None => values.fill(f64::NAN),
        };
        self.in_chunks(|chunk| {
            Python::attach(|_| advance_lockstep(runs, density, chunk, &mut evaluate))?;
            for (run, counter) in runs.iter().zip(counters) {
                counter.store(run.steps_done(), Ordering::Relaxed);
            }
            Ok(runs.iter().all(Run::is_finished))
        })
    }
}

/// Gathers the chains of several checkpoints of one run (same settings,
/// dimension, seed and lengths) into one file, in the order given, keeping
/// only the chains at `keep` if given.
pub struct Regroup {
    /// The checkpoints, read in order.
    pub sources: Vec<CheckpointFile>,
    /// Which of the gathered chains to keep (all if `None`).
    pub keep: Option<Vec<usize>>,
}

impl Job for Regroup {
    type Output = PyResult<CheckpointFile>;

    fn run<P: Sampler>(
        self,
        _build: &(dyn Fn(u64, u64) -> BuildResult<P> + Sync),
    ) -> PyResult<CheckpointFile> {
        let mut header = self.sources[0].header.clone();
        let mut runs: Vec<Run<P>> = Vec::new();
        for file in &self.sources {
            let theirs = &file.header;
            if (
                &theirs.settings,
                theirs.dim,
                theirs.seed,
                theirs.draws,
                theirs.tune,
                theirs.thin,
            ) != (
                &header.settings,
                header.dim,
                header.seed,
                header.draws,
                header.tune,
                header.thin,
            ) {
                return Err(PyValueError::new_err(
                    "the checkpoints belong to different runs (their settings, dimension, seed or lengths differ)",
                ));
            }
            let part: Vec<Run<P>> = postcard::from_bytes(&file.runs).map_err(|e| {
                PyValueError::new_err(format!(
                    "the checkpoint's chains do not match its sampler settings: {e}"
                ))
            })?;
            runs.extend(part);
        }
        if let Some(keep) = self.keep {
            let mut all: Vec<Option<Run<P>>> = runs.into_iter().map(Some).collect();
            runs = Vec::with_capacity(keep.len());
            for k in keep {
                let run = all.get_mut(k).and_then(Option::take).ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "chain {k} is not in the checkpoints (or is named twice)"
                    ))
                })?;
                runs.push(run);
            }
        }
        header.chains = runs.len();
        let bytes = postcard::to_stdvec(&runs)
            .map_err(|e| PyValueError::new_err(format!("cannot encode the chains: {e}")))?;
        Ok(CheckpointFile {
            header,
            runs: bytes,
        })
    }
}

/// The current point, its stored log density and the steps done of each
/// chain of a checkpoint.
pub struct Positions<'a> {
    /// The checkpoint.
    pub file: &'a CheckpointFile,
}

impl Job for Positions<'_> {
    type Output = PyResult<ChainPositions>;

    fn run<P: Sampler>(
        self,
        _build: &(dyn Fn(u64, u64) -> BuildResult<P> + Sync),
    ) -> PyResult<ChainPositions> {
        let runs: Vec<Run<P>> = postcard::from_bytes(&self.file.runs).map_err(|e| {
            PyValueError::new_err(format!(
                "the checkpoint's chains do not match its sampler settings: {e}"
            ))
        })?;
        Ok(ChainPositions {
            positions: runs
                .iter()
                .map(|r| r.sampler().position().to_vec())
                .collect(),
            log_densities: runs.iter().map(|r| r.sampler().log_density()).collect(),
            steps_done: runs.iter().map(Run::steps_done).collect(),
        })
    }
}

/// Each chain's current point, the log density stored for it, and its
/// steps done, as [`Positions`] reads them.
pub struct ChainPositions {
    /// The current points.
    pub positions: Vec<Vec<f64>>,
    /// The log density the chain stored for its current point.
    pub log_densities: Vec<f64>,
    /// The steps each chain has made.
    pub steps_done: Vec<u64>,
}

/// Lengthens every chain of a checkpoint by `draws` kept draws (`draws ×
/// thin` steps): continuing it then gives the chains of a run started with
/// that many more draws, since a chain's steps do not depend on its length.
/// The chains' evaluation limit is kept or lifted as asked.
///
/// A [`Run`] has no setter for its length, so its serialised form is read
/// as the tuple of its fields in declaration order (engine, chain,
/// `shares_states`: postcard writes a struct as that tuple), the chain's
/// configuration changed, and the tuple written back; the round trip through
/// `Run<P>` checks the result.
pub struct Extend {
    /// The checkpoint.
    pub file: CheckpointFile,
    /// Kept draws to add per chain.
    pub draws: u64,
    /// Whether the chains keep their evaluation limit
    /// ([`kameleon_samplers::RunConfig::max_evaluations`]); `false` lifts it.
    pub keep_evaluation_limit: bool,
}

impl Job for Extend {
    type Output = PyResult<CheckpointFile>;

    fn run<P: Sampler>(
        self,
        _build: &(dyn Fn(u64, u64) -> BuildResult<P> + Sync),
    ) -> PyResult<CheckpointFile> {
        let corrupt = |e: postcard::Error| {
            PyValueError::new_err(format!(
                "the checkpoint's chains do not match its sampler settings: {e}"
            ))
        };
        let mut header = self.file.header;
        let added = self.draws.checked_mul(header.thin);
        let draws = header.draws.checked_add(self.draws);
        let (Some(added), Some(draws)) = (added, draws) else {
            return Err(PyValueError::new_err("the extended run's length overflows"));
        };
        let mut runs: Vec<(MetropolisHastings<P>, Chain, bool)> =
            postcard::from_bytes(&self.file.runs).map_err(corrupt)?;
        for (_, chain, _) in &mut runs {
            chain.config.iterations = chain
                .config
                .iterations
                .checked_add(added)
                .ok_or_else(|| PyValueError::new_err("the extended run's length overflows"))?;
            if !self.keep_evaluation_limit {
                chain.config.max_evaluations = None;
            }
            chain
                .config
                .validate()
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
        }
        let bytes = postcard::to_stdvec(&runs)
            .map_err(|e| PyValueError::new_err(format!("cannot encode the chains: {e}")))?;
        let check: Vec<Run<P>> = postcard::from_bytes(&bytes).map_err(corrupt)?;
        if check
            .iter()
            .any(|r| r.is_finished() && !r.out_of_evaluations() && added > 0)
        {
            return Err(PyValueError::new_err(
                "the checkpoint's chains could not be lengthened (their layout is not the one expected)",
            ));
        }
        header.draws = draws;
        Ok(CheckpointFile {
            header,
            runs: bytes,
        })
    }
}
