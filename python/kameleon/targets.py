"""The built-in Rust targets.

Each class wraps the Rust target of the same name. Pass an instance as the
log density of :func:`kameleon.sample` to run the chains entirely in Rust
(no GIL, chains in parallel), or call ``log_density``/``sample_iid`` from
Python.
"""

from __future__ import annotations

import json
import math
from typing import Sequence

import numpy as np

from ._checks import _integer, _real_array, _seed
from ._core import BuiltinTarget


def _plain(name: str, value):
    """A target parameter as plain Python numbers for the JSON description:
    numpy scalars (``np.int64(3)``, ``np.float32(0.1)``) and arrays become
    ints, floats and lists; a NaN or infinite number is a ``ValueError``
    naming the parameter (JSON has no such numbers)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(name, v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"invalid target parameter `{name}`: must be finite, got {value!r}")
    return value


class Target:
    """A built-in target: ``dim``, ``is_exact``, ``log_density(x, seed=0)``,
    ``grad_log_density(x)`` and ``sample_iid(n, seed)`` where the Rust target
    supports them (otherwise ``ValueError``)."""

    def __init__(self, kind: str, **params) -> None:
        self._spec = {"kind": kind, **{name: _plain(name, value) for name, value in params.items()}}
        self._inner = BuiltinTarget(json.dumps(self._spec, allow_nan=False))

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self._spec.items() if k != "kind")
        return f"{self._spec['kind']}({params})"

    @property
    def dim(self) -> int:
        """The dimension."""
        return self._inner.dim

    @property
    def is_exact(self) -> bool:
        """False for pseudo-marginal targets (noisy estimates)."""
        return self._inner.is_exact

    def log_density(self, x, seed: int | np.integer = 0) -> float:
        """The log density at ``x`` (pseudo-marginal targets: an estimate
        drawn with ``seed``, an integer in [0, 2**64); None: from OS entropy)."""
        return self._inner.log_density(self._point(x), _seed(seed))

    def grad_log_density(self, x) -> np.ndarray:
        """The gradient of the log density at ``x``."""
        return self._inner.grad_log_density(self._point(x))

    def _point(self, x) -> np.ndarray:
        """``x`` as a contiguous float64 vector; ``ValueError`` unless it is
        one point of shape (dim,) (a scalar counts as shape (1,)),
        ``TypeError`` unless it holds real numbers (see ``_real_array``)."""
        x = np.ascontiguousarray(_real_array(x, "x is", f"shape ({self.dim},), one point"))
        if x.ndim > 1:
            raise ValueError(f"x must be one point of shape ({self.dim},), got shape {x.shape}")
        return x

    def sample_iid(self, n: int | np.integer, seed: int | np.integer = 0) -> np.ndarray:
        """``n`` exact independent draws, shape (n, dim), drawn with
        ``seed`` (an integer in [0, 2**64); None: from OS entropy)."""
        return self._inner.sample_iid(_integer("n", n, 0), _seed(seed))


class Banana(Target):
    """The twisted Gaussian B(b, v) of Haario et al."""

    def __init__(self, dim: int | np.integer = 2, b: float = 0.03, v: float = 100.0) -> None:
        super().__init__("Banana", dim=dim, b=b, v=v)


class Flower(Target):
    """The flower F(r₀, A, ω, σ)."""

    def __init__(
        self,
        dim: int | np.integer = 2,
        radius: float = 10.0,
        amplitude: float = 6.0,
        petals: int | np.integer = 6,
        sigma: float = 1.0,
    ) -> None:
        super().__init__("Flower", dim=dim, radius=radius, amplitude=amplitude, petals=petals, sigma=sigma)


class Ring(Target):
    """The ring of radius ``radius`` and width ``sigma``."""

    def __init__(self, dim: int | np.integer = 2, radius: float = 10.0, sigma: float = 1.0) -> None:
        super().__init__("Ring", dim=dim, radius=radius, sigma=sigma)


class GaussianMixture(Target):
    """Σ w_k N(μ_k, Σ_k) with full covariances (weights are normalised)."""

    def __init__(self, weights: Sequence[float], means, covariances) -> None:
        weights = _real_array(weights, "`weights` is", "shape (k,), one weight per component")
        means = _real_array(means, "`means` is", "shape (k, d), one mean per component")
        covs = _real_array(covariances, "`covariances` is", "shape (k, d, d), one covariance per component")
        super().__init__(
            "GaussianMixture",
            weights=weights.tolist(),
            means=means.tolist(),
            covariances=[c.ravel().tolist() for c in covs],
        )


class Gaussian(GaussianMixture):
    """N(mean, cov)."""

    def __init__(self, mean, cov) -> None:
        mean = _real_array(mean, "`mean` is", "shape (d,)")
        cov = _real_array(cov, "`cov` is", "shape (d, d)")
        super().__init__([1.0], [mean], [cov])


class CkamBimodal(Target):
    """cKAM's ½N((−8, 0), 0.5I) + ½N((8, 0), 2I) (``code_weights``: 1/3, 2/3)."""

    def __init__(self, code_weights: bool = False) -> None:
        super().__init__("CkamBimodal", code_weights=code_weights)


class CkamFiveComponents(Target):
    """cKAM's five-component mixture (1/5)Σ N(2.5(i−1)(1, 1), √i·I)."""

    def __init__(self) -> None:
        super().__init__("CkamFiveComponents")


class GridMixture(Target):
    """An equal-weight mixture over the product grid ``centres``^dim, variance ``variance``."""

    def __init__(self, dim: int | np.integer, centres: Sequence[float], variance: float) -> None:
        centres = _real_array(centres, "`centres` is", "shape (m,), the grid's centres along each axis")
        super().__init__("GridMixture", dim=dim, centres=centres.tolist(), variance=variance)


class Glass(Target):
    """The Glass GP-classification posterior (pseudo-marginal, importance sampled)."""

    def __init__(self, n_importance: int | np.integer = 100) -> None:
        super().__init__("Glass", n_importance=n_importance)


class AbcSkewNormal(Target):
    """The ABC posterior of a skew-normal location (pseudo-marginal)."""

    def __init__(self) -> None:
        super().__init__("AbcSkewNormal")
