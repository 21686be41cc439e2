#!/usr/bin/env bash
# Makes a project venv, or brings it up to date when its requirements file
# changed (a stamp of the file's hash), and prints the path of its python.
# Idempotent. The one place the project's venvs are made:
#
#   venv.sh        .venv/     Python 3.11 ($PYTHON, default python3.11),
#                             from python/requirements-dev.txt (ArviZ 0.x,
#                             PyMC, numba, dask): run-tests.sh's full suite
#                             and `cargo xtask bench-report`'s numpy peers.
#   venv.sh 3.12   .venv312/  Python 3.12 ($PYTHON312, else python3.12 on
#                             PATH, else pyenv's newest 3.12), from
#                             python/requirements-dev-312.txt (ArviZ 1.x):
#                             run-tests.sh's ArviZ 1 run. Exits with status 69
#                             and says so on stderr when no Python 3.12 is
#                             found.
#   venv.sh elfi   .venv-elfi/ Python 3.11 ($PYTHON, default python3.11),
#                             from python/requirements-elfi.txt (ELFI, which
#                             pins matplotlib < 3.9 and brings GPy): the
#                             Ricker comparison with ELFI and its test.
set -euo pipefail
# the installer, pinned like the requirements
uv_version=0.13.9
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

is_python_312() {
    [[ -n "$1" && -x "$1" ]] &&
        "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null
}

compile=yes
case "${1:-3.11}" in
    3.11)
        venv="$root/.venv"
        requirements="$root/python/requirements-dev.txt"
        python="${PYTHON:-python3.11}"
        ;;
    3.12)
        venv="$root/.venv312"
        requirements="$root/python/requirements-dev-312.txt"
        python=""
        if [[ -n "${PYTHON312:-}" ]]; then
            if ! is_python_312 "$(command -v "$PYTHON312" || true)"; then
                echo "venv.sh: PYTHON312=$PYTHON312 is not a Python 3.12 interpreter" >&2
                exit 1
            fi
            python="$(command -v "$PYTHON312")"
        else
            candidates=("$(command -v python3.12 || true)")
            pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
            # newest 3.12.x first
            while IFS= read -r dir; do
                candidates+=("$dir/bin/python3.12")
            done < <(ls -d "$pyenv_root"/versions/3.12.* 2>/dev/null | sort -V -r)
            for candidate in "${candidates[@]}"; do
                if is_python_312 "$candidate"; then
                    python="$candidate"
                    break
                fi
            done
        fi
        if [[ -z "$python" ]]; then
            echo "venv.sh: no Python 3.12 found (looked for \$PYTHON312, python3.12 on PATH and" \
                "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.12.*)" >&2
            exit 69  # EX_UNAVAILABLE: run-tests.sh skips on it
        fi
        ;;
    elfi)
        compile=no
        venv="$root/.venv-elfi"
        requirements="$root/python/requirements-elfi.txt"
        python="${PYTHON:-python3.11}"
        ;;
    *)
        echo "venv.sh: unknown venv '$1' (expected 3.11, 3.12 or elfi)" >&2
        exit 2
        ;;
esac

stamp="$venv/.requirements.sha256"
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv" >&2
fi
# the stamp covers the installer's version and options too
want="$({ cat "$requirements"; echo "uv==$uv_version compile=$compile"; } | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    # uv installs the requirements: from its cache it links the files in
    # (0.7 s for the 3.11 venv, against 13 s for pip). pip installs uv itself
    # into the venv, which keeps pip for users' own installs.
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$uv_version" >&2
    "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" -r "$requirements" >&2
    # Byte-compiled here, on every core: the test suite starts dozens of
    # Python processes (pytest, worker processes, Dask workers, MPI ranks),
    # and where bytecode cannot be written on import (PYTHONDONTWRITEBYTECODE,
    # or processes racing at their first import) each compiled numpy, scipy
    # and PyMC again: run-tests.sh took 113 s of wall and 139 CPU-seconds
    # without the venv's bytecode, 77 s and 93 with it. The packages' own
    # test folders, a third of their files, are left out (14 CPU-seconds
    # instead of 22 for the 3.11 venv). The ELFI venv serves one test's one
    # process and is left to compile what it imports.
    if [[ $compile == yes ]]; then
        "$venv/bin/python" -m compileall -q -j0 -x '/tests?/' "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" > /dev/null
    fi
    echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
