"""``sample_ensemble``: the affine-invariant ensemble sampler, run in Rust."""

from __future__ import annotations

import concurrent.futures
import numbers
import os
import threading
import warnings
from typing import Sequence

import numpy as np

from . import _core, _parallel
from ._arviz import check_parameter_names, inference_data, posterior_variables
from ._checks import _flag, _integer, _seed
from ._ensemble_prior import with_prior
from ._sample import (
    _ACCEPTANCE_HIGH,
    _ACCEPTANCE_LOW,
    _CHECK_MIN_DRAWS,
    _check_dimension,
    _check_same_density,
    __version__,
    _checkpoint_every,
    _checkpointed_prior,
    _existing_checkpoint,
    _checkpoint_path,
    _density,
    _density_record,
    _one_point,
    _path,
    _points,
    _percent,
    _run,
    _warn_problems,
)

__all__ = ["sample_ensemble", "resume_ensemble"]


def _default_walkers(dim: int) -> int:
    """max(2·d, 32): 2·d is the usual minimum for the stretch move; 32 keeps
    the ensemble large enough for the walkers to explore together in low
    dimensions, at a cost of 32 evaluations per sweep."""
    return max(2 * dim, 32)


def sample_ensemble(
    log_density,
    x0=None,
    *,
    walkers: int | np.integer | None = None,
    draws: int | np.integer = 1000,
    tune: int | np.integer = 1000,
    a: float = 2.0,
    seed: int | np.integer | None = None,
    progress: bool = True,
    parameter_names: Sequence[str] | None = None,
    prior=None,
    bounds=None,
    vectorize: bool = False,
    cores: int | np.integer = 1,
    executor: concurrent.futures.Executor | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: float = 60.0,
):
    """Runs the affine-invariant ensemble sampler with the stretch move
    (Goodman & Weare 2010, the algorithm of emcee) for ``tune`` discarded
    and ``draws`` kept sweeps; every sweep moves each walker once and costs
    one log-density evaluation per walker.

    ``log_density``: a callable ``f(x) -> float``, a :class:`PseudoMarginal`,
    a :class:`Compiled` function or a :mod:`kameleon.targets` target.
    ``x0``: one point of shape (d,), around which the walkers start at
    ``x0 + 1e-3 * N(0, I)`` (drawn from stream 1 of ``seed``; the sampler uses
    stream 0), or the walkers' starting points of shape (walkers, d). The
    walkers must not lie in a lower-dimensional affine subspace.
    ``walkers``: the ensemble size W (more than d, and at least 2d to mix
    well: fewer give a warning; default ``max(2 * d, 32)``,
    or the rows of a 2-d ``x0``). ``a``: the stretch scale (> 1).
    ``seed``: drawn from OS entropy and recorded if None; a seed gives the
    same result every time. ``walkers``, ``draws``, ``tune`` and ``seed``
    take Python or numpy integers (not bools). ``progress``: one bar
    counting sweeps.

    Returns ArviZ data whose ``posterior`` has the walkers as its ``chain``
    dimension (as ``arviz.from_emcee``), and ``sample_stats`` with ``lp``
    (the stored log density of each kept state) and ``accepted`` (whether
    the walker's move in that sweep was accepted). The walkers interact, so
    they are not independent chains: per-chain R-hat and ESS computed over
    walkers overstate the information, and standard errors should come from
    the ensemble average over sweeps (e.g. by batch means).

    After the run, the ensemble's acceptance rate over every walker and
    sweep (tuning included) is checked: below 1 % or above 95 % gives a
    :class:`SamplingWarning` with what to try (not with fewer than 4 sweeps).
    The ``attrs`` carry ``acceptance_rate``, ``evaluations`` (the log
    density's, in total) and ``warnings`` (the problem lines). R-hat and
    ESS are not checked: over interacting walkers they mislead (see above).

    Exceptions raised by a Python log density stop the run and are re-raised
    here; NaN or −inf rejects the proposal. Ctrl-C returns the sweeps so far
    with a warning.

    Evaluating the walkers together (a Python callable ``f(x) -> float``
    only, not a :class:`PseudoMarginal`): ``vectorize=True`` means
    ``log_density`` takes a ``(k, d)`` array and returns its k values, and
    is called once per half sweep (emcee's ``vectorize``), with the walkers
    of a per-point run, bit for bit, when a row's value does not depend on
    the others. ``cores`` > 1 evaluates each half sweep's walkers in that
    many worker processes (the pool :func:`kameleon.sample` uses; the
    density is pickled with cloudpickle; one task per worker and half
    sweep), ``executor`` on any :class:`concurrent.futures.Executor` (one
    task per walker of the half sweep, or ``cores`` tasks if ``cores`` > 1):
    this pays for densities that take milliseconds or more. The pickled
    density travels with the first half sweep's tasks only (on a Dask
    client's executor, a future of it, which one task holds); a worker that
    lacks it later (one that joined the executor, or a process started per
    task) asks for it and is sent it again, which costs such executors a
    second round trip per task.
    The walkers are the same in every case.

    With ``checkpoint``, the run is saved there every ``checkpoint_every``
    seconds (``math.inf``: only then) and at the end (or on Ctrl-C): its start and every log-density
    value so far (the moves follow from those), with a record of the log
    density for :func:`resume_ensemble` to check (for a noisy one, its
    estimate at ``x0``, its first row if it has one per walker, with
    ``numpy.random.default_rng(0)``: one evaluation before the run, not
    counted), and
    :func:`resume_ensemble` continues it, bit-identical to an uninterrupted
    run, replaying the saved part without evaluating the density.

    ``prior=`` and ``bounds=`` work as in :func:`kameleon.sample` (the
    walkers move on the unconstrained scale; ``x0`` is constrained, and
    ``x0=None`` starts each walker at a draw of the prior); not with
    ``vectorize=True``.
    """
    progress, vectorize = _flag("progress", progress), _flag("vectorize", vectorize)
    checkpoint_every = _checkpoint_every(checkpoint_every)
    draws = _integer("draws", draws, 0)
    tune = _integer("tune", tune, 0)
    seed = _seed(seed)
    checkpoint = _checkpoint_path(checkpoint)
    _no_prior_when_vectorized(vectorize, prior, bounds)
    log_density, x0, parameter_names, constrained = with_prior(
        log_density, x0, walkers, seed, prior, bounds, parameter_names, _default_walkers
    )
    x0 = _points(x0)
    if x0.ndim not in (1, 2):
        raise ValueError(f"`x0` must have shape (d,) or (walkers, d), got {x0.shape}")
    if walkers is None:
        walkers = _default_walkers(x0.shape[-1]) if x0.ndim == 1 else x0.shape[0]
    walkers = _integer("walkers", walkers, 2)
    if x0.ndim == 1:
        x0 = x0[None, :]
    elif walkers != x0.shape[0]:
        raise ValueError(f"`x0` has {x0.shape[0]} rows but `walkers` is {walkers}")
    if not isinstance(a, numbers.Real) or isinstance(a, (bool, np.bool_)) or not np.isfinite(a) or a <= 1:
        raise ValueError(f"`a` must be a finite number > 1, got {a!r}")
    d = x0.shape[1]
    parameter_names = check_parameter_names(parameter_names, d)
    _check_dimension(log_density, d, "`x0`")
    kind, function = _walkers_density(log_density, vectorize, cores, executor, walkers)
    # the checkpoint records the log density for resume_ensemble to check
    record = None if checkpoint is None else _density_record(log_density, _density(log_density, None, False)[0], x0[0])
    result = _run_interruptible(
        lambda bars: _core.sample_ensemble(
            kind, function, np.array(x0, dtype=np.float64, order="C"), walkers, float(a), seed, draws, tune, bars,
            checkpoint, checkpoint_every, record,
        ),
        [tune + draws],
        progress,
    )
    if constrained is not None:
        result["samples"] = constrained.joint.constrain(result["samples"])
    return _to_arviz(result, seed, float(a), walkers, draws, tune, parameter_names)


def resume_ensemble(
    path: str | os.PathLike,
    log_density,
    *,
    progress: bool = True,
    parameter_names: Sequence[str] | None = None,
    vectorize: bool = False,
    cores: int | np.integer = 1,
    executor: concurrent.futures.Executor | None = None,
    checkpoint_every: float = 60.0,
    prior=None,
    bounds=None,
):
    """Continues the :func:`sample_ensemble` run checkpointed at ``path``
    with the same log density: the result is bit-identical to an
    uninterrupted run. A run started with ``prior=`` or ``bounds=`` must be
    resumed with the same ``prior`` and ``bounds`` (``log_density`` is then
    the log-likelihood), as with :func:`kameleon.resume`. ``vectorize``, ``cores`` and ``executor`` are as in
    :func:`sample_ensemble` (they need not be the ones of the first run).
    The checkpoint is updated as the run goes on. The log density is
    checked against the run first, as :func:`kameleon.resume` checks it
    (one evaluation, not counted): it must be exact or noisy as the run's
    was; an exact one must give the value the run recorded at walker 0's
    starting point, a noisy one the estimate the run's estimator gave at
    the point its checkpoint recorded (see :func:`sample_ensemble`; on the
    unconstrained scale with ``prior``/``bounds``) with the generator
    ``numpy.random.default_rng(0)``; so another model, data set or
    estimator is refused with a ``ValueError`` (the estimator must draw all
    its randomness from the ``rng`` it is given)."""
    progress, vectorize = _flag("progress", progress), _flag("vectorize", vectorize)
    checkpoint_every = _checkpoint_every(checkpoint_every)
    path = _path(path, "path")
    header = _core.ensemble_checkpoint_header(_existing_checkpoint(path))
    _check_dimension(log_density, header["dim"], "the checkpointed run")
    _no_prior_when_vectorized(vectorize, prior, bounds)
    log_density, parameter_names, constrained = _checkpointed_prior(
        log_density, prior, bounds, False, header["dim"], parameter_names
    )
    parameter_names = check_parameter_names(parameter_names, header["dim"])
    if vectorize:
        one_point, kind = _one_point(log_density), "vectorized"
    else:
        one_point, kind = log_density, _density(log_density, None, False)[0]
    _check_same_density(
        one_point, kind, header["density"], header["first_point"], header["first_log_density"],
        "kameleon.resume_ensemble",
    )
    kind, function = _walkers_density(log_density, vectorize, cores, executor, header["walkers"])
    result = _run_interruptible(
        lambda bars: _core.resume_ensemble(path, kind, function, bars, checkpoint_every),
        [header["tune"] + header["draws"]],
        progress,
    )
    if constrained is not None:
        result["samples"] = constrained.joint.constrain(result["samples"])
    return _to_arviz(
        result, header["seed"], header["a"], header["walkers"], header["draws"], header["tune"], parameter_names
    )


def _run_interruptible(call, totals, progress: bool):
    """``call(report)`` as :func:`kameleon._sample._run` runs it, with Ctrl-C
    (in the main thread) setting a flag that ``report`` returns, so the
    run stops between two sweeps: a ``KeyboardInterrupt`` raised inside the
    log density (which runs in this thread) would cut a sweep short."""
    with _parallel.sigint_sets(threading.Event()) as interrupt:

        def interruptible(report):
            def check(steps: list[int]) -> bool:
                stop = report(steps) if report is not None else False
                return stop or interrupt.is_set()

            return call(check)

        return _run(interruptible, totals, progress, labels=["sweeps"])


def _no_prior_when_vectorized(vectorize: bool, prior, bounds) -> None:
    """``ValueError`` for ``vectorize=True`` with ``prior``/``bounds``: the
    walkers' rows would need the prior's transform row by row."""
    if vectorize and (prior is not None or bounds is not None):
        raise ValueError("`vectorize=True` takes a plain (k, d) log density, not with `prior=`/`bounds=`")


def _walkers_density(log_density, vectorize: bool, cores, executor, walkers: int):
    """(kind, function) for the extension: the walkers evaluated one by one,
    in one vectorised call, or on worker processes or an executor (at most
    one worker per walker of a half sweep: more would only idle)."""
    kind, function, _ = _density(log_density, None, False)
    cores = min(_integer("cores", cores, 1), max(1, walkers // 2))
    if vectorize or cores > 1 or executor is not None:
        if kind != "callable":
            raise ValueError(
                "`vectorize`, `cores` > 1 and `executor` need a Python callable f(x) -> float "
                f"(not a PseudoMarginal, Compiled function or target), got {type(log_density).__name__}"
            )
        if vectorize and (cores > 1 or executor is not None):
            raise ValueError("`vectorize=True` evaluates the walkers in one call here: leave `cores`/`executor` unset")
        if executor is not None:
            _parallel.check_executor(executor)
        if not vectorize:
            function = _parallel.rows_on_workers(function, cores, executor)
        kind = "vectorized"
    return kind, function


def _to_arviz(result: dict, seed: int, a: float, walkers: int, draws: int, tune: int, parameter_names):
    if result["interrupted"]:
        warnings.warn(
            f"sampling was interrupted: returning the partial draws ({result['samples'].shape[0]} sweeps)",
            UserWarning,
            stacklevel=_parallel.outside_stacklevel(),
        )
    samples = np.swapaxes(result["samples"], 0, 1)  # (walker, sweep, d)
    posterior = posterior_variables(samples, parameter_names)
    stats = {
        "lp": np.swapaxes(result["lp"], 0, 1),
        "accepted": np.swapaxes(result["accepted"], 0, 1),
    }
    acceptance, problems = _check_ensemble(result, walkers)
    d = samples.shape[-1]
    if walkers < 2 * d:
        # d + 1 walkers are the least that span the space (fewer are refused)
        problems.insert(
            0,
            f"{walkers} walkers for {d} parameters: with fewer than 2d = {2 * d} the stretch move mixes "
            f"poorly (emcee refuses them). Use at least {2 * d} walkers (the default is max(2d, 32))",
        )
    attrs = {
        "inference_library": "kameleon",
        "inference_library_version": __version__,
        "sampler": "ensemble (stretch move)",
        "seed": str(seed),
        "a": a,
        "walkers": int(walkers),
        "draws": int(draws),
        "tune": int(tune),
        "evaluations": int(result["evaluations"]),
        "rejected_non_finite": int(result["rejected_non_finite"]),
        "accepted_total": [int(n) for n in result["accepted_total"]],
        "interrupted": int(bool(result["interrupted"])),
        "acceptance_rate": acceptance,
        "warnings": problems,
    }
    _warn_problems(problems, f"kameleon.sample_ensemble (seed {seed})")
    return inference_data({"posterior": posterior, "sample_stats": stats}, attrs)


def _check_ensemble(result: dict, walkers: int) -> tuple[float, list[str]]:
    """The acceptance rate over every walker and sweep done (tuning
    included; NaN before any sweep) and the problem lines for a rate
    outside [1 %, 95 %] (none with fewer than 4 sweeps)."""
    sweeps = int(result["sweeps_done"])
    if sweeps == 0:
        return float("nan"), []
    rate = sum(int(n) for n in result["accepted_total"]) / (walkers * sweeps)
    if sweeps < _CHECK_MIN_DRAWS:
        return rate, []
    if rate < _ACCEPTANCE_LOW:
        return rate, [
            f"acceptance {_percent(rate)} below {_percent(_ACCEPTANCE_LOW)}: the walkers barely move. "
            "Check the scale of the log density (its units, a missing factor), start the walkers "
            "spread like the posterior (a (walkers, d) `x0`), try a smaller `a` or a longer `tune`"
        ]
    if rate > _ACCEPTANCE_HIGH:
        return rate, [
            f"acceptance {_percent(rate)} above {_percent(_ACCEPTANCE_HIGH)}: the moves are tiny for "
            "the target. Try a longer `tune` (the ensemble may still be spreading out from its "
            "starting ball), a larger `a`, and check that the log density is not nearly flat "
            "(a wrong sign or scale)"
        ]
    return rate, []
