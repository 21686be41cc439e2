"""ArviZ output shared by every sampler: posterior variables and the
InferenceData (ArviZ < 1) or DataTree (ArviZ ≥ 1) holding them."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def posterior_variables(samples: np.ndarray, parameter_names: Sequence[str] | None) -> dict:
    """The posterior group of draws shaped (chain, draw, d): one variable per
    named parameter, or a single variable ``x`` with the parameters on its
    last axis."""
    if parameter_names is None:
        return {"x": samples}
    check_names(parameter_names, samples.shape[2])
    return {name: samples[:, :, j] for j, name in enumerate(parameter_names)}


def check_names(parameter_names: Sequence[str] | None, d: int) -> None:
    """``ValueError`` unless ``parameter_names`` is None or ``d`` distinct
    names (a repeated name would keep one of its parameters only); the
    samplers check them before they run."""
    if parameter_names is None:
        return
    if len(parameter_names) != d:
        raise ValueError(f"parameter_names has {len(parameter_names)} names for dimension {d}")
    seen = set()
    for name in parameter_names:
        if name in seen:
            raise ValueError(f"parameter_names names {name!r} twice: each parameter needs its own name")
        seen.add(name)


def arviz_major_version() -> int:
    """The installed ArviZ's major version."""
    import arviz as az

    return int(str(az.__version__).split(".")[0])


def inference_data(groups: dict, attrs: dict | None = None):
    """ArviZ data from ``{group: {variable: array (chain, draw, ...)}}``, with
    `attrs` set on every group.

    ArviZ ≥ 1 takes the groups as one dictionary and returns an
    ``xarray.DataTree``; earlier versions take one keyword argument per group
    and return an ``InferenceData``. Both index groups as ``data["posterior"]``.
    """
    import arviz as az

    if arviz_major_version() >= 1:
        data = az.from_dict(groups)
    else:
        data = az.from_dict(**groups)
    # set on each group: not every ArviZ version passes from_dict's attrs on
    for group in groups:
        data[group].attrs.update(attrs or {})
    return data


def dataset(variables: dict, *, coords=None, dims=None, attrs=None, sample_dims=("chain", "draw")):
    """An ``xarray.Dataset`` of `variables` with the leading `sample_dims`
    (``()`` for data without draws, such as observed data). ArviZ ≥ 1 calls
    the leading dimensions ``sample_dims``, earlier versions ``default_dims``."""
    import arviz as az

    key = "sample_dims" if arviz_major_version() >= 1 else "default_dims"
    return az.dict_to_dataset(variables, coords=coords, dims=dims, attrs=attrs, **{key: list(sample_dims)})


def from_datasets(groups: dict):
    """ArviZ data from ``{group: xarray.Dataset}``: an ``xarray.DataTree``
    for ArviZ ≥ 1 (which has no ``InferenceData``), an ``InferenceData``
    for earlier versions."""
    if arviz_major_version() >= 1:
        import xarray as xr

        return xr.DataTree.from_dict(groups)
    import arviz as az

    return az.InferenceData(**groups)
