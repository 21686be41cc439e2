"""``prior=`` and ``bounds=`` for :func:`kameleon.sample_ensemble`: the
walkers move on the unconstrained scale of :mod:`kameleon.priors`, as the
chains of :func:`kameleon.sample` do, and their draws come back constrained."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ._checks import _integer
from ._sample import _points, _Unconstrained, _with_prior


def with_prior(
    log_density,
    x0,
    walkers: int | None,
    seed: int,
    prior,
    bounds,
    parameter_names: Sequence[str] | None,
    default_walkers: Callable[[int], int],
) -> tuple[object, np.ndarray, Sequence[str] | None, _Unconstrained | None]:
    """(log density, starting points, parameter names, the unconstrained
    density or None) of a run with ``prior``/``bounds``; without them the
    arguments unchanged (``x0`` is then required). ``x0`` is on the
    constrained scale, shape (d,) or (walkers, d); ``x0=None`` starts each
    of the ``walkers`` (default ``default_walkers(d)``) at a draw of the
    prior, walker k from the generator of ``SeedSequence(seed).spawn(W)[k]``."""
    constrained = _with_prior(log_density, prior, bounds, False)
    if constrained is None:
        if x0 is None:
            raise ValueError("`x0` is required unless `prior=` gives marginals to draw the walkers' starts from")
        return log_density, x0, parameter_names, None
    names = constrained.names(parameter_names)
    if x0 is None:
        count = default_walkers(constrained.joint.dim) if walkers is None else _integer("walkers", walkers, 2)
        return constrained.density, constrained.starts(None, count, seed), names, constrained
    x0 = _points(x0)
    rows = x0.shape[0] if x0.ndim == 2 else 1
    return constrained.density, constrained.starts(x0, rows, seed), names, constrained
