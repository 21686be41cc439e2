"""Sampler and kernel settings.

Each class is a validated dataclass whose defaults are read from the
extension at import (``SamplerSettings::defaults`` in Rust: the samplers
crate's scale-free presets), so they have one home; ``to_dict()`` gives the
JSON object (``{"kind": ..., ...}``) the Rust side deserialises.

Scale-free sampling (``whiten=True``, the default of the kernel samplers,
the random walk and the adaptive Metropolis samplers):
the first half of ``tune`` (KMC's first 30 %, the map then re-estimated
from KMC's own states at 80 %) is a pilot that learns the posterior's location,
scales and correlations — a finite-difference Hessian at the start, then a
random walk whose covariance is re-estimated in windows of doubling length
— and the sampler then runs in coordinates where the posterior is roughly
N(0, I). Its lengths (γ, bandwidths, step sizes) are then in posterior
standard deviations and need no tuning to the problem's scale; the
coordinates change only during tuning, so the kept chain is exact.

Parameters that only the Rust constructors can check (e.g. positivity of a
bandwidth) raise ``ValueError`` naming the parameter when sampling starts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numpy as np

from . import _core

#: The defaults of every sampler class, by ``kind``, from the extension.
DEFAULTS: dict[str, dict[str, Any]] = {
    d.pop("kind"): d for d in json.loads(_core.sampler_defaults())
}


def _is_real(value) -> bool:
    """Whether ``value`` is a real number, Python's or numpy's (a bool is
    not: ``True`` would be read as 1)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _positive(name: str, value: float) -> None:
    if not (_is_real(value) and math.isfinite(value) and value > 0):
        raise ValueError(f"`{name}` must be a positive finite number, got {value!r}")


def _positive_int(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")


def _plain(value):
    """A setting as JSON takes it: numpy numbers as Python's, in pairs too."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return value


def _kernel(sampler: str, kernel) -> None:
    if not isinstance(kernel, Kernel):
        raise TypeError(
            f"`kernel` of a {sampler} must be a kameleon kernel (e.g. km.Gaussian(), km.Matern(nu=1.5)), "
            f"got {kernel!r}"
        )


def _surrogate_base(base: str, whiten: bool) -> None:
    if base not in ("flat", "gaussian", "student"):
        raise ValueError(f'`base` must be "flat", "gaussian" or "student", got {base!r}')
    if base != "flat" and not whiten:
        raise ValueError(
            f'`base="{base}"` needs `whiten=True`: that base measure lives in the whitened coordinates '
            '(use base="flat" in the target\'s own units)'
        )


def _range(name: str, value: tuple, integer: bool) -> None:
    if len(value) != 2 or value[0] > value[1]:
        raise ValueError(f"`{name}` must be a pair (low, high) with low <= high, got {value!r}")
    for v in value:
        if integer:
            _positive_int(name, v)
        else:
            _positive(name, v)


def _step_factor(target_accept: float, step_factor_range: tuple) -> None:
    """Checks KMC's learned step factor: a target acceptance in (0, 1) and a
    range (low, high) around the starting factor 1."""
    if not (_is_real(target_accept) and 0 < target_accept < 1):
        raise ValueError(f"`target_accept` must lie in (0, 1), got {target_accept!r}")
    _range("step_factor_range", step_factor_range, integer=False)
    low, high = step_factor_range
    if not low <= 1 <= high:
        raise ValueError(
            f"`step_factor_range` must contain the starting factor 1 (low <= 1 <= high), got {step_factor_range!r}"
        )


def _numeric_unless_whitened(sampler: str, kernel, whiten: bool) -> None:
    _kernel(sampler, kernel)
    if kernel.bandwidth == "median" and not whiten:
        raise ValueError(
            f'`bandwidth` of a {sampler} kernel must be a number, not "median", unless `whiten=True`'
        )


def _bandwidth(value: float | str) -> float | None:
    if value == "median":
        return None
    _positive("bandwidth", value)
    return float(value)


@dataclass(frozen=True)
class _Settings:
    kind = ""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object the Rust side builds the sampler from."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in dataclasses.fields(self):
            if f.metadata.get("python_only"):
                continue
            value = getattr(self, f.name)
            out[f.name] = value.to_dict() if isinstance(value, Kernel) else _plain(value)
        return out


# ── kernels ──────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Kernel(_Settings):
    """Base class of the kernels; ``bandwidth`` is a length-scale or ``"median"``."""

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["bandwidth"] = _bandwidth(out["bandwidth"])
        return out


@dataclass(frozen=True)
class Gaussian(Kernel):
    """k(x, y) = exp(−‖x − y‖²/(2ℓ²))."""

    bandwidth: float | str = "median"
    kind = "Gaussian"

    def __post_init__(self) -> None:
        _bandwidth(self.bandwidth)


@dataclass(frozen=True)
class Laplacian(Kernel):
    """k(x, y) = exp(−‖x − y‖/ℓ)."""

    bandwidth: float | str = "median"
    kind = "Laplacian"

    def __post_init__(self) -> None:
        _bandwidth(self.bandwidth)


@dataclass(frozen=True)
class Matern(Kernel):
    """The Matérn kernel of smoothness ``nu``."""

    nu: float = 2.5
    bandwidth: float | str = "median"
    kind = "Matern"

    def __post_init__(self) -> None:
        _positive("nu", self.nu)
        _bandwidth(self.bandwidth)


@dataclass(frozen=True)
class InverseMultiquadric(Kernel):
    """k(x, y) = (1 + ‖x − y‖²/ℓ²)^(−β)."""

    beta: float = 0.5
    bandwidth: float | str = "median"
    kind = "InverseMultiquadric"

    def __post_init__(self) -> None:
        _positive("beta", self.beta)
        _bandwidth(self.bandwidth)


@dataclass(frozen=True)
class RationalQuadratic(Kernel):
    """k(x, y) = (1 + ‖x − y‖²/(2αℓ²))^(−α)."""

    alpha: float = 1.0
    bandwidth: float | str = "median"
    kind = "RationalQuadratic"

    def __post_init__(self) -> None:
        _positive("alpha", self.alpha)
        _bandwidth(self.bandwidth)


def _default(kind: str, name: str) -> Any:
    """The default of parameter ``name`` of sampler ``kind`` (from the
    extension; JSON pairs become tuples, a ``None`` σ ``"median"``)."""
    value = DEFAULTS[kind][name]
    if isinstance(value, list):
        return tuple(value)
    if name == "sigma" and value is None:
        return "cv" if DEFAULTS[kind].get("cross_validate") else "median"
    return value


def _default_kernel(kind: str) -> "Kernel":
    """The default kernel of sampler ``kind`` (a ``None`` bandwidth is the
    median heuristic)."""
    spec = dict(DEFAULTS[kind]["kernel"])
    kernels = (Gaussian, Laplacian, Matern, InverseMultiquadric, RationalQuadratic)
    cls = {k.kind: k for k in kernels}[spec.pop("kind")]
    if spec.get("bandwidth") is None:
        spec["bandwidth"] = "median"
    return cls(**spec)


# ── samplers ─────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Sampler(_Settings):
    """Base class of the samplers."""


@dataclass(frozen=True)
class RandomWalk(Sampler):
    """Gaussian random walk N(x, ν²I).

    ``scale=None`` is ν = 2.38/√d; ``learned=True`` (the default) adapts ν
    toward acceptance 0.234 during tuning (steps 1/√t), ``learned=False``
    keeps it fixed. With ``whiten=True`` (the default, see the module docs)
    the walk runs in the coordinates the tuning's pilot learns, so it
    proposes along the target's correlations and ν is in units of its
    standard deviations; ``whiten=False`` is N(x, ν²I) in the target's own
    units.
    """

    scale: float | None = _default("RandomWalk", "scale")
    learned: bool = _default("RandomWalk", "learned")
    whiten: bool = _default("RandomWalk", "whiten")
    kind = "RandomWalk"

    def __post_init__(self) -> None:
        if self.scale is not None:
            _positive("scale", self.scale)


@dataclass(frozen=True)
class AM(Sampler):
    """Adaptive Metropolis N(x, ν²(Σ + 10⁻⁶I)), identity for the first 2d updates.

    ``scale="fixed"``: ν = 2.38/√d with the empirical covariance (Haario et
    al.); ``"learned"``: ν and the moments by stochastic approximation, ν
    toward acceptance 0.234 (Andrieu & Thoms Alg. 4). ``rao_blackwell``:
    moments fed x* weighted by the acceptance probability (Alg. 3).
    ``whiten=True`` (the default, see the module docs) runs AM after the
    tuning's pilot, in the coordinates it learns, where the pilot's
    covariance is the identity. Without ``rao_blackwell`` the covariance is
    then the empirical one shrunk toward the identity, a prior worth d²
    accepted moves (Σ = (m S + d² I)/(m + d²) after m accepted moves), for
    fixed and learned ν alike (stochastic approximation, whose memory is
    about √t steps, would forget the pilot at once), so a short,
    autocorrelated history refines the pilot's covariance instead of
    replacing it. Unwhitened, AM's covariance starts at the identity in the
    target's units, whose early steps dominate it for thousands of steps on
    badly scaled posteriors (on kilpisjarvi, whose coordinates differ in
    scale by 10³, acceptance 0.03). ``paper()`` (``whiten=False``) is the
    papers' AM.
    """

    scale: Literal["fixed", "learned"] = _default("AM", "scale")
    rao_blackwell: bool = _default("AM", "rao_blackwell")
    whiten: bool = _default("AM", "whiten")
    kind = "AM"

    @classmethod
    def paper(cls, scale: Literal["fixed", "learned"] = "fixed") -> "AM":
        """The papers' AM, in the target's units: no whitening."""
        return cls(scale=scale, whiten=False)

    def __post_init__(self) -> None:
        if self.scale not in ("fixed", "learned"):
            raise ValueError(f'`scale` must be "fixed" or "learned", got {self.scale!r}')


@dataclass(frozen=True)
class AMPCA(Sampler):
    """Principal-components adaptive Metropolis (``components=None``: all d);
    ``whiten`` as :class:`AM` (whitened, the covariance whose principal
    components it proposes along is shrunk toward the identity the same
    way); ``paper()`` is unwhitened."""

    components: int | np.integer | None = _default("AMPCA", "components")
    whiten: bool = _default("AMPCA", "whiten")
    kind = "AMPCA"

    @classmethod
    def paper(cls, components: int | np.integer | None = None) -> "AMPCA":
        """PCA-AM in the target's units: no whitening."""
        return cls(components=components, whiten=False)

    def __post_init__(self) -> None:
        if self.components is not None:
            _positive_int("components", self.components)


@dataclass(frozen=True)
class HMC(Sampler):
    """Hamiltonian Monte Carlo with ε ~ U[step_size) and L ~ U{steps}.

    ``grad_log_density(x) -> array`` is required for Python callables;
    built-in targets use their own gradient.
    """

    grad_log_density: Callable | None = field(default=None, metadata={"python_only": True})
    step_size: tuple[float, float] = _default("HMC", "step_size")
    steps: tuple[int | np.integer, int | np.integer] = _default("HMC", "steps")
    kind = "HMC"

    def __post_init__(self) -> None:
        _range("step_size", self.step_size, integer=False)
        _range("steps", self.steps, integer=True)


@dataclass(frozen=True)
class KAMH(Sampler):
    """Kernel adaptive Metropolis–Hastings (MCMC Kameleon).

    Subsample of ``subsample_size`` past states redrawn at every tuning step,
    N(x, γ²I + ν²MHMᵀ), ν learned toward 0.234 from ``scale`` (√0.1). With a
    ``"median"`` bandwidth, the median heuristic is recomputed at every
    tuning step from at most ``median_points`` subsample points (its cost is
    quadratic in them; 100 is what the paper experiments use).
    ``gamma=None`` (the default) is 2.38/√d in the whitened coordinates, a
    random walk's optimal scale: where the kernel term says little the chain
    moves by γ alone, and on the posteriordb benchmark (d = 3–26) the
    paper's γ = 0.2 mixed 1.4–2.1 times slower per evaluation.
    Whitened, a learned ν is kept below 10 times ``scale``: on heavy-tailed
    targets an unbounded ν could run away with a chain that wandered into
    the tail (a Student t with 3 degrees of freedom in d = 10–50: in 5 of 15
    runs ν reached 10²–10¹⁰ and the kept chains went 2·10²–1.4·10⁶ scale units
    out); on standard normals and bananas up to d = 50 and on the
    real-posterior suite the bound is never reached, so those chains are
    unchanged.

    Scale-free by default (``whiten=True``, see the module docs);
    ``paper()`` gives the paper's settings, in the target's own units.
    """

    subsample_size: int | np.integer = _default("KAMH", "subsample_size")
    kernel: Kernel = field(default_factory=lambda: _default_kernel("KAMH"))
    median_points: int | np.integer = _default("KAMH", "median_points")
    gamma: float | None = _default("KAMH", "gamma")
    scale: float = _default("KAMH", "scale")
    learned: bool = _default("KAMH", "learned")
    whiten: bool = _default("KAMH", "whiten")
    kind = "KAMH"

    @classmethod
    def paper(cls, subsample_size: int | np.integer = 1000) -> "KAMH":
        """The KAMH paper's KAMH-LS: n = 1000, γ = 0.2, no whitening."""
        return cls(subsample_size=subsample_size, gamma=0.2, whiten=False)

    def __post_init__(self) -> None:
        _kernel(self.kind, self.kernel)
        _positive_int("subsample_size", self.subsample_size, 2)
        _positive_int("median_points", self.median_points, 2)
        if self.gamma is not None:
            _positive("gamma", self.gamma)
        _positive("scale", self.scale)


@dataclass(frozen=True)
class PCAKameleon(Sampler):
    """PCA-Kameleon: a mixture over the kernel principal directions
    (``median_points`` as in :class:`KAMH`). The subsample (and its kernel
    eigendecomposition, O(n³)) is redrawn at tuning step t with probability
    t^−``refresh_kappa`` (``None``: at every tuning step). Each move is rank
    one along a single principal direction plus N(0, γ²I), so γ carries the
    chain in every other direction: ``gamma=None`` (the default) is
    2.38/√d in the whitened coordinates, a random walk's optimal scale; on
    the posteriordb benchmark (d = 3–26) 0.75 · 2.38/√d mixed 1.2–1.6 times
    slower per evaluation and the paper's fixed γ = 0.2 slower still.

    Scale-free by default (``whiten=True``, see the module docs);
    ``paper()`` gives the paper's settings, in the target's own units.
    """

    subsample_size: int | np.integer = _default("PCAKameleon", "subsample_size")
    kernel: Kernel = field(default_factory=lambda: _default_kernel("PCAKameleon"))
    median_points: int | np.integer = _default("PCAKameleon", "median_points")
    components: int | np.integer = _default("PCAKameleon", "components")
    gamma: float | None = _default("PCAKameleon", "gamma")
    scale: float = _default("PCAKameleon", "scale")
    learned: bool = _default("PCAKameleon", "learned")
    refresh_kappa: float | None = _default("PCAKameleon", "refresh_kappa")
    whiten: bool = _default("PCAKameleon", "whiten")
    kind = "PCAKameleon"

    @classmethod
    def paper(cls, subsample_size: int | np.integer = 1000) -> "PCAKameleon":
        """The arXiv appendix's settings at n = 1000 (subsample redrawn at
        every tuning step, γ = 0.2), no whitening."""
        return cls(subsample_size=subsample_size, gamma=0.2, refresh_kappa=None, whiten=False)

    def __post_init__(self) -> None:
        _kernel(self.kind, self.kernel)
        _positive_int("subsample_size", self.subsample_size, 2)
        _positive_int("median_points", self.median_points, 2)
        _positive_int("components", self.components)
        if self.gamma is not None:
            _positive("gamma", self.gamma)
        _positive("scale", self.scale)
        if self.refresh_kappa is not None and not (
            _is_real(self.refresh_kappa) and 0 < self.refresh_kappa <= 1
        ):
            raise ValueError(f"`refresh_kappa` must lie in (0, 1] or be None, got {self.refresh_kappa!r}")


@dataclass(frozen=True)
class FKAMH(Sampler):
    """F-KAMH on ``features`` random Fourier features of ``kernel``.

    ``embedding="cos"``: cos(ωᵀx + b) with D frequencies; ``"sincos"``:
    [sin, cos] pairs with D/2 frequencies (D even). ``feature_map="rff"``
    draws the frequencies i.i.d.; ``"fastfood"`` uses structured Fastfood
    frequencies (O(D log d) per feature vector instead of O(Dd); radial
    kernels only, i.e. not Laplacian). Without whitening the kernel needs a
    numeric bandwidth; whitened, ``"median"`` is √(2d), the median distance
    between points of N(0, I). ``gamma=None`` (the default) is 2.38/√d in
    the whitened coordinates, a random walk's optimal scale (as
    :class:`KAMH`).

    Scale-free by default (``whiten=True``, see the module docs);
    ``paper()`` gives the paper's settings, in the target's own units.
    """

    features: int | np.integer = _default("FKAMH", "features")
    embedding: Literal["cos", "sincos"] = _default("FKAMH", "embedding")
    feature_map: Literal["rff", "fastfood"] = _default("FKAMH", "feature_map")
    kernel: Kernel = field(default_factory=lambda: _default_kernel("FKAMH"))
    gamma: float | None = _default("FKAMH", "gamma")
    eta: float = _default("FKAMH", "eta")
    learned: bool = _default("FKAMH", "learned")
    whiten: bool = _default("FKAMH", "whiten")
    kind = "FKAMH"

    @classmethod
    def paper(cls, features: int | np.integer = 100, bandwidth: float = 1.0) -> "FKAMH":
        """F-KAMH in the target's units: a Gaussian kernel of length-scale
        ``bandwidth``, γ = 0.2, no whitening."""
        return cls(features=features, kernel=Gaussian(bandwidth), gamma=0.2, whiten=False)

    def __post_init__(self) -> None:
        _positive_int("features", self.features)
        if self.embedding not in ("cos", "sincos"):
            raise ValueError(f'`embedding` must be "cos" or "sincos", got {self.embedding!r}')
        if self.feature_map not in ("rff", "fastfood"):
            raise ValueError(f'`feature_map` must be "rff" or "fastfood", got {self.feature_map!r}')
        if self.feature_map == "fastfood" and isinstance(self.kernel, Laplacian):
            raise ValueError('`feature_map="fastfood"` needs a radial kernel; the Laplacian is not')
        _numeric_unless_whitened("FKAMH", self.kernel, self.whiten)
        if self.gamma is not None:
            _positive("gamma", self.gamma)
        _positive("eta", self.eta)


@dataclass(frozen=True)
class CKAM(Sampler):
    """Cyclical KAMH: cycles of ``cycle_length`` steps, the first fraction
    ``exploration_fraction`` (β) exploring with KAMH, the rest sampling with a
    random walk whose covariance is frozen at the switch.

    ``tune`` counts steps and ``draws`` kept states, ``thin`` steps apart,
    as for every sampler. ``keep="all"`` (the default) keeps every such
    state: in the exact variant each is a draw of π, so the exploration
    steps count too, and a chain has ``draws`` draws (on the posteriordb
    benchmark the minimum bulk ESS per evaluation rose by 10–50 % over
    keeping the sampling phase alone). ``keep="sampling"`` keeps only the
    sampling-phase states among them, as the paper does: about
    (1 − β)·``draws`` draws from the same ``draws · thin`` steps (choose
    ``draws · thin`` and ``tune`` as multiples of ``cycle_length`` for whole
    cycles). The
    exploration scale ν starts at ``scale`` (None: 2 · 2.38/√d) and is learned
    toward acceptance 0.234 with steps t^−0.75. The defaults are the exact
    variant (``switch="delayed_rejection"``, ``adaptation="between_cycles"``);
    ``"as_written"`` with ``"within_cycle"`` is the paper's Alg. 2, which is
    biased. The default kernel is the Gaussian; whitened, a ``"median"``
    bandwidth is √(2d) (as :class:`FKAMH`). The paper's Matérn ν = 4 has no
    closed form: its Bessel functions made a step cost 11 times KAMH's
    (56 µs against 3 µs with the Gaussian in 10 dimensions), and on the
    posteriordb benchmark it passed the ODE where the Gaussian passes
    diamonds (6 of 8 either way, both at the threshold) with about the same
    ESS per evaluation.
    ``gamma=None`` (the default) is 2.38/√d in the whitened coordinates. The
    exact sampling phase keeps the chain near the switch's KAMH draw and its
    cosine schedule shrinks the steps to zero, while the exploration steps
    move the chain across the posterior: so the defaults use short cycles
    (20 steps) that mostly explore (β = 0.8: 3 sampling steps per cycle), which
    on the posteriordb benchmark mixed 10–15 times faster per evaluation
    than 1000-step cycles with β = 0.4.

    Scale-free by default (``whiten=True``, see the module docs);
    ``paper()`` gives the paper's settings, in the target's own units.
    The paper's bimodal experiment is ``paper()``.
    """

    subsample_size: int | np.integer = _default("CKAM", "subsample_size")
    kernel: Kernel = field(default_factory=lambda: _default_kernel("CKAM"))
    gamma: float | None = _default("CKAM", "gamma")
    scale: float | None = _default("CKAM", "scale")
    cycle_length: int | np.integer = _default("CKAM", "cycle_length")
    exploration_fraction: float = _default("CKAM", "exploration_fraction")
    switch: Literal["delayed_rejection", "as_written"] = _default("CKAM", "switch")
    adaptation: Literal["between_cycles", "within_cycle"] = _default("CKAM", "adaptation")
    keep: Literal["all", "sampling"] = _default("CKAM", "keep")
    whiten: bool = _default("CKAM", "whiten")
    kind = "CKAM"

    @classmethod
    def paper(cls) -> "CKAM":
        """The paper's bimodal-experiment kernel (Matérn ν = 4, ℓ = 2) and
        γ = 4, cycles of 1000 steps with β = 0.4, the sampling-phase states
        kept, exact variant, no whitening."""
        return cls(
            kernel=Matern(nu=4.0, bandwidth=2.0),
            gamma=4.0,
            cycle_length=1000,
            exploration_fraction=0.4,
            keep="sampling",
            whiten=False,
        )

    def __post_init__(self) -> None:
        _positive_int("subsample_size", self.subsample_size, 2)
        _numeric_unless_whitened("CKAM", self.kernel, self.whiten)
        if self.gamma is not None:
            _positive("gamma", self.gamma)
        if self.scale is not None:
            _positive("scale", self.scale)
        _positive_int("cycle_length", self.cycle_length, 2)
        if not (_is_real(self.exploration_fraction) and 0 <= self.exploration_fraction < 1):
            raise ValueError(f"`exploration_fraction` must lie in [0, 1), got {self.exploration_fraction!r}")
        if self.switch not in ("delayed_rejection", "as_written"):
            raise ValueError(f'`switch` must be "delayed_rejection" or "as_written", got {self.switch!r}')
        if self.adaptation not in ("between_cycles", "within_cycle"):
            raise ValueError(f'`adaptation` must be "between_cycles" or "within_cycle", got {self.adaptation!r}')
        if self.keep not in ("all", "sampling"):
            raise ValueError(f'`keep` must be "all" or "sampling", got {self.keep!r}')


@dataclass(frozen=True)
class KMCLite(Sampler):
    """KMC lite: HMC on a score-matching surrogate fitted to n past states.

    ``sigma`` is the σ of exp(−‖x − y‖²/σ), or ``"median"``: σ = 4m² at
    every fit, m the median distance between the basis points, or ``"cv"``:
    at the first fit σ (a multiple of the median rule's) and λ are chosen by
    5-fold cross-validation of the score-matching objective (about a
    hundred fits, once per chain), and kept in that ratio afterwards. The
    best-fitting surrogate is not the best-mixing one: on standard normals
    in d = 5 and 10 the cross-validated chains had a min ESS of 131–197
    against 1 046–4 131 for ``"median"`` (5 000 tuning steps).
    ``lam`` is the ridge λ; ``None`` (the default) is 5 000 max(d, 2): the
    system it regularises grows with d, and against a fixed λ = 10⁴ a 20-d
    normal (1 000 tuning steps) was accepted 0.48–0.56 of the time instead
    of 0.40–0.57, at a minimum ESS of 342–474 of 4 000 draws instead of
    251–442.
    ``adapt_step_size`` learns a factor on the step size toward acceptance
    ``target_accept`` (0.65) during tuning, kept in ``step_factor_range``
    ((0.5, 20)). KMC needs a longer ``tune`` than
    the random-walk samplers as d grows (the whitening and the surrogate
    learn from the tuning steps): on a 20-d normal the defaults accept
    0.48–0.56 of the proposals after 1 000 tuning steps, 0.52–0.61 after
    2 000 and 0.58–0.59 after 5 000 (minimum ESS 342–474, 472–583 and
    544–596 of 4 000 draws). The tuning steps the whitening pilot takes are
    what it lacks, though the surrogate also learns from the states of the
    pilot's last window: unwhitened (a standard normal needs no map) all
    1 000 go to KMC, which then accepts 0.61–0.71, and with 500 of them
    (``tune=500``) 0.38–0.58.
    The leapfrog's error is not what rejects: with half the step size and
    twice the leapfrog steps (``step_size=(0.05, 0.1), steps=(20, 40)``,
    trajectories as long) lite accepts about as before (0.48–0.58 at
    d = 20).
    Shorter steps raise the acceptance but not the mixing: with
    ``step_size=(0.05, 0.1)`` lite accepts 0.61–0.72 for d = 2–20, but its
    minimum ESS at d = 20 falls to 173–268.
    A lower target with a lower floor for the factor does the same more
    gently: ``target_accept=0.62`` with ``step_factor_range=(0.3, 20)``
    accepts 0.55–0.62 at d = 20 at a minimum ESS of 218–408
    (``python/benchmarks/results/kmc_standard_normal.md``), and on the
    real-posterior suite it cost KMC lite 81 % of its ESS per evaluation on
    hmm_drive_0, 45 % on nes and 41 % on diamonds. The floor alone at 0.45
    (``step_factor_range=(0.45, 20)``) accepts 0.51–0.61 at d = 20 (seeds
    1–6) and still costs 7–12 % of the ESS per evaluation on diamonds, nes
    and the ODE.
    ``base`` is the measure the surrogate corrects, and falls back to where
    its history says little: ``"flat"`` (none; the gradient vanishes far
    from the history), ``"gaussian"`` (N(0, I) in the whitened coordinates,
    the pilot's Gaussian approximation) or ``"student"`` (the Student t with
    ν = 3d degrees of freedom that matches N(0, I) near the origin and pulls
    less in the tails); the last two need ``whiten``. On KMC lite neither
    helps: on a 20-d normal after 1 000 tuning steps the Gaussian accepted
    0.37–0.48 (minimum ESS 69–258) and the Student t 0.46–0.55 (198–552),
    and the Gaussian's pull keeps trajectories out of heavy tails (on the
    real-posterior suite's ODE it underestimated the sd of log V_m by
    13–19 %), so KMC lite's default is ``"flat"``.

    Scale-free by default (``whiten=True``, see the module docs);
    ``paper()`` gives the paper's settings, in the target's own units.
    ``rewhiten=True`` (the default; whitened only) estimates the whitening
    map once more during tuning, from KMC's own states, which locate the
    target better than the pilot random walk's, and moves the surrogate
    into the new coordinates (the pilot then runs the first 30 % of the
    tuning steps, the re-estimate uses steps 40–80 %). Against the pilot's
    map it raised the minimum ESS on a 20-d normal from 267–373 to 342–474
    of 4 000 draws (1 000 tuning steps), and on the real-posterior suite the
    ESS per evaluation 3.2 times on nes and 1.5 times on diamonds (the Rust
    ``KmcConfig::scale_free_whitening`` has the figures).
    """

    n: int | np.integer = _default("KMCLite", "n")
    sigma: float | str = _default("KMCLite", "sigma")
    lam: float | None = _default("KMCLite", "lam")
    step_size: tuple[float, float] = _default("KMCLite", "step_size")
    steps: tuple[int | np.integer, int | np.integer] = _default("KMCLite", "steps")
    kappa: float = _default("KMCLite", "kappa")
    whiten: bool = _default("KMCLite", "whiten")
    adapt_step_size: bool = _default("KMCLite", "adapt_step_size")
    base: str = _default("KMCLite", "base")
    rewhiten: bool = _default("KMCLite", "rewhiten")
    target_accept: float = _default("KMCLite", "target_accept")
    step_factor_range: tuple[float, float] = _default("KMCLite", "step_factor_range")
    kind = "KMCLite"

    @classmethod
    def paper(cls, n: int | np.integer = 200, sigma: float = 1.0, lam: float = 1e-3) -> "KMCLite":
        """Fixed σ, λ and step sizes in the target's units, no whitening."""
        return cls(
            n=n, sigma=sigma, lam=lam, whiten=False, adapt_step_size=False, base="flat", rewhiten=False
        )

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["cross_validate"] = self.sigma == "cv"
        out["sigma"] = None if self.sigma == "cv" else _bandwidth(out["sigma"])
        return out

    def __post_init__(self) -> None:
        _positive_int("n", self.n, 2)
        if self.sigma != "cv":
            _bandwidth(self.sigma)
        if self.lam is not None:
            _positive("lam", self.lam)
        _range("step_size", self.step_size, integer=False)
        _range("steps", self.steps, integer=True)
        if not (_is_real(self.kappa) and 0 < self.kappa <= 1):
            raise ValueError(f"`kappa` must lie in (0, 1], got {self.kappa!r}")
        _surrogate_base(self.base, self.whiten)
        _step_factor(self.target_accept, self.step_factor_range)


@dataclass(frozen=True)
class KMCFinite(Sampler):
    """KMC finite: HMC on a random-feature surrogate learned online.

    Whitened, a ``"median"`` bandwidth is √(2d) (as :class:`FKAMH`);
    ``adapt_step_size`` and ``base`` as :class:`KMCLite`. The random
    features describe the density only near the history, so KMC finite needs
    a base far more than KMC lite: flat, it accepts 0.14–0.17 on a 10-d
    normal. Its default is ``"student"``: against ``"gaussian"`` the
    minimum ESS on 10- and 20-d normals (1 000 tuning steps) rose from
    45–414 and 33–175 to 592–741 and 304–337 of 4 000 draws, and on the
    suite's ODE the sd of log V_m went from 13–16 % low to within 3 %.
    ``rewhiten`` (default ``True``, see :class:`KMCLite`) refits the
    surrogate on the states it learned, in the new coordinates, and moves
    its base measure's centre to the better estimate of the target's:
    the minimum ESS on 10- and 20-d normals rose from 353–394 and 152–160
    to 592–741 and 304–337 (acceptance at d = 20 from 0.36–0.48 to
    0.49–0.53), and on the real-posterior suite the median ESS per
    evaluation rose 3–80 % on four posteriors and fell 15 % on the ODE
    (the Rust ``KmcConfig::scale_free_whitening`` has the figures).

    Scale-free by default (``whiten=True``, see the module docs);
    ``paper()`` gives the paper's settings, in the target's own units.
    """

    features: int | np.integer = _default("KMCFinite", "features")
    kernel: Kernel = field(default_factory=lambda: _default_kernel("KMCFinite"))
    lam: float = _default("KMCFinite", "lam")
    step_size: tuple[float, float] = _default("KMCFinite", "step_size")
    steps: tuple[int | np.integer, int | np.integer] = _default("KMCFinite", "steps")
    min_points: int | np.integer = _default("KMCFinite", "min_points")
    whiten: bool = _default("KMCFinite", "whiten")
    adapt_step_size: bool = _default("KMCFinite", "adapt_step_size")
    base: str = _default("KMCFinite", "base")
    rewhiten: bool = _default("KMCFinite", "rewhiten")
    target_accept: float = _default("KMCFinite", "target_accept")
    step_factor_range: tuple[float, float] = _default("KMCFinite", "step_factor_range")
    kind = "KMCFinite"

    @classmethod
    def paper(cls, features: int | np.integer = 100, bandwidth: float = 1.0) -> "KMCFinite":
        """A Gaussian kernel of length-scale ``bandwidth`` and fixed step
        sizes in the target's units, no whitening."""
        return cls(
            features=features,
            kernel=Gaussian(bandwidth),
            whiten=False,
            adapt_step_size=False,
            base="flat",
            rewhiten=False,
        )

    def __post_init__(self) -> None:
        _positive_int("features", self.features)
        _numeric_unless_whitened("KMCFinite", self.kernel, self.whiten)
        _positive("lam", self.lam)
        _range("step_size", self.step_size, integer=False)
        _range("steps", self.steps, integer=True)
        _positive_int("min_points", self.min_points)
        _surrogate_base(self.base, self.whiten)
        _step_factor(self.target_accept, self.step_factor_range)
