"""Why no sampler passes ``one_comp_mm_elim_abs`` in ``real_posteriors.py``:
K_m and V_m have no finite variance, so the score's "sd within 10 % of the
reference sd" is a coin toss even for exact, independent draws.

For each of log K_m and log V_m this computes the marginal log density on a
grid by quadrature: at each grid value the other three coordinates are
integrated by a 9-point-per-axis Gauss–Hermite rule centred at their
conditional mode and scaled by the inverse of a finite-difference Hessian
there (exact for a Gaussian conditional). Against an importance sample of
the whole posterior (2·10⁶ multivariate-t₃ draws fitted to the reference
draws, importance ESS 6·10⁵: log K_m mean −0.098, sd 1.443; log V_m −0.079,
0.286) the rule is exact to the digits shown for log K_m; for log V_m, whose
conditional includes the skewed log K_m, its sd is 5 % high. Beyond the grid the marginal is continued with the
grid's end slopes, which at the upper end is the ridge's exact −2 (see
``test_one_comp_tail_in_log_k_m_is_exp_minus_two_u``). From that marginal it
reports the mean and sd on the log scale (against the reference's), the sd
of the constrained parameter truncated at growing points (it grows without
bound, as √log of the truncation point), and, for n independent draws, the
distribution of their sd relative to the reference sd and the probability
that it lies within 10 %.

    .venv/bin/python python/benchmarks/one_comp_tail.py

writes ``results/real_posteriors/one_comp_tail.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.optimize import minimize

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # python/: realposteriors

import realposteriors as rp  # noqa: E402

GRID = np.arange(-5.0, 14.01, 0.25)
GH_POINTS = 9
TRUNCATIONS = {"K_m": [1e2, 1e3, 1e4, 1e6, 1e9], "V_m": [1e1, 1e2, 1e3, 1e4, 1e6]}
SAMPLE_SIZES = [1_000, 2_000, 4_000, 10_000, 40_000, 100_000]


def hessian(f, z: np.ndarray, h: float = 1e-3) -> np.ndarray:
    """Central-difference Hessian of f at z."""
    d = len(z)
    out = np.empty((d, d))
    e = np.eye(d) * h
    for a in range(d):
        for b in range(a, d):
            out[a, b] = out[b, a] = (
                f(z + e[a] + e[b]) - f(z + e[a] - e[b]) - f(z - e[a] + e[b]) + f(z - e[a] - e[b])
            ) / (4 * h * h)
    return out


def marginal(post: rp.Posterior, j: int) -> np.ndarray:
    """log of the marginal density of coordinate j (up to a constant) on GRID."""
    others = [i for i in range(post.dim) if i != j]
    nodes, weights = hermegauss(GH_POINTS)  # ∫ g(x) e^{-x²/2} dx ≈ Σ w g(x)
    grid = np.stack(np.meshgrid(*[nodes] * 3, indexing="ij"), -1).reshape(-1, 3)
    w = np.prod(np.stack(np.meshgrid(*[weights] * 3, indexing="ij"), -1).reshape(-1, 3), axis=1)
    theta = np.empty(post.dim)
    mode = post.x0[others].copy()
    out = []
    for v in GRID:
        theta[j] = v

        def minus_log_density(z):
            theta[others] = z
            return -post.log_density(theta)

        # warm start from the previous grid value's mode; the reference mean as a fallback
        fits = [
            minimize(minus_log_density, start, method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-10, "maxiter": 6000})
            for start in (mode, post.x0[others])
        ]
        mode = min(fits, key=lambda r: r.fun).x
        chol = np.linalg.cholesky(np.linalg.inv(hessian(minus_log_density, mode)))
        points = mode + grid @ chol.T
        log_f = np.array([-minus_log_density(p) for p in points]) + 0.5 * np.sum(grid**2, axis=1)
        top = np.max(log_f)
        out.append(top + np.log(np.sum(w * np.exp(log_f - top))) + np.log(np.linalg.det(chol)))
    return np.array(out)


def continued(log_m: np.ndarray):
    """The marginal on a fine grid from −40 to 400, continued beyond GRID with
    its end slopes: (points, probabilities, lower slope, upper slope)."""
    low = (log_m[1] - log_m[0]) / (GRID[1] - GRID[0])
    high = (log_m[-1] - log_m[-2]) / (GRID[-1] - GRID[-2])
    fine = np.linspace(-40.0, 400.0, 2_000_001)
    lf = np.interp(fine, GRID, log_m)
    lf = np.where(fine < GRID[0], log_m[0] + low * (fine - GRID[0]), lf)
    lf = np.where(fine > GRID[-1], log_m[-1] + high * (fine - GRID[-1]), lf)
    p = np.exp(lf - lf.max())
    return fine, p / p.sum(), low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "real_posteriors" / "one_comp_tail.md")
    parser.add_argument("--repeats", type=int, default=2000, help="samples per n (a quarter for n > 10 000)")
    args = parser.parse_args()
    post = rp.load("one_comp")
    ref = post.reference
    rng = np.random.default_rng(20261127)
    lines = [
        "# one_comp_mm_elim_abs: K_m and V_m have no finite variance",
        "",
        "Written by `python/benchmarks/one_comp_tail.py` (the method is in its docstring).",
        "",
    ]
    for j, name in [(1, "K_m"), (2, "V_m")]:
        k = list(post.parameter_names).index(name)
        fine, p, low, high = continued(marginal(post, j))
        mean = p @ fine
        sd = np.sqrt(p @ (fine - mean) ** 2)
        lines += [
            f"## {name}",
            "",
            f"- log {name}: mean {mean:.3f}, sd {sd:.3f} (reference {ref.unconstrained_mean[j]:.3f}, {ref.unconstrained_sd[j]:.3f});"
            f" tails of the marginal ∝ e^({low:.3f} u) below and e^({high:.3f} u) above.",
            f"- mean of {name}: {p @ np.exp(np.minimum(fine, 300.0)):.3f} (reference {ref.mean[k]:.3f});"
            f" reference sd {ref.sd[k]:.3f}.",
            "",
            f"| truncation T | sd of {name} given {name} < T | P({name} > T) |",
            "|---|---|---|",
        ]
        for t in TRUNCATIONS[name]:
            below = fine < np.log(t)
            q = p[below] / p[below].sum()
            x = np.exp(fine[below])
            m = q @ x
            lines.append(f"| {t:.0e} | {np.sqrt(q @ (x - m) ** 2):.3f} | {p[~below].sum():.1e} |")
        lines += [
            "",
            f"| n independent draws | sd / reference sd: 10 %, 50 %, 90 % quantiles | P(within 10 %) |",
            "|---|---|---|",
        ]
        cdf = np.cumsum(p)
        for n in SAMPLE_SIZES:
            repeats = args.repeats if n <= 10_000 else args.repeats // 4
            ratio = np.array([np.exp(np.interp(rng.random(n), cdf, fine)).std() for _ in range(repeats)]) / ref.sd[k]
            lo, med, hi = np.quantile(ratio, [0.1, 0.5, 0.9])
            lines.append(f"| {n} | {lo:.2f}, {med:.2f}, {hi:.2f} | {np.mean(np.abs(ratio - 1) <= 0.1):.3f} |")
        lines.append("")
        print(f"{name} done", file=sys.stderr, flush=True)
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
