"""Control-plane answers are decoded by passport itself, never past the byte bound: a gzip bomb on
/metrics (705 MB peak when httpx decoded it whole) costs at most the bound (issue 22)."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import httpx
import pytest

from harness import ControlClient
from tests.faults import fault


def _serving(body: bytes, encoding: str | None) -> ControlClient:
    headers = {"content-encoding": encoding} if encoding else {}

    def handle(request: httpx.Request) -> httpx.Response:
        assert request.headers["accept-encoding"] == "gzip, deflate"
        return httpx.Response(200, stream=httpx.ByteStream(body), headers=headers)

    return ControlClient("http://engine:1/v1", transport=httpx.MockTransport(handle), max_bytes=1 << 20)


def test_gzip_and_deflate_answers_are_decoded() -> None:
    text = "vllm:num_requests_running 3\n" * 100
    for body, encoding in ((gzip.compress(text.encode()), "gzip"), (zlib.compress(text.encode()), "deflate"),
                           (text.encode(), None)):
        assert _serving(body, encoding).get_text("/metrics") == text


@fault("a gzip bomb on /metrics (200 MiB of zeros in 200 KB)", "decoded a chunk at a time and cut at "
       "`limits.control_bytes`: the scrape fails, memory grows by the bound, not the bomb")
def test_a_gzip_bomb_is_cut_at_the_bound_while_decoding() -> None:
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = bomb.compress(bytes(200 << 20)) + bomb.flush()
    assert len(body) < 400_000
    control = _serving(body, "gzip")
    tracemalloc.start()
    with pytest.raises(httpx.HTTPError, match="more than the control-plane bound once decoded from gzip"):
        control.fetch("GET", f"{control.root_url}/metrics")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 16 << 20, peak  # the 1 MiB bound and a few raw chunks, not 200 MiB


def test_an_encoding_it_did_not_offer_is_refused() -> None:
    control = _serving(b"\x28\xb5\x2f\xfd", "zstd")
    with pytest.raises(httpx.HTTPError, match="Content-Encoding 'zstd', which passport does not decode"):
        control.fetch("GET", f"{control.root_url}/metrics")
