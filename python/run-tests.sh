#!/usr/bin/env bash
# Builds the Python extension into the project venv (.venv, created and
# filled by venv.sh when missing or out of date) and runs the pytest suite.
# Idempotent; exits non-zero on any failure.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="$(bash "$root/python/venv.sh")"
venv="$(dirname "$(dirname "$python")")"
# maturin develop builds with the workspace's dev profile (optimised) into
# the shared target/ directory and installs the package in editable mode.
VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" "$venv/bin/maturin" develop --quiet
"$python" -m pytest -q "$root/python/tests" "$@"
