"""The `passport` command line: the only place that prints to the user or picks exit codes.

Exit codes: 0 the run is VALID (or verified); 1 INVALID, HOLD or INCOMPLETE (or verification
found differences); 2 a usage or input error (bad spec, unreachable endpoint, engine that
would not start): nothing was measured.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["main"]

EPILOG = """\
exit codes:
  0  VALID run (verify: verified; gate: every condition met; canary: every case passed)
  1  INVALID, HOLD or INCOMPLETE run (verify: differences found; gate: a condition failed;
     canary: a case failed)
  2  usage or input error: bad spec, unreachable endpoint, engine failed to start

examples:
  passport run specs/llamacpp-smoke.yaml
  passport run my.yaml --endpoint http://127.0.0.1:8000/v1
  OPENAI_API_KEY=... passport run my.yaml --endpoint https://api.example.com/v1 --api-key-env OPENAI_API_KEY
  passport sweep specs/llamacpp-sweep.yaml
  passport canary --endpoint http://127.0.0.1:8080/v1 --suite default --junit canaries.xml
  passport probe http://127.0.0.1:8080/v1
  passport capacity --kv-pool-gib 23.3 --kv-kib-per-token 64 --context 32768
  passport verify results/chat-smoke-20261129T170000Z-1a2b3c4d
  passport gate results/chat-smoke-... --require 'ttft.any.p99 < 2s' --require 'error_rate < 0.5%'
"""


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("passport")
    except metadata.PackageNotFoundError:
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="passport",
        description="Benchmark an OpenAI-compatible LLM endpoint and write a benchmark passport: "
                    "identity, protocol, validity and results, beside the raw Parquet logs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"passport {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser(
        "run", help="run a spec: canaries, timed load, passport",
        description="Run the benchmark a YAML spec declares and write results/<name>-<UTC>-<id>/ "
                    "(passport.json, report.md, requests/chunks/schedule/telemetry .parquet).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("spec", type=Path, help="the run spec (YAML)")
    sweep = sub.add_parser(
        "sweep", help="run a series of load levels: one passport each, the knee and the saturation point",
        description="Run the spec at each load level of its `sweep:` section (request rates or concurrencies, "
                    "declared or automatic), one passport per level under <out>/<name>-sweep-<UTC>-<id>/levels/, "
                    "then write sweep.json, report.md and report.html with the latency-throughput curve, the knee "
                    "(highest load meeting the spec's SLO) and where the engine saturates. Exit 0 when every level "
                    "completed and a knee was found (or no SLO was declared), 1 otherwise.",
        epilog="examples:\n  passport sweep specs/llamacpp-sweep.yaml\n"
               "  passport sweep my.yaml --vary rate --levels 2,4,8,16\n  passport sweep my.yaml --vary concurrency",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sweep.add_argument("spec", type=Path, help="the run spec (YAML); its `sweep:` section, if any, sets the levels")
    sweep.add_argument("--vary", choices=["rate", "concurrency"], help="override sweep.vary")
    sweep.add_argument("--levels", metavar="L1,L2,...", help="override sweep.levels (ascending), or 'auto'")
    canary = sub.add_parser(
        "canary", help="run only a canary suite (exact output, JSON, tools, ...): a table of verdicts, exit 0/1",
        description="Run a canary suite against a spec's endpoint (launching its engine if declared) or against "
                    "--endpoint URL, one case at a time with greedy decoding. Prints each case's verdict, writes "
                    "canaries.parquet (every request and raw response), optionally JUnit XML and, with --record, a "
                    "copy of the suite whose exact-output references come from this (trusted) endpoint. Exit 0 when "
                    "every case passed, 1 when any failed, 2 on usage errors.",
        epilog="examples:\n  passport canary specs/llamacpp-smoke.yaml --suite gemma3-270m --junit canaries.xml\n"
               "  passport canary --endpoint http://127.0.0.1:8080/v1 --suite default\n"
               "  passport canary trusted.yaml --suite my-suite.yaml --record my-suite.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    canary.add_argument("spec", type=Path, nargs="?", help="a run spec (YAML); or give --endpoint")
    canary.add_argument("--suite", metavar="NAME|FILE", help="a bundled suite or a suite file (default: the "
                        "spec's `canaries`, else 'default')")
    canary.add_argument("--api", choices=["chat", "completions"], help="the endpoint's API for cases with api: auto")
    canary.add_argument("--junit", type=Path, metavar="FILE", help="also write the verdicts as JUnit XML")
    canary.add_argument("--record", type=Path, metavar="FILE",
                        help="write the suite with exact-output references recorded from this endpoint")
    run.add_argument("--force", action="store_true",
                     help="time the run even if the canaries fail (the passport says so prominently)")
    for command in (run, sweep, canary):
        command.add_argument("--endpoint", metavar="URL",
                             help="override endpoint.base_url, e.g. http://127.0.0.1:8000/v1")
        command.add_argument("--api-key-env", metavar="NAME",
                             help="override endpoint.api_key_env: the environment variable holding the API key")
        command.add_argument("--out", type=Path, default=Path("results"), metavar="DIR",
                             help="output folder (default: results/)")
        command.add_argument("--quiet", action="store_true", help="no progress bar or status lines")
    workload = sub.add_parser(
        "workload", help="summarize what a spec will offer (counts, length histograms, hashes); sends nothing",
        description="Materialize the spec's workload and schedule exactly as `passport run` would and print a "
                    "summary: distinct requests, scheduled arrivals, target and realized length histograms, "
                    "inter-arrival gaps, the shares of each traffic shape (sessions, structured output, tools, "
                    "images, mix components), and the hashes the passport will carry. Nothing is sent. "
                    "`--presets` lists the bundled workload presets (`workload: {preset: NAME}` in a spec).",
    )
    workload.add_argument("spec", type=Path, nargs="?", help="the run spec (YAML)")
    workload.add_argument("--presets", action="store_true", help="list the bundled workload presets and exit")
    probe = sub.add_parser(
        "probe", help="print what an endpoint tells about itself: engine, model, precision, capacity, cache",
        description="Probe an OpenAI-compatible endpoint (no timing): detect the engine, read every identity and "
                    "capacity field its endpoints expose, each with the endpoint it came from, mark the standard "
                    "fields it does not expose as unknown, and describe this machine (CPU, OS, GPUs through NVML). "
                    "Probing sends one 1-token request to engines whose build shows only in system_fingerprint, "
                    "never to a managed API.",
        epilog="examples:\n  passport probe http://127.0.0.1:8080/v1\n  passport probe http://gpu:8000/v1 --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    probe.add_argument("url", help="the endpoint's base URL, e.g. http://127.0.0.1:8000/v1")
    probe.add_argument("--model", default="auto", help="the model id (default: the first /v1/models lists)")
    probe.add_argument("--api", choices=["chat", "completions"], default="chat", help="API of the 1-token probe")
    probe.add_argument("--api-key-env", metavar="NAME", help="the environment variable holding the API key")
    probe.add_argument("--json", action="store_true", help="print JSON instead of a table")
    capacity = sub.add_parser(
        "capacity", help="the arithmetic before a measurement: weights, KV per token, pool, sequences that fit",
        description="Compute what fits in an engine's memory from a model's config.json (read offline) or explicit "
                    "numbers: weight bytes, KV bytes per token (per layer type, sliding windows honoured), fixed "
                    "state per sequence (linear-attention layers, windows), the KV pool left after weights, reserve "
                    "and activations, and how many sequences of --context tokens fit: by naive division and "
                    "charging each live sequence its fixed state. --published-sequences N with "
                    "--published-context C shows the per-sequence term such a published figure implies.",
        epilog="examples:\n"
               "  passport capacity --kv-pool-gib 23.3 --kv-kib-per-token 64 --context 32768 \\\n"
               "      --published-sequences 36 --published-context 8192\n"
               "  passport capacity --config ./Qwen3-Next-80B/ --params 80e9 --weights fp8 --kv-dtype bf16 \\\n"
               "      --gpu-memory-gib 141 --utilization 0.9 --reserve-gib 2 --context 32768",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    capacity.add_argument("--config", type=Path, metavar="DIR", help="a model folder or config.json (offline)")
    capacity.add_argument("--params", type=float, help="parameter count, e.g. 7.6e9 (for weight bytes)")
    capacity.add_argument("--weights", default="bf16", metavar="DTYPE", help="weight format (bf16, fp8, q4_k_m, ...)")
    capacity.add_argument("--kv-dtype", default="bf16", metavar="DTYPE", help="KV-cache dtype (bf16, fp8, ...)")
    capacity.add_argument("--gpu-memory-gib", type=float, help="GPU memory the engine may use, GiB")
    capacity.add_argument("--utilization", type=float, default=0.9, help="fraction of it the engine takes (0.9)")
    capacity.add_argument("--reserve-gib", type=float, default=0.0, help="framework reserve (CUDA graphs, ...), GiB")
    capacity.add_argument("--activations-gib", type=float, default=0.0, help="activations and workspace, GiB")
    capacity.add_argument("--kv-pool-gib", type=float, help="the KV pool itself, GiB (e.g. from the engine's log)")
    capacity.add_argument("--kv-kib-per-token", type=float, help="KV per token, KiB (instead of the config's)")
    capacity.add_argument("--state-mib-per-sequence", type=float, help="fixed state per live sequence, MiB")
    capacity.add_argument("--context", type=int, required=True, help="tokens per sequence")
    capacity.add_argument("--published-sequences", type=int, metavar="N", help="a published 'N sequences fit'")
    capacity.add_argument("--published-context", type=int, metavar="C", help="... of C tokens each")
    capacity.add_argument("--json", action="store_true", help="print the figures as JSON")
    verify = sub.add_parser(
        "verify", help="recompute a run's results from its raw logs and check file hashes",
        description="Recompute every result of RUN_DIR/passport.json from the Parquet files and check the "
                    "sha256 of every raw file. Prints 'verified' or each difference.",
    )
    verify.add_argument("run_dir", type=Path, help="a run folder (results/<run>/)")
    gate = sub.add_parser(
        "gate", help="check declared conditions against a run's passport (for release gates)",
        description="Evaluate conditions against RUN_DIR/passport.json and print each as PASS/FAIL with the "
                    "measured value. Exit 0 when all pass, 1 when any fails, 2 when a condition is not understood.",
        epilog="conditions: <name> <op> <value>, e.g.\n"
               "  'ttft.any.p99 < 2s'   'itl.chunk.p50 <= 50ms'   'error_rate < 0.5%'\n"
               "  'canaries == pass'    'verdict == VALID'        'outcomes.timeout == 0'    'slo == met'\n"
               "  'failure_inclusive.e2e.p99 < 10s'   'throughput.output_tokens_per_s.mean >= 20'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare = sub.add_parser(
        "compare", help="check two or more runs are comparable, then show which differences are significant",
        description="Check the comparability invariants (model, precision, decoding, workload, load, window) "
                    "against the first run; if they hold, show each headline metric side by side with a 95 %% "
                    "bootstrap interval of the difference and a verdict: faster, slower or no significant "
                    "difference. Exit 0 comparable, 1 not comparable.",
    )
    compare.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR", help="run folders; the first is the base")
    compare.add_argument("--report", type=Path, metavar="DIR",
                         help="also write report.md and report.html (with side-by-side CDFs) into DIR")
    compare.add_argument("--allow", action="append", default=[], metavar="FIELD",
                         help="compare even though FIELD differs (model, precision, decoding, workload, load, "
                              "window); stated in the output")
    gate.add_argument("run_dir", type=Path, help="a run folder (results/<run>/)")
    gate.add_argument("--require", action="append", default=[], metavar="CONDITION", help="a condition (repeatable)")
    gate.add_argument("--file", type=Path, metavar="GATE.yaml", help="a YAML file with `require: [conditions]`")
    gate.add_argument("--junit", type=Path, metavar="FILE", help="also write the results as JUnit XML")
    return parser


class _RichProgress:
    """Adapts rich's progress bar to the runner's ProgressSink."""

    def __init__(self, total: int | None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("[bold]requests"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(), console=Console(stderr=True), transient=False,
        )
        self._task = self._progress.add_task("run", total=total, detail="")
        self._progress.start()

    def update(self, done: int, in_flight: int, errors: int) -> None:
        self._progress.update(self._task, completed=done, detail=f"in flight {in_flight}, errors {errors}")

    def stop(self) -> None:
        self._progress.stop()


def _load_spec(args: argparse.Namespace) -> tuple[Any, dict[str, Any], dict[str, Any], list[Any]]:
    """(spec, the YAML as written, the YAML with command-line overrides, the overrides)."""
    from passport._model import Override
    from passport._spec import load_spec, parse_spec

    spec, raw = load_spec(args.spec)
    overrides: list[Override] = []
    merged = dict(raw)

    def patch(section: str, key: str, value: Any, flag: str) -> None:
        merged[section] = {**(merged.get(section) or {}), key: value}
        overrides.append(Override(field=f"{section}.{key}", value=value, source=flag))

    if args.endpoint:
        patch("endpoint", "base_url", args.endpoint, "--endpoint")
    if args.api_key_env:
        patch("endpoint", "api_key_env", args.api_key_env, "--api-key-env")
    if getattr(args, "vary", None):
        patch("sweep", "vary", args.vary, "--vary")
    if getattr(args, "levels", None):
        try:
            levels: Any = "auto" if args.levels == "auto" else [float(x) for x in args.levels.split(",")]
        except ValueError:
            from passport._errors import SpecError

            raise SpecError(f"--levels {args.levels!r}: write ascending numbers separated by commas, "
                            "e.g. 1,2,4,8, or auto") from None
        patch("sweep", "levels", levels, "--levels")
    if overrides:
        spec = parse_spec(merged, str(args.spec))
    return spec, raw, merged, overrides


class _Printer:
    """Progress bars and status lines for the run and sweep commands (none with --quiet)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bars: list[_RichProgress] = []

    def progress(self, total: int | None) -> _RichProgress:
        bar = _RichProgress(total)
        self.bars.append(bar)
        return bar

    def status(self, message: str) -> None:
        print(f"passport: {message}", file=sys.stderr, flush=True)

    def kwargs(self) -> dict[str, Any]:
        return {} if self.quiet else {"progress": self.progress, "status": self.status}

    def __enter__(self) -> _Printer:
        return self

    def __exit__(self, *exc: object) -> None:
        for bar in self.bars:
            bar.stop()


def _cmd_run(args: argparse.Namespace) -> int:
    from passport._report import headline_lines
    from passport._run import execute

    spec, raw, _, overrides = _load_spec(args)
    with _Printer(args.quiet) as printer:
        outcome = execute(spec, raw, overrides, args.out, force=args.force, **printer.kwargs())
    print(f"passport: {outcome.folder / 'passport.json'}")
    print(f"report:   {outcome.folder / 'report.md'}")
    for line in headline_lines(outcome.passport):
        print(line)
    return outcome.exit_code


def _cmd_canary(args: argparse.Namespace) -> int:
    from passport._canary_cmd import run_canary_command
    from passport._errors import SpecError
    from passport._gate import junit_cases
    from passport._spec import parse_spec

    if args.spec is not None:
        spec, _, _, _ = _load_spec(args)
        if args.api:
            spec = spec.model_copy(update={"endpoint": spec.endpoint.model_copy(update={"api": args.api})})
    elif args.endpoint:
        endpoint = {"base_url": args.endpoint, "api": args.api or "chat", "api_key_env": args.api_key_env}
        spec = parse_spec({"endpoint": endpoint, "load": {"pattern": "closed", "concurrency": 1}}, "--endpoint")
    else:
        raise SpecError("give a spec or --endpoint URL (see passport canary --help)")
    suite = args.suite or (spec.canaries if args.spec is not None and spec.canaries != "none" else "default")
    with _Printer(args.quiet) as printer:
        outcome = run_canary_command(spec, suite, args.out, record=args.record,
                                     status=None if args.quiet else printer.status)
    width = max(len(r.case_id) for r in outcome.results)
    for r in outcome.results:
        print(f"{'PASS' if r.passed else 'FAIL'}  {r.case_id:<{width}}  {r.kind:<12} {r.reason}")
        if not r.passed:
            print(f"      expected: {r.expected[:200]!r}\n      actual:   {r.actual[:200]!r}")
    info = outcome.info
    print(f"Canaries: {info.status.upper()} ({info.reason}); suite {info.suite} sha256 {info.suite_sha256}")
    print(f"cases: {outcome.folder / 'canaries.parquet'}")
    if args.junit:
        args.junit.write_text(junit_cases(f"passport canary {info.suite}", [
            (f"passport.canary.{info.suite}", r.case_id, r.passed, f"{r.reason}; expected {r.expected!r}, "
                                                                    f"actual {r.actual!r}") for r in outcome.results]))
    return outcome.exit_code


def _cmd_workload(args: argparse.Namespace) -> int:
    from passport._spec import load_spec
    from passport._workload_cmd import preset_lines, workload_summary

    if args.presets:
        print("\n".join(preset_lines()))
        return 0
    if args.spec is None:
        print("ERROR: give a spec (passport workload SPEC), or --presets to list the bundled presets",
              file=sys.stderr)
        return 2
    spec, _ = load_spec(args.spec)
    for line in workload_summary(spec):
        print(line)
    return 0


def _cmd_probe(args: argparse.Namespace) -> int:
    import json

    from harness import ControlClient
    from passport._identity import collect_host
    from passport._probe import complete_identity, probe_endpoint
    from passport._run import auth_headers, model_of
    from passport._spec import parse_spec

    spec = parse_spec({"endpoint": {"base_url": args.url, "model": args.model, "api": args.api,
                                    "api_key_env": args.api_key_env},
                       "load": {"pattern": "closed", "concurrency": 1}}, "probe")
    headers = auth_headers(spec)
    with ControlClient(args.url, headers) as control:
        cards = control.models()
        model = model_of(spec, cards, args.url)
        fields = complete_identity(probe_endpoint(control, cards, model, args.url, args.api), {})
    fields.update(collect_host())
    if args.json:
        print(json.dumps({k: v.model_dump() for k, v in sorted(fields.items())}, indent=2))
        return 0
    width = max(len(k) for k in fields)
    for key, value in sorted(fields.items()):
        shown = "—" if value.value is None else str(value.value)
        shown = shown if len(shown) <= 70 else shown[:67] + "..."
        print(f"{key:<{width}}  {shown:<70}  {value.source}{f' ({value.via})' if value.via else ''}")
    return 0


def _cmd_capacity(args: argparse.Namespace) -> int:
    import json
    from dataclasses import asdict

    from passport._errors import SpecError
    from passport.capacity import (
        Budget,
        GiB,
        KiB,
        MiB,
        architecture_from_config,
        compute,
        implied_state_per_sequence,
        load_config,
    )

    try:
        arch = architecture_from_config(load_config(args.config), args.params) if args.config else None
        if arch is None and args.params:
            from passport.capacity import Architecture

            arch = Architecture(n_params=args.params, full_attention_layers=0)
        kv = args.kv_kib_per_token * KiB if args.kv_kib_per_token else None
        if kv is None and (arch is None or not arch.full_attention_layers):
            raise SpecError("give --config (a model's config.json) or --kv-kib-per-token")
        budget = Budget(weight_dtype=args.weights, kv_dtype=args.kv_dtype,
                        gpu_memory_bytes=args.gpu_memory_gib * GiB if args.gpu_memory_gib else None,
                        utilization=args.utilization, reserve_bytes=args.reserve_gib * GiB,
                        activation_bytes=args.activations_gib * GiB,
                        kv_pool_bytes=args.kv_pool_gib * GiB if args.kv_pool_gib else None)
        state = args.state_mib_per_sequence * MiB if args.state_mib_per_sequence is not None else None
        implied_lines: list[str] = []
        source = "given"
        if args.published_sequences:
            published_context = args.published_context or args.context
            base = compute(arch, budget, published_context, kv, 0.0 if state is None else state)
            implied = implied_state_per_sequence(base.pool_bytes, base.kv_bytes_per_token, args.published_sequences,
                                                 published_context)
            implied_lines = [
                f"published: {args.published_sequences} live sequences of {published_context:,} tokens fit; naive "
                f"division gives {math.floor(base.pool_bytes / (published_context * base.kv_bytes_per_token))}",
                f"implied fixed state per sequence: {base.pool_bytes / MiB:,.0f} MiB / {args.published_sequences} - "
                f"{published_context:,} x {base.kv_bytes_per_token / KiB:.2f} KiB = {implied / MiB:.1f} MiB",
            ]
            if state is None:
                state, source = max(implied, 0.0), "implied by the published figure"
        report = compute(arch, budget, args.context, kv, state, source)
    except (ValueError, OSError, KeyError) as exc:
        raise SpecError(f"capacity: {exc}") from None
    if args.json:
        print(json.dumps({k: v for k, v in asdict(report).items() if k != "lines"}, indent=2))
        return 0
    for line in report.lines + implied_lines:
        print(line)
    print(f"=> {report.pool_tokens:,} tokens; {report.sequences_naive} sequences of {args.context:,} tokens by naive "
          f"division, {report.sequences_with_state} charging {report.state_bytes_per_sequence / MiB:.1f} MiB of fixed "
          "state per sequence")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from passport._sweep import run_sweep, summary_lines

    spec, _, merged, overrides = _load_spec(args)
    with _Printer(args.quiet) as printer:
        outcome = run_sweep(spec, merged, overrides, args.out, **printer.kwargs())
    print(f"sweep:  {outcome.folder / 'sweep.json'}")
    print(f"report: {outcome.folder / 'report.html'}")
    unit = "req/s" if outcome.vary == "rate" else "concurrency"
    for lv in outcome.levels:
        ttft = "—" if lv.ttft_p99_s is None else f"{lv.ttft_p99_s * 1000:.1f} ms"
        thr = "—" if lv.throughput_rps is None else f"{lv.throughput_rps:.3f} req/s"
        slo = "" if lv.slo_met is None else ("  SLO met" if lv.slo_met else "  SLO missed")
        print(f"{unit} {lv.load:>8g}: {lv.verdict:<10} {thr:>14}  TTFT p99 {ttft:>10}{slo}")
    for line in summary_lines(outcome):
        print(line)
    return outcome.exit_code


def _cmd_verify(args: argparse.Namespace) -> int:
    from passport.verify import verify_run

    problems = verify_run(args.run_dir)
    if not problems:
        print(f"verified: {args.run_dir}")
        return 0
    print(f"NOT verified: {args.run_dir}")
    for problem in problems:
        print(f"- {problem}")
    return 1


def _cmd_compare(args: argparse.Namespace) -> int:
    from passport._compare import compare_runs, comparison_blocks, render_comparison
    from passport._errors import PassportError

    if len(args.runs) < 2:
        raise PassportError("compare needs at least two run folders")
    comparison = compare_runs(args.runs, args.allow)
    for line in render_comparison(comparison):
        print(line)
    if args.report:
        from passport._report import write_reports

        args.report.mkdir(parents=True, exist_ok=True)
        _, page = write_reports(args.report, "Comparison: " + " vs ".join(r.name for r in args.runs),
                                comparison_blocks(comparison))
        print(f"report: {page}")
    return 0 if comparison.comparable else 1


def _cmd_gate(args: argparse.Namespace) -> int:
    from passport._gate import GateError, evaluate_gate, junit_xml, load_gate_file, parse_condition
    from passport._passport import read_passport

    texts = list(args.require) + (load_gate_file(args.file) if args.file else [])
    if not texts:
        raise GateError("no conditions: pass --require 'CONDITION' or --file GATE.yaml")
    conditions = [parse_condition(text) for text in texts]
    passport = read_passport(args.run_dir)
    results = evaluate_gate(passport, conditions)
    width = max(len(r.condition.text) for r in results)
    for r in results:
        print(f"{'PASS' if r.passed else 'FAIL'}  {r.condition.text:<{width}}  {r.message}")
    failed = sum(not r.passed for r in results)
    print(f"Gate: {'PASSED' if not failed else 'FAILED'} ({len(results) - failed} of {len(results)} conditions met)")
    if args.junit:
        args.junit.write_text(junit_xml(passport.name, results))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    from harness import EngineLaunchError, HarnessError
    from passport._errors import PassportError
    from workloads import WorkloadError

    try:
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "sweep":
            return _cmd_sweep(args)
        if args.command == "canary":
            return _cmd_canary(args)
        if args.command == "capacity":
            return _cmd_capacity(args)
        if args.command == "probe":
            return _cmd_probe(args)
        if args.command == "workload":
            return _cmd_workload(args)
        if args.command == "gate":
            return _cmd_gate(args)
        if args.command == "compare":
            return _cmd_compare(args)
        return _cmd_verify(args)
    except EngineLaunchError as exc:
        print(f"ERROR: the engine did not start: {exc}", file=sys.stderr)
        return 2
    except (PassportError, HarnessError, WorkloadError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ERROR: interrupted before the timed phase; nothing was measured", file=sys.stderr)
        return 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
