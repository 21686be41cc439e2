"""KMC lite and finite on standard normals: acceptance against mixing.

KMC's acceptance is set by how far its trajectories travel on a surrogate
learned while tuning: where the surrogate is rough (d = 20 after 1 000
tuning steps), long trajectories are rejected more often but, accepted,
move the chain further. This script measures both sides of that trade on
N(0, I_d), d = 2, 5, 10, 20, for each sampler on its defaults (KMC lite
also with its earlier defaults' fixed λ = 10⁴, on the pilot's map alone)
and with the
step-size range halved (``step_size=(0.05, 0.1)``, i.e. trajectories half as
long) and with it halved and the leapfrog steps doubled (``steps=(20, 40)``:
trajectories as long as the defaults', with a quarter of the leapfrog's
energy error, which tells the integrator's share of the rejections from the
surrogate's), and with the step factor learned toward acceptance 0.62
within a lower floor (``target_accept=0.62``, ``step_factor_range`` (0.3,
20) for lite and (0.4, 20) for finite: the settings that keep the
acceptance at 0.5 or more up to d = 20), after ``tune`` = 1 000 (``km.sample``'s default), 2 000 and 5 000 (the
real-posterior suite's) tuning steps: 2 chains × 2 000 draws from 0, seeds
1–3. Each cell gives the range over the seeds of the acceptance rate and
of the minimum bulk ESS over the d coordinates (of the 4 000 draws). Writes
a Markdown table to ``--out`` (default
``python/benchmarks/results/kmc_standard_normal.md``).

    .venv/bin/python python/benchmarks/kmc_standard_normal.py
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

import kameleon as km
from kameleon import diagnostics

VARIANTS = {
    "KMCLite()": lambda: km.KMCLite(),
    # the earlier defaults' fixed ridge, on the pilot's map alone
    "KMCLite(lam=1e4, rewhiten=False)": lambda: km.KMCLite(lam=1e4, rewhiten=False),
    "KMCLite(step_size=(0.05, 0.1))": lambda: km.KMCLite(step_size=(0.05, 0.1)),
    "KMCLite(step_size=(0.05, 0.1), steps=(20, 40))": lambda: km.KMCLite(step_size=(0.05, 0.1), steps=(20, 40)),
    "KMCLite(target_accept=0.62, step_factor_range=(0.3, 20))": lambda: km.KMCLite(target_accept=0.62,
                                                                                    step_factor_range=(0.3, 20.0)),
    "KMCFinite()": lambda: km.KMCFinite(),
    "KMCFinite(step_size=(0.05, 0.1))": lambda: km.KMCFinite(step_size=(0.05, 0.1)),
    "KMCFinite(step_size=(0.05, 0.1), steps=(20, 40))": lambda: km.KMCFinite(step_size=(0.05, 0.1),
                                                                             steps=(20, 40)),
    "KMCFinite(target_accept=0.62, step_factor_range=(0.4, 20))": lambda: km.KMCFinite(
        target_accept=0.62, step_factor_range=(0.4, 20.0)),
}
DIMS = (2, 5, 10, 20)
SEEDS = (1, 2, 3)
CHAINS, DRAWS = 2, 2000


def run(make, d: int, tune: int, seed: int) -> tuple[float, float]:
    """(acceptance rate, minimum bulk ESS) of one run."""
    target = km.targets.Gaussian(np.zeros(d), np.eye(d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the run's own R-hat/ESS warnings
        idata = km.sample(target, np.zeros(d), sampler=make(), tune=tune, draws=DRAWS, chains=CHAINS,
                          cores=1, seed=seed, progress=False)
    draws = next(iter(idata.posterior.data_vars.values())).values.reshape(CHAINS, DRAWS, d)
    acceptance = float(idata.sample_stats["accepted"].values.mean())
    return acceptance, float(np.min(diagnostics.ess_bulk(draws)))


def span(values, fmt: str) -> str:
    return f"{min(values):{fmt}}–{max(values):{fmt}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parent / "results" / "kmc_standard_normal.md")
    args = parser.parse_args()
    start = time.perf_counter()
    lines = [
        "# KMC lite and finite on standard normals: acceptance against mixing",
        "",
        "Written by `python/benchmarks/kmc_standard_normal.py` (the protocol is in its docstring). "
        f"Each cell: acceptance rate · minimum bulk ESS of {CHAINS} × {DRAWS} draws, the range over seeds "
        f"{', '.join(map(str, SEEDS))}.",
        "",
        "| sampler | tune | " + " | ".join(f"d = {d}" for d in DIMS) + " |",
        "|---|---:|" + "---|" * len(DIMS),
    ]
    for tune in (1000, 2000, 5000):
        for name, make in VARIANTS.items():
            cells = []
            for d in DIMS:
                runs = [run(make, d, tune, seed) for seed in SEEDS]
                cells.append(f"{span([a for a, _ in runs], '.2f')} · {span([e for _, e in runs], '.0f')}")
                print(f"{name} tune={tune} d={d}: {cells[-1]}", flush=True)
            lines.append(f"| `{name}` | {tune} | " + " | ".join(cells) + " |")
    lines += ["", f"Run time {time.perf_counter() - start:.0f} s."]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
