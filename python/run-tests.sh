#!/usr/bin/env bash
# Runs the Python package's tests on both ArviZ lines; exits non-zero on any
# failure. Idempotent.
#
# 1. Python 3.11, ArviZ 0.x (.venv): builds the extension into the venv with
#    `maturin develop` (editable) and runs the whole pytest suite, passing
#    this script's arguments on to pytest.
# 2. Python 3.12, ArviZ 1.x (.venv312): installs the same abi3 wheel (built
#    by .venv's maturin from the same cargo build, so no second compile) and
#    runs the subset below. Skipped, with a message, when venv.sh finds no
#    Python 3.12 ($PYTHON312 names one).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

python="$(bash "$root/python/venv.sh")"
venv="$(dirname "$(dirname "$python")")"
# maturin develop builds with the workspace's dev profile (optimised) into
# the shared target/ directory and installs the package in editable mode.
VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" "$venv/bin/maturin" develop --quiet
"$python" -m pytest -q "$root/python/tests" "$@"

# The ArviZ 1 run: the ArviZ output, its netCDF round trip, the diagnostics
# against ArviZ's, sample/resume/extend/ensemble, and km.from_pymc on PyMC 6.
# The whole suite takes ~2 minutes there; the two tests left out are the
# slowest of these files (9 s and 5 s) and test nothing ArviZ touches.
subset=(
    python/tests/test_arviz_versions.py
    python/tests/test_pymc.py
    python/tests/test_sample.py
    python/tests/test_run_checks.py
    python/tests/test_run_control.py
    python/tests/test_ensemble.py
    python/tests/test_diagnostics.py
    --deselect python/tests/test_ensemble.py::test_moments_and_acceptance_agree_with_emcee
    --deselect python/tests/test_sample.py::test_sigint_returns_partial_draws_with_a_warning
)
status=0
python312="$(bash "$root/python/venv.sh" 3.12)" || status=$?
if [[ $status -eq 69 ]]; then
    echo "run-tests.sh: skipping the Python 3.12 / ArviZ 1 run: no Python 3.12 (set PYTHON312)" >&2
    exit 0
elif [[ $status -ne 0 ]]; then
    exit "$status"
fi
# abi3: the wheel built for 3.11 is the one 3.12 loads. A wheel from a 3.12
# maturin would recompile pyo3 on every switch of interpreter.
# a directory of this run's own: concurrent runs share target/
wheels="$(mktemp -d "$root/target/wheels-abi3.XXXXXX")"
trap 'rm -rf "$wheels"' EXIT
"$venv/bin/maturin" build --quiet --profile dev --interpreter "$python" --out "$wheels"
wheel=("$wheels"/kameleon-*-abi3-*.whl)
"$python312" -m pip install --quiet --no-deps --force-reinstall "${wheel[0]}"
echo "run-tests.sh: Python 3.12 with ArviZ $("$python312" -c 'import arviz; print(arviz.__version__)')" >&2
"$python312" -m pytest -q "${subset[@]}"
