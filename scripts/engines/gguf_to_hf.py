"""Convert the bundled Gemma 3 270M GGUF into a Hugging Face folder (bf16 safetensors) that vLLM
and MLX load, once: `python gguf_to_hf.py MODEL.gguf OUT_DIR`.

Runs in an engine's environment (it needs torch, transformers, accelerate and gguf), never in
passport's. The weights are dequantized from Q4_K_M, so the bf16 model answers like the GGUF,
not like Google's original bf16 checkpoint. Three repairs make the folder serve correctly:
the GGUF quantizer is dropped before saving (or the folder claims a quantization it no longer
has); the tokenizer adds BOS (without it Gemma writes garbage); and the folder gets Gemma's turn
template with `<end_of_turn>` as a stop token (the GGUF is a base model without a template).
Writes OUT_DIR.partial, then renames it, so an interrupted conversion leaves nothing half made.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

# Gemma's turn format; a system message is folded into the first user turn, as Gemma 3's own template does.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% set system = '' %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{% set system = message['content'] | trim ~ '\n\n' %}"
    "{% else %}"
    "{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
    "<start_of_turn>{{ role }}\n{% if loop.index0 == 1 or (loop.first and role == 'user') %}{{ system }}{% endif %}"
    "{{ message['content'] | trim }}<end_of_turn>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def convert(gguf: Path, out: Path) -> None:
    started = time.monotonic()
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, quantization_config=GgufConfig(dequantize=True), dtype=torch.bfloat16)
    model.hf_quantizer = None
    model.config.quantization_config = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, add_bos_token=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    end_of_turn = tokenizer.convert_tokens_to_ids("<end_of_turn>")
    eos = [tid for tid in (tokenizer.eos_token_id, end_of_turn) if isinstance(tid, int)]
    model.generation_config.eos_token_id = eos
    model.config.eos_token_id = eos
    model.save_pretrained(str(partial), safe_serialization=True)
    tokenizer.save_pretrained(str(partial))
    (partial / "passport-conversion.json").write_text(json.dumps({
        "source": gguf.name, "dtype": "bfloat16", "dequantized_from": "Q4_K_M", "eos_token_id": eos,
        "transformers": __import__("transformers").__version__, "torch": torch.__version__}, indent=1))
    partial.rename(out)
    print(f"converted {gguf.name} -> {out} in {time.monotonic() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    convert(Path(sys.argv[1]).expanduser(), Path(sys.argv[2]).expanduser())
