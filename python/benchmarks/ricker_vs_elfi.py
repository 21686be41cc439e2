"""Ricker synthetic likelihood: kameleon against ELFI's BSL at equal
simulations.

Both fit data set 1 of ``python/examples/ricker_synthetic_likelihood.py``
(Wood's 13 summaries, the same simulator code, the same uniform priors) with
Wood's Gaussian synthetic likelihood from 200 simulations per estimate,
which ELFI's ``elfi.BSL`` (default likelihood ``gaussian_syn_likelihood``)
and ``km.SyntheticLikelihood`` compute alike, so both target the same
posterior. Each run gets ``FULL.budget`` likelihood estimates (× 200
simulations), the 100-draw pilot that picks the start included:

- kameleon: the example's pilot, then 4 chains of the default sampler
  (KAMH) with ``prior=`` (scaled-logit scale), 1000 tuning and 1475 kept
  steps each; ``cores=1`` (one process, as ELFI's default client).
- ELFI: ``BSL(...).sample`` from the same pilot start, one random-walk
  Metropolis chain of the remaining estimates, the first 2000 discarded.
  ELFI does not adapt its proposal: it is given an oracle one, the
  reference posterior's covariance × 2.38²/3 (Roberts & Rosenthal's
  scaling for d = 3), on the parameters themselves. ELFI's
  ``logit_transform_bound`` is not used: its Metropolis–Hastings ratio
  evaluates the logit Jacobian at the parameter value instead of at its
  logit (``BSL._get_mh_ratio`` passes ``params`` to
  ``_jacobian_logit_transform``, which reads them as logits), which
  changes the target: with θ ~ U(0, 1) and a simulator that ignores θ, the
  posterior is the prior (mean 0.5, sd 0.29), and ELFI 0.8.8's chain of
  6000 steps averaged 0.03 (sd 0.14) with the option, 0.49 (sd 0.29)
  without it. ELFI's likelihood (SciPy's ``multivariate_normal``)
  rejects the sample covariance of these summaries as singular (their
  scales differ by 10⁴), so ELFI's summaries are divided by fixed scales
  (their sds over 1000 simulations at the reference pilot's start): a
  fixed linear map of the summaries changes the Gaussian synthetic
  likelihood by a constant factor only, so the posterior is the same.

Reference: the pooled draws of 4 km.AM.paper() chains of ``FULL.reference_draws``
after 3000 tuning steps (another sampler than the one compared). Accuracy
is each posterior mean's error in reference posterior sds, and each sd's
ratio to the reference's; wall time is measured per run, runs alternating
between the two methods. Timing is noisy on a shared machine: the load
averages (/proc/loadavg) at start and end are recorded.

Measured (3 repeats each, release extension, an otherwise idle 2-core
machine; see ``results/ricker_vs_elfi.md``): both are accurate at this
budget, ELFI more so thanks to its oracle proposal — mean errors of 0.082
(kameleon) and 0.043 (ELFI) reference sds on average (kameleon's worst
0.23 sd, on sigma in one repeat), sds within 3 % and 2 % — and kameleon,
tuning itself, took 10.9 s per run against ELFI's 18.1 s (1.7×).

Needs ``elfi``, which pins matplotlib < 3.9 and brings GPy, dask and
ipyparallel, so it lives in its own venv, ``.venv-elfi`` (made by
``bash python/venv.sh elfi`` from ``python/requirements-elfi.txt``; ``python/run-tests.sh``
makes it). Run ``PYTHONPATH=python .venv-elfi/bin/python
python/benchmarks/ricker_vs_elfi.py [repeats]`` after building the extension
into ``.venv`` (``PYTHONPATH`` picks the package and its extension from the
source tree); writes ``python/benchmarks/results/ricker_vs_elfi.md``.
:func:`compare` at :data:`SMALL` sizes is what the test runs.
"""

from __future__ import annotations

import importlib.util
import math
import pathlib
import platform
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass

import numpy as np

import kameleon as km

HERE = pathlib.Path(__file__).resolve().parent
DATA_SEED = 1


@dataclass(frozen=True)
class Sizes:
    """The sizes of a comparison: ``budget`` likelihood estimates per run,
    the ``pilot`` included; kameleon's ``chains`` × (``tune`` + ``kept``);
    ELFI's ``elfi_burn_in``; the reference's 4 chains × (``reference_tune``
    + ``reference_draws``)."""

    budget: int
    pilot: int
    chains: int
    tune: int
    elfi_burn_in: int
    reference_draws: int
    reference_tune: int

    @property
    def kept(self) -> int:
        # each chain evaluates its start once, then once per step
        return (self.budget - self.pilot) // self.chains - self.tune - 1


FULL = Sizes(10_000, 100, 4, 1000, 2000, 25_000, 3000)
# the test's: the same code at a few seconds' cost (no accuracy to speak of)
SMALL = Sizes(300, 20, 2, 40, 60, 200, 100)


NOTES = [
    "Notes:",
    "",
    "- ELFI is given an oracle proposal (the reference posterior's covariance × 2.38²/3); kameleon adapts its "
    "own from the pilot start. A user of ELFI would need a pilot run to get such a proposal.",
    "- ELFI's summaries are divided by fixed scales (SciPy rejects their unscaled sample covariance as "
    "singular); this leaves the synthetic-likelihood posterior unchanged. Its log lines \"Estimated likelihood "
    "not finite\" are proposals with a NaN summary (a series of zeros), rejected, as kameleon rejects them.",
    "- ELFI 0.8.8 installs on Python 3.11 but requires matplotlib < 3.9 and brings dask, ipyparallel and GPy, so "
    "it runs from its own venv, `.venv-elfi` (`bash python/venv.sh elfi`, from `python/requirements-elfi.txt`).",
]


def load_example():
    path = HERE.parent / "examples" / "ricker_synthetic_likelihood.py"
    spec = importlib.util.spec_from_file_location("ricker_synthetic_likelihood", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def loadavg() -> str:
    return " ".join(pathlib.Path("/proc/loadavg").read_text().split()[:3])


def reference(ex, likelihood, x0, sizes: Sizes) -> np.ndarray:
    """The reference draws, shape (n, 3)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        idata = km.sample(
            likelihood, x0, prior=ex.PRIOR, sampler=km.AM.paper(), draws=sizes.reference_draws, tune=sizes.reference_tune,
            chains=4, seed=1000, progress=False,
        )
    return np.column_stack([idata.posterior[n].values.ravel() for n in ex.TRUTH])


def run_kameleon(ex, likelihood, seed: int, sizes: Sizes) -> tuple[np.ndarray, float, int]:
    """(draws (n, 3), seconds, likelihood estimates)."""
    start = time.perf_counter()
    x0 = ex.pilot(likelihood, sizes.pilot, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", km.SamplingWarning)
        idata = km.sample(
            likelihood, x0, prior=ex.PRIOR, draws=sizes.kept, tune=sizes.tune, chains=sizes.chains, seed=seed,
            cores=1, progress=False,
        )
    seconds = time.perf_counter() - start
    draws = np.column_stack([idata.posterior[n].values.ravel() for n in ex.TRUTH])
    estimates = sizes.pilot + sum(idata.posterior.attrs["evaluations"])
    return draws, seconds, estimates


def elfi_model(ex, observed, simulator, scale):
    """ELFI's model of the same simulator and summaries, the summaries
    divided by ``scale``."""
    import elfi

    model = elfi.ElfiModel()
    for name, marginal in ex.PRIOR.items():
        # scipy's uniform(loc, scale) on (low, low + scale)
        elfi.Prior("uniform", marginal.low, marginal.high - marginal.low, model=model, name=name)

    def simulate(log_r, sigma, phi, batch_size=1, random_state=None):
        rng = np.random.default_rng(random_state.randint(2**32))
        theta = np.column_stack(np.broadcast_arrays(log_r, sigma, phi)).reshape(-1, 3)
        if not (theta == theta[0]).all():
            raise ValueError("BSL simulates a batch at one parameter point; got several")
        return simulator(theta[0], batch_size, rng)

    elfi.Simulator(simulate, *[model[n] for n in ex.PRIOR], observed=observed[None, :], name="summaries_sim")
    elfi.Summary(lambda s: s / scale, model["summaries_sim"], name="summaries")
    return model


def run_elfi(ex, model, likelihood, proposal, seed: int, sizes: Sizes) -> tuple[np.ndarray, float, int]:
    """(draws (n, 3), seconds, likelihood estimates)."""
    import elfi

    start = time.perf_counter()
    x0 = ex.pilot(likelihood, sizes.pilot, seed)
    bsl = elfi.BSL(model, n_sim_round=ex.N_SIMULATIONS, batch_size=ex.N_SIMULATIONS, seed=seed)
    # ELFI orders the parameters by name unless told the order
    result = bsl.sample(
        sizes.budget - sizes.pilot,
        proposal,
        params0=x0[None, :],
        param_names=list(ex.TRUTH),
        burn_in=sizes.elfi_burn_in,
        bar=False,
    )
    seconds = time.perf_counter() - start
    draws = np.column_stack([result.samples[n] for n in ex.TRUTH])
    return draws, seconds, sizes.budget


def accuracy(draws: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean errors in reference sds, sd ratios) per parameter."""
    sd = ref.std(axis=0)
    return (draws.mean(axis=0) - ref.mean(axis=0)) / sd, draws.std(axis=0) / sd


def compare(sizes: Sizes, repeats: int):
    """(example module, reference draws, rows, reference seconds): each
    row is (method, seed, seconds, estimates, mean errors, sd ratios), the
    methods alternating in order from repeat to repeat."""
    import logging

    logging.getLogger("elfi").setLevel(logging.WARNING)
    ex = load_example()
    observed, simulator = ex.model(DATA_SEED)
    likelihood = km.SyntheticLikelihood(simulator, observed, ex.N_SIMULATIONS, batched=True)
    started = time.perf_counter()
    x0 = ex.pilot(likelihood, sizes.pilot, DATA_SEED)
    ref = reference(ex, likelihood, x0, sizes)
    reference_seconds = time.perf_counter() - started
    proposal = 2.38**2 / 3 * np.cov(ref.T)
    scale = simulator(x0, 1000, np.random.default_rng(0)).std(axis=0)
    model = elfi_model(ex, observed, simulator, scale)
    rows = []
    for r in range(repeats):
        seed = 10 + r
        for method in ["kameleon", "ELFI"] if r % 2 == 0 else ["ELFI", "kameleon"]:
            if method == "kameleon":
                draws, seconds, estimates = run_kameleon(ex, likelihood, seed, sizes)
            else:
                draws, seconds, estimates = run_elfi(ex, model, likelihood, proposal, seed, sizes)
            errors, ratios = accuracy(draws, ref)
            rows.append((method, seed, seconds, estimates, errors, ratios))
            print(method, seed, f"{seconds:.1f} s", np.round(errors, 3), np.round(ratios, 3), flush=True)
    return ex, ref, rows, reference_seconds


def main(repeats: int = 3) -> None:
    import elfi

    load_start = loadavg()
    ex, ref, rows, reference_seconds = compare(FULL, repeats)
    load_end = loadavg()
    write_report(ex, ref, rows, load_start, load_end, reference_seconds, elfi.__version__, FULL)


def commit() -> str:
    """The source tree's short git commit ("unknown" outside a checkout)."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=pathlib.Path(__file__).parent,
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def write_report(ex, ref, rows, load_start, load_end, reference_seconds, elfi_version, sizes: Sizes) -> None:
    names = list(ex.TRUTH)
    lines = [
        "# Ricker synthetic likelihood: kameleon vs ELFI BSL at equal simulations",
        "",
        "Made by `python/benchmarks/ricker_vs_elfi.py` (its docstring gives the set-up). Data set "
        f"{DATA_SEED} of the Ricker example; Wood's synthetic likelihood from {ex.N_SIMULATIONS} simulations; "
        f"each run {sizes.budget} likelihood estimates ({sizes.budget * ex.N_SIMULATIONS:,} simulations), its "
        "pilot included.",
        "",
        f"kameleon {km.__version__} at commit {commit()} (KAMH, {sizes.chains} chains × ({sizes.tune} tuning + {sizes.kept} kept), "
        f"cores=1), ELFI {elfi_version} (BSL, one chain, {sizes.elfi_burn_in} burn-in, oracle proposal covariance); "
        f"Python {platform.python_version()}, extension built with debug assertions: "
        f"{km._core.debug_assertions}.",
        "",
        f"Load averages (1, 5, 15 min) at start: {load_start}; at end: {load_end}. "
        + (
            "The machine was otherwise idle."
            if max(float(load_start.split()[0]), float(load_end.split()[0])) < 2.0
            else "Other work shared the machine's cores: wall times are noisy."
        ),
        "",
        f"Reference: 4 km.AM.paper() chains × ({sizes.reference_tune} + "
        f"{sizes.reference_draws}) ({reference_seconds:.0f} s): "
        + ", ".join(f"{n} {m:.4f} ± {s:.4f}" for n, m, s in zip(names, ref.mean(axis=0), ref.std(axis=0)))
        + " (mean ± sd).",
        "",
        "| method | seed | wall time (s) | estimates | "
        + " | ".join(f"{n} mean error (sd)" for n in names)
        + " | "
        + " | ".join(f"{n} sd ratio" for n in names)
        + " |",
        "|" + "---|" * (4 + 2 * len(names)),
    ]
    for method, seed, seconds, estimates, errors, ratios in rows:
        lines.append(
            f"| {method} | {seed} | {seconds:.1f} | {estimates} | "
            + " | ".join(f"{e:+.3f}" for e in errors)
            + " | "
            + " | ".join(f"{q:.3f}" for q in ratios)
            + " |"
        )
    lines += ["", "Summary over the repeats (mean of |mean error| over parameters and runs; median wall time):", ""]
    for method in ("kameleon", "ELFI"):
        mine = [row for row in rows if row[0] == method]
        err = np.mean([np.abs(row[4]).mean() for row in mine])
        sd_dev = np.mean([np.abs(row[5] - 1).mean() for row in mine])
        wall = float(np.median([row[2] for row in mine]))
        lines.append(f"- {method}: |mean error| {err:.3f} sd, |sd ratio − 1| {sd_dev:.3f}, wall time {wall:.1f} s")
    lines += ["", *NOTES]
    out = HERE / "results" / "ricker_vs_elfi.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
