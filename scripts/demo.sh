#!/usr/bin/env bash
# README command 1: set up (first time ~8 minutes: builds llama-server), launch llama-server with
# Gemma 3 270M on 127.0.0.1, run the bundled spec, and print where the passport is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
exec .venv/bin/passport run "${1:-specs/llamacpp-smoke.yaml}"
