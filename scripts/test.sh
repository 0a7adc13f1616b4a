#!/usr/bin/env bash
# README command 2 (and .ci/run): set up with the test extras, then run the whole suite
# (unit, integration against the simulated engine, end-to-end against the real llama-server),
# with ruff and mypy --strict over the packages first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test >/dev/null
.venv/bin/python -m ruff check passport harness workloads canaries tests benchmarks scripts
.venv/bin/python -m mypy
exec .venv/bin/python -m pytest "$@"
