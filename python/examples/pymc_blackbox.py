"""A PyMC model with a black-box likelihood, sampled by kameleon.

An epidemic follows the SIR equations dS/dt = −β S I, dI/dt = β S I − γ I
(fractions of a population of ``POPULATION``, I(0) = ``I0``), and the
daily new cases, ``POPULATION`` · (S(t − 1) − S(t)) for days 1..``DAYS``,
are observed as Poisson counts. The likelihood is computed by SciPy's ODE
solver (``scipy.integrate.odeint``) inside a ``pytensor.graph.Op`` with no
gradient: the usual way to put external code into a PyMC model, and the
reason NUTS cannot run on it. The priors are PyMC's:
β ~ LogNormal(log 0.4, 0.5), γ ~ LogNormal(log 0.2, 0.5), with the
deterministic R₀ = β/γ. ``km.from_pymc`` gives the log density on PyMC's
unconstrained space (log β, log γ) — a Python callable, since the Op runs in
Python — and the draws come back named and constrained as ``pm.sample``
returns them. The data are simulated at β = 0.5, γ = 0.2 (R₀ = 2.5).

The reference is the exact posterior by quadrature: the unnormalised
posterior on a 201 × 201 grid in (log β, log γ) over ±6 sd of the
sampled posterior (the midpoint rule; the mass outside is negligible), its
moments computed from the grid weights.

Run ``python python/examples/pymc_blackbox.py [small|full]``.

- ``small`` (what the test runs, about 1 s of sampling after PyMC's
  import): 2 chains of 500 draws after 500 tuning steps of km.AM(), no
  reference. Measured: β 0.469 ± 0.023, γ 0.172 ± 0.026, R₀ 2.77 ± 0.31
  (bulk ESS about 168, no warning).
- ``full``: 4 chains of 5000 draws after 2000 tuning steps of km.AM(), and
  the grid reference. Measured (12 s of sampling, 29 s of quadrature, with
  three other builds on the 2 cores): β 0.4669 ± 0.0239 (reference
  0.4682 ± 0.0243), γ 0.1698 ± 0.0270 (reference 0.1713 ± 0.0274),
  R₀ 2.801 ± 0.331 (reference 2.786 ± 0.338), posterior mean ± sd; the
  means lie 1.7, 1.7 and 1.3 Monte Carlo standard errors (sd/√ESS, bulk
  ESS about 900) from the reference's, and the sds within 2.5 %. The
  truth (β 0.5, γ 0.2) lies 1.4 and 1.1 posterior sd from the means.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from typing import Any

import numpy as np

import kameleon as km

POPULATION = 1000.0
I0 = 1.0 / POPULATION
DAYS = 40
TRUTH = {"beta": 0.5, "gamma": 0.2}
DATA_SEED = 7
# posterior mean and sd of the full run's reference (quadrature), for the
# test of the small run
REFERENCE = {"beta": (0.4682, 0.0243), "gamma": (0.1713, 0.0274), "R0": (2.786, 0.338)}


def new_cases(beta: float, gamma: float) -> np.ndarray:
    """The expected daily new cases on days 1..DAYS."""
    from scipy.integrate import odeint

    def sir(state, t):
        s, i = state
        infection = beta * s * i
        return [-infection, infection - gamma * i]

    susceptible = odeint(sir, [1.0 - I0, I0], np.arange(DAYS + 1.0), rtol=1e-8, atol=1e-10)[:, 0]
    return np.maximum(POPULATION * -np.diff(susceptible), 1e-12)


def simulate_data() -> np.ndarray:
    return np.random.default_rng(DATA_SEED).poisson(new_cases(**TRUTH)).astype(np.float64)


def poisson_log_likelihood(beta: float, gamma: float, counts: np.ndarray) -> float:
    """log p(counts | β, γ), the counts independent Poisson."""
    rate = new_cases(beta, gamma)
    return float((counts * np.log(rate) - rate).sum() - sum(math.lgamma(c + 1.0) for c in counts))


def black_box(counts: np.ndarray):
    """The Op (β, γ) ↦ log p(counts | β, γ): Python code, no gradient."""
    import pytensor.tensor as pt
    from pytensor.graph import Apply, Op

    class SIRLogLikelihood(Op):
        def make_node(self, beta, gamma):
            inputs = [pt.as_tensor_variable(beta), pt.as_tensor_variable(gamma)]
            return Apply(self, inputs, [pt.dscalar()])

        def perform(self, node, inputs, outputs):
            beta, gamma = (float(v) for v in inputs)
            outputs[0][0] = np.asarray(poisson_log_likelihood(beta, gamma, counts))

    return SIRLogLikelihood()


def build_model(counts: np.ndarray):
    import pymc as pm

    with pm.Model() as model:
        beta = pm.LogNormal("beta", math.log(0.4), 0.5)
        gamma = pm.LogNormal("gamma", math.log(0.2), 0.5)
        pm.Deterministic("R0", beta / gamma)
        pm.Potential("likelihood", black_box(counts)(beta, gamma))
    return model


def quadrature(counts: np.ndarray, centre: np.ndarray, scale: np.ndarray, points: int = 201) -> dict:
    """Posterior mean and sd of β, γ and R₀ by the midpoint rule on a
    ``points``² grid in (log β, log γ), centre ± 6 scale."""
    grids = [np.linspace(c - 6 * s, c + 6 * s, points) for c, s in zip(centre, scale)]
    log_beta, log_gamma = np.meshgrid(*grids, indexing="ij")
    log_post = np.empty_like(log_beta)
    for index in np.ndindex(log_beta.shape):
        lb, lg = log_beta[index], log_gamma[index]
        # LogNormal priors on (β, γ) times the Jacobian e^(lb + lg) of the
        # log scale: normal densities of lb and lg
        prior = -0.5 * ((lb - math.log(0.4)) / 0.5) ** 2 - 0.5 * ((lg - math.log(0.2)) / 0.5) ** 2
        log_post[index] = prior + poisson_log_likelihood(math.exp(lb), math.exp(lg), counts)
    weights = np.exp(log_post - log_post.max())
    weights /= weights.sum()
    values = {"beta": np.exp(log_beta), "gamma": np.exp(log_gamma), "R0": np.exp(log_beta - log_gamma)}
    out = {}
    for name, v in values.items():
        mean = float((weights * v).sum())
        out[name] = (mean, math.sqrt(float((weights * (v - mean) ** 2).sum())))
    return out


def main(size: str = "small", progress: bool = False) -> dict:
    """Runs the example at ``size`` ``"small"`` or ``"full"`` and prints and
    returns the results (see the module docstring)."""
    if size not in ("small", "full"):
        raise ValueError(f'`size` must be "small" or "full", got {size!r}')
    counts = simulate_data()
    posterior = km.from_pymc(build_model(counts))
    draws, tune, chains = (500, 500, 2) if size == "small" else (5000, 2000, 4)
    start = time.perf_counter()
    with warnings.catch_warnings():
        # the problems are kept in the output's attrs (below)
        warnings.simplefilter("ignore", km.SamplingWarning)
        idata = posterior.sample(sampler=km.AM(), draws=draws, tune=tune, chains=chains, seed=1, progress=progress)
    seconds = time.perf_counter() - start
    result: dict[str, Any] = {"size": size, "compiled": posterior.compiled, "seconds": seconds, "posterior": {}}
    for name in ("beta", "gamma", "R0"):
        values = idata.posterior[name].values
        ess = float(km.diagnostics.ess_bulk(values))
        result["posterior"][name] = {
            "mean": float(values.mean()),
            "sd": float(values.std()),
            "ess_bulk": ess,
            "mcse": float(values.std()) / math.sqrt(ess),
        }
    result["warnings"] = list(idata.posterior.attrs["warnings"])
    print(f"log density compiled: {posterior.compiled}; {chains} chains of {draws} draws in {seconds:.1f} s")
    if size == "full":
        z = np.stack([np.log(idata.posterior[n].values.ravel()) for n in ("beta", "gamma")])
        start = time.perf_counter()
        result["reference"] = quadrature(counts, z.mean(axis=1), z.std(axis=1))
        print(f"quadrature reference in {time.perf_counter() - start:.1f} s")
    for name, p in result["posterior"].items():
        line = f"{name}: {p['mean']:.4f} ± {p['sd']:.4f} (bulk ESS {p['ess_bulk']:.0f})"
        if "reference" in result:
            mean, sd = result["reference"][name]
            line += f"; reference {mean:.4f} ± {sd:.4f}, error {(p['mean'] - mean) / p['mcse']:+.2f} MCSE"
        print(line)
    if result["warnings"]:
        print(f"warnings: {'; '.join(result['warnings'])}")
    return result


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "small", progress=False)
