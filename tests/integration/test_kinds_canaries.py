"""Each endpoint kind's canaries (issue 46) against the simulated engine: the text cases through
the Responses and Messages formats, and the embedding, rerank and transcript cases, each passing
where the engine answers right and failing, with what was expected and found, where it cannot."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import SimFactory, run_cli
from tests.integration.test_canaries import EXPECTED_FAILURES, RIGHT, SUITE, WRONG
from workloads import speechlike_clip

pytestmark = pytest.mark.slow  # canary runs against the simulated engine

_TEXT_CASES = [dict(c, api="auto") for c in SUITE["cases"] if c["kind"] not in ("coding", "accounting")]


def _canary(url: str, tmp_path: Path, suite: dict[str, Any], *flags: str) -> tuple[int, Any]:
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite))
    out = tmp_path / "out"
    done = run_cli("canary", "--endpoint", url, "--suite", str(path), "--out", str(out), *flags)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    table = pq.read_table(next(out.iterdir()) / "canaries.parquet").to_pandas().set_index("case_id")
    return done.returncode, table


@pytest.mark.parametrize("api", ["responses", "anthropic_messages"])
@pytest.mark.parametrize("right", [True, False])
def test_text_cases_pass_and_fail_through_the_kinds_own_format(simulator: SimFactory, tmp_path: Path, api: str,
                                                               right: bool) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(RIGHT if right else WRONG))
    url = simulator("--ttft-ms", "2", "--itl-ms", "1", "--script", str(script),
                    *(() if right else ("--forget-history",)))
    code, table = _canary(url, tmp_path, {"suite": "text", "version": 1, "cases": _TEXT_CASES}, "--api", api)
    if right:
        assert code == 0 and (table.verdict == "pass").all(), table[["verdict", "reason"]]
    else:
        assert code == 1 and (table.verdict == "fail").all()
        assert table.category.to_dict() == {k: v for k, v in EXPECTED_FAILURES.items() if k in table.index}
        assert table.loc["exact", "actual"] == "Lyon is the capital."


def test_embedding_cases_hold_their_promises_and_fail_when_the_promise_is_wrong(simulator: SimFactory,
                                                                                 tmp_path: Path) -> None:
    paraphrase = "In the afternoon sun, the cat sat on the warm windowsill."
    unrelated = "Quarterly tax filings are due at the end of March."
    anchor = "The cat sat on the warm windowsill in the afternoon sun."
    cases = [
        {"id": "same", "kind": "embedding_deterministic", "prompt": anchor},
        {"id": "near", "kind": "embedding_semantic", "prompt": anchor, "inputs": [paraphrase, unrelated]},
        {"id": "shape", "kind": "embedding_shape", "prompt": "Hi", "inputs": [anchor],
         "expect": {"dimension": 64, "normalized": True}},
        # what no engine can meet, or what this one does not do: each must fail
        {"id": "too-same", "kind": "embedding_deterministic", "prompt": anchor, "expect": {"min_cosine": 1.5}},
        {"id": "far", "kind": "embedding_semantic", "prompt": anchor, "inputs": [unrelated, paraphrase]},
        {"id": "wrong-dim", "kind": "embedding_shape", "prompt": "Hi", "expect": {"dimension": 32}},
        {"id": "not-unit", "kind": "embedding_shape", "prompt": "Hi", "expect": {"normalized": False}},
    ]
    code, table = _canary(simulator(), tmp_path, {"suite": "emb", "version": 1, "cases": cases}, "--api",
                          "embeddings")
    assert code == 1
    assert table.verdict.to_dict() == {"same": "pass", "near": "pass", "shape": "pass", "too-same": "fail",
                                       "far": "fail", "wrong-dim": "fail", "not-unit": "fail"}
    assert table.loc["same", "actual"] == "1.000000"
    assert table.loc["far", "reason"].startswith("the paraphrase is not closer")
    assert "dimension 64, expected 32" in table.loc["wrong-dim", "reason"]
    assert "normalised to length 1, expected not normalised" in table.loc["not-unit", "reason"]


def test_rerank_order_finds_the_relevant_document_on_rerank_and_score(simulator: SimFactory, tmp_path: Path) -> None:
    documents = ["Paris is the capital and largest city of France.", "Photosynthesis turns light into energy.",
                 "Shares rose on Tuesday."]
    url = simulator()
    for api in ("rerank", "score"):
        cases = [{"id": "first", "kind": "rerank_order", "prompt": "What is the capital of France?",
                  "inputs": documents},
                 {"id": "claims-second", "kind": "rerank_order", "prompt": "What is the capital of France?",
                  "inputs": documents, "expect": {"first": 1}}]
        code, table = _canary(url, tmp_path / api, {"suite": "rr", "version": 1, "cases": cases}, "--api", api)
        assert code == 1 and table.verdict.to_dict() == {"first": "pass", "claims-second": "fail"}
        assert table.loc["claims-second", "reason"] == "document 0 ranked first, not 1"


def _with_transcript(clip: bytes, text: str) -> bytes:
    """A WAV with a `txt ` chunk, which the simulator 'transcribes' (harness/simulator/_kinds.py)."""
    chunk = text.encode()
    body = clip[12:] + b"txt " + struct.pack("<I", len(chunk)) + chunk + (b"\0" if len(chunk) % 2 else b"")
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WAVE" + body


def test_a_transcript_case_reads_a_users_clip_beside_the_suite(simulator: SimFactory, tmp_path: Path) -> None:
    (tmp_path / "clips").mkdir()
    (tmp_path / "clips" / "fox.wav").write_bytes(_with_transcript(speechlike_clip(2000, 5),
                                                                  "The quick, brown fox jumps."))
    cases = [{"id": "heard", "kind": "transcript", "audio_file": "clips/fox.wav",
              "expect": {"contains": "quick brown FOX"}},
             {"id": "misheard", "kind": "transcript", "audio_file": "clips/fox.wav",
              "expect": {"contains": "lazy dog"}},
             {"id": "generated", "kind": "transcript", "audio_s": 1.0}]
    suite = tmp_path / "s" / "suite.yaml"  # the clip's path is relative to the suite file
    suite.parent.mkdir()
    suite.write_text(yaml.safe_dump({"suite": "asr", "version": 1, "cases": cases}))
    (tmp_path / "s" / "clips").symlink_to(tmp_path / "clips")
    done = run_cli("canary", "--endpoint", simulator(), "--suite", str(suite), "--api", "audio_transcriptions",
                   "--out", str(tmp_path / "out"))
    assert done.returncode == 1, done.stdout + done.stderr
    table = pq.read_table(next((tmp_path / "out").iterdir()) / "canaries.parquet").to_pandas().set_index("case_id")
    assert table.verdict.to_dict() == {"heard": "pass", "misheard": "fail", "generated": "pass"}
    assert table.loc["misheard", "actual"].strip() == "The quick, brown fox jumps."
    assert table.loc["generated", "content"] == "tok0 tok1 tok2 "  # 1 s at the simulator's 3 words a second
