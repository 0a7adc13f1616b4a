#!/usr/bin/env bash
# Refresh constraints.txt, the lock the README's two commands install from: every package of
# passport with its test, ray and docs extras (and what they pull in), pinned for Linux, macOS and Windows on
# Python >= 3.11. Run it on purpose (a dependency's new release is tried first with
# `scripts/test.sh --newest`), commit the change, and let CI run the whole suite on it.
# pyproject.toml keeps ranges: the lock is what our commands install, not what passport requires.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_uv.sh
"$uv" pip compile pyproject.toml --extra test --extra ray --extra docs --universal --python-version 3.11 --quiet \
  --custom-compile-command "bash scripts/lock.sh" -o constraints.txt
echo "constraints.txt: $(grep -c '==' constraints.txt) packages pinned" >&2
