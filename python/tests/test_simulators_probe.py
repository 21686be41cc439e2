"""Simulation-based inference at its edges: settings a demanding user tries
(huge simulation counts, diverging HABC trajectories, ...), each with the
behaviour the documentation promises."""

import numba
import numpy as np
import pytest

import kameleon as km

SIGNATURE = km.CompiledSimulator.SIGNATURE


@numba.cfunc(SIGNATURE)
def _plus_noise(theta, dim, noise, n_noise, out, n_summaries):
    for i in range(n_summaries):
        out[i] = theta[0] + noise[i]
    return 0


def plus_noise(n_summaries):
    return km.CompiledSimulator(_plus_noise.address, 1, n_summaries, n_summaries, owner=_plus_noise)


@pytest.mark.parametrize("n_simulations", [2**45, 2**62])
def test_a_compiled_synthetic_likelihood_with_unallocatable_simulations_is_refused_at_construction(n_simulations):
    # the n × s simulated summaries (here 2⁴⁶ or 2⁶³ values) cannot exist:
    # a ValueError naming n_simulations, not a panic or an abort of the
    # interpreter at the first estimate
    with pytest.raises(ValueError, match="n_simulations"):
        km.SyntheticLikelihood(plus_noise(2), [0.0, 0.0], n_simulations)


def test_habc_records_an_overflowing_trajectory_as_not_accepted():
    # a step size so large that the first step overflows the position (the
    # gradient is finite, the friction's running variance not yet set):
    # that trajectory is rejected, the chain stays at x0, and the recorded
    # `accepted` flags agree with the counts for every step
    def simulator(theta, rng):
        return np.array([theta[0] + rng.standard_normal()])

    habc = km.HABC(simulator, [1.0], n_simulations=5, step_size=(1e200, 1e200), steps=1, friction=0.0)
    idata = habc.sample([0.0], draws=5, tune=0, chains=1, seed=1, progress=False)
    accepted = idata.sample_stats["accepted"].values[0]
    assert idata.posterior["x"].values[0, 0, 0] == 0.0
    assert not accepted[0]
    assert accepted.sum() == idata.posterior.attrs["accepted_total"][0]
    assert (~accepted).sum() == idata.posterior.attrs["rejected_non_finite"][0]


def gaussian_summary(theta, rng):
    return theta + rng.standard_normal(theta.shape)


@pytest.mark.parametrize(
    "setting, value",
    [
        # positive and finite, as documented, but whose square (the prior's
        # variance, the ridge ε²I) overflows to infinity or underflows to 0
        ("prior_sd", 1e200),
        ("prior_sd", 1e-200),
        ("epsilon", 1e200),
        ("epsilon", 1e-200),
        # more integration steps than the sampler can count
        ("steps", 2**40),
    ],
)
def test_habc_settings_out_of_range_are_refused_naming_the_setting(setting, value):
    with pytest.raises(ValueError, match=f"`{setting}`"):
        km.HABC(gaussian_summary, [0.0], **{setting: value}).sample(
            [0.0], draws=2, tune=0, chains=1, seed=0, progress=False
        )


@pytest.mark.parametrize("make", [km.HABC, lambda sim, obs: km.ABC(sim, obs, 1.0, 3)], ids=["habc", "abc"])
def test_observed_none_is_refused_as_missing_not_as_nan(make):
    with pytest.raises(ValueError, match="`observed` must be a vector of numbers, got None"):
        make(gaussian_summary, None)


@pytest.mark.parametrize("epsilon", [True, np.bool_(True), [True]])
def test_abc_refuses_a_bool_epsilon_as_habc_does(epsilon):
    with pytest.raises(ValueError, match="`epsilon`"):
        km.ABC(gaussian_summary, [0.0], epsilon, 3)


@numba.cfunc(SIGNATURE)
def _theta_plus_noise(theta, dim, noise, n_noise, out, n_summaries):
    for i in range(n_summaries):
        out[i] = theta[i] + noise[i]
    return 0


@pytest.mark.parametrize("s, n_simulations", [(2, 2), (10, 10)])
def test_habc_takes_as_few_simulations_from_a_compiled_simulator_as_from_python(s, n_simulations):
    # HABC's covariance Σ̂ + ε²I is invertible for any S >= 2 (the KMC
    # paper's run: S = 10 simulations of 10 summaries); a compiled simulator
    # gives the same chain as a Python one would accept, not an error
    # asking for the S >= s + 1 of the (ridge-free) synthetic likelihood
    simulator = km.CompiledSimulator(_theta_plus_noise.address, s, s, s, owner=_theta_plus_noise)
    habc = km.HABC(simulator, np.zeros(s), n_simulations=n_simulations, steps=3)
    idata = habc.sample(np.zeros(s), draws=3, tune=0, chains=1, seed=0, progress=False)
    assert np.isfinite(idata.posterior["x"].values).all()
    assert np.isfinite(idata.sample_stats["lp"].values).all()


def test_a_start_where_the_synthetic_likelihood_fails_says_why_it_may():
    # summaries that never vary give a singular covariance at every θ: the
    # start's estimate is −inf, which the error called only "outside the
    # support" (bad advice here: the start is inside the prior's support)
    def constant(theta, rng):
        return np.array([1.0, 2.0])

    likelihood = km.SyntheticLikelihood(constant, [0.0, 0.0], n_simulations=10)
    with pytest.raises(ValueError, match="a noisy likelihood estimate can also fail there"):
        km.sample(likelihood, [0.0], sampler=km.AM(), draws=10, tune=10, chains=1, progress=False)
