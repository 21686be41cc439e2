"""PyMC models and bounded parameters at their edges: the names and groups
of km.from_pymc's output next to pm.sample's, data containers, and bounds
that cannot be transformed."""

import math

import numpy as np
import pytest

import kameleon as km
from kameleon import priors

pm = pytest.importorskip("pymc")

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
    idata = km.from_pymc(model).sample(draws=20, tune=0, chains=2, seed=1, progress=False)
    assert idata.posterior["x"].dims == ("chain", "draw")
    assert idata.posterior["x"].shape == (2, 20)
