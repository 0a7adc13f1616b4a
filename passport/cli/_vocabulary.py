"""The flags of `vllm bench serve` and `guidellm benchmark`, accepted as their users spell them.

Each borrowed flag maps onto the spec field it means and is recorded in the passport as an
override naming the flag (`protocol.overrides`); where passport does something differently, the
table says what and why (`VOCABULARY`, printed in the documentation's reference). A flag of
theirs whose meaning passport cannot honour is refused with the reason (`REFUSED`), never
"unrecognized". Standard library only: `--help` is built without loading anything heavy.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Borrowed", "VOCABULARY", "REFUSED", "add_borrowed_options", "borrowed_overrides", "VLLM_PERCENTILE_METRICS",
           "percentiles", "percentile_metrics"]

VLLM, GUIDELLM = "vllm bench serve", "guidellm benchmark"
VLLM_PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")


@dataclass(frozen=True)
class Borrowed:
    """One flag of another tool: which, the spec field it sets, and what passport does
    differently (empty: nothing)."""

    tool: str
    flag: str
    field: str
    differs: str = ""


VOCABULARY: tuple[Borrowed, ...] = (
    Borrowed(VLLM, "--base-url URL", "endpoint.base_url", "`/v1` is added when the URL has no path, as vLLM "
             "appends its --endpoint"),
    Borrowed(VLLM, "--host H --port P", "endpoint.base_url", "http://H:P/v1, vLLM's default 127.0.0.1:8000"),
    Borrowed(VLLM, "--endpoint /v1/completions", "endpoint.api", "a path (not a URL) picks the endpoint kind: "
             "/v1/completions, /v1/chat/completions, /v1/responses, /v1/embeddings, /v1/rerank, ..."),
    Borrowed(VLLM, "--backend openai|vllm|openai-chat|openai-responses|openai-audio|openai-embeddings|vllm-rerank",
             "endpoint.api", "openai and vllm: completions; openai-chat: chat; openai-responses: responses; "
             "openai-audio: audio_transcriptions; openai-embeddings: embeddings; vllm-rerank: rerank"),
    Borrowed(VLLM, "--model ID", "endpoint.model"),
    Borrowed(VLLM, "--tokenizer PATH", "workload.tokenizer", "a local folder or gguf:<file>; nothing is downloaded"),
    Borrowed(VLLM, "--dataset-name random", "workload.input_tokens, workload.output_tokens", "the prompt is "
             "seeded English words (or corpus text) of the exact token count under the tokenizer, where vLLM "
             "strings token ids; vLLM subtracts the tokenizer's special tokens, passport states them in the "
             "exact_input_lengths rule"),
    Borrowed(VLLM, "--dataset-name sharegpt --dataset-path FILE", "workload.source", "a local file only"),
    Borrowed(VLLM, "--random-input-len N / --input-len N", "workload.input_tokens"),
    Borrowed(VLLM, "--random-output-len N / --output-len N", "workload.output_tokens"),
    Borrowed(VLLM, "--random-range-ratio R", "workload.input_tokens, workload.output_tokens",
             "uniform integers in [floor(N(1-R)), ceil(N(1+R))], as vLLM draws them"),
    Borrowed(VLLM, "--random-prefix-len P", "workload.shared_prefix", "one prefix of P tokens every prompt "
             "starts with (groups: 1); salted per run, so no earlier run's cache matches it"),
    Borrowed(VLLM, "--num-prompts N", "load.measure.requests"),
    Borrowed(VLLM, "--request-rate R", "load.pattern, load.rate_per_s", "inf (vLLM's default): every request at "
             "once, a closed loop of --max-concurrency users (or of all the prompts); the default here when "
             "neither --request-rate nor --max-concurrency is given and no spec is, as in vLLM"),
    Borrowed(VLLM, "--max-concurrency N", "load.concurrency", "with a finite --request-rate: a cap on requests in "
             "flight; the requests that waited for a slot, and how long, are measured and reported"),
    Borrowed(VLLM, "--request-rate 1,2,4,inf / --max-concurrency 1,2,4,8", "sweep.vary, sweep.levels",
             "a list (vLLM takes one value per invocation) runs a sweep: one run and passport per level, and the knee "
             "and saturation called only where they stand out from the levels' noise; inf is the last rate level"),
    Borrowed(VLLM, "--burstiness B", "load.pattern gamma, load.burstiness", "1: poisson"),
    Borrowed(VLLM, "--num-warmups N", "load.warmup.requests", "warm-up requests are of the workload (not the first "
             "prompt repeated) and every one is answered before the window opens (barrier)"),
    Borrowed(VLLM, "--seed N", "load.seed, workload.seed"),
    Borrowed(VLLM, "--ignore-eos", "decoding.ignore_eos"),
    Borrowed(VLLM, "--temperature T / --top-p P / --top-k K", "decoding.temperature, decoding.top_p, decoding.top_k",
             "without --temperature passport samples as the preset says (instruct), where vLLM's bench is greedy "
             "(0.0): pass --temperature 0 for vLLM's behaviour"),
    Borrowed(VLLM, "--save-result, --save-detailed, --result-dir DIR, --result-filename NAME", "(an output)",
             "also writes vLLM's result JSON (its keys and units) beside the run folder's passport"),
    Borrowed(VLLM, "--percentile-metrics ttft,tpot,itl,e2el / --metric-percentiles 50,99", "(an output)",
             "the percentiles of vLLM's JSON and of `show --as vllm`; the passport keeps its own fixed set"),
    Borrowed(VLLM, "--label L", "(an output)", "the result JSON's label and file name"),
    Borrowed(VLLM, "--disable-tqdm", "(quiet)", "no progress bar, as --quiet"),
    Borrowed(GUIDELLM, "--target URL", "endpoint.base_url"),
    Borrowed(GUIDELLM, "--data \"prompt_tokens=N,output_tokens=M\"", "workload.input_tokens, workload.output_tokens",
             "with *_stdev, *_min and *_max: a normal distribution clamped to [min, max]"),
    Borrowed(GUIDELLM, "--rate-type synchronous", "load.pattern closed, load.concurrency 1"),
    Borrowed(GUIDELLM, "--rate-type concurrent --rate N", "load.pattern closed, load.concurrency N"),
    Borrowed(GUIDELLM, "--rate-type constant|poisson --rate R", "load.pattern, load.rate_per_s"),
    Borrowed(GUIDELLM, "--rate-type throughput", "load.pattern closed", "every request at once: a closed loop of "
             "--rate users (default: all --max-requests)"),
    Borrowed(GUIDELLM, "--rate-type sweep --rate N", "sweep.vary rate, sweep.auto.interpolate N - 2, sweep.arrival "
             "constant", "a synchronous probe, a throughput probe (a closed loop of sweep.auto.probe_concurrency "
             "users, 32, where guidellm sends everything at once up to 512), then N - 2 constant rates evenly between "
             "their rates; each is a run with its own passport"),
    Borrowed(GUIDELLM, "--output-path PATH", "(an output)", "guidellm's benchmarks.json (report version 2, as "
             "guidellm 0.8 writes and reads it) of the run, or of a sweep's probes and levels; rates and concurrency "
             "as their window means (guidellm's spread over time is not rebuilt), no per-request records: the run "
             "folder holds them"),
    Borrowed(GUIDELLM, "--max-seconds S", "load.measure.duration_s"),
    Borrowed(GUIDELLM, "--max-requests N", "load.measure.requests"),
    Borrowed(GUIDELLM, "--warmup-percent F", "load.warmup.requests", "F of --max-requests, sent before the window "
             "and never counted"),
)

REFUSED: dict[str, str] = {
    "--dataset-name": "",  # per value, below
    "--goodput": "vLLM's goodput takes per-request limits; declare them as `slo:` in a spec (e.g. slo: {ttft.any: "
                 "2s}) and passport reports goodput under them",
    "--profile": "passport does not start an engine's profiler; run it with the engine's own tools",
    "--use-beam-search": "beam search is not an OpenAI-compatible sampling mode passport sends",
    "--logprobs": "passport does not request log-probabilities",
    "--lora-modules": "one model per run: give --model the LoRA module's name and run once per module",
    "--ramp-up-strategy": "a rising rate is a sweep: `passport sweep` with levels, each level measured on its own",
    "--ramp-up-start-rps": "a rising rate is a sweep: `passport sweep` with levels, each level measured on its own",
    "--ramp-up-end-rps": "a rising rate is a sweep: `passport sweep` with levels, each level measured on its own",
    "--header": "extra headers are not sent; an API key comes from the environment (--api-key-env)",
    "--min-p": "not a sampling field passport sends",
    "--frequency-penalty": "not a sampling field passport sends",
    "--repetition-penalty": "not a sampling field passport sends",
    "--append-result": "each run writes its own result file (--result-filename names it)",
    "--trust-remote-code": "passport never runs a model's code: tokenizers load without it",
    "--cooldown-percent": "passport counts every request of the window; keep the window to the steady state with "
                          "--max-requests or a warm-up instead",
}
_DATASETS_REFUSED = {
    "sonnet": "the sonnet dataset is not bundled: use --dataset-name random, or a request log (--dataset-path)",
    "burstgpt": "BurstGPT traces are not read: use --dataset-name sharegpt with a local file, or a spec's "
                "workload.source",
    "hf": "nothing is downloaded: export the dataset to a local JSONL and give it as --dataset-path",
    "custom": "give a local openai JSONL as --dataset (workload.source)",
    "prefix_repetition": "use --random-prefix-len (one shared prefix) or a spec's workload.shared_prefix (groups)",
    "random-mm": "images are a spec's workload.images (chat API)",
    "spec_bench": "not bundled: give its requests as a local JSONL (--dataset)",
}
_BACKENDS = {"openai": "completions", "vllm": "completions", "openai-chat": "chat", "openai-responses": "responses",
             "openai-audio": "audio_transcriptions", "openai-embeddings": "embeddings", "vllm-rerank": "rerank"}


class _Refuse(argparse.Action):
    """A flag of theirs passport cannot honour: refused, with why, when given."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from passport._errors import SpecError

        raise SpecError(f"{option_string}: {REFUSED[str(option_string)]}")


def add_borrowed_options(command: argparse.ArgumentParser) -> None:
    """The borrowed flags (see the module docstring), in two groups, their users' words first."""
    vllm = command.add_argument_group(f"in the words of `{VLLM}` (each mapped onto the spec; docs: their flags)")
    vllm.add_argument("--base-url", metavar="URL", help="the server (vLLM's --base-url): endpoint.base_url")
    vllm.add_argument("--host", metavar="HOST", help="with --port, the server at http://HOST:PORT/v1")
    vllm.add_argument("--port", type=int, metavar="PORT", help="with --host (default 127.0.0.1), the server's port")
    vllm.add_argument("--backend", metavar="NAME", help="openai or vllm: the completions API; openai-chat: chat; "
                      "openai-responses, openai-audio, openai-embeddings, vllm-rerank: those endpoint kinds")
    vllm.add_argument("--dataset-name", metavar="NAME", help="random (synthetic, of the lengths given) or sharegpt "
                                                             "(with --dataset-path)")
    vllm.add_argument("--dataset-path", metavar="FILE", help="the local file of --dataset-name sharegpt")
    vllm.add_argument("--random-input-len", type=int, metavar="N", help="as --input-len")
    vllm.add_argument("--random-output-len", type=int, metavar="N", help="as --output-len")
    vllm.add_argument("--random-range-ratio", type=float, metavar="R",
                      help="lengths uniform in [N(1-R), N(1+R)] around --input-len and --output-len")
    vllm.add_argument("--random-prefix-len", type=int, metavar="P",
                      help="every prompt starts with one shared prefix of P tokens")
    vllm.add_argument("--burstiness", type=float, metavar="B", help="gamma arrivals of shape B (1: poisson)")
    vllm.add_argument("--num-warmups", type=int, metavar="N", help="N warm-up requests before the window")
    vllm.add_argument("--seed", type=int, metavar="N", help="the seed of the arrivals and the workload")
    vllm.add_argument("--ignore-eos", action="store_true", help="answers run to their output length (ignore_eos)")
    vllm.add_argument("--temperature", type=float, metavar="T", help="decoding.temperature (0: greedy)")
    vllm.add_argument("--top-p", type=float, metavar="P", help="decoding.top_p")
    vllm.add_argument("--top-k", type=int, metavar="K", help="decoding.top_k")
    vllm.add_argument("--tokenizer", metavar="PATH", help="workload.tokenizer: a local folder or gguf:<file>")
    vllm.add_argument("--save-result", action="store_true", help="also write vLLM's result JSON for the run")
    vllm.add_argument("--save-detailed", action="store_true",
                      help="with --save-result, the per-request arrays too (input_lens, ttfts, itls, ...)")
    vllm.add_argument("--result-dir", metavar="DIR", help="where the result JSON goes (default: the current folder)")
    vllm.add_argument("--result-filename", metavar="NAME", help="the result JSON's file name")
    vllm.add_argument("--label", metavar="LABEL", help="the result JSON's label (default: the backend)")
    vllm.add_argument("--percentile-metrics", metavar="LIST",
                      help=f"the metrics of the result JSON's percentiles, of {','.join(VLLM_PERCENTILE_METRICS)} "
                           "(default ttft,tpot,itl)")
    vllm.add_argument("--metric-percentiles", metavar="LIST", help="its percentiles, e.g. 50,90,99 (default 99)")
    vllm.add_argument("--disable-tqdm", action="store_true", help="no progress bar (as --quiet)")
    guide = command.add_argument_group(f"in the words of `{GUIDELLM}`")
    guide.add_argument("--target", metavar="URL", help="the server (guidellm's --target): endpoint.base_url")
    guide.add_argument("--data", metavar="SPEC", dest="data_lengths",
                       help="\"prompt_tokens=N,output_tokens=M\" (with _stdev, _min, _max): the lengths")
    guide.add_argument("--rate-type",
                       choices=["synchronous", "concurrent", "throughput", "constant", "poisson", "sweep"],
                       help="the load: synchronous (one at a time), concurrent (--rate users), throughput (all at "
                            "once), constant or poisson (--rate requests/s), sweep (--rate N benchmarks from the "
                            "synchronous to the saturation rate, default 10)")
    guide.add_argument("--max-seconds", type=float, metavar="S", help="measure for S seconds")
    guide.add_argument("--max-requests", type=int, metavar="N", help="measure N requests")
    guide.add_argument("--warmup-percent", type=float, metavar="F", help="a share F of the requests as warm-up")
    guide.add_argument("--output-path", type=Path, metavar="PATH",
                       help="also write guidellm's benchmarks.json of the run (a sweep: one benchmark per level) "
                            "here; a folder gets benchmarks.json inside")
    refused = command.add_argument_group("their flags passport refuses, each with the reason")
    for flag in REFUSED:
        if flag != "--dataset-name":
            refused.add_argument(flag, action=_Refuse, nargs="*", help=f"refused: {REFUSED[flag]}")


def _length(text: str, flag: str) -> int:
    from passport._errors import SpecError

    try:
        value = int(float(text))
    except ValueError:
        raise SpecError(f"{flag}: {text!r} is not a number of tokens") from None
    if value < 1:
        raise SpecError(f"{flag}: {value} tokens; give at least 1")
    return value


def _data_lengths(text: str) -> dict[str, dict[str, Any]]:
    """guidellm's `--data "prompt_tokens=256,output_tokens=128"` (with _stdev, _min, _max) as the
    workload's two length distributions."""
    from passport._errors import SpecError

    fields: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise SpecError(f"--data {text!r}: write key=value pairs, e.g. prompt_tokens=256,output_tokens=128 "
                            "(a dataset file is --dataset)")
        fields[key.strip()] = value.strip()
    known = {f"{side}_tokens{suffix}" for side in ("prompt", "output") for suffix in ("", "_stdev", "_min", "_max")}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise SpecError(f"--data: {', '.join(unknown)} is not a length passport reads; use {', '.join(sorted(known))}")
    out: dict[str, dict[str, Any]] = {}
    for side, field in (("prompt", "workload.input_tokens"), ("output", "workload.output_tokens")):
        if f"{side}_tokens" not in fields:
            continue
        mean = _length(fields[f"{side}_tokens"], f"--data {side}_tokens")
        stdev = float(fields.get(f"{side}_tokens_stdev", 0) or 0)
        dist: dict[str, Any] = {"dist": "normal", "mean": mean, "std": stdev} if stdev > 0 else \
            {"dist": "fixed", "value": mean}
        for bound in ("min", "max"):
            if f"{side}_tokens_{bound}" in fields:
                dist[bound] = _length(fields[f"{side}_tokens_{bound}"], f"--data {side}_tokens_{bound}")
        out[field] = dist
    return out


def _spread(length: int, ratio: float | None) -> dict[str, Any]:
    """A length, or vLLM's range ratio around it: uniform integers in [floor(N(1-R)), ceil(N(1+R))]."""
    if not ratio:
        return {"dist": "fixed", "value": length}
    return {"dist": "uniform", "low": max(1, math.floor(length * (1 - ratio))), "high": math.ceil(length * (1 + ratio))}


def borrowed_overrides(args: argparse.Namespace, patch: Callable[[str, Any, str], None]) -> None:
    """Their flags on `args` as spec overrides (the load flags they share with passport's own,
    --num-prompts, --request-rate, --max-concurrency, --input-len, --output-len, are read by
    passport's own flags)."""
    from passport._errors import SpecError

    get: Callable[[str], Any] = lambda name: getattr(args, name, None)  # noqa: E731
    if get("backend") is not None:
        if get("backend") not in _BACKENDS:
            raise SpecError(f"--backend {get('backend')}: not one of vLLM's backends passport speaks; use "
                            f"{', '.join(_BACKENDS)} (or --api for the other endpoint kinds)")
        patch("endpoint.api", _BACKENDS[get("backend")], f"--backend {get('backend')}")
    name = get("dataset_name")
    if name is not None:
        if name in _DATASETS_REFUSED:
            raise SpecError(f"--dataset-name {name}: {_DATASETS_REFUSED[name]}")
        if name not in ("random", "sharegpt"):
            raise SpecError(f"--dataset-name {name}: not a dataset passport reads; use random or sharegpt (with "
                            "--dataset-path FILE)")
        if name == "sharegpt":
            if not get("dataset_path"):
                raise SpecError("--dataset-name sharegpt: give the local file as --dataset-path FILE (nothing is "
                                "downloaded)")
            patch("workload.source", {"path": get("dataset_path"), "format": "sharegpt"}, "--dataset-path")
    elif get("dataset_path"):
        patch("workload.source", {"path": get("dataset_path"), "format": "sharegpt"}, "--dataset-path")
    ratio = get("random_range_ratio")
    if ratio is not None and not 0 <= ratio < 1:
        raise SpecError(f"--random-range-ratio {ratio}: give a ratio from 0 to below 1")
    for flag, field, length in (("--random-input-len", "workload.input_tokens", get("random_input_len")),
                                ("--random-output-len", "workload.output_tokens", get("random_output_len"))):
        if length is not None:
            patch(field, _spread(length, ratio), flag)
    if get("random_prefix_len"):
        patch("workload.shared_prefix", {"groups": 1, "prefix_tokens": get("random_prefix_len")},
              "--random-prefix-len")
    if get("burstiness") is not None and get("burstiness") != 1.0:
        patch("load.pattern", "gamma", "--burstiness")
        patch("load.burstiness", get("burstiness"), "--burstiness")
    if get("num_warmups") is not None:
        patch("load.warmup", {"requests": get("num_warmups"), "barrier": True}, "--num-warmups")
    if get("seed") is not None:
        patch("load.seed", get("seed"), "--seed")
        patch("workload.seed", get("seed"), "--seed")
    if get("ignore_eos"):
        patch("decoding.ignore_eos", True, "--ignore-eos")
    for flag, field in (("temperature", "decoding.temperature"), ("top_p", "decoding.top_p"),
                        ("top_k", "decoding.top_k")):
        if get(flag) is not None:
            patch(field, get(flag), f"--{flag.replace('_', '-')}")
    if any(get(flag) is not None for flag in ("temperature", "top_p", "top_k")):
        patch("decoding.preset", "explicit", "--temperature/--top-p/--top-k: only the sampling fields given")
    if get("tokenizer"):
        patch("workload.tokenizer", get("tokenizer"), "--tokenizer")
    if get("data_lengths"):
        for field, dist in _data_lengths(get("data_lengths")).items():
            patch(field, dist, "--data")


def percentiles(text: str | None) -> tuple[float, ...]:
    """vLLM's `--metric-percentiles` ("50,90,99"), default (99,)."""
    from passport._errors import SpecError

    if not text:
        return (99.0,)
    try:
        values = tuple(float(p) for p in text.split(","))
    except ValueError:
        raise SpecError(f"--metric-percentiles {text!r}: write percentiles separated by commas, e.g. "
                        "50,90,99") from None
    if any(not 0 < p < 100 for p in values):
        raise SpecError(f"--metric-percentiles {text!r}: each percentile is above 0 and below 100")
    return values


def percentile_metrics(text: str | None) -> tuple[str, ...]:
    """vLLM's `--percentile-metrics` ("ttft,tpot,itl"), default ttft,tpot,itl."""
    from passport._errors import SpecError

    chosen = tuple((text or "ttft,tpot,itl").split(","))
    unknown = [m for m in chosen if m not in VLLM_PERCENTILE_METRICS]
    if unknown:
        raise SpecError(f"--percentile-metrics: {', '.join(unknown)} is not one of "
                        f"{', '.join(VLLM_PERCENTILE_METRICS)}")
    return chosen
