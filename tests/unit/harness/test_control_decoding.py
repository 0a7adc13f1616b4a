"""Control-plane answers are decoded by passport itself, never past the byte bound: a gzip bomb on
/metrics (705 MB peak when httpx decoded it whole) costs at most the bound (issue 22)."""

from __future__ import annotations

import gzip
import socket
import struct
import threading
import tracemalloc
import zlib

import httpx
import pytest

from harness import ControlClient, EndpointError
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


@fault("a server that drops a kept-alive connection after an error answer (vLLM 0.32 after /server_info's 500)",
       "the next control-plane call is tried once more on a fresh connection: the probe keeps /metrics")
def test_a_connection_dropped_after_an_error_answer_is_tried_again_fresh() -> None:
    connections: list[int] = []
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        for n in range(2):
            conn, _ = server.accept()
            connections.append(n)
            with conn:
                conn.recv(65536)
                if n == 0:  # an error answer, kept alive; then the next request is met by a reset
                    conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 2\r\n\r\n{}")
                    conn.recv(65536)
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\nvllm:up 1\n\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    record: list[dict[str, object]] = []
    with ControlClient(f"http://127.0.0.1:{server.getsockname()[1]}/v1", record=record) as control:
        assert control.get_json("/server_info") is None
        assert control.get_text("/metrics") == "vllm:up 1\n\n"
    thread.join(5)
    server.close()
    assert connections == [0, 1]
    assert [e["status"] for e in record] == [500, None, 200]
    assert record[1]["error_type"] in ("ReadError", "RemoteProtocolError", "WriteError")


def test_a_model_list_of_200_and_no_body_says_what_the_server_did_and_the_fix() -> None:
    control = ControlClient("http://engine:1/v1", transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    with pytest.raises(EndpointError, match="answered 200 with an empty body.*create ~/.cache/huggingface/hub"):
        control.models()
