"""PyMC models and bounded parameters at their edges: the names and groups
of km.from_pymc's output next to pm.sample's, data containers, and bounds
that cannot be transformed."""

import math
import pickle
import warnings

import cloudpickle
import numpy as np
import pytest

import kameleon as km
from kameleon import priors

pm = pytest.importorskip("pymc")
pt = pytest.importorskip("pytensor.tensor")
from pytensor.graph import Apply, Op  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::kameleon.SamplingWarning"),
    # PyTensor's C backend (pm.sample, PyMC's initial_point) without BLAS
    pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS"),
]

SHORT = dict(draws=5, tune=0, chains=1, seed=1, progress=False)


def test_a_model_whose_one_scalar_variable_is_named_x():
    # "x" is also the name kameleon gives unnamed draws: the model's own
    # variable must not be mistaken for them
    with pm.Model() as model:
        pm.Normal("x", 1.0, 2.0)
    post = km.from_pymc(model)
    idata = post.sample(draws=20, tune=0, chains=2, seed=1, progress=False)
    assert idata.posterior["x"].dims == ("chain", "draw")
    assert idata.posterior["x"].shape == (2, 20)
    # and kameleon's unnamed draws of it still read as such
    unnamed = km.sample(post.log_density, post.x0, draws=20, tune=0, chains=2, seed=1, progress=False)
    np.testing.assert_array_equal(post.to_inference_data(unnamed).posterior["x"], idata.posterior["x"])


OBSERVED = np.array([0.1, 1.9, 4.2, 5.8])


def data_model():
    with pm.Model(coords={"obs": [10, 20, 30, 40], "k": ["u", "v", "w"]}) as model:
        x = pm.Data("x", np.arange(4.0), dims="obs")
        scale = pm.Data("scale", 2.0)
        slope = pm.Normal("slope", 0.0, scale)
        observed = pm.Data("observed", OBSERVED, dims="obs")
        pm.Normal("y", slope * x, 1.0, observed=observed, dims="obs")
        pm.Deterministic("fit", slope * x, dims="obs")
        w = pm.Dirichlet("w", np.ones(3), dims="k")
        pm.Multinomial("n", 10, w, observed=np.array([2, 3, 5]), dims="k")
    return model


def layout(data):
    """Each group's variables (name, dims, shape, dtype) and coordinates."""
    out = {}
    for group in ("posterior", "observed_data", "constant_data"):
        if group not in data:
            continue
        ds = data[group]
        variables = [(k, ds[k].dims, ds[k].shape, str(ds[k].dtype)) for k in ds.data_vars]
        coords = {k: list(ds[k].values) for k in ds.coords if k not in ("chain", "draw")}
        out[group] = (variables, coords)
    return out


def test_groups_names_dims_and_coords_are_pm_samples():
    model = data_model()
    ours = km.from_pymc(model).sample(**SHORT)
    theirs = pm.sample(
        step=pm.Metropolis(model=model), draws=5, tune=0, chains=1, random_seed=1, progressbar=False,
        compute_convergence_checks=False, model=model,
    )
    assert set(layout(ours)) == {"posterior", "observed_data", "constant_data"}
    assert layout(ours) == layout(theirs)
    np.testing.assert_array_equal(ours.constant_data["x"], np.arange(4.0))
    assert float(ours.constant_data["scale"]) == 2.0


def test_posterior_predictive_keeps_the_draws_of_a_variable_whose_prior_reads_data():
    # with the data recorded (constant_data), PyMC knows they have not
    # changed since the run and takes `slope` from the draws instead of
    # drawing it afresh from its prior; y = slope·x + N(0, 1e-9²) then
    # gives the slope back to about 1e-9
    with pm.Model() as model:
        x = pm.Data("x", np.array([1.0, 2.0]))
        scale = pm.Data("scale", 2.0)
        slope = pm.Normal("slope", 0.0, scale)
        pm.Normal("y", slope * x, 1e-9, observed=np.array([0.5, 1.0]))
    idata = km.from_pymc(model).sample(draws=20, tune=0, chains=2, seed=1, progress=False)
    predictive = pm.sample_posterior_predictive(idata, model=model, random_seed=1, progressbar=False)
    y = predictive.posterior_predictive["y"].values
    np.testing.assert_allclose(y[:, :, 0], idata.posterior["slope"].values, atol=1e-7)


def test_the_output_shows_the_data_the_log_density_was_compiled_with():
    # the data containers are compiled in as constants: set_data after
    # from_pymc does not change what is sampled, so neither does it change
    # the data the output reports
    model = data_model()
    post = km.from_pymc(model)
    with model:
        pm.set_data({"x": np.full(4, 9.0), "scale": 5.0, "observed": np.zeros(4)})
    idata = post.sample(**SHORT)
    np.testing.assert_array_equal(idata.constant_data["x"], np.arange(4.0))
    assert float(idata.constant_data["scale"]) == 2.0
    np.testing.assert_array_equal(idata.observed_data["y"], OBSERVED)


# ── bounds ───────────────────────────────────────────────────────────────


@pytest.mark.parametrize("pair", [(-1e308, 1e308), (-1.7e308, 0.5e308)])
def test_bounds_too_wide_for_a_float_are_refused(pair):
    # high − low overflows: the scaled logit put every point outside the
    # bounds, and the run failed saying the start (inside) was outside
    with pytest.raises(ValueError, match=r"`bounds\[0\]`.*high − low"):
        km.sample(lambda x: 0.0, [0.0], bounds=[pair], **SHORT)


@pytest.mark.parametrize("bounds", [(0, 1), (None, 1.0), [0.0, np.inf], np.array([0.0, 1.0])])
def test_one_pair_in_place_of_a_list_of_pairs_says_so(bounds):
    with pytest.raises(ValueError, match=r"one \(low, high\) pair per parameter.*\[\(low, high\)\]"):
        km.sample(lambda x: 0.0, [0.5], bounds=bounds, **SHORT)


def test_a_uniform_too_wide_for_a_float_is_refused():
    # its log density was −inf everywhere
    with pytest.raises(ValueError, match="high − low"):
        priors.Uniform(-1e308, 1e308)


# ── the Python log density in worker processes ──────────────────────────



class Quadratic(Op):
    """A black box −z²/2 without a numba implementation: PyTensor runs it
    in Python (numba's object mode)."""

    def make_node(self, value):
        return Apply(self, [pt.as_tensor_variable(value)], [pt.dscalar()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = np.asarray(-0.5 * float(inputs[0]) ** 2)


def test_the_python_log_density_travels_to_workers_alone_and_quietly():
    # worker processes unpickle the log density: it must bring neither
    # PyTensor's object-mode warning, which from_pymc keeps to itself, nor
    # the model and the functions of the output, compiled again for nothing
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        pm.Potential("black_box", Quadratic()(mu))
    post = km.from_pymc(model)
    assert not post.compiled
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log_density = pickle.loads(cloudpickle.dumps(post.log_density))
    assert [str(w.message) for w in caught] == []
    assert not isinstance(getattr(log_density, "__self__", None), km.pymc.PyMCPosterior)
    assert log_density(np.array([0.7])) == post.log_density(np.array([0.7]))
