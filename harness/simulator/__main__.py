"""`python -m harness.simulator`: run the simulated engine in its own process."""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import yaml

from harness.simulator._server import SimConfig, serve


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.simulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--ttft-ms", type=float, default=20.0)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    parser.add_argument("--ttft-jitter-ms", type=float, default=0.0)
    parser.add_argument("--itl-jitter-ms", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="sim-model")
    parser.add_argument("--max-concurrency", type=int, default=None, help="reject (429) beyond this many streams")
    parser.add_argument("--retry-after-s", type=int, default=1, help="the Retry-After of a rejection, in seconds")
    parser.add_argument("--script", help="YAML file of scripted replies (see harness/simulator/_script.py)")
    parser.add_argument("--forget-history", action="store_true", help="scripted recall ignores earlier turns")
    parser.add_argument("--garble-above", type=int, default=None, metavar="N",
                        help="garble scripted replies that arrive while N or more other streams are active")
    parser.add_argument("--wrong-rate", type=float, default=0.0, metavar="P",
                        help="garble each scripted reply with chance P (seeded), whatever the load")
    parser.add_argument("--metrics-delay-s", type=float, default=0.0, help="answer GET /metrics this late")
    parser.add_argument("--counter-value", metavar="TEXT",
                        help="report every counter on /metrics as TEXT (e.g. NaN or +Inf, legal Prometheus values)")
    parser.add_argument("--slots", type=int, default=None, help="generate at most this many streams; queue the rest")
    parser.add_argument("--ignore-formats", action="store_true",
                        help="answer structured-output and tool requests with plain text (fields dropped)")
    parser.add_argument("--eos-after-tokens", type=int, default=None)
    parser.add_argument("--embedding-dim", type=int, default=64, metavar="D",
                        help="the length of /v1/embeddings vectors")
    parser.add_argument("--tokens-per-chunk", type=int, default=1, metavar="K",
                        help="after a first chunk of one token, send K tokens in each chunk, one ITL apart (as "
                             "speculative decoding does)")
    parser.add_argument("--stall-s", type=float, default=2.0)
    parser.add_argument("--drop-reused", action="store_true",
                        help="close without answering any request on an already-used connection")
    parser.add_argument("--no-usage", action="store_true", help="never send usage (as if the engine had none)")
    parser.add_argument("--tls-cert", help="serve HTTPS with this certificate chain (PEM)")
    parser.add_argument("--tls-key", help="private key of --tls-cert (PEM)")
    parser.add_argument(
        "--fault", action="append", default=[], metavar="KIND:EVERY",
        help="every EVERY-th request gets KIND: disconnect, malformed, stall, error_event, "
             "http500, reject, flood, huge_event, echo_auth, echo_slice, huge_headers (repeatable)",
    )
    parser.add_argument("--huge-event-mib", type=int, default=32, help="size of a huge_event fault's event")
    parser.add_argument("--die-after", type=int, metavar="N",
                        help="exit (code 3) on receiving the N-th generation request, as a crashing engine")
    parser.add_argument("--prefix-cache", action="store_true",
                        help="serve repeated prompts from a cache (cached_tokens in usage, a faster first token); "
                             "POST /reset_prefix_cache empties it")
    parser.add_argument("--reuse-port", action="store_true",
                        help="share the port with other simulator processes (SO_REUSEPORT): the kernel spreads "
                             "connections over them, for loads one process cannot serve")
    parser.add_argument("--api-key-env", metavar="NAME",
                        help="answer POSTs 401 unless they carry `Authorization: Bearer $NAME` (as a gated endpoint)")
    parser.add_argument("--build", default="dev", help="the build GET /version reports (engine.build)")
    parser.add_argument("--endless-path", metavar="PATH", help="answer GET PATH with a body that never ends")
    args = parser.parse_args()
    try:
        faults = {kind: int(every) for kind, every in (f.split(":") for f in args.fault)}
    except ValueError:
        parser.error(f"--fault takes KIND:EVERY, e.g. disconnect:5 (got {', '.join(args.fault)})")
    try:
        script = yaml.safe_load(Path(args.script).read_text()) if args.script else []
    except (OSError, yaml.YAMLError) as exc:
        parser.error(f"--script {args.script}: {exc}")
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not api_key:
        parser.error(f"--api-key-env {args.api_key_env}: that variable is not set")
    config = SimConfig(
        ttft_ms=args.ttft_ms, itl_ms=args.itl_ms, ttft_jitter_ms=args.ttft_jitter_ms,
        itl_jitter_ms=args.itl_jitter_ms, seed=args.seed, model=args.model,
        max_concurrency=args.max_concurrency, retry_after_s=args.retry_after_s, faults=faults,
        eos_after_tokens=args.eos_after_tokens, stall_s=args.stall_s, usage_in_stream=not args.no_usage,
        drop_reused=args.drop_reused, slots=args.slots,
        script=script,
        forget_history=args.forget_history, garble_above=args.garble_above, wrong_rate=args.wrong_rate,
        metrics_delay_s=args.metrics_delay_s,
        ignore_formats=args.ignore_formats, huge_event_mib=args.huge_event_mib, endless_path=args.endless_path,
        die_after=args.die_after, prefix_cache=args.prefix_cache, build=args.build,
        counter_value=args.counter_value, tokens_per_chunk=args.tokens_per_chunk,
        embedding_dim=args.embedding_dim, api_key=api_key,
    )
    context = None
    if args.tls_cert:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(args.tls_cert, args.tls_key)
        except (OSError, ssl.SSLError) as exc:
            parser.error(f"--tls-cert/--tls-key: {exc}")
    scheme = "https" if context else "http"

    def ready(port: int) -> None:
        print(f"simulated engine serving {scheme}://{args.host}:{port}/v1 (model {args.model!r}; Ctrl-C stops it)",
              file=sys.stderr, flush=True)

    try:
        import uvloop

        run: Callable[[Coroutine[Any, Any, None]], None] = uvloop.run
    except ImportError:
        run = asyncio.run
    try:
        run(serve(config, args.host, args.port, ssl_context=context, on_bound=ready, reuse_port=args.reuse_port))
    except OSError as exc:
        sys.exit(f"python -m harness.simulator: cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); "
                 "is another server there? choose another --port")
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
