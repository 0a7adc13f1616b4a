"""A model served from a Hugging Face folder (vLLM, MLX): the tokenizer `auto` finds, the folder's
hash in the identity, and the program a launch through `env` runs."""

from __future__ import annotations

import hashlib
from pathlib import Path

from passport.model import EngineSpec, SourcedValue, parse_spec
from passport.run._collect import _folder_sha256
from passport.run._plan import resolve_tokenizer


def _folder(root: Path) -> Path:
    folder = root / "gemma-bf16"
    folder.mkdir()
    (folder / "tokenizer.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def _spec(**engine: str) -> object:
    return parse_spec({"name": "t", "engine": {"launch": "vllm serve {model_path}", **engine},
                       "load": {"pattern": "closed", "concurrency": 1}})


def test_auto_takes_the_launched_folder_then_the_served_root(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    assert resolve_tokenizer(_spec(model_path=str(folder)), {}) == (str(folder), "auto: the launched model's folder")
    probed = {"model.root": SourcedValue(value=str(folder), source="probed", via="/v1/models")}
    spec = parse_spec({"name": "t", "endpoint": {"base_url": "http://x:1/v1"}, "load": {"pattern": "closed",
                                                                                       "concurrency": 1}})
    assert resolve_tokenizer(spec, probed) == (str(folder), "auto: the model folder the server reports (/v1/models)")
    (folder / "tokenizer.json").unlink()  # a folder without a tokenizer is not taken
    assert resolve_tokenizer(spec, probed)[0] == "none"


def test_the_folder_hash_covers_every_file_by_name_and_content(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    by_hand = hashlib.sha256()
    for name, data in (("model.safetensors", b"weights"), ("tokenizer.json", b"{}")):
        by_hand.update(f"{name}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    assert _folder_sha256(folder) == by_hand.hexdigest()
    (folder / ".cache").mkdir()
    (folder / ".cache" / "lock").write_text("x")  # hidden: left out
    assert _folder_sha256(folder) == by_hand.hexdigest()
    (folder / "model.safetensors").write_bytes(b"other weights")
    assert _folder_sha256(folder) != by_hand.hexdigest()


def test_the_program_of_an_env_launch_is_the_engine() -> None:
    assert EngineSpec.program_of(["env", "OMP_NUM_THREADS=1", "VLLM_SERVER_DEV_MODE=1", "vllm", "serve", "m"]) == "vllm"
    assert EngineSpec.program_of(["env", "-u", "HOME", "-i", "A=1", "llama-server", "-m", "x"]) == "llama-server"
    assert EngineSpec.program_of(["llama-server", "-m", "x"]) == "llama-server"
    assert EngineSpec.program_of(["/usr/bin/env"]) == "/usr/bin/env"
