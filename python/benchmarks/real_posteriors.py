"""The samplers on the eight posteriordb posteriors of ``realposteriors``.

For each posterior and sampler, ``--seeds`` runs (default 3) of the same
budget of log-density evaluations: 4 chains × (5 000 tuning + 20 000 kept
steps) at ``--size full`` (100 000 evaluations), 4 × (500 + 2 000) at
``small``. The single-chain samplers start from one point, the
unconstrained reference mean, as a user would give it (``km.sample``
spreads chains 1, 2, 3 around it with its seeded jitter). The ensemble samplers (``ensemble``: ``km.sample_ensemble``;
``emcee``) get the same total with max(2d, 32) walkers, the first 20 % of
the sweeps discarded as burn-in; their walkers start at the reference mean
plus a seeded jitter shaped like the posterior (``Posterior.starts``), the
spread an ensemble needs — a head start the single-chain samplers do not
get.

A run passes when ``realposteriors.score`` passes its kept draws: every
constrained parameter's mean within 0.1 reference sd of the reference mean
and its sd within 10 % of the reference sd. A (sampler, posterior) passes
when at least 2 of its 3 runs do (generally: more than half). Reported per
(sampler, posterior), as medians over the seeds: acceptance rate, minimum
bulk ESS over the unconstrained coordinates per 1000 log-density
evaluations (tuning included in the evaluations; for the ensembles the
walkers are taken as chains, which overstates their ESS somewhat since
walkers interact) and wall time (``--cores``, default 1: on more, the
chains run in worker processes).

    .venv/bin/python python/benchmarks/real_posteriors.py --samplers AM --size full

writes ``real_posteriors_<size>.md`` and ``.json`` to ``--out``. Runs
already in the JSON file of that size are kept (unless ``--fresh``) and
replaced when re-run, so samplers can be run one at a time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
import warnings
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # python/: realposteriors

import kameleon as km  # noqa: E402
import realposteriors as rp  # noqa: E402
from bench import machine  # noqa: E402
from kameleon import diagnostics  # noqa: E402

SIZES = {
    "full": {"chains": 4, "tune": 5_000, "draws": 20_000},
    "small": {"chains": 4, "tune": 500, "draws": 2_000},
}
BURN_IN = 0.2  # fraction of the ensembles' sweeps discarded

SAMPLERS = {
    "KAMH": lambda: km.KAMH(),
    "PCAKameleon": lambda: km.PCAKameleon(),
    "FKAMH": lambda: km.FKAMH(),
    "CKAM": lambda: km.CKAM(),
    "KMCLite": lambda: km.KMCLite(),
    "KMCFinite": lambda: km.KMCFinite(),
    "RandomWalk(learned)": lambda: km.RandomWalk(learned=True),
    "AM": lambda: km.AM(),
    "AM(learned)": lambda: km.AM(scale="learned"),
    "AMPCA": lambda: km.AMPCA(),
    "ensemble": None,
    "emcee": None,
}

# The papers' settings, in the target's units: the defaults before the
# samplers whitened and tuned themselves (``--samplers KAMH.paper ...``).
PAPER_SETTINGS = {
    "KAMH.paper": lambda: km.KAMH.paper(),
    "PCAKameleon.paper": lambda: km.PCAKameleon.paper(),
    "FKAMH.paper": lambda: km.FKAMH.paper(),
    "CKAM.paper": lambda: km.CKAM.paper(),
    "KMCLite.paper": lambda: km.KMCLite.paper(),
    "KMCFinite.paper": lambda: km.KMCFinite.paper(),
    "RandomWalk(fixed)": lambda: km.RandomWalk(learned=False, whiten=False),
    "AM.paper": lambda: km.AM.paper(),
    "AM.paper(learned)": lambda: km.AM.paper("learned"),
    "AMPCA.paper": lambda: km.AMPCA.paper(),
    # not a paper's: KMC finite on the pilot's map alone, as before
    # re-whitening became its default
    "KMCFinite(rewhiten=False)": lambda: km.KMCFinite(rewhiten=False),
    # not a paper's: KMC's step factor learned toward a lower acceptance
    # within a lower floor, the settings that accept 0.5 or more on standard
    # normals up to d = 20 (kmc_standard_normal.py)
    "KMCLite(target_accept=0.62, step_factor_range=(0.3, 20))": lambda: km.KMCLite(
        target_accept=0.62, step_factor_range=(0.3, 20.0)
    ),
    "KMCFinite(target_accept=0.62, step_factor_range=(0.4, 20))": lambda: km.KMCFinite(
        target_accept=0.62, step_factor_range=(0.4, 20.0)
    ),
}

SHORT = {
    "kilpisjarvi_mod-kilpisjarvi": "kilpisjarvi",
    "one_comp_mm_elim_abs-one_comp_mm_elim_abs": "one_comp (ODE)",
    "low_dim_gauss_mix-low_dim_gauss_mix": "gauss_mix",
    "hmm_example-hmm_example": "hmm_example",
    "bball_drive_event_0-hmm_drive_0": "hmm_drive_0",
    "nes1996-nes": "nes",
    "gp_pois_regr-gp_pois_regr": "gp_pois_regr",
    "diamonds-diamonds": "diamonds",
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def starts(post: rp.Posterior, n: int, seed: int) -> np.ndarray:
    """Seeded starting points, different per posterior and seed."""
    return post.starts(n, seed=[seed, zlib.crc32(post.name.encode())])


def min_ess(draws: np.ndarray) -> float:
    """Minimum bulk ESS over the coordinates of draws (chains, n, d)."""
    return float(np.min(diagnostics.ess_bulk(np.ascontiguousarray(draws))))


def run_kameleon(name: str, post: rp.Posterior, size: dict, seed: int, cores: int) -> dict:
    sampler = {**SAMPLERS, **PAPER_SETTINGS}[name]()
    # one point, as a user gives it: km.sample spreads chains 1.. around it
    x0 = post.x0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        idata = km.sample(
            post.log_density,
            x0,
            sampler=sampler,
            draws=size["draws"],
            tune=size["tune"],
            chains=size["chains"],
            cores=cores,
            seed=seed,
            progress=False,
        )
        seconds = time.perf_counter() - start
    draws = np.asarray(idata.posterior["x"].values)  # (chains, kept, d)
    attrs = dict(idata.posterior.attrs)
    evaluations = attrs.get("evaluations")
    if evaluations is None:  # an extension without the count: the nominal budget
        evaluations = [size["tune"] + size["draws"]] * size["chains"]
    evaluations = int(np.sum(evaluations))
    accepted = np.asarray(idata.sample_stats["accepted"].values, dtype=float)
    return {
        "draws": draws,
        "seconds": seconds,
        "evaluations": evaluations,
        "acceptance": float(accepted.mean()) if accepted.size else math.nan,
        "warnings": [str(w.message) for w in caught],
    }


def ensemble_shape(post: rp.Posterior, size: dict) -> tuple[int, int, int]:
    """(walkers, burn-in sweeps, kept sweeps) for the same evaluation budget."""
    walkers = max(2 * post.dim, 32)
    sweeps = size["chains"] * (size["tune"] + size["draws"]) // walkers
    burn = int(round(BURN_IN * sweeps))
    return walkers, burn, sweeps - burn


def run_ensemble(post: rp.Posterior, size: dict, seed: int) -> dict:
    walkers, burn, kept = ensemble_shape(post, size)
    x0 = starts(post, walkers, seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        idata = km.sample_ensemble(post.log_density, x0, walkers=walkers, draws=kept, tune=burn, seed=seed, progress=False)
        seconds = time.perf_counter() - start
    accepted = np.asarray(idata.sample_stats["accepted"].values, dtype=float)
    return {
        "draws": np.asarray(idata.posterior["x"].values),  # (walkers, kept, d)
        "seconds": seconds,
        "evaluations": walkers * (burn + kept),
        "acceptance": float(accepted.mean()),
        "warnings": [str(w.message) for w in caught],
        "walkers": walkers,
    }


def run_emcee(post: rp.Posterior, size: dict, seed: int) -> dict:
    import emcee

    walkers, burn, kept = ensemble_shape(post, size)
    x0 = starts(post, walkers, seed)
    sampler = emcee.EnsembleSampler(walkers, post.dim, post.log_density)
    sampler.random_state = np.random.RandomState(seed).get_state()
    start = time.perf_counter()
    sampler.run_mcmc(x0, burn + kept, progress=False)
    seconds = time.perf_counter() - start
    chain = sampler.get_chain()[burn:]  # (kept, walkers, d)
    return {
        "draws": np.ascontiguousarray(np.swapaxes(chain, 0, 1)),
        "seconds": seconds,
        "evaluations": walkers * (burn + kept),
        # emcee keeps no per-sweep record: the acceptance over all sweeps
        "acceptance": float(np.mean(sampler.acceptance_fraction)),
        "warnings": [],
        "walkers": walkers,
    }


def one_run(name: str, post: rp.Posterior, size: dict, seed: int, cores: int) -> dict:
    if name == "ensemble":
        out = run_ensemble(post, size, seed)
    elif name == "emcee":
        out = run_emcee(post, size, seed)
    else:
        out = run_kameleon(name, post, size, seed, cores)
    draws = out.pop("draws")
    score = rp.score(post, draws)
    ess = min_ess(draws)
    failed = [p for p in score["parameters"] if not p["passed"]]
    out.update(
        {
            "passed": score["passed"],
            "min_ess_bulk": ess,
            "min_ess_per_1000_evals": ess / out["evaluations"] * 1000.0,
            "worst_mean_error": score["worst_mean_error"],
            "worst_sd_error": score["worst_sd_error"],
            "failed_parameters": [p["name"] for p in failed],
            "parameters": [
                {k: p[k] for k in ("name", "mean_error", "sd_ratio", "passed")} for p in score["parameters"]
            ],
        }
    )
    return out


def summarise(runs: list[dict]) -> dict:
    """Per (sampler, posterior): pass (more than half of the seeds), medians."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in runs:
        groups.setdefault((r["sampler"], r["posterior"]), []).append(r)
    out: dict[str, dict[str, dict]] = {}
    for (sampler, posterior), rs in groups.items():
        ok = [r for r in rs if "error" not in r]
        passes = sum(bool(r["passed"]) for r in ok)

        def median(key):
            values = [r[key] for r in ok if r.get(key) is not None and np.isfinite(r[key])]
            return float(np.median(values)) if values else None

        out.setdefault(sampler, {})[posterior] = {
            "passed": passes * 2 > len(rs),
            "passes": passes,
            "seeds": len(rs),
            "errors": len(rs) - len(ok),
            "acceptance": median("acceptance"),
            "min_ess_per_1000_evals": median("min_ess_per_1000_evals"),
            "seconds": median("seconds"),
            "worst_mean_error": median("worst_mean_error"),
            "worst_sd_error": median("worst_sd_error"),
        }
    return out


def _fmt(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


NOTES_HEADING = "## Reading the table"


def markdown(summary: dict, config: dict, posteriors: list[str]) -> str:
    samplers = [s for s in SAMPLERS if s in summary] + sorted(set(summary) - set(SAMPLERS))
    cols = [SHORT.get(p, p) for p in posteriors]
    budget = config["size"]
    lines = [
        f"# Samplers on the posteriordb posteriors ({budget['name']} size)",
        "",
        f"Budget per run: {budget['chains']} chains × ({budget['tune']} tuning + {budget['draws']} kept) "
        f"log-density evaluations; the ensembles the same total with max(2d, 32) walkers, first "
        f"{BURN_IN:.0%} of the sweeps discarded. Seeds: {', '.join(map(str, config['seeds']))}. "
        "A cell passes (✓) when more than half of its seeds pass: every constrained parameter's mean "
        "within 0.1 reference sd of the reference and its sd within 10 % of the reference sd "
        "(`realposteriors.score`; one_comp's K_m and V_m, which have no finite variance, on their logs). "
        "Numbers are medians over the seeds.",
        "",
        "## Pass and minimum bulk ESS per 1000 log-density evaluations",
        "",
        "| sampler | " + " | ".join(cols) + " | passed |",
        "|---|" + "---|" * len(cols) + "---|",
    ]

    def cell(s, p, body):
        c = summary[s].get(p)
        if c is None:
            return "–"
        mark = "✓" if c["passed"] else "✗"
        return f"{mark} {c['passes']}/{c['seeds']} · {body(c)}"

    for s in samplers:
        row = [cell(s, p, lambda c: _fmt(c["min_ess_per_1000_evals"], ".2f")) for p in posteriors]
        n_pass = sum(1 for p in posteriors if summary[s].get(p, {}).get("passed"))
        n_run = sum(1 for p in posteriors if p in summary[s])
        lines.append(f"| {s} | " + " | ".join(row) + f" | {n_pass}/{n_run} |")
    for title, key, spec in (
        ("Acceptance rate", "acceptance", ".3f"),
        ("Wall time per run (s; rows run on different days, at different loads, some with --cores 2)", "seconds", ".1f"),
        ("Worst |mean error| (reference sds)", "worst_mean_error", ".3f"),
        ("Worst |sd ratio − 1|", "worst_sd_error", ".3f"),
    ):
        lines += ["", f"## {title}", "", "| sampler | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
        for s in samplers:
            row = [_fmt(summary[s].get(p, {}).get(key), spec) for p in posteriors]
            lines.append(f"| {s} | " + " | ".join(row) + " |")
    lines += [
        "",
        "ESS: bulk ESS (kameleon.diagnostics.ess_bulk) of the kept unconstrained draws, minimum over "
        "the coordinates, divided by all evaluations of the run (tuning and burn-in included). For the "
        "ensembles the walkers are taken as chains, which overstates their ESS somewhat (the walkers "
        "interact).",
        "",
        f"Machine: {config['machine']['cpu']}, {config['machine']['cores']} cores; "
        f"kameleon {config['kameleon_version']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument(
        "--samplers",
        nargs="+",
        default=list(SAMPLERS),
        metavar="NAME",
        help=", ".join(SAMPLERS) + " (the default), or the papers' settings: " + ", ".join(PAPER_SETTINGS),
    )
    parser.add_argument(
        "--posteriors", nargs="+", default=list(rp.NAMES), metavar="NAME", help="full or short names (see realposteriors.resolve)"
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--cores", type=int, default=1, help="cores for the kameleon chains (default 1)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "real_posteriors")
    parser.add_argument("--fresh", action="store_true", help="discard the runs already in the JSON file")
    args = parser.parse_args(argv)

    known = {**SAMPLERS, **PAPER_SETTINGS}
    unknown = [s for s in args.samplers if s not in known]
    if unknown:
        parser.error(f"unknown samplers {unknown}; known: {', '.join(known)}")
    posteriors = [rp.resolve(p) for p in args.posteriors]
    size = SIZES[args.size]
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / f"real_posteriors_{args.size}.json"
    md_path = args.out / f"real_posteriors_{args.size}.md"

    runs: list[dict] = []
    if json_path.exists() and not args.fresh:
        runs = json.loads(json_path.read_text())["runs"]
    # the hand-written section at the end of the table's file is kept
    notes = ""
    if md_path.exists():
        text = md_path.read_text()
        if NOTES_HEADING in text:
            notes = "\n" + text[text.index(NOTES_HEADING) :]
    todo = [(s, p, seed) for s in args.samplers for p in posteriors for seed in args.seeds]
    redo = {(s, p, seed) for s, p, seed in todo}
    runs = [r for r in runs if (r["sampler"], r["posterior"], r["seed"]) not in redo]

    config = {
        "size": {"name": args.size, **size},
        "seeds": args.seeds,
        "burn_in_ensembles": BURN_IN,
        "cores": args.cores,
        "machine": machine(),
        "kameleon_version": getattr(km, "__version__", "unknown"),
    }
    total_start = time.perf_counter()
    for i, (s, p, seed) in enumerate(todo, 1):
        post = rp.load(p)
        record = {"sampler": s, "posterior": p, "seed": seed}
        try:
            record.update(one_run(s, post, size, seed, args.cores))
            log(
                f"[{i}/{len(todo)}] {s} × {SHORT[p]} seed {seed}: {'pass' if record['passed'] else 'FAIL'}"
                f" (worst mean err {record['worst_mean_error']:.3f} sd, sd err {record['worst_sd_error']:.3f}"
                f"{'; ' + ', '.join(record['failed_parameters'][:4]) if record['failed_parameters'] else ''}), "
                f"acc {record['acceptance']:.3f}, min ESS/1000 evals {record['min_ess_per_1000_evals']:.2f}, "
                f"{record['seconds']:.1f} s"
            )
        except Exception as error:  # one failing run must not stop the benchmark
            record.update({"error": f"{type(error).__name__}: {error}", "passed": False})
            log(f"[{i}/{len(todo)}] {s} × {SHORT[p]} seed {seed}: ERROR {record['error']}")
            log(traceback.format_exc())
        runs.append(record)
        # written after every run, so an interrupted benchmark keeps its results
        summary = summarise(runs)
        done = [q for q in rp.NAMES if any(r["posterior"] == q for r in runs)]
        json_path.write_text(json.dumps({"config": config, "summary": summary, "runs": runs}, indent=1) + "\n")
        md_path.write_text(markdown(summary, config, done) + notes)
    log(f"done in {time.perf_counter() - total_start:.0f} s: {md_path}, {json_path}")


if __name__ == "__main__":
    main()
