"""The Ricker comparison with ELFI (python/benchmarks/ricker_vs_elfi.py) at
its small size, with ELFI for real: in the ELFI venv (.venv-elfi, made by
``bash python/venv.sh elfi``; python/run-tests.sh makes it), with this
source tree's kameleon and its extension (built into .venv)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-elfi"
# venv.sh writes the stamp once every requirement is installed
READY = (VENV / ".requirements.sha256").exists() and (VENV / "bin" / "python").exists()

SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import elfi
import ricker_vs_elfi as bench
ex, ref, rows, _ = bench.compare(bench.SMALL, 1)
print(json.dumps({
    "elfi": elfi.__version__,
    "reference": ref.shape,
    "support": [list(p.support) for p in ex.PRIOR.values()],
    "rows": [
        {"method": m, "estimates": e, "errors": list(err), "ratios": list(q),
         "means": list(ref.mean(axis=0) + err * ref.std(axis=0))}
        for m, _, _, e, err, q in rows
    ],
}))
"""


@pytest.mark.skipif(
    not READY, reason="no ELFI venv (.venv-elfi): `bash python/venv.sh elfi` makes it (python/run-tests.sh does)"
)
def test_the_ricker_comparison_runs_with_elfi_at_small_size():
    sys.path.insert(0, str(ROOT / "python" / "benchmarks"))
    try:
        import ricker_vs_elfi as bench
    finally:
        sys.path.pop(0)
    sizes = bench.SMALL
    proc = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", SCRIPT, str(ROOT / "python" / "benchmarks")],
        env=dict(os.environ, PYTHONPATH=str(ROOT / "python")),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["elfi"] == "0.8.8"
    assert result["reference"][0] == 4 * sizes.reference_draws
    rows = {row["method"]: row for row in result["rows"]}
    assert set(rows) == {"kameleon", "ELFI"}
    # equal budgets: ELFI spends all of it, kameleon all but the remainder of
    # splitting it over its chains
    assert rows["ELFI"]["estimates"] == sizes.budget
    assert sizes.budget - sizes.chains < rows["kameleon"]["estimates"] <= sizes.budget
    # Accuracy is not assessed at this size: the reference (4 × 200 draws)
    # underestimates the posterior's sds severalfold, so errors in its sds
    # mean nothing (the full-size comparison is
    # python/benchmarks/results/ricker_vs_elfi.md). What is checked: each
    # method's chains moved (sd > 0) and their means lie inside the prior's
    # support.
    for row in rows.values():
        assert all(math.isfinite(e) for e in row["errors"]), row
        assert all(q > 0 for q in row["ratios"]), row
        for mean, (low, high) in zip(row["means"], result["support"]):
            assert low < mean < high, row
