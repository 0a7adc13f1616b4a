"""Every canary kind passes against a simulated engine scripted to answer right, and fails (with
the right category, expected and actual) against one scripted to answer wrong; a failing suite
holds a run before any timed request."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import SimFactory, only_run_dir, run_cli
from tests.integration.test_faults import _spec

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

WriteSpec = Callable[..., Path]
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
SUITE = {"suite": "every-kind", "version": 1, "cases": [
    {"id": "exact", "kind": "exact", "api": "chat", "prompt": "Capital of France?", "max_tokens": 16,
     "expect": {"text": "Paris is the capital."}},
    {"id": "json", "kind": "json", "api": "chat", "prompt": "Describe Ada as JSON.", "schema": PERSON,
     "max_tokens": 32},
    {"id": "tool", "kind": "tool", "api": "chat", "prompt": "What is the weather in Paris?", "tools": [WEATHER],
     "tool_choice": "auto", "max_tokens": 32, "expect": {"name": "get_weather"}},
    {"id": "recall", "kind": "multi_turn", "api": "chat",
     "turns": ["My name is Ada.", "What is 2 + 2?", "What is my name?"], "expect": {"contains": "Ada"}},
    {"id": "coding", "kind": "coding", "api": "chat", "prompt": "Write add(a, b) in Python.",
     "tests": "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n", "max_tokens": 64},
    {"id": "needle", "kind": "long_context", "api": "chat", "context_tokens": 400, "max_tokens": 16,
     "needles": [{"depth": 0.3, "text": "The secret code is 4471.", "expect": "4471"}],
     "question": "What is the secret code?"},
    {"id": "accounting", "kind": "accounting", "api": "chat", "prompt": "Tell me a long story.", "max_tokens": 8},
]}
RIGHT: list[dict[str, Any]] = [
    {"match": "Capital of France", "reply": "Paris is the capital."},
    {"match": "Describe Ada", "reply": '{"name": "Ada", "age": 36}'},
    {"match": "weather in Paris", "tool_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
    {"match": "My name is", "reply": "Nice to meet you."},
    {"match": "2 + 2", "reply": "4"},
    {"match": "What is my name", "recall": "My name is (\\w+)", "reply": "Your name is {0}."},
    {"match": "Write add", "reply": "```python\ndef add(a, b):\n    return a + b\n```"},
    {"match": "secret code?", "recall": "secret code is (\\d+)", "reply": "The code is {0}."},
]
WRONG: list[dict[str, Any]] = [
    {"match": "Capital of France", "reply": "Lyon is the capital."},
    {"match": "Describe Ada", "reply": '{"name": "Ada", "age": "old"}'},
    {"match": "weather in Paris", "content": "<tool_call>", "tool_call": {"name": "get_weather",
                                                                          "arguments": '{"town": 3'}},
    {"match": "My name is", "reply": "Nice to meet you."},
    {"match": "2 + 2", "reply": "4"},
    {"match": "What is my name", "recall": "My name is (\\w+)", "reply": "Your name is {0}."},
    {"match": "Write add", "reply": "```python\ndef add(a, b):\n    return open('/etc/hostname').read()\n```"},
    {"match": "secret code?", "reply": "I do not know."},
]
EXPECTED_FAILURES = {"exact": "wrong_answer", "json": "schema_failure", "tool": "tool_failure",
                     "recall": "wrong_answer", "coding": "wrong_answer", "needle": "wrong_answer",
                     "accounting": "wrong_answer"}


def _files(tmp_path: Path, script: list[dict[str, Any]]) -> tuple[Path, Path]:
    suite, script_path = tmp_path / "suite.yaml", tmp_path / f"script-{len(script)}-{id(script)}.yaml"
    suite.write_text(yaml.safe_dump(SUITE))
    script_path.write_text(yaml.safe_dump(script))
    return suite, script_path


@pytest.mark.sandbox  # the coding case runs the answer under bubblewrap
def test_every_kind_passes_against_right_answers(simulator: SimFactory, tmp_path: Path) -> None:
    suite, script = _files(tmp_path, RIGHT)
    url = simulator("--ttft-ms", "2", "--itl-ms", "1", "--script", str(script))
    result = run_cli("canary", "--endpoint", url, "--suite", str(suite), "--junit", str(tmp_path / "j.xml"),
                     "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line.split()[:2] for line in result.stdout.splitlines()[:7]] == [["PASS", c["id"]] for c in SUITE["cases"]]
    assert 'failures="0"' in (tmp_path / "j.xml").read_text()


@pytest.mark.sandbox  # the coding case runs the answer under bubblewrap
def test_every_kind_fails_against_wrong_answers_with_its_category(simulator: SimFactory, tmp_path: Path) -> None:
    suite, script = _files(tmp_path, WRONG)
    url = simulator("--ttft-ms", "2", "--itl-ms", "1", "--script", str(script), "--forget-history", "--no-usage")
    result = run_cli("canary", "--endpoint", url, "--suite", str(suite), "--junit", str(tmp_path / "j.xml"),
                     "--out", str(tmp_path / "out"))
    assert result.returncode == 1
    table = pq.read_table(next((tmp_path / "out").iterdir()) / "canaries.parquet").to_pandas().set_index("case_id")
    assert (table.verdict == "fail").all()
    assert table.category.to_dict() == EXPECTED_FAILURES
    assert "Lyon is the capital." == table.loc["exact", "actual"]
    assert "'old' is not of type 'integer'" in table.loc["json", "reason"]
    assert "special tokens leaked" in table.loc["tool", "reason"]
    assert table.loc["recall", "actual"] == "I do not know."
    # /etc is not in the sandbox at all
    assert table.loc["coding", "reason"] == "sandbox: FileNotFoundError: [Errno 2] No such file or directory: " \
        "'/etc/hostname'"
    assert "no usage was reported" in table.loc["accounting", "reason"]
    assert len(json.loads(table.loc["recall", "requests"])) == 3  # each turn carried the real answers so far
    assert 'failures="7"' in (tmp_path / "j.xml").read_text()


def test_malformed_tool_arguments_and_invalid_json_are_caught(simulator: SimFactory, tmp_path: Path) -> None:
    script = [{"match": "weather in Paris", "tool_call": {"name": "get_weather", "arguments": '{"city": "Par'}},
              {"match": "Describe Ada", "reply": '{"name": "Ada", "age": '}]
    suite, script_path = _files(tmp_path, script)
    url = simulator("--ttft-ms", "2", "--itl-ms", "1", "--script", str(script_path))
    run_cli("canary", "--endpoint", url, "--suite", str(suite), "--out", str(tmp_path / "out"))
    table = pq.read_table(next((tmp_path / "out").iterdir()) / "canaries.parquet").to_pandas().set_index("case_id")
    assert "arguments are not JSON" in table.loc["tool", "reason"]
    assert table.loc["json", "category"] == "schema_failure" and "output is not JSON" in table.loc["json", "reason"]


@pytest.mark.parametrize("force", [False, True])
def test_a_failing_suite_holds_the_run_before_any_timed_request(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path, force: bool
) -> None:
    suite, script = _files(tmp_path, WRONG)
    url = simulator("--ttft-ms", "2", "--itl-ms", "1", "--script", str(script))
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": 10}},
                            canaries=str(suite)))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet", *(["--force"] if force else []))
    assert result.returncode == 1, result.stderr
    run = only_run_dir(tmp_path / "out")
    assert (run / "passport.json").is_file(), result.stdout + result.stderr
    passport = json.loads((run / "passport.json").read_text())
    canaries = passport["validity"]["canaries"]
    assert canaries["status"] == "failed" and canaries["n_failed"] == 5 and canaries["forced"] is force
    exact = next(f for f in canaries["failures"] if f["case_id"] == "exact")
    assert exact["expected"] == "Paris is the capital." and exact["actual"] == "Lyon is the capital."
    counts = passport["validity"]["counts"]
    # recall and accounting pass here (the history is kept and usage is sent); the canaries' schema
    # and tool failures are counted apart from the workload's, which checked no answer (schema 1.3)
    assert (counts["canary_schema_failures"], counts["canary_tool_failures"], counts["wrong_answers"]) == (1, 1, 3)
    assert (counts["schema_failures"], counts["tool_failures"]) == (None, None)
    rows = pq.read_table(run / "requests.parquet").num_rows
    if force:
        assert passport["verdict"] == "INVALID" and rows == 10
        assert "**Forced:**" in (run / "report.md").read_text()
    else:
        assert passport["verdict"] == "HOLD" and "Result is: HOLD" in result.stdout
        assert rows == 0  # nothing was timed
        # and nothing was sampled: said so, not blamed on an engine nobody launched
        assert passport["results"]["peak_memory"]["reason"] == "nothing was sampled: the run had no timed phase"
    assert passport["files"]["canaries.parquet"]["rows"] == 7
    declared_suite = passport["protocol"]["canary_suite"]
    assert declared_suite["suite"] == "every-kind" and [c["id"] for c in declared_suite["cases"]] == [
        c["id"] for c in SUITE["cases"]] and declared_suite["sha256"] == canaries["suite_sha256"]
    assert run_cli("verify", str(run)).returncode == 0


def test_record_mode_pins_a_trusted_endpoints_output(simulator: SimFactory, tmp_path: Path) -> None:
    suite = tmp_path / "plain.yaml"
    suite.write_text(yaml.safe_dump({"suite": "plain", "cases": [
        {"id": "greedy", "kind": "exact", "api": "completions", "prompt": "Count:", "max_tokens": 5}]}))
    trusted = simulator("--ttft-ms", "2", "--itl-ms", "1")
    recorded = tmp_path / "recorded.yaml"
    result = run_cli("canary", "--endpoint", trusted, "--api", "completions", "--suite", str(suite),
                     "--record", str(recorded), "--out", str(tmp_path / "a"))
    # recording, the case without a reference is what is being recorded: no failure, printed once
    assert result.returncode == 0 and "REC   greedy" in result.stdout and "FAIL" not in result.stdout
    assert "Recorded 1 exact-output references" in result.stdout and "REC" not in result.stderr
    assert yaml.safe_load(recorded.read_text())["cases"][0]["expect"] == {"text": "tok0 tok1 tok2 tok3 tok4 "}
    assert run_cli("canary", "--endpoint", trusted, "--api", "completions", "--suite", str(recorded),
                   "--out", str(tmp_path / "b")).returncode == 0
    changed = simulator("--ttft-ms", "2", "--itl-ms", "1", "--script", str(_files(tmp_path, WRONG)[1]),
                        "--eos-after-tokens", "3")
    result = run_cli("canary", "--endpoint", changed, "--api", "completions", "--suite", str(recorded),
                     "--out", str(tmp_path / "c"))
    assert result.returncode == 1 and "output differs from the reference at character 15" in result.stdout


@pytest.mark.parametrize("discard", [False, True])
def test_canaries_sampled_under_load_catch_an_engine_that_degrades_when_busy(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path, discard: bool
) -> None:
    # the pre-timing gate sends one case at a time: the engine is idle and answers right; during
    # the run four users keep it busy, and it garbles every scripted answer
    suite, script = _files(tmp_path, RIGHT)
    url = simulator("--ttft-ms", "2", "--itl-ms", "1", "--script", str(script), "--garble-above", "2")
    extra: dict[str, Any] = {"canaries": str(suite), "canary_share": 0.1}
    if discard:
        extra["discard"] = ["canary_failed"]
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 4, "measure": {"requests": 120}}, **extra))
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"), "--quiet")
    run = only_run_dir(tmp_path / "out")
    passport = json.loads((run / "passport.json").read_text())
    canaries = passport["validity"]["canaries"]
    assert canaries["status"] == "passed"  # the gate
    under = canaries["under_load"]
    assert under["share"] == 0.1 and under["n_cases"] >= 5 and under["n_failed"] >= 1
    table = pq.read_table(run / "canaries.parquet").to_pandas()
    assert set(table.phase) == {"gate", "under_load"} and (table[table.phase == "gate"].verdict == "pass").all()
    assert "garbled" in " ".join(table[table.verdict == "fail"].actual)
    rule = next(r for r in passport["validity"]["rules"] if r["name"] == "canaries_under_load")
    assert rule["status"] == "FAIL" and result.returncode == 1 and passport["verdict"] == "INVALID"
    if discard:  # the one repetition is discarded by the pre-registered rule: nothing is left to count
        (gone,) = passport["results"]["discard"]["discarded"]
        assert gone["rule"] == "canary_failed" and passport["validity"]["counts"]["measured"] == 0
    assert run_cli("verify", str(run)).returncode == 0


def test_accounting_checks_reasoning_is_kept_apart_from_content(simulator: SimFactory, tmp_path: Path) -> None:
    suite = tmp_path / "reasoning.yaml"
    suite.write_text(yaml.safe_dump({"suite": "reasoning", "cases": [
        {"id": "separate", "kind": "accounting", "api": "chat", "prompt": "Think, then answer: 2 + 2?",
         "max_tokens": 32, "expect": {"reasoning": "separate"}}]}))
    parsed = [{"match": "2 + 2", "reasoning": "Two and two make four.", "reply": "4"}]
    inline = [{"match": "2 + 2", "reply": "<think>Two and two make four.</think> 4"}]
    results = {}
    for name, script in (("parsed", parsed), ("inline", inline)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(script))
        url = simulator("--ttft-ms", "1", "--itl-ms", "1", "--script", str(path))
        results[name] = run_cli("canary", "--endpoint", url, "--suite", str(suite), "--out", str(tmp_path / name))
    assert results["parsed"].returncode == 0, results["parsed"].stdout
    assert results["inline"].returncode == 1 and "reasoning was not separated" in results["inline"].stdout


INSTRUCT_RIGHT: list[dict[str, Any]] = [
    {"match": "planet Mars", "reply": '{"name": "Mars", "moons": 2}'},
    {"match": "weather in Paris", "tool_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
    {"match": "My name is Ada", "reply": "Nice to meet you, Ada."},
    {"match": "12 plus 30", "reply": "42"},
    {"match": "favourite colour?", "recall": "favourite colour is (\\w+)", "reply": "{0}."},
    {"match": "17 multiplied by 23", "reply": "The answer is 391."},
    {"match": "is_palindrome", "reply": "```python\ndef is_palindrome(s):\n    t = s.replace(' ', '').lower()\n"
                                        "    return t == t[::-1]\n```"},
    {"match": "passphrase for the vault?", "recall": "passphrase for the vault is ([\\w-]+)", "reply": "{0}"},
]
# a broken launch: fluent, and wrong in every way a template or quantization breaks a model
INSTRUCT_WRONG: list[dict[str, Any]] = [
    {"match": "planet Mars", "reply": "Mars is the fourth planet. {name: Mars}"},
    {"match": "weather in Paris", "reply": "<tool_call>get_weather(Paris)</tool_call>"},
    {"match": "favourite colour?", "reply": "I do not know your favourite colour."},
    {"match": "17 multiplied by 23", "reply": "17 multiplied by 23 is 381"},
    {"match": "is_palindrome", "reply": "```python\ndef is_palindrome(s):\n    return s == s[::-1]\n```"},
    {"match": "passphrase for the vault?", "reply": "The vault has no passphrase."},
]


@pytest.mark.parametrize("answers, code, failing", [
    (INSTRUCT_RIGHT, 0, set()),
    (INSTRUCT_WRONG, 1, {"json-schema", "tool-call", "multi-turn-recall", "arithmetic", "coding", "needle"}),
    (None, 1, {"json-schema", "tool-call", "multi-turn-recall", "arithmetic", "coding", "needle"}),
], ids=["right", "broken-launch", "nonsense"])
def test_the_bundled_instruct_suite_passes_a_competent_model_and_fails_a_broken_one(
    simulator: SimFactory, tmp_path: Path, answers: list[dict[str, Any]] | None, code: int, failing: set[str]
) -> None:
    args = ["--ttft-ms", "1", "--itl-ms", "1"]
    if answers is not None:
        script = tmp_path / "script.yaml"
        script.write_text(yaml.safe_dump(answers))
        args += ["--script", str(script)]
    else:  # the simulator's own nonsense ("tok0 tok1 ..."), response formats and tools ignored
        args += ["--ignore-formats"]
    url = simulator(*args)
    result = run_cli("canary", "--endpoint", url, "--suite", "instruct", "--out", str(tmp_path / "out"))
    assert result.returncode == code, result.stdout + result.stderr
    verdicts = {line.split()[1]: line.split()[0] for line in result.stdout.splitlines()
                if line.startswith(("PASS", "FAIL"))}
    assert len(verdicts) == 7 and {case for case, v in verdicts.items() if v == "FAIL"} == failing
