#!/usr/bin/env bash
# The peers' own benchmark tools, each in an environment of its own under
# ${PASSPORT_CACHE:-~/.cache/passport}/engines/ (never passport's .venv), for benchmarks/parity.py:
# NVIDIA AIPerf and guidellm from the registry; vLLM's `bench serve` comes with scripts/setup_vllm.sh.
# Prints AIPERF=<path> and GUIDELLM=<path>. First call: about a minute; later calls: instant.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_uv.sh
for pin in aiperf==0.13.0 guidellm==0.8.1; do
  name="${pin%%==*}" version="${pin##*==}"
  env_dir="$CACHE/engines/peer-$name-$version"
  if [ ! -f "$env_dir/.ready" ]; then
    rm -rf "$env_dir"
    echo "[setup-peers] installing $pin into $env_dir (once)" >&2
    "$uv" venv -q -p python3.11 "$env_dir"
    "$uv" pip install -q -p "$env_dir/bin/python" "${links[@]}" "$pin" >&2
    touch "$env_dir/.ready"
  fi
  echo "$(echo "$name" | tr a-z A-Z)=$env_dir/bin/$name"
done
