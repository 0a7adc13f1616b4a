#!/usr/bin/env bash
# README command 2 (and .ci/run): set up with the test extras, then run the whole suite
# (unit, integration against the simulated engine, end-to-end against the real llama-server),
# with ruff and mypy --strict over the packages first.
#
# With no arguments the suite runs in two pytest-xdist workers, one test file per worker at a
# time (a file's engines, Ray cluster and fixtures stay on one worker): most tests wait on
# scripted delays or an engine, so two workers on two cores halve the wall time. Arguments go to
# pytest as they are and run in this one process, e.g. the fast tier without the real engine:
#   ./scripts/test.sh -m "not e2e"
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test >/dev/null
.venv/bin/python -m ruff check passport harness workloads canaries tests benchmarks scripts
.venv/bin/python -m mypy
if [ "$#" -eq 0 ]; then
  set -- -n "${PASSPORT_TEST_WORKERS:-2}" --dist loadfile
fi
exec .venv/bin/python -m pytest "$@"
