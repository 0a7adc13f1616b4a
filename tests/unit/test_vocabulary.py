"""vLLM's and guidellm's flags, as their users spell them (issue 43): each lands on the spec field
it means, with the values their tools' own definitions give (hand-computed here from vLLM's
`RandomDataset` and guidellm's `--data` grammar), every override names the flag it came from,
and a flag passport cannot honour is refused with the reason, never "unrecognized"."""

from __future__ import annotations

import argparse
import math

import pytest

from passport._errors import SpecError
from passport.cli._main import _parser
from passport.cli._shared import load_spec_with_overrides
from passport.cli._vocabulary import REFUSED, VOCABULARY
from passport.model import RunSpec


def _spec(*argv: str) -> tuple[RunSpec, dict[str, str]]:
    args = _parser().parse_args(["run", *argv])
    spec, _, _, overrides = load_spec_with_overrides(args)
    return spec, {o.field: o.source for o in overrides}


# vLLM's own docs' command (bench serve), with passport run in vllm bench serve's place
VLLM_ARGV = ("--backend", "vllm", "--base-url", "http://127.0.0.1:8000", "--model", "m", "--dataset-name", "random",
             "--random-input-len", "64", "--random-output-len", "8", "--random-range-ratio", "0.2",
             "--num-prompts", "40", "--request-rate", "10", "--max-concurrency", "4", "--num-warmups", "4",
             "--seed", "7", "--ignore-eos", "--temperature", "0")


def test_vllms_bench_serve_command_line_is_the_spec_it_means() -> None:
    spec, sources = _spec(*VLLM_ARGV)
    assert (spec.endpoint.base_url, spec.endpoint.api, spec.endpoint.model) == ("http://127.0.0.1:8000/v1",
                                                                                 "completions", "m")
    # RandomDataset: integers uniform in [floor(N(1-R)), ceil(N(1+R))]
    assert (spec.workload.input_tokens.dist, spec.workload.input_tokens.low, spec.workload.input_tokens.high) == \
        ("uniform", math.floor(64 * 0.8), math.ceil(64 * 1.2)) == ("uniform", 51, 77)
    assert (spec.workload.output_tokens.low, spec.workload.output_tokens.high) == (6, 10)
    load = spec.load
    assert (load.pattern, load.rate_per_s, load.concurrency, load.measure.requests) == ("poisson", 10, 4, 40)
    assert (load.warmup.requests, load.warmup.barrier, load.seed, spec.workload.seed) == (4, True, 7, 7)
    assert spec.decoding.temperature == 0 and spec.decoding.preset == "explicit" and spec.decoding.ignore_eos is True
    assert sources["endpoint.base_url"] == "--base-url" and sources["endpoint.api"] == "--backend vllm"
    assert sources["load.warmup"] == "--num-warmups" and sources["workload.input_tokens"] == "--random-input-len"


@pytest.mark.parametrize(("backend", "api"), [("openai-embeddings", "embeddings"), ("vllm-rerank", "rerank"),
                                              ("openai-audio", "audio_transcriptions"),
                                              ("openai-responses", "responses")])
def test_vllms_backends_for_the_other_endpoint_kinds_pick_the_kind(backend: str, api: str) -> None:
    spec, sources = _spec("--backend", backend, "--base-url", "http://h:1", "--num-prompts", "4")
    assert spec.endpoint.api == api and sources["endpoint.api"] == f"--backend {backend}"


def test_vllms_defaults_send_every_prompt_at_once_and_its_endpoint_path_picks_the_api() -> None:
    spec, _ = _spec("--host", "10.0.0.5", "--port", "9000", "--endpoint", "/v1/chat/completions",
                    "--num-prompts", "50")
    assert spec.endpoint.base_url == "http://10.0.0.5:9000/v1" and spec.endpoint.api == "chat"
    assert (spec.load.pattern, spec.load.concurrency, spec.load.measure.requests) == ("closed", 50, 50)
    spec, _ = _spec("--base-url", "http://h:1", "--burstiness", "0.5", "--request-rate", "3",
                    "--random-prefix-len", "32")
    assert (spec.load.pattern, spec.load.burstiness, spec.load.rate_per_s) == ("gamma", 0.5, 3)
    assert spec.workload.shared_prefix is not None and spec.workload.shared_prefix.prefix_tokens == 32
    spec, _ = _spec("--host", "h", "--endpoint", "/v1/embeddings", "--num-prompts", "4")
    assert spec.endpoint.api == "embeddings"
    spec, _ = _spec("--base-url", "http://h:1", "--dataset-name", "sharegpt", "--dataset-path", "sg.json")
    assert spec.workload.source is not None and spec.workload.source.format == "sharegpt"


@pytest.mark.parametrize(("argv", "load"), [
    (("--rate-type", "synchronous", "--max-requests", "20"), ("closed", None, 1, 20, None)),
    (("--rate-type", "concurrent", "--rate", "4", "--max-requests", "50"), ("closed", None, 4, 50, None)),
    (("--rate-type", "throughput", "--max-requests", "30"), ("closed", None, 30, 30, None)),
    (("--rate-type", "poisson", "--rate", "5", "--max-seconds", "30"), ("poisson", 5, None, None, 30)),
    (("--rate-type", "constant", "--rate", "2.5", "--max-requests", "10"), ("constant", 2.5, None, 10, None)),
])
def test_guidellms_rate_types_are_the_loads_they_mean(argv: tuple[str, ...],
                                                      load: tuple[object, ...]) -> None:
    spec, _ = _spec("--target", "http://127.0.0.1:8000", "--data", "prompt_tokens=128,output_tokens=16", *argv)
    got = spec.load
    assert (got.pattern, got.rate_per_s, got.concurrency, got.measure.requests, got.measure.duration_s) == load
    assert (spec.workload.input_tokens.value, spec.workload.output_tokens.value) == (128, 16)


def test_guidellms_data_with_a_spread_is_a_clamped_normal() -> None:
    spec, _ = _spec("--target", "h:1", "--rate-type", "synchronous", "--max-requests", "10", "--data",
                    "prompt_tokens=256,prompt_tokens_stdev=32,prompt_tokens_min=128,prompt_tokens_max=384,"
                    "output_tokens=64", "--warmup-percent", "0.1")
    dist = spec.workload.input_tokens
    assert (dist.dist, dist.mean, dist.std, dist.min, dist.max) == ("normal", 256, 32, 128, 384)
    assert spec.load.warmup.requests == 1  # ceil(0.1 x 10)


@pytest.mark.parametrize(("argv", "said"), [
    (("--profile",), "passport does not start an engine's profiler"),
    (("--goodput", "ttft:200"), "declare them as `slo:` in a spec"),
    (("--dataset-name", "sonnet"), "the sonnet dataset is not bundled"),
    (("--dataset-name", "sharegpt"), "give the local file as --dataset-path FILE"),
    (("--backend", "tgi"), "not one of vLLM's backends passport speaks"),
    (("--random-range-ratio", "1.5"), "give a ratio from 0 to below 1"),
    (("--data", "prompt_tokens=8,images=2"), "images is not a length passport reads"),
    (("--metric-percentiles", "50,abc", "--save-result"), "write percentiles separated by commas"),
    (("--base-url", "http://a:1", "--target", "http://b:2"), "--base-url and --target both name the server"),
])
def test_a_flag_passport_cannot_honour_is_refused_with_the_reason(argv: tuple[str, ...], said: str) -> None:
    from passport.cli._vocabulary import percentiles

    with pytest.raises(SpecError, match=said.replace("(", r"\(").replace(")", r"\)")):
        args = _parser().parse_args(["run", "--base-url", "http://h:1", *argv] if "--base-url" not in argv
                                    else ["run", *argv])
        load_spec_with_overrides(args)
        percentiles(args.metric_percentiles)


def test_every_borrowed_and_refused_flag_is_a_flag_of_passport_run_with_help() -> None:
    run = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    options = {o: a for a in run._actions for o in a.option_strings}
    for entry in VOCABULARY:
        for word in entry.flag.replace("/", " ").replace(",", " ").split():
            if word.startswith("--"):
                assert word in options and options[word].help, (entry.flag, word)
    assert set(REFUSED) - {"--dataset-name"} <= set(options)
