"""PyMC models as kameleon log densities.

:func:`from_pymc` turns a PyMC model into the log density of its free
variables on PyMC's unconstrained space: each variable's value transform
(log for a positive variable, logit for an interval, the simplex transform,
…) with its log-Jacobian, as ``pm.sample`` samples it. The variables'
unconstrained values are raveled and concatenated, in the order of
``model.value_vars``, into one vector z of dimension ``dim``.

The log density ``model.logp(jacobian=True)`` of z is compiled with
PyTensor's numba backend. When every operation in it has a numba
implementation, the result is a :class:`kameleon.Compiled` C function,
called from the Rust chains without the GIL (chains run in parallel). An
operation without one — typically a black-box likelihood, a
``pytensor.graph.Op`` whose ``perform`` calls Python code and which has no
gradient — makes PyTensor run it in Python (numba's object mode); the log
density is then a Python callable, called under the GIL (chains take
turns), and exceptions it raises stop the run. ``backend="python"`` asks
for the Python callable in any case.

:meth:`PyMCPosterior.sample` runs :func:`kameleon.sample` on z and returns
the draws as ``pm.sample`` does: ArviZ data (an ``arviz.InferenceData``,
or an ``xarray.DataTree`` with ArviZ ≥ 1) whose ``posterior`` holds every
free variable on its own (constrained) scale and every deterministic, with
the model's names, shapes, dims and coords, an ``observed_data`` group and
a ``constant_data`` group (the ``pm.Data`` containers, with which
``pm.sample_posterior_predictive`` tells that the data have not changed
since the run). ``sample_stats`` are kameleon's (``lp`` is the log density
of z, Jacobian included).

Data containers (``pm.Data``) are compiled in at their values when
:func:`from_pymc` is called, and the output reports those values and the
coords of that moment: after ``pm.set_data``, call :func:`from_pymc` again
to sample with the new data.

Discrete free variables are not supported (the samplers move in ℝᵈ).
Needs ``pymc`` (which brings PyTensor and ArviZ: PyMC 5 brings ArviZ < 1,
PyMC 6 ArviZ ≥ 1).
"""

from __future__ import annotations

import ctypes
import pickle
import warnings
from typing import Callable

import numpy as np

from ._sample import Compiled, sample

__all__ = ["PyMCPosterior", "from_pymc"]

# The start of the warning PyTensor's numba backend gives for an operation
# it can only run in Python (object mode).
_OBJECT_MODE = "Numba will use object mode"


def _import_pymc():
    try:
        import pymc
        import pytensor
    except ImportError as err:
        raise ImportError("kameleon.from_pymc needs PyMC: pip install pymc") from err
    return pymc, pytensor


def _without_shared(outputs):
    """``outputs`` with every shared variable (``pm.Data``, …) replaced by a
    constant of its current value, so that the flat vector z is the only
    input of the compiled function."""
    import pytensor.tensor as pt
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.replace import clone_replace
    from pytensor.graph.traversal import graph_inputs

    shared = [v for v in graph_inputs(outputs) if isinstance(v, SharedVariable)]
    if not shared:
        return outputs
    replace = {s: s.type.filter_variable(pt.constant(s.get_value(borrow=False))) for s in shared}
    return clone_replace(outputs, replace=replace)


def _compile(pytensor, flat, outputs):
    """``pytensor.function([flat], outputs)`` on the numba backend and
    whether every operation runs in numba's nopython mode (PyTensor's
    object-mode warnings are what tells; they are not passed on, other
    warnings are)."""
    with warnings.catch_warnings(record=True) as caught:
        # "always": a warning already shown for the same operation must
        # still be seen here
        warnings.filterwarnings("always", message=_OBJECT_MODE)
        function = pytensor.function([flat], outputs, mode="NUMBA", on_unused_input="ignore")
    nopython = True
    for w in caught:
        if str(w.message).startswith(_OBJECT_MODE):
            nopython = False
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return function, nopython


def _cfunc(jitted) -> Compiled:
    """The :class:`Compiled` ``double f(const double *z, int64_t dim)`` of
    the numba function ``jitted(z) -> (logp,)``."""
    import numba

    signature = numba.float64(numba.types.CPointer(numba.float64), numba.int64)

    def log_density(z, dim):
        # carray's view is writable; the copy keeps the caller's buffer,
        # read-only by the Compiled contract, out of the graph's reach
        return jitted(numba.carray(z, (dim,)).copy())[0][()]

    with warnings.catch_warnings():
        # numba's notes on the model's compiled graph, which the user cannot
        # act on: that PyTensor's on-disk cache cannot keep a graph holding
        # large data, and where the graph's code multiplies non-contiguous
        # arrays
        warnings.filterwarnings("ignore", message="Cannot cache compiled function", category=numba.NumbaWarning)
        warnings.filterwarnings("ignore", category=numba.NumbaPerformanceWarning)
        return numba.cfunc(signature)(log_density)


class _PythonLogDensity:
    """``f(z) -> float``: the compiled log density called from Python. It
    pickles (for worker processes) as that function alone, and unpickles
    (compiling it again) without PyTensor's object-mode warning, which
    :func:`from_pymc` does not pass on either."""

    def __init__(self, function) -> None:
        self._function = function

    def __call__(self, z: np.ndarray) -> float:
        # the jitted function itself, not the pytensor.function around it:
        # that keeps its inputs in shared storage, so it is not reentrant,
        # and the chains' threads take turns calling this
        return float(self._function.vm.jit_fn(z)[0])

    def __reduce__(self):
        import cloudpickle

        # cloudpickle: an Op defined in a script travels by value
        return _load_python_log_density, (cloudpickle.dumps(self._function),)


def _load_python_log_density(blob: bytes) -> _PythonLogDensity:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_OBJECT_MODE)
        return _PythonLogDensity(pickle.loads(blob))


class PyMCPosterior:
    """The posterior of a PyMC model on its unconstrained space (see
    :mod:`kameleon.pymc`); made by :func:`from_pymc`.

    Attributes: ``model``; ``dim``; ``log_density`` (a :class:`Compiled`
    function or a Python callable ``f(z) -> float``, for
    :func:`kameleon.sample`); ``compiled`` (whether it is the former);
    ``unconstrained_names``, one label per coordinate of z (``"mu"``,
    ``"sigma_log__"``, ``"w_simplex__[1]"``, …); ``x0``, PyMC's initial point
    as z; ``variables``, the names of the posterior's variables (the free
    variables, then the deterministics).
    """

    def __init__(self, model, backend: str) -> None:
        pymc, pytensor = _import_pymc()
        from pymc.pytensorf import join_nonshared_inputs

        if not isinstance(model, pymc.Model):
            raise TypeError(f"`model` must be a pymc.Model, got {type(model).__name__}")
        if backend not in ("auto", "python"):
            raise ValueError(f"`backend` must be 'auto' or 'python', got {backend!r}")
        if not model.free_RVs:
            raise ValueError("the model has no free random variables to sample")
        discrete = [rv.name for rv in model.free_RVs if rv.dtype.startswith(("int", "uint", "bool"))]
        if discrete:
            raise ValueError(
                f"kameleon samples continuous parameters only; the model has discrete free variables {discrete}"
            )
        self.model = model
        value_vars = list(model.value_vars)
        point = model.initial_point()
        self.unconstrained_names = [name for v in value_vars for name in _labels(v.name, np.shape(point[v.name]))]
        self.dim = len(self.unconstrained_names)
        self.x0 = np.concatenate([np.ravel(point[v.name]) for v in value_vars]).astype(np.float64)

        [logp], flat = join_nonshared_inputs(point, [model.logp(jacobian=True)], value_vars)
        [logp] = _without_shared([logp])
        self._logp, nopython = _compile(pytensor, flat, logp)
        self.compiled = nopython and backend == "auto"
        if self.compiled:
            cfunc = _cfunc(self._logp.vm.jit_fn)
            self.log_density: Compiled | Callable = Compiled(cfunc.address, self.dim, owner=cfunc)
        else:
            self.log_density = _PythonLogDensity(self._logp)

        # the posterior's variables as functions of z: pm.sample's default
        # names (those ending in "__" are PyMC's internal ones)
        shown = [rv for rv in model.free_RVs + model.deterministics if not rv.name.endswith("__")]
        self.variables = [rv.name for rv in shown]
        values, flat_values = join_nonshared_inputs(point, model.replace_rvs_by_values(shown), value_vars)
        self._constrain, _ = _compile(pytensor, flat_values, _without_shared(values))
        self._at_x0 = [np.asarray(v) for v in self._constrain(self.x0)]
        # the coords and data as compiled in: what the draws are of, even
        # after a later pm.set_data
        self._coords = {k: list(v) for k, v in model.coords.items() if v is not None}
        self._dims = {k: list(v) for k, v in model.named_vars_to_dims.items()}
        self._observed_data = self._observed()
        self._constant_data = self._constant()

    def log_density_at(self, z) -> float:
        """The log density at the unconstrained point ``z`` (shape (dim,)),
        evaluated the way the sampler evaluates it."""
        z = np.ascontiguousarray(z, dtype=np.float64)
        if z.shape != (self.dim,):
            raise ValueError(f"`z` must have shape ({self.dim},), got {z.shape}")
        if not self.compiled:
            return self.log_density(z)
        pointer = ctypes.POINTER(ctypes.c_double)
        function = ctypes.CFUNCTYPE(ctypes.c_double, pointer, ctypes.c_int64)(self.log_density.address)
        return function(z.ctypes.data_as(pointer), self.dim)

    def point(self, z) -> dict[str, np.ndarray]:
        """The posterior's variables (constrained, with their shapes) at the
        unconstrained point ``z``."""
        z = np.asarray(z, dtype=np.float64)
        if z.shape != (self.dim,):
            raise ValueError(f"`z` must have shape ({self.dim},), got {z.shape}")
        return {name: np.asarray(value) for name, value in zip(self.variables, self._constrain(z))}

    def sample(self, *, x0=None, **kwargs):
        """:func:`kameleon.sample` on the unconstrained space, returned as
        :meth:`to_inference_data` makes it. ``x0``: unconstrained starting
        points, shape (dim,) or (chains, dim); default PyMC's initial point
        (from which the chains start jittered, as documented in
        :func:`kameleon.sample`). Every other keyword (``sampler``,
        ``draws``, ``tune``, ``chains``, ``seed``, …) is passed on;
        ``prior``, ``bounds`` and ``parameter_names`` are not accepted (the
        model has its priors and names)."""
        for key in ("prior", "bounds", "parameter_names"):
            if key in kwargs:
                raise TypeError(f"`{key}` is not accepted with a PyMC model: the model gives it")
        x0 = self.x0 if x0 is None else x0
        data = sample(self.log_density, x0, parameter_names=self.unconstrained_names, **kwargs)
        return self.to_inference_data(data)

    def to_inference_data(self, data):
        """The output of :func:`kameleon.sample` (or :func:`kameleon.resume`)
        run on ``log_density`` — either with ``parameter_names=
        unconstrained_names`` or without names (one variable ``x``) — as
        ``pm.sample`` shapes it: the posterior's variables on their own scale
        with the model's dims and coords, kameleon's ``sample_stats`` and
        attrs, and the observed and constant data."""
        from ._arviz import dataset, from_datasets

        posterior = data["posterior"]
        # unnamed draws are one variable x of shape (chain, draw, dim); named
        # ones are (chain, draw) each, whatever their names (x too)
        if list(posterior.data_vars) == ["x"] and posterior["x"].ndim == 3:
            z = np.asarray(posterior["x"])
        else:
            missing = [n for n in self.unconstrained_names if n not in posterior.data_vars]
            if missing:
                raise ValueError(
                    f"the draws have no variables {missing}: run kameleon.sample on this posterior's "
                    "`log_density` with `parameter_names=unconstrained_names` (or without names)"
                )
            z = np.stack([np.asarray(posterior[n]) for n in self.unconstrained_names], axis=-1)
        if z.ndim != 3 or z.shape[2] != self.dim:
            raise ValueError(f"the draws have shape {z.shape}; expected (chain, draw, {self.dim})")
        chains, draws = z.shape[:2]
        flat = z.reshape(chains * draws, self.dim)
        columns = [np.empty((flat.shape[0], *v.shape), dtype=v.dtype) for v in self._at_x0]
        for i, row in enumerate(flat):
            for column, value in zip(columns, self._constrain(row)):
                column[i] = value
        variables = {
            name: column.reshape(chains, draws, *column.shape[1:]) for name, column in zip(self.variables, columns)
        }
        attrs = dict(posterior.attrs)
        groups = {
            "posterior": dataset(variables, coords=self._coords, dims=self._dims, attrs=attrs),
            "sample_stats": data["sample_stats"],
        }
        for group, values in (("observed_data", self._observed_data), ("constant_data", self._constant_data)):
            if values:
                groups[group] = dataset(values, coords=self._coords, dims=self._dims, attrs=attrs, sample_dims=())
        for name, value in self._constant_data.items():
            constant = groups["constant_data"]
            if value.ndim == 0 and constant[name].ndim == 1:
                # a scalar stays one, as in pm.sample's output (ArviZ gives
                # it a dimension of length 1)
                groups["constant_data"] = constant.squeeze(constant[name].dims[0], drop=True)
        return from_datasets(groups)

    def _observed(self) -> dict[str, np.ndarray]:
        """The observed variables' data."""
        out = {}
        for rv in self.model.observed_RVs:
            data = _data_value(self.model.rvs_to_values[rv])
            if data is not None:
                out[rv.name] = data
        return out

    def _constant(self) -> dict[str, np.ndarray]:
        """The data containers (``pm.Data``) other than those only observed,
        as ``pm.sample``'s ``constant_data``: ``pm.sample_posterior_predictive``
        compares them with the model's to tell which variables it must draw
        afresh (without them, every variable whose prior reads data)."""
        from pytensor.graph.traversal import ancestors

        model = self.model
        observed = {model.rvs_to_values[rv] for rv in model.observed_RVs}
        used = set(ancestors(model.basic_RVs + model.deterministics + model.potentials))
        out = {}
        for var in model.data_vars:
            data = _data_value(var)
            if data is not None and (var not in observed or var in used):
                out[var.name] = data
        return out


def _data_value(var) -> np.ndarray | None:
    """The value of a shared variable or a constant (None for neither)."""
    data = var.get_value() if hasattr(var, "get_value") else getattr(var, "data", None)
    return None if data is None else np.asarray(data)


def _labels(name: str, shape: tuple[int, ...]) -> list[str]:
    """One label per element of a value variable: its name for a scalar,
    ``name[i]`` / ``name[i,j]`` otherwise (C order, as raveled)."""
    if shape == ():
        return [name]
    return [f"{name}[{','.join(map(str, index))}]" for index in np.ndindex(*shape)]


def from_pymc(model=None, *, backend: str = "auto") -> PyMCPosterior:
    """The posterior of the PyMC ``model`` (default: the model of the
    enclosing ``with pm.Model():`` block) on its unconstrained space, as
    described in :mod:`kameleon.pymc`.

    ``backend``: ``"auto"`` compiles the log density to a GIL-free C function
    when every operation has a numba implementation and falls back to a
    Python callable otherwise (a black-box likelihood); ``"python"`` always
    gives the Python callable.

    >>> post = km.from_pymc(model)  # doctest: +SKIP
    >>> idata = post.sample(sampler=km.AM(), draws=2000, seed=1)  # doctest: +SKIP
    """
    pymc, _ = _import_pymc()
    if model is None:
        model = pymc.modelcontext(None)
    return PyMCPosterior(model, backend)
