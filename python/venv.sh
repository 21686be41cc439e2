#!/usr/bin/env bash
# Creates the project venv (.venv) with Python 3.11 (or $PYTHON), or brings
# it up to date when python/requirements-dev.txt changed, and prints the
# path of its python. Idempotent. Used by run-tests.sh and by
# `cargo xtask bench-report` (which runs the numpy peers in it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
requirements="$root/python/requirements-dev.txt"
stamp="$venv/.requirements.sha256"
python="${PYTHON:-python3.11}"
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv" >&2
fi
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    "$venv/bin/python" -m pip install --quiet -r "$requirements" >&2
    echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
