"""Minimax coefficients of the polynomials in crates/kernels/src/fastmath.rs.

A weighted Remez exchange in 60-digit arithmetic (mpmath only): it minimises
max |w(t) (f(t) - sum_i c_i t^i)| over [a, b], where f and w are chosen so
that the weighted error is the relative error of the whole function with its
leading terms fixed:

    exp  N   exp r ~ 1 + r + r^2 q(r),   |r| <= ln 2 / 2,  q of degree N - 2
    sin  N   sin r ~ r + r^3 s(r^2),     |r| <= pi / 4,    N coefficients
    cos  N   cos r ~ 1 - r^2/2 + r^4 c(r^2), |r| <= pi/4,  N coefficients
    sinpi N  sin r ~ r + r^3 s(r^2),     |r| <= pi / 2,    N coefficients

Usage: python3 fastmath_remez.py exp 11 | sin 6 | cos 6 | sinpi 8
Prints the levelled error and the coefficients (lowest degree first) as
f64 bit patterns, rounded to the nearest double.
"""
import struct
import sys

import mpmath as mp

mp.mp.dps = 60


def remez(f, w, a, b, n, iters=30, grid_size=4000):
    """Coefficients c_0..c_n and the levelled error of the weighted minimax
    polynomial of degree n for f on [a, b]."""
    count = n + 2
    # Chebyshev-like reference, shifted so that no point is exactly 0 (where
    # the weights of exp vanish)
    xs = [(a + b) / 2 - (b - a) / 2 * mp.cos(mp.pi * (k + mp.mpf(0.3)) / (count - 0.4))
          for k in range(count)]
    for _ in range(iters):
        A = mp.matrix(count, count)
        rhs = mp.matrix(count, 1)
        for i, x in enumerate(xs):
            for j in range(n + 1):
                A[i, j] = x**j
            A[i, n + 1] = (-1) ** i / w(x)
            rhs[i] = f(x)
        sol = mp.lu_solve(A, rhs)
        c = [sol[j] for j in range(n + 1)]
        levelled = sol[n + 1]

        def err(x):
            return w(x) * (f(x) - sum(c[j] * x**j for j in range(n + 1)))

        grid = [a + (b - a) * mp.mpf(k) / grid_size for k in range(grid_size + 1)]
        values = [err(x) for x in grid]
        # the extremum of each run of equal sign becomes a reference point
        extrema, best = [], (grid[0], values[0])
        for x, v in zip(grid[1:], values[1:]):
            if mp.sign(v) == mp.sign(best[1]) or v == 0:
                if abs(v) > abs(best[1]):
                    best = (x, v)
            else:
                extrema.append(best)
                best = (x, v)
        extrema.append(best)
        if len(extrema) < count:
            raise RuntimeError("too few alternations")
        while len(extrema) > count:
            extrema.pop(0 if abs(extrema[0][1]) < abs(extrema[-1][1]) else -1)
        xs = [x for x, _ in extrema]
        max_err = max(abs(v) for v in values)
        if abs(max_err - abs(levelled)) < abs(levelled) * mp.mpf("1e-6"):
            break
    return c, levelled


def main():
    which, count = sys.argv[1], int(sys.argv[2])
    tiny = mp.mpf("1e-40")
    if which == "exp":
        h = mp.log(2) / 2
        c, e = remez(lambda r: (mp.exp(r) - 1 - r) / r**2 if r else mp.mpf(1) / 2,
                     lambda r: (r**2 if r else tiny) / mp.exp(r), -h, h, count - 2)
    elif which in ("sin", "sinpi"):
        R = mp.pi / 4 if which == "sin" else mp.pi / 2
        c, e = remez(lambda t: (mp.sin(mp.sqrt(t)) - mp.sqrt(t)) / t**1.5 if t else -mp.mpf(1) / 6,
                     lambda t: t**1.5 / mp.sin(mp.sqrt(t)) if t else tiny, mp.mpf(0), R**2, count - 1)
    elif which == "cos":
        R = mp.pi / 4
        c, e = remez(lambda t: (mp.cos(mp.sqrt(t)) - 1 + t / 2) / t**2 if t else mp.mpf(1) / 24,
                     lambda t: t**2 / mp.cos(mp.sqrt(t)) if t else tiny, mp.mpf(0), R**2, count - 1)
    else:
        raise SystemExit(__doc__)
    print(f"{which} {count}: levelled relative error {mp.nstr(abs(e), 5)}")
    for x in c:
        d = float(x)
        print(f"    f64::from_bits(0x{struct.unpack('<Q', struct.pack('<d', d))[0]:016X}), // {d!r}")


if __name__ == "__main__":
    main()
