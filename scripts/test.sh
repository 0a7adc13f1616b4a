#!/usr/bin/env bash
# README command 2 (and .ci/run): set up with the test extras, then run the whole suite
# (unit, integration against the simulated engine, end-to-end against the real llama-server),
# with ruff and mypy --strict over the packages first.
#
#   ./scripts/test.sh            everything, as CI runs it (builds llama-server and installs vLLM's
#                                and MLX's CPU builds once, cached; those tiers are marked
#                                `vllm` and `mlx`), and guidellm and AIPerf whose readers the `peers`
#                                tests point at passport's files for their users
#   ./scripts/test.sh --fast     the day-to-day tier: no engine build, no real engine, no Ray
#                                cluster, no slow runs (markers in pyproject.toml); tests that
#                                read the GGUF's tokenizer run only where it is cached already
#   ./scripts/test.sh --stress   the fast and integration tiers beside one CPU hog per core and a second
#                                pytest process running the fast tier round after round
#                                (scripts/stress.py): no verdict may move with the machine's load
#   ./scripts/test.sh --newest   the fast tier in .venv-newest/, set up with the newest versions of every
#                                dependency that pyproject.toml allows instead of the lock
#                                (constraints.txt): run it weekly, and before `bash scripts/lock.sh`
#   ./scripts/test.sh ARGS...    ARGS go to pytest as they are, in this one process, e.g.
#                                ./scripts/test.sh -m "not e2e" tests/integration/test_sweep.py
#
# With no arguments (or --fast) the tests run in two pytest-xdist workers, one test file per
# worker at a time (a file's engines, Ray cluster and fixtures stay on one worker): most tests
# wait on scripted delays or an engine, so two workers on two cores halve the wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
workers=(-n "${PASSPORT_TEST_WORKERS:-2}" --dist loadfile)
if [ "${1:-}" = "--fast" ] || [ "${1:-}" = "--newest" ]; then
  venv=.venv newest=()
  [ "$1" = "--newest" ] && venv=.venv-newest newest=(--newest)
  shift
  bash scripts/setup.sh --test --no-engine "${newest[@]}" >/dev/null
  select="not e2e and not ray and not slow"
  gguf="${PASSPORT_CACHE:-$HOME/.cache/passport}/models/gemma-3-270m-q4_k_m.gguf"
  [ -f "$gguf" ] || select="$select and not model"
  [ -n "${newest[*]}" ] && "$venv/bin/python" -m pip list --format=freeze 2>/dev/null \
    | grep -iE "^(duckdb|numpy|pyarrow|pydantic|pandas|transformers|cryptography|httpx|matplotlib)==" >&2
  "$venv/bin/python" -m ruff check passport harness workloads canaries tests benchmarks scripts
  "$venv/bin/python" -m mypy
  exec "$venv/bin/python" -m pytest "${workers[@]}" -m "$select" "$@"
fi
if [ "${1:-}" = "--stress" ]; then
  shift
  bash scripts/setup.sh --test --no-engine >/dev/null
  exec .venv/bin/python scripts/stress.py "$@"
fi
bash scripts/setup.sh --test --mlx --peers >/dev/null
.venv/bin/python -m ruff check passport harness workloads canaries tests benchmarks scripts
.venv/bin/python -m mypy
if [ "$#" -eq 0 ]; then
  set -- "${workers[@]}"
fi
exec .venv/bin/python -m pytest "$@"
