"""What a step of each gradient-free sampler costs on its defaults, tuning
included, as a ratio to KAMH's in the same process.

The target is a compiled (numba ``cfunc``) correlated Gaussian in
``--dim`` dimensions, called from Rust without the GIL, so the times are
the samplers' own work (its log density costs well under a microsecond).
Every sampler runs the same schedule, one chain of ``--tune`` adapting
steps (whitening pilot included) and ``--draws`` kept steps, so each has
seen the same history. Each is timed ``--repeats`` times; the minimum is
reported (the least disturbed by the rest of the machine). Writes a Markdown
table to ``--out`` (default ``python/benchmarks/results/default_step_cost.md``).

    .venv/bin/python python/benchmarks/default_step_cost.py
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
from numba import carray, cfunc, types

import kameleon as km

SAMPLERS = {
    "KAMH": km.KAMH,
    "PCAKameleon": km.PCAKameleon,
    "FKAMH": km.FKAMH,
    "CKAM": km.CKAM,
    "KMCLite": km.KMCLite,
    "KMCFinite": km.KMCFinite,
    "RandomWalk": km.RandomWalk,
    "AM": km.AM,
}


def compiled_gaussian(dim: int) -> km.Compiled:
    """N(0, Σ) with Σ_ij = 0.9^|i−j| · s_i s_j, s_i from 10⁻² to 10²."""
    s = np.logspace(-2, 2, dim)
    cov = 0.9 ** np.abs(np.subtract.outer(np.arange(dim), np.arange(dim))) * np.outer(s, s)
    precision = np.ascontiguousarray(np.linalg.inv(cov))

    @cfunc(types.float64(types.CPointer(types.float64), types.int64))
    def log_density(x_ptr, n):
        x = carray(x_ptr, (n,))
        total = 0.0
        for i in range(n):
            row = 0.0
            for j in range(n):
                row += precision[i, j] * x[j]
            total += x[i] * row
        return -0.5 * total

    return km.Compiled(log_density.address, dim, owner=log_density)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--tune", type=int, default=5000)
    parser.add_argument("--draws", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "default_step_cost.md")
    args = parser.parse_args()
    target = compiled_gaussian(args.dim)
    steps = args.tune + args.draws
    rows = []
    for name, sampler in SAMPLERS.items():
        best = np.inf
        for repeat in range(args.repeats):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", km.SamplingWarning)
                start = time.perf_counter()
                idata = km.sample(target, np.zeros(args.dim), sampler=sampler(), tune=args.tune, draws=args.draws, chains=1, cores=1, seed=repeat, progress=False)
                best = min(best, time.perf_counter() - start)
        acceptance = float(idata.sample_stats["accepted"].values.mean())
        rows.append((name, 1e6 * best / steps, acceptance))
        print(f"{name}: {1e6 * best / steps:.1f} µs/step", flush=True)
    kamh = rows[0][1]
    load = os.getloadavg()
    lines = [
        "# Cost of a step on the defaults, tuning included",
        "",
        f"One chain of {args.tune} tuning + {args.draws} kept steps on a compiled {args.dim}-d correlated "
        f"Gaussian (scales 10⁻² to 10²), the fastest of {args.repeats} runs; "
        f"load average {load[0]:.2f} at the end (2 cores).",
        "",
        "| sampler | µs per step | × KAMH | acceptance (kept steps) |",
        "|---|---|---|---|",
    ]
    for name, us, acceptance in rows:
        lines.append(f"| {name} | {us:.1f} | {us / kamh:.2f} | {acceptance:.2f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
