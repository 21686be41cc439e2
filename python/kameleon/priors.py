"""Priors of independent marginals, parameter bounds and the transforms to
the unconstrained scale that :func:`kameleon.sample` samples on.

Each marginal (``Normal``, ``LogNormal``, ``Gamma``, ``Beta``, ``Uniform``,
``HalfNormal``, ``Exponential``, ``HalfCauchy``, ``InverseGamma``,
``StudentT``) is a validated frozen dataclass with

- ``log_pdf(x)``: the normalised log density on the open support, −inf
  outside it (a float for a number, an array for an array);
- ``support``: the pair (low, high) of the open support, ±inf when unbounded;
- ``draw(rng, size=None)``: draws from a ``numpy.random.Generator``;
- ``to_unconstrained(x)``, ``from_unconstrained(z)`` and ``log_jacobian(z)``:
  the transform of the support to ℝ below, its inverse and
  log |dx/dz| at z.

The transform depends on the support (low, high) only: the identity on ℝ;
z = log(x − low) on (low, ∞) (x = low + eᶻ, log-Jacobian z);
z = log(high − x) on (−∞, high) (x = high − eᶻ, log-Jacobian z); and the
scaled logit z = log(x − low) − log(high − x) on (low, high)
(x = low + (high − low)·σ(z) with σ the logistic function, log-Jacobian
log(high − low) + log σ(z) + log σ(−z)), each computed in a form that
keeps x's precision near the ends and near the midpoint. The same
transforms serve ``bounds=`` in :func:`kameleon.sample`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import Callable, Mapping, Sequence

import numpy as np

from . import _core
from ._checks import _check_rng, _real_array

__all__ = [
    "Marginal",
    "Normal",
    "LogNormal",
    "Gamma",
    "Beta",
    "Uniform",
    "HalfNormal",
    "Exponential",
    "HalfCauchy",
    "InverseGamma",
    "StudentT",
]

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_2 = math.log(2.0)


def _number(name: str, value, positive: bool = True) -> float:
    """``value`` as a float if it is a finite real number (and > 0 when
    ``positive``); else ``ValueError`` naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"`{name}` must be a {'positive ' if positive else ''}finite number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"`{name}` must be a positive finite number, got {value!r}")
    return float(value)


def _check_width(what: str, low: float, high: float) -> None:
    """``ValueError`` naming ``what`` when both ends are finite but
    high − low overflows to inf: the interval transform (and a uniform
    density) needs the width."""
    if math.isfinite(low) and math.isfinite(high) and not math.isfinite(high - low):
        raise ValueError(
            f"{what}: high − low = {high!r} − {low!r} overflows a float; narrow the interval, "
            "or leave an end open (None or ±inf) if the parameter has no bound there"
        )


# ── transforms (elementwise; low and high broadcast against x or z) ──────


def _log_sigmoid(z):
    """log σ(z) = −log(1 + e^−z), without overflow."""
    return -np.logaddexp(0.0, -z)


def _above(z, low):
    """x = low + eᶻ on (low, ∞)."""
    return low + np.exp(z)


def _below(z, high):
    """x = high − eᶻ on (−∞, high)."""
    return high - np.exp(z)


# |z| below which the interval transform takes its midpoint form
_MIDDLE = 2.0


def _between(z, low, high):
    """x = low + (high − low)·σ(z) on (low, high), in the form that keeps
    x's digits: low + w·σ(z) for z ≤ −2 and high − w·σ(−z) for z ≥ 2 (σ of
    a negative argument keeps its relative precision: no 1 − σ
    cancellation near the ends), and between them the midpoint form
    m + (w/2)·tanh(z/2), m = low + w/2, which near the midpoint keeps x's
    relative precision however wide the interval (with bounds ±10¹², the
    end forms put x = 0.5 on a grid of 10⁻⁴)."""
    width = high - low
    middle = (low + 0.5 * width) + (0.5 * width) * np.tanh(0.5 * z)
    far = np.abs(z) >= _MIDDLE
    if not far.any():
        return middle
    ends = np.where(z < 0, low + width * np.exp(_log_sigmoid(z)), high - width * np.exp(_log_sigmoid(-z)))
    return np.where(far, ends, middle)


def _between_inverse(x, low, high, ends):
    """z of :func:`_between` from x: the midpoint form 2·atanh((x − m)/(w/2))
    where it gives |z| < 2, else ``ends``, log(x − low) − log(high − x)."""
    half = 0.5 * (high - low)
    t = (x - (low + half)) / half
    middle = np.log1p(t) - np.log1p(-t)
    return np.where(np.abs(middle) < _MIDDLE, middle, ends)


def _one_sided_log_jacobian(z, end):
    """log |dx/dz| of :func:`_above` and :func:`_below`: z."""
    return z


def _between_log_jacobian(z, low, high):
    """log |dx/dz| of :func:`_between`: log(high − low) + log σ(z) + log σ(−z)."""
    return np.log(high - low) + _log_sigmoid(z) + _log_sigmoid(-z)


def _constrain(z, low, high):
    """x from the unconstrained z (see the module docstring)."""
    z = np.asarray(z, dtype=np.float64)
    has_low, has_high = np.isfinite(low), np.isfinite(high)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(
            has_low & has_high,
            _between(z, low, high),
            np.where(has_low, _above(z, low), np.where(has_high, _below(z, high), z)),
        )


def _unconstrain(x, low, high):
    """z from x in the open support (NaN outside it)."""
    x = np.asarray(x, dtype=np.float64)
    has_low, has_high = np.isfinite(low), np.isfinite(high)
    with np.errstate(divide="ignore", invalid="ignore"):
        above = np.where(x > low, np.log(x - low), np.nan)
        below = np.where(x < high, np.log(high - x), np.nan)
        between = _between_inverse(x, low, high, above - below)
        return np.where(has_low & has_high, between, np.where(has_low, above, np.where(has_high, below, x)))


def _log_jacobian(z, low, high):
    """log |dx/dz| at z, elementwise."""
    z = np.asarray(z, dtype=np.float64)
    has_low, has_high = np.isfinite(low), np.isfinite(high)
    with np.errstate(invalid="ignore", over="ignore"):
        interval = _between_log_jacobian(z, low, high)
        return np.where(has_low & has_high, interval, np.where(has_low | has_high, z, 0.0))


def _points(value, name: str) -> np.ndarray:
    """``value`` as a float64 array of real numbers; else ``TypeError``
    naming it (numpy would parse strings, read True as 1, None as NaN)."""
    return _real_array(value, f"`{name}` is", "any shape")


def _scalar_or_array(value):
    return float(value) if np.ndim(value) == 0 else value


# ── marginals ────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Marginal:
    """Base class of the marginals: subclasses define ``support`` (a pair),
    ``_log_pdf(x)`` on arrays inside the support and ``draw``."""

    @property
    def support(self) -> tuple[float, float]:
        return (-math.inf, math.inf)

    def _log_pdf(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def log_pdf(self, x):
        """The log density at ``x`` (−inf outside the open support); a
        ``TypeError`` unless ``x`` holds real numbers."""
        return self._log_density(_points(x, "x"))

    def _log_density(self, x):
        """:meth:`log_pdf` of a float64 ``x``, unchecked."""
        x = np.asarray(x, dtype=np.float64)
        low, high = self.support
        inside = (x > low) & (x < high)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            value = np.where(inside, self._log_pdf(np.where(inside, x, self._inside_point())), -math.inf)
        return _scalar_or_array(value)

    def _inside_point(self) -> float:
        """A point of the support, substituted outside it before the
        density is computed (and then discarded)."""
        low, high = self.support
        if math.isfinite(low) and math.isfinite(high):
            return 0.5 * (low + high)
        if math.isfinite(low):
            return low + 1.0
        if math.isfinite(high):
            return high - 1.0
        return 0.0

    def draw(self, rng: np.random.Generator, size=None):
        """Independent draws (a float if ``size`` is None, else an array)
        from the ``numpy.random.Generator`` ``rng``."""
        _check_rng(rng)
        return self._draw(rng, size)

    def _draw(self, rng: np.random.Generator, size):
        raise NotImplementedError

    def to_unconstrained(self, x):
        """z for x in the support (NaN outside it)."""
        return _scalar_or_array(_unconstrain(_points(x, "x"), *self.support))

    def from_unconstrained(self, z):
        """x for the unconstrained z."""
        return _scalar_or_array(_constrain(_points(z, "z"), *self.support))

    def log_jacobian(self, z):
        """log |dx/dz| at the unconstrained z."""
        return _scalar_or_array(_log_jacobian(_points(z, "z"), *self.support))

    def __str__(self) -> str:
        params = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
        return f"{type(self).__name__}({params})"


@dataclass(frozen=True)
class Normal(Marginal):
    """N(mu, sigma²) on ℝ."""

    mu: float = 0.0
    sigma: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", _number("mu", self.mu, positive=False))
        object.__setattr__(self, "sigma", _number("sigma", self.sigma))

    def _log_pdf(self, x):
        return -0.5 * ((x - self.mu) / self.sigma) ** 2 - math.log(self.sigma) - 0.5 * _LOG_2PI

    def _draw(self, rng, size):
        return rng.normal(self.mu, self.sigma, size)


@dataclass(frozen=True)
class LogNormal(Marginal):
    """log x ~ N(mu, sigma²), on (0, ∞)."""

    mu: float = 0.0
    sigma: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", _number("mu", self.mu, positive=False))
        object.__setattr__(self, "sigma", _number("sigma", self.sigma))

    @property
    def support(self):
        return (0.0, math.inf)

    def _log_pdf(self, x):
        log_x = np.log(x)
        return -0.5 * ((log_x - self.mu) / self.sigma) ** 2 - log_x - math.log(self.sigma) - 0.5 * _LOG_2PI

    def _draw(self, rng, size):
        return rng.lognormal(self.mu, self.sigma, size)


@dataclass(frozen=True)
class Gamma(Marginal):
    """Gamma with shape α and rate β (mean α/β), on (0, ∞)."""

    shape: float
    rate: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _number("shape", self.shape))
        object.__setattr__(self, "rate", _number("rate", self.rate))

    @property
    def support(self):
        return (0.0, math.inf)

    def _log_pdf(self, x):
        a, b = self.shape, self.rate
        return a * math.log(b) - math.lgamma(a) + (a - 1.0) * np.log(x) - b * x

    def _draw(self, rng, size):
        return rng.gamma(self.shape, 1.0 / self.rate, size)


@dataclass(frozen=True)
class Beta(Marginal):
    """Beta(a, b) on (0, 1)."""

    a: float
    b: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", _number("a", self.a))
        object.__setattr__(self, "b", _number("b", self.b))

    @property
    def support(self):
        return (0.0, 1.0)

    def _log_pdf(self, x):
        a, b = self.a, self.b
        log_beta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
        return (a - 1.0) * np.log(x) + (b - 1.0) * np.log1p(-x) - log_beta

    def _draw(self, rng, size):
        return rng.beta(self.a, self.b, size)


@dataclass(frozen=True)
class Uniform(Marginal):
    """Uniform on (low, high)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "low", _number("low", self.low, positive=False))
        object.__setattr__(self, "high", _number("high", self.high, positive=False))
        if not self.low < self.high:
            raise ValueError(f"`low` must be below `high`, got low={self.low!r}, high={self.high!r}")
        _check_width("Uniform", self.low, self.high)

    @property
    def support(self):
        return (self.low, self.high)

    def _log_pdf(self, x):
        return np.full_like(x, -math.log(self.high - self.low))

    def _draw(self, rng, size):
        return rng.uniform(self.low, self.high, size)


@dataclass(frozen=True)
class HalfNormal(Marginal):
    """|N(0, sigma²)|, on (0, ∞)."""

    sigma: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", _number("sigma", self.sigma))

    @property
    def support(self):
        return (0.0, math.inf)

    def _log_pdf(self, x):
        return _LOG_2 - 0.5 * _LOG_2PI - math.log(self.sigma) - 0.5 * (x / self.sigma) ** 2

    def _draw(self, rng, size):
        return np.abs(rng.normal(0.0, self.sigma, size))


@dataclass(frozen=True)
class Exponential(Marginal):
    """Exponential with rate λ (mean 1/λ), on (0, ∞)."""

    rate: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", _number("rate", self.rate))

    @property
    def support(self):
        return (0.0, math.inf)

    def _log_pdf(self, x):
        return math.log(self.rate) - self.rate * x

    def _draw(self, rng, size):
        return rng.exponential(1.0 / self.rate, size)


@dataclass(frozen=True)
class HalfCauchy(Marginal):
    """|Cauchy(0, scale)|, on (0, ∞)."""

    scale: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _number("scale", self.scale))

    @property
    def support(self):
        return (0.0, math.inf)

    def _log_pdf(self, x):
        return _LOG_2 - math.log(math.pi) - math.log(self.scale) - np.log1p((x / self.scale) ** 2)

    def _draw(self, rng, size):
        return np.abs(self.scale * rng.standard_cauchy(size))


@dataclass(frozen=True)
class InverseGamma(Marginal):
    """1/x ~ Gamma(shape, rate=scale), on (0, ∞)."""

    shape: float
    scale: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _number("shape", self.shape))
        object.__setattr__(self, "scale", _number("scale", self.scale))

    @property
    def support(self):
        return (0.0, math.inf)

    def _log_pdf(self, x):
        a, b = self.shape, self.scale
        return a * math.log(b) - math.lgamma(a) - (a + 1.0) * np.log(x) - b / x

    def _draw(self, rng, size):
        return self.scale / rng.gamma(self.shape, 1.0, size)


@dataclass(frozen=True)
class StudentT(Marginal):
    """Student's t with ``nu`` degrees of freedom, location ``mu`` and scale
    ``sigma``, on ℝ (``nu=1`` is the Cauchy)."""

    nu: float
    mu: float = 0.0
    sigma: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "nu", _number("nu", self.nu))
        object.__setattr__(self, "mu", _number("mu", self.mu, positive=False))
        object.__setattr__(self, "sigma", _number("sigma", self.sigma))

    def _log_pdf(self, x):
        nu = self.nu
        constant = math.lgamma(0.5 * (nu + 1)) - math.lgamma(0.5 * nu) - 0.5 * math.log(nu * math.pi)
        return constant - math.log(self.sigma) - 0.5 * (nu + 1) * np.log1p(((x - self.mu) / self.sigma) ** 2 / nu)

    def _draw(self, rng, size):
        return self.mu + self.sigma * rng.standard_t(self.nu, size)


# ── the joint prior of sample(prior=, bounds=) ───────────────────────────


def _bounds(bounds) -> tuple[np.ndarray, np.ndarray]:
    """The (low, high) arrays of a sequence of (low, high) pairs, None for
    an infinite end (a numpy array of shape (d, 2), or of pairs, counts as
    such a sequence); ``ValueError`` naming ``bounds`` otherwise."""
    if isinstance(bounds, np.ndarray):
        bounds = list(bounds)
    if isinstance(bounds, (str, bytes)) or not isinstance(bounds, Sequence) or len(bounds) == 0:
        raise ValueError(f"`bounds` must be a non-empty list of (low, high) pairs, got {bounds!r}")
    if len(bounds) == 2 and all(end is None or isinstance(end, numbers.Real) for end in bounds):
        raise ValueError(
            f"`bounds` must be a list of one (low, high) pair per parameter, got the single pair {bounds!r}: "
            "for one parameter pass [(low, high)]"
        )
    low, high = [], []
    for j, pair in enumerate(bounds):
        message = (
            f"`bounds[{j}]` must be a pair (low, high) of numbers with low < high "
            f"(None or ±inf for no bound), got {pair!r}"
        )
        if isinstance(pair, np.ndarray) and pair.ndim == 1:
            pair = pair.tolist()
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise ValueError(message)
        ends = []
        for end, infinite in zip(pair, (-math.inf, math.inf)):
            if end is None:
                end = infinite
            if isinstance(end, (bool, np.bool_)) or not isinstance(end, numbers.Real) or math.isnan(end):
                raise ValueError(message)
            ends.append(float(end))
        if not (ends[0] < ends[1] and ends[0] < math.inf and ends[1] > -math.inf):
            raise ValueError(message)
        _check_width(f"`bounds[{j}]`", *ends)
        low.append(ends[0])
        high.append(ends[1])
    return np.array(low), np.array(high)


class JointPrior:
    """The prior of :func:`kameleon.sample`'s ``prior=`` and ``bounds=``:
    independent marginals (a list, or a dict whose keys name the
    parameters), or a callable log prior ``f(x) -> float`` with ``bounds``,
    or ``bounds`` alone (a flat prior on the box). ``dim``, ``names``
    (None unless given by a dict), the arrays ``low`` and ``high``,
    ``log_prior(x)``, ``draw(rng)`` (marginals only: ``can_draw``) and the
    transforms of :mod:`kameleon.priors` applied parameter by parameter
    (on arrays whose last axis is the parameter)."""

    def __init__(self, prior=None, bounds=None) -> None:
        self.names: list[str] | None = None
        self.marginals: list[Marginal] | None = None
        self.function: Callable | None = None
        if isinstance(prior, Marginal):
            prior = [prior]
        if isinstance(prior, Mapping):
            if not prior:
                raise ValueError("`prior` must have one marginal per parameter, got an empty dict")
            for name in prior:
                if not isinstance(name, str):
                    raise ValueError(f"the keys of a `prior` dict must be parameter names (str), got {name!r}")
            self.names = list(prior)
            prior = list(prior.values())
        if isinstance(prior, (list, tuple)):
            if not prior:
                raise ValueError("`prior` must have one marginal per parameter, got an empty sequence")
            for j, marginal in enumerate(prior):
                if not isinstance(marginal, Marginal):
                    where = repr(self.names[j]) if self.names else str(j)
                    raise ValueError(
                        f"`prior[{where}]` must be a kameleon.priors marginal (e.g. km.priors.Normal(0, 1)), "
                        f"got {marginal!r}"
                    )
            if bounds is not None:
                raise ValueError(
                    "`bounds` cannot be combined with a `prior` of marginals: the marginals' supports are the bounds"
                )
            self.marginals = list(prior)
            self.low = np.array([m.support[0] for m in self.marginals])
            self.high = np.array([m.support[1] for m in self.marginals])
        elif prior is None or callable(prior):
            if bounds is None:
                raise ValueError(
                    "a callable `prior` needs `bounds=`, one (low, high) pair per parameter "
                    "(e.g. [(None, None)] * d when no parameter is bounded)"
                )
            self.function = prior
            self.low, self.high = _bounds(bounds)
        else:
            raise ValueError(
                "`prior` must be a list or tuple of kameleon.priors marginals, a dict name -> marginal, "
                f"or a callable log prior with `bounds=`, got {type(prior).__name__}"
            )
        self.dim = self.low.shape[0]
        # The parameters grouped by the form of their support, each group
        # transformed by its own formula only: the per-step transforms then
        # cost a few array operations per group present instead of every
        # formula on every parameter (the values are the same, element by
        # element, as the module's transforms give).
        has_low, has_high = np.isfinite(self.low), np.isfinite(self.high)
        groups = [
            (np.flatnonzero(has_low & ~has_high), _above, _one_sided_log_jacobian, (self.low,)),
            (np.flatnonzero(~has_low & has_high), _below, _one_sided_log_jacobian, (self.high,)),
            (np.flatnonzero(has_low & has_high), _between, _between_log_jacobian, (self.low, self.high)),
        ]
        self._groups = [(j, f, jacobian, tuple(end[j] for end in ends)) for j, f, jacobian, ends in groups if j.size]

    @property
    def can_draw(self) -> bool:
        return self.marginals is not None

    def name(self, j: int) -> str:
        return self.names[j] if self.names else f"x[{j}]"

    def log_prior(self, x: np.ndarray) -> float:
        """The log prior at x (d,) inside the bounds (see :meth:`outside`):
        the sum of the marginals' log densities, the callable's value, or 0
        for bounds alone."""
        if self.marginals is not None:
            # each marginal's density of its coordinate as a 0-d array, as
            # Marginal.log_pdf computes it inside the support
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                return float(sum(float(m._log_pdf(x[j, ...])) for j, m in enumerate(self.marginals)))
        if self.function is None:
            return 0.0
        value = self.function(x)
        if not isinstance(value, float):
            # a real number, as the samplers read a log density
            value = _core.log_density_value(self.function, value, "log prior function")
        return -math.inf if math.isnan(value) else value

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One draw of the parameters from the marginals."""
        return np.array([m._draw(rng, None) for m in self.marginals], dtype=np.float64)

    def outside(self, x: np.ndarray) -> int | None:
        """The index of the first parameter of ``x`` (d,) outside its open
        support, or None."""
        inside = (x > self.low) & (x < self.high)
        return None if inside.all() else int(np.argmin(inside))

    def constrain(self, z):
        """x = T(z) for z of shape (..., d)."""
        z = np.asarray(z, dtype=np.float64)
        x = z.copy()
        with np.errstate(over="ignore", invalid="ignore"):
            for j, transform, _, ends in self._groups:
                x[..., j] = transform(z[..., j], *ends)
        return x

    def unconstrain(self, x):
        return _unconstrain(x, self.low, self.high)

    def log_jacobian(self, z) -> float:
        """log |dx/dz| at z (d,), summed over the parameters."""
        terms = np.zeros(self.dim)
        with np.errstate(invalid="ignore", over="ignore"):
            for j, _, log_jacobian, ends in self._groups:
                terms[j] = log_jacobian(z[j], *ends)
        return float(np.sum(terms))

    def describe(self) -> str:
        """A one-line description for the output's attributes."""
        if self.marginals is not None:
            if self.names is None:
                return ", ".join(str(m) for m in self.marginals)
            return ", ".join(f"{n}: {m}" for n, m in zip(self.names, self.marginals))
        box = ", ".join(f"({lo:g}, {hi:g})" for lo, hi in zip(self.low, self.high))
        what = "flat" if self.function is None else getattr(self.function, "__qualname__", "callable")
        return f"{what} on {box}"
