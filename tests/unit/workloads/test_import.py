"""Reading request logs: OpenAI JSONL and ShareGPT, streamed, with line-numbered errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workloads import ImportSpec, WorkloadError, WorkloadSpec, load_tokenizer, materialize, read_records


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_openai_lines_keep_messages_tools_format_budget_time_and_session(tmp_path: Path) -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    log = _jsonl(tmp_path / "log.jsonl", [
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}],
         "max_tokens": 7, "tools": [tool], "tool_choice": "auto", "timestamp": 100.5, "session_id": "s1",
         "temperature": 1.3},
        {"prompt": "Once upon", "response_format": {"type": "json_object"}, "timestamp": "2026-11-29T10:00:00Z"},
    ])
    first, second = list(read_records(ImportSpec(path=str(log))))
    assert first.text == "Be brief.\nHi there" and first.max_tokens == 7 and first.timestamp_s == 100.5
    assert first.body == {"messages": [{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": "Hi there"}], "tools": [tool], "tool_choice": "auto"}
    assert "temperature" not in first.body  # sampling comes from the spec's declared policy
    assert first.session_id == "s1"
    assert second.body == {"prompt": "Once upon", "response_format": {"type": "json_object"}}
    assert second.timestamp_s == 1795946400.0


def test_an_unreadable_line_names_the_file_and_line(tmp_path: Path) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_text('{"prompt": "ok"}\n\n{"prompt": "fine"}\n{"prompt": \n')
    with pytest.raises(WorkloadError, match=r"bad.jsonl:4: not valid JSON"):
        list(read_records(ImportSpec(path=str(log))))
    log.write_text('{"prompt": "ok"}\n{"messages": []}\n')
    with pytest.raises(WorkloadError, match=r"bad.jsonl:2: a request needs `messages`"):
        list(read_records(ImportSpec(path=str(log))))
    log.write_text('{"prompt": "ok", "max_tokens": 0}\n')
    with pytest.raises(WorkloadError, match=r"bad.jsonl:1: max_tokens must be a positive integer"):
        list(read_records(ImportSpec(path=str(log))))


def test_sharegpt_takes_the_first_human_turn_and_budgets_the_first_answer(tmp_path: Path) -> None:
    data = [{"id": "a", "conversations": [{"from": "human", "value": "What is two plus two?"},
                                          {"from": "gpt", "value": "It is four, as always."}]},
            {"id": "b", "conversations": [{"from": "human", "value": "No answer here"}]},
            {"id": "c", "conversations": [{"from": "human", "value": "Name a colour"},
                                          {"from": "gpt", "value": "Blue"}]}]
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(data))
    spec = WorkloadSpec(tokenizer="none", source=ImportSpec(path=str(path), format="sharegpt"))
    table = materialize(spec, None, load_tokenizer("none"), seed=0).table.to_pydict()
    assert table["prompt"] == ["What is two plus two?", "Name a colour"]  # b has no answer: skipped
    assert table["output_tokens_target"] == [5, 1]  # words of the answers under the `none` tokenizer
    assert table["input_tokens_target"] == [5, 3] and table["session_id"] == ["a", "c"]


def test_limit_and_a_budget_drawn_when_the_log_has_none(tmp_path: Path) -> None:
    log = _jsonl(tmp_path / "log.jsonl", [{"prompt": f"p {i}"} for i in range(10)])
    spec = WorkloadSpec(tokenizer="none", source=ImportSpec(path=str(log), limit=4),
                        output_tokens={"dist": "fixed", "value": 9})
    request_set = materialize(spec, None, load_tokenizer("none"), seed=0)
    assert len(request_set) == 4 and request_set.table.column("output_tokens_target").to_pylist() == [9] * 4
    again = materialize(spec, None, load_tokenizer("none"), seed=0)
    assert again.sha256 == request_set.sha256


def test_shared_prefixes_form_groups_and_targets_include_the_prefix() -> None:
    spec = WorkloadSpec(tokenizer="none", input_tokens={"dist": "fixed", "value": 6},
                        output_tokens={"dist": "fixed", "value": 4},
                        shared_prefix={"groups": 3, "prefix_tokens": 20})
    first = materialize(spec, 30, load_tokenizer("none"), seed=4)
    table = first.table.to_pydict()
    prefixes = {p.split("\n\n")[0] for p in table["prompt"]}
    assert len(prefixes) == 3 and all(len(p.split()) == 20 for p in prefixes)
    assert set(table["prefix_group"]) == {0, 1, 2}
    by_group = {g: p.split("\n\n")[0] for g, p in zip(table["prefix_group"], table["prompt"])}
    assert all(p.startswith(by_group[g]) for g, p in zip(table["prefix_group"], table["prompt"]))
    assert table["input_tokens_target"] == [26] * 30 and len({p.split("\n\n")[1] for p in table["prompt"]}) == 30
    assert materialize(spec, 30, load_tokenizer("none"), seed=4).sha256 == first.sha256
    plain = WorkloadSpec(tokenizer="none", input_tokens={"dist": "fixed", "value": 6},
                         output_tokens={"dist": "fixed", "value": 4})
    # adding the prefix stream leaves a plain workload's prompts as they were
    assert materialize(plain, 30, load_tokenizer("none"), seed=4).table.column("prompt").to_pylist() == [
        p.split("\n\n")[1] for p in table["prompt"]]
