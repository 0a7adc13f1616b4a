"""Accuracy alone and under load, whole runs against the simulated engine scripted with every
item's right answer: one that garbles answers while others stream is caught (items named, the
rule FAILs when declared to, gate and campaign hold it, compare calls it lower); one as often
wrong loaded as alone is not flagged (A/A), and two such runs compare as no difference."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from canaries import load_accuracy_set
from passport.judge._campaign import summarize_arm
from passport.model import ArmSpec, read_passport
from tests.accuracy_script import answer_script
from tests.conftest import LENIENT_CLIENT, SimFactory, only_run_dir, run_cli
from tests.faults import fault

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

WriteSpec = Callable[..., Path]
SETS = [{"set": "arithmetic", "items": 24, "difficulty": 2}, {"set": "recall", "items": 24}]


def _script(tmp_path: Path) -> Path:
    sets = [load_accuracy_set(s["set"], items=s["items"], difficulty=s.get("difficulty", 1)) for s in SETS]
    path = tmp_path / "answers.yaml"
    path.write_text(yaml.safe_dump(answer_script(*sets)))
    return path


def _spec(url: str, name: str, **accuracy: Any) -> dict[str, Any]:
    return {"name": name, "endpoint": {"base_url": url, "api": "chat"}, "canaries": "none",
            "workload": {"input_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 8}},
            "load": {"pattern": "closed", "concurrency": 6, "measure": {"requests": 240}},
            "validity": LENIENT_CLIENT, "accuracy": {"sets": SETS, "share": 0.2, **accuracy}}


def _arm(name: str) -> ArmSpec:
    return ArmSpec(name=name, endpoint={"base_url": "http://127.0.0.1:9/v1"})  # type: ignore[arg-type]


def _run(write_spec: WriteSpec, spec: dict[str, Any], out: Path) -> tuple[Any, Path]:
    result = run_cli("run", str(write_spec(spec, f"{spec['name']}.yaml")), "--out", str(out))
    folder = only_run_dir(out)
    return result, folder


@fault("a server that answers right alone and wrong under load (batching, KV quantization, preemption)",
       "rule `accuracy_drop` WARNs naming the items (FAIL with `accuracy.on_drop: fail`); gate "
       "`accuracy.<set>`, compare and campaign see it")
def test_answers_garbled_under_load_are_caught_and_every_judgment_sees_it(
        simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "1", "--script", str(_script(tmp_path)), "--garble-above", "4")
    result, folder = _run(write_spec, _spec(url, "garbled", on_drop="fail"), tmp_path / "garbled")
    assert result.returncode == 1, result.stderr
    passport = json.loads((folder / "passport.json").read_text())
    assert passport["verdict"] == "INVALID"
    rule = next(r for r in passport["validity"]["rules"] if r["name"] == "accuracy_drop")
    assert rule["status"] == "FAIL" and rule["measured"] == 2
    assert "right alone, wrong under load: arithmetic-0000" in rule["message"]
    table = pq.read_table(folder / "accuracy.parquet").to_pylist()
    loaded = [r for r in table if r["phase"] == "under_load"]
    for name in ("arithmetic", "recall"):
        figures = passport["results"]["accuracy"][name]
        assert figures["alone"]["accuracy"] == 1.0 and figures["alone"]["n"] == 24
        # the server's own word: it garbles a reply to "garbled garbled ..."; scored wrong exactly then
        mine = [r for r in loaded if r["set"] == name]
        garbled = [str(r["content"]).startswith("garbled") for r in mine]
        assert [not r["correct"] for r in mine] == garbled
        assert figures["under_load"]["n"] == len(mine)
        assert figures["under_load"]["accuracy"] == pytest.approx(garbled.count(False) / len(mine))
        # the load was there for most items (a client stalled on a busy machine lets the server's
        # streams end, and an item sent as it wakes can arrive first: 6 of 23 came back right in
        # one CI run, up to 6 of 23 here with the client stopped 100 ms of every 300 ms)
        assert figures["under_load"]["accuracy"] <= 0.5
        first: dict[str, bool] = {}  # each item's first loaded answer (by send time): garbled or not
        for row, was in sorted(zip(mine, garbled), key=lambda x: int(x[0]["sent_ns"])):
            first.setdefault(str(row["item_id"]), was)
        worse = sum(first.values())  # every item right alone: each garbled first answer is a pair worse
        assert figures["paired"]["p_value"] == pytest.approx(0.5 ** worse) and figures["rescored_differ"] == 0
    # one item per 1/share completions, at seeded positions; those the load ended before are not sent
    assert 0.8 * round(0.2 * 240) <= len(loaded) <= round(0.2 * 240)
    # wrong only where the load was: the simulator garbles while 4 others stream, counting the timed
    # requests (`in_flight`, at send) and the other items still streaming (up to four at the load's tail)
    def streaming_beside(row: dict[str, Any]) -> int:
        beside = [o for o in loaded if o is not row and o["sent_ns"] <= row["sent_ns"] < o["end_ns"]]
        return int(row["in_flight"]) + len(beside)
    wrong = [r for r in loaded if not r["correct"]]
    assert wrong and all(streaming_beside(r) >= 4 for r in wrong), [(r["in_flight"], streaming_beside(r))
                                                                     for r in wrong]
    assert "accuracy arithmetic: alone 1.000" in result.stdout
    verified = run_cli("verify", str(folder))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    exported = run_cli("export", str(folder), "--table", "accuracy", "--format", "jsonl")
    assert exported.returncode == 0 and len(exported.stdout.splitlines()) == len(table)
    gate = run_cli("gate", str(folder), "--require", "accuracy_alone.arithmetic >= 0.9",
                   "--require", "accuracy.arithmetic >= 0.9", "--require", "accuracy_drop.recall <= 0.02")
    assert gate.returncode == 1
    assert [line.split()[0] for line in gate.stdout.splitlines()[:3]] == ["PASS", "FAIL", "FAIL"]
    row = summarize_arm(_arm("garbled"), ".", read_passport(folder), None, "throughput.requests_per_s")
    assert row.status == "invalid" and row.accuracy is not None and row.accuracy["recall"]["alone"] == 1.0


def test_a_server_as_often_wrong_loaded_as_alone_is_not_flagged(
        simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path) -> None:
    """A/A: each reply garbled with chance 0.1, load or not: three runs, no WARN; compare calls no
    difference; the campaign holds an arm only below its declared min_accuracy."""
    script = str(_script(tmp_path))
    folders = []
    for seed in (1, 2, 3):
        url = simulator("--ttft-ms", "5", "--itl-ms", "1", "--script", script, "--wrong-rate", "0.1",
                        "--seed", str(seed))
        result, folder = _run(write_spec, _spec(url, f"aa{seed}"), tmp_path / f"aa{seed}")
        passport = json.loads((folder / "passport.json").read_text())
        rule = next(r for r in passport["validity"]["rules"] if r["name"] == "accuracy_drop")
        assert rule["status"] == "PASS", rule["message"]
        assert result.returncode == 0, result.stdout + result.stderr
        alone = passport["results"]["accuracy"]["arithmetic"]["alone"]
        assert 0.5 < alone["accuracy"] < 1.0  # the server really was wrong at times
        folders.append(folder)
    compared = run_cli("compare", str(folders[0]), str(folders[1]))
    assert compared.returncode == 0, compared.stdout
    lines = [line for line in compared.stdout.splitlines() if line.startswith(("arithmetic ", "recall "))]
    assert len(lines) == 2 and all(line.endswith("no difference") for line in lines), compared.stdout
    p = read_passport(folders[0])
    assert summarize_arm(_arm("a"), ".", p, None, "throughput.requests_per_s").status == "ranked"
    held = summarize_arm(_arm("a"), ".", p, None, "throughput.requests_per_s", min_accuracy=0.99)
    assert held.status == "held" and "below min_accuracy 0.99" in (held.reason or "")


def test_compare_calls_a_server_that_garbles_under_load_lower(
        simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path) -> None:
    script = str(_script(tmp_path))
    clean = simulator("--ttft-ms", "5", "--itl-ms", "1", "--script", script)
    garbled = simulator("--ttft-ms", "5", "--itl-ms", "1", "--script", script, "--garble-above", "4")
    _, a = _run(write_spec, _spec(clean, "clean"), tmp_path / "clean")
    result, b = _run(write_spec, _spec(garbled, "garbled"), tmp_path / "garbled")
    assert result.returncode == 0  # on_drop: warn (the default) leaves it VALID, with the WARN
    assert "WARN: accuracy_drop: 2 of 2 sets answered worse under load" in result.stdout
    compared = run_cli("compare", str(a), str(b), "--allow", "validity")
    lines = [line for line in compared.stdout.splitlines() if line.startswith(("arithmetic ", "recall "))]
    assert len(lines) == 2 and all(line.endswith("lower") for line in lines), compared.stdout
    row = summarize_arm(_arm("g"), ".", read_passport(b), None, "throughput.requests_per_s")
    assert row.status == "held" and row.reason is not None and row.reason.startswith("accuracy under load")


def test_a_bad_accuracy_set_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    bad = tmp_path / "set.jsonl"
    bad.write_text('{"question": "2 + 2?", "answer": "4"}\n')  # gsm8k layout without its #### line
    for value, words in ((f"[{bad}]", f"accuracy set {bad}, line 1: answer has no '#### N' line"),
                         ("[./missing.jsonl]", "accuracy set file ./missing.jsonl not found")):
        result = run_cli("run", "--endpoint", "http://127.0.0.1:9/v1", "--num-prompts", "5",
                         "--set", f"accuracy.sets={value}", "--out", str(tmp_path / "out"))
        assert result.returncode == 2, result.stderr
        assert words in result.stderr and "Traceback" not in result.stderr
        assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_campaign_holds_the_arm_that_answers_worse_under_load_and_shows_speed_against_accuracy(
        tmp_path: Path) -> None:
    script = _script(tmp_path)
    sim = f"{sys.executable} -m harness.simulator --host {{host}} --port {{port}} --ttft-ms 5 --itl-ms 1 " \
          f"--script {script}"
    run = _spec("http://unused", "c")
    del run["name"], run["endpoint"]
    run["endpoint"] = {"api": "chat"}
    spec = {"name": "accuracy-campaign", "objective": "throughput.requests_per_s", "repetitions": 1,
            "min_accuracy": 0.5, "run": run,
            "arms": [{"name": "steady", "engine": {"launch": sim}},
                     {"name": "garbles", "engine": {"launch": f"{sim} --garble-above 4"}}]}
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = run_cli("campaign", str(path), "--out", str(tmp_path / "out"), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    folder = only_run_dir(tmp_path / "out")
    rows = {r["name"]: r for r in json.loads((folder / "campaign.json").read_text())["arms"]}
    assert rows["steady"]["status"] == "ranked" and rows["steady"]["accuracy"]["recall"]["under_load"] == 1.0
    assert rows["garbles"]["status"] == "held" and rows["garbles"]["reason"].startswith("accuracy under load")
    assert rows["garbles"]["accuracy"]["arithmetic"]["alone"] == 1.0
    report = (folder / "report.md").read_text()
    assert "## Speed against accuracy" in report and "1.000 / 1.000 (drop 0.000)" in report
    assert run_cli("verify", str(folder)).returncode == 0
