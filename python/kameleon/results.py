"""Reading the chains that ``cargo xtask reproduce`` writes."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from ._arviz import inference_data

__all__ = ["load_results"]


def load_results(directory) -> dict:
    """Loads ``<directory>/chains/<target>/<sampler>[/<setting>]/<chain>.npy``
    (iterations × d, little-endian float64) into a dict keyed by
    ``(target, sampler, setting)`` of ArviZ data (posterior variable ``x``);
    a cell without a setting (its chains directly in ``<sampler>/``) has
    setting ``""``.

    Chains of unequal length are truncated to the shortest, with a warning.
    """
    root = Path(directory) / "chains"
    if not root.is_dir():
        raise FileNotFoundError(f"{root} does not exist (expected <results>/chains/...)")
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
        n = min(c.shape[0] for c in chains)
        if any(c.shape[0] != n for c in chains):
            warnings.warn(
                f"{setting_dir}: chains of unequal length {[c.shape[0] for c in chains]}; truncated to {n}",
                UserWarning,
                stacklevel=2,
            )
        key = (*setting_dir.relative_to(root).parts, "")[:3]
        out[key] = inference_data({"posterior": {"x": np.stack([c[:n] for c in chains])}})
    return out
