"""``sample`` and ``resume``: chains run in Rust, results as ArviZ data."""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import errno
import importlib.metadata
import json
import math
import os
import secrets
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from . import _core, _parallel
from ._checks import _as_int, _flag, _integer, _is_real_number, _real_array, _seed
from ._arviz import check_parameter_names, inference_data, posterior_variables
from .priors import JointPrior
from .samplers import HMC, KAMH, Sampler
from .targets import Target

__all__ = ["sample", "resume", "extend", "PseudoMarginal", "Compiled", "SamplingWarning"]


def _distribution_version() -> str:
    """The installed distribution's version; ``"0+unknown"`` (a valid
    PEP 440 version that sorts below every release) when the package runs
    from a source tree without being installed."""
    try:
        return importlib.metadata.version("kameleon")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _distribution_version()


class SamplingWarning(UserWarning):
    """A run finished but its draws look unreliable: a chain that hardly
    accepts (or accepts nearly everything), a chain that never moved, chains
    that disagree (R-hat) or too few effective draws (bulk ESS). The message
    lists every problem with what to try; the same figures are in the
    output's ``attrs``. Silence it with the ``warnings`` module, e.g.
    ``warnings.simplefilter("ignore", kameleon.SamplingWarning)``."""


def _points(x0) -> np.ndarray:
    """The starting points ``x0`` as a float64 array of real numbers (see
    :func:`_real_array`): strings, complex numbers, booleans, other
    objects and what is not an array of numbers are a ``TypeError`` naming
    ``x0``."""
    return _real_array(x0, "`x0` is", "shape (d,) or (chains, d)")


def _checkpoint_every(value) -> float:
    """``checkpoint_every`` in seconds: a positive number (``math.inf``
    saves only at the end and on Ctrl-C); else ``ValueError``."""
    seconds = float(value) if _is_real_number(value) else math.nan
    if not seconds > 0:
        raise ValueError(
            f"`checkpoint_every` must be a positive number of seconds (math.inf: only at the end and on "
            f"interruption), got {value!r}"
        )
    return seconds


def _path(value, name: str) -> str:
    """The file path ``value`` (a str, bytes or os.PathLike) as a str;
    else ``TypeError`` naming ``name``."""
    try:
        return os.fsdecode(os.fspath(value))
    except TypeError:
        raise TypeError(f"`{name}` must be a file path (a str or os.PathLike), got {value!r:.60}") from None


def _existing_checkpoint(path: str) -> str:
    """``path``, a checkpoint to continue, if a file is there; else
    ``FileNotFoundError`` (the extension's error was a bare ``OSError``)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, "no checkpoint to continue at this path", path)
    return path


def _checkpoint_path(checkpoint) -> str | None:
    """``checkpoint`` as an absolute path (None stays None): worker
    processes keep the folder they started in, and the output's
    ``attrs["checkpoint"]`` must name the file wherever it is read. Checked
    before the run costs anything: its folder must exist and be writable,
    and the path must not be a folder; else the ``OSError`` that saving
    would raise only at the first save (after ``checkpoint_every`` seconds,
    or at the end)."""
    if checkpoint is None:
        return None
    path = os.path.abspath(_path(checkpoint, "checkpoint"))
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"the folder of `checkpoint` {path!r} does not exist: create it first")
    if os.path.isdir(path):
        raise IsADirectoryError(f"`checkpoint` {path!r} is a folder: name a file in it")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"the folder of `checkpoint` {path!r} is not writable")
    return path


@dataclass(frozen=True)
class PseudoMarginal:
    """A noisy log density ``f(x, rng) -> float``: the log of a non-negative
    unbiased estimate of the (unnormalised) density.

    ``rng`` is a fresh ``numpy.random.Generator`` per call, seeded from the
    chain's own stream, so runs are reproducible: ``function`` must draw
    all its randomness from ``rng`` (not from numpy's global generator or
    any other source), and :func:`resume` relies on it to check a
    checkpointed run's estimator. The estimate of the current
    state is kept, never recomputed (exact pseudo-marginal MCMC). With
    ``prior=`` or ``bounds=`` in :func:`sample`, it estimates the likelihood.
    ``function`` must be callable (else ``TypeError``).
    """

    function: Callable

    def __post_init__(self) -> None:
        if not callable(self.function):
            raise TypeError(
                "PseudoMarginal needs a callable f(x, rng) -> float, got "
                f"{type(self.function).__name__} {self.function!r:.100}"
            )


class SimulationEstimator:
    """Base of the likelihood estimators built on simulations
    (:class:`kameleon.ABC`, :class:`kameleon.SyntheticLikelihood`).

    An instance is a callable ``f(x, rng) -> float`` returning the log of a
    non-negative random estimate of the likelihood at ``x``, and
    :func:`sample` and :func:`sample_ensemble` run it exactly as a
    :class:`PseudoMarginal` of that callable, unless ``_compiled`` is set:
    then the extension's estimator (``kameleon._core.CompiledLikelihood``)
    runs in Rust as the whole log density.
    """

    _compiled = None

    def __call__(self, theta, rng) -> float:
        raise NotImplementedError


def _noisy_function(log_density) -> Callable | None:
    """The ``f(x, rng)`` of a :class:`PseudoMarginal` or a
    :class:`SimulationEstimator`, else None."""
    if isinstance(log_density, PseudoMarginal):
        return log_density.function
    if isinstance(log_density, SimulationEstimator):
        return log_density
    return None


@dataclass(frozen=True)
class Compiled:
    """A compiled log density ``double logp(const double *x, int64_t dim)``
    at ``address`` (e.g. ``numba.cfunc("float64(CPointer(float64), int64)")(f).address``).

    Contract: the function reads exactly ``dim`` doubles from ``x``, returns
    the log density (NaN or −inf rejects the proposal), has no side effects,
    is safe to call from several threads at once and never touches Python
    objects: it is called from Rust threads without the GIL, so chains run
    in parallel. Keep the object that owns the code (the numba cfunc) alive
    while sampling; pass it as ``owner`` to have this object hold it.
    """

    address: int | np.integer
    dim: int | np.integer
    owner: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "address", _address("Compiled", self.address))
        object.__setattr__(self, "dim", _integer("dim", self.dim, 1))


def _address(what: str, value) -> int:
    """A C function's ``address`` as an ``int`` in [1, 2**64): calling a
    null, negative or truncated (float) address would crash the
    interpreter, so anything else is a ``ValueError`` (naming the
    ``.address`` attribute when ``value`` is the numba cfunc itself)."""
    number = _as_int(value)
    if number is None or not 0 < number < 2**64:
        hint = ""
        if hasattr(value, "address"):
            hint = f" (pass the function's `.address`, not the {type(value).__name__} itself)"
        raise ValueError(f"{what}: `address` must be a non-null integer address{hint}, got {value!r}")
    return number


def _lockstep(log_density, kind: str, constrained, is_hmc: bool) -> tuple[str, Callable]:
    """``("vectorized", its per-point log density)`` for chains in lockstep
    on the vectorized ``log_density`` (of ``kind``, with the prior's
    ``constrained`` density or None), else the ``ValueError`` that says why
    not."""
    if is_hmc:
        raise ValueError(
            "`vectorize=True` does not run HMC: its leapfrog steps call the gradient of each chain on its own. "
            "Pass a per-point log density (and `grad_log_density`) for HMC"
        )
    if kind != "callable" or constrained is not None:
        raise ValueError(
            "`vectorize=True` needs a plain Python callable taking a (k, d) array "
            "(not a PseudoMarginal, Compiled function or target, and not with `prior=`/`bounds=`)"
        )
    return "vectorized", _one_point(log_density)


def _one_point(vectorized: Callable) -> Callable:
    """The per-point log density ``f(x)`` of a vectorized one: its value
    at the single row ``x[None]``, for the checks of the starting points
    and the timing call, which run it from Python. A value that is not one
    real float per row is the ``TypeError`` the run itself would raise."""

    def log_density(x: np.ndarray) -> float:
        return _core.log_density_values(vectorized, vectorized(x[None, :]), 1)[0]

    return log_density


# The seed of the generator, numpy.random.default_rng(_RECORD_SEED), with
# which a checkpoint records a noisy log density's estimate at one point
# and resume draws it again: fixed, and no chain's stream, so recording
# changes no chain (the docstrings of sample and resume name it).
_RECORD_SEED = 0


def _is_exact(log_density, kind: str) -> bool:
    """Whether ``log_density`` (of the Rust ``kind``) is exact, not a noisy
    estimate."""
    return kind in ("callable", "vectorized", "compiled") or (kind == "builtin" and log_density.is_exact)


def _density_record(log_density, kind: str, point):
    """What a checkpoint records of the run's ``log_density`` (of the Rust
    ``kind``): ``"exact"``, or for a noisy one ``(point, estimate)``, its
    estimate at ``point`` drawn with ``numpy.random.default_rng(_RECORD_SEED)``
    (one evaluation from Python, not counted)."""
    if _is_exact(log_density, kind):
        return "exact"
    point = np.array(point, dtype=np.float64)
    return point.tolist(), _log_density_probe(log_density)(point, np.random.default_rng(_RECORD_SEED))


def _check_same_density(log_density, kind: str, record, point, stored: float, what: str) -> None:
    """``ValueError`` when ``log_density`` (of the Rust ``kind``) is not a
    checkpointed run's: of another kind (exact or noisy) than ``record``
    says, the checkpoint's record of the run's density (None where the run
    recorded none); if exact, its value at
    ``point`` must be ``stored``, the value the run recorded there; if
    noisy, its estimate at the record's point, drawn as
    :func:`_density_record` drew it, must be the recorded one. One
    evaluation, not counted. The tolerance, 10⁻⁹ relative, allows the
    rounding of a vectorised density evaluated on another batch size; a
    changed model, data set, estimator or prior moves the value by far
    more."""
    exact = _is_exact(log_density, kind)
    if record is not None and (record == "exact") != exact:
        was, now = ("exact", "a noisy estimate") if record == "exact" else ("a noisy estimate", "exact")
        _refuse(what, f"the run's log density was {was} and this one is {now}")
    if exact:
        if stored is None or not math.isfinite(stored):
            return
        # an exact built-in target ignores the seed its probe draws
        value = _log_density_probe(log_density)(np.array(point, dtype=np.float64), np.random.default_rng(0))
        if not _same_value(value, stored):
            _refuse(what, f"at a point of the run it is {value!r}, where the run recorded {stored!r}")
    elif record is not None:
        record_point, recorded = record
        value = _log_density_probe(log_density)(
            np.array(record_point, dtype=np.float64), np.random.default_rng(_RECORD_SEED)
        )
        if not _same_value(value, recorded):
            _refuse(
                what,
                f"at a point of the run its estimate with numpy.random.default_rng({_RECORD_SEED}) is {value!r}, "
                f"where the run's estimator gave {recorded!r} (an estimator must draw all its randomness from the "
                "`rng` it is given)",
            )


def _same_value(value: float, stored: float) -> bool:
    """Whether ``value`` is ``stored`` to 10⁻⁹, relative (NaN is NaN)."""
    if math.isnan(value) or math.isnan(stored):
        return math.isnan(value) and math.isnan(stored)
    return value == stored or abs(value - stored) <= 1e-9 * max(1.0, abs(stored))


def _refuse(what: str, reason: str):
    raise ValueError(
        f"{what}: this log density is not the checkpointed run's: {reason}. Continue a run with the log density "
        "it was started with (the same function, estimator and data, and the same `prior`/`bounds`); a changed "
        "model or data set needs a new run"
    )


def _check_dimension(log_density, d: int, what: str) -> None:
    """``ValueError`` when ``log_density`` is a :class:`Compiled` function
    or a built-in target whose dimension is not ``d``, the dimension of
    ``what`` (the starting points, a checkpointed run)."""
    if isinstance(log_density, (Compiled, Target)) and log_density.dim != d:
        kind = "compiled function" if isinstance(log_density, Compiled) else "target"
        raise ValueError(f"{what} has dimension {d} but the {kind} has dimension {log_density.dim}")


def _density(log_density, gradient: Callable | None, needs_gradient: bool):
    """(kind, function, gradient) for the Rust side; ``ValueError`` when
    ``needs_gradient`` (HMC) and the log density cannot give a gradient."""
    if needs_gradient and (isinstance(log_density, Compiled) or _noisy_function(log_density) is not None):
        raise ValueError(
            f"HMC needs the gradient of the log density, which a {type(log_density).__name__} does not give "
            "(HMC's `grad_log_density` serves a plain Python callable; built-in targets have their own): "
            "use a gradient-free sampler such as km.KAMH() or km.AM()"
        )
    if isinstance(log_density, Target):
        return "builtin", log_density._inner, None
    if isinstance(log_density, Compiled):
        return "compiled", int(log_density.address), None
    if isinstance(log_density, SimulationEstimator) and log_density._compiled is not None:
        return "simulation", log_density._compiled, None
    noisy = _noisy_function(log_density)
    if noisy is not None:
        return "pseudo_marginal", noisy, None
    if callable(log_density):
        if needs_gradient and gradient is None:
            raise ValueError("HMC on a Python callable needs `grad_log_density`")
        return "callable", log_density, gradient
    raise TypeError(
        "log_density must be a callable, PseudoMarginal, Compiled or a kameleon.targets target, "
        f"got {type(log_density).__name__}"
    )


class _Progress:
    """One tqdm bar per chain (or per entry of ``labels``), updated by the
    polling thread."""

    def __init__(
        self, totals: Sequence[int], done: Sequence[int] = (), labels: Sequence[str] | None = None
    ) -> None:
        from tqdm.auto import tqdm

        labels = labels or [f"chain {k}" for k in range(len(totals))]
        self.bars = [
            tqdm(total=int(t), initial=int(done[k]) if done else 0, desc=labels[k], position=k, leave=True)
            for k, t in enumerate(totals)
        ]

    def __call__(self, steps: list[int]) -> None:
        for bar, n in zip(self.bars, steps):
            if n > bar.n:
                bar.update(n - bar.n)

    def close(self) -> None:
        for bar in self.bars:
            bar.close()


def _run(call, totals, progress: bool, done=(), labels: Sequence[str] | None = None, deadline: float | None = None):
    """``call(report)``: ``report`` (None if there is nothing to report to)
    takes the steps done per chain, draws the bars and returns True once
    ``time.monotonic()`` passes ``deadline``, which stops the run."""
    bars = _Progress(totals, done, labels) if progress else None

    def report(steps: list[int]) -> bool:
        if bars is not None:
            bars(steps)
        return deadline is not None and time.monotonic() >= deadline

    try:
        return call(report if bars is not None or deadline is not None else None)
    finally:
        if bars is not None:
            bars.close()


# ── starting points ──────────────────────────────────────────────────────

# Attempts at a jittered start per chain, the width halving after each.
_JITTER_TRIES = 20
# How far (in nats, on top of the dimension d) a jittered start may lie
# below log π(x0): see sample's docstring.
_JITTER_SLACK = 10.0


def _log_density_probe(log_density) -> Callable:
    """``probe(x, rng)``: the log density at ``x`` evaluated from Python the
    way the sampler evaluates it (``rng`` seeds a pseudo-marginal estimate),
    as a float (a value that is not a real float is the run's
    ``TypeError``); for the checks of the starting points and of a
    checkpointed run."""
    if isinstance(log_density, Target):
        return lambda x, rng: log_density.log_density(x, seed=int(rng.integers(2**63)))
    if isinstance(log_density, Compiled):
        pointer = ctypes.POINTER(ctypes.c_double)
        function = ctypes.CFUNCTYPE(ctypes.c_double, pointer, ctypes.c_int64)(int(log_density.address))
        return lambda x, rng: function(x.ctypes.data_as(pointer), x.shape[0])
    noisy = _noisy_function(log_density)
    if noisy is not None:
        return lambda x, rng: _as_float(noisy, noisy(x, rng))
    return lambda x, rng: _as_float(log_density, log_density(x))


def _probe_value(probe, x: np.ndarray, rng) -> float | None:
    """The log density at ``x`` if it is finite, else None. Exceptions
    raised by the density (or for a value that is not a real float)
    propagate, as they would from the run."""
    value = probe(np.array(x, dtype=np.float64), rng)
    return value if math.isfinite(value) else None


def _jittered_starts(x0: np.ndarray, chains: int, seed: int, probe) -> np.ndarray:
    """The (chains, d) starting points for one point ``x0``: chain 0 at
    ``x0``, chain k ≥ 1 at ``x0 + w·ε`` as documented in :func:`sample`."""
    d = x0.shape[0]
    starts = np.tile(x0, (chains, 1))
    if chains == 1 or d == 0:
        return starts
    # stream k is SeedSequence(seed).spawn(chains)[k]: it depends on the
    # seed and k only, not on the number of chains
    streams = [np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(k,))) for k in range(chains)]
    base = _probe_value(probe, x0, streams[0])
    if base is None:
        # x0 is outside the support (or the density returns no number):
        # every chain starts at x0 and the sampler reports the problem
        return starts
    lowest = base - (d + _JITTER_SLACK)
    width = np.maximum(np.abs(x0), 1.0)
    for k in range(1, chains):
        rng = streams[k]
        for attempt in range(_JITTER_TRIES):
            x = x0 + width * 0.5**attempt * rng.standard_normal(d)
            value = _probe_value(probe, x, rng)
            if value is not None and value >= lowest:
                starts[k] = x
                break
    return starts


# ── priors and bounds ────────────────────────────────────────────────────


def _as_float(function, value) -> float:
    """``value``, returned by the log density ``function``, as a float if
    it is a real number, read as the extension reads it; else the
    extension's ``TypeError`` naming ``function``."""
    if isinstance(value, float):
        return value
    return _core.log_density_value(function, value)


class _Unconstrained:
    """A log-likelihood and a :class:`~kameleon.priors.JointPrior` as the
    log density of the unconstrained parameters z:
    log L(x) + log p(x) + log |dx/dz| at x = T(z), the transform of
    :mod:`kameleon.priors`. ``density`` is what the sampler runs: a
    callable ``f(z)``, or a :class:`PseudoMarginal` ``f(z, rng)`` when the
    log-likelihood is noisy. The likelihood is not evaluated where the
    prior is 0 (or x lies outside the bounds, e.g. rounded onto one)."""

    def __init__(self, log_density, joint: JointPrior) -> None:
        if isinstance(log_density, (Target, Compiled)):
            raise TypeError(
                "with `prior=` or `bounds=`, `log_density` is the log-likelihood and must be a Python callable, "
                "a PseudoMarginal or a simulation estimator (km.ABC, km.SyntheticLikelihood); kameleon.targets "
                f"targets and Compiled functions are not supported, got {type(log_density).__name__}"
            )
        self.joint = joint
        noisy = _noisy_function(log_density)
        if noisy is not None:
            self.likelihood = noisy
            self.density = PseudoMarginal(self._noisy)
        elif callable(log_density):
            self.likelihood = log_density
            self.density = self._exact
        else:
            raise TypeError(
                "log_density must be a callable, PseudoMarginal or simulation estimator, "
                f"got {type(log_density).__name__}"
            )

    def _prior_part(self, z: np.ndarray) -> tuple[np.ndarray, float]:
        """x = T(z) and log p(x) + log |dx/dz| (−inf outside the bounds)."""
        x = self.joint.constrain(z)
        if self.joint.outside(x) is not None:
            return x, -math.inf
        value = self.joint.log_prior(x) + self.joint.log_jacobian(z)
        return x, -math.inf if math.isnan(value) else value

    def _exact(self, z: np.ndarray) -> float:
        x, base = self._prior_part(z)
        if base == -math.inf:
            return base
        return _as_float(self.likelihood, self.likelihood(x)) + base

    def _noisy(self, z: np.ndarray, rng) -> float:
        x, base = self._prior_part(z)
        if base == -math.inf:
            return base
        return _as_float(self.likelihood, self.likelihood(x, rng)) + base

    def names(self, parameter_names: Sequence[str] | None) -> Sequence[str] | None:
        """The output's names: those of a ``prior`` dict (``parameter_names``
        must then be None or the same), else ``parameter_names``."""
        if self.joint.names is None:
            return parameter_names
        if parameter_names is not None and list(parameter_names) != self.joint.names:
            raise ValueError(
                f"`parameter_names` {list(parameter_names)} differ from the keys of the `prior` dict "
                f"{self.joint.names}: pass one or the other"
            )
        return self.joint.names

    def starts(self, x0, chains: int, seed: int) -> np.ndarray:
        """The starting points on the unconstrained scale: ``x0`` (given
        on the constrained scale, shape (d,) or (chains, d)) checked and
        transformed, or for ``x0=None`` one prior draw per chain."""
        joint = self.joint
        if x0 is None:
            if not joint.can_draw:
                raise ValueError(
                    "`x0=None` draws the starting points from the prior, which needs a `prior` of marginals; "
                    "with a callable prior or `bounds` alone, pass `x0`"
                )
            return self._prior_starts(chains, seed)
        x0 = _points(x0)
        if x0.ndim not in (1, 2) or (x0.ndim == 2 and x0.shape[0] != chains):
            raise ValueError(f"`x0` must have shape (d,) or ({chains}, d), got {x0.shape}")
        if x0.shape[-1] != joint.dim:
            what = f"`prior` has {joint.dim} parameters" if joint.can_draw else f"`bounds` has {joint.dim} pairs"
            raise ValueError(f"{what} but `x0` has dimension {x0.shape[-1]}")
        for k, row in enumerate(np.atleast_2d(x0)):
            j = joint.outside(row)
            if j is not None:
                chain = f" (chain {k})" if x0.ndim == 2 else ""
                raise ValueError(
                    f"`x0`{chain} lies outside the support of parameter {joint.name(j)!r}: "
                    f"{float(row[j])!r} is not in ({joint.low[j]:g}, {joint.high[j]:g})"
                )
        return joint.unconstrain(x0)

    def _prior_starts(self, chains: int, seed: int) -> np.ndarray:
        """Chain k starts at the first of at most 20 draws from the prior
        (generator of ``SeedSequence(seed).spawn(chains)[k]``) where the log
        density is finite (the last draw if none is)."""
        probe = _log_density_probe(self.density)
        starts = np.empty((chains, self.joint.dim))
        for k in range(chains):
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(k,)))
            for _ in range(_JITTER_TRIES):
                z = self.joint.unconstrain(self.joint.draw(rng))
                if np.isfinite(z).all() and _probe_value(probe, z, rng) is not None:
                    break
            starts[k] = z
        return starts

    def constrain_result(self, result: dict) -> None:
        """The chains' draws of ``result`` mapped back to the constrained scale."""
        for chain in result["chains"]:
            chain["samples"] = self.joint.constrain(chain["samples"])


def _with_prior(log_density, prior, bounds, is_hmc: bool) -> _Unconstrained | None:
    """The :class:`_Unconstrained` density for ``prior``/``bounds``, or None
    when neither is given."""
    if prior is None and bounds is None:
        return None
    if is_hmc:
        raise ValueError(
            "HMC does not support `prior=` or `bounds=` (it would need the gradient on the unconstrained "
            "scale): use another sampler, or transform the parameters in your own log density"
        )
    return _Unconstrained(log_density, JointPrior(prior, bounds))


def _checkpointed_prior(log_density, prior, bounds, is_hmc: bool, dim: int, parameter_names):
    """(log density, parameter names, the unconstrained density or None)
    to continue a checkpointed run of dimension ``dim`` with
    ``prior``/``bounds``: without them the arguments unchanged."""
    constrained = _with_prior(log_density, prior, bounds, is_hmc)
    if constrained is None:
        return log_density, parameter_names, None
    if constrained.joint.dim != dim:
        raise ValueError(
            f"the prior has {constrained.joint.dim} parameters but the checkpointed run has dimension {dim}"
        )
    return constrained.density, constrained.names(parameter_names), constrained


# ── checks of a finished run ─────────────────────────────────────────────

# The checks need this many kept draws per chain (split R-hat and ESS need 4).
_CHECK_MIN_DRAWS = 4
_ACCEPTANCE_LOW = 0.01
_ACCEPTANCE_HIGH = 0.95
_RHAT_LIMIT = 1.01
_ESS_LIMIT = 100.0
# Samplers whose proposals follow Hamiltonian trajectories: a high acceptance
# rate is expected of them, not a symptom (a too-short trajectory shows up
# as a low ESS instead).
_HAMILTONIAN = frozenset({"HMC", "KMCLite", "KMCFinite"})

_HINT_LOW = (
    "the proposals are far too wide for the target. Try a longer `tune` so the proposal can adapt, "
    "an adaptive sampler such as km.AM(), a better `x0`, and check the scale of the log density "
    "(its units, a missing factor)"
)
_HINT_HIGH = (
    "the proposals are too small to explore the target. Try a longer `tune`, a sampler that learns "
    "its scale such as km.AM(), and check that the log density is not nearly flat (a wrong sign or "
    "scale)"
)
_HINT_STUCK = (
    "every proposal was rejected. Check that the log density is finite near `x0` (NaN or -inf "
    "rejects) and the scale of the log density (its units, a missing factor), start from a better "
    "`x0`, and try smaller or adaptive proposals (a longer `tune`, km.AM())"
)
_HINT_RHAT = (
    "the chains disagree, so they have not converged to one distribution. Try more `tune` and "
    "`draws`, a different sampler (e.g. km.AM()), a better `x0`, and look for several modes"
)
_HINT_ESS = (
    "too few effectively independent draws for reliable estimates. Try more `draws`, a longer "
    "`tune`, or a sampler that mixes better (e.g. km.AM())"
)


def _percent(rate: float) -> str:
    return f"{100 * rate:.1f} %"


def _chain_rates(items) -> str:
    """'chain 0 (0.3 %), chain 2 (0.0 %)' from (chain, rate) pairs."""
    return ", ".join(f"chain {k} ({_percent(rate)})" for k, rate in items)


def _rhat_limits(samples: np.ndarray) -> np.ndarray:
    """Per parameter of draws (chain, draw, d), the split R-hat above which
    the chains disagree by more than sampling noise: 1.01, or more where
    the chains' own ESS is too small for 1.01 to mean anything.

    Split R-hat compares m = 2·chains half-chains. If they sample one
    distribution and each half holds n_e effectively independent draws,
    the variance of the halves' means over the within-half variance is
    about X/n_e with X ~ χ²(m−1)/(m−1), so R-hat ≈ √(1 + X/n_e) ≈ 1 + X/(2 n_e)
    = 1 + m X/(2E) for E = m n_e draws in all. The limit is that at X's
    quantile 1 − 1 %/d (so that a converged run warns in about 1 % of cases
    over its d parameters), with E the sum of each chain's own bulk ESS,
    which, unlike the pooled ESS, does not shrink when the chains disagree.
    On independent and autoregressive chains (ESS 45–930, d = 1–20) this
    warned in 0–1.5 % of converged runs, where 1.01 alone warned in 84–100 %
    of those with ESS below 500; it still caught one chain of four shifted
    by 1 sd at ESS 180 in 99.5 % of runs. On this function's defaults (4 ×
    1 000 draws from 0, d = 4, 100 seeds) it warned in 1–2 % of the runs of
    AM and KAMH on N(0, I) and on Student's t₁₀, and on t₃ in 22 % (AM) to
    40–63 % (the random walk and the kernel samplers): mostly the folded
    R-hat, chains that disagree on the scale, which 1 000 draws of so heavy
    a tail do not settle."""
    chains, _, d = samples.shape
    m = 2 * chains
    k = m - 1
    # the χ²(k) quantile by Wilson and Hilferty (within 1 % for k ≥ 3)
    z = statistics.NormalDist().inv_cdf(1 - 0.01 / d)
    quantile = k * (1 - 2 / (9 * k) + z * math.sqrt(2 / (9 * k))) ** 3
    ess = sum(_per_parameter("ess_bulk", samples[c : c + 1]) for c in range(chains))
    return np.maximum(_RHAT_LIMIT, 1 + m * (quantile / k) / (2 * ess))


def _per_parameter(diagnostic: str, samples: np.ndarray) -> np.ndarray:
    """The diagnostic named ``diagnostic`` ("ess_bulk" or "rhat") of each
    parameter of draws (chain, draw, d), the parameters in parallel; NaN
    where it is undefined (a parameter constant over every draw)."""
    return np.array(_core.per_parameter(np.asarray(samples, dtype=np.float64), diagnostic, True))


def _rhat_and_ess_bulk(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_per_parameter("rhat", samples)`` and ``_per_parameter("ess_bulk",
    samples)``, computed together (they share the rank normalisation)."""
    rhat, ess = _core.rhat_and_ess_bulk_per_parameter(np.asarray(samples, dtype=np.float64))
    return np.array(rhat), np.array(ess)


def _acceptance_problems(rates, stuck, exempt_high: bool) -> list[str]:
    """The problem lines for acceptance rates outside [1 %, 95 %] (chains
    in ``stuck`` are reported on their own line)."""
    problems = []
    low = [(k, r) for k, r in enumerate(rates) if r < _ACCEPTANCE_LOW and k not in stuck]
    if low:
        problems.append(f"acceptance below {_percent(_ACCEPTANCE_LOW)} in {_chain_rates(low)}: {_HINT_LOW}")
    high = [(k, r) for k, r in enumerate(rates) if r > _ACCEPTANCE_HIGH]
    if high and not exempt_high:
        problems.append(f"acceptance above {_percent(_ACCEPTANCE_HIGH)} in {_chain_rates(high)}: {_HINT_HIGH}")
    return problems


def _check_chains(samples, accepted, accepted_total, sampler_kind: str, names: Sequence[str]):
    """(figures, problems) of the kept draws ``samples`` (chain, draw, d)
    and flags ``accepted`` (chain, draw): per-chain acceptance rates and
    stuck chains, max R-hat and min bulk ESS over the parameters, and one
    line per problem found (none with fewer than 4 draws per chain)."""
    chains, n, _ = samples.shape
    figures = {
        "acceptance_rate": [math.nan] * chains,
        "stuck": [0] * chains,
        "rhat_max": math.nan,
        "ess_bulk_min": math.nan,
    }
    if n < _CHECK_MIN_DRAWS:
        return figures, []
    rates = [float(a.mean()) for a in accepted]
    # a chain is stuck if every kept draw is the same point
    stuck = [k for k in range(chains) if (samples[k] == samples[k, 0]).all()]
    figures["acceptance_rate"] = rates
    figures["stuck"] = [int(k in stuck) for k in range(chains)]
    problems = []
    if stuck:
        described = [
            f"chain {k} {'never left its start' if accepted_total[k] == 0 else f'did not move in its {n} kept draws'}"
            f" (acceptance {_percent(rates[k])})"
            for k in stuck
        ]
        problems.append(f"{', '.join(described)}: {_HINT_STUCK}")
    problems += _acceptance_problems(rates, stuck, sampler_kind in _HAMILTONIAN)
    if chains >= 2:
        # infinite for chains frozen at different points, NaN for a
        # parameter with one value in every draw
        rhat, ess = _rhat_and_ess_bulk(samples)
        if not np.isnan(rhat).all():
            figures["rhat_max"] = float(np.nanmax(rhat))
        # the noise bars cost an ESS per chain and parameter: only past 1.01
        if figures["rhat_max"] > _RHAT_LIMIT:
            limits = _rhat_limits(samples)
            # a chain's ESS is undefined where it is constant: 1.01 there
            limits[np.isnan(limits)] = _RHAT_LIMIT
            excess = (rhat - 1) / (limits - 1)
            if np.nanmax(excess) > 1:
                worst = int(np.nanargmax(excess))
                limit, noise = limits[worst], limits[worst] > _RHAT_LIMIT
                problems.append(
                    f"R-hat {rhat[worst]:.3f} > {limit:.3f} (worst parameter: {names[worst]}"
                    f"{'; the most sampling noise gives at its chains’ ESS' if noise else ''}): {_HINT_RHAT}"
                )
    else:
        ess = _per_parameter("ess_bulk", samples)
    if not np.isnan(ess).all():
        worst = int(np.nanargmin(ess))
        figures["ess_bulk_min"] = float(ess[worst])
        if ess[worst] < _ESS_LIMIT:
            over = f"total over the {chains} chains of {n} draws" if chains > 1 else f"over {n} draws"
            problems.append(
                f"bulk ESS {ess[worst]:.0f} < {_ESS_LIMIT:.0f} (worst parameter: {names[worst]}; {over}): {_HINT_ESS}"
            )
    return figures, problems


def _warn_problems(problems: Sequence[str], what: str) -> None:
    """One SamplingWarning listing ``problems`` (if any), at the user's line
    that called the package."""
    if not problems:
        return
    lines = "\n".join(f"- {p}" for p in problems)
    warnings.warn(
        f"{what}: {len(problems)} problem{'s' if len(problems) > 1 else ''} with the draws "
        f"(the figures are in the output's attrs):\n{lines}",
        SamplingWarning,
        stacklevel=_parallel.outside_stacklevel(),
    )


def _evaluations(result: dict, header: dict, lengths: Sequence[int]) -> list[int]:
    """Log-density evaluations per chain: the extension's count when it
    reports one, else one for the start and one per step,
    1 + tune + draws·thin (for an interrupted run, up to the last kept draw)."""
    out = []
    for chain, n in zip(result["chains"], lengths):
        if "evaluations" in chain:
            out.append(int(chain["evaluations"]))
        else:
            draws = n if result["interrupted"] else header["draws"]
            out.append(1 + int(header["tune"]) + int(draws) * int(header["thin"]))
    return out


def _stacked(chains: list[dict], key: str, n: int) -> np.ndarray:
    """The chains' arrays ``key``, their first ``n`` draws, stacked as
    (chain, draw, …). Each chain's array is dropped from its dict once
    copied, so a long run's draws are held twice only a chain at a time."""
    first = chains[0][key]
    out = np.empty((len(chains), n) + first.shape[1:], dtype=first.dtype)
    for k, chain in enumerate(chains):
        out[k] = chain[key][:n]
        chain[key] = None
    return out


def _to_arviz(
    result: dict, header: dict, parameter_names: Sequence[str] | None, what: str, extra: dict | None = None
):
    chains = result["chains"]
    lengths = [c["samples"].shape[0] for c in chains]
    n = min(lengths)
    if result["interrupted"] and (extra or {}).get("stopped_by") == "interrupted":
        warnings.warn(
            f"sampling was interrupted: returning the partial draws ({n} per chain)",
            UserWarning,
            stacklevel=_parallel.outside_stacklevel(),
        )
    samples = _stacked(chains, "samples", n)  # (chain, draw, d)
    posterior = posterior_variables(samples, parameter_names)
    stats = {key: _stacked(chains, key, n) for key in ("lp", "accepted", "acceptance_probability")}
    names = list(parameter_names) if parameter_names is not None else [f"x[{j}]" for j in range(samples.shape[2])]
    figures, problems = _check_chains(
        samples,
        stats["accepted"],
        [int(c["accepted_total"]) for c in chains],
        json.loads(header["settings"])["kind"],
        names,
    )
    attrs = {
        "inference_library": "kameleon",
        "inference_library_version": __version__,
        "sampler": header["settings"],
        "seed": str(header["seed"]),
        "draws": int(header["draws"]),
        "tune": int(header["tune"]),
        "thin": int(header["thin"]),
        "interrupted": int(bool(result["interrupted"])),
        "rejected_non_finite": [int(c["rejected_non_finite"]) for c in chains],
        "covariance_jitters": [int(c["covariance_jitters"]) for c in chains],
        "accepted_total": [int(c["accepted_total"]) for c in chains],
        "evaluations": _evaluations(result, header, lengths),
        **figures,
        "warnings": problems,
        **({} if parameter_names is None else {"parameter_names": list(parameter_names)}),
        **(extra or {}),
    }
    _warn_problems(problems, f"{what} (seed {header['seed']})")
    return inference_data({"posterior": posterior, "sample_stats": stats}, attrs)


def _cores(cores: int | None, chains: int) -> int:
    """The number of workers: ``cores`` (checked), or the CPUs when None,
    at most one per chain (a chain runs on one worker, so more would only
    start idle threads or processes: ``cores=10**6`` tried to start a
    million)."""
    if cores is None:
        return max(1, min(chains, os.cpu_count() or 1))
    return max(1, min(_integer("cores", cores, 1), chains))


# Process workers pay off once the log density's work in a run exceeds
# this many seconds (see the README's rule and
# python/benchmarks/results/parallel_throughput.md: starting two workers
# takes about 1 s here; the work then splits over the cores).
_PROCESS_WORTH_SECONDS = 2.0
_PYTHON_KINDS = ("callable", "pseudo_marginal")


# More calls timed when the first alone would send the chains to processes:
# a first call can carry one-off costs (imports, compilation, a page fault)
# or be stalled by the machine's other work, and a density of microseconds
# timed once at 2 ms on a busy machine would start a pool for nothing.
_RETIMED_CALLS = 2


class _Timed:
    """A probe ``f(x, rng)`` that remembers how long its first call took:
    the default rule's estimate of a call's cost, from the call that checks
    the jittered starts when there is one."""

    def __init__(self, probe: Callable) -> None:
        self.probe = probe
        self.first: float | None = None

    def __call__(self, x, rng):
        if self.first is not None:
            return self.probe(x, rng)
        start = time.perf_counter()
        try:
            return self.probe(x, rng)
        finally:
            self.first = time.perf_counter() - start

    def run_seconds(self, x: np.ndarray, calls: int) -> float:
        """The estimated seconds of ``calls`` calls: the first call's time
        (calling the probe at ``x`` if it was not called yet) times
        ``calls``; where that reaches the default rule's 2 s, the shortest
        of it and up to :data:`_RETIMED_CALLS` more calls at ``x``, each
        taken only while the shortest so far still reaches it."""
        x = np.array(x, dtype=np.float64)
        if self.first is None:
            self(x, np.random.default_rng(0))
        shortest = self.first
        for _ in range(_RETIMED_CALLS):
            if shortest * calls < _PROCESS_WORTH_SECONDS:
                break
            start = time.perf_counter()
            self.probe(x, np.random.default_rng(0))
            shortest = min(shortest, time.perf_counter() - start)
        return shortest * calls


def _mode_kind(kind: str, constrained: _Unconstrained | None) -> str:
    """The kind :func:`_mode` decides by: ``kind``, except that a
    likelihood of a :class:`~kameleon.CompiledSimulator` under
    ``prior=``/``bounds=`` (a Python density whose estimates call a C
    function pointer, which no other process can call) counts as the
    compiled estimator it wraps."""
    if constrained is not None:
        likelihood = constrained.likelihood
        if isinstance(likelihood, SimulationEstimator) and likelihood._compiled is not None:
            return "simulation"
    return kind


def _mode(parallel, executor, kind: str, workers: int, chains: int, work: Callable[[], float]) -> str:
    """"thread", "process" or "executor": where the chains run (see the
    rule in :func:`sample`). ``work()`` estimates the log density's
    seconds in the whole run; it is only called when the rule needs it."""
    if parallel not in (None, "thread", "process"):
        raise ValueError(f"`parallel` must be None, 'thread' or 'process', got {parallel!r}")
    if executor is not None:
        _parallel.check_executor(executor)
        if parallel == "thread":
            raise ValueError("`executor=` runs the chains as tasks on the executor: leave `parallel` unset")
        mode = "executor"
    elif parallel is not None:
        mode = parallel
    elif kind in _PYTHON_KINDS and min(workers, chains) > 1 and work() >= _PROCESS_WORTH_SECONDS:
        obstacle = _parallel.main_script_obstacle()
        if obstacle is None:
            mode = "process"
        else:
            warnings.warn(
                "the chains run on threads, where a Python density takes turns: " + obstacle,
                RuntimeWarning,
                stacklevel=_parallel.outside_stacklevel(),
            )
            mode = "thread"
    else:
        mode = "thread"
    if mode != "thread" and kind not in _PYTHON_KINDS:
        what = {
            "vectorized": "a vectorized density (chains in lockstep run in this process)",
            "simulation": "an estimator of a CompiledSimulator (its simulations run in parallel on threads already)",
        }.get(kind, "a compiled function or a built-in target (these run in parallel on threads already)")
        raise ValueError(
            f"process workers and `executor=` run Python callables and PseudoMarginal densities, not {what}"
        )
    return mode


def sample(
    log_density,
    x0=None,
    *,
    sampler: Sampler | None = None,
    draws: int | np.integer = 1000,
    tune: int | np.integer = 1000,
    chains: int | np.integer = 4,
    cores: int | np.integer | None = None,
    seed: int | np.integer | None = None,
    thin: int | np.integer = 1,
    progress: bool = True,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: float = 60.0,
    parameter_names: Sequence[str] | None = None,
    prior=None,
    bounds=None,
    parallel: str | None = None,
    executor: concurrent.futures.Executor | None = None,
    vectorize: bool = False,
    target_ess: float | None = None,
    target_rhat: float | None = None,
    max_seconds: float | None = None,
    max_evaluations: int | np.integer | None = None,
):
    """Draws ``chains`` Markov chains of ``draws`` kept states after ``tune``
    adapting steps.

    ``log_density``: a callable ``f(x) -> float``, a :class:`PseudoMarginal`,
    a simulation estimator (:class:`kameleon.ABC`,
    :class:`kameleon.SyntheticLikelihood`, run as a :class:`PseudoMarginal`),
    a :class:`Compiled` function or a :mod:`kameleon.targets` target.
    Without ``prior=`` and ``bounds=`` it is the log posterior (unnormalised);
    with either, it is the log-likelihood (see "Priors and bounds" below).
    ``draws``, ``tune``, ``chains``, ``thin``, ``cores`` and ``seed`` take
    Python or numpy integers (not bools). Chain k uses stream k of ``seed``
    (drawn from OS entropy and recorded if None), so the result does not
    depend on ``cores``. With ``checkpoint`` the whole run is saved there
    every ``checkpoint_every`` seconds (``math.inf``: only then) and at the
    end or on Ctrl-C (a folder that does not exist or cannot be written is
    an ``OSError`` before the run);
    :func:`resume` continues it. The checkpoint records whether the log
    density is exact, and a noisy one's estimate at chain 0's start with
    the generator ``numpy.random.default_rng(0)`` (one evaluation before
    the run, not counted, drawn from no chain's stream) for :func:`resume`
    to check. Ctrl-C returns the draws so far with a
    warning. Returns ArviZ data with ``posterior`` and ``sample_stats``.

    ``x0``: the starting points, shape (chains, d), used exactly as given;
    or one point of shape (d,). From one point, chain 0 starts at ``x0``
    and chain k ≥ 1 at a jittered point ``x0 + w·ε`` so that R-hat compares
    chains that started apart: ε ~ N(0, I) from the numpy generator of
    ``SeedSequence(seed).spawn(chains)[k]`` (reproducible from ``seed``),
    and the width ``w_i = max(|x0_i|, 1)`` is halved until the point's log
    density is finite and at most ``d + 10`` below that of ``x0`` (for a
    Gaussian with ``x0`` at its mode, posterior draws lie about d/2 below:
    the starts are spread somewhat wider than the posterior, as R-hat
    wants, but not into its far tails, whatever the target's scale). After
    20 attempts the chain starts at ``x0``. This costs one evaluation of
    the log density at ``x0`` and one per attempt, from Python (a
    :class:`Compiled` function through ``ctypes``, a target through its
    ``log_density``). To start every chain at the same point, pass
    ``np.tile(x0, (chains, 1))``.

    After the run the draws are checked, and one :class:`SamplingWarning`
    lists every problem found, with what to try: a chain whose acceptance
    rate (over its kept draws) is below 1 % or above 95 % (the latter not
    for the Hamiltonian samplers HMC, KMCLite and KMCFinite, for which a
    high rate is normal), a chain whose kept draws are all one point,
    a rank-normalised split R-hat above 1.01 for some parameter (with two or
    more chains; where the chains' ESS is too small for 1.01 to tell
    disagreement from noise, above what noise gives at that ESS), and a bulk ESS below 100 (the total over the chains) for
    some parameter. Runs with fewer than 4 kept draws per chain are not
    checked. The ``attrs`` of the output carry the figures:
    ``acceptance_rate`` and ``stuck`` (0/1) per chain, ``rhat_max`` and
    ``ess_bulk_min`` (NaN where not computed), ``warnings`` (the problem
    lines) and ``evaluations``, each chain's log-density evaluations by
    the sampler (the start checks above are not counted); with
    ``parameter_names``, ``parameter_names`` too (:func:`extend` of the
    output names its draws the same).

    A Python callable receives a fresh float64 array per call (keeping it is
    safe). Exceptions it raises stop every chain and are re-raised here
    (from a worker process with the worker's traceback as the cause); NaN
    or −inf rejects the proposal.

    Where the chains run. Compiled functions and built-in targets run on
    ``cores`` Rust threads. A Python callable (or :class:`PseudoMarginal`)
    on threads takes turns on the GIL, so ``parallel`` decides: with
    ``"process"`` the chains run in ``cores`` worker processes (started
    with forkserver, or spawn where there is none; kept for later runs with
    as many workers), the density pickled once with cloudpickle and read
    once per worker from a temporary file (lambdas and closures work, and a
    closure over a large dataset is not sent with every chain; an
    unpicklable one is a ``TypeError``
    saying what to do); with ``"thread"`` on threads in this process; with
    None (the default) on processes when ``min(cores, chains) > 1`` and the
    log density's estimated work in the run (the time of one call, the one
    at ``x0`` that checks the jittered starts, or one more call at the
    first start if ``x0`` gives every chain's start, times the steps of
    all chains; where that reaches 2 s, the shortest of up to three calls
    at that point, so that a first call's one-off costs or a busy
    machine's stall do not count) is at least 2 s, else on threads (and on threads, with a
    ``RuntimeWarning``, when the run is made at a script's top level
    outside ``if __name__ == "__main__":``, which every worker would run
    again, or by a program read from standard input, which no worker can
    read again).
    ``executor``: any :class:`concurrent.futures.Executor`
    (``ProcessPoolExecutor`` with a forkserver or spawn ``mp_context``, not
    fork, loky's, a ``dask.distributed`` client's ``get_executor()``,
    ``mpi4py.futures.MPIPoolExecutor``) runs one task per chain. Every way gives the same chains for the same seed. Scripts that
    start worker processes need the ``if __name__ == "__main__":`` guard,
    as with :mod:`multiprocessing`. With workers, Ctrl-C stops every chain
    and returns the partial draws with a warning (on a user's ``executor``
    other than a Dask client's, Ctrl-C, or an exception in one chain,
    cancels the chains not started and raises at once, as the running tasks
    cannot be told to stop); progress bars are updated every 0.1 s (on a
    Dask client's executor every 0.25 s, through the scheduler; on another
    user's ``executor``, when a chain ends); with ``checkpoint``,
    each worker writes its chain to ``PATH.chainK-of-N`` and the parts are
    gathered into ``PATH`` at the end (:func:`resume` also gathers the
    parts of a run that was killed).

    Stop rules. ``draws`` is then the most a run keeps. With
    ``target_ess`` and/or ``target_rhat``, the run goes in rounds (100
    draws per chain, then doubling the draws so far, up to ``draws``, each
    round continuing the last as :func:`extend` does) and stops after the
    first round whose chains have, for every parameter, a bulk ESS (total
    over the chains) of at least ``target_ess`` and a rank-normalised split
    R-hat of at most ``target_rhat``: the draws are those of a run started
    with that round's ``draws``. The rounds need a checkpoint (a temporary
    one without ``checkpoint=``). ``max_seconds``: the run stops (within
    about 0.1 s) once that much wall time has passed since the call, with
    the draws so far (the shortest chain's length; not with a user's
    ``executor`` other than a Dask client's). ``max_evaluations``: the chains make at most that many
    log-density evaluations in all (``sum(attrs["evaluations"])``). Each
    chain gets ``max_evaluations // chains`` of them (the remainder is not
    spent), counting its start (the log density at its starting point and,
    for a whitened sampler on an exact target, the finite-difference
    curvature there: about 2d² + 4d evaluations in up to 32 dimensions, a
    few per coordinate above), and stops before a step that could take it
    past its share (a step evaluates the density once; HMC's gradients are
    not counted). The draws are then the shortest chain's length: the first
    draws of the same run without the budget, bit for bit, whatever
    ``cores``, ``parallel`` or ``executor``. A share that cannot cover a
    chain's start and its steps to the first draw (``tune + thin`` steps)
    is a ``ValueError``: before the chains evaluate anything if the steps
    alone exceed it, else as soon as a chain's start has spent what the
    steps leave it, so no chain exceeds its share. The checks of the
    starting points above (and the draws of starts from a prior) are not
    counted. With
    ``checkpoint=`` the chains' shares are saved with them: :func:`resume`
    stops where the run would have, and :func:`extend` lifts them. The output's
    ``attrs["stopped_by"]`` says which rule ended the run: "draws" (it ran
    to ``draws``), "target", "max_seconds", "max_evaluations" or
    "interrupted" (Ctrl-C). With ``checkpoint=``, ``attrs["checkpoint"]``
    names the file, and :func:`extend` continues the run from it.

    ``vectorize=True``: ``log_density`` takes a ``(k, d)`` array of k points
    and returns their k log densities; the chains run in lockstep on one
    thread of this process (whatever ``cores`` says): at each step every
    running chain draws its proposal, one call evaluates them all, and
    every chain accepts or rejects its own. The chains are the ones the
    per-point callable ``lambda x: log_density(x[None])[0]`` gives, bit for
    bit, when each row's value does not depend on the other rows. Not with ``prior=``/``bounds=``,
    :class:`PseudoMarginal`, :class:`HMC`, ``parallel="process"`` or ``executor``.

    Priors and bounds. With ``prior=`` or ``bounds=``, ``log_density`` is the
    LOG-LIKELIHOOD log L(x) (a Python callable, a :class:`PseudoMarginal`
    or a simulation estimator; not a :class:`Compiled` function or a built-in
    target, and not with HMC); without them it is the log posterior, as
    above. ``prior``: a list or tuple of :mod:`kameleon.priors` marginals, one
    per parameter (or one marginal for one parameter); a dict name → marginal
    (the names then label the output, as ``parameter_names`` would); or a
    callable log prior ``f(x) -> float`` with ``bounds``. ``bounds``: one (low, high) pair per parameter (a list, or an array of shape (d, 2)), None or
    ±inf for an open end; alone, the prior is flat on the box (so
    ``log_density`` is then both the log-likelihood and the log posterior).
    The marginals' supports are the bounds. The chains run on the
    unconstrained scale z of :mod:`kameleon.priors` (log for (0, ∞), scaled
    logit for (a, b), identity for ℝ) with the log density
    log L(x) + log p(x) + log |dx/dz| at x = T(z), so every sampler works
    unchanged; the draws come back on the constrained scale x, but
    ``sample_stats["lp"]`` is that log density of z, and the jittered starts
    (for one ``x0``) are spread on the z scale. ``x0`` is given on the
    constrained scale and must lie strictly inside the bounds; ``x0=None``
    starts chain k from a draw of the prior (with the generator of
    ``SeedSequence(seed).spawn(chains)[k]``: reproducible), the first of at
    most 20 draws where the log density is finite (each attempt costs one
    evaluation). A point that rounds onto a bound (z far out) is rejected.
    The output's ``attrs`` record the prior as ``prior``. :func:`resume`
    needs the same ``prior`` and ``bounds`` again: the checkpoint holds the
    chains on the z scale, and another prior or bounds changes the log
    density there, which :func:`resume` checks.
    """
    progress, vectorize = _flag("progress", progress), _flag("vectorize", vectorize)
    checkpoint_every = _checkpoint_every(checkpoint_every)
    sampler = KAMH() if sampler is None else sampler
    if not isinstance(sampler, Sampler):
        raise TypeError(f"`sampler` must be a kameleon sampler, got {type(sampler).__name__}")
    draws = _integer("draws", draws, 0)
    tune = _integer("tune", tune, 0)
    chains = _integer("chains", chains, 1)
    thin = _integer("thin", thin, 1)
    seed = _seed(seed)
    # checked before the starting points cost any evaluation
    rules = _StopRules(target_ess, target_rhat, max_seconds, max_evaluations, chains)
    path = _checkpoint_path(checkpoint)
    is_hmc = isinstance(sampler, HMC)
    constrained = _with_prior(log_density, prior, bounds, is_hmc)
    if constrained is not None:
        parameter_names = constrained.names(parameter_names)
        log_density = constrained.density
        x0 = constrained.starts(x0, chains, seed)
    elif x0 is None:
        raise ValueError("`x0` is required unless `prior=` gives marginals to draw the starting points from")
    x0 = _points(x0)
    if x0.ndim not in (1, 2) or (x0.ndim == 2 and x0.shape[0] != chains):
        raise ValueError(f"`x0` must have shape (d,) or ({chains}, d), got {x0.shape}")
    d = x0.shape[-1]
    _check_dimension(log_density, d, "`x0`")
    parameter_names = check_parameter_names(parameter_names, d)
    kind, function, gradient = _density(log_density, sampler.grad_log_density if is_hmc else None, is_hmc)
    if vectorize:
        kind, log_density = _lockstep(log_density, kind, constrained, is_hmc)
    probe = _Timed(_log_density_probe(log_density))
    if x0.ndim == 1:
        x0 = _jittered_starts(x0, chains, seed, probe)
    settings = json.dumps(sampler.to_dict())
    workers = _cores(cores, chains)
    mode = _mode(
        parallel, executor, _mode_kind(kind, constrained), workers, chains,
        lambda: probe.run_seconds(x0[0], chains * (tune + draws * thin)),
    )
    if max_seconds is not None and mode == "executor" and _parallel.dask_client(executor) is None:
        raise ValueError(
            "`max_seconds` cannot stop the tasks of this `executor` (only a Dask client's executor, "
            "`client.get_executor()`, can be told to): use `cores=` or threads"
        )
    launch = _Launch(kind, function, gradient, mode, workers, executor, progress, checkpoint_every, rules)
    # a user's checkpoint records the log density for resume to check
    record = None if path is None else _density_record(log_density, kind, x0[0])
    with contextlib.ExitStack() as cleanup:
        if rules.converging and path is None:
            # the rounds continue the run from a checkpoint of their own
            path = os.path.join(cleanup.enter_context(tempfile.TemporaryDirectory()), "run.ckpt")
        first = min(draws, _FIRST_ROUND) if rules.converging else draws
        result = launch.start(settings, x0, seed, first, tune, thin, path, record)
        header = {"settings": settings, "seed": seed, "draws": first, "tune": tune, "thin": thin}
        result, header, stopped_by = launch.rounds(result, header, path, draws)
    extra = {"stopped_by": stopped_by}
    if checkpoint is not None:
        extra["checkpoint"] = path
    if constrained is not None:
        constrained.constrain_result(result)
        extra["prior"] = constrained.joint.describe()
    return _to_arviz(result, header, parameter_names, "kameleon.sample", extra)


# The first round of a run with `target_ess`/`target_rhat` keeps this many
# draws per chain (fewer if `draws` is smaller); each later round doubles
# the draws so far (up to `draws`).
_FIRST_ROUND = 100


class _StopRules:
    """When a run stops before its ``draws``: the checks of ``target_ess``
    and ``target_rhat`` between rounds, the wall-time budget and the
    evaluation budget (see :func:`sample`)."""

    def __init__(self, target_ess, target_rhat, max_seconds, max_evaluations, chains: int) -> None:
        for name, value in (("target_ess", target_ess), ("target_rhat", target_rhat), ("max_seconds", max_seconds)):
            if value is not None and (not _is_real_number(value) or not math.isfinite(value) or value <= 0):
                raise ValueError(f"`{name}` must be a finite number > 0 or None, got {value!r}")
        if target_rhat is not None and target_rhat <= 1:
            raise ValueError(f"`target_rhat` must be > 1 (R-hat is at least about 1), got {target_rhat!r}")
        if target_rhat is not None and chains < 2:
            raise ValueError("`target_rhat` compares chains: it needs `chains` >= 2")
        self.ess = target_ess
        self.rhat = target_rhat
        # each chain's share of the evaluation budget (the remainder of the
        # division is not spent): a chain's steps then do not depend on the
        # others', nor on where it runs
        self.evaluation_limit = None
        if max_evaluations is not None:
            budget = _integer("max_evaluations", max_evaluations, 1)
            if budget < chains:
                raise ValueError(
                    f"`max_evaluations` {budget} gives the {chains} chains less than one evaluation each "
                    f"(each chain gets max_evaluations // chains)"
                )
            self.evaluation_limit = budget // chains
        self.deadline = None if max_seconds is None else time.monotonic() + float(max_seconds)

    @property
    def converging(self) -> bool:
        return self.ess is not None or self.rhat is not None

    def met(self, result: dict) -> bool:
        """Whether the chains of ``result`` meet the ESS and R-hat targets
        for every parameter (rank-normalised, so the scale of the chains,
        constrained or not, does not matter)."""
        lengths = [c["samples"].shape[0] for c in result["chains"]]
        n = min(lengths)
        if n < _CHECK_MIN_DRAWS:
            return False
        samples = np.stack([c["samples"][:n] for c in result["chains"]])
        if self.ess is not None and self.rhat is not None:
            rhat, ess = _rhat_and_ess_bulk(samples)
            return bool((ess >= self.ess).all() and (rhat <= self.rhat).all())
        if self.ess is not None:
            return bool((_per_parameter("ess_bulk", samples) >= self.ess).all())
        if self.rhat is not None:
            return bool((_per_parameter("rhat", samples) <= self.rhat).all())
        return True

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline


@dataclass
class _Launch:
    """How the chains of a run are started or continued: the density, where
    the chains run (threads, worker processes or an executor) and the stop
    rules."""

    kind: str
    function: Any
    gradient: Any
    mode: str
    workers: int
    executor: Any
    progress: bool
    checkpoint_every: float
    rules: _StopRules

    def _tasks(self, header: dict, chains: int, path: str | None, x0, record=None) -> list:
        key, blob = _parallel.pickle_density(self.function, self.gradient)
        run_id = secrets.token_hex(8)
        return [
            _parallel.ChainTask(
                key, blob, self.kind, header["settings"], None if x0 is None else x0[k].tolist(), header["seed"],
                header["draws"], header["tune"], header["thin"], k, run_id,
                None if path is None else _parallel.part_path(path, k, chains), self.checkpoint_every, x0 is None,
                self.rules.evaluation_limit, record,
            )
            for k in range(chains)
        ]

    def _run(self, work, totals: list[int], path, done=()) -> dict:
        """``work``: the chains' tasks for workers, or ``call(report)`` for
        threads; ``path`` the checkpoint whose parts workers write."""
        if self.mode != "thread":
            executor = self.executor if self.mode == "executor" else None
            return _run(
                lambda report: _parallel.run(work, totals, self.workers, executor, report, path),
                totals, self.progress, done, deadline=self.rules.deadline,
            )
        return _run(work, totals, self.progress, done, deadline=self.rules.deadline)

    def start(
        self, settings: str, x0: np.ndarray, seed: int, draws: int, tune: int, thin: int, path, record
    ) -> dict:
        """New chains from ``x0`` (checkpointed at ``path`` if not None,
        with ``record``, the checkpoint's record of the log density, from
        :func:`_density_record`, or None)."""
        totals = [tune + draws * thin] * x0.shape[0]
        if self.mode != "thread":
            if path is not None:
                _parallel.remove_parts(path)
            header = {"settings": settings, "seed": seed, "draws": draws, "tune": tune, "thin": thin}
            return self._run(self._tasks(header, x0.shape[0], path, x0, record), totals, path)
        return self._run(
            lambda report: _core.sample(
                settings, self.kind, self.function, self.gradient,
                # a copy: a user's array may be unaligned (e.g. read from a buffer)
                np.array(x0, dtype=np.float64, order="C"),
                seed, draws, tune, thin, self.workers, report, path, self.checkpoint_every,
                evaluation_limit=self.rules.evaluation_limit, density_record=record,
            ),
            totals,
            path,
        )

    def resume(self, path: str, header: dict) -> dict:
        """The chains of the checkpoint at ``path`` (whose ``header`` is
        given) continued."""
        chains = header["chains"]
        totals = [header["tune"] + header["draws"] * header["thin"]] * chains
        if self.mode != "thread":
            _parallel.split_checkpoint(path, chains)
            return self._run(self._tasks(header, chains, path, None), totals, path, header["steps_done"])
        return self._run(
            lambda report: _core.resume(
                path, self.kind, self.function, self.gradient, self.workers, report, self.checkpoint_every
            ),
            totals,
            path,
            header["steps_done"],
        )

    def rounds(self, result: dict, header: dict, path, draws: int):
        """Until the ESS and R-hat targets are met: lengthens the run at
        ``path`` (``header`` the result's run) by rounds, doubling its
        draws up to ``draws`` (the chains keep their evaluation limit).
        Returns the last result, its run's header and the rule that stopped
        it."""
        while True:
            if result["interrupted"]:
                return result, header, "max_seconds" if self.rules.out_of_time() else "interrupted"
            if _out_of_evaluations(result):
                return result, header, "max_evaluations"
            if not self.rules.converging:
                return result, header, "draws"
            if self.rules.met(result):
                return result, header, "target"
            if header["draws"] >= draws:
                return result, header, "draws"
            _core.extend_checkpoint(path, min(header["draws"], draws - header["draws"]), keep_evaluation_limit=True)
            header = _core.checkpoint_header(path)
            result = self.resume(path, header)


def _out_of_evaluations(result: dict) -> bool:
    """Whether the evaluation limit stopped some chain of ``result`` before
    its last step."""
    return any(c.get("out_of_evaluations", False) for c in result["chains"])


def resume(
    path: str | os.PathLike,
    log_density,
    *,
    grad_log_density: Callable | None = None,
    progress: bool = True,
    cores: int | np.integer | None = None,
    checkpoint_every: float = 60.0,
    parameter_names: Sequence[str] | None = None,
    prior=None,
    bounds=None,
    parallel: str | None = None,
    executor: concurrent.futures.Executor | None = None,
    vectorize: bool = False,
    what: str = "kameleon.resume",
):
    """Continues the run checkpointed at ``path`` with the same log density
    (and, for HMC on a Python callable, its ``grad_log_density``);
    the result is bit-identical to an uninterrupted run. The checkpoint is
    updated as the run goes on. The draws are checked as in :func:`sample`
    (a :class:`SamplingWarning` and the same ``attrs``).

    A run started with ``prior=`` or ``bounds=`` must be resumed with the
    same ``prior`` and ``bounds`` (and ``log_density`` is then the
    log-likelihood, as in :func:`sample`): the checkpoint holds the chains on
    the unconstrained scale.

    What is checked against the checkpoint before anything runs, each a
    ``ValueError`` if it fails: the dimension of a :class:`Compiled`
    function, a built-in target or the prior; whether the log density is
    exact or a noisy estimate, as the run's was; for an exact log density
    (a Python callable, vectorised or not, a :class:`Compiled` function or
    an exact built-in target, with its ``prior`` and ``bounds``) its value
    at chain 0's current point, which must be the one the run stored there;
    and for a noisy one (a :class:`PseudoMarginal`, :class:`kameleon.ABC`,
    :class:`kameleon.SyntheticLikelihood`, compiled or not, or a built-in
    target that is not exact, with its ``prior`` and ``bounds``) its
    estimate at the point the checkpoint recorded (chain 0's start) with
    the generator ``numpy.random.default_rng(0)``, which must be the
    estimate the run's estimator gave there with that generator when the
    run started. Either is one evaluation, not counted, and must agree to
    10⁻⁹, relative. So another model, data set, estimator (function,
    simulator, observed summaries, ε, ``n_simulations``), prior or bounds,
    a run resumed without its prior, or an exact run resumed with a noisy
    density or the other way round, is refused. The estimator must draw
    all its randomness from the ``rng`` it is given (as
    :class:`PseudoMarginal` requires): one that draws from elsewhere (e.g.
    numpy's global generator) does not give the recorded estimate again
    and is refused. A checkpoint written by an earlier version of kameleon
    has no such record: whether the density is exact or noisy, and which
    estimator a noisy one is, is then not checked (an exact density is
    still checked at chain 0's current point).

    A run cut by ``max_evaluations`` keeps its chains' evaluation shares:
    resumed, it stops where it would have (``attrs["stopped_by"]`` is then
    "max_evaluations").

    ``cores``, ``parallel``, ``executor`` and ``vectorize`` choose where
    the chains run, as in :func:`sample` (the default rule times the log
    density at a chain's current point). The per-chain parts ``PATH.chainK-of-N``
    that process workers write are gathered into ``path`` first. ``what``
    names the caller in warnings."""
    return _continue(
        path, log_density, None, grad_log_density=grad_log_density, progress=progress, cores=cores,
        checkpoint_every=checkpoint_every, parameter_names=parameter_names, prior=prior, bounds=bounds,
        parallel=parallel, executor=executor, vectorize=vectorize, what=what,
    )


def _continue(
    path, log_density, extend_by: int | None, *, grad_log_density, progress, cores, checkpoint_every,
    parameter_names, prior, bounds, parallel, executor, vectorize, what: str,
):
    """:func:`resume`, after lengthening the checkpoint by ``extend_by``
    draws per chain (and lifting its evaluation shares) unless it is None,
    as :func:`extend` does. The checkpoint is changed only once every
    argument has been checked against it and the mode chosen: a refused
    call leaves it as it was."""
    progress, vectorize = _flag("progress", progress), _flag("vectorize", vectorize)
    checkpoint_every = _checkpoint_every(checkpoint_every)
    # absolute: worker processes keep the folder they started in
    path = os.path.abspath(_path(path, "path"))
    _parallel.gather_parts(path)
    header = _core.checkpoint_header(_existing_checkpoint(path))
    _check_dimension(log_density, header["dim"], "the checkpointed run")
    is_hmc = json.loads(header["settings"])["kind"] == "HMC"
    log_density, parameter_names, constrained = _checkpointed_prior(
        log_density, prior, bounds, is_hmc, header["dim"], parameter_names
    )
    parameter_names = check_parameter_names(parameter_names, header["dim"])
    kind, function, gradient = _density(log_density, grad_log_density, is_hmc)
    if vectorize:
        kind, log_density = _lockstep(log_density, kind, constrained, is_hmc)
    _check_same_density(
        log_density, kind, header["density"], header["positions"][0], header["log_densities"][0], what
    )
    if extend_by is not None:
        # the run's header once lengthened, so that the cores and the mode
        # are checked and chosen before the file changes
        header = {**header, "draws": header["draws"] + extend_by}
    chains = header["chains"]
    workers = _cores(cores, chains)
    remaining = chains * (header["tune"] + header["draws"] * header["thin"]) - sum(header["steps_done"])
    mode = _mode(
        parallel,
        executor,
        _mode_kind(kind, constrained),
        workers,
        chains,
        lambda: _Timed(_log_density_probe(log_density)).run_seconds(header["positions"][0], remaining),
    )
    rules = _StopRules(None, None, None, None, chains)
    launch = _Launch(kind, function, gradient, mode, workers, executor, progress, checkpoint_every, rules)
    if extend_by is not None:
        _core.extend_checkpoint(path, extend_by)
        header = _core.checkpoint_header(path)
    result = launch.resume(path, header)
    if result["interrupted"]:
        stopped_by = "interrupted"
    else:
        stopped_by = "max_evaluations" if _out_of_evaluations(result) else "draws"
    extra = {"stopped_by": stopped_by, "checkpoint": path}
    if constrained is not None:
        constrained.constrain_result(result)
        extra["prior"] = constrained.joint.describe()
    return _to_arviz(result, header, parameter_names, what, extra)


def extend(
    source,
    log_density,
    *,
    draws: int | np.integer,
    grad_log_density: Callable | None = None,
    progress: bool = True,
    cores: int | np.integer | None = None,
    checkpoint_every: float = 60.0,
    parameter_names: Sequence[str] | None = None,
    prior=None,
    bounds=None,
    parallel: str | None = None,
    executor: concurrent.futures.Executor | None = None,
    vectorize: bool = False,
):
    """Continues a run by ``draws`` more kept draws per chain: the result is
    bit-identical to a run started with that many more draws (a chain's
    steps do not depend on its length). ``source``: the run's checkpoint
    file, or the output of :func:`sample`, :func:`resume` or :func:`extend`
    run with ``checkpoint=`` (its ``attrs["checkpoint"]`` names the file;
    a run without a checkpoint cannot be continued, as its random streams'
    states are gone). The checkpoint is lengthened in place and updated as
    the run goes on. The other arguments are those of :func:`resume`,
    ``log_density`` (with ``prior``/``bounds``) the same as the run's.
    An output names its draws as its run did (``attrs["parameter_names"]``,
    unless ``parameter_names`` is given); a checkpoint's path needs
    ``parameter_names`` again, as :func:`resume` does.
    The chains' evaluation shares of ``max_evaluations`` are lifted: a run
    cut by them goes on to its draws, as the run without the budget."""
    draws = _integer("draws", draws, 0)
    if isinstance(source, (str, bytes, os.PathLike)):
        path = _path(source, "source")
    else:
        attrs = getattr(getattr(source, "posterior", None), "attrs", {})
        if "checkpoint" not in attrs:
            raise ValueError(
                "`extend` continues a run from its checkpoint: pass the checkpoint's path, or the output of a run "
                "made with `checkpoint=` (this one has no `checkpoint` in its attrs)"
            )
        path = attrs["checkpoint"]
        if parameter_names is None and "parameter_names" in attrs:
            parameter_names = [str(name) for name in attrs["parameter_names"]]
    return _continue(
        path, log_density, draws, grad_log_density=grad_log_density, progress=progress, cores=cores,
        checkpoint_every=checkpoint_every, parameter_names=parameter_names, prior=prior, bounds=bounds,
        parallel=parallel, executor=executor, vectorize=vectorize, what="kameleon.extend",
    )
