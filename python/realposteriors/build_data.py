"""Regenerates ``data/`` from a copy of the posteriordb folders.

    python -m realposteriors.build_data <posteriordb posteriors folder>

(with ``python/`` on ``sys.path``). For each posterior it writes

- ``data/<name>/data.json.gz``: the fields of ``data.json`` the model uses
  (values unchanged), except for diamonds, stored as the least-squares
  summary of its centred design (see :func:`diamonds_summary`);
- ``data/<name>/reference.json``: mean and sd of every constrained
  parameter over all reference draws, the relative standard error of that
  sd (from the spread over the 10 chains), and mean and sd of every
  unconstrained coordinate;
- ``data/<name>/draws.npy``: every 10th reference draw of every chain on the
  unconstrained scale, shape (10, 100, d), float64.

The output is deterministic (gzip without a time stamp).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np

from ._models import BUILDERS

DATA = Path(__file__).parent / "data"
THIN = 10

# the data fields each model reads (the others are dropped)
FIELDS = {
    "kilpisjarvi_mod-kilpisjarvi": ["N", "x", "y", "pmualpha", "psalpha", "pmubeta", "psbeta"],
    "one_comp_mm_elim_abs-one_comp_mm_elim_abs": ["t0", "D", "V", "N_t", "times", "C_hat"],
    "low_dim_gauss_mix-low_dim_gauss_mix": ["N", "y"],
    "hmm_example-hmm_example": ["N", "K", "y"],
    "bball_drive_event_0-hmm_drive_0": ["N", "K", "u", "v", "alpha"],
    "nes1996-nes": ["N", "partyid7", "real_ideo", "race_adj", "educ1", "gender", "income", "age_discrete"],
    "gp_pois_regr-gp_pois_regr": ["N", "x", "k"],
}


def read_zipped_json(path: Path):
    with zipfile.ZipFile(path) as z:
        (member,) = z.namelist()
        return json.loads(z.read(member))


def reference_array(draws: list[dict], names: tuple[str, ...]) -> np.ndarray:
    """(chains, draws, p) in the order of ``names``."""
    if set(draws[0]) != set(names):
        raise ValueError(f"reference parameters {sorted(draws[0])} differ from the model's {sorted(names)}")
    return np.array([[chain[k] for k in names] for chain in draws], dtype=np.float64).transpose(0, 2, 1)


def diamonds_summary(data: dict) -> dict:
    """The model's Gaussian likelihood needs only N, ZᵀZ, β̂ and the residual
    sum of squares of Z = [X_c, 1], X_c the predictors (X without its
    intercept column) centred at their means, as Stan's transformed data.
    The 5000 × 25 design is therefore not stored."""
    x = np.asarray(data["X"], dtype=np.float64)
    y = np.asarray(data["Y"], dtype=np.float64)
    if x.shape != (data["N"], data["K"]) or not np.all(x[:, 0] == 1) or data["prior_only"] != 0:
        raise ValueError("unexpected diamonds data")
    means = x[:, 1:].mean(axis=0)
    z = np.column_stack([x[:, 1:] - means, np.ones(len(y))])
    gram = z.T @ z
    beta_hat = np.linalg.lstsq(z, y, rcond=None)[0]
    r = y - z @ beta_hat
    return {
        "N": int(data["N"]),
        "K": int(data["K"]),
        "ZtZ": gram.tolist(),
        "beta_hat": beta_hat.tolist(),
        "rss": float(r @ r),
        "means_X": means.tolist(),
        "note": "least-squares summary of Z = [X[:, 2:K] centred, 1] and Y; see realposteriors/build_data.py",
    }


def write_gzip_json(path: Path, value) -> None:
    raw = json.dumps(value, separators=(",", ":")).encode()
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9, mtime=0) as g:
        g.write(raw)
    path.write_bytes(buffer.getvalue())


def build(source: Path, name: str) -> None:
    folder = source / name
    raw = read_zipped_json(folder / "data.json.zip")
    data = diamonds_summary(raw) if name == "diamonds-diamonds" else {k: raw[k] for k in FIELDS[name]}
    model = BUILDERS[name](data)
    ref = reference_array(read_zipped_json(folder / "reference_draws.json.zip"), model.parameter_names)
    chains, per_chain, p = ref.shape
    flat = ref.reshape(-1, p)
    unconstrained = model.unconstrain(flat).reshape(chains, per_chain, model.dim)
    back = model.constrain(unconstrained.reshape(-1, model.dim))
    if not np.allclose(back, flat, rtol=1e-6, atol=1e-12):
        raise ValueError(f"{name}: constrain(unconstrain(draws)) does not return the draws")
    sd = flat.std(axis=0, ddof=1)
    chain_sd = ref.std(axis=1, ddof=1)
    sd_relative_se = chain_sd.std(axis=0, ddof=1) / np.sqrt(chains) / sd
    u = unconstrained.reshape(-1, model.dim)
    summary = {
        "posterior": name,
        "source": "github.com/stan-dev/posteriordb, commit 28f8d3d: reference draws of this posterior",
        "chains": chains,
        "draws_per_chain": per_chain,
        "parameters": [
            {"name": k, "mean": float(m), "sd": float(s), "sd_relative_se": float(e)}
            for k, m, s, e in zip(model.parameter_names, flat.mean(axis=0), sd, sd_relative_se)
        ],
        "unconstrained": [
            {"name": k, "mean": float(m), "sd": float(s)}
            for k, m, s in zip(model.names, u.mean(axis=0), u.std(axis=0, ddof=1))
        ],
        "thinned_draws": {"file": "draws.npy", "every": THIN, "shape": [chains, per_chain // THIN, model.dim]},
    }
    out = DATA / name
    out.mkdir(parents=True, exist_ok=True)
    write_gzip_json(out / "data.json.gz", data)
    (out / "reference.json").write_text(json.dumps(summary, indent=1) + "\n")
    np.save(out / "draws.npy", np.ascontiguousarray(unconstrained[:, ::THIN, :]))
    print(f"{name}: d = {model.dim}, {chains} x {per_chain} reference draws", file=sys.stderr)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="folder holding the posteriordb posterior folders")
    parser.add_argument("--posteriors", nargs="*", default=list(BUILDERS))
    args = parser.parse_args(argv)
    for name in args.posteriors:
        build(args.source, name)


if __name__ == "__main__":
    main()
