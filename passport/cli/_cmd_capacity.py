"""`passport capacity`: the arithmetic before a measurement (weights, KV per token, what fits)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from passport.cli._exit import ExitCode
from passport.plan import CapacityQuery

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    capacity = sub.add_parser(
        "capacity", help="the arithmetic before a measurement: weights, KV per token, pool, sequences that fit",
        description="Compute what fits in an engine's memory from a model's config.json (read offline) or explicit "
                    "numbers: weight bytes, KV bytes per token (per layer type, sliding windows honoured), fixed "
                    "state per sequence (linear-attention layers, windows), the KV pool left after weights, reserve "
                    "and activations, and how many sequences of --context tokens fit: by naive division and "
                    "charging each live sequence its fixed state. --published-sequences N with "
                    "--published-context C shows the per-sequence term such a published figure implies.",
        epilog="examples:\n"
               "  passport capacity --kv-pool-gib 23.3 --kv-kib-per-token 64 --context 32768 \\\n"
               "      --published-sequences 36 --published-context 8192\n"
               "  passport capacity --kv-pool-gib 23.3 --kv-kib-per-token 64 --context 8192 \\\n"
               "      --published-sequences 36 --live-sequences 20 --monthly-input-mtok 200 \\\n"
               "      --monthly-output-mtok 40 \\\n"
               "      --input-usd-per-million 0.45 --output-usd-per-million 3.20 --gpu-hour-usd 2.5\n"
               "  passport capacity --config ./Qwen3-Next-80B/ --params 80e9 --weights fp8 --kv-dtype bf16 \\\n"
               "      --gpu-memory-gib 141 --utilization 0.9 --reserve-gib 2 --context 32768",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    capacity.add_argument("--config", type=Path, metavar="DIR", help="a model folder or config.json (offline)")
    capacity.add_argument("--params", type=float, help="parameter count, e.g. 7.6e9 (for weight bytes)")
    capacity.add_argument("--weights", default=CapacityQuery.weights, metavar="DTYPE",
                          help="weight format (bf16, fp8, q4_k_m, ...)")
    capacity.add_argument("--kv-dtype", default=CapacityQuery.kv_dtype, metavar="DTYPE",
                          help="KV-cache dtype (bf16, fp8, ...)")
    capacity.add_argument("--gpu-memory-gib", type=float, help="GPU memory the engine may use, GiB")
    capacity.add_argument("--utilization", type=float, default=CapacityQuery.utilization,
                          help=f"fraction of it the engine takes ({CapacityQuery.utilization})")
    capacity.add_argument("--reserve-gib", type=float, default=CapacityQuery.reserve_gib,
                          help="framework reserve (CUDA graphs, ...), GiB")
    capacity.add_argument("--activations-gib", type=float, default=CapacityQuery.activations_gib,
                          help="activations and workspace, GiB")
    capacity.add_argument("--kv-pool-gib", type=float, help="the KV pool itself, GiB (e.g. from the engine's log)")
    capacity.add_argument("--kv-kib-per-token", type=float, help="KV per token, KiB (instead of the config's)")
    capacity.add_argument("--state-mib-per-sequence", type=float, help="fixed state per live sequence, MiB")
    capacity.add_argument("--context", type=int, required=True, help="tokens per sequence")
    capacity.add_argument("--published-sequences", type=int, metavar="N", help="a published 'N sequences fit'")
    capacity.add_argument("--published-context", type=int, metavar="C", help="... of C tokens each")
    price = capacity.add_argument_group(
        "a month priced two ways (managed per-token prices against cards by the hour, on all month)")
    price.add_argument("--live-sequences", type=int, metavar="N",
                       help="sequences live at once at peak: fits on one card? (cards = N / sequences that fit)")
    price.add_argument("--monthly-input-mtok", type=float, metavar="M", help="input tokens per month, millions")
    price.add_argument("--monthly-output-mtok", type=float, metavar="M", help="output tokens per month, millions")
    price.add_argument("--input-usd-per-million", type=float, metavar="USD", help="managed price of input tokens")
    price.add_argument("--output-usd-per-million", type=float, metavar="USD", help="managed price of output tokens")
    price.add_argument("--gpu-hour-usd", type=float, metavar="USD", help="one owned or rented card, per hour")
    price.add_argument("--gpus", type=int, default=CapacityQuery.gpus, metavar="N",
                       help=f"cards per replica (default {CapacityQuery.gpus})")
    price.add_argument("--tokens-per-s-per-card", type=float, metavar="T",
                       help="measured throughput of one replica (a passport's throughput.total_tokens_per_s): "
                            "adds replicas when the month's volume needs them")
    capacity.add_argument("--json", action="store_true", help="print the figures as JSON")


def main(args: argparse.Namespace) -> ExitCode:
    import json

    from passport.plan import plan_capacity

    # every field of the query is an option of the same name (its default shown by the parser)
    plan = plan_capacity(CapacityQuery(**{f.name: getattr(args, f.name) for f in dataclasses.fields(CapacityQuery)}))
    if args.json:
        print(json.dumps(plan.figures, indent=2))
    else:
        for line in plan.lines:
            print(line)
    return ExitCode.OK
