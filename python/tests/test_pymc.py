"""km.from_pymc: PyMC models on their unconstrained space.

Each model is compiled once per module (PyTensor and numba compile times
dominate these tests); the runs are short and seeded.
"""

import math
import warnings

import numpy as np
import pytest

import kameleon as km

pm = pytest.importorskip("pymc")
pt = pytest.importorskip("pytensor.tensor")
from pytensor.graph import Apply, Op  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::kameleon.SamplingWarning"),
    # PyTensor's C backend (PyMC's own compile_logp, initial_point) without BLAS
    pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS"),
]

DATA = np.array([0.3, 1.2, -0.4, 2.1, 0.9, 1.5, 0.1, 1.1])
# Normal–gamma prior: τ ~ Gamma(A0, B0) (rate), μ | τ ~ N(M0, 1/(K0 τ))
A0, B0, M0, K0 = 2.0, 1.0, 0.0, 0.5
# two Binomial(N_TRIALS, p_g) counts with p_g ~ Beta(2, 3)
N_TRIALS, COUNTS = 20, np.array([7, 12])


def conjugate_model():
    with pm.Model(coords={"group": ["a", "b"]}) as model:
        tau = pm.Gamma("tau", alpha=A0, beta=B0)
        mu = pm.Normal("mu", M0, sigma=1 / pt.sqrt(K0 * tau))
        pm.Normal("y", mu, sigma=1 / pt.sqrt(tau), observed=DATA)
        p = pm.Beta("p", 2.0, 3.0, dims="group")
        pm.Binomial("k", N_TRIALS, p, observed=COUNTS, dims="group")
        pm.Deterministic("sd", 1 / pt.sqrt(tau))
    return model


def conjugate_moments():
    """The exact posterior means and sds of τ, μ, p[0] and p[1]."""
    n, ybar = DATA.size, DATA.mean()
    kn = K0 + n
    mn = (K0 * M0 + n * ybar) / kn
    an = A0 + n / 2
    bn = B0 + 0.5 * ((DATA - ybar) ** 2).sum() + K0 * n * (ybar - M0) ** 2 / (2 * kn)
    moments = {
        "tau": (an / bn, math.sqrt(an) / bn),  # Gamma(an, bn)
        "mu": (mn, math.sqrt(bn / (kn * (an - 1)))),  # Student t, 2an dof
    }
    for g, count in enumerate(COUNTS):  # Beta(2 + k, 3 + N − k)
        a, b = 2.0 + count, 3.0 + N_TRIALS - count
        moments[f"p[{g}]"] = (a / (a + b), math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1))))
    return moments


@pytest.fixture(scope="module")
def conjugate():
    model = conjugate_model()
    return model, km.from_pymc(model)


@pytest.fixture(scope="module")
def conjugate_draws(conjugate):
    _, post = conjugate
    return post.sample(sampler=km.AM(), draws=3000, tune=1000, chains=4, seed=3, progress=False)


def test_the_compiled_route_is_taken_and_the_layout_follows_value_vars(conjugate):
    _, post = conjugate
    assert post.compiled and isinstance(post.log_density, km.Compiled)
    assert post.dim == 4
    assert post.unconstrained_names == ["tau_log__", "mu", "p_logodds__[0]", "p_logodds__[1]"]
    assert post.variables == ["tau", "mu", "p", "sd"]
    # PyMC's initial point: log of the Gamma's mean 2, logit of the Beta's 0.4
    np.testing.assert_allclose(post.x0, [math.log(2.0), 0.0, math.log(0.4 / 0.6), math.log(0.4 / 0.6)])


def test_log_density_is_pymcs_with_jacobian_on_both_backends(conjugate):
    model, post = conjugate
    python = km.from_pymc(model, backend="python")
    assert not python.compiled and callable(python.log_density)
    reference = model.compile_logp(jacobian=True)
    rng = np.random.default_rng(0)
    for _ in range(5):
        z = post.x0 + rng.normal(size=post.dim)
        point = {"tau_log__": z[0], "mu": z[1], "p_logodds__": z[2:]}
        expected = float(reference(point))
        assert post.log_density_at(z) == pytest.approx(expected, rel=1e-12, abs=1e-12)
        assert python.log_density(z) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_output_is_named_shaped_and_constrained_like_pm_sample(conjugate, conjugate_draws):
    _, post = conjugate
    idata = conjugate_draws
    posterior = idata.posterior
    assert list(posterior.data_vars) == ["tau", "mu", "p", "sd"]
    assert posterior["tau"].dims == ("chain", "draw")
    assert posterior["p"].dims == ("chain", "draw", "group")
    assert list(posterior["group"].values) == ["a", "b"]
    assert posterior["p"].shape == (4, 3000, 2)
    assert (posterior["tau"] > 0).all()
    assert ((posterior["p"] > 0) & (posterior["p"] < 1)).all()
    # the deterministic is computed from the same draw
    np.testing.assert_allclose(posterior["sd"], 1 / np.sqrt(posterior["tau"]), rtol=1e-12)
    np.testing.assert_array_equal(idata.observed_data["k"], COUNTS)
    np.testing.assert_array_equal(idata.observed_data["y"], DATA)
    assert idata.sample_stats["lp"].shape == (4, 3000)
    assert idata.posterior.attrs["inference_library"] == "kameleon"


def test_moments_agree_with_the_closed_form_posterior(conjugate_draws):
    posterior = conjugate_draws.posterior
    columns = {
        "tau": posterior["tau"].values,
        "mu": posterior["mu"].values,
        "p[0]": posterior["p"].values[:, :, 0],
        "p[1]": posterior["p"].values[:, :, 1],
    }
    for name, (mean, sd) in conjugate_moments().items():
        draws = columns[name]
        ess = km.diagnostics.ess(draws)
        assert ess > 400, (name, ess)
        # the Monte Carlo standard error of the mean is sd/√ESS: 4 of them
        # fail a correct sampler with probability ~6e-5 per check
        assert abs(draws.mean() - mean) < 4 * sd / math.sqrt(ess), (name, draws.mean(), mean)
        # the sample sd's relative standard error is ½√((κ − 1)/ESS) with κ
        # the kurtosis; κ ≤ 4 for these posteriors (Gamma(10, ·): 3.6; the
        # t with 20 dof: 3.4; the Betas: < 3), so ½√(3/ESS); 4 of them
        assert abs(draws.std() / sd - 1) < 4 * 0.5 * math.sqrt(3 / ess), (name, draws.std(), sd)


class NormalLogLike(Op):
    """A black-box log-likelihood: numpy code without a gradient, the
    log-likelihood of DATA under N(μ, 1) up to a constant. It raises for
    μ > 50 (to test that errors reach the caller)."""

    def make_node(self, mu):
        mu = pt.as_tensor_variable(mu)
        return Apply(self, [mu], [pt.dscalar()])

    def perform(self, node, inputs, outputs):
        (mu,) = inputs
        if mu > 50:
            raise RuntimeError("the black box refuses mu > 50")
        outputs[0][0] = np.asarray(-0.5 * float(((DATA - mu) ** 2).sum()))


@pytest.fixture(scope="module")
def blackbox():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        pm.Potential("loglike", NormalLogLike()(mu))
    return km.from_pymc(model)


def test_a_black_box_likelihood_runs_as_a_python_callable(blackbox):
    post = blackbox
    assert not post.compiled
    idata = post.sample(sampler=km.AM(), draws=2000, tune=500, chains=2, seed=5, progress=False)
    draws = idata.posterior["mu"].values
    # conjugate: precision n + 1/100, mean ΣDATA / precision
    precision = DATA.size + 1 / 100
    mean, sd = DATA.sum() / precision, precision**-0.5
    ess = km.diagnostics.ess(draws)
    assert ess > 200, ess
    # as above: 4 Monte Carlo standard errors
    assert abs(draws.mean() - mean) < 4 * sd / math.sqrt(ess), (draws.mean(), mean)


def test_a_black_box_error_stops_the_run(blackbox):
    with pytest.raises(RuntimeError, match="refuses"):
        blackbox.sample(x0=np.array([60.0]), chains=1, draws=5, tune=0, progress=False)


def test_bad_input_is_refused(conjugate):
    _, post = conjugate
    with pytest.raises(TypeError, match="pymc.Model"):
        km.from_pymc("not a model")
    with pytest.raises(ValueError, match="backend"):
        km.from_pymc(conjugate[0], backend="jax")
    with pytest.raises(TypeError, match="prior"):
        post.sample(prior=[km.priors.Normal()], progress=False)
    with pytest.raises(ValueError, match="shape"):
        post.point([0.0])
    with pm.Model() as discrete:
        pm.Poisson("n", 3.0)
    with pytest.raises(ValueError, match="discrete"):
        km.from_pymc(discrete)
    with pytest.raises(ValueError, match="no free"):
        km.from_pymc(pm.Model())


def test_draws_of_sample_with_other_names_are_refused(conjugate):
    _, post = conjugate
    data = km.sample(
        post.log_density, post.x0, draws=10, tune=0, chains=1, parameter_names=["a", "b", "c", "d"], progress=False
    )
    with pytest.raises(ValueError, match="unconstrained_names"):
        post.to_inference_data(data)
    unnamed = km.sample(post.log_density, post.x0, draws=10, tune=0, chains=1, seed=2, progress=False)
    assert post.to_inference_data(unnamed).posterior["p"].shape == (1, 10, 2)


def test_data_containers_are_fixed_at_their_current_values():
    # pm.Data is a shared variable: it is compiled in as a constant, so the
    # log density is still a GIL-free function of z alone
    x = np.linspace(-1.0, 1.0, 5)
    with pm.Model() as model:
        data = pm.Data("data", x)
        slope = pm.Normal("slope", 0.0, 1.0)
        pm.Normal("y", slope * data, 1.0, observed=2.0 * x)
    post = km.from_pymc(model)
    assert post.compiled
    reference = model.compile_logp(jacobian=True)
    for z in (-0.5, 0.7):
        assert post.log_density_at([z]) == pytest.approx(float(reference({"slope": z})), rel=1e-12)


LARGE_DATA = np.ones(200_000)


def graph_with_large_data(z):
    """What PyTensor's numba function returns: a tuple of 0-d arrays."""
    logp = np.empty(())
    logp[()] = z[0] + LARGE_DATA[0]
    return (logp,)


def test_numbas_notes_on_a_graph_with_large_data_are_not_passed_on():
    # a model with a large design matrix made from_pymc print numba's
    # "Cannot cache compiled function ... dynamic globals" (PyTensor compiles
    # with cache=True), which no user can act on
    numba = pytest.importorskip("numba")
    jitted = numba.njit(cache=True)(graph_with_large_data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = km.pymc._cfunc(jitted)
    assert [str(w.message) for w in caught] == []
    assert compiled.ctypes(np.array([2.0]).ctypes.data_as(compiled.ctypes.argtypes[0]), 1) == 3.0
