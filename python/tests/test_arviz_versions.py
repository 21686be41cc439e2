"""The ArviZ output with the installed ArviZ: an ``InferenceData`` with
ArviZ < 1, an ``xarray.DataTree`` with ArviZ ≥ 1. run-tests.sh runs this
file in both project venvs: .venv (Python 3.11, ArviZ 0.x) and .venv312
(Python 3.12, ArviZ 1.x)."""


import subprocess
import sys
import warnings

import arviz as az
import numpy as np
import pytest
import xarray as xr

import kameleon as km
from kameleon import _arviz

ARVIZ_ONE = int(az.__version__.split(".")[0]) >= 1


def logp(x):
    return -0.5 * float(x @ x)


def expected_type():
    return xr.DataTree if ARVIZ_ONE else az.InferenceData


def test_the_major_version_is_the_installed_one():
    assert _arviz.arviz_major_version() == int(az.__version__.split(".")[0])


@pytest.mark.skipif(not ARVIZ_ONE, reason="ArviZ < 1 keeps InferenceData in the package that imports the plots")
def test_a_run_builds_its_output_without_importing_the_plotting_libraries():
    # ArviZ ≥ 1's data layer, arviz_base, builds the output; `import arviz`
    # would also import its plots (three times the import time)
    program = (
        "import sys, numpy as np, kameleon as km\n"
        "idata = km.sample(lambda x: -0.5 * float(x @ x), np.zeros(2), tune=50, draws=50, chains=2, seed=1,\n"
        "                  progress=False)\n"
        "print(type(idata).__name__, 'arviz' in sys.modules, 'arviz_base' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["DataTree", "False", "True"], out.stdout + out.stderr


def test_sample_gives_the_installed_arviz_type_with_groups_and_attrs():
    idata = km.sample(
        logp,
        np.zeros(2),
        sampler=km.RandomWalk(),
        draws=30,
        tune=10,
        chains=2,
        seed=4,
        progress=False,
        parameter_names=["a", "b"],
    )
    assert isinstance(idata, expected_type())
    assert set(idata["posterior"].data_vars) == {"a", "b"}
    assert idata["posterior"]["a"].shape == (2, 30)
    assert idata.posterior["b"].dims == ("chain", "draw")
    assert set(idata["sample_stats"].data_vars) == {"lp", "accepted", "acceptance_probability"}
    for group in ("posterior", "sample_stats"):
        assert idata[group].attrs["inference_library"] == "kameleon"
        assert idata[group].attrs["seed"] == "4"


def test_the_output_survives_a_netcdf_round_trip(tmp_path):
    idata = km.sample(
        logp, np.zeros(2), sampler=km.AM(), draws=40, tune=10, chains=2, seed=1, progress=False
    )
    path = tmp_path / "run.nc"
    idata.to_netcdf(str(path))
    back = az.from_netcdf(str(path))
    assert isinstance(back, expected_type())
    np.testing.assert_array_equal(back["posterior"]["x"].values, idata["posterior"]["x"].values)
    np.testing.assert_array_equal(back["sample_stats"]["lp"].values, idata["sample_stats"]["lp"].values)
    assert back["posterior"].attrs["seed"] == idata["posterior"].attrs["seed"]


def test_the_ensemble_and_saved_chains_give_the_installed_arviz_type(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ens = km.sample_ensemble(logp, np.zeros(2), draws=20, tune=5, seed=2, progress=False)
    # 32 walkers of 20 draws: ArviZ's guess that chains and draws were
    # swapped is wrong for an ensemble, and not shown
    assert [str(w.message) for w in caught if issubclass(w.category, UserWarning)] == []
    assert isinstance(ens, expected_type())
    assert ens["posterior"]["x"].shape[1:] == (20, 2)
    setting = tmp_path / "chains" / "gauss" / "RW" / "-"
    setting.mkdir(parents=True)
    for k in range(2):
        np.save(setting / f"{k}.npy", np.full((5, 3), float(k)))
    loaded = km.load_results(tmp_path)[("gauss", "RW", "-")]
    assert isinstance(loaded, expected_type())
    assert loaded["posterior"]["x"].shape == (2, 5, 3)
    np.testing.assert_array_equal(loaded["posterior"]["x"].values[1], 1.0)


def test_inference_data_sets_the_attrs_on_every_group():
    data = _arviz.inference_data(
        {"posterior": {"x": np.zeros((2, 4, 3))}, "sample_stats": {"lp": np.ones((2, 4))}}, {"seed": "1"}
    )
    assert isinstance(data, expected_type())
    assert data["posterior"]["x"].shape == (2, 4, 3)
    assert data["posterior"].attrs["seed"] == data["sample_stats"].attrs["seed"] == "1"


def test_datasets_with_and_without_draws_make_one_arviz_object():
    # what km.from_pymc assembles: a posterior with dims and coords, and
    # observed data without the chain and draw dimensions
    coords = {"city": ["a", "b", "c"]}
    posterior = _arviz.dataset(
        {"mu": np.zeros((2, 5, 3)), "sigma": np.ones((2, 5))},
        coords=coords,
        dims={"mu": ["city"]},
        attrs={"seed": "7"},
    )
    observed = _arviz.dataset({"y": np.arange(3.0)}, coords=coords, dims={"y": ["city"]}, sample_dims=())
    assert posterior["mu"].dims == ("chain", "draw", "city")
    assert list(posterior["mu"].coords["city"].values) == ["a", "b", "c"]
    assert observed["y"].dims == ("city",)
    data = _arviz.from_datasets({"posterior": posterior, "observed_data": observed})
    assert isinstance(data, expected_type())
    assert data["posterior"].attrs["seed"] == "7"
    np.testing.assert_array_equal(data["observed_data"]["y"].values, [0.0, 1.0, 2.0])
    # more chains than draws (a short run of many chains) is no mistake to warn of
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        many = _arviz.dataset({"x": np.zeros((8, 3))})
    assert many["x"].shape == (8, 3)
    assert [str(w.message) for w in caught if issubclass(w.category, UserWarning)] == []


def test_parameter_names_must_match_the_dimension():
    with pytest.raises(ValueError, match="2 names for dimension 3"):
        _arviz.posterior_variables(np.zeros((1, 4, 3)), ["a", "b"])
