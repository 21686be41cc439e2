"""Priors, bounds and the unconstrained scale: km.priors and sample(prior=, bounds=)."""

import math
import warnings

import numpy as np
import pytest

import kameleon as km
from kameleon import priors

from test_simulators import check_moments

MARGINALS = [
    (priors.Normal(0.5, 2.0), "norm", dict(loc=0.5, scale=2.0)),
    (priors.LogNormal(0.3, 0.7), "lognorm", dict(s=0.7, scale=math.exp(0.3))),
    (priors.Gamma(2.5, 4.0), "gamma", dict(a=2.5, scale=0.25)),
    (priors.Beta(0.7, 3.0), "beta", dict(a=0.7, b=3.0)),
    (priors.Uniform(-1.0, 3.0), "uniform", dict(loc=-1.0, scale=4.0)),
    (priors.HalfNormal(1.5), "halfnorm", dict(scale=1.5)),
    (priors.Exponential(0.5), "expon", dict(scale=2.0)),
    (priors.HalfCauchy(2.0), "halfcauchy", dict(scale=2.0)),
    (priors.InverseGamma(3.0, 2.0), "invgamma", dict(a=3.0, scale=2.0)),
    (priors.StudentT(4.0, 1.0, 0.5), "t", dict(df=4.0, loc=1.0, scale=0.5)),
]


@pytest.mark.parametrize("marginal, name, kwargs", MARGINALS, ids=[m[1] for m in MARGINALS])
def test_marginals_match_scipy(marginal, name, kwargs):
    stats = pytest.importorskip("scipy.stats")
    reference = getattr(stats, name)(**kwargs)
    inside = reference.ppf([0.01, 0.2, 0.5, 0.8, 0.99])
    np.testing.assert_allclose(marginal.log_pdf(inside), reference.logpdf(inside), rtol=1e-10, atol=1e-12)
    assert isinstance(marginal.log_pdf(float(inside[2])), float)
    low, high = marginal.support
    assert (low, high) == tuple(reference.support())
    for outside in (low - 1.0, high + 1.0, low, high):
        if math.isfinite(outside):
            assert marginal.log_pdf(outside) == -math.inf
    # draws: their median (defined for every marginal, the Cauchy too)
    # has sd √(p(1−p)/n)/f(median) = 1/(2√n f(median)); 5 of those
    draws = marginal.draw(np.random.default_rng(0), 20000)
    median = reference.median()
    assert abs(np.median(draws) - median) < 5 / (2 * math.sqrt(20000) * reference.pdf(median))


@pytest.mark.parametrize("support", [(-math.inf, math.inf), (0.0, math.inf), (-math.inf, 2.0), (-1.0, 3.0)])
def test_transforms_round_trip_and_their_log_jacobian_is_the_derivative(support):
    marginal = {
        (-math.inf, math.inf): priors.Normal(),
        (0.0, math.inf): priors.Gamma(2.0),
        (-1.0, 3.0): priors.Uniform(-1.0, 3.0),
    }.get(support)
    z = np.array([-3.0, -0.4, 0.0, 0.7, 2.5])
    if marginal is None:  # an upper bound only: through JointPrior's bounds
        joint = priors.JointPrior(None, [support])
        x = joint.constrain(z[:, None])[:, 0]
        np.testing.assert_allclose(joint.unconstrain(x[:, None])[:, 0], z, rtol=1e-12, atol=1e-12)
        log_jacobian = np.array([joint.log_jacobian(np.array([v])) for v in z])
        forward = lambda v: joint.constrain(np.array([v]))[0]  # noqa: E731
    else:
        x = marginal.from_unconstrained(z)
        np.testing.assert_allclose(marginal.to_unconstrained(x), z, rtol=1e-12, atol=1e-12)
        log_jacobian = marginal.log_jacobian(z)
        forward = marginal.from_unconstrained
    assert ((x > support[0]) & (x < support[1])).all()
    h = 1e-6
    numeric = np.log(np.abs([(forward(v + h) - forward(v - h)) / (2 * h) for v in z]))
    np.testing.assert_allclose(log_jacobian, numeric, atol=1e-7)


def test_the_joint_prior_per_step_is_each_marginal_coordinate_by_coordinate():
    # JointPrior transforms each group of supports with its own formula and
    # evaluates the marginals' densities directly (the per-step path of
    # sample(prior=)); the reference is every marginal's public method on
    # its own coordinate, summed in order: the values must agree exactly,
    # also where the transforms overflow or round onto a bound
    marginals = [m for m, _, _ in MARGINALS]
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(300):
        prior = [marginals[i] for i in rng.integers(0, len(marginals), size=rng.integers(1, 8))]
        joint = priors.JointPrior(prior)
        z = rng.standard_normal((3, len(prior))) * rng.choice([0.3, 3.0, 40.0, 800.0])
        with np.errstate(over="ignore"):
            expected = np.array([[m.from_unconstrained(v) for m, v in zip(prior, row)] for row in z])
        np.testing.assert_array_equal(joint.constrain(z), expected)
        for row, x in zip(z, expected):
            jacobian = sum(float(m.log_jacobian(v)) for m, v in zip(prior, row))
            assert joint.log_jacobian(row) == jacobian or (math.isnan(jacobian) and math.isnan(joint.log_jacobian(row)))
            if joint.outside(x) is None:
                assert joint.log_prior(x) == sum(m.log_pdf(v) for m, v in zip(prior, x))
                checked += 1
    # bounds alone: the same transforms, one bound pair per coordinate
    bounds = [(None, None), (0.0, None), (None, 2.0), (-1.0, 3.0), (5.0, 5.5)]
    joint = priors.JointPrior(None, bounds)
    z = rng.standard_normal((50, len(bounds))) * 5.0
    for j, (low, high) in enumerate(bounds):
        low, high = -math.inf if low is None else low, math.inf if high is None else high
        np.testing.assert_array_equal(joint.constrain(z)[:, j], priors._constrain(z[:, j], low, high))
    assert checked > 300


def test_the_interval_transform_near_its_ends():
    beta = priors.Beta(1.0, 1.0)
    # near the lower end x = σ(z) keeps its full relative precision
    assert beta.from_unconstrained(-700.0) > 0
    assert beta.to_unconstrained(beta.from_unconstrained(-700.0)) == pytest.approx(-700.0, rel=1e-12)
    # near the upper end x = 1 − σ(−z) keeps what the float spacing below 1
    # allows, and rounds onto the bound beyond z ≈ 37, where sample()
    # rejects the point
    assert beta.from_unconstrained(36.0) < 1.0
    assert beta.from_unconstrained(40.0) == 1.0


@pytest.mark.parametrize("low, high", [(0.0, 1.0), (-1.0, 1.0), (-5.0, 1e3), (0.0, 1e12), (-1e12, 1e12),
                                       (-1e16, 1e16), (2.0, 3.0)])
def test_the_interval_transform_keeps_the_digits_of_x(low, high):
    # x = low + w·σ(z) computed at 60 digits: the forward transform is
    # within 4 units in the last place of the larger of |x| and the
    # midpoint in the middle (|z| < 2), of |x| and the nearer end beyond
    # (plus |z| units there: log σ(z) carries |z| of rounding into x);
    # and in the middle x → z → x returns x to as many (beyond, z's own
    # rounding, times dx/dz, can be more). Wide intervals ("±1e12 for no
    # bound") put x = 0.5 on a grid of 1e-4, and at ±1e16 on 0
    decimal = pytest.importorskip("decimal")
    context = decimal.Context(prec=60)
    middle = abs(low + 0.5 * (high - low))
    xs = [x for x in [*np.linspace(low, high, 41)[1:-1], 0.5, 1e-3, 1.0 + 1e-9, 2.5] if low < x < high]
    for x in xs:
        z = priors._unconstrain(np.array(x), low, high)
        forward = float(priors._constrain(z, low, high))
        exact = context.add(decimal.Decimal(low), context.divide(
            context.subtract(decimal.Decimal(high), decimal.Decimal(low)),
            context.add(1, context.exp(-decimal.Decimal(float(z))))))
        scale = middle if abs(z) < 2 else abs(low if z < 0 else high)
        unit = np.spacing(max(abs(x), scale))
        assert abs(forward - float(exact)) <= (4 + (abs(z) if abs(z) >= 2 else 0)) * unit, (x, z)
        assert abs(z) >= 2 or abs(forward - x) <= 4 * unit, (x, z)


@pytest.mark.filterwarnings("ignore::kameleon.SamplingWarning")
@pytest.mark.parametrize("bound", [1e12, 1e16])
def test_wide_bounds_leave_the_draws_their_digits(bound):
    # the posterior N(0.5, 0.1²) inside bounds of ±1e12 had its draws on a
    # grid of 1e-4; inside ±1e16 every draw was 0.0 (the start 0.5 itself
    # rounded away)
    idata = km.sample(lambda x: -50.0 * float((x[0] - 0.5) ** 2), [0.5], bounds=[(-bound, bound)],
                      sampler=km.AM(), draws=500, tune=500, chains=2, seed=1, progress=False)
    x = idata.posterior["x"].values.ravel()
    assert 0.3 < x.mean() < 0.7 and 0.05 < x.std() < 0.2
    off_grid = np.abs(x * 1e4 - np.round(x * 1e4))
    assert np.median(off_grid) > 0.1  # spread over the grid's cells, as on a fine scale


# ── conjugate posteriors through sample(prior=) ──────────────────────────


def test_gamma_prior_with_poisson_counts_gives_the_conjugate_gamma_posterior():
    # λ ~ Gamma(a, b), yᵢ ~ Poisson(λ): λ | y ~ Gamma(a + Σy, b + n)
    a, b = 2.0, 0.5
    y = np.random.default_rng(3).poisson(3.0, size=20)

    def log_likelihood(x):
        return float(y.sum() * math.log(x[0]) - y.size * x[0])

    idata = km.sample(log_likelihood, None, prior={"rate": priors.Gamma(a, b)}, sampler=km.AM(), draws=2000,
                      tune=500, chains=4, seed=1, progress=False)
    assert set(idata.posterior.data_vars) == {"rate"}
    draws = idata.posterior["rate"].values
    assert (draws > 0).all()
    shape, rate = a + y.sum(), b + y.size
    check_moments(draws, shape / rate, math.sqrt(shape) / rate)
    assert idata.posterior.attrs["prior"] == "rate: Gamma(shape=2.0, rate=0.5)"


def test_beta_prior_with_binomial_counts_gives_the_conjugate_beta_posterior():
    # p ~ Beta(α, β), k successes in N: p | k ~ Beta(α + k, β + N − k); the
    # default sampler (KAMH), a list prior and parameter_names
    alpha, beta, k, n = 2.0, 3.0, 7, 30

    def log_likelihood(x):
        return k * math.log(x[0]) + (n - k) * math.log1p(-x[0])

    idata = km.sample(log_likelihood, [0.5], prior=[priors.Beta(alpha, beta)], draws=1500, tune=1000, chains=4,
                      seed=2, progress=False, parameter_names=["p"])
    draws = idata.posterior["p"].values
    assert ((draws > 0) & (draws < 1)).all()
    a, b = alpha + k, beta + n - k
    check_moments(draws, a / (a + b), math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1))))


def test_bounds_alone_are_a_flat_prior_and_a_callable_prior_matches_the_marginal():
    k, n = 7, 30

    def log_likelihood(x):
        return k * math.log(x[0]) + (n - k) * math.log1p(-x[0])

    kwargs = dict(sampler=km.AM(), draws=2000, tune=500, chains=4, seed=4, progress=False)
    flat = km.sample(log_likelihood, [0.5], bounds=[(0.0, 1.0)], **kwargs)
    a, b = 1 + k, 1 + n - k  # Beta(1, 1) prior
    check_moments(flat.posterior["x"].values[:, :, 0], a / (a + b), math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1))))
    # the same prior as a callable with bounds, or as marginals: same chains
    beta = priors.Beta(2.0, 3.0)
    by_callable = km.sample(log_likelihood, [0.5], prior=lambda x: beta.log_pdf(x[0]), bounds=[(0, 1)], **kwargs)
    by_marginal = km.sample(log_likelihood, [0.5], prior=[beta], **kwargs)
    np.testing.assert_allclose(by_callable.posterior["x"].values, by_marginal.posterior["x"].values, rtol=1e-12)


def test_a_pseudo_marginal_likelihood_with_a_prior_and_unbounded_parameters():
    # N(0, 1) prior × a noisy but unbiased N(x; 1, 1) likelihood (log-normal
    # noise with the −σ²/2 correction): the posterior is N(1/2, 1/2)
    def noisy(x, rng):
        return -0.5 * (x[0] - 1.0) ** 2 + 0.4 * rng.standard_normal() - 0.08

    idata = km.sample(km.PseudoMarginal(noisy), None, prior=[priors.Normal(0.0, 1.0)], bounds=None,
                      sampler=km.AM(), draws=3000, tune=500, chains=4, seed=6, progress=False)
    check_moments(idata.posterior["x"].values[:, :, 0], 0.5, math.sqrt(0.5))


def test_x0_none_starts_from_prior_draws_reproducibly():
    prior = {"mu": priors.Normal(0.0, 1.0), "scale": priors.Exponential(1.0)}
    calls = []

    def log_likelihood(x):
        calls.append(x.copy())
        return -0.5 * x[0] ** 2 - x[1]

    kwargs = dict(prior=prior, sampler=km.RandomWalk(), draws=5, tune=0, chains=3, seed=21, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        one = km.sample(log_likelihood, None, **kwargs)
        two = km.sample(log_likelihood, None, **kwargs)
    for name in prior:
        np.testing.assert_array_equal(one.posterior[name].values, two.posterior[name].values)
    # chain k starts at the first prior draw of stream k of the seed (the
    # log density is finite everywhere here), evaluated on the constrained
    # scale after the round trip through the unconstrained one
    for k in range(3):
        rng = np.random.default_rng(np.random.SeedSequence(21, spawn_key=(k,)))
        start = np.array([prior["mu"].draw(rng), prior["scale"].draw(rng)])
        assert any(np.allclose(x, start, rtol=1e-12) for x in calls)


@pytest.mark.filterwarnings("ignore::kameleon.SamplingWarning")
def test_resume_with_the_same_prior_returns_constrained_draws(tmp_path):
    def log_likelihood(x):
        return -0.5 * float(np.sum((np.log(x) - 1.0) ** 2))

    prior = {"a": priors.LogNormal(0.0, 1.0), "b": priors.Gamma(2.0, 1.0)}
    path = tmp_path / "run.ckpt"
    kwargs = dict(sampler=km.AM(), draws=300, tune=100, chains=2, seed=3, progress=False)
    whole = km.sample(log_likelihood, [1.0, 2.0], prior=prior, checkpoint=path, **kwargs)
    resumed = km.resume(path, log_likelihood, prior=prior, progress=False)
    for name in prior:
        np.testing.assert_array_equal(resumed.posterior[name].values, whole.posterior[name].values)
        assert (resumed.posterior[name].values > 0).all()
    with pytest.raises(ValueError, match="3 parameters but the checkpointed run has dimension 2"):
        km.resume(path, log_likelihood, prior=[priors.Normal()] * 3, progress=False)


# ── errors ────────────────────────────────────────────────────────────────


def flat(x):
    return 0.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(x0=[1.0, -0.5], prior={"a": priors.Normal(), "s": priors.HalfNormal()}),
         r"`x0` lies outside the support of parameter 's': -0.5 is not in \(0, inf\)"),
        (dict(x0=[[0.5], [1.5]], prior=[priors.Beta(1, 1)]), r"`x0` \(chain 1\) lies outside .*'x\[0\]'"),
        (dict(x0=[1.0, 1.0], prior=[priors.Normal()]), r"`prior` has 1 parameters but `x0` has dimension 2"),
        (dict(x0=[1.0], bounds=[(0, 1), (0, None)]), r"`bounds` has 2 pairs but `x0` has dimension 1"),
        (dict(x0=[1.0], bounds=[(1, 0)]), r"`bounds\[0\]` must be a pair"),
        (dict(x0=[1.0], bounds=[(0,)]), r"`bounds\[0\]` must be a pair"),
        (dict(x0=[1.0], bounds="0, 1"), r"`bounds` must be a non-empty list"),
        (dict(x0=[1.0], prior=flat), r"a callable `prior` needs `bounds=`"),
        (dict(x0=None, prior=flat, bounds=[(0, 1)]), r"`x0=None` draws the starting points from the prior"),
        (dict(x0=None), r"`x0` is required"),
        (dict(x0=[1.0], prior=[priors.Normal()], bounds=[(0, 1)]), r"`bounds` cannot be combined"),
        (dict(x0=[1.0], prior=[1.0]), r"`prior\[0\]` must be a kameleon.priors marginal"),
        (dict(x0=[1.0], prior={"a": "normal"}), r"`prior\['a'\]` must be a kameleon.priors marginal"),
        (dict(x0=[1.0], prior=[]), r"`prior` must have one marginal per parameter"),
        (dict(x0=[1.0], prior={"a": priors.Normal()}, parameter_names=["b"]), r"`parameter_names` \['b'\] differ"),
        (dict(x0=[1.0], prior=[priors.Normal()], sampler=km.HMC(grad_log_density=lambda x: -x)),
         r"HMC does not support `prior=`"),
    ],
)
def test_invalid_priors_bounds_and_starts_are_clear_errors(kwargs, message):
    kwargs = dict(kwargs)
    x0 = kwargs.pop("x0")
    with pytest.raises(ValueError, match=message):
        km.sample(flat, x0, draws=5, tune=0, chains=2, progress=False, **kwargs)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: priors.Gamma(-1.0), "`shape`"),
        (lambda: priors.Normal(0.0, 0.0), "`sigma`"),
        (lambda: priors.Beta(1.0, math.nan), "`b`"),
        (lambda: priors.Uniform(2.0, 1.0), "`low` must be below `high`"),
        (lambda: priors.Exponential(True), "`rate`"),
    ],
)
def test_invalid_marginal_parameters_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_builtin_targets_and_compiled_functions_cannot_take_a_prior():
    with pytest.raises(TypeError, match="log-likelihood"):
        km.sample(km.targets.Banana(2), [0.0, 0.0], prior=[priors.Normal()] * 2, progress=False)


def test_a_non_float_log_likelihood_or_log_prior_is_a_type_error_naming_it():
    def returns_text(x):
        return "oops"

    with pytest.raises(TypeError, match="returns_text"):
        km.sample(returns_text, [0.5], prior=[priors.Normal()], draws=5, tune=0, chains=1, progress=False)
    with pytest.raises(TypeError, match=r"log prior function `\S*returns_text`"):
        km.sample(flat, [0.5], prior=returns_text, bounds=[(0, 1)], draws=5, tune=0, chains=1, progress=False)


@pytest.mark.filterwarnings("error")  # a ComplexWarning on the way is a failure
@pytest.mark.parametrize("x, named", [
    (True, "bool"), ("0.5", "str"), ([0.5, True], "booleans"), (0.5 + 0j, "complex"), (None, "NoneType"),
])
def test_a_marginal_evaluated_at_what_is_not_real_numbers_is_a_type_error(x, named):
    # log_pdf(True) was the density at 1, "0.5" was parsed, None was -inf
    normal = priors.Normal(0.0, 1.0)
    for method, name in ((normal.log_pdf, "x"), (normal.to_unconstrained, "x"), (normal.from_unconstrained, "z"),
                         (normal.log_jacobian, "z")):
        with pytest.raises(TypeError, match=rf"`{name}` is .*{named}"):
            method(x)


def test_a_marginal_drawn_with_what_is_not_a_generator_is_a_type_error():
    # draw(0) was AttributeError: 'int' object has no attribute 'normal'
    for marginal in (priors.Normal(0.0, 1.0), priors.Beta(2.0, 3.0), priors.StudentT(3.0, 0.0, 1.0)):
        with pytest.raises(TypeError, match=r"`rng` must be a numpy.random.Generator"):
            marginal.draw(0)
        assert np.isfinite(marginal.draw(np.random.default_rng(0)))
