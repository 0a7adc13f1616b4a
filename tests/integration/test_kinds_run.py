"""Every endpoint kind from flags alone against the simulated engine (issue 46): a VALID
passport that verifies, whose figures match the simulator's scripted timings, with the kind's
own canaries passed and its own rates.

The simulator's script (harness/simulator/_kinds.py): a pooling request is answered whole after
the TTFT plus one ITL per input (or document) past the first; a stream's first token after the
TTFT and one token per ITL after; an audio clip is transcribed to 3 words a second of audio.
Upper bounds leave room for a busy machine (the client and the simulator share two cores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.conftest import LENIENT_FLAGS, SimFactory, only_run_dir, run_cli

pytestmark = pytest.mark.slow  # runs against the simulated engine

TTFT_MS, ITL_MS = 30.0, 4.0
SLACK_MS = 25.0  # the most a busy machine may add to a scripted p50 here


def _run(simulator: SimFactory, tmp_path: Path, api: str, *flags: str) -> tuple[Path, dict[str, Any]]:
    url = simulator("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS))
    done = run_cli("run", "--endpoint", url, "--api", api, "--rate", "20", "--num-prompts", "40",
                   "--random-input-len", "24", "--random-output-len", "12", *flags, "--out", str(tmp_path / "out"),
                   *LENIENT_FLAGS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Result is: VALID" in done.stdout, done.stdout
    run = only_run_dir(tmp_path / "out")
    assert run_cli("verify", str(run)).stdout.startswith("verified")
    passport = json.loads((run / "passport.json").read_text())
    canaries = passport["validity"]["canaries"]
    assert canaries["status"] == "passed" and canaries["n_cases"] >= 1 and canaries["n_failed"] == 0, canaries
    return run, passport


def _near(value_s: float, scripted_ms: float) -> bool:
    return scripted_ms - 1.0 <= value_s * 1000 <= scripted_ms + SLACK_MS


@pytest.mark.parametrize(("api", "flags", "per_request", "rate_id"), [
    ("embeddings", ("--set", "workload.inputs_per_request=4"), 4, "throughput.inputs_per_s"),
    ("rerank", ("--set", "workload.documents.count=6"), 6, "throughput.documents_per_s"),
    ("score", ("--set", "workload.documents.count=3"), 3, "throughput.documents_per_s"),
])
def test_a_pooling_kind_is_timed_whole_and_counted_by_its_inputs(
    simulator: SimFactory, tmp_path: Path, api: str, flags: tuple[str, ...], per_request: int, rate_id: str
) -> None:
    run, passport = _run(simulator, tmp_path, api, *flags)
    metrics = passport["results"]["metrics"]
    assert _near(metrics["e2e"]["p50"], TTFT_MS + (per_request - 1) * ITL_MS), metrics["e2e"]
    assert metrics["ttft.any"]["n"] == 0 and metrics["itl.chunk"]["n"] == 0  # nothing is generated
    assert metrics[rate_id]["mean"] == pytest.approx(per_request * metrics["throughput.requests_per_s"]["mean"])
    assert metrics["throughput.output_tokens_per_s"]["mean"] == 0
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    measured = requests[requests.phase == "measure"]
    assert len(measured) == 40 and (measured.outcome == "ok").all()
    assert (measured.n_inputs == per_request).all() and (measured.n_results == per_request).all()
    assert (measured.prompt_tokens > 0).all() and (measured.completion_tokens == 0).all()
    assert metrics["throughput.input_tokens_per_s"]["mean"] == pytest.approx(
        measured.prompt_tokens.sum() / passport["results"]["windows"][0]["duration_s"])
    if api == "embeddings":
        assert (measured.embedding_dim == 64).all()
        assert passport["identity"]["model.embedding_dim"]["value"] == 64
        assert passport["identity"]["model.embedding_normalized"]["value"] is True
    chunks = pq.read_table(run / "chunks.parquet").to_pandas()
    assert set(chunks.kind) == {"body"} and not chunks.token_bearing.any()  # one whole body per answer
    # vLLM's own view and result file of a pooling run (serve.py's EmbedBenchmarkMetrics)
    shown = run_cli("show", str(run), "--as", "vllm")
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if x.startswith("Input throughput (inputs/s)"))
    assert float(line.split()[3]) == pytest.approx(metrics[rate_id]["mean"], rel=0.02)
    saved = run_cli("show", str(run), "--as", "vllm", "--json")
    result = json.loads(saved.stdout)
    assert result["total_input_sequences"] == 40 * per_request and "ttfts" not in result
    assert result["median_e2el_ms"] == pytest.approx(1000 * float(np.median(result["latencies"])))
    refused = run_cli("show", str(run), "--as", "sglang")
    assert refused.returncode == 2 and f"sglang has no client for endpoint.api {api}" in refused.stderr


@pytest.mark.parametrize("api", ["responses", "anthropic_messages"])
def test_a_streamed_kind_gets_the_chat_metrics_from_its_own_events(simulator: SimFactory, tmp_path: Path,
                                                                    api: str) -> None:
    run, passport = _run(simulator, tmp_path, api, "--ignore-eos")
    metrics = passport["results"]["metrics"]
    assert _near(metrics["ttft.any"]["p50"], TTFT_MS), metrics["ttft.any"]
    assert _near(metrics["tpot"]["p50"], ITL_MS) and _near(metrics["itl.chunk"]["p50"], ITL_MS)
    assert _near(metrics["e2e"]["p50"], TTFT_MS + 11 * ITL_MS)
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    measured = requests[requests.phase == "measure"]
    assert (measured.completion_tokens == 12).all() and (measured.n_token_chunks == 12).all()
    assert (measured.tokens_source == "server").all() and (measured.prompt_tokens > 0).all()
    chunks = pq.read_table(run / "chunks.parquet").to_pandas()
    first = "response.created" if api == "responses" else "message_start"
    assert first in set(chunks.event)  # the events' own names are kept
    if api == "responses":  # vLLM's Responses client times the first text delta, as passport does
        shown = run_cli("show", str(run), "--as", "vllm")
        line = next(x for x in shown.stdout.splitlines() if x.startswith("TTFT"))
        assert TTFT_MS - 1 <= float(line.split()[3]) <= TTFT_MS + SLACK_MS, line


def test_audio_is_timed_to_its_first_transcript_token_with_its_real_time_factor(simulator: SimFactory,
                                                                                tmp_path: Path) -> None:
    run, passport = _run(simulator, tmp_path, "audio_transcriptions", "--set", "workload.audio.duration_s=2")
    metrics = passport["results"]["metrics"]
    words = 6  # 2 s of audio at 3 words a second
    e2e_ms = TTFT_MS + (words - 1) * ITL_MS
    assert _near(metrics["ttft.any"]["p50"], TTFT_MS) and _near(metrics["e2e"]["p50"], e2e_ms)
    assert 2.0 / ((e2e_ms + SLACK_MS) / 1000) <= metrics["rtfx.request"]["p50"] <= 2.0 / ((e2e_ms - 1) / 1000)
    assert metrics["throughput.audio_s_per_s"]["mean"] == pytest.approx(
        2.0 * metrics["throughput.requests_per_s"]["mean"])
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    measured = requests[requests.phase == "measure"]
    assert (measured.audio_ms == 2000).all() and (measured.n_token_chunks == words).all()


def test_a_responses_session_is_continued_by_the_server_from_the_previous_response(
    simulator: SimFactory, tmp_path: Path
) -> None:
    """Each later turn sends only its new message with previous_response_id; the simulator
    restores the conversation from it, so the input it counts grows turn by turn."""
    run, _ = _run(simulator, tmp_path, "responses", "--set", "workload.sessions.turns=3",
                  "--set", "workload.input_tokens.value=10", "--set", "workload.input_tokens.dist=fixed")
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    sessions = requests[requests.phase == "measure"].sort_values(["session", "turn"]).groupby("session")
    for _, turns in sessions:
        counted = turns.prompt_tokens.tolist()
        assert len(counted) == 3 and counted[0] < counted[1] < counted[2], counted
        assert counted[1] >= counted[0] + 12 + 10  # turn 0's prompt, its 12-token answer and the new message


def test_a_suite_for_another_kind_is_refused_before_anything_is_sent(simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator()
    done = run_cli("run", "--endpoint", url, "--api", "embeddings", "--num-prompts", "4", "--set",
                   "canaries=default-rerank", "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "rerank_order case, for endpoint.api rerank or score, and this run's is embeddings" in done.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_whole_answer_is_bounded_by_the_response_limit_not_the_events(simulator: SimFactory,
                                                                          tmp_path: Path) -> None:
    """An embeddings body is one JSON document, so limits.bytes_per_event (meant for one SSE event)
    does not cut it; limits.bytes_per_response still does."""
    url = simulator("--ttft-ms", "1", "--itl-ms", "1", "--embedding-dim", "1024")
    common = ("run", "--endpoint", url, "--api", "embeddings", "--max-concurrency", "2", "--num-prompts", "6",
              "--set", "workload.inputs_per_request=8", "--set", "limits.bytes_per_event=65536", *LENIENT_FLAGS)
    done = run_cli(*common, "--out", str(tmp_path / "fits"))
    assert done.returncode == 0, done.stdout + done.stderr
    requests = pq.read_table(only_run_dir(tmp_path / "fits") / "requests.parquet").to_pandas()
    assert (requests.outcome == "ok").all() and (requests.embedding_dim == 1024).all()
    chunks = pq.read_table(only_run_dir(tmp_path / "fits") / "chunks.parquet").to_pandas()
    assert (chunks.n_chars > 65536).all()  # each body is past the event limit, and whole
    over = run_cli(*common, "--set", "limits.bytes_per_response=65536", "--set", "validity.max_error_rate=1",
                   "--out", str(tmp_path / "over"))
    requests = pq.read_table(only_run_dir(tmp_path / "over") / "requests.parquet").to_pandas()
    assert over.returncode == 1 and set(requests.outcome) == {"stream_error"}
    assert set(requests.error) == {"the response exceeded 65536 bytes"}
