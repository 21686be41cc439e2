"""Throughput of chains of an expensive Python log density: threads,
worker processes and a Dask cluster, and chains in lockstep.

    python python/benchmarks/parallel_throughput.py [--out FILE.md] [--steps N]

1. A Lotka–Volterra posterior whose log density solves the ODE with
   ``scipy.integrate.solve_ivp`` (about 0.7 ms per call here): steps per
   second of one chain, then of 2 chains on 2 cores through threads, worker
   processes (``parallel="process"``) and a ``dask.distributed``
   LocalCluster of 2 worker processes. The speed-up is the 2 chains'
   steps/s over the one chain's.
2. Lockstep: 8 chains of a logistic-regression posterior (1000 × 10 design,
   numpy) on one core, per call vs ``vectorize=True``.
3. Overheads: starting the process pool, and one more task on a running
   pool (a run of a trivial density on the pool minus on a thread).

Timings on a shared machine are noisy: the 1-minute load average is
recorded at the start and at the end.
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings

import numpy as np
from scipy.integrate import solve_ivp

import kameleon as km
from kameleon import _parallel

from bench import machine


# ── the Lotka–Volterra posterior ────────────────────────────────────────

TIMES = np.linspace(0.0, 15.0, 16)
TRUE = np.array([0.55, 0.028, 0.84, 0.026])  # alpha, beta, gamma, delta
START = np.array([33.0, 6.0])


def lotka_volterra(t, z, alpha, beta, gamma, delta):
    prey, predator = z
    return [alpha * prey - beta * prey * predator, -gamma * predator + delta * prey * predator]


def populations(theta):
    solution = solve_ivp(lotka_volterra, (TIMES[0], TIMES[-1]), START, t_eval=TIMES, args=tuple(theta), rtol=1e-6)
    return solution.y if solution.success else None


DATA = np.random.default_rng(1).lognormal(np.log(populations(TRUE)), 0.25)


def lv_log_posterior(log_theta):
    """Log-normal observation noise (σ = 0.25) on both populations and
    N(log θ*, 1) priors on the log parameters."""
    z = populations(np.exp(log_theta))
    if z is None or (z <= 0).any():
        return -np.inf
    residual = (np.log(DATA) - np.log(z)) / 0.25
    return -0.5 * float((residual * residual).sum()) - 0.5 * float(((log_theta - np.log(TRUE)) ** 2).sum())


# ── logistic regression ──────────────────────────────────────────────────

_rng = np.random.default_rng(2)
DESIGN = _rng.standard_normal((1000, 10))
DESIGN_T = np.ascontiguousarray(DESIGN.T)
OUTCOME = (_rng.random(1000) < 1 / (1 + np.exp(-DESIGN @ np.linspace(-1, 1, 10)))).astype(float)


# Σ yᵢηᵢ = βᵀ(Xᵀy) and Σ max(ηᵢ, 0) = ½(Σ|ηᵢ| + βᵀXᵀ1): two length-10
# vectors computed once, so a call's passes over the 1000 observations are
# only |η|, e^−|η| and log1p
LINEAR_TERM = DESIGN_T @ OUTCOME - 0.5 * DESIGN.sum(axis=0)


def logistic_rows(betas):
    """The log posterior of each row of ``betas`` (k, 10): Bernoulli
    likelihood, N(0, 10²) priors; log(1 + e^η) as max(η, 0) + log1p(e^−|η|)
    (stable, and much cheaper than ``np.logaddexp``), with the terms linear
    in η summed through ``LINEAR_TERM``."""
    a = np.abs(betas @ DESIGN_T)  # |η|, (k, 1000)
    half_abs = 0.5 * a.sum(axis=1)
    np.negative(a, out=a)
    np.exp(a, out=a)
    np.log1p(a, out=a)
    return betas @ LINEAR_TERM - half_abs - a.sum(axis=1) - 0.005 * (betas * betas).sum(axis=1)


def logistic(beta):
    return logistic_rows(beta[None, :])[0]


# ── measuring ────────────────────────────────────────────────────────────


def run_seconds(log_density, x0, chains, steps, **kwargs):
    """(wall seconds, this process's CPU seconds) of one AM run of ``steps``
    steps per chain."""
    wall, cpu = time.perf_counter(), time.process_time()
    km.sample(log_density, x0, sampler=km.AM.paper(), draws=steps // 2, tune=steps - steps // 2, chains=chains,
              seed=1, progress=False, **kwargs)
    return time.perf_counter() - wall, time.process_time() - cpu


def steps_per_second(log_density, x0, chains, steps, repeats=1, **kwargs):
    """The best of ``repeats`` runs: (steps per second over all chains,
    wall seconds). Taking the best discounts the other builds' load."""
    best = min(run_seconds(log_density, x0, chains, steps, **kwargs)[0] for _ in range(repeats))
    return chains * steps / best, best


def load() -> float:
    return os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--steps", type=int, default=2000, help="steps per chain of the Lotka-Volterra runs")
    args = parser.parse_args()
    warnings.simplefilter("ignore", km.SamplingWarning)
    lines = []

    def say(line=""):
        print(line, flush=True)
        lines.append(line)

    load_start = load()
    x0 = np.log(TRUE)
    # the first run imports ArviZ (seconds): not part of any figure
    km.sample(lv_log_posterior, x0, sampler=km.AM.paper(), draws=5, tune=5, chains=1, progress=False)
    per_call = min(_timed(lv_log_posterior, x0) for _ in range(20))
    say("# Chains of an expensive Python density: threads, processes, Dask, lockstep")
    say()
    cpu = machine()
    say(f"Machine: {cpu['cpu']}, {cpu['cores']} cores, Python {cpu['python']}, numpy {cpu['numpy']}, extension built with debug assertions: {km._core.debug_assertions}. "
        f"1-minute load average at the start: {load_start:.2f}.")
    say()
    say(f"## Lotka–Volterra (`solve_ivp`), AM, {args.steps} steps per chain")
    say()
    say(f"One log-density call: {1e3 * per_call:.2f} ms.")
    say()
    say("| run (best of 2 runs unless said) | steps/s | wall s | speed-up vs 1 chain |")
    say("| --- | ---: | ---: | ---: |")
    one, secs = steps_per_second(lv_log_posterior, x0, 1, args.steps, repeats=2, cores=1)
    say(f"| 1 chain, 1 core | {one:.0f} | {secs:.2f} | 1.00 |")
    rate, secs = steps_per_second(lv_log_posterior, x0, 2, args.steps, repeats=2, cores=2, parallel="thread")
    say(f"| 2 chains, threads | {rate:.0f} | {secs:.2f} | {rate / one:.2f} |")
    _parallel.shutdown_pool()
    rate, secs = steps_per_second(lv_log_posterior, x0, 2, args.steps, cores=2, parallel="process")
    say(f"| 2 chains, 2 processes (pool started in the run, once) | {rate:.0f} | {secs:.2f} | {rate / one:.2f} |")
    rate, secs = steps_per_second(lv_log_posterior, x0, 2, args.steps, repeats=2, cores=2, parallel="process")
    say(f"| 2 chains, 2 processes (pool running) | {rate:.0f} | {secs:.2f} | {rate / one:.2f} |")
    rate, secs = steps_per_second(lv_log_posterior, x0, 2, args.steps, repeats=2, cores=2)
    say(f"| 2 chains, default rule (cores=2) | {rate:.0f} | {secs:.2f} | {rate / one:.2f} |")
    _parallel.shutdown_pool()
    try:
        import distributed
    except ImportError:
        say("| 2 chains, Dask | dask.distributed is not installed | | |")
    else:
        start = time.perf_counter()
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as client:
            cluster_start = time.perf_counter() - start
            executor = client.get_executor()
            steps_per_second(lv_log_posterior, x0, 2, 20, executor=executor)  # the workers import kameleon
            rate, secs = steps_per_second(lv_log_posterior, x0, 2, args.steps, repeats=2, executor=executor)
        say(f"| 2 chains, Dask LocalCluster of 2 worker processes | {rate:.0f} | {secs:.2f} | {rate / one:.2f} |")
        say()
        say(f"Starting the LocalCluster took {cluster_start:.2f} s (not in the run's time; its workers had run "
            "one short run before).")
    say()
    say("## Lockstep: logistic regression (1000 × 10 design), AM, 8 chains, one core")
    say()
    b0 = np.zeros(10)
    betas = np.random.default_rng(0).standard_normal((8, 10)) * 0.1
    per_chain = 4000
    steps = 8 * per_chain

    def seconds(f):
        wall, cpu = time.perf_counter(), time.process_time()
        f()
        return time.perf_counter() - wall, time.process_time() - cpu

    def best(a, b):
        return min(a[0], b[0]), min(a[1], b[1])

    # The runs and the density's calls alone alternate, so that a change of
    # the machine's load between them does not decide the ratios. All run
    # on one thread of this process, so its CPU time (less disturbed by
    # other processes than the wall time) gives the ratios too.
    # The same runs on a density that costs almost nothing: what is left is
    # the sampler's own steps and the crossings between Rust and Python.
    def free(beta):
        return -0.5 * float(beta @ beta)

    def free_rows(betas):
        return -0.5 * (betas * betas).sum(axis=1)

    per_point = batched = singles = batches = free_point = free_batched = (math.inf, math.inf)
    for _ in range(3):
        per_point = best(per_point, run_seconds(logistic, b0, 8, per_chain, cores=1, parallel="thread"))
        batched = best(batched, run_seconds(logistic_rows, b0, 8, per_chain, vectorize=True))
        singles = best(singles, seconds(lambda: [logistic(betas[k % 8]) for k in range(steps)]))
        batches = best(batches, seconds(lambda: [logistic_rows(betas) for _ in range(per_chain)]))
        free_point = best(free_point, run_seconds(free, b0, 8, per_chain, cores=1, parallel="thread"))
        free_batched = best(free_batched, run_seconds(free_rows, b0, 8, per_chain, vectorize=True))
    say("| run (best of 3) | steps/s (all chains) | wall s | CPU s |")
    say("| --- | ---: | ---: | ---: |")
    say(f"| one call per point | {steps / per_point[0]:.0f} | {per_point[0]:.2f} | {per_point[1]:.2f} |")
    say(f"| `vectorize=True` (8 points per call) | {steps / batched[0]:.0f} | {batched[0]:.2f} | "
        f"{batched[1]:.2f} |")
    say(f"| the density alone, {steps} calls of one point | | {singles[0]:.2f} | {singles[1]:.2f} |")
    say(f"| the density alone, {per_chain} calls of 8 points | | {batches[0]:.2f} | {batches[1]:.2f} |")
    say(f"| one call per point, a density of negligible cost | {steps / free_point[0]:.0f} | {free_point[0]:.2f} | "
        f"{free_point[1]:.2f} |")
    say(f"| `vectorize=True`, a density of negligible cost | {steps / free_batched[0]:.0f} | {free_batched[0]:.2f} | "
        f"{free_batched[1]:.2f} |")
    say()
    say(f"Speed-up of lockstep: {per_point[0] / batched[0]:.2f}× in steps per wall second "
        f"({per_point[1] / batched[1]:.2f}× per CPU second).")
    say()
    say(f"The density's own batching gain: one call of 8 points takes the time of "
        f"{singles[0] / batches[0]:.1f} calls of one ({singles[1] / batches[1]:.1f} in CPU time), since "
        "the softplus over the 1000 observations of each point is not shared by a batch. Lockstep still "
        "has the density's calls to make: with everything else free, it would run at most "
        f"{per_point[0] / batches[0]:.1f}× ({per_point[1] / batches[1]:.1f}× in CPU time) the steps per "
        "second of one call per point.")
    say()
    # per lockstep step of the 8 chains, in microseconds
    step_us = 1e6 / per_chain
    say(f"What the runs add to the density's calls, per step of the 8 chains: "
        f"{step_us * (per_point[0] - singles[0]):.1f} µs one call per point, "
        f"{step_us * (batched[0] - batches[0]):.1f} µs in lockstep; with a density of negligible cost "
        f"a step of the 8 chains takes {step_us * free_point[0]:.1f} µs and {step_us * free_batched[0]:.1f} µs: "
        "AM's 8 steps themselves, and the crossings between Rust and Python. Counting them, lockstep on this "
        f"density can run at most {(singles[0] + free_point[0]) / (batches[0] + free_batched[0]):.2f}× the "
        "steps per second of one call per point (the density's batched call plus the runs' own cost, against "
        "8 single calls plus it).")
    say()
    say("## Overheads of process workers")
    say()
    _parallel.shutdown_pool()
    cheap = lambda x: -0.5 * float(x @ x)  # noqa: E731
    start = time.perf_counter()
    km.sample(cheap, np.zeros(2), sampler=km.AM.paper(), draws=1, tune=0, chains=2, cores=2, parallel="process",
              progress=False)
    cold = time.perf_counter() - start
    warm = []
    thread = []
    for _ in range(5):
        start = time.perf_counter()
        km.sample(cheap, np.zeros(2), sampler=km.AM.paper(), draws=1, tune=0, chains=2, cores=2, parallel="process",
                  progress=False)
        warm.append(time.perf_counter() - start)
        start = time.perf_counter()
        km.sample(cheap, np.zeros(2), sampler=km.AM.paper(), draws=1, tune=0, chains=2, cores=2, parallel="thread",
                  progress=False)
        thread.append(time.perf_counter() - start)
    say(f"- A run of 2 one-step chains that starts the pool of 2 workers: {cold:.2f} s.")
    say(f"- The same on the running pool: {1e3 * min(warm):.0f} ms (on threads: {1e3 * min(thread):.0f} ms), "
        f"so about {1e3 * (min(warm) - min(thread)):.0f} ms per run for the tasks (pickling the density, "
        "the round trips, the polling).")
    # a density that holds a dataset: its pickle reaches each worker once
    data = np.ones(50_000_000 // 8)
    heavy = lambda x: -0.5 * float(x @ x) + 0.0 * data[0]  # noqa: E731
    heavy_runs = {}
    for name, density in (("small", cheap), ("heavy", heavy)):
        chains, ensemble = math.inf, math.inf
        for _ in range(2):
            start = time.perf_counter()
            km.sample(density, np.zeros(2), sampler=km.AM.paper(), draws=100, tune=0, chains=8, cores=2,
                      parallel="process", progress=False)
            chains = min(chains, time.perf_counter() - start)
            start = time.perf_counter()
            km.sample_ensemble(density, np.zeros(2), walkers=8, draws=50, tune=0, cores=2, progress=False)
            ensemble = min(ensemble, time.perf_counter() - start)
        heavy_runs[name] = chains, ensemble
    _parallel.shutdown_pool()
    say(f"- A density that holds a 50 MB array (pickled once, read once per worker): 8 chains of 100 steps on "
        f"the running pool {1e3 * heavy_runs['heavy'][0]:.0f} ms against {1e3 * heavy_runs['small'][0]:.0f} ms "
        f"for a small density; the ensemble (8 walkers, 50 sweeps: 101 evaluations of the half sweeps on 2 "
        f"workers) {1e3 * heavy_runs['heavy'][1]:.0f} ms against {1e3 * heavy_runs['small'][1]:.0f} ms.")
    say()
    load_end = load()
    say(f"1-minute load average at the end: {load_end:.2f}. The figures are one run's (best of a few), "
        "not a careful benchmark.")
    if max(load_start, load_end) > (os.cpu_count() or 1):
        say()
        say("With a load above the number of cores, the scheduler shares the CPU between processes (and "
            "threads): two worker processes then get about two shares where one chain got one, so a speed-up "
            "against one chain can exceed the number of cores. Compare the rows with each other (processes "
            "against threads), and see the overheads, which do not depend on the load as much.")
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


def _timed(f, x) -> float:
    start = time.perf_counter()
    f(x)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
