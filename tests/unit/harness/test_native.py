"""The C helpers' loader: built once per source into the cache, never loaded from a file another
user could have written, and a clear reason (the Python path taken) where none can be built."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness import _native
from harness._pacer import Pacer

pytestmark = pytest.mark.skipif(not shutil.which(os.environ.get("CC", "cc")), reason="no C compiler here")


def test_a_helper_is_built_once_into_the_cache_and_loaded_from_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PASSPORT_CACHE", str(tmp_path))
    first = _native.load("pacer")
    assert not isinstance(first, str), first
    assert first.path.parent == tmp_path / "native" and first.path.stat().st_mode & 0o077 == 0
    built_ns = first.path.stat().st_mtime_ns
    monkeypatch.setenv("CC", "/nonexistent/cc")  # a second load compiles nothing
    again = _native.load("pacer")
    assert not isinstance(again, str) and again.path == first.path and again.path.stat().st_mtime_ns == built_ns


def test_a_cached_helper_others_could_write_is_never_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PASSPORT_CACHE", str(tmp_path))
    first = _native.load("pacer")
    assert not isinstance(first, str), first
    first.path.chmod(0o777)  # group and world writable: anyone might have replaced it
    second = _native.load("pacer")
    assert not isinstance(second, str), second
    assert second.path != first.path and second.path.stat().st_mode & 0o022 == 0


def test_without_a_compiler_the_pacer_says_why_and_uses_its_python_thread(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PASSPORT_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    reason = _native.load("pacer")
    assert isinstance(reason, str) and "/nonexistent/cc" in reason
    stats = Pacer().stats
    assert not stats.native and stats.native_reason == reason
    monkeypatch.setenv("PASSPORT_NATIVE", "0")
    assert Pacer().stats.native_reason == "disabled by PASSPORT_NATIVE=0"
