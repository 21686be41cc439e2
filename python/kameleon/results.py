"""Reading the chains that ``cargo xtask reproduce`` writes."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np

from ._arviz import inference_data

__all__ = ["load_results"]


def _file_name(label: str) -> str:
    """``label`` as xtask names its directory: every character other than
    ASCII letters, digits and ``-_.=`` replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9\-_.=]", "_", label)


def _params(params: dict) -> dict:
    """Run parameters as xtask records them (``paper`` only when true)."""
    return {"paper": False, **params}


def _summary_cells(directory: Path):
    """The cells ``<directory>/summary.json`` records, keyed as
    :func:`load_results` keys them, with the summary's path and run
    parameters; ``None`` when there is no summary."""
    path = directory / "summary.json"
    if not path.is_file():
        return None
    try:
        summary = json.loads(path.read_text())
        params = _params(summary["params"])
        cells = summary["cells"]
        keyed = {
            (_file_name(c["target"]), _file_name(c["sampler"]), _file_name(c["setting"])): c
            for c in cells
        }
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"{path} cannot be read as xtask's summary ({e!r}): restore it, or move it away "
            "to read the chains without checking them against it"
        ) from e
    return path, keyed, params


def _check_against_summary(cell_dir: Path, key, files, chains, summary) -> None:
    """Raises a ValueError unless the chain files of a cell are those its
    summary records: files ``0.npy`` … ``<k-1>.npy`` for its k chains,
    each of its iterations, and each chain's job record (when there is
    one) made with the summary's run parameters."""
    path, cells, params = summary
    cell = cells.get(key)
    if cell is None:
        warnings.warn(
            f"{cell_dir}: {path} records no cell {' '.join(key).strip()} (the chains of a "
            "run restricted to some settings, not yet folded into the summary?); read "
            "without a check",
            UserWarning,
            stacklevel=3,
        )
        return
    expected = cell["chains"] if cell.get("status") == "done" else 0
    names = sorted(f.name for f in files)
    if names != sorted(f"{k}.npy" for k in range(expected)):
        raise ValueError(
            f"cell {' '.join(key).strip()}: {cell_dir} holds {len(files)} chain file(s) "
            f"({', '.join(names)}) but {path} records {expected} chain(s): some files are "
            "not the chains of the run the summary describes (left by an earlier run, or "
            "deleted); rerun `cargo xtask reproduce` into this directory, or delete the "
            "files that do not belong"
        )
    rows = sorted({c.shape[0] for c in chains})
    if rows != [cell["iterations"]]:
        raise ValueError(
            f"cell {' '.join(key).strip()}: the chains in {cell_dir} have {rows} draws but "
            f"{path} records {cell['iterations']} iterations per chain: they are not the "
            "chains of the run the summary describes; rerun `cargo xtask reproduce` into "
            "this directory"
        )
    jobs = path.parent / "jobs"
    target, sampler, setting = key
    for k in range(expected):
        record = jobs / f"{target}__{sampler}__{setting or '-'}__{k}.json"
        try:
            made_with = _params(json.loads(record.read_text())["params"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if made_with != params:
            raise ValueError(
                f"cell {' '.join(key).strip()}: chain {k} was made with {made_with} "
                f"({record}), but {path} describes a run with {params}: a later run that "
                "did not finish replaced some chains; rerun it to the end, or rerun "
                "`cargo xtask reproduce` with the summary's parameters"
            )


def load_results(directory) -> dict:
    """Loads ``<directory>/chains/<target>/<sampler>[/<setting>]/<chain>.npy``
    (iterations × d, little-endian float64) into a dict keyed by
    ``(target, sampler, setting)`` of ArviZ data (posterior variable ``x``);
    a cell without a setting (its chains directly in ``<sampler>/``) has
    setting ``""``.

    When ``<directory>/summary.json`` exists, each cell's chain files must
    be those it records (``0.npy`` … for its number of chains, each of its
    iterations, made with its run parameters as the chains' records in
    ``jobs/`` say): a ValueError naming the cell and the counts otherwise
    (e.g. the files an earlier run with more chains left, or chains a later
    run that did not finish replaced). A cell the summary does not record
    is read with a warning.

    Without a summary, chains of unequal length are truncated to the
    shortest, with a warning.
    """
    directory = Path(directory)
    root = directory / "chains"
    if not root.is_dir():
        raise FileNotFoundError(f"{root} does not exist (expected <results>/chains/...)")
    summary = _summary_cells(directory)
    out = {}
    cell_dirs = [p for pattern in ("*/*", "*/*/*") for p in root.glob(pattern) if p.is_dir()]
    for setting_dir in sorted(cell_dirs):
        files = sorted(setting_dir.glob("*.npy"), key=lambda p: (len(p.stem), p.stem))
        if not files:
            continue
        chains = [np.load(f) for f in files]
        for f, c in zip(files, chains):
            if c.ndim != 2:
                raise ValueError(f"{f} has shape {c.shape}; expected (iterations, d)")
        key = (*setting_dir.relative_to(root).parts, "")[:3]
        if summary is not None:
            _check_against_summary(setting_dir, key, files, chains, summary)
        n = min(c.shape[0] for c in chains)
        if any(c.shape[0] != n for c in chains):
            warnings.warn(
                f"{setting_dir}: chains of unequal length {[c.shape[0] for c in chains]}; truncated to {n}",
                UserWarning,
                stacklevel=2,
            )
        out[key] = inference_data({"posterior": {"x": np.stack([c[:n] for c in chains])}})
    return out
