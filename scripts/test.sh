#!/usr/bin/env bash
# Install the project with its test extras into a local virtualenv and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
# Both cores (pytest-xdist, one test file per worker at a time) and without the `slow` marker:
# `bash scripts/test.sh -m slow` runs the large budgets (fuzzers at 2,000, full-size rounds),
# `IVM_TEST_WORKERS=0` runs in one process.
exec .venv/bin/python -m pytest -n "${IVM_TEST_WORKERS:-2}" --dist loadfile -m "not slow" "$@"
