"""Convergence diagnostics of the Rust diagnostics crate on numpy arrays.

``ess_bulk``, ``ess_tail``, ``ess`` and ``rhat`` take draws of shape
(chains, draws) and return a float, or (chains, draws, d) and return an
array of d values.
"""

from __future__ import annotations

import math

import numpy as np

from . import _core
from ._checks import _flag, _integer, _is_real_number, _real_array

__all__ = ["ess_bulk", "ess_tail", "ess", "rhat", "mmd"]


def _per_dim(draws, name: str):
    """The diagnostic ``name`` of draws (chains, draws), or of each parameter
    of draws (chains, draws, d), computed in parallel over the parameters."""
    a = _real_array(draws, "`draws` is", "shape (chains, draws) or (chains, draws, d)")
    if a.ndim == 2:
        return _core.per_parameter(a[:, :, None], name, False)[0]
    if a.ndim == 3:
        return np.array(_core.per_parameter(a, name, False))
    raise ValueError(f"draws must have shape (chains, draws) or (chains, draws, d), got {a.shape}")


def ess_bulk(draws):
    """Bulk ESS of the rank-normalised split chains (Vehtari et al. 2021)."""
    return _per_dim(draws, "ess_bulk")


def ess_tail(draws):
    """Tail ESS: the smaller ESS of the 5% and 95% quantile indicators."""
    return _per_dim(draws, "ess_tail")


def ess(draws):
    """Multi-chain ESS with Geyer's initial monotone sequence on the chains as given
    (ArviZ's ``method="mean"`` applies it to the split chains)."""
    return _per_dim(draws, "ess")


def rhat(draws):
    """Rank-normalised split R-hat (the maximum of bulk and folded)."""
    return _per_dim(draws, "rhat")


def _sample(value, name: str) -> np.ndarray:
    """A sample as a contiguous (n, d) float64 array; 1-d means n scalar draws."""
    a = _real_array(value, f"`{name}` is", "shape (n, d), or (n,) for scalar draws")
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"`{name}` must have shape (n, d), or (n,) for scalar draws, got {a.shape}")
    return np.ascontiguousarray(a)


def mmd(x, y, *, kernel: str = "gaussian", bandwidth: float = 1.0, offset: float = 1.0,
        degree: int | np.integer = 3, unbiased: bool = False) -> float:
    """Squared MMD between samples ``x`` (n, d) and ``y`` (m, d); a 1-d
    array is n scalar draws.

    ``kernel``: ``"gaussian"`` exp(−‖x − y‖²/(2·bandwidth²)), ``"laplacian"``
    exp(−‖x − y‖₁/bandwidth) (the L1 distance), or ``"polynomial"``
    (offset + xᵀy)^degree with an integer ``degree`` >= 1. ``unbiased``: the
    U-statistic (can be negative) instead of the V-statistic.
    """
    x, y = _sample(x, "x"), _sample(y, "y")
    degree = _integer("degree", degree, 1)
    for name, value in (("bandwidth", bandwidth), ("offset", offset)):
        if not _is_real_number(value):
            raise ValueError(f"`{name}` must be a real number, got {value!r}")
    if kernel in ("gaussian", "laplacian") and not (math.isfinite(bandwidth) and bandwidth > 0):
        raise ValueError(f"`bandwidth` must be finite and > 0, got {bandwidth!r}")
    return _core.mmd2_2d(x, y, kernel, float(bandwidth), float(offset), degree, _flag("unbiased", unbiased))
