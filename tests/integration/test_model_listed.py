"""A passport says `probed` only for what the server said: a --model the server does not list is
declared, and the model_listed rule (rules version 5) warns about it, re-derived by verify."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from passport.audit._probes import model_listing
from tests.conftest import LENIENT_FLAGS, SimFactory, only_run_dir, run_cli
from tests.faults import fault

FLAGS = ("--concurrency", "2", "--num-prompts", "6", "--input-len", "8", "--output-len", "4", "--set", "canaries=none",
         "--set", "workload.tokenizer=none", "--quiet", *LENIENT_FLAGS)


def _rule(passport: dict[str, object], name: str) -> dict[str, object]:
    rules = passport["validity"]["rules"]  # type: ignore[index]
    return next(r for r in rules if r["name"] == name)  # type: ignore[no-any-return]


@fault("`--model gpt-4o` against a server whose /v1/models lists another model",
       "identity.model.id is `declared` (not `probed`) and the model_listed rule WARNs naming what the server lists; "
       "verify re-derives both")
@pytest.mark.slow
def test_a_model_the_server_does_not_list_is_declared_and_warned(simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")  # lists sim-model and answers any name
    result = run_cli("run", "--endpoint", url, "--model", "gpt-4o", *FLAGS, "--out", str(tmp_path / "other"))
    assert result.returncode == 0, result.stderr  # a WARN: the run is VALID and says so
    run = only_run_dir(tmp_path / "other")
    passport = json.loads((run / "passport.json").read_text())
    assert passport["identity"]["model.id"] == {
        "value": "gpt-4o", "source": "declared",
        "via": "endpoint.model (--model): not among the ids the server's /v1/models lists"}
    rule = _rule(passport, "model_listed")
    assert rule["status"] == "WARN" and "which the server's /v1/models does not list ('sim-model')" in rule["message"]
    assert "WARN: model_listed" in result.stdout
    assert run_cli("verify", str(run)).returncode == 0

    listed = run_cli("run", "--endpoint", url, "--model", "sim-model", *FLAGS, "--out", str(tmp_path / "same"))
    same = json.loads((only_run_dir(tmp_path / "same") / "passport.json").read_text())
    assert listed.returncode == 0 and same["identity"]["model.id"]["source"] == "probed"
    assert _rule(same, "model_listed")["status"] == "PASS"


def test_the_listing_is_read_from_the_probes_alone(tmp_path: Path) -> None:
    probes = tmp_path / "probes.jsonl"
    head = json.dumps({"base_url": "http://h/v1", "model": "m", "api": "chat"})
    listing = json.dumps({"method": "GET", "path": "/v1/models", "request": None, "status": 200,
                          "body": json.dumps({"data": [{"id": "a"}, {"id": "m"}, {"no": "id"}]}), "error": None})
    probes.write_text(f"{head}\n{listing}\n")
    assert model_listing(tmp_path) == ("m", ["a", "m"])
    probes.write_text(f"{head}\n" + json.dumps({"method": "GET", "path": "/v1/models", "status": 404, "body": "x"}))
    assert model_listing(tmp_path) == ("m", None)
    for broken in ("not json", "", json.dumps(["a list"])):
        probes.write_text(broken)
        assert model_listing(tmp_path) is None
    probes.unlink()
    assert model_listing(tmp_path) is None
