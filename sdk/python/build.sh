#!/usr/bin/env bash
# Builds a Python scenario into a WebAssembly component with componentize-py, the version
# pinned in requirements.txt, installed from PyPI into a venv on first use:
#
#     sdk/python/build.sh scenarios/python/long_context.py long_context.wasm
#
# The scenario's directory and this one (the bench_scenario helper) are on the module
# path. VENV names the venv (default: target/componentize-py-venv in the repository);
# PYTHON the interpreter that makes it (default: python3).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ $# -ne 2 ]; then
    echo "usage: $0 SCENARIO.py OUTPUT.wasm" >&2
    exit 2
fi
app=$1
out=$2
venv=${VENV:-$repo/target/componentize-py-venv}

# A venv is complete once it holds a copy of the requirements it was made from; it is made
# beside its final path and renamed into place, so an interrupted install is never used.
if ! cmp -s "$here/requirements.txt" "$venv/requirements.txt" 2>/dev/null; then
    partial="$venv.partial-$$"
    rm -rf "$partial"
    "${PYTHON:-python3}" -m venv "$partial"
    "$partial/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt"
    cp "$here/requirements.txt" "$partial/requirements.txt"
    rm -rf "$venv"
    mv "$partial" "$venv"
fi

# The venv's own scripts name its original path; its python works wherever it is.
"$venv/bin/python" -c 'import sys; from componentize_py import script; sys.argv[0] = "componentize-py"; sys.exit(script())' \
    -d "$repo/wit" -w scenario componentize \
    -p "$(dirname "$app")" -p "$here" \
    "$(basename "$app" .py)" -o "$out"
