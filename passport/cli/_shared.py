"""What several commands share: the endpoint options, a spec with its command-line overrides,
and the progress bars and status lines of long commands (none with --quiet)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from passport._kindnames import KIND_PATHS

if TYPE_CHECKING:
    from passport.audit import Trust
    from passport.model import Override, RunSpec

__all__ = ["add_endpoint_options", "add_load_options", "endpoint_url", "load_spec_with_overrides", "Printer",
           "RichProgress", "add_trust_options", "trust_of"]

# passport.audit.TRUSTED_KEYS_ENV, unimported: --help is built without loading the auditor
_TRUSTED_KEYS_ENV = "PASSPORT_TRUSTED_KEYS"


def add_trust_options(command: argparse.ArgumentParser, unsigned: bool = True) -> None:
    """--key (and, with `unsigned`, --allow-unsigned): which passports a command acts on."""
    command.add_argument("--key", action="append", default=[], metavar="FINGERPRINT",
                         help="act only on passports signed by this key (sha256:..., as signature.fingerprint shows "
                              f"it); repeatable: any of them. {_TRUSTED_KEYS_ENV} adds keys, separated by commas "
                              "or spaces, so CI sets them once")
    if unsigned:
        command.add_argument("--allow-unsigned", action="store_true",
                             help="also act on an unsigned passport (schema 1.3 and earlier were never signed); "
                                  "refused otherwise, since a forger who rewrites a passport cannot sign it")


def trust_of(args: argparse.Namespace) -> Trust:
    """The Trust a command's --key / --allow-unsigned and PASSPORT_TRUSTED_KEYS declare."""
    from passport.audit import Trust

    return Trust.of(args.key, bool(getattr(args, "allow_unsigned", False)))


def endpoint_url(text: str) -> str:
    """An endpoint as users type it (`127.0.0.1:8080`, `http://host:8000`) as the base URL the
    spec takes: http:// when no scheme is given, /v1 when no path is."""
    from urllib.parse import urlsplit

    if text.startswith("/"):  # vLLM's --endpoint is the API's path: read with --base-url or --host/--port
        return text
    url = text if "://" in text else f"http://{text}"
    return url.rstrip("/") + "/v1" if urlsplit(url).path in ("", "/") else url


def add_endpoint_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--endpoint", metavar="URL", type=endpoint_url,
                         help="override endpoint.base_url, e.g. http://127.0.0.1:8000/v1 (HOST:PORT means "
                              "http://HOST:PORT/v1); on a spec with an engine: section, attach to the server running "
                              "there instead of launching one")
    command.add_argument("--no-launch", action="store_true",
                         help="never launch the spec's engine: attach to the server at endpoint.base_url (or on "
                              "engine.port); identity is what it reports")
    command.add_argument("--api-key-env", metavar="NAME",
                         help="override endpoint.api_key_env: the environment variable holding the API key")
    command.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                         help="output folder (default: results/)")
    command.add_argument("--quiet", action="store_true", help="no progress bar or status lines")


def add_load_options(command: argparse.ArgumentParser) -> None:
    """The flags of a spec-less run, in the vocabulary of vLLM's and SGLang's bench scripts."""
    group = command.add_argument_group(
        "a run without a spec (each flag also overrides a spec's field; all are recorded in the passport)")
    group.add_argument("--model", metavar="ID", help="endpoint.model (default: the first /models lists)")
    group.add_argument("--api", choices=list(KIND_PATHS),
                       help="endpoint.api, the endpoint kind (default chat: the server applies its chat template; "
                            "completions sends the prompt as is, as vLLM's bench serve does by default; responses, "
                            "anthropic_messages and audio_transcriptions stream; embeddings, rerank and score "
                            "answer whole)")
    group.add_argument("--concurrency", "--max-concurrency", type=_levels, metavar="N[,N...]",
                       help="N users in a closed loop; with --rate, a cap on requests in flight (vLLM's and "
                            "SGLang's --max-concurrency); a list (1,2,4,8) runs a sweep, one level each")
    group.add_argument("--rate", "--request-rate", type=_levels, metavar="R[,R...]",
                       help="an open loop of R requests per second (vLLM's and SGLang's --request-rate); inf: every "
                            "request at once, i.e. a closed loop of --concurrency users, or of all --num-prompts "
                            "without it; a list (1,2,4,inf) runs a sweep, one level each")
    group.add_argument("--arrival", choices=["poisson", "constant", "gamma"],
                       help="the open loop's arrival process (default: poisson)")
    group.add_argument("--workers", metavar="N|auto",
                       help="send the load from N processes (load.workers; auto: calibrated on this machine)")
    group.add_argument("--num-prompts", type=int, metavar="N", help="measure N requests (load.measure.requests)")
    group.add_argument("--duration", type=float, metavar="S", help="measure for S seconds (load.measure.duration_s)")
    group.add_argument("--input-len", type=int, metavar="N",
                       help="every prompt N tokens of text under the model's tokenizer, as vLLM's --random-input-len "
                            "(workload.input_tokens); the chat API's template adds tokens the server counts, stated "
                            "in the passport's exact_input_lengths rule")
    group.add_argument("--output-len", type=int, metavar="N", help="every answer N tokens (workload.output_tokens)")
    group.add_argument("--dataset", metavar="FILE", help="replay this request log (workload.source.path)")
    group.add_argument("--dataset-format", choices=["openai", "sharegpt"], default="openai",
                       help="the log's format (default: openai JSONL)")
    group.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="set_fields",
                       help="set any spec field by its dotted path, the value read as YAML "
                            "(--set decoding.temperature=0 --set canaries=none); repeatable")


def _levels(text: str) -> list[float]:
    """`--concurrency 8` or `--concurrency 1,2,4,8`; `--rate 2.5` or `--rate 1,2,4,inf`."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number, or numbers separated by commas (1,2,4,8)") \
            from None
    if any(v != v for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: nan is not a load")
    return values


GUIDELLM_SWEEP_SIZE = 10  # guidellm's --rate-type sweep without --rate: 10 benchmarks


def _flag_sweep(args: argparse.Namespace) -> None:
    """A list given to --concurrency or --rate (or guidellm's --rate-type sweep) as a sweep:
    `args.flag_sweep` holds the sweep's fields, and the single-valued flags hold the first level
    (the base load each level changes); without a list, the flags hold their one value."""
    from passport._errors import SpecError

    users, rate = getattr(args, "concurrency", None), getattr(args, "rate", None)
    args.flag_sweep = None
    if getattr(args, "rate_type", None) == "sweep":
        size = GUIDELLM_SWEEP_SIZE if rate is None else rate[0]
        if rate is not None and (len(rate) > 1 or size != int(size) or size < 3):
            raise SpecError("--rate-type sweep --rate N: N is the number of benchmarks, 3 or more (guidellm's "
                            "sweep size; default 10)")
        if users is not None:
            raise SpecError("--rate-type sweep: its levels are rates from the synchronous to the throughput probe; "
                            "drop --max-concurrency, or sweep a list of rates with --request-rate R1,R2,...")
        # guidellm's sweep: constant-rate levels unless --arrival says otherwise; the base load
        # (which every level replaces) is the synchronous one
        args.flag_sweep = {"vary": "rate", "levels": "auto", "interpolate": int(size) - 2,
                           "arrival": getattr(args, "arrival", None) or "constant",
                           "flag": f"--rate-type sweep --rate {int(size)}"}
        args.rate, args.arrival = None, None
        return
    if users is not None and rate is not None and len(users) > 1 and len(rate) > 1:
        raise SpecError("--concurrency and --rate are both lists: sweep one of them (the other, one value, "
                        "stays fixed)")
    if users is not None and len(users) > 1:
        if rate is not None:
            raise SpecError("--concurrency N1,N2,... with --rate: a list of caps under one rate is not a sweep "
                            "passport runs; sweep the rate (--rate R1,R2,... --max-concurrency N) or the users "
                            "(--concurrency N1,N2,... alone)")
        args.flag_sweep = {"vary": "concurrency", "levels": users, "flag": "--concurrency " + _listed(users)}
        args.concurrency = users[0]
    elif users is not None:
        args.concurrency = users[0]
    if users is not None and (args.concurrency < 1 or args.concurrency != int(args.concurrency)):
        raise SpecError(f"--concurrency {_listed(users)}: give whole numbers of users, 1 or more")
    if users is not None:
        args.concurrency = int(args.concurrency)
    if rate is not None and len(rate) > 1:
        args.flag_sweep = {"vary": "rate", "levels": rate, "flag": "--rate " + _listed(rate)}
    if rate is not None:
        args.rate = rate[0]


def _listed(values: list[float]) -> str:
    return ",".join(f"{v:g}" for v in values)


def _their_load(args: argparse.Namespace) -> None:
    """guidellm's --rate-type and its window flags, and vLLM's defaults, as passport's own load
    flags on `args` (what each means: passport.cli._vocabulary.VOCABULARY)."""
    from passport._errors import SpecError

    _flag_sweep(args)
    kind, rate = getattr(args, "rate_type", None), getattr(args, "rate", None)
    if kind == "synchronous":
        args.concurrency, args.rate = 1, None
    elif kind == "concurrent":
        if rate is None or rate < 1 or rate != int(rate):
            raise SpecError("--rate-type concurrent: give the number of users as --rate N")
        args.concurrency, args.rate = int(rate), None
    elif kind == "throughput":
        args.concurrency, args.rate = (int(rate) if rate else None), float("inf")
    elif kind in ("constant", "poisson"):
        if rate is None:
            raise SpecError(f"--rate-type {kind}: give the requests per second as --rate R")
        args.arrival = kind
    args.given_as = {}  # our flag's dest -> their flag, so the passport records the flag as given
    for theirs, ours in (("max_seconds", "duration"), ("max_requests", "num_prompts"),
                         ("random_input_len", "input_len"), ("random_output_len", "output_len")):
        if getattr(args, theirs, None) is not None:
            setattr(args, ours, getattr(args, theirs))
            args.given_as[ours] = "--" + theirs.replace("_", "-")
    ratio = getattr(args, "random_range_ratio", None)
    if ratio:  # vLLM's range ratio spreads --input-len and --output-len too
        args.random_input_len, args.random_output_len = args.input_len, args.output_len
        args.input_len = args.output_len = None
    share = getattr(args, "warmup_percent", None)
    if share is not None:
        if not 0 <= share < 1 or args.num_prompts is None:
            raise SpecError("--warmup-percent F: give a share from 0 to below 1, with --max-requests N")
        args.num_warmups = math.ceil(share * args.num_prompts)
    if getattr(args, "disable_tqdm", False):
        args.quiet = True


def _load_flags(args: argparse.Namespace, raw: dict[str, Any], patch: Any) -> None:
    """Turn the spec-less run's flags (add_load_options) into overrides."""
    from passport._errors import SpecError
    from passport.cli._vocabulary import borrowed_overrides
    from workloads import load_yaml

    written = raw.get("load")
    load: dict[str, Any] = written if isinstance(written, dict) else {}
    for flag, field in (("model", "endpoint.model"), ("api", "endpoint.api")):
        if getattr(args, flag, None) is not None:
            patch(field, getattr(args, flag), f"--{flag}")
    rate, users, arrival = getattr(args, "rate", None), getattr(args, "concurrency", None), getattr(args, "arrival",
                                                                                                   None)
    if rate is not None and (rate <= 0 or rate != rate):
        raise SpecError(f"--rate {rate}: give requests per second above 0, or inf to send every request at once")
    if rate == float("inf"):
        # vLLM's and SGLang's burst: all requests due at once, as many in flight as the cap lets
        if users is None:
            users = getattr(args, "num_prompts", None)
            if users is None:
                raise SpecError("--rate inf sends every request at once: give --num-prompts N (N requests at once) "
                                "or --concurrency N (N in flight, the next sent as one ends)")
        patch("load.pattern", "closed", f"--rate inf: every request due at once, {users} in flight")
        patch("load.concurrency", users, f"--rate inf: every request due at once, {users} in flight")
        if "rate_per_s" in load:
            patch("load.rate_per_s", None, "--rate inf")
        rate = None
    elif rate is not None:
        open_pattern = load.get("pattern") if load.get("pattern") in ("poisson", "constant", "gamma") else "poisson"
        patch("load.pattern", arrival or open_pattern, "--arrival" if arrival else "--rate")
        patch("load.rate_per_s", rate, "--rate")
        patch("load.concurrency", users, "--concurrency (a cap on requests in flight)" if users else "--rate")
    elif users is not None:
        patch("load.pattern", "closed", "--concurrency")
        patch("load.concurrency", users, "--concurrency")
        if "rate_per_s" in load:
            patch("load.rate_per_s", None, "--concurrency")
    elif arrival is not None:
        patch("load.pattern", arrival, "--arrival")
    prompts, seconds = getattr(args, "num_prompts", None), getattr(args, "duration", None)
    if prompts is not None and seconds is not None:
        raise SpecError("give --num-prompts or --duration, not both")
    given = getattr(args, "given_as", {})
    if prompts is not None:
        patch("load.measure", {"requests": prompts}, given.get("num_prompts", "--num-prompts"))
    if seconds is not None:
        patch("load.measure", {"duration_s": seconds}, given.get("duration", "--duration"))
    for flag, field in (("input_len", "workload.input_tokens"), ("output_len", "workload.output_tokens")):
        if getattr(args, flag, None) is not None:
            patch(field, {"dist": "fixed", "value": getattr(args, flag)},
                  given.get(flag, f"--{flag.replace('_', '-')}"))
    workers = getattr(args, "workers", None)
    if workers is not None:
        if workers != "auto" and not workers.isdigit():
            raise SpecError(f"--workers {workers!r}: give a number of processes (1-64) or auto")
        patch("load.workers", workers if workers == "auto" else int(workers), "--workers")
    if getattr(args, "dataset", None):
        patch("workload.source", {"path": args.dataset, "format": args.dataset_format}, "--dataset")
    borrowed_overrides(args, patch)
    for item in getattr(args, "set_fields", []):
        key, sep, text = item.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise SpecError(f"--set {item!r}: write KEY=VALUE with KEY a dotted spec path, e.g. load.concurrency=8")
        try:
            value = load_yaml(text.encode(), f"--set {key}") if text else None
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        patch(key, value, f"--set {key}")


def _attach(args: argparse.Namespace, raw: dict[str, Any], patch: Any) -> None:
    """--endpoint or --no-launch on a spec that launches an engine: use the running server."""
    from passport._errors import SpecError

    engine = raw.get("engine")
    if not isinstance(engine, dict) or not (args.endpoint or getattr(args, "no_launch", False)):
        return
    flag = "--endpoint" if args.endpoint else "--no-launch"
    patch("engine", None, f"{flag}: attached to the running server; nothing launched")
    if not args.endpoint and not (raw.get("endpoint") or {}).get("base_url"):
        if engine.get("port") is None:
            raise SpecError("--no-launch: the spec's engine has no fixed port and sets no endpoint.base_url; "
                            "pass --endpoint URL of the running server")
        patch("endpoint.base_url", f"http://127.0.0.1:{engine['port']}/v1", "--no-launch (engine.port)")


def _their_endpoint(args: argparse.Namespace) -> tuple[str | None, str]:
    """The server's base URL from --endpoint URL, vLLM's --base-url or --host/--port, or
    guidellm's --target, and the flag that gave it; (None, "") when none did."""
    from passport._errors import SpecError

    named = (("--endpoint", args.endpoint), ("--base-url", getattr(args, "base_url", None)),
             ("--target", getattr(args, "target", None)))
    given = [(flag, value) for flag, value in named if value and not str(value).startswith("/")]
    host, port = getattr(args, "host", None), getattr(args, "port", None)
    if host is not None or port is not None:
        given.append(("--host/--port", f"{host or '127.0.0.1'}:{port or 8000}"))
    if len(given) > 1:
        raise SpecError(f"{given[0][0]} and {given[1][0]} both name the server: give one")
    if not given:
        if args.endpoint and str(args.endpoint).startswith("/"):  # vLLM's default server
            return endpoint_url("127.0.0.1:8000"), "--endpoint (vLLM's default host and port)"
        return None, ""
    return endpoint_url(str(given[0][1])), given[0][0]


def load_spec_with_overrides(args: argparse.Namespace) -> tuple[RunSpec, dict[str, Any], dict[str, Any],
                                                                 list[Override]]:
    """(spec, the YAML as written, the YAML with command-line overrides, the overrides). Without a
    spec file (`passport run --endpoint URL --concurrency N ...`), the flags are the spec."""
    from passport._errors import SpecError
    from passport._input import check_input_file

    if args.spec is not None:  # before the heavy imports: /dev/zero or a FIFO is refused at once
        try:
            check_input_file(args.spec, "spec")
        except OSError as exc:
            raise SpecError(f"cannot read spec {args.spec}: {exc.strerror}") from None
        except ValueError as exc:
            raise SpecError(str(exc)) from None
    from passport.model import Override, load_spec, parse_spec, with_overrides

    _their_load(args)
    base_url, flag = _their_endpoint(args)
    if args.spec is not None:
        spec, raw = load_spec(args.spec)
        source = str(args.spec)
    elif not base_url:
        raise SpecError("give a spec, or run from flags alone: --endpoint URL (or vLLM's --base-url, guidellm's "
                        "--target) and the load, e.g. --concurrency N or --rate R (see passport run --help)")
    else:
        raw, source = {}, "from the command line"
        if getattr(args, "concurrency", None) is None and getattr(args, "rate", None) is None \
                and getattr(args, "flag_sweep", None) is None:
            # vLLM's bench serve's default: --request-rate inf, every prompt at once (1000 of them)
            args.rate = float("inf")
            if getattr(args, "num_prompts", None) is None and getattr(args, "duration", None) is None:
                args.num_prompts = 1000
    overrides: list[Override] = []

    def patch(field: str, value: Any, flag: str) -> None:
        overrides.append(Override(field=field, value=value, source=flag))

    if base_url:
        patch("endpoint.base_url", base_url, flag)
    if args.endpoint and args.endpoint.startswith("/"):
        paths = {f"/v1{path}": name for name, path in KIND_PATHS.items()}
        api = paths.get(args.endpoint.rstrip("/"))
        if api is None:
            raise SpecError(f"--endpoint {args.endpoint}: passport measures {', '.join(paths)} "
                            "(or give the server's URL, e.g. --endpoint http://127.0.0.1:8000/v1)")
        patch("endpoint.api", api, f"--endpoint {args.endpoint}")
    if args.api_key_env:
        patch("endpoint.api_key_env", args.api_key_env, "--api-key-env")
    _attach(args, raw, patch)
    if getattr(args, "vary", None):
        patch("sweep.vary", args.vary, "--vary")
    if getattr(args, "levels", None):
        try:
            levels: Any = "auto" if args.levels == "auto" else [float(x) for x in args.levels.split(",")]
        except ValueError:
            raise SpecError(f"--levels {args.levels!r}: write ascending numbers separated by commas, "
                            "e.g. 1,2,4,8, or auto") from None
        patch("sweep.levels", levels, "--levels")
    _load_flags(args, raw, patch)
    flagged = getattr(args, "flag_sweep", None)
    if flagged is not None:
        patch("sweep.vary", flagged["vary"], flagged["flag"])
        levels = flagged["levels"]
        patch("sweep.levels", levels if levels == "auto" else [_level_value(x) for x in levels], flagged["flag"])
        if "interpolate" in flagged:
            patch("sweep.auto.interpolate", flagged["interpolate"], flagged["flag"])
            patch("sweep.arrival", flagged["arrival"], flagged["flag"])
            if not isinstance(raw.get("load"), dict):  # a base load every level replaces: uncapped, open
                base = f"{flagged['flag']} (the base load; every level sets its own)"
                patch("load.pattern", flagged["arrival"], base)
                patch("load.rate_per_s", 1.0, base)
    merged = with_overrides(raw, overrides)
    if overrides or args.spec is None:
        spec = parse_spec(merged, source)
    return spec, raw, merged, overrides


def _level_value(value: float) -> float | str:
    """A level as the spec writes it: a number, or "inf" (JSON has no infinity)."""
    return "inf" if value == float("inf") else value


_BAR_EVERY_S = 0.1  # the progress bar is told the counts at most this often (it redraws every 0.5 s)


class RichProgress:
    """The runner's ProgressSink drawn for a person: on a terminal, rich's progress bar with the
    live figures of LiveFigures as its detail; piped (a CI log, `| tee`), a plain line every
    `plain_every_s` seconds and at the end, never cut to a terminal's width (`console`: where to
    draw; stderr by default)."""

    def __init__(self, total: int | None, workers: int = 1, console: Any = None,
                 plain_every_s: float = 10.0) -> None:
        import time

        from rich.console import Console

        from passport.cli._live import LiveFigures  # numpy: loaded when a run starts, not for --help
        from passport.cli._terminal import beneath

        # our own drawing (its text is numbers and our words) goes beneath the terminal guard
        self._console = console or Console(file=beneath(sys.stderr))
        self._live = LiveFigures(workers=workers)
        self._total, self._last = total, (0, 0, 0)
        self._clock, self._started = time.monotonic, time.monotonic()
        self._plain_every_s, self._printed = plain_every_s, time.monotonic()
        self._drawn = 0.0
        self._progress: Any = None
        if self._console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("[bold]requests"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(), console=self._console, transient=False, refresh_per_second=2,
            )
            self._task = self._progress.add_task("run", total=total, detail="")
            self._progress.start()

    def update(self, done: int, in_flight: int, errors: int, row: Mapping[str, object]) -> None:
        self._live.add(row)
        self._last = (done, in_flight, errors)
        now = self._clock()
        if self._progress is not None:
            if now - self._drawn >= _BAR_EVERY_S:  # the bar redraws twice a second: no need to tell it each request
                self._draw()
        elif now - self._printed >= self._plain_every_s:
            self._plain()

    def _draw(self) -> None:
        done, in_flight, errors = self._last
        self._drawn = self._clock()
        self._progress.update(self._task, completed=done, detail=self._live.line(in_flight, errors))

    def _plain(self, fresh: bool = False) -> None:
        done, in_flight, errors = self._last
        self._printed = self._clock()
        elapsed = int(self._printed - self._started)
        self._console.print(f"requests {done}{f'/{self._total}' if self._total else ''} · "
                            f"{self._live.line(in_flight, errors, fresh=fresh)} · {elapsed // 60}:{elapsed % 60:02d}",
                            soft_wrap=True, highlight=False, markup=False)

    def stop(self) -> None:
        if self._progress is not None:
            self._draw()  # the last counts, whenever the last update came
            self._progress.stop()
        else:
            self._plain(fresh=True)


class Printer:
    """Progress bars and status lines for the run and sweep commands (none with --quiet)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bars: list[RichProgress] = []

    def progress(self, total: int | None, workers: int = 1) -> RichProgress:
        bar = RichProgress(total, workers)
        self.bars.append(bar)
        return bar

    def status(self, message: str) -> None:
        from harness import scrub

        print(f"passport: {scrub(message)}", file=sys.stderr, flush=True)

    def kwargs(self) -> dict[str, Any]:
        return {} if self.quiet else {"progress": self.progress, "status": self.status}

    def __enter__(self) -> Printer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for bar in self.bars:
            bar.stop()
