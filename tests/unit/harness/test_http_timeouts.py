"""The HTTP client's watchdog against a scripted local server: each timeout fires near its own
deadline, including one that a first byte brought forward after the last scan (a stall limit far
shorter than the first-byte limit), and streams that keep sending are never cut."""

from __future__ import annotations

import asyncio
import time

from harness import Endpoint, Exchange, HttpClient, Timeouts

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _event(text: str) -> bytes:
    data = b'data: {"choices": [{"index": 0, "delta": {"content": "%s"}}]}\n\n' % text.encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


def _exchange(script: list[tuple[float, bytes]], timeouts: Timeouts) -> tuple[Exchange, float]:
    """One exchange under `timeouts` against a server that answers with `script` ((pause in s,
    bytes) in order, then silence until the client is done); (the exchange, seconds it took)."""
    async def main() -> tuple[Exchange, float]:
        done = asyncio.Event()
        handlers: list[asyncio.Task[None]] = []

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)
                for pause_s, data in script:
                    await asyncio.sleep(pause_s)
                    writer.write(data)
                    await writer.drain()
                await done.wait()
            except (ConnectionError, asyncio.IncompleteReadError):
                pass  # the client cut it
            finally:
                writer.close()

        def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            handlers.append(asyncio.ensure_future(answer(reader, writer)))

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = HttpClient(Endpoint.parse(f"http://127.0.0.1:{port}/v1"), timeouts, max_idle=1)
        await client.start()
        start = time.perf_counter()
        ex = await client.exchange(client.request_bytes("/completions", b"{}"))
        took = time.perf_counter() - start
        await client.aclose()
        done.set()
        await asyncio.gather(*handlers)
        server.close()
        await server.wait_closed()
        return ex, took

    return asyncio.run(main())


def test_a_stall_after_the_first_byte_fires_at_the_stall_limit_not_the_first_byte_limit() -> None:
    # first byte 50 ms after the send, then silence: the stall deadline (50 + 300 ms) is set after
    # the watchdog's scan at the send, and far before the first-byte deadline (30 s)
    ex, took = _exchange([(0.0, HEAD), (0.05, _event("a"))], Timeouts(first_byte_s=30, stall_s=0.3, total_s=60))
    assert ex.timeout_kind == "stall" and "stalled for more than 0.3 s" in (ex.error or "")
    assert 0.3 <= took < 1.0


def test_each_limit_fires_near_its_own_deadline() -> None:
    silent, took = _exchange([(0.0, HEAD)], Timeouts(first_byte_s=0.2, stall_s=30, total_s=60))
    assert silent.timeout_kind == "first_byte" and 0.2 <= took < 0.9
    steady = [(0.0, HEAD)] + [(0.05, _event(str(i))) for i in range(40)]  # a byte every 50 ms, for 2 s
    cut, took = _exchange(steady, Timeouts(first_byte_s=30, stall_s=30, total_s=0.4))
    assert cut.timeout_kind == "total" and 0.4 <= took < 1.1


def test_a_stream_that_keeps_sending_is_never_cut_by_a_short_stall_limit() -> None:
    steady = [(0.0, HEAD)] + [(0.05, _event(str(i))) for i in range(16)] + [(0.05, b"0\r\n\r\n")]
    ex, took = _exchange(steady, Timeouts(first_byte_s=0.2, stall_s=0.2, total_s=60))
    assert ex.error is None and ex.status == 200 and 0.8 <= took < 2.0
