from __future__ import annotations

import json
from pathlib import Path

import pytest

from passport import Passport, RunFolderError, read_passport
from passport.model import SCHEMA_PATH, SCHEMA_VERSION, render_schema


def test_committed_json_schema_matches_the_model() -> None:
    assert SCHEMA_PATH.read_text() == render_schema(), "run: python -m passport.model"


def test_schema_declares_the_four_parts() -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    assert {"identity", "protocol", "validity", "results", "files"} <= set(schema["required"])
    assert schema["properties"]["schema_version"]["default"] == SCHEMA_VERSION == "1.4"


def test_a_1_0_passport_without_the_1_1_fields_still_reads(sample_passport: Passport, tmp_path: Path) -> None:
    data = json.loads(sample_passport.model_dump_json())
    data["schema_version"] = "1.0"
    del data["protocol"]["declared"]
    for later in ("slo", "discard", "server", "lengths", "sessions", "checks", "shapes", "cost"):  # 1.1 on
        data["results"].pop(later, None)
    (tmp_path / "passport.json").write_text(json.dumps(data))
    old = read_passport(tmp_path)
    assert old.schema_version == "1.0" and old.results.get("slo") is None and old.protocol.declared is None


def test_unknown_schema_version_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "passport.json").write_text(json.dumps({"schema_version": "9.9"}))
    with pytest.raises(RunFolderError, match="schema_version '9.9' is not supported"):
        read_passport(tmp_path)


def test_marshalling_round_trip(sample_passport: Passport, tmp_path: Path) -> None:
    (tmp_path / "passport.json").write_text(sample_passport.model_dump_json())
    assert read_passport(tmp_path) == sample_passport
