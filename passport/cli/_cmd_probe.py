"""`passport probe URL`: what an endpoint tells about itself, each field with its source."""

from __future__ import annotations

import argparse
from typing import Any

from passport._kindnames import KIND_PATHS
from passport.cli._exit import ExitCode
from passport.cli._shared import endpoint_url

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    probe = sub.add_parser(
        "probe", help="print what an endpoint tells about itself: engine, model, precision, capacity, cache",
        description="Probe an OpenAI-compatible endpoint (no timing): detect the engine, read every identity and "
                    "capacity field its endpoints expose, each with the endpoint it came from, mark the standard "
                    "fields it does not expose as unknown, and describe this machine (CPU, OS, GPUs through NVML). "
                    "Probing sends one 1-token request to engines whose build shows only in system_fingerprint, "
                    "never to a managed API.",
        epilog="examples:\n  passport probe 127.0.0.1:8080\n  passport probe http://gpu:8000/v1 --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    probe.add_argument("url", type=endpoint_url,
                       help="the endpoint's base URL, e.g. http://127.0.0.1:8000/v1 (HOST:PORT means "
                            "http://HOST:PORT/v1)")
    probe.add_argument("--model", default="auto", help="the model id (default: the first /v1/models lists)")
    probe.add_argument("--api", choices=list(KIND_PATHS), default="chat", help="API of the 1-token probe")
    probe.add_argument("--api-key-env", metavar="NAME", help="the environment variable holding the API key")
    probe.add_argument("--json", action="store_true", help="print JSON instead of a table")


def main(args: argparse.Namespace) -> ExitCode:
    import json

    from passport.model import parse_spec
    from passport.run import access, auth_headers, collect_host, complete_identity, model_of, probe_endpoint

    spec = parse_spec({"endpoint": {"base_url": args.url, "model": args.model, "api": args.api,
                                    "api_key_env": args.api_key_env},
                       "load": {"pattern": "closed", "concurrency": 1}}, "probe")
    way = access(spec, auth_headers(spec))
    with way.control() as control:
        cards = control.models()
        model = model_of(spec, cards, way.base_url)
        fields = complete_identity(probe_endpoint(control, cards, model, way.base_url, args.api), {})
    fields.update(collect_host())
    if args.json:
        print(json.dumps({k: v.model_dump() for k, v in sorted(fields.items())}, indent=2))
        return ExitCode.OK
    width = max(len(k) for k in fields)
    for key, value in sorted(fields.items()):
        shown = "—" if value.value is None else str(value.value)
        shown = shown if len(shown) <= 70 else shown[:67] + "..."
        print(f"{key:<{width}}  {shown:<70}  {value.source}{f' ({value.via})' if value.via else ''}")
    return ExitCode.OK
