"""Capacity arithmetic before a measurement: what fits in the memory an engine has.

From a model's architecture (a Hugging Face `config.json`, read offline with transformers'
`AutoConfig`, or explicit numbers) and the memory budget, it computes:

- weight bytes: parameters x bytes per parameter of the weight format (quantized formats by
  their effective bits per weight, e.g. Q4_K_M ~ 4.85);
- KV bytes per token: per attention layer 2 (K and V) x KV heads x head dim x bytes of the KV
  dtype; layers of a sliding-window type hold at most `window` tokens, so past the window they
  cost nothing more per token (they are charged as fixed state per sequence instead);
- fixed state per sequence: what a live sequence holds whatever its length: linear-attention /
  recurrent layers (e.g. Gated DeltaNet: value heads x key dim x value dim, in fp32, plus the
  convolution state) and the sliding windows' full windows;
- the KV pool: GPU memory x utilization - weights - framework reserve - activations/workspace
  (or a pool given directly, e.g. from the engine's log);
- how many tokens the pool holds, and how many sequences of a given context fit: naively
  (pool / (context x KV per token)), and charging each live sequence its fixed state too
  (pool / (context x KV per token + state per sequence)). The difference between the two is the
  per-sequence term, shown on its own.

Given a published figure ("N live sequences of context C fit"), `implied_state_per_sequence`
gives the per-sequence term that figure implies. Worked example (README "Capacity"): a
23.3 GiB pool at 64 KiB per token holds about 381,700 tokens, eleven 32K sessions by naive
division; 36 live 8K sequences imply about 150 MiB per sequence on top of the KV.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DTYPE_BYTES", "Architecture", "Budget", "CapacityReport", "architecture_from_config",
           "load_config", "compute", "implied_state_per_sequence", "GiB", "MiB", "KiB"]

KiB, MiB, GiB = 2**10, 2**20, 2**30
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "f16": 2, "auto": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1, "q8_0": 34 / 32, "nvfp4": 0.5625, "fp4": 0.5,
    "int4": 0.5, "q4_k_m": 4.85 / 8, "q4_0": 18 / 32, "q5_k_m": 5.69 / 8, "q6_k": 6.56 / 8,
}


def _bytes_of(dtype: str) -> float:
    key = dtype.lower()
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[key]


@dataclass(frozen=True)
class Architecture:
    """What the arithmetic needs from a model. Layer counts by kind: full attention, sliding
    window (with `sliding_window` tokens), and linear attention (fixed state per sequence)."""

    n_params: float | None
    full_attention_layers: int
    sliding_layers: int = 0
    sliding_window: int | None = None
    linear_layers: int = 0
    kv_heads: int = 1
    head_dim: int = 128
    linear_state_bytes_per_layer: float = 0.0  # per sequence, in the state dtype
    source: str = "explicit numbers"
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Budget:
    """The memory side. Either `kv_pool_bytes` directly, or GPU memory x utilization minus weights,
    reserve and activations."""

    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    gpu_memory_bytes: float | None = None
    utilization: float = 0.9
    reserve_bytes: float = 0.0
    activation_bytes: float = 0.0
    kv_pool_bytes: float | None = None

    @classmethod
    def in_gib(cls, weights: str, kv_dtype: str, gpu_memory_gib: float | None, utilization: float,
               reserve_gib: float, activations_gib: float, kv_pool_gib: float | None) -> Budget:
        """A budget given in GiB, as `passport capacity` and a campaign arm's `capacity:` declare it."""
        return cls(weight_dtype=weights, kv_dtype=kv_dtype,
                   gpu_memory_bytes=gpu_memory_gib * GiB if gpu_memory_gib else None, utilization=utilization,
                   reserve_bytes=reserve_gib * GiB, activation_bytes=activations_gib * GiB,
                   kv_pool_bytes=kv_pool_gib * GiB if kv_pool_gib else None)


@dataclass(frozen=True)
class CapacityReport:
    weight_bytes: float | None
    kv_bytes_per_token: float
    state_bytes_per_sequence: float
    pool_bytes: float
    pool_source: str
    pool_tokens: int
    context_tokens: int
    sequences_naive: int
    sequences_with_state: int
    lines: list[str]


def load_config(path: Path) -> dict[str, Any]:
    """A model's config as a dict: a folder or config.json read offline with transformers' AutoConfig."""
    from transformers import AutoConfig

    folder = Path(path)
    if folder.is_file():
        folder = folder.parent
    config = AutoConfig.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    data: dict[str, Any] = config.to_dict()
    text = data.get("text_config")
    if isinstance(text, dict):  # multimodal configs nest the language model's
        data = {**data, **text}
    return data


def architecture_from_config(config: dict[str, Any], n_params: float | None = None) -> Architecture:
    """Layer kinds, KV heads, head dim and linear-attention state from a config dict.

    Reads `num_hidden_layers`, `num_key_value_heads` (else `num_attention_heads`), `head_dim`
    (else hidden_size / heads), `layer_types` (full_attention / sliding_attention /
    linear_attention), `sliding_window`, and for linear attention `linear_num_value_heads`,
    `linear_key_head_dim`, `linear_value_head_dim`, `linear_conv_kernel_dim` (Qwen3-Next names;
    the state is kept in fp32)."""
    n_layers = int(config["num_hidden_layers"])
    heads = int(config.get("num_attention_heads") or 1)
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    types = list(config.get("layer_types") or [])
    notes = []
    if not types:
        types = ["full_attention"] * n_layers
        notes.append("no layer_types: every layer counted as full attention")
    full = sum(t == "full_attention" for t in types)
    sliding = sum(t in ("sliding_attention", "sliding_window") for t in types)
    linear = sum(t in ("linear_attention", "mamba", "recurrent") for t in types)
    window = config.get("sliding_window") if sliding else None
    state = 0.0
    if linear:
        v_heads = int(config.get("linear_num_value_heads") or heads)
        k_dim = int(config.get("linear_key_head_dim") or head_dim)
        v_dim = int(config.get("linear_value_head_dim") or head_dim)
        k_heads = int(config.get("linear_num_key_heads") or v_heads)
        kernel = int(config.get("linear_conv_kernel_dim") or 4)
        recurrent = v_heads * k_dim * v_dim * 4.0  # fp32 state matrix per value head
        conv = (2 * k_heads * k_dim + v_heads * v_dim) * (kernel - 1) * 4.0
        state = recurrent + conv
        notes.append(f"linear attention: {v_heads} value heads x {k_dim} x {v_dim} fp32 state + convolution "
                     f"state (kernel {kernel}) = {state / MiB:.2f} MiB per layer per sequence")
    return Architecture(n_params=n_params, full_attention_layers=full, sliding_layers=sliding,
                        sliding_window=int(window) if window else None, linear_layers=linear, kv_heads=kv_heads,
                        head_dim=head_dim, linear_state_bytes_per_layer=state, source="config.json", notes=notes)


def implied_state_per_sequence(pool_bytes: float, kv_bytes_per_token: float, sequences: int,
                               context_tokens: int) -> float:
    """The fixed bytes per live sequence that a published 'N sequences of C tokens fit' implies."""
    return pool_bytes / sequences - context_tokens * kv_bytes_per_token


def compute(arch: Architecture | None, budget: Budget, context_tokens: int, kv_bytes_per_token: float | None = None,
            state_bytes_per_sequence: float | None = None, state_source: str = "given") -> CapacityReport:
    """The whole arithmetic; explicit `kv_bytes_per_token` / `state_bytes_per_sequence` override
    what the architecture gives."""
    kv_elem = _bytes_of(budget.kv_dtype)
    lines: list[str] = []
    per_layer = 2 * (arch.kv_heads if arch else 0) * (arch.head_dim if arch else 0) * kv_elem
    if kv_bytes_per_token is None:
        if arch is None:
            raise ValueError("give a model config or --kv-bytes-per-token")
        kv_bytes_per_token = per_layer * arch.full_attention_layers
        lines.append(f"KV per token: {arch.full_attention_layers} full-attention layers x 2 x {arch.kv_heads} KV "
                     f"heads x {arch.head_dim} head dim x {kv_elem:g} B ({budget.kv_dtype}) = "
                     f"{kv_bytes_per_token / KiB:.2f} KiB")
    else:
        lines.append(f"KV per token: {kv_bytes_per_token / KiB:.2f} KiB (given)")
    if state_bytes_per_sequence is None:
        state = 0.0
        if arch is not None and arch.sliding_layers and arch.sliding_window:
            window_bytes = arch.sliding_layers * per_layer * min(arch.sliding_window, context_tokens)
            state += window_bytes
            lines.append(f"sliding windows: {arch.sliding_layers} layers x {min(arch.sliding_window, context_tokens)} "
                         f"tokens x {per_layer / KiB:.2f} KiB = {window_bytes / MiB:.2f} MiB per sequence")
        if arch is not None and arch.linear_layers:
            linear = arch.linear_layers * arch.linear_state_bytes_per_layer
            state += linear
            lines.append(f"linear-attention state: {arch.linear_layers} layers x "
                         f"{arch.linear_state_bytes_per_layer / MiB:.2f} MiB = {linear / MiB:.2f} MiB per sequence")
        state_bytes_per_sequence = state
    else:
        lines.append(f"fixed state per sequence: {state_bytes_per_sequence / MiB:.2f} MiB ({state_source})")
    weight_bytes = None
    if arch is not None and arch.n_params:
        weight_bytes = arch.n_params * _bytes_of(budget.weight_dtype)
        lines.append(f"weights: {arch.n_params / 1e9:.3f} B params x {_bytes_of(budget.weight_dtype):.4g} B "
                     f"({budget.weight_dtype}) = {weight_bytes / GiB:.2f} GiB")
    if budget.kv_pool_bytes is not None:
        pool, pool_source = budget.kv_pool_bytes, "given"
        lines.append(f"KV pool: {pool / GiB:.2f} GiB (given)")
    else:
        if budget.gpu_memory_bytes is None or weight_bytes is None:
            raise ValueError("give --kv-pool-gib, or --gpu-memory-gib with the model's parameter count")
        usable = budget.gpu_memory_bytes * budget.utilization
        pool = usable - weight_bytes - budget.reserve_bytes - budget.activation_bytes
        pool_source = "GPU memory x utilization - weights - reserve - activations"
        lines.append(f"KV pool: {budget.gpu_memory_bytes / GiB:.2f} GiB x {budget.utilization:g} - "
                     f"{weight_bytes / GiB:.2f} weights - {budget.reserve_bytes / GiB:.2f} reserve - "
                     f"{budget.activation_bytes / GiB:.2f} activations = {pool / GiB:.2f} GiB")
        if pool <= 0:
            raise ValueError(f"nothing is left for the KV cache ({pool / GiB:.2f} GiB): the weights do not fit")
    tokens = int(pool // kv_bytes_per_token)
    naive = math.floor(pool / (context_tokens * kv_bytes_per_token) + 1e-9)
    per_sequence = context_tokens * kv_bytes_per_token + state_bytes_per_sequence
    with_state = math.floor(pool / per_sequence + 1e-9)  # a published figure is an exact division
    lines.append(f"pool holds {tokens:,} tokens ({pool / GiB:.2f} GiB / {kv_bytes_per_token / KiB:.2f} KiB)")
    lines.append(f"sequences of {context_tokens:,} tokens, naive division: {naive} "
                 f"({tokens:,} / {context_tokens:,} = {tokens / context_tokens:.2f})")
    lines.append(f"charging each live sequence its fixed state too: {with_state} "
                 f"({pool / MiB:,.0f} MiB / ({context_tokens * kv_bytes_per_token / MiB:,.1f} MiB KV + "
                 f"{state_bytes_per_sequence / MiB:,.1f} MiB state) = {pool / per_sequence:.2f})")
    if arch is not None:
        lines += [f"note: {n}" for n in arch.notes]
    return CapacityReport(weight_bytes, kv_bytes_per_token, state_bytes_per_sequence, pool, pool_source, tokens,
                          context_tokens, naive, with_state, lines)
