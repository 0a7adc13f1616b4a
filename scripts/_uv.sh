# Sourced by the engine set-ups: `uv` (pinned) in the cache, for engine environments of their own.
# Sets $uv; uv's download cache lives under the cache too. Local wheels (/opt/wheels, where the
# machine has them: the CPU torch) are offered first through $links.
UV_VERSION="0.13.9"
CACHE="${PASSPORT_CACHE:-$HOME/.cache/passport}"
export SSL_CERT_FILE="${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}" UV_CACHE_DIR="$CACHE/uv-cache"
uv="$CACHE/tools/uv-$UV_VERSION/bin/uv"
if [ ! -x "$uv" ]; then
  echo "[setup] installing uv $UV_VERSION into the cache (once; it installs an engine's packages in seconds)" >&2
  python3 -m pip install -q --disable-pip-version-check --target "$CACHE/tools/uv-$UV_VERSION" "uv==$UV_VERSION" 2>&1 \
    | grep -v "^WARNING: " >&2 || true
fi
links=()
[ -d /opt/wheels ] && links=(--find-links /opt/wheels)
