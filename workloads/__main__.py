"""`python -m workloads tokenizer SOURCE`: load a tokenizer once (converting a GGUF's into the
cache) and print its identity. Used by scripts/setup.sh."""

from __future__ import annotations

import sys

from workloads._tokenizer import load_tokenizer

if len(sys.argv) != 3 or sys.argv[1] != "tokenizer":
    sys.exit("usage: python -m workloads tokenizer SOURCE   (SOURCE: gguf:<file> | <folder> | none)")
loaded = load_tokenizer(sys.argv[2])
print(f"tokenizer {loaded.source} sha256 {loaded.sha256}")
