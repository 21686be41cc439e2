"""Simulation-based likelihoods: km.ABC, km.SyntheticLikelihood, km.log_likelihood_sd."""

import math
from fractions import Fraction

import numpy as np
import pytest

import kameleon as km
from kameleon import priors


def check_moments(draws, mean, sd):
    """The draws' mean and variance agree with ``mean`` and ``sd**2`` within
    5 Monte Carlo standard errors (sd of the draws, or of their squares,
    over √ESS): a correct sampler fails this with probability ~1e-6 per
    moment, a wrong target by a few percent of an sd fails it."""
    x = np.asarray(draws)
    assert abs(x.mean() - mean) < 5 * x.std() / math.sqrt(km.diagnostics.ess(x)), (x.mean(), mean)
    centred = (x - mean) ** 2
    assert abs(centred.mean() - sd**2) < 5 * centred.std() / math.sqrt(km.diagnostics.ess(centred)), (
        centred.mean(),
        sd**2,
    )


# ── ABC ───────────────────────────────────────────────────────────────────

# x ~ N(θ, σ²), summary = mean of m draws, so s | θ ~ N(θ, σ²/m); with the
# Gaussian kernel of width ε the ε-likelihood is N(obs; θ, σ²/m + ε²), and
# with the prior N(0, τ²) the ε-posterior is Gaussian:
# precision 1/τ² + 1/v and mean (obs/v)/precision, v = σ²/m + ε².
SIGMA, M, EPS, TAU, OBS = 1.0, 10, 0.3, 2.0, 1.0
V = SIGMA**2 / M + EPS**2
POST_VAR = 1.0 / (1.0 / TAU**2 + 1.0 / V)
POST_MEAN = POST_VAR * OBS / V


def mean_of_draws(theta, n, rng):
    return rng.normal(theta[0], SIGMA, size=(n, M)).mean(axis=1, keepdims=True)


def test_abc_recovers_the_closed_form_epsilon_posterior():
    abc = km.ABC(mean_of_draws, [OBS], EPS, 20, batched=True)
    idata = km.sample(abc, None, prior=[priors.Normal(0.0, TAU)], sampler=km.AM(), draws=3000, tune=500,
                      chains=4, seed=11, progress=False)
    check_moments(idata.posterior["x"].values[:, :, 0], POST_MEAN, math.sqrt(POST_VAR))


def test_abc_with_a_one_at_a_time_simulator_and_no_prior():
    # no prior: the ε-posterior is the ε-likelihood N(obs; θ, v) in θ
    def one(theta, rng):
        return np.array([rng.normal(theta[0], SIGMA, size=M).mean()])

    abc = km.ABC(one, [OBS], EPS, 10)
    idata = km.sample(abc, [0.0], sampler=km.AM(), draws=1500, tune=300, chains=4, seed=3, progress=False)
    check_moments(idata.posterior["x"].values[:, :, 0], OBS, math.sqrt(V))


GRADIENT_FREE = [
    km.KAMH(), km.PCAKameleon(), km.FKAMH(), km.CKAM(), km.KMCLite(), km.KMCFinite(),
    km.RandomWalk(), km.AM(), km.AMPCA(),
]


@pytest.mark.parametrize("sampler", GRADIENT_FREE, ids=lambda s: type(s).__name__)
def test_every_gradient_free_sampler_targets_the_epsilon_posterior(sampler):
    """The same closed-form ε-posterior through each sampler's defaults
    (their pseudo-marginal path: the estimate at the current state is
    reused), at a size where check_moments' 5-standard-error bounds hold."""
    abc = km.ABC(mean_of_draws, [OBS], EPS, 20, batched=True)
    idata = km.sample(abc, None, prior=[priors.Normal(0.0, TAU)], sampler=sampler, draws=2000, tune=1000,
                      chains=2, seed=4, progress=False)
    check_moments(idata.posterior["x"].values[:, :, 0], POST_MEAN, math.sqrt(POST_VAR))


def test_abc_runs_in_the_ensemble_sampler():
    abc = km.ABC(mean_of_draws, [OBS], EPS, 20, batched=True)
    kwargs = dict(walkers=16, draws=400, tune=200, seed=5, progress=False)
    first = km.sample_ensemble(abc, [0.0], **kwargs)
    again = km.sample_ensemble(abc, [0.0], **kwargs)
    x = first.posterior["x"].values
    np.testing.assert_array_equal(x, again.posterior["x"].values)
    # walkers interact, so no ESS-based error here: 16 walkers × 400 sweeps
    # with autocorrelation times of order 10 leave a standard error of the
    # mean of about 0.44/√640 ≈ 0.02 (0.44 is the target's sd), and of the
    # variance 0.19·√(2/640) ≈ 0.01; the bounds are 5 times those
    assert abs(x.mean() - OBS) < 0.1
    assert abs(x.var() - V) < 0.05


def test_abc_log_likelihood_is_the_log_mean_of_the_kernels_and_nan_simulations_count_zero():
    abc = km.ABC(mean_of_draws, [0.0, 0.0], [0.5, 2.0], 3, batched=True)
    summaries = np.array([[0.1, -1.0], [0.7, 3.0], [np.nan, 0.0]])

    def kernel(s):
        return math.exp(-0.5 * ((s[0] / 0.5) ** 2 + (s[1] / 2.0) ** 2)) / (2 * math.pi * 0.5 * 2.0)

    expected = math.log((kernel(summaries[0]) + kernel(summaries[1]) + 0.0) / 3)
    assert abc.log_likelihood(summaries) == pytest.approx(expected, rel=1e-12)
    assert abc.log_likelihood(np.full((3, 2), np.nan)) == -math.inf
    assert abc.log_likelihood(np.array([[np.inf, 0.0]])) == -math.inf
    # far from the data the estimate stays finite in log space
    assert math.isfinite(abc.log_likelihood(np.array([[1e3, 1e3]])))


def test_parameters_where_every_simulation_is_nan_are_never_entered():
    def nan_above(theta, n, rng):
        s = rng.normal(theta[0], 0.3, size=(n, 1))
        return np.full((n, 1), np.nan) if theta[0] > 0.5 else s

    abc = km.ABC(nan_above, [0.0], 0.3, 5, batched=True)
    idata = km.sample(abc, [0.0], sampler=km.RandomWalk(scale=0.5), draws=500, tune=0, chains=2, seed=2,
                      progress=False)
    assert (idata.posterior["x"].values <= 0.5).all()
    assert min(idata.posterior.attrs["rejected_non_finite"]) > 0


# ── synthetic likelihood ─────────────────────────────────────────────────


def gaussian_summaries(chol):
    """A batched simulator whose summaries are exactly N(θ, chol cholᵀ)."""
    return lambda theta, n, rng: theta + rng.standard_normal((n, chol.shape[0])) @ chol.T


@pytest.mark.parametrize("d, n", [(1, 5), (1, 20), (3, 6), (3, 20)])
def test_unbiased_synthetic_likelihood_averages_to_the_gaussian_density(d, n):
    # The mean of exp(log L̂) over N independent estimates must equal the
    # exact density N(obs; μ, Σ). Computed in log space (w = exp(log L̂ − max))
    # so that nothing underflows; the relative standard error of the mean is
    # sd(w)/(mean(w)·√N), estimated from the same w (the estimator has finite
    # variance for n ≥ d + 3, so the CLT applies), and 5 standard errors bound
    # the ratio minus 1. θ (= μ) is 0, 1 and 2 Mahalanobis units from obs.
    # (d = 3, n = 5 is refused: n = d + 2 has infinite variance; see below.)
    rng = np.random.default_rng(d * 100 + n)
    a = rng.standard_normal((d, d))
    cov = a @ a.T / d + 0.5 * np.eye(d)
    chol = np.linalg.cholesky(cov)
    direction = np.ones(d) / math.sqrt(d)
    obs = np.zeros(d)
    sl = km.SyntheticLikelihood(gaussian_summaries(chol), obs, n, unbiased=True, batched=True)
    N = 6000
    for distance in (0.0, 1.0, 2.0):
        mu = obs - chol @ (distance * direction)
        log_l = np.array([sl(mu, rng) for _ in range(N)])
        top = log_l.max()
        w = np.exp(log_l - top)
        log_mean = top + math.log(w.mean())
        exact = -0.5 * (d * math.log(2 * math.pi) + math.log(np.linalg.det(cov)) + distance**2)
        relative_se = w.std() / (w.mean() * math.sqrt(N))
        assert abs(math.exp(log_mean - exact) - 1) < 5 * relative_se, (distance, log_mean, exact, relative_se)


def test_wood_synthetic_likelihood_is_biased_where_the_unbiased_one_is_not():
    # the same check as above detects the bias of Wood's estimator at n = 5
    # (about −8 % at 1.5 sd from the mean, 10 standard errors of the
    # 10000-estimate average)
    sl = km.SyntheticLikelihood(gaussian_summaries(np.eye(1)), [1.5], 5, batched=True)
    rng = np.random.default_rng(0)
    log_l = np.array([sl(np.zeros(1), rng) for _ in range(10000)])
    w = np.exp(log_l - log_l.max())
    ratio = math.exp(log_l.max() + math.log(w.mean()) + 0.5 * (math.log(2 * math.pi) + 1.5**2))
    assert abs(ratio - 1) > 5 * w.std() / (w.mean() * 100)


def test_unbiased_synthetic_likelihood_recovers_the_exact_posterior():
    # summaries s | θ ~ N(θ·(1, 1), Σ) and θ ~ N(0, 1): the posterior is
    # Gaussian with precision 1 + aᵀΣ⁻¹a and mean aᵀΣ⁻¹obs / precision.
    cov = np.array([[0.5, 0.2], [0.2, 1.0]])
    chol = np.linalg.cholesky(cov)
    a = np.ones(2)
    obs = np.array([0.8, 1.4])
    precision = 1.0 + a @ np.linalg.solve(cov, a)
    mean = a @ np.linalg.solve(cov, obs) / precision

    def simulator(theta, n, rng):
        return theta[0] * a + rng.standard_normal((n, 2)) @ chol.T

    sl = km.SyntheticLikelihood(simulator, obs, 10, unbiased=True, batched=True)
    idata = km.sample(sl, None, prior={"theta": priors.Normal(0.0, 1.0)}, sampler=km.AM(), draws=3000, tune=500,
                      chains=4, seed=8, progress=False)
    check_moments(idata.posterior["theta"].values, mean, 1.0 / math.sqrt(precision))


def test_synthetic_likelihood_of_nan_or_singular_summaries_is_minus_infinity():
    sl = km.SyntheticLikelihood(gaussian_summaries(np.eye(2)), [0.0, 0.0], 6, unbiased=True, batched=True)
    good = np.random.default_rng(0).standard_normal((6, 2))
    assert math.isfinite(sl.log_likelihood(good))
    bad = good.copy()
    bad[2, 1] = np.nan
    assert sl.log_likelihood(bad) == -math.inf
    constant = good.copy()
    constant[:, 0] = 3.0
    assert sl.log_likelihood(constant) == -math.inf
    wood = km.SyntheticLikelihood(gaussian_summaries(np.eye(2)), [0.0, 0.0], 6, batched=True)
    assert wood.log_likelihood(bad) == -math.inf
    # the unbiased estimate is 0 outside its ellipsoid: observed far away
    far = km.SyntheticLikelihood(gaussian_summaries(np.eye(2)), [50.0, 50.0], 6, unbiased=True, batched=True)
    assert far.log_likelihood(good) == -math.inf
    assert math.isfinite(wood.log_likelihood(good))


# 2^-532 ≈ 1.4e-160, 2^520 ≈ 3.4e156, 2^1000 ≈ 1.1e301: the squared spread
# of such summaries underflowed or overflowed the covariance, and every
# proposal was rejected
@pytest.mark.filterwarnings("ignore::kameleon.SamplingWarning")  # 200 draws: an ESS below 100
@pytest.mark.parametrize("exponent", [-532, 520, 1000])
@pytest.mark.parametrize("unbiased", [False, True], ids=["wood", "unbiased"])
def test_synthetic_likelihood_of_summaries_of_extreme_scale_is_that_of_the_same_summaries_at_scale_one(
    exponent, unbiased
):
    scale = 2.0**exponent
    observed = np.array([0.75, 0.6])  # in [0.5, 1): the estimator scales the far ones back exactly

    def simulator(theta, n, rng):
        return np.array([0.6, 0.7]) + theta + 0.1 * rng.standard_normal((n, 2))

    def far(theta, n, rng):
        return scale * simulator(theta, n, rng)

    ordinary = km.SyntheticLikelihood(simulator, observed, 50, unbiased=unbiased, batched=True)
    extreme = km.SyntheticLikelihood(far, scale * observed, 50, unbiased=unbiased, batched=True)
    summaries = simulator(np.zeros(2), 12, np.random.default_rng(0))
    # the density of the scaled summaries is that of the others over scale^s
    assert extreme.log_likelihood(scale * summaries) == pytest.approx(
        ordinary.log_likelihood(summaries) - 2 * exponent * math.log(2.0), rel=1e-13
    )
    # a sampler that adapts nothing: the accept decisions compare log
    # densities that differ by that constant, so the draws are the same bit
    # for bit (an adapting one, steered by acceptance probabilities, would
    # differ in the last bits)
    walk = km.RandomWalk(scale=0.05, learned=False, whiten=False)
    run = dict(sampler=walk, draws=200, tune=0, chains=2, seed=3, progress=False)
    expected = km.sample(ordinary, [0.1, -0.1], **run)
    chains = km.sample(extreme, [0.1, -0.1], **run)
    assert min(chains.posterior.attrs["acceptance_rate"]) > 0.1
    np.testing.assert_array_equal(chains.posterior["x"].values, expected.posterior["x"].values)
    np.testing.assert_allclose(
        chains.sample_stats["lp"].values, expected.sample_stats["lp"].values - 2 * exponent * math.log(2.0), rtol=1e-12
    )


def test_wood_estimate_is_the_gaussian_log_density_at_the_sample_moments():
    scipy_stats = pytest.importorskip("scipy.stats")
    sl = km.SyntheticLikelihood(gaussian_summaries(np.eye(3)), [0.3, -0.2, 1.0], 8, batched=True)
    s = np.random.default_rng(4).standard_normal((8, 3))
    expected = scipy_stats.multivariate_normal(s.mean(axis=0), np.cov(s.T)).logpdf([0.3, -0.2, 1.0])
    assert sl.log_likelihood(s) == pytest.approx(expected, rel=1e-10)


# ── errors and reproducibility ───────────────────────────────────────────


def test_a_simulator_returning_the_wrong_shape_is_a_clear_error():
    abc = km.ABC(lambda theta, rng: np.zeros(3), [0.0, 0.0], 1.0, 5)
    with pytest.raises(ValueError, match=r"shape \(3,\); expected shape \(s,\) = \(2,\)"):
        km.sample(abc, [0.0], draws=10, tune=0, chains=1, progress=False)
    batched = km.SyntheticLikelihood(lambda theta, n, rng: np.zeros((n, 3)), [0.0, 0.0], 5, batched=True)
    with pytest.raises(ValueError, match=r"shape \(5, 3\); expected shape \(n_simulations, s\) = \(5, 2\)"):
        km.sample(batched, [0.0], draws=10, tune=0, chains=1, progress=False)
    words = km.ABC(lambda theta, rng: "many", [0.0], 1.0, 5)
    with pytest.raises(TypeError, match=r"returned a str \('many'\); expected a real-valued float array"):
        words(np.zeros(1), np.random.default_rng(0))
    # one summary: a scalar (or an (n,) batch) is accepted
    scalar = km.ABC(lambda theta, rng: 0.5, [0.0], 1.0, 2)
    assert math.isfinite(scalar(np.zeros(1), np.random.default_rng(0)))


def test_an_exception_in_the_simulator_is_reraised_with_theta():
    def broken(theta, rng):
        raise ZeroDivisionError("simulator blew up")

    with pytest.raises(ZeroDivisionError, match="simulator blew up") as info:
        km.sample(km.ABC(broken, [0.0], 1.0, 5), [0.25], draws=10, tune=0, chains=2, progress=False)
    assert any("raised by the simulator at theta = [0.25]" in note for note in info.value.__notes__)
    assert any(entry.name == "broken" for entry in info.traceback)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: km.ABC(mean_of_draws, [0.0], 0.0, 5), "`epsilon`"),
        (lambda: km.ABC(mean_of_draws, [0.0], [1.0, 1.0], 5), "`epsilon`"),
        (lambda: km.ABC(mean_of_draws, [0.0], 1.0, 0), "`n_simulations`"),
        (lambda: km.ABC(mean_of_draws, [np.nan], 1.0, 5), "`observed`"),
        (lambda: km.ABC(mean_of_draws, [[0.0, 1.0]], 1.0, 5), "`observed`"),
        (lambda: km.ABC("not callable", [0.0], 1.0, 5), "`simulator`"),
        (lambda: km.ABC(mean_of_draws, [0.0], 1.0, 5, batched=1), "`batched`"),
        (lambda: km.SyntheticLikelihood(mean_of_draws, [0.0] * 3, 5, unbiased=True), r"`n_simulations`.*at least 6"),
        (lambda: km.SyntheticLikelihood(mean_of_draws, [0.0] * 3, 3), r"`n_simulations`.*at least 4"),
    ],
)
def test_invalid_settings_are_refused_naming_the_parameter(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.filterwarnings("ignore::kameleon.SamplingWarning")
def test_runs_are_reproducible_and_independent_of_cores():
    abc = km.ABC(mean_of_draws, [OBS], EPS, 5, batched=True)
    kwargs = dict(sampler=km.AM(), draws=200, tune=50, chains=2, seed=9, progress=False)
    one = km.sample(abc, [0.0], cores=1, **kwargs)
    two = km.sample(abc, [0.0], cores=2, **kwargs)
    np.testing.assert_array_equal(one.posterior["x"].values, two.posterior["x"].values)


def test_log_likelihood_sd_is_reproducible_shrinks_with_more_simulations_and_is_inf_for_zero_estimates():
    few = km.ABC(mean_of_draws, [OBS], 0.1, 5, batched=True)
    many = km.ABC(mean_of_draws, [OBS], 0.1, 80, batched=True)
    sd_few = km.log_likelihood_sd(few, [OBS], seed=1)
    assert sd_few == km.log_likelihood_sd(few, [OBS], seed=1)
    # the sd falls roughly like 1/√n: 16 times the simulations, ~4 times smaller
    assert km.log_likelihood_sd(many, [OBS], seed=1) < sd_few / 2
    zero = km.SyntheticLikelihood(gaussian_summaries(np.eye(1)), [30.0], 4, unbiased=True, batched=True)
    assert km.log_likelihood_sd(zero, [0.0]) == math.inf
    pseudo = km.PseudoMarginal(lambda x, rng: 0.7 * rng.standard_normal())
    assert km.log_likelihood_sd(pseudo, [0.0], repeats=400) == pytest.approx(0.7, rel=0.15)
    with pytest.raises(ValueError, match="`repeats`"):
        km.log_likelihood_sd(few, [OBS], repeats=1)


# ── summaries that are not real numbers ───────────────────────────────────

# What numpy would silently turn into float summaries: strings and bytes
# parsed as numbers, complex numbers cut to their real part (with only a
# ComplexWarning), booleans as 0/1, dates as day counts, None as NaN.
NOT_REAL = [
    pytest.param("1.5", "str", id="str"),
    pytest.param(np.array(["1.5"]), "str", id="str-array"),
    pytest.param(np.array([b"1.5"]), "bytes", id="bytes-array"),
    pytest.param(1.5 + 0j, "complex", id="complex"),
    pytest.param(np.array([1.5 + 2j]), "complex", id="complex-array"),
    pytest.param(np.complex64(1.5), "complex", id="complex-scalar"),
    pytest.param(True, "bool", id="bool"),
    pytest.param(np.array([True]), "bool", id="bool-array"),
    pytest.param(np.array(["2020-01-01"], dtype="datetime64[D]"), "datetime64", id="dates"),
    pytest.param(np.array([None]), "NoneType", id="object-none"),
    pytest.param(np.array(["1.5"], dtype=object), "str", id="object-str"),
    pytest.param(np.array([np.bool_(True)], dtype=object), "bool", id="object-bool"),
]


@pytest.mark.filterwarnings("error")  # a ComplexWarning on the way is a failure
@pytest.mark.parametrize("value, named", NOT_REAL)
@pytest.mark.parametrize("batched", [False, True], ids=["one", "batched"])
def test_a_simulator_returning_summaries_that_are_not_real_numbers_is_a_type_error(value, named, batched):
    if batched:
        def simulator(theta, n, rng):
            return np.repeat(np.asarray(value).reshape(1, 1), n, axis=0)
    else:
        def simulator(theta, rng):
            return value

    for estimator in (
        km.ABC(simulator, [0.0], 1.0, 4, batched=batched),
        km.SyntheticLikelihood(simulator, [0.0], 4, batched=batched),
    ):
        with pytest.raises(TypeError, match=rf"the simulator returned .*{named}.*; expected a real-valued float array"):
            estimator(np.zeros(1), np.random.default_rng(0))


def test_summaries_that_are_not_real_numbers_stop_a_run_and_habc_with_a_type_error():
    def strings(theta, rng):
        return np.array(["1.5", "2"])

    with pytest.raises(TypeError, match=r"returned .*str.*; expected a real-valued float array of shape \(s,\) = \(2,\)"):
        km.sample(km.ABC(strings, [0.0, 0.0], 1.0, 3), [0.0], draws=5, tune=0, chains=1, progress=False)
    with pytest.raises(TypeError, match="returned .*str.*; expected a real-valued float array"):
        km.HABC(strings, [0.0, 0.0], steps=2).sample([0.0], draws=2, tune=0, chains=1, seed=0, progress=False)
    with pytest.raises(TypeError, match="returned .*complex.*; expected a real-valued float array"):
        km.HABC(lambda theta, rng: np.array([1 + 1j]), [0.0], steps=2).sample(
            [0.0], draws=2, tune=0, chains=1, seed=0, progress=False
        )


@pytest.mark.parametrize("value, named", NOT_REAL)
def test_observed_summaries_that_are_not_real_numbers_are_a_type_error(value, named):
    for make in (
        lambda: km.ABC(mean_of_draws, value, 1.0, 4),
        lambda: km.SyntheticLikelihood(mean_of_draws, value, 4),
        lambda: km.HABC(mean_of_draws, value),
    ):
        with pytest.raises(TypeError, match=rf"`observed` .*{named}.*; expected a real-valued float array"):
            make()


@pytest.mark.parametrize("value, named", NOT_REAL)
def test_summaries_given_to_log_likelihood_that_are_not_real_numbers_are_a_type_error(value, named):
    abc = km.ABC(mean_of_draws, [0.0], 1.0, 4)
    with pytest.raises(TypeError, match=rf"`summaries` .*{named}.*; expected a real-valued float array"):
        abc.log_likelihood(np.asarray(value).reshape(1, 1))


# numpy makes a bool beside numbers in a list 0 or 1, with no complaint
BOOL_BESIDE_NUMBERS = [
    pytest.param([1.0, False], id="list"),
    pytest.param((1, np.bool_(True)), id="tuple-np-bool"),
    pytest.param([np.float64(1.0), np.array(False)], id="0d-bool-array"),
]


@pytest.mark.parametrize("value", BOOL_BESIDE_NUMBERS)
def test_a_bool_beside_numbers_in_summaries_is_a_type_error_as_a_bool_array_is(value):
    for make in (
        lambda: km.ABC(mean_of_draws, value, 1.0, 4),
        lambda: km.SyntheticLikelihood(mean_of_draws, value, 4),
        lambda: km.HABC(mean_of_draws, value),
    ):
        with pytest.raises(TypeError, match=r"`observed` is a \w+ holding booleans .*; expected a real-valued"):
            make()
    for estimator in (
        km.ABC(lambda theta, rng: value, [0.0, 0.0], 1.0, 4),
        km.SyntheticLikelihood(lambda theta, rng: value, [0.0, 0.0], 4),
        km.ABC(lambda theta, n, rng: [value] * n, [0.0, 0.0], 1.0, 4, batched=True),
    ):
        with pytest.raises(TypeError, match=r"the simulator returned a \w+ holding booleans"):
            estimator(np.zeros(1), np.random.default_rng(0))
    abc = km.ABC(mean_of_draws, [0.0, 0.0], [1.0, 1.0], 4)
    with pytest.raises(TypeError, match=r"`summaries` is a list holding booleans"):
        abc.log_likelihood([value])
    with pytest.raises(ValueError, match="`epsilon`"):
        km.ABC(mean_of_draws, [0.0, 0.0], value, 4)
    with pytest.raises(TypeError, match=r"`theta` is a \w+ holding booleans"):
        km.log_likelihood_sd(abc, value)


@pytest.mark.parametrize("epsilon", ["0.5", ["0.5"], 0.5 + 0j, np.array([0.5 + 0j])])
def test_an_abc_epsilon_that_is_not_a_real_number_is_refused(epsilon):
    with pytest.raises(ValueError, match="`epsilon`"):
        km.ABC(mean_of_draws, [0.0], epsilon, 4)


@pytest.mark.parametrize(
    "value",
    [
        np.float32(0.25),
        np.array([1], dtype=np.int64),
        np.array([0.25], dtype=np.float16),
        np.array([0.25], dtype=object),
        [Fraction(1, 4)],
        np.uint8(1),
    ],
    ids=["float32", "int64", "float16", "object-float", "fraction", "uint8"],
)
def test_real_summaries_of_any_numeric_type_are_accepted(value):
    abc = km.ABC(lambda theta, rng: value, value, 1.0, 2)
    assert abc(np.zeros(1), np.random.default_rng(0)) == pytest.approx(-0.5 * math.log(2 * math.pi))
    assert abc.observed.dtype == np.float64


def test_the_estimator_keeps_its_own_copy_of_the_observed_summaries():
    observed = np.array([0.5, 1.0])
    abc = km.ABC(mean_of_draws, observed, 1.0, 4)
    observed[0] = 7.0  # the user's array stays writable, the estimator's unchanged
    assert abc.observed.tolist() == [0.5, 1.0]
    assert not abc.observed.flags.writeable


@pytest.mark.parametrize("rng", [None, 0, np.random.RandomState(0)], ids=["none", "int", "RandomState"])
def test_an_estimate_drawn_with_what_is_not_a_generator_is_a_type_error(rng):
    # the simulator failed with AttributeError: 'int' object has no attribute 'normal'
    for estimator in (km.ABC(mean_of_draws, [OBS], EPS, 5, batched=True),
                      km.SyntheticLikelihood(mean_of_draws, [OBS], 5, batched=True)):
        for call in (estimator, estimator.simulate):
            with pytest.raises(TypeError, match=r"`rng` must be a numpy.random.Generator"):
                call([0.0], rng)
