"""``sample`` and ``resume``: chains run in Rust, results as ArviZ data."""

from __future__ import annotations

import json
import os
import secrets
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from . import _core
from ._arviz import inference_data, posterior_variables
from .samplers import HMC, KAMH, Sampler
from .targets import Target

__all__ = ["sample", "resume", "PseudoMarginal", "Compiled"]


@dataclass(frozen=True)
class PseudoMarginal:
    """A noisy log density ``f(x, rng) -> float``: the log of a non-negative
    unbiased estimate of the (unnormalised) density.

    ``rng`` is a fresh ``numpy.random.Generator`` per call, seeded from the
    chain's own stream, so runs are reproducible. The estimate of the current
    state is kept, never recomputed (exact pseudo-marginal MCMC).
    """

    function: Callable


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

    address: int
    dim: int
    owner: Any = None


def _density(log_density, gradient: Callable | None, needs_gradient: bool):
    """(kind, function, gradient) for the Rust side."""
    if isinstance(log_density, Target):
        return "builtin", log_density._inner, None
    if isinstance(log_density, Compiled):
        return "compiled", int(log_density.address), None
    if isinstance(log_density, PseudoMarginal):
        return "pseudo_marginal", log_density.function, None
    if callable(log_density):
        if needs_gradient and gradient is None:
            raise ValueError("HMC on a Python callable needs `grad_log_density`")
        return "callable", log_density, gradient
    raise TypeError(
        "log_density must be a callable, PseudoMarginal, Compiled or a kameleon.targets target, "
        f"got {type(log_density).__name__}"
    )


class _Progress:
    """One tqdm bar per chain, updated by the polling thread."""

    def __init__(self, totals: Sequence[int], done: Sequence[int] = ()) -> None:
        from tqdm.auto import tqdm

        self.bars = [
            tqdm(total=int(t), initial=int(done[k]) if done else 0, desc=f"chain {k}", position=k, leave=True)
            for k, t in enumerate(totals)
        ]

    def __call__(self, steps: list[int]) -> None:
        for bar, n in zip(self.bars, steps):
            if n > bar.n:
                bar.update(n - bar.n)

    def close(self) -> None:
        for bar in self.bars:
            bar.close()


def _run(call, totals, progress: bool, done=()):
    bars = _Progress(totals, done) if progress else None
    try:
        return call(bars)
    finally:
        if bars is not None:
            bars.close()


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("kameleon")
    except Exception:  # pragma: no cover - not installed as a distribution
        return "unknown"


def _to_arviz(result: dict, header: dict, parameter_names: Sequence[str] | None):
    chains = result["chains"]
    lengths = [c["samples"].shape[0] for c in chains]
    n = min(lengths)
    if result["interrupted"]:
        warnings.warn(
            f"sampling was interrupted: returning the partial draws ({n} per chain)",
            UserWarning,
            stacklevel=3,
        )
    samples = np.stack([c["samples"][:n] for c in chains])  # (chain, draw, d)
    posterior = posterior_variables(samples, parameter_names)
    stats = {
        "lp": np.stack([c["lp"][:n] for c in chains]),
        "accepted": np.stack([c["accepted"][:n] for c in chains]),
        "acceptance_probability": np.stack([c["acceptance_probability"][:n] for c in chains]),
    }
    attrs = {
        "inference_library": "kameleon",
        "inference_library_version": _version(),
        "sampler": header["settings"],
        "seed": str(header["seed"]),
        "draws": int(header["draws"]),
        "tune": int(header["tune"]),
        "thin": int(header["thin"]),
        "interrupted": int(bool(result["interrupted"])),
        "rejected_non_finite": [int(c["rejected_non_finite"]) for c in chains],
        "covariance_jitters": [int(c["covariance_jitters"]) for c in chains],
        "accepted_total": [int(c["accepted_total"]) for c in chains],
    }
    return inference_data({"posterior": posterior, "sample_stats": stats}, attrs)


def _cores(cores: int | None, chains: int) -> int:
    if cores is None:
        return max(1, min(chains, os.cpu_count() or 1))
    if not isinstance(cores, int) or cores < 1:
        raise ValueError(f"`cores` must be a positive integer, got {cores!r}")
    return cores


def sample(
    log_density,
    x0,
    *,
    sampler: Sampler | None = None,
    draws: int = 1000,
    tune: int = 1000,
    chains: int = 4,
    cores: int | None = None,
    seed: int | None = None,
    thin: int = 1,
    progress: bool = True,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: float = 60.0,
    parameter_names: Sequence[str] | None = None,
):
    """Draws ``chains`` Markov chains of ``draws`` kept states after ``tune``
    adapting steps.

    ``log_density``: a callable ``f(x) -> float``, a :class:`PseudoMarginal`,
    a :class:`Compiled` function or a :mod:`kameleon.targets` target.
    ``x0``: shape (d,) for every chain or (chains, d). Chain k uses stream k
    of ``seed`` (drawn from OS entropy and recorded if None), so the result
    does not depend on ``cores``. With ``checkpoint`` the whole run is saved
    there every ``checkpoint_every`` seconds and at the end or on Ctrl-C;
    :func:`resume` continues it. Ctrl-C returns the draws so far with a
    warning. Returns ArviZ data with ``posterior`` and ``sample_stats``.

    A Python callable receives a fresh float64 array per call (keeping it is
    safe) and is called under the GIL: chains take turns. Exceptions it
    raises stop every chain and are re-raised here; NaN or −inf rejects the
    proposal.
    """
    sampler = KAMH() if sampler is None else sampler
    if not isinstance(sampler, Sampler):
        raise TypeError(f"`sampler` must be a kameleon sampler, got {type(sampler).__name__}")
    for name, value, minimum in (("draws", draws, 0), ("tune", tune, 0), ("chains", chains, 1), ("thin", thin, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
    x0 = np.asarray(x0, dtype=np.float64)
    if x0.ndim == 1:
        x0 = np.tile(x0, (chains, 1))
    if x0.ndim != 2 or x0.shape[0] != chains:
        raise ValueError(f"`x0` must have shape (d,) or ({chains}, d), got {x0.shape}")
    if isinstance(log_density, Compiled) and log_density.dim != x0.shape[1]:
        raise ValueError(f"`x0` has dimension {x0.shape[1]} but the compiled function has dim {log_density.dim}")
    if seed is None:
        seed = secrets.randbits(64)
    if not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ValueError(f"`seed` must be an integer in [0, 2**64), got {seed!r}")
    is_hmc = isinstance(sampler, HMC)
    kind, function, gradient = _density(log_density, sampler.grad_log_density if is_hmc else None, is_hmc)
    settings = json.dumps(sampler.to_dict())
    header = {"settings": settings, "seed": seed, "draws": draws, "tune": tune, "thin": thin}
    totals = [tune + draws * thin] * chains
    result = _run(
        lambda bars: _core.sample(
            settings,
            kind,
            function,
            gradient,
            np.ascontiguousarray(x0),
            seed,
            draws,
            tune,
            thin,
            _cores(cores, chains),
            bars,
            None if checkpoint is None else os.fspath(checkpoint),
            float(checkpoint_every),
        ),
        totals,
        progress,
    )
    return _to_arviz(result, header, parameter_names)


def resume(
    path: str | os.PathLike,
    log_density,
    *,
    grad_log_density: Callable | None = None,
    progress: bool = True,
    cores: int | None = None,
    checkpoint_every: float = 60.0,
    parameter_names: Sequence[str] | None = None,
):
    """Continues the run checkpointed at ``path`` with the same log density
    (and, for HMC on a Python callable, its ``grad_log_density``);
    the result is bit-identical to an uninterrupted run. The checkpoint is
    updated as the run goes on."""
    path = os.fspath(path)
    header = _core.checkpoint_header(path)
    is_hmc = json.loads(header["settings"])["kind"] == "HMC"
    kind, function, gradient = _density(log_density, grad_log_density, is_hmc)
    chains = header["chains"]
    totals = [header["tune"] + header["draws"] * header["thin"]] * chains
    result = _run(
        lambda bars: _core.resume(
            path, kind, function, gradient, _cores(cores, chains), bars, float(checkpoint_every)
        ),
        totals,
        progress,
    )
    return _to_arviz(result, header, parameter_names)
