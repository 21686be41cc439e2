"""Tests of the numpy peers of the Rust hot paths (python/benchmarks/peers.py).

Two layers:

* **independent checks** that need no Rust: each peer against a second,
  deliberately naive formulation (explicit centring matrices, the printed
  KMC Prop. 1, per-point Jacobians, scipy densities, quadrature, central
  finite differences), and the CLI on fixtures written here in the Rust
  format with expected arrays from those naive formulations;
* **the Rust comparison**: ``xtask peer-fixtures --size tiny`` writes
  fixtures with the Rust outputs, and every deterministic peer output must
  match them within the tolerances derived at ``RUST_TOLERANCES``. The
  binary is ``$KAMELEON_XTASK``, else the first of ``target/debug/xtask``
  and ``target/release/xtask`` that knows ``peer-fixtures``; the tests skip
  if there is none. ``$KAMELEON_PEER_FIXTURES=DIR`` uses fixtures already
  written instead of running the binary.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.spatial.distance import cdist, pdist

ROOT = Path(__file__).resolve().parents[2]
PEERS_FILE = ROOT / "python" / "benchmarks" / "peers.py"
EPS = np.finfo(float).eps


def _load_peers():
    """Imports peers.py without leaking its one-BLAS-thread defaults into
    the environment of the rest of the test session."""
    saved = dict(os.environ)
    try:
        spec = importlib.util.spec_from_file_location("kameleon_peers", PEERS_FILE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return module


peers = _load_peers()


def banana_points(rng, count, d=8, b=0.03, v=100.0):
    """``count`` iid draws of the banana B(b, v) in dimension d."""
    x = rng.standard_normal((count, d))
    x[:, 0] *= math.sqrt(v)
    x[:, 1] += b * (x[:, 0] ** 2 - v)
    return x


def central_difference(f, x, h):
    """The central-difference gradient of the scalar function f at x."""
    grad = np.empty_like(x)
    for l in range(len(x)):
        e = np.zeros_like(x)
        e[l] = h
        grad[l] = (f(x + e) - f(x - e)) / (2 * h)
    return grad


# --------------------------------------------------------------------------
# Naive reference formulations
# --------------------------------------------------------------------------


def ref_banana(x, b, v):
    """The banana as a product of Gaussians in the untwisted coordinates
    (the twist has unit Jacobian)."""
    r = x[1] - b * (x[0] ** 2 - v)
    return (
        stats.norm.logpdf(x[0], scale=math.sqrt(v))
        + stats.norm.logpdf(r)
        + stats.norm.logpdf(x[2:]).sum()
    )


def gaussian_kernel(x, z, sigma):
    """``Gaussian::new(σ)``: ``exp(−‖x − z‖²/(2σ²))``."""
    return math.exp(-np.sum((x - z) ** 2) / (2 * sigma**2))


def ref_kamh_covariance(z, y, sigma, gamma, nu):
    """``γ²I + ν² M H Mᵀ`` with M's columns ``2∇ₓk(y, zᵢ)`` point by point
    and the explicit n × n centring matrix H."""
    n, d = z.shape
    m = np.empty((d, n))
    for i in range(n):
        m[:, i] = 2 * (-(y - z[i]) / sigma**2) * gaussian_kernel(y, z[i], sigma)
    h = np.eye(n) - np.full((n, n), 1.0 / n)
    return gamma**2 * np.eye(d) + nu**2 * m @ h @ m.T


def ref_kamh_log_correction(z, x, y, sigma, gamma, nu):
    reverse = stats.multivariate_normal.logpdf(
        x, mean=y, cov=ref_kamh_covariance(z, y, sigma, gamma, nu)
    )
    forward = stats.multivariate_normal.logpdf(
        y, mean=x, cov=ref_kamh_covariance(z, x, sigma, gamma, nu)
    )
    return reverse - forward


def ref_lite_f(basis, alpha, sigma, x):
    return sum(a * math.exp(-np.sum((x - z) ** 2) / sigma) for z, a in zip(basis, alpha))


def ref_lite_gradient(basis, alpha, sigma, x):
    return sum(
        a * math.exp(-np.sum((x - z) ** 2) / sigma) * (2 / sigma) * (z - x)
        for z, a in zip(basis, alpha)
    )


def ref_lite_alpha(points, sigma, lam):
    """KMC Prop. 1 as printed: ``C = Σ_l (D_l K − K D_l)(K D_l − D_l K)``,
    ``b = Σ_l ((2/σ)(K s_l + D_{s_l} K1 − 2 D_l K x_l) − K1)``,
    ``α = −(σ/2)(C + λI)⁻¹ b``, O(d n³)."""
    n, d = points.shape
    k = np.exp(-cdist(points, points, "sqeuclidean") / sigma)
    one = np.ones(n)
    c, b = np.zeros((n, n)), np.zeros(n)
    for l in range(d):
        xl = points[:, l]
        dl, sl = np.diag(xl), xl * xl
        c += (dl @ k - k @ dl) @ (k @ dl - dl @ k)
        b += (2 / sigma) * (k @ sl + np.diag(sl) @ k @ one - 2 * dl @ k @ xl) - k @ one
    return -0.5 * sigma * np.linalg.solve(c + lam * np.eye(n), b)


def lite_objective(points, sigma, lam, alpha):
    """The regularised empirical score-matching objective of the lite
    model from first principles: ``(1/n) Σ_j [Δf(z_j) + ½‖∇f(z_j)‖²] +
    (2λ/(nσ²))‖α‖²``, with ``Σ_l ∂²_l k = ((4/σ²)r − 2d/σ) k``, r the squared
    distance."""
    n, d = points.shape
    total = 0.0
    for zj in points:
        r = np.sum((points - zj) ** 2, axis=1)
        k = np.exp(-r / sigma)
        laplacian = np.sum(alpha * k * (4 * r / sigma**2 - 2 * d / sigma))
        grad = (2 / sigma) * ((alpha * k) @ (points - zj))
        total += laplacian + 0.5 * grad @ grad
    return total / n + 2 * lam / (n * sigma**2) * alpha @ alpha


def ref_rff_jacobian(frequencies, phases, x):
    """``∂_lφ_j(x) = −√(2/m) sin(ω_jᵀx + b_j) ω_jl`` (m × d)."""
    m = len(phases)
    return -math.sqrt(2 / m) * np.sin(frequencies @ x + phases)[:, None] * frequencies


def ref_rff_second(frequencies, phases, x):
    """``∂²_lφ_j(x) = −√(2/m) cos(ω_jᵀx + b_j) ω_jl²`` (m × d)."""
    m = len(phases)
    return -math.sqrt(2 / m) * np.cos(frequencies @ x + phases)[:, None] * frequencies**2


def ref_finite_theta(frequencies, phases, points, lam):
    """``θ = (Σ_x J Jᵀ + nλI)⁻¹ (−Σ_x Σ_l ∂²_lφ)`` with explicit per-point
    Jacobians (the Rust's generic path)."""
    m = len(phases)
    s, rhs = np.zeros((m, m)), np.zeros(m)
    for x in points:
        j = ref_rff_jacobian(frequencies, phases, x)
        s += j @ j.T
        rhs -= ref_rff_second(frequencies, phases, x).sum(axis=1)
    return np.linalg.solve(s + len(points) * lam * np.eye(m), rhs)


def ref_glass_kernel(x, theta):
    return np.exp(-cdist(x * np.exp(theta), x * np.exp(theta), "sqeuclidean"))


def ref_sigmoid(f):
    return 1 / (1 + np.exp(-f))


def ref_laplace(kernel, y, iterations=60):
    """Plain Newton on Ψ(f) = log p(y|f) − ½fᵀK⁻¹f to machine precision:
    ``f ← (K⁻¹ + W)⁻¹(W f + t − π) = K (I + W K)⁻¹ (W f + t − π)``; the
    covariance ``K(I + WK)⁻¹`` and the evidence
    ``log p(y|f̂) − ½ f̂ᵀK⁻¹f̂ − ½ log det(I + KW)`` (with ``K⁻¹f̂ = t − π``)."""
    n = len(y)
    t = (y + 1) / 2
    f = np.zeros(n)
    for _ in range(iterations):
        pi = ref_sigmoid(f)
        w = pi * (1 - pi)
        f = kernel @ np.linalg.solve(np.eye(n) + w[:, None] * kernel, w * f + t - pi)
    pi = ref_sigmoid(f)
    w = pi * (1 - pi)
    covariance = kernel @ np.linalg.inv(np.eye(n) + w[:, None] * kernel)
    log_lik = np.sum(np.log(ref_sigmoid(y * f)))
    log_marginal = (
        log_lik - 0.5 * f @ (t - pi) - 0.5 * np.linalg.slogdet(np.eye(n) + kernel * w)[1]
    )
    return f, covariance, log_marginal


# --------------------------------------------------------------------------
# Independent checks
# --------------------------------------------------------------------------


def test_banana_is_the_product_of_its_untwisted_gaussians():
    rng = np.random.default_rng(0)
    x = banana_points(rng, 5)
    got = peers.banana_log_density(x, 0.03, 100.0)
    want = [ref_banana(p, 0.03, 100.0) for p in x]
    np.testing.assert_allclose(got, want, rtol=1e-13)
    assert peers.banana_log_density(x[0], 0.03, 100.0) == pytest.approx(want[0], rel=1e-13)


def test_metropolis_decision_rejects_non_finite_moves_and_draws_one_uniform():
    for log_py, correction in [(math.nan, 0.0), (-math.inf, 0.0), (0.0, math.inf), (0.0, math.nan)]:
        rng = np.random.default_rng(0)
        assert not peers.metropolis_accept(log_py, -1.0, correction, rng)
        assert rng.random() == np.random.default_rng(0).random(2)[1]
    u = np.random.default_rng(0).random()
    log_u = math.log(u)
    assert peers.metropolis_accept(log_u + 1e-9, 0.0, 0.0, np.random.default_rng(0))
    assert not peers.metropolis_accept(log_u - 1e-9, 0.0, 0.0, np.random.default_rng(0))


def test_kamh_gradient_rows_are_twice_the_kernel_gradient():
    rng = np.random.default_rng(1)
    z, y, sigma = rng.standard_normal((6, 3)), rng.standard_normal(3), 1.3
    rows = peers.kamh_gradient_rows(z, y, sigma)
    for zi, row in zip(z, rows):
        fd = central_difference(lambda u: gaussian_kernel(u, zi, sigma), y, 1e-6)
        np.testing.assert_allclose(row, 2 * fd, rtol=1e-7, atol=1e-10)


def test_kamh_covariance_matches_the_explicit_centring_matrix():
    rng = np.random.default_rng(2)
    z = banana_points(rng, 30)
    y = banana_points(rng, 1)[0]
    got = peers.kamh_covariance(z, y, 10.0, 0.2, 2.0)
    want = ref_kamh_covariance(z, y, 10.0, 0.2, 2.0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14 * np.abs(want).max())


def test_kamh_log_correction_matches_scipy_densities():
    rng = np.random.default_rng(3)
    z = banana_points(rng, 25)
    for sigma, gamma, nu in [(10.0, 0.2, 2.0), (3.0, 0.5, 0.7)]:
        x = banana_points(rng, 1)[0]
        y = x + rng.standard_normal(8)
        got = peers.kamh_log_correction(z, x, y, sigma, gamma, nu)
        want = ref_kamh_log_correction(z, x, y, sigma, gamma, nu)
        assert got == pytest.approx(want, rel=1e-10, abs=1e-10)
    # symmetric when x = y
    assert peers.kamh_log_correction(z, x, x, 10.0, 0.2, 2.0) == 0.0


def test_kamh_step_caches_the_factor_of_the_current_state():
    rng = np.random.default_rng(4)
    z = banana_points(rng, 30)
    banana = lambda x: peers.banana_log_density(x, 0.03, 100.0)  # noqa: E731
    step = peers.KamhStep(z, z[0], 10.0, 0.2, 2.0, banana, np.random.default_rng(0))
    for _ in range(50):
        step()
    assert 0 < step.accepted < 50
    fresh = peers.kamh_factor(z, step.x, 10.0, 0.2, 2.0)
    np.testing.assert_allclose(step.factor_x.lower, fresh.lower, rtol=1e-12)
    assert step.log_px == pytest.approx(banana(step.x), rel=1e-14)


@pytest.mark.parametrize("n", [7, 8])  # 21 (odd) and 28 (even) pairs
def test_median_heuristic_is_the_median_pairwise_distance(n):
    rng = np.random.default_rng(n)
    points = rng.standard_normal((n, 3))
    got = peers.median_heuristic(points, max_points=n, rng=rng)
    assert got == pytest.approx(np.median(pdist(points)), rel=1e-14)
    # with more points than max_points: the median over the rows drawn
    a, b = np.random.default_rng(9), np.random.default_rng(9)
    got = peers.median_heuristic(points, max_points=5, rng=a)
    rows = b.choice(n, size=5, replace=False)
    assert got == pytest.approx(np.median(pdist(points[rows])), rel=1e-14)


def test_kamh_adapting_step_redraws_distinct_rows_and_the_bandwidth():
    rng = np.random.default_rng(5)
    history = banana_points(rng, 200)
    banana = lambda x: peers.banana_log_density(x, 0.03, 100.0)  # noqa: E731
    step = peers.KamhAdaptingStep(
        history, history[-1], 40, 15, 1.0, 0.2, 2.0, banana, np.random.default_rng(1)
    )
    step()
    z = step.step.z
    assert z.shape == (40, 8)
    assert len(np.unique(z, axis=0)) == 40  # without replacement
    assert all((history == row).all(axis=1).any() for row in z)
    assert step.step.sigma != 1.0 and 5.0 < step.step.sigma < 100.0


def test_lite_gradient_matches_the_direct_sum_and_finite_differences():
    rng = np.random.default_rng(6)
    basis = banana_points(rng, 30)
    alpha = rng.standard_normal(30)
    points = banana_points(rng, 4)
    sigma = 200.0
    got = peers.lite_gradient(basis, alpha, sigma, points)
    want = np.array([ref_lite_gradient(basis, alpha, sigma, x) for x in points])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())
    np.testing.assert_allclose(
        peers.lite_gradient(basis, alpha, sigma, points[0]), want[0], rtol=1e-12
    )
    for x in points:
        assert peers.lite_log_density(basis, alpha, sigma, x) == pytest.approx(
            ref_lite_f(basis, alpha, sigma, x), rel=1e-12
        )
        fd = central_difference(lambda u: ref_lite_f(basis, alpha, sigma, u), x, 1e-4)
        np.testing.assert_allclose(
            peers.lite_gradient(basis, alpha, sigma, x), fd, atol=1e-6 * np.abs(fd).max()
        )


def test_lite_fit_matches_the_printed_prop1_and_minimises_the_objective():
    rng = np.random.default_rng(7)
    points = rng.uniform(-2, 2, (25, 4))
    sigma, lam = 8.0, 1e-3
    alpha = peers.lite_fit(points, sigma, lam)
    want = ref_lite_alpha(points, sigma, lam)
    np.testing.assert_allclose(alpha, want, rtol=0, atol=1e-8 * np.abs(want).max())
    # the objective is quadratic in α, so central differences of it are
    # exact up to rounding: its directional derivatives vanish at α̂
    h = 1e-3 * np.abs(alpha).max()
    for _ in range(3):
        e = rng.standard_normal(len(alpha))
        plus = lite_objective(points, sigma, lam, alpha + h * e)
        minus = lite_objective(points, sigma, lam, alpha - h * e)
        curvature = plus + minus - 2 * lite_objective(points, sigma, lam, alpha)
        assert abs(plus - minus) <= 1e-6 * abs(curvature)
        assert curvature > 0


def test_lite_fit_kernel_plus_identity_regulariser():
    rng = np.random.default_rng(8)
    points = rng.uniform(-2, 2, (20, 3))
    sigma, lam = 4.0, 0.1
    kernel, b, c = peers.lite_system(points, sigma)
    alpha = peers.lite_fit(points, sigma, lam, regulariser="kernel+identity")
    residual = (c + lam * (kernel + np.eye(20))) @ alpha + 0.5 * sigma * b
    assert np.abs(residual).max() <= 1e-10 * np.abs(0.5 * sigma * b).max()


def test_finite_gradient_matches_jacobians_and_finite_differences():
    rng = np.random.default_rng(9)
    m, d = 30, 8
    frequencies, phases = rng.standard_normal((m, d)) / 5, rng.uniform(0, 2 * np.pi, m)
    theta = rng.standard_normal(m)
    points = banana_points(rng, 4)
    got = peers.finite_gradient(frequencies, phases, theta, points)
    for x, g in zip(points, got):
        np.testing.assert_allclose(
            g, ref_rff_jacobian(frequencies, phases, x).T @ theta, rtol=1e-12, atol=1e-14
        )
        f = lambda u: peers.finite_log_density(frequencies, phases, theta, u)  # noqa: E731
        np.testing.assert_allclose(g, central_difference(f, x, 1e-5), rtol=0, atol=1e-7)
        # the Jacobian itself against differences of the embedding
        emb = lambda u: peers.rff_embedding(frequencies, phases, u)  # noqa: E731
        fd = np.stack(
            [(emb(x + h) - emb(x - h)) / 2e-5 for h in 1e-5 * np.eye(d)], axis=1
        )
        np.testing.assert_allclose(ref_rff_jacobian(frequencies, phases, x), fd, atol=1e-8)


def test_finite_fit_matches_explicit_jacobian_sums():
    rng = np.random.default_rng(10)
    m, n, d = 20, 30, 8
    frequencies, phases = rng.standard_normal((m, d)) / 2, rng.uniform(0, 2 * np.pi, m)
    points = rng.uniform(-2, 2, (n, d))
    got = peers.finite_fit(frequencies, phases, points, 1e-3)
    want = ref_finite_theta(frequencies, phases, points, 1e-3)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * np.abs(want).max())


def test_leapfrog_is_reversible_and_nearly_conserves_energy():
    rng = np.random.default_rng(11)
    precision = np.diag([1.0, 4.0, 0.25])
    gradient = lambda x: -precision @ x  # noqa: E731
    energy = lambda x, p: 0.5 * x @ precision @ x + 0.5 * p @ p  # noqa: E731
    x, p = rng.standard_normal(3), rng.standard_normal(3)
    # second order: halving ε (same trajectory length) quarters the energy error
    errors = []
    for eps, steps in [(0.02, 25), (0.01, 50)]:
        y, q, _ = peers.leapfrog(x, p, gradient(x), gradient, eps, steps)
        errors.append(abs(energy(y, q) - energy(x, p)))
    assert errors[1] < 1e-3 and 3.5 < errors[0] / errors[1] < 4.5
    back, p_back, _ = peers.leapfrog(y, -q, gradient(y), gradient, 0.01, 50)
    np.testing.assert_allclose(back, x, atol=1e-12)
    np.testing.assert_allclose(-p_back, p, atol=1e-12)


def test_kmc_step_with_the_exact_gradient_and_small_steps_accepts_almost_always():
    b, v = 0.03, 100.0
    banana = lambda x: peers.banana_log_density(x, b, v)  # noqa: E731

    def gradient(x):
        r = x[1] - b * (x[0] ** 2 - v)
        g = -x.copy()
        g[0] = -x[0] / v + 2 * b * x[0] * r
        g[1] = -r
        return g

    x0 = banana_points(np.random.default_rng(12), 1)[0]
    np.testing.assert_allclose(gradient(x0), central_difference(banana, x0, 1e-5), atol=1e-6)
    step = peers.KmcStep(gradient, banana, x0, 10, (0.01, 0.02), np.random.default_rng(0))
    for _ in range(100):
        step()
    assert step.accepted >= 95
    np.testing.assert_allclose(step.grad_x, gradient(step.x))


def test_glass_laplace_matches_plain_newton_and_is_stationary():
    rng = np.random.default_rng(13)
    x = rng.standard_normal((25, 3))
    y = np.where(x[:, 0] + 0.5 * rng.standard_normal(25) > 0, 1.0, -1.0)
    theta = np.array([-0.5, -1.0, 0.0])
    kernel = peers.glass_kernel_matrix(x, theta)
    np.testing.assert_allclose(kernel, ref_glass_kernel(x, theta), rtol=1e-13)
    laplace = peers.glass_laplace(kernel, y)
    assert laplace.converged and laplace.newton_steps < 20
    mode, covariance, log_marginal = ref_laplace(kernel, y)
    t = (y + 1) / 2
    # stationarity of Ψ: ∇Ψ = t − π − K⁻¹f = 0, i.e. f̂ = K(t − π(f̂))
    residual = laplace.mode - kernel @ (t - ref_sigmoid(laplace.mode))
    assert np.abs(residual).max() < 1e-6
    np.testing.assert_allclose(laplace.mode, mode, atol=1e-6)
    np.testing.assert_allclose(laplace.covariance, covariance, atol=1e-9)
    assert laplace.log_marginal == pytest.approx(log_marginal, abs=1e-9)


def hermite_evidence(kernel, y, ridge, nodes=40):
    """``p(y | θ) = E[Π σ(yᵢfᵢ)]``, ``f ~ N(0, K + ρI)``, by tensor
    Gauss–Hermite quadrature (N ≤ 3)."""
    n = len(y)
    chol = np.linalg.cholesky(kernel + ridge * np.eye(n))
    u, w = np.polynomial.hermite_e.hermegauss(nodes)
    grids = np.meshgrid(*[u] * n, indexing="ij")
    weights = np.prod(np.meshgrid(*[w] * n, indexing="ij"), axis=0) / (2 * np.pi) ** (n / 2)
    f = chol @ np.stack([g.ravel() for g in grids])
    return np.log(np.sum(weights.ravel() * np.prod(ref_sigmoid(y[:, None] * f), axis=0)))


@pytest.mark.parametrize("n", [1, 3])
def test_glass_estimate_matches_the_quadrature_evidence(n):
    rng = np.random.default_rng(14 + n)
    x = rng.standard_normal((n, 2))
    y = np.array([1.0, -1.0, 1.0][:n])
    theta, ridge = np.array([-0.3, 0.2]), 1e-3
    kernel = peers.glass_kernel_matrix(x, theta)
    want = hermite_evidence(kernel, y, ridge)
    if n == 1:
        s = math.sqrt(1 + ridge)
        quad = integrate.quad(lambda f: ref_sigmoid(f) * stats.norm.pdf(f, scale=s), -40, 40)[0]
        assert want == pytest.approx(math.log(quad), abs=1e-10)
    got = peers.glass_estimate(x, y, theta, 20000, ridge, np.random.default_rng(0))
    # the importance weights vary little (the posterior is nearly Gaussian):
    # 20000 draws put the estimate within a few 1e-3 of the evidence
    assert got == pytest.approx(want, abs=0.01)


def test_timer_batches_and_quantiles():
    calls = []
    timing = peers.time_calls(lambda: calls.append(1), warmup=3, repetitions=5, min_secs=1e-3)
    assert timing.repetitions == 5
    assert len(calls) == 3 + 5 * timing.calls_per_repetition
    assert timing.calls_per_repetition > 1
    assert 0 < timing.p10_secs <= timing.median_secs <= timing.p90_secs
    assert peers.time_calls(lambda: None, 1, 2, 0.0).calls_per_repetition == 1


# --------------------------------------------------------------------------
# Fixtures in the Rust format, expected arrays from the naive formulations
# --------------------------------------------------------------------------


def write_fixtures(root: Path, seed: int = 0) -> None:
    """A small fixture directory in the layout of ``xtask peer-fixtures``,
    with every expected array computed by the reference formulations above."""
    rng = np.random.default_rng(seed)
    b, v, d = 0.03, 100.0, 8
    paths = {}

    def save(name, params, **arrays):
        paths[name] = params
        (root / name).mkdir(parents=True, exist_ok=True)
        for key, value in arrays.items():
            np.save(root / name / f"{key}.npy", np.asarray(value, dtype=float))

    z, (x, y) = banana_points(rng, 30), banana_points(rng, 2)
    save(
        "kamh_step",
        {"sigma": 10.0, "gamma": 0.2, "nu": 2.0},
        z=z,
        x=x,
        y=y,
        log_correction=ref_kamh_log_correction(z, x, y, 10.0, 0.2, 2.0),
        log_target=[ref_banana(x, b, v), ref_banana(y, b, v)],
    )
    save(
        "kamh_adapting_step",
        {"sigma": 10.0, "gamma": 0.2, "nu": 2.0, "max_points": 20, "subsample_size": 30},
        history=banana_points(rng, 100),
        x=x,
    )
    basis, points = banana_points(rng, 30), banana_points(rng, 4)
    alpha = rng.standard_normal(30)
    grads = [ref_lite_gradient(basis, alpha, 200.0, p) for p in points]
    save("kmc_lite_gradient", {"sigma": 200.0}, basis=basis, alpha=alpha, points=points,
         gradients=grads)  # fmt: skip
    save("kmc_lite_step", {"steps": 5, "step_size_low": 0.3, "step_size_high": 0.6}, x=x)
    m = 20
    frequencies, phases = rng.standard_normal((m, d)) / 5, rng.uniform(0, 2 * np.pi, m)
    theta = rng.standard_normal(m)
    grads = [ref_rff_jacobian(frequencies, phases, p).T @ theta for p in points]
    save("kmc_finite_gradient", {}, frequencies=frequencies, phases=phases, theta=theta,
         points=points, gradients=grads)  # fmt: skip
    save("kmc_finite_step", {"steps": 5, "step_size_low": 0.3, "step_size_high": 0.6}, x=x)
    uniform = rng.uniform(-2, 2, (20, d))
    save("lite_fit", {"sigma": 8.0, "lambda": 1e-3}, points=uniform,
         alpha=ref_lite_alpha(uniform, 8.0, 1e-3))  # fmt: skip
    save("finite_fit", {"lambda": 1e-3}, frequencies=frequencies, phases=phases, points=uniform,
         theta=ref_finite_theta(frequencies, phases, uniform, 1e-3))  # fmt: skip
    gx = rng.standard_normal((20, 3))
    gy = np.where(gx[:, 0] + 0.5 * rng.standard_normal(20) > 0, 1.0, -1.0)
    gtheta = np.array([-0.5, -1.0, 0.0])
    mode, _, log_marginal = ref_laplace(ref_glass_kernel(gx, gtheta), gy)
    save("glass_estimate", {"n_importance": 5, "ridge": 1e-3}, x=gx, y=gy, theta=gtheta,
         mode=mode, log_marginal_laplace=log_marginal)  # fmt: skip
    manifest = {"dim": d, "banana": {"b": b, "v": v}, "paths": paths}
    (root / "manifest.json").write_text(json.dumps(manifest))


# The tolerances against the naive formulations of write_fixtures (relative
# to each array's largest entry, as peers.compare): the same mathematics
# summed in other orders; the fits go through a solve with C + λI, whose
# condition number (≲ 1e4 here) multiplies the rounding of C and b.
SYNTHETIC_TOLERANCES = {
    "kamh_step": 1e-10,
    "kmc_lite_gradient": 1e-12,
    "kmc_finite_gradient": 1e-12,
    "lite_fit": 1e-8,
    "finite_fit": 1e-9,
    "glass_estimate": 1e-7,
}


def run_cli(fixtures: Path, out: Path) -> dict:
    result = subprocess.run(
        [sys.executable, str(PEERS_FILE), str(fixtures), "--out", str(out),
         "--repetitions", "2", "--warmup", "1", "--min-secs", "0"],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text())


def assert_report_is_complete(report: dict, fixtures: Path) -> None:
    manifest = json.loads((fixtures / "manifest.json").read_text())
    assert set(report["paths"]) == set(manifest["paths"]) == set(peers.PATHS)
    assert report["blas_threads"] == 1
    assert report["numpy"] == np.__version__
    for name, entry in report["paths"].items():
        for key in ("median_secs", "p10_secs", "p90_secs"):
            assert math.isfinite(entry[key]) and entry[key] > 0, (name, key, entry[key])
        assert entry["p10_secs"] <= entry["median_secs"] <= entry["p90_secs"]
        fits = name in peers.FIT_PATHS
        assert entry["repetitions"] == (3 if fits else 2)
        assert entry["calls_per_repetition"] == 1
        compared = entry["max_abs_err"] is not None
        assert compared == (name not in ("kamh_adapting_step", "kmc_lite_step", "kmc_finite_step"))


def test_check_and_cli_on_fixtures_written_here(tmp_path):
    fixtures = tmp_path / "fixtures"
    write_fixtures(fixtures)
    results = peers.check(fixtures)
    assert set(results) == set(SYNTHETIC_TOLERANCES)
    for name, tolerance in SYNTHETIC_TOLERANCES.items():
        assert results[name]["max_rel_err"] <= tolerance, (name, results[name])
    report = run_cli(fixtures, tmp_path / "peers.json")
    assert_report_is_complete(report, fixtures)
    for name, tolerance in SYNTHETIC_TOLERANCES.items():
        assert report["paths"][name]["max_rel_err"] <= tolerance


def test_cli_only_runs_the_named_paths(tmp_path):
    fixtures = tmp_path / "fixtures"
    write_fixtures(fixtures)
    out = tmp_path / "only.json"
    subprocess.run(
        [sys.executable, str(PEERS_FILE), str(fixtures), "--out", str(out),
         "--only", "kamh_step,lite_fit", "--repetitions", "1", "--min-secs", "0"],  # fmt: skip
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert set(json.loads(out.read_text())["paths"]) == {"kamh_step", "lite_fit"}


# --------------------------------------------------------------------------
# Against the Rust outputs
# --------------------------------------------------------------------------


def find_xtask() -> Path | None:
    """``$KAMELEON_XTASK``, else the first of target/debug/xtask and
    target/release/xtask that knows ``peer-fixtures`` (skips with the reason
    if none does)."""
    explicit = os.environ.get("KAMELEON_XTASK")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            pytest.fail(f"KAMELEON_XTASK={explicit} is not a file")
        return path
    candidates = [ROOT / "target" / kind / "xtask" for kind in ("debug", "release")]
    existing = [c for c in candidates if c.is_file()]
    if not existing:
        pytest.skip("no xtask binary in target/debug or target/release (cargo build -p xtask)")
    for path in existing:
        help_text = subprocess.run(
            [str(path), "--help"], capture_output=True, text=True, timeout=60
        ).stdout
        if "peer-fixtures" in help_text:
            return path
    pytest.skip(
        "the xtask binaries in target/ predate `peer-fixtures` "
        "(rebuild, or set KAMELEON_XTASK / KAMELEON_PEER_FIXTURES)"
    )


@pytest.fixture(scope="module")
def rust_fixtures(tmp_path_factory) -> Path:
    given = os.environ.get("KAMELEON_PEER_FIXTURES")
    if given:
        return Path(given)
    xtask = find_xtask()
    out = tmp_path_factory.mktemp("peer-fixtures")
    result = subprocess.run(
        [str(xtask), "peer-fixtures", "--size", "tiny", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return out


# Tolerances against the Rust outputs, as the largest error relative to the
# array's largest entry (peers.compare's max_rel_err). Both sides evaluate
# the same formulas in double precision; they differ by summation order, by
# Rust's vectorised exp/sin/cos polynomials (within 2 ulp of libm) and by
# the LAPACK against faer factorisations. Unit roundoff u = 1.1e-16.
#
# * log_target: the same handful of operations: a few ulp, 1e-13.
# * log_correction: log q(x|y) − log q(y|x) with d = 8 Cholesky solves of
#   γ²I + ν²MHMᵀ: the Mahalanobis terms carry ≲ d·u·cond(C) relative error
#   with cond(C) ≤ 1 + ν²λ_max/γ² (≲ 1e4 at the fixtures' γ = 0.2, ν = 2),
#   i.e. ≲ 1e-11 of their size; the correction itself is a difference of
#   terms of size ~10, so 1e-10 relative to |log q| (checked separately).
# * gradients: a sum over n basis points / m features of terms whose
#   rounding is a few ulp each (the exponent or sine argument also has a
#   relative error of a few ulp of its own size, ≲ 10 here): ≲ n·u·Σ|terms|
#   in the worst case, far less in practice; 1e-10 relative to the largest
#   gradient entry leaves a margin of 100 over the worst case at n = 40.
# * lite α and finite θ: solutions of (C + λI)α = rhs with C assembled in a
#   different order; the forward error is ≲ cond(C + λI)·(rounding of C,
#   ~n·u): checked against the condition number in test_fits_match_rust.
# * glass mode: Newton stops once a step raises Ψ by < 1e-10. Both sides
#   follow the same iterates up to rounding and take the same number of
#   steps, and Newton's map has zero derivative at the mode, so the modes
#   differ by the rounding of the last step's solve with B = I + W^½KW^½
#   (cond(B) ≤ 1 + N/4, ≈ 55 for Glass): ~cond(B)·N·u ≈ 1e-12 relative;
#   1e-8 leaves a wide margin. (Were the step counts to differ, the gap
#   would be one step of Ψ-change < 1e-10, |Δf| ≲ √(2e-10·λ_max(K)) ≈ 1e-4:
#   the tolerance would flag it.) The log evidence Ψ(f̂) − Σ log Lᵢᵢ is a
#   sum of N terms of size ≲ 1: 1e-10 relative.
RUST_TOLERANCES = {
    ("kamh_step", "log_target"): 1e-13,
    ("kamh_step", "log_correction"): None,  # scaled by |log q|, below
    ("kmc_lite_gradient", "gradients"): 1e-10,
    ("kmc_finite_gradient", "gradients"): 1e-10,
    ("glass_estimate", "mode"): 1e-8,
    ("glass_estimate", "log_marginal_laplace"): 1e-10,
}


def test_gradients_and_kamh_match_rust(rust_fixtures):
    results = peers.check(rust_fixtures)
    assert set(results) == {
        "kamh_step",
        "kmc_lite_gradient",
        "kmc_finite_gradient",
        "lite_fit",
        "finite_fit",
        "glass_estimate",
    }
    for (name, key), tolerance in RUST_TOLERANCES.items():
        if tolerance is not None:
            err = results[name]["outputs"][key]["max_rel_err"]
            assert err <= tolerance, (name, key, err)
    fixture = peers.Fixture.load(rust_fixtures)
    p = fixture.params("kamh_step")
    z, x, y = (fixture.array("kamh_step", k) for k in ("z", "x", "y"))
    args = p["sigma"], p["gamma"], p["nu"]
    scale = abs(peers.kamh_factor(z, x, *args).log_density(y, x)) + abs(
        peers.kamh_factor(z, y, *args).log_density(x, y)
    )
    assert results["kamh_step"]["outputs"]["log_correction"]["max_abs_err"] <= 1e-10 * scale


def test_fits_match_rust(rust_fixtures):
    """α and θ agree to within cond(C + λI) times the rounding of C: the
    forward-error bound of a linear solve whose matrix and right-hand side
    carry relative perturbations of ~n·u (assembled in a different order)."""
    fixture = peers.Fixture.load(rust_fixtures)
    p = fixture.params("lite_fit")
    points = fixture.array("lite_fit", "points")
    kernel, b, c = peers.lite_system(points, p["sigma"])
    cond = np.linalg.cond(c + p["lambda"] * np.eye(len(b)))
    err = peers.compare(
        peers.lite_fit(points, p["sigma"], p["lambda"]), fixture.array("lite_fit", "alpha")
    )
    assert err["max_rel_err"] <= max(1e-10, 10 * len(b) * EPS * cond), (err, cond)

    p = fixture.params("finite_fit")
    frequencies, phases = fixture.frequencies("finite_fit"), fixture.array("finite_fit", "phases")
    points = fixture.array("finite_fit", "points")
    theta = peers.finite_fit(frequencies, phases, points, p["lambda"])
    slopes = -math.sqrt(2 / len(phases)) * np.sin(points @ frequencies.T + phases)
    sums = (slopes.T @ slopes) * (frequencies @ frequencies.T)
    cond = np.linalg.cond(sums + len(points) * p["lambda"] * np.eye(len(phases)))
    err = peers.compare(theta, fixture.array("finite_fit", "theta"))
    assert err["max_rel_err"] <= max(1e-10, 10 * len(points) * EPS * cond), (err, cond)


def test_cli_on_rust_fixtures(rust_fixtures, tmp_path):
    report = run_cli(rust_fixtures, tmp_path / "peers.json")
    assert_report_is_complete(report, rust_fixtures)
