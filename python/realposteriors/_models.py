"""The eight log densities on Stan's unconstrained scale.

Every builder takes the posterior's data (as stored in ``data/<name>/data.json.gz``)
and returns a :class:`Model`: the log density of the unconstrained vector θ
(Jacobians of the constraining transforms included, additive constants
dropped), the unconstrained coordinate names, the constrained (reference)
parameter names, and vectorised maps between the two scales.

Transforms, as Stan's: ``real<lower=0> s`` is s = exp(u) (log-Jacobian u);
``real<lower=0, upper=1> p`` is p = logit⁻¹(u) (log p + log(1 − p));
``ordered[2] m`` is (u₁, u₁ + exp(u₂)) (u₂); ``positive_ordered[2] m`` is
(exp(u₁), exp(u₁) + exp(u₂)) (u₁ + u₂); ``simplex[2] s`` is stick-breaking,
which for two components is s = (logit⁻¹(u), logit⁻¹(−u)) (log s₁ + log s₂).

The scalar log densities use Python floats and ``math``; an overflow, a
domain error or a non-finite result gives −inf (see ``_safe``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import _hmm, _ode

_ERRORS = (OverflowError, ValueError, ZeroDivisionError, FloatingPointError, np.linalg.LinAlgError)


@dataclass(frozen=True)
class Model:
    log_density: Callable[[np.ndarray], float]
    names: tuple[str, ...]  # unconstrained coordinates
    parameter_names: tuple[str, ...]  # constrained parameters, as in the reference draws
    constrain: Callable[[np.ndarray], np.ndarray]  # (n, d) -> (n, p)
    unconstrain: Callable[[np.ndarray], np.ndarray]  # (n, p) -> (n, d)

    @property
    def dim(self) -> int:
        return len(self.names)


def _safe(dim: int):
    """Decorator: the log density ``f`` of θ (a float64 array of shape (dim,))
    returning −inf instead of raising on numeric failure or NaN; a θ of
    another length raises ValueError."""

    def wrap(f):
        def log_density(theta) -> float:
            if len(theta) != dim:
                raise ValueError(f"theta must have shape ({dim},), got {np.shape(theta)}")
            try:
                value = f(theta)
            except _ERRORS:
                return -math.inf
            return value if value == value and value != math.inf else -math.inf

        log_density.__doc__ = f.__doc__
        log_density.__name__ = f.__name__
        return log_density

    return wrap


def _log_inv_logit(u: float) -> float:
    """log(1 / (1 + exp(−u))) without overflow."""
    if u >= 0:
        return -math.log1p(math.exp(-u))
    return u - math.log1p(math.exp(u))


def _inv_logit(u: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-u))


def _positive(x: np.ndarray, what: str) -> np.ndarray:
    if not np.all(x > 0):
        raise ValueError(f"{what} must be positive")
    return np.log(x)


def _simplex2(first: np.ndarray, second: np.ndarray, what: str) -> np.ndarray:
    """The stick-breaking coordinate of a 2-simplex: log(s₁) − log(s₂)."""
    if not (np.all(first > 0) and np.all(second > 0) and np.allclose(first + second, 1.0, rtol=0, atol=1e-8)):
        raise ValueError(f"{what} must be a simplex (positive, summing to 1)")
    return np.log(first) - np.log(second)


def _ordered_gap(low: np.ndarray, high: np.ndarray, what: str) -> np.ndarray:
    if not np.all(high > low):
        raise ValueError(f"{what} must be increasing")
    return np.log(high - low)


def _columns(x: np.ndarray, p: int) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != p:
        raise ValueError(f"expected shape (n, {p}), got {x.shape}")
    return x


def _indexed(name: str, n: int) -> list[str]:
    return [f"{name}[{i}]" for i in range(1, n + 1)]


def _least_squares(design: np.ndarray, y: np.ndarray):
    """(XᵀX, β̂, ‖y − Xβ̂‖²): then ‖y − Xβ‖² = ‖y − Xβ̂‖² + (β − β̂)ᵀXᵀX(β − β̂)
    exactly, which is cheap and free of the cancellation in yᵀy − 2βᵀXᵀy + …"""
    gram = design.T @ design
    beta_hat = np.linalg.lstsq(design, y, rcond=None)[0]
    r = y - design @ beta_hat
    return gram, beta_hat, float(r @ r)


# ── kilpisjarvi_mod-kilpisjarvi ──────────────────────────────────────────


def kilpisjarvi(data: dict) -> Model:
    """y ~ N(α + βx, σ), α ~ N(pmualpha, psalpha), β ~ N(pmubeta, psbeta),
    flat on σ > 0. θ = (α, β, log σ)."""
    x = np.asarray(data["x"], dtype=np.float64)
    y = np.asarray(data["y"], dtype=np.float64)
    n = x.size
    # Residuals in centred form: α + βx − y = (α + βx̄ − ȳ) + β(x − x̄) − (y − ȳ),
    # whose squares sum to n·c² + Sxx(β − β̂)² + RSS with c = α + βx̄ − ȳ.
    x_bar, y_bar = float(x.mean()), float(y.mean())
    xc, yc = x - x_bar, y - y_bar
    sxx = float(xc @ xc)
    b_hat = float(xc @ yc) / sxx
    r = yc - b_hat * xc
    rss = float(r @ r)
    ma, sa = float(data["pmualpha"]), float(data["psalpha"])
    mb, sb = float(data["pmubeta"]), float(data["psbeta"])

    @_safe(3)
    def log_density(theta):
        a, b, ls = theta.tolist()
        c = a + b * x_bar - y_bar
        ss = n * c * c + sxx * (b - b_hat) ** 2 + rss
        za, zb = (a - ma) / sa, (b - mb) / sb
        # −n log σ from the likelihood, + log σ from the Jacobian
        return -0.5 * (za * za + zb * zb) - (n - 1) * ls - 0.5 * ss * math.exp(-2.0 * ls)

    def constrain(t):
        return np.column_stack([t[:, 0], t[:, 1], np.exp(t[:, 2])])

    def unconstrain(v):
        v = _columns(v, 3)
        return np.column_stack([v[:, 0], v[:, 1], _positive(v[:, 2], "sigma")])

    return Model(log_density, ("alpha", "beta", "log(sigma)"), ("alpha", "beta", "sigma"), constrain, unconstrain)


# ── one_comp_mm_elim_abs-one_comp_mm_elim_abs ────────────────────────────


def one_comp_mm_elim_abs(data: dict) -> Model:
    """C_hat ~ lognormal(log C(t), σ) with C the solution of the
    Michaelis–Menten ODE (see ``_ode``); k_a, K_m, V_m, σ half-Cauchy(0, 1).
    θ = (log k_a, log K_m, log V_m, log σ)."""
    if float(data["t0"]) != 0.0:
        raise ValueError("the ODE solver assumes t0 = 0")
    times = np.asarray(data["times"], dtype=np.float64)
    if not (times[0] > 0 and np.all(np.diff(times) > 0)):
        raise ValueError("the measurement times must be positive and increasing")
    log_c_hat = np.log(np.asarray(data["C_hat"], dtype=np.float64))
    n = times.size
    dose, volume = float(data["D"]), float(data["V"])
    concentrations = _ode.concentrations

    @_safe(4)
    def log_density(theta):
        u = theta.tolist()
        k_a, K_m, V_m, sigma = (math.exp(v) for v in u)
        # half-Cauchy(0, 1) priors and the log-Jacobians u
        lp = u[0] + u[1] + u[2] + u[3]
        lp -= math.log1p(k_a * k_a) + math.log1p(K_m * K_m) + math.log1p(V_m * V_m) + math.log1p(sigma * sigma)
        c = concentrations(k_a, K_m, V_m, dose, volume, times)
        if c is None or not c.min() > 0.0:
            return -math.inf
        r = log_c_hat - np.log(c)
        return lp - n * u[3] - 0.5 * float(r @ r) / (sigma * sigma)

    def constrain(t):
        return np.exp(t)

    def unconstrain(v):
        return _positive(_columns(v, 4), "k_a, K_m, V_m and sigma")

    return Model(
        log_density,
        ("log(k_a)", "log(K_m)", "log(V_m)", "log(sigma)"),
        ("k_a", "K_m", "V_m", "sigma"),
        constrain,
        unconstrain,
    )


# ── low_dim_gauss_mix-low_dim_gauss_mix ──────────────────────────────────


def low_dim_gauss_mix(data: dict) -> Model:
    """y ~ θ N(μ₁, σ₁) + (1 − θ) N(μ₂, σ₂) with μ ordered, μ ~ N(0, 2),
    σ ~ half-N(0, 2), θ ~ Beta(5, 5).
    θ-vector = (μ₁, log(μ₂ − μ₁), log σ₁, log σ₂, logit θ)."""
    y = np.asarray(data["y"], dtype=np.float64)

    @_safe(5)
    def log_density(theta):
        m1, du, ls1, ls2, w = theta.tolist()
        m2 = m1 + math.exp(du)
        s1, s2 = math.exp(ls1), math.exp(ls2)
        lw1, lw2 = _log_inv_logit(w), _log_inv_logit(-w)
        # priors, then log-Jacobians (du, ls1, ls2, log θ + log(1 − θ))
        lp = -0.125 * (m1 * m1 + m2 * m2 + s1 * s1 + s2 * s2) + 4.0 * (lw1 + lw2)
        lp += du + ls1 + ls2 + lw1 + lw2
        with np.errstate(all="ignore"):
            z1 = (y - m1) * (1.0 / s1)
            z2 = (y - m2) * (1.0 / s2)
            mix = np.logaddexp((lw1 - ls1) - 0.5 * z1 * z1, (lw2 - ls2) - 0.5 * z2 * z2)
            return lp + float(mix.sum())

    def constrain(t):
        m1 = t[:, 0]
        return np.column_stack([m1, m1 + np.exp(t[:, 1]), np.exp(t[:, 2]), np.exp(t[:, 3]), _inv_logit(t[:, 4])])

    def unconstrain(v):
        v = _columns(v, 5)
        if not np.all((v[:, 4] > 0) & (v[:, 4] < 1)):
            raise ValueError("theta must lie in (0, 1)")
        return np.column_stack(
            [
                v[:, 0],
                _ordered_gap(v[:, 0], v[:, 1], "mu"),
                _positive(v[:, 2], "sigma[1]"),
                _positive(v[:, 3], "sigma[2]"),
                np.log(v[:, 4]) - np.log1p(-v[:, 4]),
            ]
        )

    return Model(
        log_density,
        ("mu[1]", "log(mu[2]-mu[1])", "log(sigma[1])", "log(sigma[2])", "logit(theta)"),
        ("mu[1]", "mu[2]", "sigma[1]", "sigma[2]", "theta"),
        constrain,
        unconstrain,
    )


# ── the two hidden Markov models ─────────────────────────────────────────

_SIMPLEX_NAMES = ("theta1[1]", "theta1[2]", "theta2[1]", "theta2[2]")


def _constrain_simplexes(t):
    """The transition matrix rows (theta1, theta2) from t[:, 0], t[:, 1]."""
    return [_inv_logit(t[:, 0]), _inv_logit(-t[:, 0]), _inv_logit(t[:, 1]), _inv_logit(-t[:, 1])]


def _positive_ordered(t0, t1):
    low = np.exp(t0)
    return low, low + np.exp(t1)


def hmm_example(data: dict) -> Model:
    """Two-state Gaussian HMM: y_t | z_t = k ~ N(μ_k, 1), transition rows
    theta1, theta2 (flat on the simplexes), μ positive-ordered with
    μ₁ ~ N(3, 1), μ₂ ~ N(10, 1).
    θ = (logit theta1[1], logit theta2[1], log μ₁, log(μ₂ − μ₁))."""
    if int(data["K"]) != 2:
        raise ValueError("only K = 2 is implemented")
    y = np.asarray(data["y"], dtype=np.float64)
    forward = _hmm.forward2

    @_safe(4)
    def log_density(theta):
        u1, u2, lm, dm = theta.tolist()
        l11, l12, l21, l22 = _log_inv_logit(u1), _log_inv_logit(-u1), _log_inv_logit(u2), _log_inv_logit(-u2)
        mu1 = math.exp(lm)
        mu2 = mu1 + math.exp(dm)
        lp = -0.5 * ((mu1 - 3.0) ** 2 + (mu2 - 10.0) ** 2)
        lp += l11 + l12 + l21 + l22 + lm + dm  # log-Jacobians
        with np.errstate(all="ignore"):
            e1 = y - mu1
            e1 *= -0.5 * e1
            e2 = y - mu2
            e2 *= -0.5 * e2
        return lp + forward(e1, e2, math.exp(l11), math.exp(l12), math.exp(l21), math.exp(l22))

    def constrain(t):
        return np.column_stack(_constrain_simplexes(t) + list(_positive_ordered(t[:, 2], t[:, 3])))

    def unconstrain(v):
        v = _columns(v, 6)
        return np.column_stack(
            [
                _simplex2(v[:, 0], v[:, 1], "theta1"),
                _simplex2(v[:, 2], v[:, 3], "theta2"),
                _positive(v[:, 4], "mu[1]"),
                _ordered_gap(v[:, 4], v[:, 5], "mu"),
            ]
        )

    return Model(
        log_density,
        ("logit(theta1[1])", "logit(theta2[1])", "log(mu[1])", "log(mu[2]-mu[1])"),
        _SIMPLEX_NAMES + ("mu[1]", "mu[2]"),
        constrain,
        unconstrain,
    )


def hmm_drive_0(data: dict) -> Model:
    """Two-state HMM with exponential emissions u_t ~ Exp(φ_k), v_t ~ Exp(λ_k),
    transition rows theta[k] ~ Dirichlet(alpha[k, :]), φ and λ
    positive-ordered with N(0, 1) and N(3, 1) priors on their components.
    θ = (logit theta1[1], logit theta2[1], log φ₁, log(φ₂ − φ₁), log λ₁, log(λ₂ − λ₁))."""
    if int(data["K"]) != 2:
        raise ValueError("only K = 2 is implemented")
    u = np.asarray(data["u"], dtype=np.float64)
    v = np.asarray(data["v"], dtype=np.float64)
    (c11, c12), (c21, c22) = (np.asarray(data["alpha"], dtype=np.float64) - 1.0).tolist()
    forward = _hmm.forward2

    @_safe(6)
    def log_density(theta):
        u1, u2, lp1, dp, ll1, dl = theta.tolist()
        l11, l12, l21, l22 = _log_inv_logit(u1), _log_inv_logit(-u1), _log_inv_logit(u2), _log_inv_logit(-u2)
        phi1 = math.exp(lp1)
        phi2 = phi1 + math.exp(dp)
        lam1 = math.exp(ll1)
        lam2 = lam1 + math.exp(dl)
        lp = c11 * l11 + c12 * l12 + c21 * l21 + c22 * l22  # Dirichlet priors
        lp -= 0.5 * (phi1 * phi1 + (phi2 - 3.0) ** 2 + lam1 * lam1 + (lam2 - 3.0) ** 2)
        lp += l11 + l12 + l21 + l22 + lp1 + dp + ll1 + dl  # log-Jacobians
        with np.errstate(all="ignore"):
            e1 = (lp1 + ll1) - phi1 * u - lam1 * v
            e2 = (math.log(phi2) + math.log(lam2)) - phi2 * u - lam2 * v
        return lp + forward(e1, e2, math.exp(l11), math.exp(l12), math.exp(l21), math.exp(l22))

    def constrain(t):
        return np.column_stack(
            _constrain_simplexes(t) + list(_positive_ordered(t[:, 2], t[:, 3])) + list(_positive_ordered(t[:, 4], t[:, 5]))
        )

    def unconstrain(x):
        x = _columns(x, 8)
        return np.column_stack(
            [
                _simplex2(x[:, 0], x[:, 1], "theta1"),
                _simplex2(x[:, 2], x[:, 3], "theta2"),
                _positive(x[:, 4], "phi[1]"),
                _ordered_gap(x[:, 4], x[:, 5], "phi"),
                _positive(x[:, 6], "lambda[1]"),
                _ordered_gap(x[:, 6], x[:, 7], "lambda"),
            ]
        )

    return Model(
        log_density,
        (
            "logit(theta1[1])",
            "logit(theta2[1])",
            "log(phi[1])",
            "log(phi[2]-phi[1])",
            "log(lambda[1])",
            "log(lambda[2]-lambda[1])",
        ),
        _SIMPLEX_NAMES + ("phi[1]", "phi[2]", "lambda[1]", "lambda[2]"),
        constrain,
        unconstrain,
    )


# ── nes1996-nes ──────────────────────────────────────────────────────────


def nes(data: dict) -> Model:
    """partyid7 ~ N(Xβ, σ) with X = [1, real_ideo, race_adj, age30_44,
    age45_64, age65up, educ1, gender, income], flat priors on β and σ > 0.
    θ = (β₁, …, β₉, log σ)."""
    age = np.asarray(data["age_discrete"])
    columns = [np.ones(age.size), data["real_ideo"], data["race_adj"], age == 2, age == 3, age == 4]
    columns += [data["educ1"], data["gender"], data["income"]]
    design = np.column_stack([np.asarray(c, dtype=np.float64) for c in columns])
    y = np.asarray(data["partyid7"], dtype=np.float64)
    gram, beta_hat, rss = _least_squares(design, y)
    n = y.size

    @_safe(10)
    def log_density(theta):
        ls = float(theta[9])
        with np.errstate(all="ignore"):
            d = theta[:9] - beta_hat
            ss = rss + float(d @ (gram @ d))
        return -(n - 1) * ls - 0.5 * ss * math.exp(-2.0 * ls)

    def constrain(t):
        return np.column_stack([t[:, :9], np.exp(t[:, 9])])

    def unconstrain(v):
        v = _columns(v, 10)
        return np.column_stack([v[:, :9], _positive(v[:, 9], "sigma")])

    return Model(
        log_density, tuple(_indexed("beta", 9)) + ("log(sigma)",), tuple(_indexed("beta", 9)) + ("sigma",), constrain, unconstrain
    )


# ── gp_pois_regr-gp_pois_regr ────────────────────────────────────────────


def gp_pois_regr(data: dict) -> Model:
    """k ~ Poisson(exp(f)), f = L f̃ with L Lᵀ = α² exp(−(x_i − x_j)²/(2ρ²)) + 10⁻¹⁰ I,
    f̃ ~ N(0, I), ρ ~ Gamma(25, 4), α ~ half-N(0, 2).
    θ = (log ρ, log α, f̃₁, …, f̃_N); the reference parameters are ρ, α and f."""
    x = np.asarray(data["x"], dtype=np.float64)
    k = np.asarray(data["k"], dtype=np.float64)
    n = x.size
    half_sq_dist = -0.5 * (x[:, None] - x[None, :]) ** 2
    jitter = 1e-10 * np.eye(n)
    cholesky = np.linalg.cholesky

    def factor(rho, alpha):
        return cholesky(alpha * alpha * np.exp(half_sq_dist / (rho * rho)) + jitter)

    @_safe(n + 2)
    def log_density(theta):
        lr = float(theta[0])
        la = float(theta[1])
        rho, alpha = math.exp(lr), math.exp(la)
        ft = theta[2:]
        # Gamma(25, 4) and half-normal(0, 2) priors with their log-Jacobians
        with np.errstate(all="ignore"):
            lp = 25.0 * lr - 4.0 * rho - 0.125 * alpha * alpha + la - 0.5 * float(ft @ ft)
            f = factor(rho, alpha) @ ft
            return lp + float(k @ f) - float(np.exp(f).sum())

    def constrain(t):
        rho, alpha = np.exp(t[:, 0]), np.exp(t[:, 1])
        cov = (alpha * alpha)[:, None, None] * np.exp(half_sq_dist[None] / (rho * rho)[:, None, None]) + jitter
        f = np.einsum("nij,nj->ni", cholesky(cov), t[:, 2:])
        return np.column_stack([rho, alpha, f])

    def unconstrain(v):
        from scipy.linalg import solve_triangular

        v = _columns(v, n + 2)
        lr, la = _positive(v[:, 0], "rho"), _positive(v[:, 1], "alpha")
        ft = np.array([solve_triangular(factor(r, a), f, lower=True) for r, a, f in zip(v[:, 0], v[:, 1], v[:, 2:])])
        return np.column_stack([lr, la, ft.reshape(len(v), n)])

    return Model(
        log_density,
        ("log(rho)", "log(alpha)") + tuple(_indexed("f_tilde", n)),
        ("rho", "alpha") + tuple(_indexed("f", n)),
        constrain,
        unconstrain,
    )


# ── diamonds-diamonds ────────────────────────────────────────────────────


def diamonds(data: dict) -> Model:
    """Y ~ N(Intercept + X_c b, σ) with X_c the centred predictors,
    b ~ N(0, 1), Intercept ~ t₃(8, 10), σ ~ half-t₃(0, 10).
    θ = (b₁, …, b₂₄, Intercept, log σ).

    The data are stored as the least-squares summary of the design
    Z = [X_c, 1] (see ``build_data``): ZᵀZ, β̂ and the residual sum of squares,
    from which ‖Y − Zβ‖² = RSS + (β − β̂)ᵀZᵀZ(β − β̂) exactly."""
    gram = np.asarray(data["ZtZ"], dtype=np.float64)
    beta_hat = np.asarray(data["beta_hat"], dtype=np.float64)
    rss = float(data["rss"])
    n = int(data["N"])
    kc = int(data["K"]) - 1
    if gram.shape != (kc + 1, kc + 1) or beta_hat.shape != (kc + 1,):
        raise ValueError("inconsistent diamonds summary")

    @_safe(kc + 2)
    def log_density(theta):
        ls = float(theta[kc + 1])
        sigma = math.exp(ls)
        zi = (float(theta[kc]) - 8.0) / 10.0
        zs = sigma / 10.0
        with np.errstate(all="ignore"):
            b = theta[:kc]
            bb = float(b @ b)
            d = theta[: kc + 1] - beta_hat
            ss = rss + float(d @ (gram @ d))
        lp = -0.5 * bb - 2.0 * math.log1p(zi * zi / 3.0) - 2.0 * math.log1p(zs * zs / 3.0)
        # −n log σ from the likelihood, + log σ from the Jacobian
        return lp - (n - 1) * ls - 0.5 * ss / (sigma * sigma)

    def constrain(t):
        return np.column_stack([t[:, : kc + 1], np.exp(t[:, kc + 1])])

    def unconstrain(v):
        v = _columns(v, kc + 2)
        return np.column_stack([v[:, : kc + 1], _positive(v[:, kc + 1], "sigma")])

    return Model(
        log_density,
        tuple(_indexed("b", kc)) + ("Intercept", "log(sigma)"),
        tuple(_indexed("b", kc)) + ("Intercept", "sigma"),
        constrain,
        unconstrain,
    )


BUILDERS: dict[str, Callable[[dict], Model]] = {
    "kilpisjarvi_mod-kilpisjarvi": kilpisjarvi,
    "one_comp_mm_elim_abs-one_comp_mm_elim_abs": one_comp_mm_elim_abs,
    "low_dim_gauss_mix-low_dim_gauss_mix": low_dim_gauss_mix,
    "hmm_example-hmm_example": hmm_example,
    "bball_drive_event_0-hmm_drive_0": hmm_drive_0,
    "nes1996-nes": nes,
    "gp_pois_regr-gp_pois_regr": gp_pois_regr,
    "diamonds-diamonds": diamonds,
}
