"""The g-and-k distribution fitted by ABC (pseudo-marginal, Gaussian kernel).

The g-and-k distribution is defined by its quantile function

    Q(u; a, b, g, k) = a + b (1 + 0.8 tanh(g z / 2)) (1 + z²)^k z,   z = Φ⁻¹(u),

so it is trivial to simulate from but has no closed-form density: a
standard test of likelihood-free inference. The data are 1000 draws at the
true (a, b, g, k) = (3, 1, 2, 0.5) and the summaries are the robust
octile-based statistics of Drovandi & Pettitt (2011), with E₁…E₇ the
sample octiles: S_a = E₄, S_b = E₆ − E₂, S_g = (E₆ + E₂ − 2E₄)/S_b,
S_k = (E₇ − E₅ + E₃ − E₁)/S_b.

The sample octile E_j is the order statistic x₍₁₂₅ⱼ₎ of the 1000 draws.
As Q is increasing (for k ≥ 0, the whole prior range), it is Q of the
matching uniform order statistic, and
the seven uniform order statistics are drawn exactly from eight gamma
spacings (U₍ₖ₎ = (G₁ + … + G_j)/(G₁ + … + G₈)), so one simulated data set
costs eight gamma draws instead of 1000 draws and a sort.

The prior is U(0, 10) on each parameter (``prior=``; the chains run on the
logit scale). The likelihood is ``km.ABC`` with the per-summary kernel width
ε = 0.5 × the bootstrap sd of each observed summary (1000 resamples of the
data: no knowledge of the truth is used), so the ε-posterior is the
posterior with the summaries' noise variance inflated by a factor about
1 + 0.5² = 1.25. ``N_SIMULATIONS`` = 50 simulations per estimate give a
log-likelihood sd of about 0.3 at the pilot point (``km.log_likelihood_sd``;
fewer would do, but simulations are cheap here).

Starting point: away from the data, the ABC estimate is tiny and extremely
variable (its log has an sd of 3 or more a few posterior sd from the
truth), so pseudo-marginal chains
started from prior draws stick for thousands of steps on lucky estimates.
The chains therefore start at a pilot point (jittered per chain by
``km.sample``): the minimiser of the ε-scaled distance between the observed
summaries and the mean of 200 simulations with common random numbers
(a smooth function of θ), found by Nelder–Mead from the best of 200 prior
draws (about 0.2 s).

Run ``python python/examples/g_and_k_abc.py [small|full]``.

- ``small`` (what the test runs, about 2 s): data set 0, 2 chains of
  1000 draws after 1000 tuning steps of the default sampler (KAMH).
  Measured: a 2.924 ± 0.034, b 0.87 ± 0.09, g 2.20 ± 0.28,
  k 0.58 ± 0.12 (posterior mean ± sd; truth 3, 1, 2, 0.5): every mean
  within 2.3 posterior sd of the truth; the 90 % interval of a misses it
  (this data set's median is 1.8 sd of the sample median below 3, and the
  full run agrees); log-likelihood sd 0.26 at the pilot.
- ``full``: 10 data sets (seeds 0–9), each 4 chains of 5000 draws after
  3000 tuning steps (45 s in all). Measured: the central 90 % intervals
  covered the truth in 36 of 40 cases (nominal 90 %); log-likelihood sd
  0.26 to 0.42 at the pilots. Seven data sets warned of an R-hat of 1.011
  to 1.024, and data set 4 of R-hat 1.32 and bulk ESS 10: one of its
  chains ended tuning with too narrow a proposal (acceptance 55 % against
  21–24 % for the others) and explored only a third of the posterior's
  spread (its intervals still covered the truth).
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np
from scipy.optimize import minimize
from scipy.special import ndtri

import kameleon as km
from kameleon import priors

TRUTH = {"a": 3.0, "b": 1.0, "g": 2.0, "k": 0.5}
PRIOR = {name: priors.Uniform(0.0, 10.0) for name in TRUTH}
N_DATA = 1000
OCTILE_RANKS = np.arange(1, 8) * (N_DATA // 8)  # 1-based ranks of E₁…E₇
N_SIMULATIONS = 50
EPSILON_FACTOR = 0.5


def quantile(z, theta):
    """Q at standard normal quantiles ``z`` (any shape; θ broadcast on the
    last axis is not needed: θ is one point)."""
    a, b, g, k = theta
    return a + b * (1.0 + 0.8 * np.tanh(0.5 * g * z)) * (1.0 + z * z) ** k * z


def octile_summaries(octiles: np.ndarray) -> np.ndarray:
    """The four robust summaries from octiles (..., 7)."""
    e1, e2, e3, e4, e5, e6, e7 = np.moveaxis(octiles, -1, 0)
    spread = e6 - e2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.stack([e4, spread, (e6 + e2 - 2.0 * e4) / spread, (e7 - e5 + e3 - e1) / spread], axis=-1)


def summaries_of_data(data: np.ndarray) -> np.ndarray:
    """The summaries of data sets (..., 1000)."""
    ordered = np.sort(data, axis=-1)
    return octile_summaries(ordered[..., OCTILE_RANKS - 1])


def simulator(theta, n: int, rng: np.random.Generator) -> np.ndarray:
    """The summaries of ``n`` simulated data sets of 1000 draws, shape (n, 4),
    from the exact joint law of the seven order statistics."""
    shapes = np.diff(np.concatenate([[0], OCTILE_RANKS, [N_DATA + 1]]))
    spacings = rng.standard_gamma(shapes, size=(n, shapes.size))
    totals = np.cumsum(spacings, axis=1)
    uniforms = totals[:, :-1] / totals[:, -1:]
    return octile_summaries(quantile(ndtri(uniforms), theta))


def model(seed: int):
    """(observed summaries, ε) for 1000 draws at the truth with ``seed``."""
    rng = np.random.default_rng(seed)
    data = quantile(rng.standard_normal(N_DATA), list(TRUTH.values()))
    observed = summaries_of_data(data)
    resamples = data[rng.integers(0, N_DATA, size=(1000, N_DATA))]
    epsilon = EPSILON_FACTOR * summaries_of_data(resamples).std(axis=0)
    return observed, epsilon


def pilot(observed: np.ndarray, epsilon: np.ndarray, seed: int) -> np.ndarray:
    """The starting point: θ minimising the ε-scaled squared distance between
    ``observed`` and the mean summaries of 200 simulations drawn with a fixed
    seed (common random numbers), by Nelder–Mead from the best of 200 prior
    draws."""
    low, high = PRIOR["a"].support

    def distance(theta):
        if not ((theta > low) & (theta < high)).all():
            return np.inf
        mean = simulator(theta, 200, np.random.default_rng([seed, 2])).mean(axis=0)
        return float((((mean - observed) / epsilon) ** 2).sum())

    rng = np.random.default_rng([seed, 1])
    candidates = np.array([[m.draw(rng) for m in PRIOR.values()] for _ in range(200)])
    best = min(candidates, key=distance)
    return minimize(distance, best, method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-3}).x


def fit(seed: int, draws: int, tune: int, chains: int, progress: bool = False) -> dict:
    """The ε-posterior of one data set: per parameter the mean, sd, central
    90 % interval and whether it covers the truth; the pilot point and the
    log-likelihood sd there; and the run's warnings."""
    observed, epsilon = model(seed)
    likelihood = km.ABC(simulator, observed, epsilon, N_SIMULATIONS, batched=True)
    x0 = pilot(observed, epsilon, seed)
    with warnings.catch_warnings():
        # the problems are kept in the output's attrs (below)
        warnings.simplefilter("ignore", km.SamplingWarning)
        idata = km.sample(
            likelihood, x0, prior=PRIOR, draws=draws, tune=tune, chains=chains, seed=seed, progress=progress
        )
    out = {
        "seed": seed,
        "start": x0.tolist(),
        "log_likelihood_sd": km.log_likelihood_sd(likelihood, x0, repeats=30, seed=seed),
        "warnings": list(idata.posterior.attrs["warnings"]),
    }
    for name, true in TRUTH.items():
        values = idata.posterior[name].values
        low, high = np.quantile(values, [0.05, 0.95])
        out[name] = {
            "mean": float(values.mean()),
            "sd": float(values.std()),
            "interval": (float(low), float(high)),
            "covered": bool(low <= true <= high),
        }
    return out


def main(size: str = "small", progress: bool = False) -> dict:
    """Runs the example at ``size`` ``"small"`` or ``"full"`` and prints and
    returns the results (see the module docstring)."""
    if size not in ("small", "full"):
        raise ValueError(f'`size` must be "small" or "full", got {size!r}')
    start = time.perf_counter()
    if size == "small":
        fits = [fit(0, draws=1000, tune=1000, chains=2, progress=progress)]
    else:
        fits = [fit(seed, draws=5000, tune=3000, chains=4, progress=progress) for seed in range(10)]
    covered = sum(f[name]["covered"] for f in fits for name in TRUTH)
    result = {
        "size": size,
        "fits": fits,
        "covered": covered,
        "intervals": len(fits) * len(TRUTH),
        "seconds": time.perf_counter() - start,
    }
    for f in fits:
        line = ", ".join(
            f"{name} {f[name]['mean']:.3f} ± {f[name]['sd']:.3f} (truth {true}, 90 % interval "
            f"{'covers' if f[name]['covered'] else 'MISSES'})"
            for name, true in TRUTH.items()
        )
        print(f"data set {f['seed']}: {line}; log-likelihood sd at the pilot {f['log_likelihood_sd']:.2f}")
        if f["warnings"]:
            print(f"  warnings: {'; '.join(f['warnings'])}")
    print(
        f"90 % intervals covering the truth: {covered} of {result['intervals']} "
        f"({result['seconds']:.1f} s)"
    )
    return result


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "small", progress=False)
