"""ArviZ output shared by every sampler: posterior variables and the
InferenceData (ArviZ < 1) or DataTree (ArviZ ≥ 1) holding them."""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import warnings
from typing import Sequence

import numpy as np


# The dimensions every posterior variable has: no parameter may take their names.
SAMPLE_DIMS = ("chain", "draw")


def check_parameter_names(parameter_names, d: int) -> list[str] | None:
    """``parameter_names`` as a list of ``d`` distinct strings (None stays
    None), checked before a run so that a bad list costs no sampling:
    ``ValueError`` for a wrong count, a repeated name (its variables would
    overwrite each other), a name of a sample dimension (``chain``,
    ``draw``, which the variable would replace) or a name the output could
    not be saved with (empty, or with a ``/``: netCDF refuses both);
    ``TypeError`` for a name that is not a string, or a single string in
    place of the list."""
    if parameter_names is None:
        return None
    if isinstance(parameter_names, (str, bytes)):
        raise TypeError(f"`parameter_names` must be a list of {d} names, got the single string {parameter_names!r}")
    names = list(parameter_names)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"`parameter_names` must be strings, got {name!r} ({type(name).__name__})")
    if len(names) != d:
        raise ValueError(f"`parameter_names` has {len(names)} names for dimension {d}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"`parameter_names` must be distinct, got {repeated} more than once")
    reserved = [name for name in names if name in SAMPLE_DIMS]
    if reserved:
        raise ValueError(
            f"`parameter_names` cannot use {reserved}: {' and '.join(SAMPLE_DIMS)} name the sample dimensions"
        )
    unsavable = [name for name in names if not name or "/" in name]
    if unsavable:
        raise ValueError(
            f"`parameter_names` cannot use {unsavable}: netCDF files (to_netcdf) refuse an empty name and a '/'"
        )
    return names


def posterior_variables(samples: np.ndarray, parameter_names: Sequence[str] | None) -> dict:
    """The posterior group of draws shaped (chain, draw, d): one variable per
    named parameter (names checked by :func:`check_parameter_names`), or a
    single variable ``x`` with the parameters on its last axis."""
    names = check_parameter_names(parameter_names, samples.shape[2])
    if names is None:
        return {"x": samples}
    return {name: samples[:, :, j] for j, name in enumerate(names)}


@functools.cache
def arviz_major_version() -> int:
    """The installed ArviZ's major version, from its package metadata:
    importing ArviZ to ask takes seconds (it imports its plotting
    libraries)."""
    try:
        version = importlib.metadata.version("arviz")
    except importlib.metadata.PackageNotFoundError:
        import arviz as az  # not installed as a distribution: ask it

        version = str(az.__version__)
    return int(version.split(".")[0])


def _builder():
    """The module whose ``from_dict`` and ``dict_to_dataset`` build the
    output: for ArviZ ≥ 1 its data layer ``arviz_base`` (the same
    functions, which ``arviz`` re-exports, without importing the plotting
    libraries: a third of the import time), else ``arviz``."""
    if arviz_major_version() >= 1:
        import arviz_base

        return arviz_base
    import arviz

    return arviz


def inference_data(groups: dict, attrs: dict | None = None):
    """ArviZ data from ``{group: {variable: array (chain, draw, ...)}}``, with
    `attrs` set on every group.

    ArviZ ≥ 1 takes the groups as one dictionary and returns an
    ``xarray.DataTree``; earlier versions take one keyword argument per group
    and return an ``InferenceData``. Both index groups as ``data["posterior"]``.
    """
    az = _builder()
    with _no_swapped_dimensions_guess():
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
    az = _builder()
    key = "sample_dims" if arviz_major_version() >= 1 else "default_dims"
    with _no_swapped_dimensions_guess():
        return az.dict_to_dataset(variables, coords=coords, dims=dims, attrs=attrs, **{key: list(sample_dims)})


@contextlib.contextmanager
def _no_swapped_dimensions_guess():
    """While inside, ArviZ's guess that arrays with more chains than draws
    were passed the wrong way round is not shown (0.x says "More chains",
    1.x "Found chain dimension to be longer"): ours never are (an
    ensemble's walkers are its chains, and short runs of many walkers or
    chains are common)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="More chains", category=UserWarning)
        warnings.filterwarnings("ignore", message="Found chain dimension to be longer", category=UserWarning)
        yield


def from_datasets(groups: dict):
    """ArviZ data from ``{group: xarray.Dataset}``: an ``xarray.DataTree``
    for ArviZ ≥ 1 (which has no ``InferenceData``), an ``InferenceData``
    for earlier versions."""
    if arviz_major_version() >= 1:
        import xarray as xr

        return xr.DataTree.from_dict(groups)
    import arviz as az

    return az.InferenceData(**groups)
