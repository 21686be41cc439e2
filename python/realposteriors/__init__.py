"""Eight real posteriors from Stan's posterior database, as numpy log densities.

>>> import realposteriors as rp
>>> post = rp.load("diamonds")           # or the full name "diamonds-diamonds"
>>> post.dim, post.log_density(post.x0)  # doctest: +SKIP
>>> rp.score(post, draws)                # draws (chains, n, d), unconstrained  # doctest: +SKIP

Each :class:`Posterior` has the log density of Stan's unconstrained
parameter vector (Jacobians included, additive constants dropped), maps to
and from the reference draws' constrained parameters, and a summary of those
reference draws (``post.reference``). See README.md for the provenance.
"""

from __future__ import annotations

import functools
import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from ._models import BUILDERS, Model

__all__ = ["NAMES", "SCORED_UNCONSTRAINED", "Posterior", "Reference", "load", "load_all", "resolve", "score"]

NAMES: tuple[str, ...] = tuple(BUILDERS)
DATA = Path(__file__).parent / "data"

# Constrained parameters with no finite posterior variance, scored on their
# unconstrained coordinate (named here) instead. one_comp's K_m and V_m: along
# the likelihood's V_m/K_m ridge the log density falls as exactly −2·log K_m
# (test_one_comp_tail_in_log_k_m_is_exp_minus_two_u), so their densities fall
# as x⁻³: the reference "sd" is only the sd of its 10 000 draws (the sd of K_m
# truncated at 10², 10³, 10⁴, 10⁶ is 5.1, 7.9, 10.1, 13.5), and exact
# independent draws land within 10 % of it with probability 0.2–0.4
# (python/benchmarks/results/real_posteriors/one_comp_tail.md). Their logs
# have every moment.
SCORED_UNCONSTRAINED: Mapping[str, Mapping[str, str]] = {
    "one_comp_mm_elim_abs-one_comp_mm_elim_abs": {"K_m": "log(K_m)", "V_m": "log(V_m)"},
}


@dataclass(frozen=True)
class Reference:
    """Summary of the posteriordb reference draws (10 chains × 1000 draws).

    ``mean``, ``sd``: per constrained parameter (``parameter_names``) over all
    draws; ``sd_relative_se``: the standard error of ``sd`` relative to it,
    from the spread of the per-chain sds (large for heavy-tailed parameters);
    ``unconstrained_mean``, ``unconstrained_sd``: per unconstrained
    coordinate; ``draws``: every 10th draw on the unconstrained scale,
    shape (10, 100, d).
    """

    parameter_names: tuple[str, ...]
    mean: np.ndarray
    sd: np.ndarray
    sd_relative_se: np.ndarray
    names: tuple[str, ...]
    unconstrained_mean: np.ndarray
    unconstrained_sd: np.ndarray
    draws: np.ndarray
    n_draws: int


class Posterior:
    """One posterior: ``log_density(theta)`` of θ of shape (dim,) on the
    unconstrained scale (−inf outside the support or on numeric failure),
    ``names`` of the θ coordinates, ``parameter_names`` of the constrained
    parameters (as in the reference draws), ``constrain``/``unconstrain``,
    a starting point ``x0`` (the unconstrained reference mean) and the
    ``reference`` summary."""

    def __init__(self, name: str, model: Model, reference: Reference):
        self.name = name
        self._model = model
        self.log_density = model.log_density
        self.dim = model.dim
        self.names = model.names
        self.parameter_names = model.parameter_names
        self.reference = reference
        self.x0 = reference.unconstrained_mean.copy()

    def __repr__(self) -> str:
        return f"Posterior({self.name!r}, dim={self.dim})"

    def __call__(self, theta) -> float:
        return self.log_density(theta)

    def constrain(self, theta) -> np.ndarray:
        """Constrained parameters (..., p), in the order of ``parameter_names``,
        of θ of shape (..., dim)."""
        t = np.asarray(theta, dtype=np.float64)
        if t.shape[-1:] != (self.dim,):
            raise ValueError(f"theta must have shape (..., {self.dim}), got {t.shape}")
        out = self._model.constrain(t.reshape(-1, self.dim))
        return out.reshape(t.shape[:-1] + (len(self.parameter_names),))

    def constrain_dict(self, theta) -> dict[str, float]:
        """``{parameter name: value}`` of one θ of shape (dim,)."""
        values = self.constrain(np.asarray(theta, dtype=np.float64).reshape(self.dim))
        return {k: float(v) for k, v in zip(self.parameter_names, values)}

    def unconstrain(self, values) -> np.ndarray:
        """θ (..., dim) of constrained values: a mapping from every name in
        ``parameter_names`` to a value (or equally shaped arrays), or an array
        (..., p) in that order. Raises ValueError outside the support."""
        if isinstance(values, Mapping):
            missing = set(self.parameter_names) - set(values)
            if missing:
                raise ValueError(f"missing parameters: {sorted(missing)}")
            v = np.stack([np.asarray(values[k], dtype=np.float64) for k in self.parameter_names], axis=-1)
        else:
            v = np.asarray(values, dtype=np.float64)
        p = len(self.parameter_names)
        if v.shape[-1:] != (p,):
            raise ValueError(f"values must have shape (..., {p}), got {v.shape}")
        out = self._model.unconstrain(v.reshape(-1, p))
        return out.reshape(v.shape[:-1] + (self.dim,))

    @functools.cached_property
    def covariance(self) -> np.ndarray:
        """Covariance (dim, dim) of the thinned unconstrained reference draws."""
        return np.atleast_2d(np.cov(self.reference.draws.reshape(-1, self.dim), rowvar=False))

    def starts(self, n: int, seed=None, scale: float = 1.0) -> np.ndarray:
        """``n`` starting points (n, dim): x0 + scale · L z with z ~ N(0, I)
        from ``numpy.random.default_rng(seed)`` and L Lᵀ = :attr:`covariance`.

        The jitter follows the posterior's correlations: a jitter of the same
        marginal sds along the axes would put the starts of the strongly
        correlated posteriors (kilpisjarvi, diamonds) thousands of log-density
        units below the typical set; with ``scale=1`` the starts' log
        densities are spread like those of posterior draws."""
        z = np.random.default_rng(seed).standard_normal((n, self.dim))
        return self.x0 + scale * z @ np.linalg.cholesky(self.covariance).T


def resolve(name: str) -> str:
    """The full posterior name of ``name``: a full name, either half of one
    (``"diamonds"``, ``"hmm_drive_0"``) or a unique prefix."""
    if name in BUILDERS:
        return name
    halves = [n for n in NAMES if name in n.split("-")]
    if len(halves) == 1:
        return halves[0]
    prefixed = [n for n in NAMES if n.startswith(name)]
    if len(prefixed) == 1:
        return prefixed[0]
    raise KeyError(f"unknown or ambiguous posterior {name!r}; known: {', '.join(NAMES)}")


def _read_data(name: str) -> dict:
    with gzip.open(DATA / name / "data.json.gz", "rt") as f:
        return json.load(f)


def _read_reference(name: str, model: Model) -> Reference:
    summary = json.loads((DATA / name / "reference.json").read_text())
    params = summary["parameters"]
    coords = summary["unconstrained"]
    if tuple(p["name"] for p in params) != model.parameter_names or tuple(c["name"] for c in coords) != model.names:
        raise ValueError(f"{name}: reference.json does not match the model; rebuild with build_data")
    draws = np.load(DATA / name / summary["thinned_draws"]["file"])
    draws.setflags(write=False)
    return Reference(
        parameter_names=model.parameter_names,
        mean=np.array([p["mean"] for p in params]),
        sd=np.array([p["sd"] for p in params]),
        sd_relative_se=np.array([p["sd_relative_se"] for p in params]),
        names=model.names,
        unconstrained_mean=np.array([c["mean"] for c in coords]),
        unconstrained_sd=np.array([c["sd"] for c in coords]),
        draws=draws,
        n_draws=int(summary["chains"]) * int(summary["draws_per_chain"]),
    )


@functools.lru_cache(maxsize=None)
def load(name: str) -> Posterior:
    """The posterior ``name`` (see :func:`resolve`), built from the committed data."""
    full = resolve(name)
    model = BUILDERS[full](_read_data(full))
    return Posterior(full, model, _read_reference(full, model))


def load_all() -> list[Posterior]:
    return [load(n) for n in NAMES]


def score(posterior: Posterior | str, draws, *, mean_tol: float = 0.1, sd_tol: float = 0.1) -> dict:
    """Scores draws on the unconstrained scale, shape (chains, n, dim) or
    (n, dim), against the reference: every draw is constrained and, per
    constrained parameter, the pooled mean and sd are compared with the
    reference's. A parameter passes when |mean − ref mean| ≤ mean_tol · ref sd
    and |sd / ref sd − 1| ≤ sd_tol; the draws pass when every parameter does
    (and every draw is finite). A parameter with no finite posterior
    variance (``SCORED_UNCONSTRAINED``: one_comp's K_m and V_m) is scored
    the same way on its unconstrained coordinate (its log), whose reference
    mean and sd exist; its entry names that coordinate in ``"scored_as"``.

    Returns ``{"passed", "n_draws", "worst_mean_error", "worst_sd_error",
    "parameters": [{"name", "scored_as", "mean", "sd", "reference_mean",
    "reference_sd", "mean_error" (in reference sds), "sd_ratio", "passed"},
    ...]}``.
    """
    post = load(posterior) if isinstance(posterior, str) else posterior
    x = np.asarray(draws, dtype=np.float64)
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[2] != post.dim:
        raise ValueError(f"draws must have shape (chains, n, {post.dim}) or (n, {post.dim}), got {x.shape}")
    with np.errstate(all="ignore"):
        c = post.constrain(x.reshape(-1, post.dim))
    finite = bool(np.all(np.isfinite(c)))
    ref = post.reference
    # per constrained parameter: the values scored and their reference moments
    scored_as = list(post.parameter_names)
    values = c.copy()
    ref_mean, ref_sd = ref.mean.copy(), ref.sd.copy()
    for name, coordinate in SCORED_UNCONSTRAINED.get(post.name, {}).items():
        j, u = post.parameter_names.index(name), ref.names.index(coordinate)
        scored_as[j] = coordinate
        values[:, j] = x.reshape(-1, post.dim)[:, u]
        ref_mean[j], ref_sd[j] = ref.unconstrained_mean[u], ref.unconstrained_sd[u]
    with np.errstate(all="ignore"):
        mean = values.mean(axis=0)
        sd = values.std(axis=0, ddof=1) if len(values) > 1 else np.full(values.shape[1], np.nan)
    mean_error = (mean - ref_mean) / ref_sd
    sd_ratio = sd / ref_sd
    ok = (np.abs(mean_error) <= mean_tol) & (np.abs(sd_ratio - 1.0) <= sd_tol)
    parameters = [
        {
            "name": k,
            "scored_as": scored_as[j],
            "mean": float(mean[j]),
            "sd": float(sd[j]),
            "reference_mean": float(ref_mean[j]),
            "reference_sd": float(ref_sd[j]),
            "mean_error": float(mean_error[j]),
            "sd_ratio": float(sd_ratio[j]),
            "passed": bool(ok[j]),
        }
        for j, k in enumerate(post.parameter_names)
    ]
    return {
        "posterior": post.name,
        "passed": bool(finite and ok.all()),
        "n_draws": int(len(c)),
        "finite": finite,
        "worst_mean_error": float(np.nanmax(np.abs(mean_error))) if finite else float("inf"),
        "worst_sd_error": float(np.nanmax(np.abs(sd_ratio - 1.0))) if finite else float("inf"),
        "parameters": parameters,
    }
