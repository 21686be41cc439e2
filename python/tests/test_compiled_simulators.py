"""Compiled simulators (km.CompiledSimulator): ABC and synthetic likelihood
estimated in Rust without the GIL."""

import math

import numba
import numpy as np
import pytest

import kameleon as km
from kameleon import priors

from test_simulators import EPS, M, OBS, POST_MEAN, POST_VAR, SIGMA, V, check_moments, mean_of_draws

SIGNATURE = km.CompiledSimulator.SIGNATURE


@numba.cfunc(SIGNATURE)
def _mean_of_draws(theta, dim, noise, n_noise, out, n_summaries):
    # the mean of M draws of N(θ, σ²) from M standard normals
    z = numba.carray(noise, n_noise)
    out[0] = theta[0] + SIGMA * z.sum() / n_noise
    return 0


@numba.cfunc(SIGNATURE)
def _shifted(theta, dim, noise, n_noise, out, n_summaries):
    # θ + L z with L = [[1, 0], [0.6, 0.8]]: exactly N(θ, LLᵀ)
    out[0] = theta[0] + noise[0]
    out[1] = theta[1] + 0.6 * noise[0] + 0.8 * noise[1]
    return 0


@numba.cfunc(SIGNATURE)
def _noise_itself(theta, dim, noise, n_noise, out, n_summaries):
    for i in range(n_summaries):
        out[i] = noise[i]
    return 0


@numba.cfunc(SIGNATURE)
def _fails_above_one(theta, dim, noise, n_noise, out, n_summaries):
    if theta[0] > 1.0:
        return 7
    out[0] = theta[0] + 0.3 * noise[0]
    return 0


@numba.cfunc(SIGNATURE)
def _nan_above_half(theta, dim, noise, n_noise, out, n_summaries):
    out[0] = math.nan if theta[0] > 0.5 else theta[0] + 0.3 * noise[0]
    return 0


def compiled(cfunc, dim=1, n_summaries=1, n_noise=1, noise="normal"):
    return km.CompiledSimulator(cfunc.address, dim, n_summaries, n_noise, noise, owner=cfunc)


MEAN_OF_DRAWS = compiled(_mean_of_draws, n_noise=M)


def test_compiled_abc_gives_the_epsilon_posterior_of_the_python_route():
    # no prior: the ε-posterior is N(OBS, V) (see test_simulators); each
    # route is checked against it within 5 Monte Carlo standard errors, and
    # their means against each other within 5 standard errors of the
    # difference (√(se₁² + se₂²), each se from the draws' ESS)
    kwargs = dict(sampler=km.AM(), draws=2000, tune=300, chains=4, seed=3, progress=False)
    rust = km.sample(km.ABC(MEAN_OF_DRAWS, [OBS], EPS, 10), [0.0], **kwargs).posterior["x"].values[:, :, 0]
    python = km.sample(km.ABC(mean_of_draws, [OBS], EPS, 10, batched=True), [0.0], **kwargs).posterior["x"].values
    python = python[:, :, 0]
    check_moments(rust, OBS, math.sqrt(V))
    check_moments(python, OBS, math.sqrt(V))
    se = [x.std() / math.sqrt(km.diagnostics.ess(x)) for x in (rust, python)]
    assert abs(rust.mean() - python.mean()) < 5 * math.hypot(*se)


def test_compiled_abc_with_a_prior_recovers_the_closed_form_posterior():
    abc = km.ABC(MEAN_OF_DRAWS, [OBS], EPS, 20)
    idata = km.sample(abc, None, prior=[priors.Normal(0.0, 2.0)], sampler=km.AM(), draws=2000, tune=300,
                      chains=4, seed=11, progress=False)
    check_moments(idata.posterior["x"].values[:, :, 0], POST_MEAN, math.sqrt(POST_VAR))


def test_compiled_unbiased_synthetic_likelihood_recovers_the_exact_posterior():
    # summaries exactly N(θ, LLᵀ) and a flat prior: the synthetic-likelihood
    # posterior is N(obs, LLᵀ) exactly (the unbiased estimator, any n)
    obs = np.array([0.5, -0.3])
    sl = km.SyntheticLikelihood(compiled(_shifted, 2, 2, 2), obs, 20, unbiased=True)
    idata = km.sample(sl, obs, sampler=km.AM(), draws=2000, tune=500, chains=4, seed=2, progress=False)
    x = idata.posterior["x"].values
    check_moments(x[:, :, 0], obs[0], 1.0)
    check_moments(x[:, :, 1], obs[1], 1.0)  # var = 0.6² + 0.8²


@pytest.mark.parametrize(
    "make",
    [
        lambda sim: km.ABC(sim, [0.3, -0.2], [0.5, 2.0], 7),
        lambda sim: km.SyntheticLikelihood(sim, [0.3, -0.2], 9),
        lambda sim: km.SyntheticLikelihood(sim, [0.3, -0.2], 6, unbiased=True),
    ],
    ids=["abc", "wood", "unbiased"],
)
def test_rust_estimates_equal_the_python_formulas_on_the_same_simulations(make):
    # `simulate` gives the simulations the estimate is computed from (the
    # same seed drawn from equal generators); the Python formulas are tested
    # against closed forms in test_simulators
    estimator = make(compiled(_shifted, 2, 2, 2))
    for seed, theta in enumerate([[0.1, 0.4], [0.3, -0.2], [2.0, 1.0]]):
        estimate = estimator(theta, np.random.default_rng(seed))
        summaries = estimator.simulate(theta, np.random.default_rng(seed))
        assert summaries.shape == (estimator.n_simulations, 2)
        expected = estimator.log_likelihood(summaries)
        if expected == -math.inf:
            assert estimate == -math.inf
        else:
            assert estimate == pytest.approx(expected, rel=1e-11, abs=1e-11)


@pytest.mark.parametrize("noise, mean, var", [("normal", 0.0, 1.0), ("uniform", 0.5, 1 / 12)])
def test_the_noise_is_independent_draws_of_the_declared_distribution(noise, mean, var):
    # 3 summaries = the noise itself, 4000 simulations: 12000 draws whose
    # mean and variance must be within 5 standard errors (sd/√N for the
    # mean; for the variance, the sd of the squared deviations over √N)
    abc = km.ABC(compiled(_noise_itself, 1, 3, 3, noise), [0.0, 0.0, 0.0], 1.0, 4000)
    draws = abc.simulate([0.0], np.random.default_rng(0))
    assert len(np.unique(draws)) == draws.size
    if noise == "uniform":
        assert ((draws > 0) & (draws < 1)).all()
    x = draws.ravel()
    assert abs(x.mean() - mean) < 5 * math.sqrt(var / x.size)
    squared = (x - mean) ** 2
    assert abs(squared.mean() - var) < 5 * squared.std() / math.sqrt(x.size)


@pytest.mark.usefixtures("quiet")
def test_compiled_runs_are_reproducible_and_identical_whatever_the_cores():
    abc = km.ABC(MEAN_OF_DRAWS, [OBS], EPS, 10)
    kwargs = dict(sampler=km.AM(), draws=300, tune=100, chains=3, seed=9, progress=False)
    one = km.sample(abc, [0.0], cores=1, **kwargs)
    two = km.sample(abc, [0.0], cores=2, **kwargs)
    again = km.sample(abc, [0.0], cores=2, **kwargs)
    for run in (two, again):
        np.testing.assert_array_equal(one.posterior["x"].values, run.posterior["x"].values)
        np.testing.assert_array_equal(one.sample_stats["lp"].values, run.sample_stats["lp"].values)
    assert not np.array_equal(one.posterior["x"].values[0], one.posterior["x"].values[1])


def test_compiled_estimators_run_in_the_ensemble_and_in_log_likelihood_sd():
    abc = km.ABC(MEAN_OF_DRAWS, [OBS], EPS, 10)
    kwargs = dict(walkers=8, draws=100, tune=50, seed=5, progress=False)
    first = km.sample_ensemble(abc, [0.0], **kwargs)
    np.testing.assert_array_equal(first.posterior["x"].values, km.sample_ensemble(abc, [0.0], **kwargs).posterior["x"].values)
    sd = km.log_likelihood_sd(abc, [OBS], repeats=40, seed=1)
    assert 0 < sd < math.inf and sd == km.log_likelihood_sd(abc, [OBS], repeats=40, seed=1)
    # 10 × more simulations: the sd shrinks by about √10
    many = km.log_likelihood_sd(km.ABC(MEAN_OF_DRAWS, [OBS], EPS, 100), [OBS], repeats=40, seed=1)
    assert many < sd / 2


def test_a_nonzero_status_stops_every_chain_with_a_clear_error():
    abc = km.ABC(compiled(_fails_above_one), [0.0], 0.3, 5)
    with pytest.raises(RuntimeError, match=r"returned status 7 at theta = \[\d"):
        km.sample(abc, [0.0], sampler=km.RandomWalk(scale=2.0), draws=20000, tune=0, chains=4, cores=2, seed=1,
                  progress=False)
    with pytest.raises(RuntimeError, match="returned status 7"):
        abc([3.0], np.random.default_rng(0))
    with pytest.raises(RuntimeError, match="returned status 7"):
        km.sample_ensemble(abc, [0.0], walkers=8, draws=2000, tune=0, seed=1, progress=False)


@pytest.mark.usefixtures("quiet")
def test_nan_summaries_are_rejections_and_the_chain_stays_out_of_them():
    abc = km.ABC(compiled(_nan_above_half), [0.0], 0.3, 5)
    idata = km.sample(abc, [0.0], sampler=km.RandomWalk(scale=0.5), draws=500, tune=0, chains=2, seed=2,
                      progress=False)
    assert (idata.posterior["x"].values <= 0.5).all()
    assert min(idata.posterior.attrs["rejected_non_finite"]) > 0
    sl = km.SyntheticLikelihood(compiled(_nan_above_half), [0.0], 5)
    assert sl([1.0], np.random.default_rng(0)) == -math.inf


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: km.ABC(compiled(_shifted, 2, 2, 2), [0.0], 0.3, 5), "writes 2 summaries but `observed` has 1"),
        (lambda: km.ABC(MEAN_OF_DRAWS, [0.0], 0.3, 5, batched=True), "`batched` does not apply"),
        (lambda: compiled(_mean_of_draws, noise="gaussian"), "`noise` must be 'normal' or 'uniform'"),
        (lambda: km.CompiledSimulator(0, 1, 1, 1), "`address` must be a non-null integer address"),
        (lambda: compiled(_mean_of_draws, n_noise=-1), "`n_noise` must be an integer >= 0"),
        (lambda: km.SyntheticLikelihood(compiled(_shifted, 2, 2, 2), [0.0, 0.0], 4, unbiased=True),
         "at least 5"),
    ],
)
def test_invalid_compiled_simulators_are_refused(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_a_point_of_the_wrong_dimension_or_process_workers_are_refused():
    abc = km.ABC(MEAN_OF_DRAWS, [OBS], EPS, 10)
    with pytest.raises(ValueError, match="has 1 parameters, but theta .* has dimension 2"):
        km.sample(abc, [0.0, 0.0], draws=10, tune=0, chains=1, progress=False)
    with pytest.raises(ValueError, match="estimator of a CompiledSimulator"):
        km.sample(abc, [0.0], draws=10, tune=0, chains=2, parallel="process", progress=False)
    with pytest.raises(ValueError, match="estimator of a CompiledSimulator"):
        km.sample(abc, None, prior=[priors.Normal(0.0, 1.0)], draws=10, tune=0, chains=2, parallel="process",
                  progress=False)


@numba.cfunc(SIGNATURE)
def _plus_noise(theta, dim, noise, n_noise, out, n_summaries):
    # s = θ + z, z ~ N(0, I): the model of the HABC test on a Python simulator
    for i in range(n_summaries):
        out[i] = theta[i] + noise[i]
    return 0


def test_habc_runs_a_compiled_simulator_without_python():
    """HABC on s ~ N(θ, I) (as test_kmc_skew_normal's Python-simulator
    test): the synthetic likelihood is about N(s_obs; θ, (1 + ε²)I), so with
    the prior N(0, 100² I) the posterior is about N(s_obs, τ²I),
    τ² = 1 + ε². HABC is biased: 0.25τ of bias on top of 5 Monte Carlo
    standard errors, and the sd within [τ/2, 2τ]. Same seed, same draws; a
    failing simulator and the wrong dimension give clear errors."""
    observed = np.array([1.0, -0.5])
    simulator = compiled(_plus_noise, dim=2, n_summaries=2, n_noise=2)
    habc = km.HABC(
        simulator, observed, n_simulations=10, epsilon=0.5, prior_sd=100.0,
        step_size=(0.2, 0.4), steps=5, friction=0.5, perturbation=0.5,
    )
    idata = habc.sample([-3.0, 3.0], draws=600, tune=100, chains=1, seed=11)
    x = idata.posterior["x"].values[0]
    tau = math.sqrt(1 + 0.5**2)
    for j in range(2):
        se = x[:, j].std() / math.sqrt(km.diagnostics.ess(x[None, :, j]))
        assert abs(x[:, j].mean() - observed[j]) < 5 * se + 0.25 * tau, (j, x[:, j].mean(), se)
        assert 0.5 * tau < x[:, j].std() < 2 * tau, (j, x[:, j].std())
    again = habc.sample([-3.0, 3.0], draws=600, tune=100, chains=1, seed=11)
    np.testing.assert_array_equal(again.posterior["x"].values[0], x)
    with pytest.raises(ValueError, match="2 parameters"):
        habc.sample([0.0, 0.0, 0.0], draws=5, tune=0, chains=1, seed=1)
    with pytest.raises(ValueError, match="summaries"):
        km.HABC(simulator, [1.0, 2.0, 3.0])
    failing = km.HABC(compiled(_fails_above_one), [0.5], steps=3, step_size=(0.5, 1.0))
    with pytest.raises(RuntimeError, match="status 7"):
        failing.sample([2.0], draws=20, tune=0, chains=1, seed=1)


def test_resume_refuses_another_compiled_estimator_and_takes_the_same_one(tmp_path):
    # the record of a run's estimator covers the estimators that run in Rust
    path = tmp_path / "run.ckpt"
    kwargs = dict(sampler=km.AM(), tune=0, chains=2, seed=3, progress=False)
    abc = lambda epsilon: km.ABC(compiled(_shifted, 2, 2, 2), [0.3, -0.2], epsilon, 5)  # noqa: E731
    km.sample(abc(0.5), [0.0, 0.0], draws=10, checkpoint=path, **kwargs)
    with pytest.raises(ValueError, match="this log density is not the checkpointed run's: at a point of the run"):
        km.resume(path, abc(0.6), progress=False)
    extended = km.extend(path, abc(0.5), draws=5, progress=False)
    longer = km.sample(abc(0.5), [0.0, 0.0], draws=15, **kwargs)
    np.testing.assert_array_equal(extended.posterior["x"].values, longer.posterior["x"].values)
