"""How much TTFT passport adds over a plain blocking socket client, against the same server, in one run.

The server is the simulated engine (`python -m harness.simulator`, pinned to CPU 1) with a
scripted TTFT; both clients are pinned to CPU 0 and send the same `/v1/completions` streaming
request over keep-alive connections, `--streams` at a time (closed loop):
- `blocking`: one thread per stream, `socket.sendall` then `recv` until the first `data:` event;
  TTFT = the read that completed it minus the time before `sendall` (perf_counter_ns);
- `passport`: `passport run` (closed loop, same request count); TTFT = `ttft.any` from
  requests.parquet (first token-bearing event minus `sent_ns`).
Rounds alternate the two clients, so drifts of the machine land on both. Prints, per stream
count, each client's TTFT p50 and p90 over all rounds and passport's excess at p50 (the median
of the per-round differences), against the scripted TTFT.

    .venv/bin/python benchmarks/ttft_excess.py [--streams 1,2,4,8] [--requests 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.simulator import spawn  # noqa: E402

_now = time.perf_counter_ns
BODY = b'{"model":"sim-model","prompt":"one two three four five six seven eight","max_tokens":16,"stream":true}'


def _request(port: int) -> bytes:
    return (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (port, len(BODY), BODY))


def _blocking_user(port: int, n: int, out: list[int]) -> None:
    request = _request(port)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(n):
            t0 = _now()
            sock.sendall(request)
            buffer, first = b"", 0
            while True:
                data = sock.recv(65536)
                if not data:
                    raise RuntimeError("the server closed the connection")
                buffer += data
                if not first and b"data: {" in buffer:
                    first = _now()
                    out.append(first - t0)
                if b"data: [DONE]" in buffer and buffer.endswith(b"0\r\n\r\n"):
                    break


def blocking(port: int, streams: int, requests: int) -> np.ndarray:
    ttfts: list[int] = []
    threads = [threading.Thread(target=_blocking_user, args=(port, requests // streams, ttfts))
               for _ in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return np.array(ttfts, dtype=np.float64) / 1e6


def passport(url: str, streams: int, requests: int, folder: Path) -> np.ndarray:
    spec = {"name": f"ttft-{streams}", "endpoint": {"base_url": url, "api": "completions"}, "canaries": "none",
            "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": 16}},
            "load": {"pattern": "closed", "concurrency": streams, "warmup": {"requests": streams, "barrier": True},
                     "measure": {"requests": requests}},
            "telemetry": {"metrics": "off", "nvml": "off"},
            "validity": {"max_client_cpu_share": 100, "max_loop_lag_p99_ms": 1000, "max_dispatch_lag_p99_ms": 1000}}
    path = folder / f"spec-{streams}.yaml"
    path.write_text(json.dumps(spec))
    out = folder / f"out-{streams}-{time.monotonic_ns()}"
    subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "passport.cli", "run", str(path), "--out", str(out),
                    "--quiet"], check=False, capture_output=True, cwd=ROOT)
    run = next(out.iterdir())
    table = pq.read_table(run / "requests.parquet", columns=["phase", "sent_ns", "first_token_ns"]).to_pandas()
    measured = table[table.phase == "measure"]
    return ((measured.first_token_ns - measured.sent_ns) / 1e6).to_numpy(dtype=np.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="1,2,4,8")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ttft-ms", type=float, default=20.0)
    args = parser.parse_args()
    os.sched_setaffinity(0, {0})
    server, url = spawn("--ttft-ms", str(args.ttft_ms), "--itl-ms", "2", cpu=1)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    try:
        print(f"scripted TTFT {args.ttft_ms:g} ms; {args.requests} requests per client per round, {args.rounds} "
              "rounds, clients alternating")
        print(f"{'streams':>7}  {'blocking p50':>12} {'p90':>7}  {'passport p50':>12} {'p90':>7}  {'excess p50':>10}")
        with tempfile.TemporaryDirectory() as tmp:
            for streams in (int(s) for s in args.streams.split(",")):
                plain, ours, excess = [], [], []
                for _ in range(args.rounds):
                    b = blocking(port, streams, args.requests)
                    p = passport(url, streams, args.requests, Path(tmp))
                    plain.append(b)
                    ours.append(p)
                    excess.append(float(np.median(p) - np.median(b)))
                b_all, p_all = np.concatenate(plain), np.concatenate(ours)
                print(f"{streams:>7}  {np.median(b_all):>9.3f} ms {np.percentile(b_all, 90):>7.3f}  "
                      f"{np.median(p_all):>9.3f} ms {np.percentile(p_all, 90):>7.3f}  "
                      f"{np.median(excess):>+7.3f} ms")
    finally:
        server.terminate()
        server.wait(5)


if __name__ == "__main__":
    main()
