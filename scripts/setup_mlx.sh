#!/usr/bin/env bash
# MLX's CPU build (mlx, mlx-cpu, mlx-lm) in an environment of its own under
# ${PASSPORT_CACHE:-~/.cache/passport}/engines/, never in passport's .venv, with `mlx_lm` linked as
# .venv/bin/mlx_lm so an engine.launch of `mlx_lm server` finds it. It serves the bf16 folder that
# scripts/setup_vllm.sh converts (run first). Also makes sure a Hugging Face cache folder exists:
# without one, mlx_lm.server's /v1/models answers 200 with an empty body. Prints MLX_LM=<path>.
# First call: about 10 s (220 MB); later calls: instant.
set -euo pipefail
cd "$(dirname "$0")/.."
MLX_VERSION="0.32.4"
MLX_LM_VERSION="0.32.2"
source scripts/_uv.sh
ENV_DIR="$CACHE/engines/mlx-lm-$MLX_LM_VERSION"
if [ ! -f "$ENV_DIR/.ready" ]; then
  rm -rf "$ENV_DIR"
  echo "[setup-mlx] installing mlx-lm==$MLX_LM_VERSION (mlx-cpu==$MLX_VERSION) into $ENV_DIR (once)" >&2
  "$uv" venv -q -p python3.11 "$ENV_DIR"
  "$uv" pip install -q -p "$ENV_DIR/bin/python" "${links[@]}" "mlx==$MLX_VERSION" "mlx-cpu==$MLX_VERSION" \
    "mlx-lm==$MLX_LM_VERSION" >&2
  "$ENV_DIR/bin/python" -c "import mlx.core, mlx_lm" || { echo "[setup-mlx] mlx-lm does not import" >&2; exit 1; }
  touch "$ENV_DIR/.ready"
fi
mkdir -p "${HF_HOME:-$HOME/.cache/huggingface}/hub"
[ -d .venv/bin ] && ln -sf "$ENV_DIR/bin/mlx_lm" .venv/bin/mlx_lm
echo "MLX_LM=$ENV_DIR/bin/mlx_lm"
