"""Secrets never land on disk nor on a terminal: one scrubber for everything passport writes.

What counts as a secret: the value of the API key variable (`register_secret` when it is read),
the credentials of a URL (`user:key@host`), and whatever follows an `Authorization`,
`Proxy-Authorization`, `api-key` or `x-api-key` name or a `Bearer`/`Basic` scheme (a server that
echoes request headers into an error body). `scrub` replaces each with `***`. Registered values
are kept in memory only, for the life of the process.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["register_secret", "scrub", "scrub_bytes", "scrub_json", "strip_userinfo", "has_secret", "scrub_file",
           "MASK"]

MASK = "***"
_SECRETS: set[str] = set()
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s\"'<>]+)@")
_HEADER = re.compile(r"(?i)(?P<name>\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]key)(?P<sep>\"?\s*[:=]\s*\"?)"
                     r"(?:(?:bearer|basic)\s+)?[^\s\"',;}]+")
_SCHEME = re.compile(r"(?i)\b(?P<scheme>bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
_MIN_SECRET = 4  # shorter values would mask ordinary text


def register_secret(value: str | None) -> None:
    """Remember a secret value so `scrub` masks it wherever it appears."""
    if value and len(value) >= _MIN_SECRET:
        _SECRETS.add(value)


def _secrets() -> Iterable[str]:
    return sorted(_SECRETS, key=len, reverse=True)


# One pass that finds every place a pattern below could start; most texts have none.
_HINT = re.compile(r"(?i)://[^/\s]*@|authoriz|api[-_]key|\bbearer\s|\bbasic\s")


def scrub(text: str) -> str:
    """`text` with every secret masked (see the module docstring)."""
    if not _HINT.search(text) and not any(secret in text for secret in _SECRETS):
        return text
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    text = _HEADER.sub(lambda m: f"{m['name']}{m['sep']}{MASK}", text)
    text = _SCHEME.sub(lambda m: f"{m['scheme']} {MASK}", text)
    for secret in _secrets():
        text = text.replace(secret, MASK)
    return text


_HINT_BYTES = re.compile(_HINT.pattern.encode())


def has_secret(data: bytes) -> bool:
    """Whether `data` may hold a secret (a quick test before the slower `scrub_bytes`)."""
    return bool(_HINT_BYTES.search(data)) or any(s.encode() in data for s in _SECRETS)


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
