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


# ── a user's bad input to the Python entry points ─────────────────────────


@pytest.mark.parametrize("batched", [False, True], ids=["one", "batched"])
def test_a_simulator_that_modifies_theta_is_stopped_not_fed_other_parameters(batched):
    # theta += ... moved the parameters of the estimate's later simulations:
    # each estimate was silently made at n different points
    if batched:
        def shifting(theta, n, rng):
            theta += 1.0
            return theta + rng.standard_normal((n, 1))
    else:
        def shifting(theta, rng):
            theta += 1.0
            return theta + rng.standard_normal(1)

    abc = km.ABC(shifting, [0.0], 1.0, 4, batched=batched)
    theta = np.zeros(1)
    with pytest.raises(ValueError, match="read-only") as info:
        abc(theta, np.random.default_rng(0))
    assert any("raised by the simulator at theta = [0.]" in note for note in info.value.__notes__)
    # the caller's array is neither changed nor made read-only
    assert theta.flags.writeable and theta[0] == 0.0
    with pytest.raises(ValueError, match="read-only"):
        km.sample(abc, [0.0], draws=3, tune=0, chains=1, seed=0, progress=False)


def test_a_habc_simulator_gets_a_read_only_theta_as_the_estimators_do():
    def shifting(theta, rng):
        theta += 1.0
        return theta + rng.standard_normal(1)

    with pytest.raises(ValueError, match="read-only"):
        km.HABC(shifting, [0.0], steps=2).sample([0.0], draws=2, tune=0, chains=1, seed=0, progress=False)


@pytest.mark.filterwarnings("error")  # a ComplexWarning on the way is a failure
@pytest.mark.parametrize(
    "estimate, named",
    [
        (lambda theta, rng: "1.5", "str"),  # was parsed: an sd of 0
        (lambda theta, rng: np.complex64(rng.random()), "complex"),  # was cut to its real part
        (lambda theta, rng: rng.random() < 0.5, "bool"),  # was 0 or 1
        (lambda theta, rng: None, "NoneType"),  # float()'s message named no estimator
        (lambda theta, rng: rng.standard_normal(1), r"shape \(1,\)"),  # "only 0-dimensional arrays ..."
    ],
    ids=["str", "complex", "bool", "none", "array"],
)
def test_log_likelihood_sd_refuses_an_estimate_that_is_not_a_real_number(estimate, named):
    with pytest.raises(TypeError, match=rf"the estimator returned .*{named}.*; expected .*one log-likelihood"):
        km.log_likelihood_sd(estimate, [0.0])


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("theta", [["0.5"], np.array([0.5 + 1j])], ids=["str", "complex"])
def test_a_theta_that_is_not_real_numbers_is_a_type_error(theta):
    python = km.ABC(gaussian_summary, [0.0], 1.0, 3)
    compiled = km.ABC(plus_noise(1), [0.0], 1.0, 3)
    for estimator in (python, compiled):
        with pytest.raises(TypeError, match=r"`theta` is .*; expected a real-valued float array"):
            estimator(theta, np.random.default_rng(0))
        with pytest.raises(TypeError, match=r"`theta` is .*; expected a real-valued float array"):
            estimator.simulate(theta, np.random.default_rng(0))
        with pytest.raises(TypeError, match=r"`theta` is .*; expected a real-valued float array"):
            km.log_likelihood_sd(estimator, theta)


@pytest.mark.parametrize("step_size", [("0.01", "0.1"), (True, True), (0.01, np.bool_(True))], ids=["str", "bool", "np-bool"])
def test_habc_step_sizes_that_are_not_numbers_are_refused(step_size):
    # strings were parsed, booleans read as a step size of 1
    with pytest.raises(ValueError, match="`step_size`"):
        km.HABC(gaussian_summary, [0.0], step_size=step_size)


def test_masked_summaries_are_missing_not_the_values_under_the_mask():
    # numpy dropped the mask: the value under it was used as a summary
    def masked(theta, rng):
        return np.ma.masked_array([theta[0] + rng.standard_normal()], mask=[True])

    assert km.ABC(masked, [0.0], 1.0, 3)(np.zeros(1), np.random.default_rng(0)) == -np.inf
    assert km.SyntheticLikelihood(masked, [0.0], 3)(np.zeros(1), np.random.default_rng(0)) == -np.inf
    with pytest.raises(ValueError, match="`observed` must be finite"):
        km.ABC(gaussian_summary, np.ma.masked_array([0.0, 1.0], mask=[False, True]), 1.0, 3)
    # an array with nothing masked is its values
    unmasked = km.ABC(lambda theta, rng: np.ma.masked_array([0.0], mask=[False]), [0.0], 1.0, 3)
    assert unmasked(np.zeros(1), np.random.default_rng(0)) == pytest.approx(-0.5 * np.log(2 * np.pi))


@pytest.mark.parametrize("batched", [False, True], ids=["one", "batched"])
@pytest.mark.parametrize("make", [lambda *a, **k: km.ABC(*a[:2], 1.0, *a[2:], **k), km.SyntheticLikelihood],
                         ids=["abc", "synthetic"])
def test_a_python_simulator_with_unallocatable_simulations_is_refused_at_construction(make, batched):
    # 2⁶² simulations of 2 summaries: numpy's bare "array is too big" at the
    # first estimate, naming no setting (the compiled estimators refuse them
    # at construction)
    with pytest.raises(ValueError, match="`n_simulations`"):
        make(gaussian_summary, [0.0, 0.0], 2**62, batched=batched)


def scaled_shift(scale):
    """A compiled simulator of summaries scale·(0.6 + θ₀ + 0.1 z₀, 0.7 + θ₁ + 0.1 z₁)."""

    @numba.cfunc(SIGNATURE)
    def simulate(theta, dim, noise, n_noise, out, n_summaries):
        out[0] = scale * (0.6 + theta[0] + 0.1 * noise[0])
        out[1] = scale * (0.7 + theta[1] + 0.1 * noise[1])
        return 0

    return km.CompiledSimulator(simulate.address, 2, 2, 2, owner=simulate)


@pytest.mark.filterwarnings("ignore::kameleon.SamplingWarning")  # 200 draws: an ESS below 100
@pytest.mark.parametrize("exponent", [-1000, -532, 520, 1000])
@pytest.mark.parametrize("unbiased", [False, True], ids=["wood", "unbiased"])
def test_a_compiled_synthetic_likelihood_of_summaries_of_extreme_scale_is_that_at_scale_one(exponent, unbiased):
    # the covariance of summaries near 2^-532 ≈ 1.4e-160 underflowed, near
    # 2^520 ≈ 3.4e156 overflowed: every estimate was -inf. Now the
    # summaries are scaled back by a power of two (exact), so the estimate
    # is that at scale 1 less s·log(scale), and the draws are the same
    scale = 2.0**exponent
    observed = np.array([0.75, 0.6])
    ordinary = km.SyntheticLikelihood(scaled_shift(1.0), observed, 50, unbiased=unbiased)
    extreme = km.SyntheticLikelihood(scaled_shift(scale), scale * observed, 50, unbiased=unbiased)
    theta = np.array([0.15, -0.1])
    np.testing.assert_array_equal(
        extreme.simulate(theta, np.random.default_rng(1)), scale * ordinary.simulate(theta, np.random.default_rng(1))
    )
    shift = -2 * exponent * np.log(2.0)
    assert extreme(theta, np.random.default_rng(1)) == pytest.approx(
        ordinary(theta, np.random.default_rng(1)) + shift, rel=1e-13
    )
    walk = km.RandomWalk(scale=0.05, learned=False, whiten=False)
    run = dict(sampler=walk, draws=200, tune=0, chains=2, seed=3, progress=False)
    expected = km.sample(ordinary, [0.1, -0.1], **run)
    chains = km.sample(extreme, [0.1, -0.1], **run)
    assert min(chains.posterior.attrs["acceptance_rate"]) > 0.1
    np.testing.assert_array_equal(chains.posterior["x"].values, expected.posterior["x"].values)
    np.testing.assert_allclose(chains.sample_stats["lp"].values, expected.sample_stats["lp"].values + shift, rtol=1e-12)
