"""Convergence diagnostics of the Rust diagnostics crate on numpy arrays.

``ess_bulk``, ``ess_tail``, ``ess`` and ``rhat`` take draws of shape
(chains, draws) and return a float, or (chains, draws, d) and return an
array of d values.
"""

from __future__ import annotations

import numpy as np

from . import _core

__all__ = ["ess_bulk", "ess_tail", "ess", "rhat", "mmd"]


def _per_dim(draws, f):
    a = np.asarray(draws, dtype=np.float64)
    if a.ndim == 2:
        return f(np.ascontiguousarray(a))
    if a.ndim == 3:
        return np.array([f(np.ascontiguousarray(a[:, :, j])) for j in range(a.shape[2])])
    raise ValueError(f"draws must have shape (chains, draws) or (chains, draws, d), got {a.shape}")


def ess_bulk(draws):
    """Bulk ESS of the rank-normalised split chains (Vehtari et al. 2021)."""
    return _per_dim(draws, _core.ess_bulk_2d)


def ess_tail(draws):
    """Tail ESS: the smaller ESS of the 5% and 95% quantile indicators."""
    return _per_dim(draws, _core.ess_tail_2d)


def ess(draws):
    """Multi-chain ESS with Geyer's initial monotone sequence on the chains as given
    (ArviZ's ``method="mean"`` applies it to the split chains)."""
    return _per_dim(draws, _core.ess_2d)


def rhat(draws):
    """Rank-normalised split R-hat (the maximum of bulk and folded)."""
    return _per_dim(draws, _core.rhat_2d)


def mmd(x, y, *, kernel: str = "gaussian", bandwidth: float = 1.0, offset: float = 1.0,
        degree: int = 3, unbiased: bool = False) -> float:
    """Squared MMD between samples ``x`` (n, d) and ``y`` (m, d).

    ``kernel``: ``"gaussian"`` or ``"laplacian"`` with length-scale
    ``bandwidth``, or ``"polynomial"`` (offset + xᵀy)^degree. ``unbiased``:
    the U-statistic (can be negative) instead of the V-statistic.
    """
    x = np.ascontiguousarray(np.atleast_2d(np.asarray(x, dtype=np.float64)))
    y = np.ascontiguousarray(np.atleast_2d(np.asarray(y, dtype=np.float64)))
    return _core.mmd2_2d(x, y, kernel, float(bandwidth), float(offset), int(degree), bool(unbiased))
