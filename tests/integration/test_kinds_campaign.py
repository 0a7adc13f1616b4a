"""A RAG pipeline's campaign (issue 46): two embedders on one server (A/A), a reranker and a
generator, attached to the simulated engine, each arm its own endpoint kind. Each kind is ranked
apart and never against another: the A/A embedders tie, no single best arm is named, a gate on
`arms.best` says why, and the record verifies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import LENIENT_CLIENT, SimFactory, only_run_dir, run_cli

pytestmark = pytest.mark.slow  # a campaign of runs against the simulated engine


def test_a_campaign_of_several_endpoint_kinds_ranks_each_kind_apart(simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "10", "--itl-ms", "2")
    arms = [{"name": "emb-a", "endpoint": {"base_url": url, "api": "embeddings"}},
            {"name": "emb-b", "endpoint": {"base_url": url, "api": "embeddings"}},
            {"name": "rerank", "endpoint": {"base_url": url, "api": "rerank"}},
            {"name": "gen", "endpoint": {"base_url": url, "api": "chat"}}]
    spec = {"name": "rag", "objective": "throughput.requests_per_s", "repetitions": 2, "min_difference": 0.2,
            "run": {"workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 16},
                                 "output_tokens": {"dist": "fixed", "value": 8}},
                    "load": {"pattern": "closed", "concurrency": 2, "measure": {"requests": 30}},
                    "validity": LENIENT_CLIENT},
            "arms": arms}
    (tmp_path / "campaign.yaml").write_text(yaml.safe_dump(spec))
    done = run_cli("campaign", str(tmp_path / "campaign.yaml"), "--out", str(tmp_path / "out"), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    folder = only_run_dir(tmp_path / "out")
    record = json.loads((folder / "campaign.json").read_text())
    rows = {r["name"]: r for r in record["arms"]}
    assert all(r["status"] == "ranked" for r in rows.values()), {n: r["reason"] for n, r in rows.items()}
    assert set(record["by_kind"]) == {"embeddings", "rerank", "chat"} and record["best"] is None
    # an embedder answers in ~10 ms and a generator in ~24: ranked together the embedders would lead
    assert rows["gen"]["rank"] == 1 and rows["rerank"]["rank"] == 1
    # A/A: the same server twice is no winner
    assert (rows["emb-a"]["rank"], rows["emb-b"]["rank"]) == (1, 1)
    assert record["by_kind"]["embeddings"]["best"] is None
    assert sorted(record["by_kind"]["embeddings"]["tied_for_first"]) == ["emb-a", "emb-b"]
    assert all({c["a"], c["b"]} == {"emb-a", "emb-b"} for c in record["comparisons"])
    # each arm ran its own kind's default canaries
    suites = {n: json.loads((folder / r["run"] / "passport.json").read_text())["validity"]["canaries"]["suite"]
              for n, r in rows.items()}
    assert suites == {"emb-a": "default-embeddings", "emb-b": "default-embeddings", "rerank": "default-rerank",
                      "gen": "default"}
    assert "no single best arm: the arms serve 3 endpoint kinds" in done.stdout
    assert run_cli("verify", str(folder)).returncode == 0
    gate = run_cli("gate", str(folder), "--require", "arms.best.throughput.requests_per_s > 1")
    # The tied arms are named best mean first, so their order follows the noise of this run.
    assert gate.returncode == 1 and any(f"best per kind: embeddings: none ({pair} tie)" in gate.stdout
                                        for pair in ("emb-a and emb-b", "emb-b and emb-a"))
