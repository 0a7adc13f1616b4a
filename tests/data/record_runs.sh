#!/usr/bin/env bash
# Record one pinned run folder under tests/data/runs/NAME with the passport of git revision REV
# (default: the working tree), against that revision's own simulated engine. Each passport schema
# version has a run recorded once by a version that wrote it (v1.0, v1.1 = base/same/slow,
# v1.2, v1.3, v1.4); tests/integration/test_pinned_runs.py checks that verify keeps reproducing every
# one. What compare and gate must say about them is derived by hand from the script below, in
# expected-verdicts.yaml, never recorded from passport's output.
#
#   bash tests/data/record_runs.sh [--at REV] [--no-slo] NAME TTFT_MS
#
# The run: 40 requests, closed loop of 4 users, 8 input and 8 output tokens, TTFT TTFT_MS with
# 5 ms jitter, ITL 3 ms, simulator seed 7, SLO ttft.any.p90 <= 40 ms (not with --no-slo: schema
# 1.0 predates SLOs). Only the files its passport lists are kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
PY="$REPO/.venv/bin/python"
AT=""
SLO="slo: {ttft.any.p90: 40ms}"
while [ "${1:-}" = "--at" ] || [ "${1:-}" = "--no-slo" ]; do
  if [ "$1" = "--at" ]; then AT="$2"; shift 2; else SLO=""; shift; fi
done
NAME="$1"; TTFT="$2"
SRC="$REPO"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"; [ -n "$AT" ] && git worktree remove --force "$TMP/src" 2>/dev/null || true' EXIT
if [ -n "$AT" ]; then
  git worktree add -q "$TMP/src" "$AT"
  SRC="$TMP/src"
fi
port=$($PY -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
(cd "$SRC" && PYTHONPATH="$SRC" exec $PY -m harness.simulator --port "$port" --ttft-ms "$TTFT" --ttft-jitter-ms 5 \
  --itl-ms 3 --seed 7) &
sim=$!
sleep 2
cat > "$TMP/spec.yaml" <<YAML
name: $NAME
endpoint: {base_url: "http://127.0.0.1:$port/v1"}
workload: {tokenizer: none, input_tokens: {dist: fixed, value: 8}, output_tokens: {dist: fixed, value: 8}}
load: {pattern: closed, concurrency: 4, measure: {requests: 40}}
validity: {max_loop_lag_p99_ms: 1000, max_dispatch_lag_p99_ms: 1000}
canaries: none
$SLO
YAML
(cd "$SRC" && PYTHONPATH="$SRC" $PY -m passport.cli run "$TMP/spec.yaml" --out "$TMP/out" --quiet) || true
kill "$sim"
run=$(ls -d "$TMP"/out/*/ | tail -1)
rm -rf "tests/data/runs/$NAME"
mkdir -p "tests/data/runs/$NAME"
cp "$run/passport.json" "tests/data/runs/$NAME/"
"$PY" - "$run" "tests/data/runs/$NAME" <<'PYEOF'
import json, shutil, sys
from pathlib import Path
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
for name in json.loads((src / "passport.json").read_text())["files"]:
    (dst / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / name, dst / name)
PYEOF
echo "recorded tests/data/runs/$NAME with ${AT:-the working tree}"
