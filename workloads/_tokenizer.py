"""Tokenizers that make synthetic input lengths exact, loaded offline.

A tokenizer is declared as one string:
- `none`: no tokenizer; lengths are approximate (one token per word) and the protocol says so;
- `gguf:<file>`: the tokenizer inside a GGUF model file. transformers can read a GGUF only
  through torch, so the first load converts it once into a Hugging Face tokenizer folder under
  the cache (`<cache>/tokenizers/<sha256 of the GGUF, 16 hex>/`); later loads read that folder
  and need no torch;
- any other string: a local folder holding a Hugging Face tokenizer.

`auto` is resolved by the caller (it knows the endpoint and the launched model) before this
module is asked. Nothing here touches the network: transformers runs with HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from workloads._errors import TokenizerError

__all__ = ["Tokenizer", "LoadedTokenizer", "load_tokenizer", "default_cache_dir", "in_cache", "is_tokenizer_folder"]

_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
)
_WORD = re.compile(r"\S+")


class Tokenizer(Protocol):
    """What materialization needs: text to ids and back, without special tokens."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


@dataclass(frozen=True)
class LoadedTokenizer:
    """A tokenizer with its identity, as recorded in the protocol.

    `exact` is False for `none`: lengths are then approximations and flagged as such.
    `sha256` hashes the tokenizer's files (the GGUF itself for `gguf:`), None for `none`.
    """

    source: str
    sha256: str | None
    exact: bool
    tokenizer: Tokenizer


class _WordTokenizer:
    """`tokenizer: none`: one token per whitespace-separated word (approximate)."""

    def __init__(self) -> None:
        self._words: dict[str, int] = {}
        self._ids: list[str] = []

    def encode(self, text: str) -> list[int]:
        ids = []
        for word in _WORD.findall(text):
            index = self._words.get(word)
            if index is None:
                index = self._words[word] = len(self._ids)
                self._ids.append(word)
            ids.append(index)
        return ids

    def decode(self, ids: list[int]) -> str:
        return " ".join(self._ids[i] for i in ids)


class _HFTokenizer:
    """A transformers tokenizer used without special tokens."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def encode(self, text: str) -> list[int]:
        return list(self._inner.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return str(self._inner.decode(ids, skip_special_tokens=False))


def default_cache_dir() -> Path:
    """`$PASSPORT_CACHE` or `~/.cache/passport`: where engine, model and tokenizers are cached."""
    return Path(os.environ.get("PASSPORT_CACHE", Path.home() / ".cache" / "passport"))


CACHE_MARK = "{cache}"


def in_cache(path: str) -> str:
    """`path` with a leading `{cache}` (after an optional `gguf:`) replaced by `default_cache_dir()`:
    a spec names what scripts/setup.sh put in the cache wherever $PASSPORT_CACHE points."""
    prefix = "gguf:" if path.startswith("gguf:") else ""
    rest = path[len(prefix):]
    return prefix + str(default_cache_dir()) + rest[len(CACHE_MARK):] if rest.startswith(CACHE_MARK) else path


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def is_tokenizer_folder(path: str | Path) -> bool:
    """True for a local folder holding any of the tokenizer files `load_tokenizer` reads (a Hugging
    Face model folder, as vLLM, SGLang and MLX serve)."""
    folder = Path(os.path.expanduser(str(path)))
    return folder.is_dir() and any((folder / name).is_file() for name in _TOKENIZER_FILES)


def _sha256_folder(folder: Path) -> str:
    digest = hashlib.sha256()
    found = False
    for name in _TOKENIZER_FILES:
        path = folder / name
        if path.is_file():
            found = True
            digest.update(name.encode() + b"\0" + _sha256_file(path).encode() + b"\n")
    if not found:
        raise TokenizerError(
            f"{folder} holds no tokenizer files ({', '.join(_TOKENIZER_FILES)}); "
            "point workload.tokenizer at a Hugging Face tokenizer folder, use gguf:<file>, or none"
        )
    return digest.hexdigest()


def _auto_tokenizer(folder: Path, **kwargs: Any) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), **kwargs)


def _convert_gguf(gguf: Path, target: Path) -> None:
    try:
        import torch  # noqa: F401  (transformers reads GGUF files only through torch)
    except ImportError as exc:
        raise TokenizerError(
            f"converting the tokenizer of {gguf} needs torch once (transformers reads GGUF through "
            "it); run scripts/setup.sh, or `pip install 'passport[gguf-convert]'`, or declare "
            "workload.tokenizer as a tokenizer folder"
        ) from exc
    try:
        inner = _auto_tokenizer(gguf.parent, gguf_file=gguf.name)
    except Exception as exc:  # transformers raises many types for an unsupported file
        raise TokenizerError(f"transformers could not read the tokenizer in {gguf}: {exc}") from exc
    partial = target.with_name(target.name + ".partial")
    inner.save_pretrained(str(partial))
    partial.rename(target)


def load_tokenizer(source: str, cache_dir: Path | None = None) -> LoadedTokenizer:
    """Load the tokenizer declared as `source` (`none`, `gguf:<file>` or a folder), offline.

    Raises TokenizerError naming the path and the fix when it cannot be loaded.
    """
    if source == "none":
        return LoadedTokenizer(source, None, False, _WordTokenizer())
    if source == "auto":
        raise TokenizerError("tokenizer 'auto' must be resolved before loading (internal error)")
    if source.startswith("gguf:"):
        gguf = Path(source[5:]).expanduser()
        if not gguf.is_file():
            raise TokenizerError(f"workload.tokenizer: GGUF file {gguf} not found")
        sha = _sha256_file(gguf)
        folder = (cache_dir or default_cache_dir()) / "tokenizers" / sha[:16]
        if not folder.is_dir():
            folder.parent.mkdir(parents=True, exist_ok=True)
            _convert_gguf(gguf, folder)
        return LoadedTokenizer(source, sha, True, _HFTokenizer(_auto_tokenizer(folder)))
    folder = Path(source).expanduser()
    if not folder.is_dir():
        raise TokenizerError(
            f"workload.tokenizer: {folder} is not a folder; use a Hugging Face tokenizer folder, "
            "gguf:<file>, or none"
        )
    sha = _sha256_folder(folder)
    try:
        inner = _auto_tokenizer(folder)
    except Exception as exc:
        raise TokenizerError(f"transformers could not load the tokenizer in {folder}: {exc}") from exc
    return LoadedTokenizer(source, sha, True, _HFTokenizer(inner))

