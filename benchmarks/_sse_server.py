"""A lean SSE server for the overhead benchmark: every chunk carries its send time.

POST any path; the body's `max_tokens` is the number of chunks. `--interval-ms 0` writes them
back to back (burst); otherwise each stream sends one every interval, with a random phase so
streams do not tick together. Each chunk is an OpenAI-shaped chat delta of ~200 bytes whose
`"t"` field is `time.perf_counter_ns()` at the write (CLOCK_MONOTONIC, shared with clients).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import time

import httptools

_MAX_TOKENS = re.compile(rb'"max_tokens":\s*(\d+)')
_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
         b"Connection: close\r\n\r\n")
_PREFIX = (b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"bench",'
           b'"choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}],"t":')
_now = time.perf_counter_ns


def _event(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class _Proto(asyncio.Protocol):
    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.parser = httptools.HttpRequestParser(self)
        self.body = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        match = _MAX_TOKENS.search(self.body)
        n = int(match.group(1)) if match else 16
        asyncio.get_running_loop().create_task(self.stream(n))

    async def stream(self, n: int) -> None:
        t = self.transport
        assert t is not None
        t.write(_HEAD)
        if self.interval_s <= 0:
            for _ in range(n):
                t.write(_event(_PREFIX + b"%d}\n\n" % _now()))
        else:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + random.random() * self.interval_s
            for _ in range(n):
                await asyncio.sleep(max(0.0, deadline - loop.time()))
                if t.is_closing():
                    return
                t.write(_event(_PREFIX + b"%d}\n\n" % _now()))
                deadline += self.interval_s
        t.write(_event(b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":%d}}\n\n' % n)
                + _event(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        t.close()


async def _serve(port: int, interval_s: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Proto(interval_s), "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--interval-ms", type=float, default=10.0)
    parser.add_argument("--cpu", type=int, default=None)
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    try:  # real-time priority removes scheduler noise from the lag figures, where allowed
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (PermissionError, OSError):
        pass
    import uvloop

    uvloop.run(_serve(args.port, args.interval_ms / 1000.0))


if __name__ == "__main__":
    main()
