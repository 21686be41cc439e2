#!/usr/bin/env bash
# Runs the Python package's tests on both ArviZ lines; exits non-zero on any
# failure. Idempotent.
#
# 1. Python 3.11, ArviZ 0.x (.venv): builds the extension into the venv with
#    `maturin develop` (editable) and runs the whole pytest suite, as two
#    processes side by side (below); with arguments, as one process that
#    passes them on to pytest.
# 2. Python 3.12, ArviZ 1.x (.venv312): installs the same abi3 wheel (built
#    by .venv's maturin from the same cargo build, so no second compile) and
#    runs the subset below, beside run 1. Skipped, with a message, when
#    venv.sh finds no Python 3.12 ($PYTHON312 names one).
# 3. The ELFI venv (.venv-elfi, Python 3.11 with ELFI) is made or brought up
#    to date beside the build; run 1's test_ricker_vs_elfi.py runs the
#    Ricker comparison in it with this tree's package and extension.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# The 3.12 venv is made, and its subset run, beside the build and run 1;
# its output is printed after.
run="$(mktemp -d "$root/target/python-tests.XXXXXX")"
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$run"' EXIT
(
    status=0
    bash "$root/python/venv.sh" 3.12 > "$run/python312" 2> "$run/venv312.log" || status=$?
    echo "$status" > "$run/venv312.status"
) &
(
    status=0
    bash "$root/python/venv.sh" elfi > /dev/null 2> "$run/venv-elfi.log" || status=$?
    echo "$status" > "$run/venv-elfi.status"
    echo "run-tests.sh: the ELFI venv ready after ${SECONDS} s" >&2
) &

python="$(bash "$root/python/venv.sh")"
venv="$(dirname "$(dirname "$python")")"
# maturin develop builds with the workspace's dev profile (optimised) into
# the shared target/ directory and installs the package in editable mode,
# with the venv's uv (2.7 s for pip's install and dependency check, 0.7 s).
VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" "$venv/bin/maturin" develop --uv --quiet
echo "run-tests.sh: the 3.11 venv and the extension ready after ${SECONDS} s" >&2

# The ArviZ 1 run: the ArviZ output, its netCDF round trip, the diagnostics
# against ArviZ's, sample/resume/extend/ensemble, and km.from_pymc on PyMC 6.
# The whole suite takes ~2 minutes there; the two tests left out are the
# slowest of these files (9 s and 5 s) and test nothing ArviZ touches.
subset=(
    python/tests/test_arviz_versions.py
    python/tests/test_pymc.py
    python/tests/test_pymc_bounds_probe.py
    python/tests/test_sample.py
    python/tests/test_run_checks.py
    python/tests/test_run_control.py
    python/tests/test_ensemble.py
    python/tests/test_diagnostics.py
    --deselect python/tests/test_ensemble.py::test_moments_and_acceptance_agree_with_emcee
    --deselect python/tests/test_sample.py::test_sigint_returns_partial_draws_with_a_warning
)
# abi3: the wheel built for 3.11 is the one 3.12 loads. A wheel from a 3.12
# maturin would recompile pyo3 on every switch of interpreter.
"$venv/bin/maturin" build --quiet --profile dev --interpreter "$python" --out "$run/wheels"
run_312() {
    local status
    while [[ ! -f "$run/venv312.status" ]]; do
        sleep 0.2
    done
    status="$(cat "$run/venv312.status")"
    if [[ $status -eq 69 ]]; then
        echo "run-tests.sh: skipping the Python 3.12 / ArviZ 1 run: no Python 3.12 (set PYTHON312)"
        return 0
    elif [[ $status -ne 0 ]]; then
        cat "$run/venv312.log"
        return "$status"
    fi
    local python312 wheel
    python312="$(cat "$run/python312")"
    wheel=("$run"/wheels/kameleon-*-abi3-*.whl)
    "$python312" -m pip install --quiet --no-deps --force-reinstall "${wheel[0]}"
    echo "run-tests.sh: Python 3.12 with ArviZ $("$python312" -c 'import arviz; print(arviz.__version__)')"
    # its own temporary directory: pytest prunes old ones of other sessions
    "$python312" -m pytest -q -p no:cacheprovider --basetemp "$run/pytest312" "${subset[@]}"
}
run_312 > "$run/run312.log" 2>&1 &
tests312=$!

# Run 1 is two pytest processes, one per core: much of the suite waits
# (worker processes starting, SIGINT tests, subprocess examples), so the
# files below, about half of its time, run beside the rest (on a fresh
# clone: 55 s against 72 s without test_simulators.py, which takes ~8 s).
# Arguments given to this script go to one process over the whole suite
# instead.
beside=(
    python/tests/test_parallel.py
    python/tests/test_examples.py
    python/tests/test_pymc.py
    python/tests/test_pymc_bounds_probe.py
    python/tests/test_ricker_vs_elfi.py
    python/tests/test_simulators.py
)
wait_for_elfi() {
    # the ELFI test needs the ELFI venv complete (it skips without it)
    while [[ ! -f "$run/venv-elfi.status" ]]; do
        sleep 0.2
    done
    status_elfi="$(cat "$run/venv-elfi.status")"
    if [[ $status_elfi -ne 0 ]]; then
        cat "$run/venv-elfi.log" >&2
        echo "run-tests.sh: making the ELFI venv failed (status $status_elfi): its test will skip" >&2
    fi
}

status=0
if [[ $# -gt 0 ]]; then
    wait_for_elfi
    "$python" -m pytest -q "$root/python/tests" "$@" || status=$?
else
    ignored=()
    for file in "${beside[@]}"; do
        ignored+=(--ignore "$root/$file")
    done
    "$python" -m pytest -q -p no:cacheprovider --basetemp "$run/pytest-rest" "$root/python/tests" "${ignored[@]}" \
        > "$run/rest.log" 2>&1 &
    rest=$!
    wait_for_elfi
    "$python" -m pytest -q -p no:cacheprovider --basetemp "$run/pytest-beside" "${beside[@]}" || status=$?
    echo "run-tests.sh: the waiting files done after ${SECONDS} s" >&2
    status_rest=0
    wait "$rest" || status_rest=$?
    echo "run-tests.sh: the rest done after ${SECONDS} s or earlier" >&2
    cat "$run/rest.log"
    if [[ $status -eq 0 ]]; then
        status=$status_rest
    fi
fi
status312=0
wait "$tests312" || status312=$?
cat "$run/run312.log" >&2
if [[ $status -ne 0 ]]; then
    exit "$status"
fi
if [[ $status312 -ne 0 ]]; then
    exit "$status312"
fi
exit "$status_elfi"
