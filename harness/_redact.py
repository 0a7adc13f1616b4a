"""Secrets never land on disk nor on a terminal: one scrubber for everything passport writes.

What counts as a secret: the value of the API key variable (`register_secret` when it is read),
the credentials of a URL (`user:key@host`), and whatever follows an `Authorization`,
`Proxy-Authorization`, `api-key` or `x-api-key` name or a `Bearer`/`Basic` scheme (a server that
echoes request headers into an error body). `scrub` replaces each with `***`. Registered values
are kept in memory only, for the life of the process.

A server may echo a secret cut or re-encoded (a slice of the Basic token, the key inside a base64
blob): every run of 12 or more base64/URL-safe characters that shares 12 consecutive characters
with a registered secret, or with its base64 forms at each of the three byte alignments, is
masked whole.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["register_secret", "scrub", "scrub_bytes", "scrub_json", "strip_userinfo", "has_secret", "scrub_file",
           "MASK"]

MASK = "***"
_SECRETS: set[str] = set()
_WINDOW = 12  # characters a run must share with a secret's form to be masked (shorter: ordinary text)
_WINDOWS: set[str] = set()  # every _WINDOW-long slice of every registered secret's forms
_WINDOW_BYTES: set[bytes] = set()  # the same, encoded
_RUN = re.compile(r"[A-Za-z0-9+/_=-]{12,}")
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s\"'<>]+)@")
_HEADER = re.compile(r"(?i)(?P<name>\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]key)(?P<sep>\"?\s*[:=]\s*\"?)"
                     r"(?:(?:bearer|basic)\s+)?[^\s\"',;}]+")
_SCHEME = re.compile(r"(?i)\b(?P<scheme>bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
_MIN_SECRET = 4  # shorter values would mask ordinary text


def register_secret(value: str | None) -> None:
    """Remember a secret value so `scrub` masks it wherever it appears, whole, cut, or inside a
    base64 encoding."""
    if value and len(value) >= _MIN_SECRET:
        _SECRETS.add(value)
        for form in _forms(value):
            _WINDOWS.update(form[i:i + _WINDOW] for i in range(len(form) - _WINDOW + 1))
        _WINDOW_BYTES.update(w.encode() for w in _WINDOWS)


def _forms(value: str) -> list[str]:
    """The value and the characters of its base64 (standard and URL-safe) that do not depend on
    the bytes around it, for each of the three alignments it can have inside a longer encoding."""
    raw = value.encode()
    forms = [value]
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw).decode()
        start = -(-pad * 4 // 3) + (1 if pad else 0)  # skip the characters that mix in the padding bytes
        stable = encoded[start:len(encoded) - 4]
        forms += [stable, stable.replace("+", "-").replace("/", "_")]
    return [f for f in forms if len(f) >= _WINDOW]


def _shares_window(run: str) -> bool:
    """Whether `run` holds a _WINDOW-long slice of a secret's form, by whichever takes fewer
    checks: each of the run's slices looked up, or each slice searched for in the run (a long
    answer is one run of a megabyte: its slices would be a million lookups)."""
    if len(run) - _WINDOW + 1 <= len(_WINDOWS):
        return any(run[i:i + _WINDOW] in _WINDOWS for i in range(len(run) - _WINDOW + 1))
    return any(window in run for window in _WINDOWS)


def _mask_runs(text: str) -> str:
    return _RUN.sub(lambda match: MASK if _shares_window(match[0]) else match[0], text)


def _secrets() -> Iterable[str]:
    return sorted(_SECRETS, key=len, reverse=True)


# One pass that finds every place a pattern below could start; most texts have none.
_HINT = re.compile(r"(?i)://[^/\s]*@|authoriz|api[-_]key|\bbearer\s|\bbasic\s")
# Literals one of which every _HINT match holds, looked for in the lowered text first: a
# case-insensitive alternation scans at ~25 ms a megabyte, `in` at a fraction of a millisecond.
_HINT_WORDS = ("://", "authoriz", "api_key", "api-key", "bearer", "basic")
_HINT_WORD_BYTES = tuple(w.encode() for w in _HINT_WORDS)
# The same literals as one search: a single call for a short text (most answers), where the `in`
# loop's Python steps cost more than the search; a long one is scanned faster by `in`, word by word.
_HINT_WORDS_RE = re.compile("|".join(map(re.escape, _HINT_WORDS)))
_HINT_WORDS_RE_BYTES = re.compile(_HINT_WORDS_RE.pattern.encode())
_SHORT_CHARS = 4096


def _hinted(low: str) -> bool:
    if len(low) <= _SHORT_CHARS:
        return _HINT_WORDS_RE.search(low) is not None
    return any(w in low for w in _HINT_WORDS)


def _hinted_bytes(low: bytes) -> bool:
    if len(low) <= _SHORT_CHARS:
        return _HINT_WORDS_RE_BYTES.search(low) is not None
    return any(w in low for w in _HINT_WORD_BYTES)


def scrub(text: str) -> str:
    """`text` with every secret masked (see the module docstring)."""
    runs = bool(_WINDOWS) and _RUN.search(text) is not None
    hinted = _hinted(text.lower()) and _HINT.search(text) is not None
    if not runs and not hinted and not (_SECRETS and any(secret in text for secret in _SECRETS)):
        return text
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    text = _HEADER.sub(lambda m: f"{m['name']}{m['sep']}{MASK}", text)
    text = _SCHEME.sub(lambda m: f"{m['scheme']} {MASK}", text)
    for secret in _secrets():
        text = text.replace(secret, MASK)
    return _mask_runs(text) if runs else text


_HINT_BYTES = re.compile(_HINT.pattern.encode())


def has_secret(data: bytes) -> bool:
    """Whether `data` may hold a secret (a quick test before the slower `scrub_bytes`): a slice of
    a secret's form anywhere in it lies inside a run `scrub` masks, so the runs need no finding."""
    if (_hinted_bytes(data.lower()) and _HINT_BYTES.search(data)) or (_SECRETS and any(
            s.encode() in data for s in _SECRETS)):
        return True
    return bool(_WINDOW_BYTES) and any(window in data for window in _WINDOW_BYTES)


def scrub_bytes(data: bytes) -> bytes:
    """`scrub` for bytes (decoded as UTF-8, undecodable bytes kept)."""
    return scrub(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def scrub_json(value: Any) -> Any:
    """Every string inside a JSON-like value scrubbed (keys too)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(str(k)) if isinstance(k, str) else k: scrub_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_json(v) for v in value]
    return value


def strip_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """(the URL without `user:password@`, the user, the password); the password is registered
    as a secret."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    user, password = parts.username, parts.password
    register_secret(password)
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)), user, password


def scrub_file(path: Path) -> None:
    """Rewrite a text file an engine wrote (engine.log) with its secrets masked."""
    if path.is_file():
        data = path.read_bytes()
        if has_secret(data):
            path.write_bytes(scrub_bytes(data))
