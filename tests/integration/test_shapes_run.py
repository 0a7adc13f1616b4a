"""Each traffic shape end to end against the simulated engine: what went over the wire, what was
recorded per request, and the figures the passport derives from it."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.conftest import SimFactory, only_run_dir, run_cli
from tests.integration.test_faults import _spec
from workloads import load_tokenizer

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

WriteSpec = Callable[..., Path]


def _run(write_spec: WriteSpec, tmp_path: Path, url: str, workload: dict[str, Any], load: dict[str, Any],
         *args: str, verdict: str = "VALID", **extra: Any) -> tuple[Path, dict[str, Any], pd.DataFrame]:
    """Run the spec; the passport has `verdict` and the exit code is the one it gets (0: VALID)."""
    spec = write_spec(_spec(url, load, workload={"tokenizer": "none", **workload}, **extra))
    out = tmp_path / "out"
    done = run_cli("run", str(spec), "--out", str(out), "--quiet", *args)
    run = only_run_dir(out)
    found = json.loads((run / "passport.json").read_text())["verdict"]
    assert (found, done.returncode) == (verdict, 0 if verdict == "VALID" else 1), done.stderr
    assert run_cli("verify", str(run)).returncode == 0
    return run, json.loads((run / "passport.json").read_text()), pq.read_table(run / "requests.parquet").to_pandas()


def test_sessions_carry_the_real_answers_wait_their_think_time_and_record_context(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "2", "--itl-ms", "1")
    workload = {"sessions": {"turns": 3, "think_time_s": 0.15}, "input_tokens": {"dist": "fixed", "value": 6},
                "output_tokens": {"dist": "uniform", "low": 2, "high": 9}}
    run, passport, df = _run(write_spec, tmp_path, url, workload,
                             {"pattern": "poisson", "rate_per_s": 20, "measure": {"requests": 6},
                              "warmup": {"requests": 0}})
    assert len(df) == 18 and (df.outcome == "ok").all()
    for _, turns in df.sort_values("turn").groupby("session"):
        assert list(turns.turn) == [0, 1, 2] and (turns.session_turns == 3).all()
        assert list(turns.context_messages) == [1, 3, 5]
        # the simulator counts every word it was sent: earlier user turns plus the answers it gave
        words = turns.prompt.str.split().str.len().tolist()
        answers = turns.response_text.str.split().str.len().tolist()
        assert turns.prompt_tokens.tolist() == [words[0], words[0] + answers[0] + words[1],
                                                sum(words) + answers[0] + answers[1]]
        gaps_s = (turns.sent_ns.to_numpy()[1:] - turns.end_ns.to_numpy()[:-1]) / 1e9
        assert (gaps_s >= 0.15).all() and (gaps_s < 0.6).all()
        assert (turns.intended_ns.to_numpy()[1:] - turns.end_ns.to_numpy()[:-1] == 150_000_000).all()
    sessions = passport["results"]["sessions"]
    assert sessions == {**sessions, "started": 6, "completed": 6, "cut_short": 0, "turns_sent": 18,
                        "turns_planned": 18}
    by_turn = sessions["context_tokens_by_turn"]
    assert by_turn["0"]["p50"] < by_turn["1"]["p50"] < by_turn["2"]["p50"]
    schedule = pq.read_table(run / "schedule.parquet").to_pandas()
    assert len(schedule) == 18 and schedule.intended_offset_ns.isna().sum() == 12  # later turns: no set time
    assert passport["protocol"]["workload"]["entries"] == 6
    report = (run / "report.md").read_text()
    assert "## Sessions (multi-turn)" in report and "6 sessions started, 6 completed" in report


def test_a_failed_turn_ends_its_session(simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1", "--fault", "http500:5")
    workload = {"sessions": {"turns": 4}, "input_tokens": {"dist": "fixed", "value": 4},
                "output_tokens": {"dist": "fixed", "value": 3}}
    _, passport, df = _run(write_spec, tmp_path, url, workload,
                           {"pattern": "closed", "concurrency": 1, "measure": {"requests": 5},
                            "warmup": {"requests": 0}}, verdict="INVALID")
    assert [r["name"] for r in passport["validity"]["rules"] if r["status"] == "FAIL"] == ["error_rate"]
    # one user, turns in order: requests 5, 10, 15 fail (turn 0 of session 1: k=5 is its 1st turn ...)
    failed = df[df.outcome != "ok"]
    assert len(failed) >= 2
    for _, row in failed.iterrows():  # nothing of that session after its failed turn
        later = df[(df.session == row.session) & (df.turn > row.turn)]
        assert later.empty
    sessions = passport["results"]["sessions"]
    assert sessions["started"] == 5 and sessions["cut_short"] == len(failed)
    assert sessions["turns_sent"] == len(df) < sessions["turns_planned"] == 20


def test_structured_output_and_tool_answers_are_validated_per_request(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    workload = {"structured_output": {"share": 0.5}, "tools": {"share": 1.0},
                "input_tokens": {"dist": "fixed", "value": 12}, "output_tokens": {"dist": "fixed", "value": 48}}
    _, passport, df = _run(write_spec, tmp_path, url, workload,
                           {"pattern": "closed", "concurrency": 2, "measure": {"requests": 30},
                            "warmup": {"requests": 0}})
    assert set(df.check) == {"json_schema", "tool_call"} and (df.check_result == "passed").all()
    json_rows = df[df.check == "json_schema"]
    assert json_rows.response_text.map(lambda t: set(json.loads(t)) == {"title", "year"}).all()
    tool_rows = df[df.check == "tool_call"]
    assert tool_rows.tool_calls.map(lambda t: json.loads(t)[0]["name"] == "get_weather").all()
    assert not (df.max_tokens_is_target).any()  # the answer must be free to end: no ignore_eos, a cap
    checks = passport["results"]["checks"]
    assert checks["json_schema"]["checked"] == len(json_rows) and checks["tool_call"]["pass_rate"] == 1.0
    counts = passport["validity"]["counts"]
    assert counts["schema_failures"] == 0 and counts["tool_failures"] == 0
    assert passport["protocol"]["workload"]["structured_output_form"] == "response_format json_schema"


def test_an_engine_that_drops_the_constraints_is_caught(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1", "--ignore-formats", "--eos-after-tokens", "4")
    workload = {"mix": [{"name": "json", "weight": 1, "workload": {"structured_output": {}}},
                        {"name": "agent", "weight": 1, "workload": {"tools": {}}}],
                "input_tokens": {"dist": "fixed", "value": 8}}
    _, passport, df = _run(write_spec, tmp_path, url, workload,
                           {"pattern": "closed", "concurrency": 2, "measure": {"requests": 20},
                            "warmup": {"requests": 0}})
    assert (df.outcome == "ok").all()  # fast and well-formed: only the checks see the problem
    assert set(df.check_result[df.check == "json_schema"]) == {"schema_failure"}
    assert set(df.check_result[df.check == "tool_call"]) == {"tool_failure"}
    assert df.check_reason[df.check == "tool_call"].str.contains("no tool call").all()
    counts = passport["validity"]["counts"]
    assert counts["schema_failures"] == int((df.check == "json_schema").sum()) > 0
    assert counts["tool_failures"] == int((df.check == "tool_call").sum()) > 0
    rules = {r["name"]: r for r in passport["validity"]["rules"]}
    assert rules["checks_json_schema"]["status"] == "WARN" and rules["checks_tool_call"]["status"] == "WARN"
    assert set(passport["results"]["shapes"]) == {"json", "agent"}
    report = (only_run_dir(tmp_path / "out") / "report.md").read_text()
    assert "## Answer checks" in report and "| `tool_call` |" in report and "## Traffic shapes" in report
    gate = run_cli("gate", str(only_run_dir(tmp_path / "out")), "--require", "validity.counts.schema_failures == 0")
    assert gate.returncode == 1 and gate.stdout.startswith("FAIL  validity.counts.schema_failures == 0  measured ")


def test_images_arrive_whole_at_their_declared_sizes(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    workload = {"images": {"count": 2, "sizes": ["64x48", "100x30"]}, "input_tokens": {"dist": "fixed", "value": 5},
                "output_tokens": {"dist": "fixed", "value": 3}}
    run, _, df = _run(write_spec, tmp_path, url, workload,
                      {"pattern": "closed", "concurrency": 2, "measure": {"requests": 12}, "warmup": {"requests": 0}})
    schedule = pq.read_table(run / "schedule.parquet").to_pandas().set_index("request_index")
    for _, row in df.iterrows():
        images = orjson.loads(schedule.images_json[row.request_index])
        patches = sum(math.ceil(w / 28) * math.ceil(h / 28) for w, h, _ in images)
        assert row.prompt_tokens == len(row.prompt.split()) + patches  # the simulator read both PNG headers
    assert set(df["shape"]) == {"images"}


def test_the_server_tokenizer_is_cross_checked_and_a_disagreement_recorded(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path, gguf_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")  # its /tokenize counts words, not Gemma tokens
    workload = {"tokenizer": f"gguf:{gguf_path}", "text": "corpus", "input_tokens": {"dist": "fixed", "value": 400},
                "output_tokens": {"dist": "fixed", "value": 3}}
    _, passport, df = _run(write_spec, tmp_path, url, workload,
                           {"pattern": "closed", "concurrency": 1, "measure": {"requests": 10},
                            "warmup": {"requests": 0}})
    assert (df.input_tokens_client == 400).all()
    check = passport["protocol"]["workload"]["tokenizer_check"]
    assert check["checked"] == 8 and check["agreed"] == 0 and len(check["disagreements"]) == 8
    first = check["disagreements"][0]
    assert first["client_tokens"] == 400 and first["server_tokens"] == len(df.prompt[0].split())
    rules = {r["name"]: r for r in passport["validity"]["rules"]}
    assert rules["server_tokenizer"]["status"] == "WARN"
    assert passport["results"]["lengths"]["input_tokens"]["client"]["p50"] == 400


def test_the_own_traffic_preset_replays_its_log_and_checks_its_constraints(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    _, passport, df = _run(write_spec, tmp_path, url, {"preset": "own-traffic"},
                           {"pattern": "trace", "time_scale": 4.0, "warmup": {"requests": 0},
                            "measure": {"requests": 24}})
    assert len(df) == 24 and (df.outcome == "ok").all()
    assert set(df.check.dropna()) == {"json_schema", "tool_call"}
    assert (df.check_result.dropna() == "passed").all()
    assert passport["results"]["checks"]["json_schema"]["checked"] == 3


def test_the_thinking_preset_is_sent_and_reasoning_tokens_are_counted_apart(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path, gguf_path: Path
) -> None:
    thought = "First I weigh the question carefully, then I settle on an answer."
    script = tmp_path / "script.yaml"
    script.write_text(json.dumps([{"match": "", "reasoning": thought, "reply": "The answer is four."}]))
    url = simulator("--ttft-ms", "1", "--itl-ms", "1", "--script", str(script))
    workload = {"tokenizer": f"gguf:{gguf_path}", "input_tokens": {"dist": "fixed", "value": 16},
                "output_tokens": {"dist": "fixed", "value": 64}}
    _, passport, df = _run(write_spec, tmp_path, url, workload,
                           {"pattern": "closed", "concurrency": 2, "measure": {"requests": 6},
                            "warmup": {"requests": 0}}, decoding={"preset": "thinking", "ignore_eos": False})
    assert passport["protocol"]["request_params"] == {"temperature": 1.0, "top_p": 0.95, "top_k": 20,
                                                      "presence_penalty": 1.5}
    expected = len(load_tokenizer(f"gguf:{gguf_path}").tokenizer.encode(thought))
    assert (df.reasoning_text == thought).all() and (df.response_text == "The answer is four.").all()
    assert (df.reasoning_tokens_client == expected).all()
    reasoning = passport["results"]["lengths"]["reasoning_tokens"]
    assert reasoning["n"] == 6 and reasoning["p50"] == expected


def test_a_log_shorter_than_the_schedule_is_cycled_and_the_passport_says_so(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    workload = {"mix": [{"name": "log", "weight": 1, "workload": {"preset": "own-traffic"}},
                        {"name": "chat", "weight": 1, "workload": {"input_tokens": {"dist": "fixed", "value": 8}}}]}
    # 25/s, not faster: the answers' own spread (E2E 0.06-0.1 s) is then small beside the window, which
    # achieved_rate needs to judge the server kept up (at 100/s over half a second it did not hold)
    _, passport, df = _run(write_spec, tmp_path, url, workload,
                           {"pattern": "poisson", "rate_per_s": 25, "measure": {"requests": 70},
                            "warmup": {"requests": 0}})
    log = df[df["shape"] == "log"]
    assert len(df) == 70 and len(log) > 24 and (df.outcome == "ok").all()  # more draws than the log's 24 lines
    assert log.prompt_sha256.nunique() <= 24  # the same 24 lines, repeated in order
    (tmp_path / "out").rename(tmp_path / "mixed")
    _, plain, df = _run(write_spec, tmp_path, url, {"preset": "own-traffic"},
                        {"pattern": "poisson", "rate_per_s": 25, "measure": {"requests": 50},
                         "warmup": {"requests": 0}})
    assert len(df) == 50 and df.request_index.nunique() == 24 and df.request_index.max() == 23
    assert "cycle the 24 distinct requests" in plain["protocol"]["workload"]["note"]
