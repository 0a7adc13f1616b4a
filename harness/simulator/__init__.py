"""A simulated OpenAI-compatible streaming engine with known ground truth.

For what a real engine cannot do on demand: scripted TTFT and inter-token delays (fixed, or
drawn from a seeded distribution), server-side send stamps in every chunk (`sim` field:
`recv_ns` when the request was parsed, `sent_ns` when the chunk was written, both
`time.perf_counter_ns`, i.e. CLOCK_MONOTONIC, shared by processes on one host), overload
(`max_concurrency` -> 429 with Retry-After) and faults (disconnects, malformed SSE, stalls,
error events, HTTP 500), each on every k-th request so tests know which requests fail.

Not a model: the text is `tok0 tok1 ...`, one token per chunk, and usage counts those.
Run it with `python -m harness.simulator --port 8001 --ttft-ms 50 --itl-ms 10`.
"""

from harness.simulator._hog import cpu_hog
from harness.simulator._server import FaultKind, SimConfig, serve, start_in_thread
from harness.simulator._spawn import spawn

__all__ = ["FaultKind", "SimConfig", "cpu_hog", "serve", "start_in_thread", "spawn"]
