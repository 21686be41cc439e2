"""``sample_ensemble``: the affine-invariant ensemble sampler, run in Rust."""

from __future__ import annotations

import secrets
import warnings
from typing import Sequence

import numpy as np

from . import _core
from ._arviz import inference_data, posterior_variables
from ._sample import Compiled, _density, _run, _version

__all__ = ["sample_ensemble"]


def _default_walkers(dim: int) -> int:
    """max(2·d, 32): 2·d is the usual minimum for the stretch move; 32 keeps
    the ensemble large enough for the walkers to explore together in low
    dimensions, at a cost of 32 evaluations per sweep."""
    return max(2 * dim, 32)


def sample_ensemble(
    log_density,
    x0,
    *,
    walkers: int | None = None,
    draws: int = 1000,
    tune: int = 1000,
    a: float = 2.0,
    seed: int | None = None,
    progress: bool = False,
    parameter_names: Sequence[str] | None = None,
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
    ``walkers``: the ensemble size W (more than d; default ``max(2 * d, 32)``,
    or the rows of a 2-d ``x0``). ``a``: the stretch scale (> 1).
    ``seed``: drawn from OS entropy and recorded if None; a seed gives the
    same result every time.

    Returns ArviZ data whose ``posterior`` has the walkers as its ``chain``
    dimension (as ``arviz.from_emcee``), and ``sample_stats`` with ``lp``
    (the stored log density of each kept state) and ``accepted`` (whether
    the walker's move in that sweep was accepted). The walkers interact, so
    they are not independent chains: per-chain R-hat and ESS computed over
    walkers overstate the information, and standard errors should come from
    the ensemble average over sweeps (e.g. by batch means).

    Exceptions raised by a Python log density stop the run and are re-raised
    here; NaN or −inf rejects the proposal. Ctrl-C returns the sweeps so far
    with a warning.
    """
    for name, value, minimum in (("draws", draws, 0), ("tune", tune, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
    x0 = np.asarray(x0, dtype=np.float64)
    if x0.ndim == 1:
        x0 = x0[None, :]
        if walkers is None:
            walkers = _default_walkers(x0.shape[1])
    elif x0.ndim == 2:
        if walkers is None:
            walkers = x0.shape[0]
        elif walkers != x0.shape[0]:
            raise ValueError(f"`x0` has {x0.shape[0]} rows but `walkers` is {walkers}")
    else:
        raise ValueError(f"`x0` must have shape (d,) or (walkers, d), got {x0.shape}")
    if not isinstance(walkers, int) or isinstance(walkers, bool) or walkers < 2:
        raise ValueError(f"`walkers` must be an integer >= 2, got {walkers!r}")
    if not isinstance(a, (int, float)) or isinstance(a, bool) or not np.isfinite(a) or a <= 1:
        raise ValueError(f"`a` must be a finite number > 1, got {a!r}")
    d = x0.shape[1]
    if isinstance(log_density, Compiled) and log_density.dim != d:
        raise ValueError(f"`x0` has dimension {d} but the compiled function has dim {log_density.dim}")
    if seed is None:
        seed = secrets.randbits(64)
    if not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ValueError(f"`seed` must be an integer in [0, 2**64), got {seed!r}")
    kind, function, _ = _density(log_density, None, False)
    result = _run(
        lambda bars: _core.sample_ensemble(
            kind, function, np.ascontiguousarray(x0), walkers, float(a), seed, draws, tune, bars
        ),
        [tune + draws],
        progress,
    )
    return _to_arviz(result, seed, float(a), walkers, draws, tune, parameter_names)


def _to_arviz(result: dict, seed: int, a: float, walkers: int, draws: int, tune: int, parameter_names):
    if result["interrupted"]:
        warnings.warn(
            f"sampling was interrupted: returning the partial draws ({result['samples'].shape[0]} sweeps)",
            UserWarning,
            stacklevel=3,
        )
    samples = np.swapaxes(result["samples"], 0, 1)  # (walker, sweep, d)
    posterior = posterior_variables(samples, parameter_names)
    stats = {
        "lp": np.swapaxes(result["lp"], 0, 1),
        "accepted": np.swapaxes(result["accepted"], 0, 1),
    }
    attrs = {
        "inference_library": "kameleon",
        "inference_library_version": _version(),
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
    }
    return inference_data({"posterior": posterior, "sample_stats": stats}, attrs)
