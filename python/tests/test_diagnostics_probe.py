"""The diagnostics as a demanding user meets them: agreement with ArviZ on
awkward inputs (short chains, ties, discrete and heavy-tailed draws, odd
lengths, strong autocorrelation) and clear errors on bad ones."""

import warnings

import arviz as az
import numpy as np
import pytest

from kameleon import diagnostics


def ar1(chains, n, rho, seed):
    rng = np.random.default_rng(seed)
    x = np.empty((chains, n))
    x[:, 0] = rng.standard_normal(chains)
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + np.sqrt(1 - rho**2) * rng.standard_normal(chains)
    return x


def _draws(name):
    rng = np.random.default_rng(sum(map(ord, name)))  # a fixed seed per case
    return {
        "iid 4x1000": lambda: rng.standard_normal((4, 1000)),
        "iid 4x1001 (odd)": lambda: rng.standard_normal((4, 1001)),
        "iid 1x1000": lambda: rng.standard_normal((1, 1000)),
        "iid 4x4": lambda: rng.standard_normal((4, 4)),
        "iid 4x7": lambda: rng.standard_normal((4, 7)),
        "iid 2x5": lambda: rng.standard_normal((2, 5)),
        "iid 4x12": lambda: rng.standard_normal((4, 12)),
        "ar 0.9 4x200": lambda: ar1(4, 200, 0.9, 3),
        "ar 0.99 4x200": lambda: ar1(4, 200, 0.99, 3),
        "ar 0.99 3x51": lambda: ar1(3, 51, 0.99, 4),
        "ar -0.5 4x500": lambda: ar1(4, 500, -0.5, 5),
        "cauchy 4x1000": lambda: rng.standard_cauchy((4, 1000)),
        "one chain shifted": lambda: rng.standard_normal((4, 500)) + np.array([0, 0, 0, 3.0])[:, None],
        "poisson ties": lambda: rng.poisson(2.0, (4, 500)).astype(float),
        "bernoulli 0.5": lambda: rng.binomial(1, 0.5, (4, 500)).astype(float),
        "bernoulli 0.02": lambda: rng.binomial(1, 0.02, (4, 500)).astype(float),
        "integers": lambda: rng.integers(0, 1000, (4, 300)),
        "float32": lambda: rng.standard_normal((4, 300)).astype(np.float32),
    }[name]()


CASES = [
    "iid 4x1000",
    "iid 4x1001 (odd)",
    "iid 1x1000",
    "iid 4x4",
    "iid 4x7",
    "iid 2x5",
    "iid 4x12",
    "ar 0.9 4x200",
    "ar 0.99 4x200",
    "ar 0.99 3x51",
    "ar -0.5 4x500",
    "cauchy 4x1000",
    "one chain shifted",
    "poisson ties",
    "bernoulli 0.5",
    "bernoulli 0.02",
    "integers",
    "float32",
]

# The same estimators on the same draws differ only by summation order (the
# FFT autocovariance here, numpy's there): measured below 1e-12 relative, so
# 1e-9 asserts "the same number" while any difference of method (a ρ̂₀ that
# is not exactly 1, another truncation of the autocorrelation sum, other
# quantiles) shows as at least 1e-4 on these chains.
RTOL = 1e-9


def _arviz(f, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(f(x))


@pytest.mark.parametrize("name", CASES)
def test_ess_and_rhat_equal_arviz_on_awkward_draws(name):
    x = _draws(name)
    xf = np.asarray(x, dtype=np.float64)
    np.testing.assert_allclose(diagnostics.ess_bulk(x), _arviz(lambda a: az.ess(a, method="bulk"), xf), rtol=RTOL)
    np.testing.assert_allclose(
        diagnostics.ess_tail(x), _arviz(lambda a: az.ess(a, method="tail", prob=(0.05, 0.95)), xf), rtol=RTOL
    )
    # ArviZ's "mean" ESS is the same Geyer sum on the split chains
    half = xf.shape[1] // 2
    split = np.concatenate([xf[:, :half], xf[:, xf.shape[1] - half :]])
    if half >= 4:
        np.testing.assert_allclose(diagnostics.ess(split), _arviz(lambda a: az.ess(a, method="mean"), xf), rtol=RTOL)
    if xf.shape[0] >= 2:  # ArviZ gives no R-hat for one chain; ours splits it
        np.testing.assert_allclose(diagnostics.rhat(x), _arviz(lambda a: az.rhat(a, method="rank"), xf), rtol=RTOL)

