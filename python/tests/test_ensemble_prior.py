"""km.sample_ensemble with prior= and bounds=."""

import math

import numpy as np
import pytest

import kameleon as km
from kameleon import priors

# λ ~ Gamma(A, B) with Poisson counts Y: λ | Y ~ Gamma(A + ΣY, B + n);
# p ~ Beta(2, 3) with K successes in N: p | K ~ Beta(2 + K, 3 + N − K)
A, B = 2.0, 0.5
Y = np.random.default_rng(3).poisson(3.0, size=20)
N, K = 30, 11


def log_likelihood(x):
    rate, p = x
    return float(Y.sum() * math.log(rate) - Y.size * rate + K * math.log(p) + (N - K) * math.log1p(-p))


def check_ensemble_moments(draws, mean, sd):
    """The walkers interact, so the Monte Carlo error comes from the series
    of ensemble averages over sweeps (its own ESS), not from per-walker
    ESS: the mean and the variance within 5 standard errors of that series
    (a correct sampler fails with probability ~1e-6 per moment)."""
    for values, expected in ((draws, mean), ((draws - mean) ** 2, sd**2)):
        series = values.mean(axis=0)  # (sweep,)
        se = series.std() / math.sqrt(km.diagnostics.ess(series[None, :]))
        assert abs(series.mean() - expected) < 5 * se, (series.mean(), expected, se)


def test_prior_marginals_give_the_conjugate_posteriors_and_constrained_draws():
    prior = {"rate": priors.Gamma(A, B), "p": priors.Beta(2.0, 3.0)}
    idata = km.sample_ensemble(log_likelihood, None, prior=prior, walkers=16, draws=2500, tune=500, seed=2,
                               progress=False)
    posterior = idata.posterior
    assert list(posterior.data_vars) == ["rate", "p"]
    assert posterior["rate"].shape == (16, 2500)
    assert (posterior["rate"] > 0).all() and ((posterior["p"] > 0) & (posterior["p"] < 1)).all()
    shape, rate = A + Y.sum(), B + Y.size
    check_ensemble_moments(posterior["rate"].values, shape / rate, math.sqrt(shape) / rate)
    a, b = 2.0 + K, 3.0 + N - K
    check_ensemble_moments(posterior["p"].values, a / (a + b), math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1))))


def test_bounds_alone_start_from_a_constrained_x0():
    # flat prior on (0, ∞) × (0, 1): the posterior is the normalised likelihood,
    # Gamma(1 + ΣY, n) and Beta(1 + K, 1 + N − K)
    idata = km.sample_ensemble(log_likelihood, [3.0, 0.5], bounds=[(0, None), (0, 1)], walkers=16, draws=2500,
                               tune=500, seed=3, progress=False)
    x = idata.posterior["x"].values
    assert x.shape == (16, 2500, 2)
    shape, rate = 1.0 + Y.sum(), float(Y.size)
    check_ensemble_moments(x[..., 0], shape / rate, math.sqrt(shape) / rate)
    a, b = 1.0 + K, 1.0 + N - K
    check_ensemble_moments(x[..., 1], a / (a + b), math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1))))


def test_prior_draws_are_the_walkers_starts_and_bad_input_is_refused():
    prior = [priors.Normal(0.0, 1.0), priors.HalfNormal(1.0)]
    first = km.sample_ensemble(lambda x: 0.0, None, prior=prior, draws=3, tune=0, seed=9, progress=False)
    again = km.sample_ensemble(lambda x: 0.0, None, prior=prior, draws=3, tune=0, seed=9, progress=False)
    assert first.posterior["x"].shape == (32, 3, 2)  # the default max(2d, 32) walkers
    np.testing.assert_array_equal(first.posterior["x"].values, again.posterior["x"].values)
    with pytest.raises(ValueError, match="`x0` is required"):
        km.sample_ensemble(lambda x: 0.0, None, draws=3, progress=False)
    with pytest.raises(ValueError, match="outside the support"):
        km.sample_ensemble(lambda x: 0.0, [0.0, -1.0], prior=prior, draws=3, progress=False)
    with pytest.raises(ValueError, match="needs a `prior` of marginals"):
        km.sample_ensemble(lambda x: 0.0, None, bounds=[(0, 1)], draws=3, progress=False)


def test_a_run_with_a_prior_resumes_with_its_prior_to_the_same_constrained_draws(tmp_path):
    # the checkpoint holds the walkers on the unconstrained scale: resumed
    # with the same prior, the run replays to the same draws, constrained and
    # named as the first run's; without its prior, or with another, refused
    prior = {"rate": priors.Gamma(A, B), "p": priors.Beta(2.0, 3.0)}
    path = tmp_path / "ensemble.ckpt"
    whole = km.sample_ensemble(log_likelihood, None, prior=prior, walkers=16, draws=50, tune=10, seed=4,
                               checkpoint=path, progress=False)
    resumed = km.resume_ensemble(path, log_likelihood, prior=prior, progress=False)
    for name in prior:
        np.testing.assert_array_equal(resumed.posterior[name].values, whole.posterior[name].values)
    assert (resumed.posterior["p"].values > 0).all() and (resumed.posterior["p"].values < 1).all()
    def on_any_scale(x):  # the likelihood, defined where the prior is not
        return log_likelihood(x) if x[0] > 0 and 0 < x[1] < 1 else -math.inf

    with pytest.raises(ValueError, match="not the checkpointed run's"):
        km.resume_ensemble(path, on_any_scale, progress=False)
    with pytest.raises(ValueError, match="3 parameters but the checkpointed run has dimension 2"):
        km.resume_ensemble(path, log_likelihood, prior=[priors.Normal()] * 3, progress=False)
    with pytest.raises(ValueError, match="not with `prior=`"):
        km.resume_ensemble(path, log_likelihood, prior=prior, vectorize=True, progress=False)
