"""The ArviZ output under both calling conventions of ``arviz.from_dict``:
ArviZ < 1 (installed here; Python 3.11) takes one keyword per group, ArviZ ≥ 1
(Python ≥ 3.12) takes the groups as one dictionary. The ≥ 1 path is checked
against a stand-in with ArviZ 1's signature, ``from_dict(data, *, ...)``."""


import arviz as az
import numpy as np
import pytest

import kameleon as km
from kameleon import _arviz


class _Group:
    def __init__(self, variables):
        self.variables = variables
        self.attrs = {}


def _arviz_one_from_dict(data, *, name=None, attrs=None, **kwargs):
    """ArviZ 1's signature: the groups positionally, the rest keyword-only."""
    return {group: _Group(variables) for group, variables in data.items()}


def test_arviz_one_gets_the_groups_as_one_dictionary(monkeypatch):
    monkeypatch.setattr(az, "__version__", "1.0.0")
    monkeypatch.setattr(az, "from_dict", _arviz_one_from_dict)
    idata = km.sample(
        lambda x: -0.5 * float(x @ x),
        np.zeros(2),
        sampler=km.RandomWalk(),
        draws=30,
        tune=10,
        chains=2,
        seed=4,
        progress=False,
        parameter_names=["a", "b"],
    )
    assert set(idata) == {"posterior", "sample_stats"}
    assert set(idata["posterior"].variables) == {"a", "b"}
    assert idata["posterior"].variables["a"].shape == (2, 30)
    assert set(idata["sample_stats"].variables) == {"lp", "accepted", "acceptance_probability"}
    for group in idata.values():
        assert group.attrs["inference_library"] == "kameleon"
        assert group.attrs["seed"] == "4"


def test_arviz_one_path_serves_the_ensemble_and_saved_chains(monkeypatch, tmp_path):
    monkeypatch.setattr(az, "__version__", "1.0.0")
    monkeypatch.setattr(az, "from_dict", _arviz_one_from_dict)
    ens = km.sample_ensemble(lambda x: -0.5 * float(x @ x), np.zeros(2), draws=20, tune=5, seed=2, progress=False)
    assert ens["posterior"].variables["x"].shape[1:] == (20, 2)
    setting = tmp_path / "chains" / "gauss" / "RW" / "-"
    setting.mkdir(parents=True)
    for k in range(2):
        np.save(setting / f"{k}.npy", np.full((5, 3), float(k)))
    loaded = km.load_results(tmp_path)
    assert loaded[("gauss", "RW", "-")]["posterior"].variables["x"].shape == (2, 5, 3)


def test_the_installed_arviz_gets_one_keyword_per_group():
    assert _arviz.arviz_major_version() == int(az.__version__.split(".")[0])
    data = _arviz.inference_data({"posterior": {"x": np.zeros((2, 4, 3))}}, {"seed": "1"})
    assert data["posterior"]["x"].shape == (2, 4, 3)
    assert data["posterior"].attrs["seed"] == "1"


def test_parameter_names_must_match_the_dimension():
    with pytest.raises(ValueError, match="2 names for dimension 3"):
        _arviz.posterior_variables(np.zeros((1, 4, 3)), ["a", "b"])
