#!/usr/bin/env bash
# Re-record the pinned run folders under tests/data/runs/ (tests/integration/test_pinned.py reads
# them; their expected outputs sit beside them). Three closed-loop runs of 40 requests against
# the simulated engine: base and same with TTFT 30 ms, slow with TTFT 45 ms (5 ms jitter, ITL
# 3 ms, simulator seed 7). Only the files a passport lists are kept (no report, no plots).
# Run from the repository root after changing the raw or passport schema, then regenerate the
# expected outputs with: bash tests/data/record_runs.sh --expected
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
DATA=tests/data
if [ "${1:-}" != "--expected" ]; then
  rm -rf "$DATA/runs"
  mkdir -p "$DATA/runs"
  for run in base:30 same:30 slow:45; do
    name=${run%%:*}; ttft=${run##*:}
    port=$($PY -c "from harness import free_port; print(free_port())")
    $PY -m harness.simulator --port "$port" --ttft-ms "$ttft" --ttft-jitter-ms 5 --itl-ms 3 --seed 7 &
    sim=$!
    sleep 1.5
    cat > "/tmp/pinned-$name.yaml" <<YAML
name: $name
endpoint: {base_url: "http://127.0.0.1:$port/v1"}
workload: {tokenizer: none, input_tokens: {dist: fixed, value: 8}, output_tokens: {dist: fixed, value: 8}}
load: {pattern: closed, concurrency: 4, measure: {requests: 40}}
slo: {ttft.any.p90: 40ms}
validity: {max_loop_lag_p99_ms: 1000, max_dispatch_lag_p99_ms: 1000}
YAML
    $PY -m passport.cli run "/tmp/pinned-$name.yaml" --out "/tmp/pinned-out-$name" --quiet || true
    kill "$sim"
    src=$(ls -d /tmp/pinned-out-$name/*/ | tail -1)
    mkdir "$DATA/runs/$name"
    for f in passport.json requests.parquet chunks.parquet telemetry.parquet schedule.parquet declared.json; do
      cp "$src/$f" "$DATA/runs/$name/"
    done
    rm -rf "/tmp/pinned-out-$name" "/tmp/pinned-$name.yaml"
  done
fi
cd "$DATA"
../../.venv/bin/python -m passport.cli compare runs/base runs/same runs/slow > expected-compare.txt || true
../../.venv/bin/python -m passport.cli gate runs/slow --require 'ttft.any.p50 < 40ms' --require 'slo == met' \
  --require 'error_rate < 0.5%' > expected-gate-slow.txt || true
