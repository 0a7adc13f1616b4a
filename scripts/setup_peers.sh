#!/usr/bin/env bash
# The peers' own benchmark tools, each in an environment of its own under
# ${PASSPORT_CACHE:-~/.cache/passport}/engines/ (never passport's .venv), for benchmarks/parity.py:
# NVIDIA AIPerf and guidellm from the registry; vLLM's `bench serve` comes with scripts/setup_vllm.sh.
# Prints AIPERF=<path> and GUIDELLM=<path> (their parsers: tests/e2e/test_peer_files.py). First call: about a minute; later calls: instant.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_uv.sh
# guidellm needs torch: where this machine has the CPU build on disk (/opt/wheels), that one, not
# the several-GB CUDA build uv would download.
cpu_torch=()
ls /opt/wheels/torch-2.13.0+cpu-*.whl >/dev/null 2>&1 && cpu_torch=("torch==2.13.0+cpu")
for pin in aiperf==0.13.0 guidellm==0.8.1; do
  name="${pin%%==*}" version="${pin##*==}"
  extra=()
  [ "$name" = guidellm ] && extra=("${cpu_torch[@]}")
  env_dir="$CACHE/engines/peer-$name-$version${extra:+-cpu}"
  if [ ! -f "$env_dir/.ready" ]; then
    rm -rf "$env_dir"
    echo "[setup-peers] installing $pin into $env_dir (once)" >&2
    "$uv" venv -q -p python3.11 "$env_dir"
    "$uv" pip install -q -p "$env_dir/bin/python" "${links[@]}" "$pin" "${extra[@]}" >&2
    touch "$env_dir/.ready"
  fi
  echo "$(echo "$name" | tr a-z A-Z)=$env_dir/bin/$name"
done
