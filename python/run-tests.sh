#!/usr/bin/env bash
# Builds the Python extension into the project venv (.venv, created and
# filled from python/requirements-dev.txt when missing or out of date) and
# runs the pytest suite. Idempotent; exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$root/.venv"
requirements="$root/python/requirements-dev.txt"
stamp="$venv/.requirements.sha256"
python="${PYTHON:-python3.11}"
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -r "$requirements"
    echo "$want" > "$stamp"
fi
# maturin develop builds with the workspace's dev profile (optimised) into
# the shared target/ directory and installs the package in editable mode.
VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" "$venv/bin/maturin" develop --quiet
"$venv/bin/python" -m pytest -q "$root/python/tests" "$@"
