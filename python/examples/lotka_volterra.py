"""The Lotka–Volterra predator–prey ODE with positive parameters given
LogNormal and Gamma priors through ``prior=``.

Prey x and predators y follow

    dx/dt = α x − β x y,    dy/dt = δ x y − γ y,    (x, y)(0) = (10, 5),

solved with ``scipy.integrate.solve_ivp`` (LSODA, rtol = atol = 10⁻⁶;
parameters whose solution explodes are cut off after ``MAX_EVALUATIONS``
evaluations of the rates, and the likelihood there is −inf).
Both populations are observed at t = 1, …, 15 with multiplicative noise:
log(observed) = log(solution) + N(0, σ²). The data are simulated at the
true (α, β, γ, δ, σ) = (1, 0.1, 1.5, 0.075, 0.2).

All five parameters are positive. The log density passed to ``km.sample``
is the log-likelihood only, and the priors are marginals:
α ~ LogNormal(log 0.8, 0.5), β ~ LogNormal(log 0.05, 1),
γ ~ LogNormal(log 1.2, 0.5), δ ~ LogNormal(log 0.05, 1), σ ~ Gamma(2, 10)
(mean 0.2). The chains run on the log scale of each parameter and the draws
come back as positive values named after the dict's keys.

Starting point: an ODE fit has local modes (trajectories whose cycles are
out of phase with the data), and chains started from prior draws can settle
in different ones. The chains start (jittered per chain by ``km.sample``)
at a gradient-matching pilot: the least-squares fit of the finite
differences of log(observed) to α − β y and δ x − γ (no ODE solve), with σ
the sd of the log residuals of one ODE solution at those rates.

Run ``python python/examples/lotka_volterra.py [small|full]`` (needs scipy).

- ``small`` (what the test runs, about 4 s): 2 chains of 400 draws after
  400 tuning steps of the default sampler (KAMH). Measured:
  α 0.94 ± 0.04, β 0.093 ± 0.006, γ 1.57 ± 0.09, δ 0.084 ± 0.005,
  σ 0.165 ± 0.018 (posterior mean ± sd; truth 1, 0.1, 1.5, 0.075, 0.2);
  every mean within 0.25 full-size posterior sd of the full-size mean
  (``FULL_POSTERIOR``), but a short run that says so: R-hat 1.86, bulk
  ESS 3, and its too narrow intervals cover 3 of the 5 truths.
- ``full``: 4 chains of 5000 draws after 2000 tuning steps of the default
  sampler (KAMH), compared with a reference run of adaptive Metropolis
  (4 chains of 20000 draws after 2000 tuning steps) and with the truth
  (175 s in all). Measured: the two runs' means differ by at most 0.5
  Monte Carlo standard errors and their sds by at most 3 %; all five 90 %
  intervals cover the truth; the KAMH run warned of an R-hat of 1.014
  (γ). Posterior means ± sd in ``FULL_POSTERIOR``.
"""

from __future__ import annotations

import math
import sys
import time
import warnings

import numpy as np
from scipy.integrate import solve_ivp

import kameleon as km
from kameleon import priors

TRUTH = {"alpha": 1.0, "beta": 0.1, "gamma": 1.5, "delta": 0.075, "sigma": 0.2}
PRIOR = {
    "alpha": priors.LogNormal(math.log(0.8), 0.5),
    "beta": priors.LogNormal(math.log(0.05), 1.0),
    "gamma": priors.LogNormal(math.log(1.2), 0.5),
    "delta": priors.LogNormal(math.log(0.05), 1.0),
    "sigma": priors.Gamma(2.0, 10.0),
}
# The full-size posterior (measured: mean, sd) of the data set of seed 0,
# which the small-size test compares with.
FULL_POSTERIOR = {
    "alpha": (0.9264, 0.0750),
    "beta": (0.0922, 0.0100),
    "gamma": (1.5926, 0.1390),
    "delta": (0.0859, 0.0101),
    "sigma": (0.1690, 0.0245),
}
TIMES = np.arange(1.0, 16.0)
START = np.array([10.0, 5.0])


# A solve may evaluate the rates at most this often (about 400 times near
# the data): parameters whose solution explodes overflow, and LSODA can then
# step for ever, so past this budget the solve stops and the likelihood is
# −inf.
MAX_EVALUATIONS = 20000


class TooExpensive(Exception):
    """Raised by the rates to stop a solve past ``MAX_EVALUATIONS``."""


def solve(theta) -> np.ndarray | None:
    """The populations at ``TIMES``, shape (15, 2), or None if the solver
    fails or needs more than ``MAX_EVALUATIONS`` evaluations of the rates."""
    alpha, beta, gamma, delta = (float(v) for v in theta[:4])
    evaluations = 0

    def rates(t, state):
        nonlocal evaluations
        evaluations += 1
        if evaluations > MAX_EVALUATIONS:
            raise TooExpensive
        x, y = float(state[0]), float(state[1])
        return [alpha * x - beta * x * y, delta * x * y - gamma * y]

    try:
        solution = solve_ivp(rates, (0.0, TIMES[-1]), START, t_eval=TIMES, method="LSODA", rtol=1e-6, atol=1e-6)
    except TooExpensive:
        return None
    return solution.y.T if solution.success else None


def data(seed: int) -> np.ndarray:
    """Observations at the truth, shape (15, 2)."""
    truth = np.array(list(TRUTH.values()))
    noise = np.random.default_rng(seed).standard_normal((TIMES.size, 2))
    return solve(truth) * np.exp(truth[4] * noise)


def log_likelihood_of(observed: np.ndarray):
    """The log-likelihood θ ↦ log p(observed | θ) (up to a constant); −inf
    where the solver fails or a population is not positive."""
    log_observed = np.log(observed)

    def log_likelihood(theta):
        solution = solve(theta)
        if solution is None or not (solution > 0).all():
            return -math.inf
        residuals = log_observed - np.log(solution)
        sigma = theta[4]
        return float(-0.5 * (residuals * residuals).sum() / sigma**2 - residuals.size * math.log(sigma))

    return log_likelihood


def gradient_matching(observed: np.ndarray) -> np.ndarray:
    """The pilot θ: d log x/dt = α − β y and d log y/dt = δ x − γ fitted by
    least squares to the finite differences of log(observed) (populations
    at the interval midpoints), absolute values taken; σ is the sd of the
    log residuals of the ODE solution at those rates."""
    times = np.concatenate([[0.0], TIMES])
    states = np.vstack([START, observed])
    slopes = np.diff(np.log(states), axis=0) / np.diff(times)[:, None]
    middle = 0.5 * (states[1:] + states[:-1])
    ones = np.ones(middle.shape[0])
    alpha, beta = np.linalg.lstsq(np.column_stack([ones, -middle[:, 1]]), slopes[:, 0], rcond=None)[0]
    delta, gamma = np.linalg.lstsq(np.column_stack([middle[:, 0], -ones]), slopes[:, 1], rcond=None)[0]
    rates_ = np.abs([alpha, beta, gamma, delta])
    solution = solve(rates_)
    sigma = float(np.std(np.log(observed) - np.log(solution))) if solution is not None else 0.5
    return np.append(rates_, sigma)


def summary(idata) -> dict:
    """Per parameter the posterior mean, sd, its Monte Carlo standard error
    (sd / √ESS), the central 90 % interval and whether it covers the truth."""
    out = {}
    for name, true in TRUTH.items():
        values = idata.posterior[name].values
        low, high = np.quantile(values, [0.05, 0.95])
        out[name] = {
            "mean": float(values.mean()),
            "sd": float(values.std()),
            "mcse": float(values.std() / math.sqrt(km.diagnostics.ess(values))),
            "interval": (float(low), float(high)),
            "covered": bool(low <= true <= high),
        }
    return out


def run(log_likelihood, x0, sampler, draws: int, tune: int, chains: int, seed: int, progress: bool):
    """(summary, the problems the run warned of) of one run."""
    with warnings.catch_warnings():
        # the problems are kept in the output's attrs (below)
        warnings.simplefilter("ignore", km.SamplingWarning)
        idata = km.sample(
            log_likelihood,
            x0,
            prior=PRIOR,
            sampler=sampler,
            draws=draws,
            tune=tune,
            chains=chains,
            seed=seed,
            progress=progress,
        )
    return summary(idata), list(idata.posterior.attrs["warnings"])


def main(size: str = "small", progress: bool = False) -> dict:
    """Runs the example at ``size`` ``"small"`` or ``"full"`` and prints and
    returns the results (see the module docstring)."""
    if size not in ("small", "full"):
        raise ValueError(f'`size` must be "small" or "full", got {size!r}')
    start = time.perf_counter()
    observed = data(seed=0)
    log_likelihood = log_likelihood_of(observed)
    x0 = gradient_matching(observed)
    if size == "small":
        posterior, found = run(log_likelihood, x0, None, 400, 400, 2, 1, progress)
        reference = None
    else:
        posterior, found = run(log_likelihood, x0, None, 5000, 2000, 4, 1, progress)
        reference, _ = run(log_likelihood, x0, km.AM(), 20000, 2000, 4, 2, progress)
    result = {
        "size": size,
        "start": x0.tolist(),
        "posterior": posterior,
        "reference": reference,
        "warnings": found,
        "covered": sum(p["covered"] for p in posterior.values()),
        "seconds": time.perf_counter() - start,
    }
    for name, true in TRUTH.items():
        p = posterior[name]
        line = f"{name}: {p['mean']:.4f} ± {p['sd']:.4f} (MCSE {p['mcse']:.4f}; truth {true}"
        line += f", 90 % interval {'covers' if p['covered'] else 'MISSES'})"
        if reference is not None:
            r = reference[name]
            z = (p["mean"] - r["mean"]) / math.hypot(p["mcse"], r["mcse"])
            line += f"; reference {r['mean']:.4f} ± {r['sd']:.4f}, difference {z:+.1f} MCSE"
        print(line)
    print(f"90 % intervals covering the truth: {result['covered']} of {len(TRUTH)} ({result['seconds']:.1f} s)")
    if found:
        print(f"warnings: {'; '.join(found)}")
    return result


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "small", progress=False)
