"""Vectorised numpy "peers" of kameleon's hot paths.

(One file of about a thousand lines on purpose: the report runs it as one
script, and the nine peers read best side by side with the helpers they
share.)

A *peer* is a second, readable implementation of one of the Rust hot paths,
with the same kernel parametrisation and the same formulas, written in plain
vectorised numpy/scipy: no Python loop over data points, basis points or
features (the loops left are over leapfrog steps, Newton steps and timed
calls). Peers serve two purposes:

1. ``cargo xtask bench-report`` times them side by side with the Rust code;
2. tests compare the Rust results against them (``check``), so each formula
   has an independent implementation (python/tests/test_peers.py).

The peers run with **one BLAS thread**: ``OPENBLAS_NUM_THREADS``,
``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` default to 1 below, before numpy
is imported (run the file as a script for that to take effect; a process
that imported numpy earlier keeps its threads), matching the
single-threaded Rust figures. Small dense linear algebra calls LAPACK
through ``scipy.linalg.lapack`` directly: at d = 8 the checks of the
high-level wrappers would cost several times the factorisation itself.

Fixtures
--------
The Rust side writes them with ``xtask peer-fixtures --size tiny|quick|full
--out DIR``::

    DIR/manifest.json   {"dim": 8, "banana": {"b": 0.03, "v": 100.0},
                         "paths": {NAME: {scalar params...}, ...}}
    DIR/NAME/*.npy      float64 arrays: scalars as shape-() arrays, vectors
                        1-D, matrices 2-D row-major, points are rows

The paths (``NAME``), their parameters and arrays:

``kamh_step``
    params ``sigma`` (the argument of ``Gaussian::new``, a length-scale),
    ``gamma``, ``nu``; arrays ``z`` (n × d), ``x``, ``y`` (d), expected
    ``log_correction`` (shape ()) and ``log_target`` (shape (2,): the banana
    at x and y). Timed: one KAMH iteration with a fixed subsample.
``kamh_adapting_step``
    params ``sigma``, ``gamma``, ``nu``, ``max_points``, ``subsample_size``;
    arrays ``history`` (t × d), ``x``. Timed: subsample redraw, median
    heuristic, factor at x, one iteration. Nothing to compare (random).
``kmc_lite_gradient``
    params ``sigma`` (the *lite* σ of ``exp(−‖x − z‖²/σ)``); arrays
    ``basis`` (n × d), ``alpha`` (n), ``points`` (k × d), expected
    ``gradients`` (k × d). Timed: the gradient at one point.
``kmc_lite_step``
    params ``steps``, ``step_size_low``, ``step_size_high``; array ``x``; the
    surrogate is read from ``kmc_lite_gradient``. Timed: one KMC iteration.
``kmc_finite_gradient``
    arrays ``frequencies`` (m × d, one frequency ω_j per row, as
    ``RandomFourierFeatures::frequencies()``), ``phases`` (m), ``theta`` (m),
    ``points``, expected ``gradients``. Timed: the gradient at one point.
``kmc_finite_step``
    as ``kmc_lite_step``, with the surrogate of ``kmc_finite_gradient``.
``lite_fit``
    params ``sigma`` (lite σ), ``lambda``; arrays ``points`` (n × d),
    expected ``alpha``. Timed: one fit.
``finite_fit``
    params ``lambda``; arrays ``frequencies``, ``phases``, ``points``,
    expected ``theta``. Timed: one batch fit.
``glass_estimate``
    params ``n_importance``, ``ridge`` (optional: ``max_newton_steps``,
    default 100, ``newton_tolerance``, default 1e-10); arrays ``x`` (N × D),
    ``y`` (±1), ``theta``, expected ``mode`` (f̂) and
    ``log_marginal_laplace`` (shape ()). Timed: one importance-sampling
    log-likelihood estimate.

Run ``python peers.py FIXTURE_DIR --out OUT.json`` to check every peer
against the fixture's expected arrays and time it with the Rust report's
timer (``time_calls``); the report gives, per path, the median and 10%/90%
quantiles of the seconds per call and the largest errors against the Rust
outputs (``compare``; null where there is nothing to compare).
"""

from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402
import scipy  # noqa: E402
from scipy.linalg import lapack  # noqa: E402
from scipy.spatial.distance import pdist, squareform  # noqa: E402

LN_2PI = 1.8378770664093455  # ln(2π), the constant of the Rust targets

PATHS = (
    "kamh_step",
    "kamh_adapting_step",
    "kmc_lite_gradient",
    "kmc_lite_step",
    "kmc_finite_gradient",
    "kmc_finite_step",
    "lite_fit",
    "finite_fit",
    "glass_estimate",
)
# Paths timed like the Rust fits: warm-up 1, max(3, R // 3) repetitions.
FIT_PATHS = ("lite_fit", "finite_fit")


# --------------------------------------------------------------------------
# Targets and the Metropolis–Hastings decision
# --------------------------------------------------------------------------


def banana_log_density(x: np.ndarray, b: float, v: float) -> np.ndarray:
    """The banana of Haario et al. (``Banana::new(dim, b, v)``), normalised.

    ``log π(x) = −½ (d log 2π + log v + x₀²/v + r² + Σ_{l≥2} x_l²)`` with the
    twisted coordinate ``r = x₁ − b (x₀² − v)``. ``x`` is one point (d,) or
    a stack of points (..., d).
    """
    x = np.asarray(x, dtype=float)
    d = x.shape[-1]
    x0 = x[..., 0]
    r = x[..., 1] - b * (x0 * x0 - v)
    tail = x[..., 2:]
    norm = x0 * x0 / v + r * r + np.einsum("...i,...i->...", tail, tail)
    return -0.5 * (d * LN_2PI + math.log(v) + norm)


def metropolis_accept(log_py: float, log_px: float, correction: float, rng) -> bool:
    """The engine's decision for a proposal y from x: one uniform u per step
    whatever happens; reject if the proposal's correction (Hastings or
    kinetic energy) or ``log π(y)`` is not finite, or the ratio is NaN; else
    accept iff ``log u < log π(y) − log π(x) + correction``."""
    u = rng.random()
    if not (math.isfinite(correction) and math.isfinite(log_py)):
        return False
    log_ratio = log_py - log_px + correction
    return not math.isnan(log_ratio) and math.log(u) < log_ratio


# Small dense linear algebra calls LAPACK through scipy.linalg.lapack
# directly: at d = 8 the checks of the high-level wrappers (numpy.linalg,
# scipy.linalg.solve_triangular) cost several times the factorisation itself.


def cholesky(a: np.ndarray) -> np.ndarray:
    """The lower Cholesky factor L of the symmetric positive-definite ``a``
    (only its lower triangle is read), ``a = LLᵀ``."""
    lower, info = lapack.dpotrf(a, lower=1, clean=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"Cholesky factorisation failed (info {info})")
    return lower


def solve_lower(lower: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``L⁻¹ rhs`` for a lower-triangular L (rhs a vector or a matrix)."""
    return lapack.dtrtrs(lower, rhs, lower=1)[0]


def cholesky_solve(lower: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``(LLᵀ)⁻¹ rhs`` from the lower Cholesky factor L."""
    return lapack.dpotrs(lower, rhs, lower=1)[0]


def half_log_det(lower: np.ndarray) -> float:
    """``Σᵢ log Lᵢᵢ = ½ log det(LLᵀ)``."""
    return float(np.log(lower.diagonal()).sum())


class GaussianFactor:
    """A covariance ``C = LLᵀ`` kept as its lower Cholesky factor and half
    log-determinant (``ProposalCovariance``): draws from and log densities
    of ``N(mean, C)``."""

    def __init__(self, cov: np.ndarray):
        self.lower = cholesky(cov)
        self.half_log_det = half_log_det(self.lower)

    def sample(self, mean: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``mean + L ξ``, ``ξ ~ N(0, I)``."""
        return mean + self.lower @ rng.standard_normal(len(mean))

    def log_density(self, x: np.ndarray, mean: np.ndarray) -> float:
        """``log N(x; mean, C) = −½‖L⁻¹(x − mean)‖² − Σ log Lᵢᵢ − (d/2) log 2π``."""
        w = solve_lower(self.lower, x - mean)
        return float(-0.5 * (w @ w) - self.half_log_det - 0.5 * len(x) * LN_2PI)


# --------------------------------------------------------------------------
# KAMH
# --------------------------------------------------------------------------


def kamh_gradient_rows(z: np.ndarray, y: np.ndarray, sigma: float) -> np.ndarray:
    """``Mᵀ`` (n × d) at ``y``: row i is ``2∇ₓk(x, zᵢ)|ₓ₌ᵧ`` for the Gaussian
    kernel ``k(x, z) = exp(−‖x − z‖²/(2σ²))`` (``Gaussian::new(σ)``, σ a
    length-scale), i.e. ``(2/σ²) k(y, zᵢ) (zᵢ − y)``."""
    diff = z - y
    k = np.exp(-0.5 * np.einsum("ij,ij->i", diff, diff) / sigma**2)
    return (2.0 / sigma**2) * k[:, None] * diff


def kamh_kernel_term(z: np.ndarray, y: np.ndarray, sigma: float) -> np.ndarray:
    """The KAMH kernel term ``M H Mᵀ`` at ``y`` (d × d), with
    ``H = I − (1/n)11ᵀ`` the centring matrix: since H is idempotent,
    ``M H Mᵀ = (MH)(MH)ᵀ``, the scatter of the centred rows of ``Mᵀ``
    (the Rust forms ``M Mᵀ − (1/n)(M1)(M1)ᵀ``, the same matrix)."""
    rows = kamh_gradient_rows(z, y, sigma)
    centred = rows - rows.mean(axis=0)
    return centred.T @ centred


def kamh_covariance(
    z: np.ndarray, y: np.ndarray, sigma: float, gamma: float, nu: float
) -> np.ndarray:
    """The KAMH proposal covariance at ``y``: ``γ²I + ν² M H Mᵀ``."""
    return gamma**2 * np.eye(len(y)) + nu**2 * kamh_kernel_term(z, y, sigma)


def kamh_factor(z, y, sigma, gamma, nu) -> GaussianFactor:
    """The factored KAMH covariance at ``y`` (γ > 0 makes it positive
    definite, so the Rust jitter fallback never triggers)."""
    return GaussianFactor(kamh_covariance(z, y, sigma, gamma, nu))


def kamh_log_correction(
    z: np.ndarray, x: np.ndarray, y: np.ndarray, sigma: float, gamma: float, nu: float
) -> float:
    """The Hastings correction of a KAMH move x → y with subsample z:
    ``log q(x | y) − log q(y | x)``, ``q(·|u) = N(u, γ²I + ν² M_u H M_uᵀ)``:
    the reverse density uses the covariance built at the proposal y, the
    forward one that at the current state x, the same z for both."""
    forward = kamh_factor(z, x, sigma, gamma, nu).log_density(y, x)
    reverse = kamh_factor(z, y, sigma, gamma, nu).log_density(x, y)
    return reverse - forward


def median_heuristic(points: np.ndarray, max_points: int, rng: np.random.Generator) -> float:
    """The median pairwise Euclidean distance ``‖zᵢ − zⱼ‖`` (i < j) of the
    rows of ``points`` (``kameleon_kernels::median_heuristic``): over
    ``max_points`` rows drawn without replacement if there are more, else
    over all; the two middle distances are averaged for an even number of
    pairs. The KAMH median heuristic sets the Gaussian length-scale to it.
    Returns 0 if the median is 0 (the Rust then keeps the old bandwidth)."""
    n = len(points)
    if n > max_points:
        points = points[rng.choice(n, size=max_points, replace=False)]
    squared = pdist(points, "sqeuclidean")  # the m(m − 1)/2 pairs i < j
    mid = len(squared) // 2
    if len(squared) % 2:
        return math.sqrt(np.partition(squared, mid)[mid])
    lower, upper = np.partition(squared, (mid - 1, mid))[mid - 1 : mid + 1]
    return 0.5 * (math.sqrt(lower) + math.sqrt(upper))


class KamhStep:
    """One KAMH iteration per call (a Metropolis–Hastings step with the
    KAMH proposal, fixed z, γ and ν) on ``log_target``.

    The factor of the covariance at the current state is cached: a call
    draws ``y = x + L_x ξ``, builds and factors the covariance at ``y`` only
    (O(n d²) + O(d³)), evaluates the correction and the target at ``y`` and
    accepts by ``log u < log π(y) − log π(x) + log q(x|y) − log q(y|x)``; on
    acceptance y's factor becomes the current one (as the Rust does).
    """

    def __init__(self, z, x, sigma, gamma, nu, log_target, rng):
        self.sigma, self.gamma, self.nu = float(sigma), float(gamma), float(nu)
        self.log_target = log_target
        self.rng = rng
        self.x = np.array(x, dtype=float)
        self.log_px = float(log_target(self.x))
        self.set_subsample(np.asarray(z, dtype=float), self.sigma)
        self.accepted = 0

    def set_subsample(self, z: np.ndarray, sigma: float) -> None:
        """Installs z and the bandwidth σ, and refactors at the current state."""
        self.z, self.sigma = z, sigma
        self.factor_x = kamh_factor(z, self.x, sigma, self.gamma, self.nu)

    def __call__(self) -> bool:
        x, factor_x = self.x, self.factor_x
        y = factor_x.sample(x, self.rng)
        factor_y = kamh_factor(self.z, y, self.sigma, self.gamma, self.nu)
        correction = factor_y.log_density(x, y) - factor_x.log_density(y, x)
        log_py = float(self.log_target(y))
        accepted = metropolis_accept(log_py, self.log_px, correction, self.rng)
        if accepted:
            self.x, self.log_px, self.factor_x = y, log_py, factor_y
            self.accepted += 1
        return accepted


class KamhAdaptingStep:
    """One adapting KAMH iteration per call, with a refresh at every step
    (the paper's ``Refresh::Probability(Always)`` with the median heuristic):

    1. z ← ``subsample_size`` rows of the history drawn uniformly **without**
       replacement (``History::subsample_into``; the Rust keeps a persistent
       index permutation and shuffles it partially, numpy draws the subset
       with ``Generator.choice``: same distribution, not the same stream);
    2. σ ← the median heuristic over at most ``max_points`` of z's points
       (kept if the median is 0);
    3. the covariance at the current state is rebuilt and factored (the
       Rust invalidates its cached factor after a refresh);
    4. one KAMH step (``KamhStep``).

    The Rust refreshes after the decision and rebuilds the current factor at
    the next step; the per-iteration work is the same. The history is kept
    fixed here (the Rust appends the new state, O(d)), and ν is fixed (the
    Rust's Robbins–Monro update is O(1)).
    """

    def __init__(self, history, x, subsample_size, max_points, sigma, gamma, nu, log_target, rng):
        self.history = np.asarray(history, dtype=float)
        self.subsample_size = int(subsample_size)
        self.max_points = int(max_points)
        self.rng = rng
        self.step = KamhStep(
            self.history[: self.subsample_size], x, sigma, gamma, nu, log_target, rng
        )

    def refresh(self) -> None:
        """Steps 1–3: a new subsample, its bandwidth and the current factor."""
        rows = self.rng.choice(len(self.history), size=self.subsample_size, replace=False)
        z = self.history[rows]
        median = median_heuristic(z, self.max_points, self.rng)
        self.step.set_subsample(z, median if median > 0.0 else self.step.sigma)

    def __call__(self) -> bool:
        self.refresh()
        return self.step()


# --------------------------------------------------------------------------
# KMC lite: f(x) = Σᵢ αᵢ exp(−‖x − zᵢ‖²/σ)
# --------------------------------------------------------------------------


class LiteSurrogate:
    """The lite surrogate ``f(x) = Σᵢ αᵢ k(x, zᵢ)`` with the Gaussian kernel
    ``k(x, z) = exp(−‖x − z‖²/σ)`` (the *lite* σ: length-scale √(σ/2)).

    As in the Rust (``Packed``), the basis is centred on its mean c once,
    and the exponent is expanded,
    ``−‖x − zᵢ‖²/σ = −‖zᵢ − c‖²/σ − ‖x − c‖²/σ + (2/σ)(zᵢ − c)ᵀ(x − c)``
    (clipped at 0), so an evaluation is two matrix-vector products and n
    exponentials: with ``wᵢ = αᵢ exp(·)``,
    ``∇f(x) = (2/σ) Σᵢ wᵢ (zᵢ − x) = (2/σ) [Σᵢ wᵢ (zᵢ − c) − (x − c) Σᵢ wᵢ]``.
    """

    def __init__(self, basis: np.ndarray, alpha: np.ndarray, sigma: float):
        self.sigma = float(sigma)
        self.alpha = np.asarray(alpha, dtype=float)
        self.centre = basis.mean(axis=0)
        self.centred = basis - self.centre
        self.offsets = -np.einsum("ij,ij->i", self.centred, self.centred) / self.sigma

    def _weights(self, points):
        """``(x − c, w)`` for one point (d,) or each row of ``points`` (k × d)."""
        xc = np.asarray(points, dtype=float) - self.centre
        norms = np.einsum("...j,...j->...", xc, xc)[..., None]
        exponents = self.offsets + (xc @ self.centred.T) * (2.0 / self.sigma) - norms / self.sigma
        return xc, self.alpha * np.exp(np.minimum(exponents, 0.0))

    def log_density(self, points) -> np.ndarray:
        """``f(x)``."""
        return self._weights(points)[1].sum(axis=-1)

    def gradient(self, points) -> np.ndarray:
        """``∇f(x)``, shaped like ``points``."""
        xc, w = self._weights(points)
        return (2.0 / self.sigma) * (w @ self.centred - xc * w.sum(axis=-1)[..., None])


def lite_log_density(basis, alpha, sigma, points) -> np.ndarray:
    """``f(x) = Σᵢ αᵢ exp(−‖x − zᵢ‖²/σ)`` at one point or each row of
    ``points`` (see ``LiteSurrogate``)."""
    return LiteSurrogate(basis, alpha, sigma).log_density(points)


def lite_gradient(basis, alpha, sigma, points) -> np.ndarray:
    """``∇f(x) = (2/σ) Σᵢ αᵢ exp(−‖x − zᵢ‖²/σ) (zᵢ − x)`` at one point or
    each row of ``points`` (see ``LiteSurrogate``)."""
    return LiteSurrogate(basis, alpha, sigma).gradient(points)


def lite_system(points: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``K``, ``b`` and ``C`` of KMC Prop. 1 on the basis ``points`` (n × d):

    * ``K_ij = exp(−‖zᵢ − zⱼ‖²/σ)``;
    * ``b_i = Σ_k K_ik ((2/σ)‖z_k − z_i‖² − d)``;
    * ``C_ij = Σ_k K_ki K_kj ⟨z_k − z_i, z_k − z_j⟩
      = (BᵀK + KᵀB)_ij + G_ij (KᵀK)_ij`` with ``G = ZZᵀ``, ``s_k = ‖z_k‖²``
      and ``B_ki = K_ki (s_k/2 − G_ki)`` (two n × n products here, as
      ``KᵀB = (BᵀK)ᵀ``).

    Every term depends on differences of points only, so the points are
    centred first (less rounding in ``s`` and ``G``; the Rust does not).
    """
    z = points - points.mean(axis=0)
    n, d = z.shape
    squares = np.einsum("ij,ij->i", z, z)
    gram = z @ z.T
    r = np.maximum(squares[:, None] + squares[None, :] - 2.0 * gram, 0.0)
    kernel = np.exp(-r / sigma)
    b = np.sum(kernel * ((2.0 / sigma) * r - d), axis=0)
    half_b = kernel * (0.5 * squares[:, None] - gram)
    bk = half_b.T @ kernel
    c = bk + bk.T + gram * (kernel.T @ kernel)
    return kernel, b, c


def lite_fit(points: np.ndarray, sigma: float, lam: float, regulariser: str = "identity"):
    """The lite estimator's coefficients (KMC Prop. 1, ``LiteEstimator``):
    ``α = −(σ/2)(C + λR)⁻¹ b`` with ``R = I`` (the default) or ``K + I``
    (``regulariser="kernel+identity"``), solved by Cholesky; the basis is
    ``points`` itself. α minimises the empirical score-matching objective
    plus ``(2λ/(nσ²)) αᵀRα``."""
    kernel, b, c = lite_system(np.asarray(points, dtype=float), sigma)
    if regulariser == "identity":
        c[np.diag_indices_from(c)] += lam
    elif regulariser == "kernel+identity":
        c += lam * kernel
        c[np.diag_indices_from(c)] += lam
    else:
        raise ValueError(f"unknown regulariser {regulariser!r}")
    return -0.5 * sigma * cholesky_solve(cholesky(c), b)


# --------------------------------------------------------------------------
# KMC finite: f(x) = θᵀφ(x), φ_j(x) = √(2/m) cos(ω_jᵀx + b_j)
# --------------------------------------------------------------------------


def rff_embedding(frequencies, phases, points) -> np.ndarray:
    """Random Fourier features with the ``CosPhase`` embedding:
    ``φ_j(x) = √(2/m) cos(ω_jᵀx + b_j)``, j = 1…m, with ``frequencies``
    m × d (one ω_j per row, ``RandomFourierFeatures::frequencies()``) and
    ``phases`` b (m). One point (d,) → (m,), points (k × d) → (k × m)."""
    m = len(phases)
    return math.sqrt(2.0 / m) * np.cos(np.asarray(points) @ frequencies.T + phases)


def finite_log_density(frequencies, phases, theta, points) -> np.ndarray:
    """The finite surrogate ``f(x) = θᵀφ(x)``."""
    return rff_embedding(frequencies, phases, points) @ theta


def finite_gradient(frequencies, phases, theta, points) -> np.ndarray:
    """``∇f(x) = J(x)ᵀθ = −√(2/m) Σ_j θ_j sin(ω_jᵀx + b_j) ω_j`` (the Rust
    ``jacobian_transpose_mul``) at one point (d,) or each row of ``points``."""
    m = len(phases)
    arguments = np.asarray(points) @ frequencies.T + phases
    return -math.sqrt(2.0 / m) * (np.sin(arguments) * theta) @ frequencies


def finite_fit(frequencies, phases, points, lam: float) -> np.ndarray:
    """The finite estimator's batch fit (KMC Prop. 2, ``FiniteEstimator``
    with the default ``RidgeSchedule::GrowingWithCount``) on n points:
    ``θ = (S + nλI)⁻¹ s``, i.e. ``(C + λI)⁻¹ b`` with the means
    ``C = S/n``, ``b = s/n``, where

    * ``S = Σ_x Σ_l ∂_lφ(x) ∂_lφ(x)ᵀ = (Σ_x ψ'(x)ψ'(x)ᵀ) ∘ ΩΩᵀ``,
      ``ψ'_j(x) = −√(2/m) sin(ω_jᵀx + b_j)`` (as ``∂_lφ_j = ψ'_j ω_jl``);
    * ``s_j = −Σ_x Σ_l ∂²_lφ_j(x) = ‖ω_j‖² Σ_x √(2/m) cos(ω_jᵀx + b_j)``.
    """
    points = np.asarray(points, dtype=float)
    n, m = len(points), len(phases)
    scale = math.sqrt(2.0 / m)
    arguments = points @ frequencies.T + phases  # (n, m)
    slopes = -scale * np.sin(arguments)  # ψ'
    sums = (slopes.T @ slopes) * (frequencies @ frequencies.T)
    rhs = np.sum(frequencies**2, axis=1) * (scale * np.cos(arguments).sum(axis=0))
    sums[np.diag_indices_from(sums)] += n * lam
    return cholesky_solve(cholesky(sums), rhs)


# --------------------------------------------------------------------------
# KMC: leapfrog on a surrogate gradient, accept on the true target
# --------------------------------------------------------------------------


def leapfrog(x, p, grad_x, gradient, step_size, steps):
    """``steps`` leapfrog steps of size ε with unit mass from (x, p), with
    ``grad_x = ∇f(x)``: per step ``p += ½ε∇f(x)``, ``x += εp``,
    ``p += ½ε∇f(x)``. Returns the end point, momentum and gradient."""
    for _ in range(steps):
        p = p + 0.5 * step_size * grad_x
        x = x + step_size * p
        grad_x = gradient(x)
        p = p + 0.5 * step_size * grad_x
    return x, p, grad_x


class KmcStep:
    """One KMC iteration per call (``HamiltonianMove`` + the engine):
    momentum ``p ~ N(0, I)``, step size ``ε ~ U[lo, hi)``, ``steps`` leapfrog
    steps along the surrogate ``gradient`` (the gradient at the current
    state is cached, so a call costs ``steps`` gradients), the true target
    at the end point, and acceptance by
    ``log u < log π(x*) − log π(x) + ½‖p‖² − ½‖p*‖²`` (a non-finite
    trajectory gives a non-finite ratio and is rejected)."""

    def __init__(self, gradient, log_target, x, steps, step_size, rng):
        self.gradient, self.log_target, self.rng = gradient, log_target, rng
        self.steps = int(steps)
        self.step_size = (float(step_size[0]), float(step_size[1]))
        self.x = np.array(x, dtype=float)
        self.log_px = float(log_target(self.x))
        self.grad_x = gradient(self.x)
        self.accepted = 0

    def __call__(self) -> bool:
        lo, hi = self.step_size
        eps = self.rng.uniform(lo, hi) if lo < hi else lo
        p = self.rng.standard_normal(len(self.x))
        kinetic = 0.5 * (p @ p)
        y, q, grad_y = leapfrog(self.x, p, self.grad_x, self.gradient, eps, self.steps)
        log_py = float(self.log_target(y))
        correction = kinetic - 0.5 * (q @ q)  # K(p) − K(p*)
        accepted = metropolis_accept(log_py, self.log_px, correction, self.rng)
        if accepted:
            self.x, self.log_px, self.grad_x = y, log_py, grad_y
            self.accepted += 1
        return accepted


# --------------------------------------------------------------------------
# Glass: pseudo-marginal GP classification
# --------------------------------------------------------------------------


def glass_kernel_matrix(x: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """The ARD covariance of ``GpClassification``:
    ``K_ij = exp(−Σ_l e^{2θ_l} (x_il − x_jl)²)`` (signal variance 1; the
    crate's θ convention), from the scaled covariates ``e^{θ_l} x_il``."""
    scaled = x * np.exp(theta)
    return np.exp(-squareform(pdist(scaled, "sqeuclidean")))


def log_sigmoid_sum(y: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``log p(y | f) = Σᵢ log σ(yᵢfᵢ)``, ``log σ(z) = min(z, 0) − log(1 + e^{−|z|})``,
    summed over axis 0 (f may hold one draw per column)."""
    z = y * f if f.ndim == 1 else y[:, None] * f
    return np.sum(np.minimum(z, 0.0) - np.log1p(np.exp(-np.abs(z))), axis=0)


def sigmoid(f: np.ndarray) -> np.ndarray:
    """``σ(f) = 1/(1 + e^{−f})`` without overflow."""
    e = np.exp(-np.abs(f))
    return np.where(f >= 0.0, 1.0 / (1.0 + e), e / (1.0 + e))


@dataclass
class Laplace:
    """The Laplace approximation ``N(mode, covariance)`` of ``p(f | y, θ)``."""

    mode: np.ndarray
    covariance: np.ndarray
    log_marginal: float
    newton_steps: int
    converged: bool


def _factor_b(kernel, f):
    """``√W = √(π(1 − π))``, ``π = σ(f)``, and the lower Cholesky factor of
    ``B = I + W^½ K W^½``."""
    pi = sigmoid(f)
    sqrt_w = np.sqrt(pi * (1.0 - pi))
    b = sqrt_w[:, None] * kernel * sqrt_w[None, :]
    b[np.diag_indices_from(b)] += 1.0
    return pi, sqrt_w, cholesky(b)


def glass_newton(
    kernel: np.ndarray, y: np.ndarray, max_steps: int = 100, tolerance: float = 1e-10
) -> tuple[np.ndarray, float, int, bool]:
    """The mode of ``GpClassification``'s Laplace approximation and Ψ there,
    with the steps taken and whether they converged: Newton's
    method on ``Ψ(f) = log p(y | f) − ½ fᵀK⁻¹f`` in the stable form of
    Rasmussen & Williams Alg. 3.1, from ``f = a = 0``, with ``t = (y + 1)/2``:

    * ``Ψ = −½ aᵀf + log p(y | f)`` with ``f = K a``;
    * a step: ``b = W f + (t − π)``, ``a' = b − W^½ B⁻¹ W^½ K b``,
      ``f' = K a'``; halved toward (a, f) while Ψ decreases (at most 50
      times; no ascent at all ends the iteration as converged);
    * stop when a step raises Ψ by less than ``tolerance``, or after
      ``max_steps`` steps.
    """
    t = 0.5 * (y + 1.0)
    f = np.zeros(len(y))
    a = np.zeros(len(y))

    def objective(a, f):
        return -0.5 * (a @ f) + log_sigmoid_sum(y, f)

    def no_ascent(new, old):
        return math.isnan(new) or new < old

    psi = objective(a, f)
    converged, steps = False, 0
    while steps < max_steps:
        steps += 1
        pi, sqrt_w, chol_b = _factor_b(kernel, f)
        rhs = sqrt_w**2 * f + (t - pi)
        solve = cholesky_solve(chol_b, sqrt_w * (kernel @ rhs))
        a_new = rhs - sqrt_w * solve
        f_new = kernel @ a_new
        psi_new = objective(a_new, f_new)
        halvings = 0
        while no_ascent(psi_new, psi) and halvings < 50:
            a_new, f_new = 0.5 * (a + a_new), 0.5 * (f + f_new)
            psi_new = objective(a_new, f_new)
            halvings += 1
        if no_ascent(psi_new, psi):
            converged = True
            break
        change = psi_new - psi
        a, f, psi = a_new, f_new, psi_new
        if change < tolerance:
            converged = True
            break
    return f, float(psi), steps, converged


def glass_laplace(
    kernel: np.ndarray, y: np.ndarray, max_steps: int = 100, tolerance: float = 1e-10
) -> Laplace:
    """The Laplace approximation of ``GpClassification::laplace``: the mode
    f̂ of ``glass_newton``; there, ``Σ = K − VᵀV``, ``V = L⁻¹ W^½ K``
    (``LLᵀ = B``), and the log evidence (Alg. 3.2) ``Ψ(f̂) − Σᵢ log Lᵢᵢ``.
    """
    f, psi, steps, converged = glass_newton(kernel, y, max_steps, tolerance)
    _, sqrt_w, chol_b = _factor_b(kernel, f)
    v = solve_lower(chol_b, sqrt_w[:, None] * kernel)
    covariance = kernel - v.T @ v
    log_marginal = psi - half_log_det(chol_b)
    return Laplace(f, covariance, float(log_marginal), steps, converged)


def log_mean_exp(values: np.ndarray) -> float:
    """``log((1/m) Σ exp(vⱼ))``, shifted by the maximum."""
    if np.isnan(values).any():
        return math.nan
    top = np.max(values)
    if not np.isfinite(top):
        return float(top)
    return float(top + np.log(np.mean(np.exp(values - top))))


def glass_estimate(
    x, y, theta, n_importance, ridge, rng, max_newton_steps=100, newton_tolerance=1e-10
) -> float:
    """``log p̂(y | θ)`` (``GpClassification::try_log_likelihood_estimate``):
    importance sampling under the prior ``N(0, K + ρI)`` from
    ``q = N(f̂, Σ̃)``, ``Σ̃ = ((K + ρI)⁻¹ + W)⁻¹``, the Laplace approximation
    of ``p(f | y, θ)`` with W at the mode f̂:

    ``p̂ = (1/m) Σⱼ p(y | f⁽ʲ⁾) N(f⁽ʲ⁾; 0, K + ρI) / q(f⁽ʲ⁾)``. With
    ``L_K`` the factor of ``K + ρI`` and ``L_C`` that of
    ``C = I + L_Kᵀ W L_K``, ``Σ̃ = L_K C⁻¹ L_Kᵀ``, so
    ``f⁽ʲ⁾ = f̂ + L_K u⁽ʲ⁾``, ``u⁽ʲ⁾ = L_C⁻ᵀ z⁽ʲ⁾``, ``z⁽ʲ⁾ ~ N(0, I)``, and
    ``log wⱼ = log p(y | f⁽ʲ⁾) + ½‖z⁽ʲ⁾‖² − ½‖L_K⁻¹f̂ + u⁽ʲ⁾‖² − Σ log L_C,ii``,
    combined by log-mean-exp. One call: the kernel matrix, Newton to the
    mode, the two factors and all m draws at once.
    """
    kernel = glass_kernel_matrix(x, theta)
    mode = glass_newton(kernel, y, max_newton_steps, newton_tolerance)[0]
    pi = sigmoid(mode)
    sqrt_w = np.sqrt(pi * (1.0 - pi))
    chol_prior = cholesky(kernel + ridge * np.eye(len(y)))
    weighted = sqrt_w[:, None] * chol_prior
    c = weighted.T @ weighted
    c[np.diag_indices_from(c)] += 1.0
    chol_c = cholesky(c)
    z = rng.standard_normal((len(y), n_importance))
    u = lapack.dtrtrs(chol_c, z, lower=1, trans=1)[0]
    draws = mode[:, None] + chol_prior @ u
    whitened = solve_lower(chol_prior, mode)[:, None] + u
    log_weights = (
        log_sigmoid_sum(y, draws)
        + 0.5 * np.sum(z * z, axis=0)
        - 0.5 * np.sum(whitened * whitened, axis=0)
        - half_log_det(chol_c)
    )
    return log_mean_exp(log_weights)


# --------------------------------------------------------------------------
# Fixtures, checks and timing
# --------------------------------------------------------------------------


@dataclass
class Fixture:
    """A fixture directory: the manifest and lazily loaded arrays."""

    root: Path
    manifest: dict

    @classmethod
    def load(cls, root) -> "Fixture":
        root = Path(root)
        return cls(root, json.loads((root / "manifest.json").read_text()))

    def params(self, name: str) -> dict:
        return self.manifest["paths"][name]

    def has(self, name: str) -> bool:
        return name in self.manifest.get("paths", {})

    def array(self, name: str, key: str) -> np.ndarray:
        return np.load(self.root / name / f"{key}.npy")

    def banana(self) -> Callable[[np.ndarray], float]:
        b, v = float(self.manifest["banana"]["b"]), float(self.manifest["banana"]["v"])
        return functools.partial(banana_log_density, b=b, v=v)

    def frequencies(self, name: str) -> np.ndarray:
        """The m × d frequencies (accepting a flat row-major m·d vector)."""
        phases = self.array(name, "phases")
        return self.array(name, "frequencies").reshape(len(phases), -1)


def compare(actual, expected) -> dict:
    """Errors of ``actual`` against ``expected``: ``max_abs_err = max|a − e|``
    and ``max_rel_err = max|a − e| / max|e|`` (relative to the array's
    scale, so entries near 0 do not blow it up)."""
    actual = np.asarray(actual, dtype=float)
    expected = np.asarray(expected, dtype=float)
    if actual.shape != expected.shape:
        raise ValueError(f"shape {actual.shape} against the expected {expected.shape}")
    abs_err = float(np.max(np.abs(actual - expected))) if actual.size else 0.0
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    rel_err = abs_err / scale if scale > 0.0 else (0.0 if abs_err == 0.0 else math.inf)
    return {"max_abs_err": abs_err, "max_rel_err": rel_err}


def peer_outputs(fixture: Fixture, name: str) -> dict[str, np.ndarray] | None:
    """The peer's deterministic outputs of path ``name`` keyed like the
    fixture's expected arrays, or None if the path has none."""
    p = fixture.params(name)
    a = functools.partial(fixture.array, name)
    if name == "kamh_step":
        z, x, y = a("z"), a("x"), a("y")
        args = float(p["sigma"]), float(p["gamma"]), float(p["nu"])
        banana = fixture.banana()
        return {
            "log_correction": np.array(kamh_log_correction(z, x, y, *args)),
            "log_target": np.array([banana(x), banana(y)]),
        }
    if name == "kmc_lite_gradient":
        return {"gradients": lite_gradient(a("basis"), a("alpha"), float(p["sigma"]), a("points"))}
    if name == "kmc_finite_gradient":
        gradients = finite_gradient(
            fixture.frequencies(name), a("phases"), a("theta"), a("points")
        )
        return {"gradients": gradients}
    if name == "lite_fit":
        return {"alpha": lite_fit(a("points"), float(p["sigma"]), float(p["lambda"]))}
    if name == "finite_fit":
        theta = finite_fit(fixture.frequencies(name), a("phases"), a("points"), float(p["lambda"]))
        return {"theta": theta}
    if name == "glass_estimate":
        kernel = glass_kernel_matrix(a("x"), a("theta"))
        laplace = glass_laplace(
            kernel,
            a("y"),
            int(p.get("max_newton_steps", 100)),
            float(p.get("newton_tolerance", 1e-10)),
        )
        return {
            "mode": laplace.mode,
            "log_marginal_laplace": np.array(laplace.log_marginal),
        }
    return None


def check(fixture_dir) -> dict[str, dict]:
    """Computes every deterministic peer output of the fixture and compares
    it with the Rust one: ``{path: {"max_abs_err", "max_rel_err",
    "outputs": {array: {"max_abs_err", "max_rel_err"}}}}`` (the maxima over
    the path's arrays); paths with nothing to compare are left out."""
    fixture = Fixture.load(fixture_dir)
    results = {}
    for name in PATHS:
        if not fixture.has(name):
            continue
        outputs = peer_outputs(fixture, name)
        if outputs is None:
            continue
        errors = {key: compare(value, fixture.array(name, key)) for key, value in outputs.items()}
        results[name] = {
            "max_abs_err": max(e["max_abs_err"] for e in errors.values()),
            "max_rel_err": max(e["max_rel_err"] for e in errors.values()),
            "outputs": errors,
        }
    return results


def timed_call(fixture: Fixture, name: str, seed: int = 0) -> Callable[[], object]:
    """The callable one timed call of path ``name`` runs (state kept between
    calls: chains move on, the gradient paths cycle through the points)."""
    p = fixture.params(name)
    a = functools.partial(fixture.array, name)
    rng = np.random.default_rng(seed)
    banana = fixture.banana()
    if name == "kamh_step":
        return KamhStep(a("z"), a("x"), p["sigma"], p["gamma"], p["nu"], banana, rng)
    if name == "kamh_adapting_step":
        return KamhAdaptingStep(
            a("history"),
            a("x"),
            p["subsample_size"],
            p["max_points"],
            p["sigma"],
            p["gamma"],
            p["nu"],
            banana,
            rng,
        )
    if name in ("kmc_lite_gradient", "kmc_lite_step"):
        g = functools.partial(fixture.array, "kmc_lite_gradient")
        sigma = float(fixture.params("kmc_lite_gradient")["sigma"])
        gradient = LiteSurrogate(g("basis"), g("alpha"), sigma).gradient
        if name == "kmc_lite_gradient":
            return _cycling(gradient, g("points"))
        return KmcStep(
            gradient, banana, a("x"), p["steps"], (p["step_size_low"], p["step_size_high"]), rng
        )
    if name in ("kmc_finite_gradient", "kmc_finite_step"):
        g = functools.partial(fixture.array, "kmc_finite_gradient")
        frequencies = fixture.frequencies("kmc_finite_gradient")
        gradient = functools.partial(finite_gradient, frequencies, g("phases"), g("theta"))
        if name == "kmc_finite_gradient":
            return _cycling(gradient, g("points"))
        return KmcStep(
            gradient, banana, a("x"), p["steps"], (p["step_size_low"], p["step_size_high"]), rng
        )
    if name == "lite_fit":
        points, sigma, lam = a("points"), float(p["sigma"]), float(p["lambda"])
        return lambda: lite_fit(points, sigma, lam)
    if name == "finite_fit":
        frequencies, phases, points = fixture.frequencies(name), a("phases"), a("points")
        lam = float(p["lambda"])
        return lambda: finite_fit(frequencies, phases, points, lam)
    if name == "glass_estimate":
        x, y, theta = a("x"), a("y"), a("theta")
        n_importance, ridge = int(p["n_importance"]), float(p["ridge"])
        steps = int(p.get("max_newton_steps", 100))
        tolerance = float(p.get("newton_tolerance", 1e-10))
        return lambda: glass_estimate(x, y, theta, n_importance, ridge, rng, steps, tolerance)
    raise KeyError(f"unknown path {name!r}")


def _cycling(function, points):
    """A call evaluating ``function`` at the next row of ``points`` (one
    point per call, cycling)."""
    rows = list(points)
    state = {"i": 0}

    def call():
        i = state["i"]
        state["i"] = (i + 1) % len(rows)
        return function(rows[i])

    return call


@dataclass
class Timing:
    """The median and 10%/90% quantiles (numpy's default linear = R-7, as
    ``quantile_sorted``) of the seconds per call over the repetitions."""

    median_secs: float
    p10_secs: float
    p90_secs: float
    repetitions: int
    calls_per_repetition: int


def time_calls(
    call: Callable[[], object], warmup: int, repetitions: int, min_secs: float
) -> Timing:
    """The Rust bench-report timer: ``warmup`` calls (at least 1) give the
    time per call, from which the batch size ``ceil(min_secs / per_call)``
    (at least 1; 1000 if the warm-up took no measurable time) is set; each
    of ``repetitions`` samples times one batch and divides by its size."""
    warmup = max(warmup, 1)
    start = time.perf_counter()
    for _ in range(warmup):
        call()
    per_call = (time.perf_counter() - start) / warmup
    batch = max(math.ceil(min_secs / per_call), 1) if per_call > 0.0 else 1000
    samples = []
    for _ in range(max(repetitions, 1)):
        start = time.perf_counter()
        for _ in range(batch):
            call()
        samples.append((time.perf_counter() - start) / batch)
    p10, median, p90 = np.quantile(samples, [0.1, 0.5, 0.9])
    return Timing(float(median), float(p10), float(p90), len(samples), batch)


def _finite_or_none(value):
    return value if value is not None and math.isfinite(value) else None


def run(
    fixture_dir,
    repetitions: int = 31,
    warmup: int = 20,
    min_secs: float = 0.005,
    only=None,
    log=sys.stderr,
) -> dict:
    """Checks and times every path of the fixture (or those in ``only``);
    returns the report ``main`` writes."""
    fixture = Fixture.load(fixture_dir)
    names = [n for n in PATHS if fixture.has(n) and (only is None or n in only)]
    unknown = set(only or ()) - set(PATHS)
    if unknown:
        raise SystemExit(f"unknown path(s): {', '.join(sorted(unknown))}")
    paths = {}
    for name in names:
        outputs = peer_outputs(fixture, name)
        errors = (
            {key: compare(value, fixture.array(name, key)) for key, value in outputs.items()}
            if outputs is not None
            else None
        )
        if name in FIT_PATHS:
            w, r = 1, max(3, repetitions // 3)
        else:
            w, r = warmup, repetitions
        print(f"peers: {name} (warm-up {w}, {r} repetitions)", file=log, flush=True)
        timing = time_calls(timed_call(fixture, name), w, r, min_secs)
        entry = {
            "median_secs": timing.median_secs,
            "p10_secs": timing.p10_secs,
            "p90_secs": timing.p90_secs,
            "repetitions": timing.repetitions,
            "calls_per_repetition": timing.calls_per_repetition,
            "max_abs_err": None,
            "max_rel_err": None,
        }
        if errors:
            entry["max_abs_err"] = _finite_or_none(max(e["max_abs_err"] for e in errors.values()))
            entry["max_rel_err"] = _finite_or_none(max(e["max_rel_err"] for e in errors.values()))
            entry["errors"] = {
                key: {k: _finite_or_none(v) for k, v in e.items()} for key, e in errors.items()
            }
        paths[name] = entry
        err = (
            f", max abs err {entry['max_abs_err']:.2e}, max rel err {entry['max_rel_err']:.2e}"
            if errors
            else ""
        )
        print(
            f"peers: {name}: median {timing.median_secs * 1e6:.1f} µs "
            f"(p10 {timing.p10_secs * 1e6:.1f}, p90 {timing.p90_secs * 1e6:.1f}){err}",
            file=log,
            flush=True,
        )
    return {
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "python": platform.python_version(),
        "blas_threads": int(os.environ["OPENBLAS_NUM_THREADS"]),
        "fixtures": str(Path(fixture_dir).resolve()),
        "paths": paths,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Check and time the numpy peers of kameleon's hot paths on fixtures "
        "written by `xtask peer-fixtures`."
    )
    parser.add_argument("fixtures", type=Path, help="the fixture directory (with manifest.json)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON report to write")
    parser.add_argument("--repetitions", type=int, default=31, help="timed repetitions per path")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls per path")
    parser.add_argument(
        "--min-secs", type=float, default=0.005, help="shortest duration of one repetition"
    )
    parser.add_argument("--only", default=None, help="comma-separated paths to run")
    args = parser.parse_args(argv)
    only = None if args.only is None else [n.strip() for n in args.only.split(",") if n.strip()]
    report = run(args.fixtures, args.repetitions, args.warmup, args.min_secs, only)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    print(f"peers: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
