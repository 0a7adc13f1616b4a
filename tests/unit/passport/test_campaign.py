"""Campaign specs, cost arithmetic and ranking against hand-computed figures."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import yaml

from passport._errors import SpecError
from passport.audit._cost import cost_figures
from passport.judge import ArmRow, resolve_campaign_name, summarize_arms, turns
from passport.judge._names import GateError
from passport.judge._ranking import interval_of, rank_by_repetitions
from passport.model import configured_kv_tokens, load_campaign, load_spec, parse_campaign
from passport.plan import monthly_cost

LAUNCH = "llama-server -m {model_path} --port {port} -c 4096 -np 2"
BASE: dict[str, Any] = {
    "name": "c",
    "run": {"load": {"pattern": "closed", "concurrency": 2, "measure": {"requests": 4}},
            "slo": {"ttft.any.p99": "2s"}},
    "arms": [{"name": "a", "engine": {"launch": LAUNCH}},
             {"name": "b", "endpoint": {"base_url": "http://127.0.0.1:9/v1"}}],
}


def _campaign(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return data


def test_each_arm_gets_the_run_section_and_only_its_own_system() -> None:
    campaign, specs = parse_campaign(_campaign(cost={"gpu_hour_usd": 2.0}))
    a, b = specs["a"], specs["b"]
    assert a.name == "c-a" and a.engine is not None and a.engine.launch == LAUNCH and a.endpoint.base_url is None
    assert b.engine is None and b.endpoint.base_url == "http://127.0.0.1:9/v1"
    assert a.load == b.load and a.workload == b.workload and a.decoding == b.decoding and a.slo == b.slo
    assert a.cost is not None and a.cost.gpu_hour_usd == 2.0 and b.cost == a.cost
    assert configured_kv_tokens(campaign.arms[0]) == 4096 and configured_kv_tokens(campaign.arms[1]) is None


def test_an_arm_of_another_precision_brings_its_own_canary_suite() -> None:
    data = _campaign(run={**BASE["run"], "canaries": "gemma3-270m"})
    data["arms"][1]["canaries"] = "gemma3-270m-bf16"
    _, specs = parse_campaign(data)
    assert (specs["a"].canaries, specs["b"].canaries) == ("gemma3-270m", "gemma3-270m-bf16")


@pytest.mark.parametrize(("change", "words"), [
    ({"arms": [{"name": "a", "engine": {"launch": LAUNCH}}, {"name": "a", "engine": {"launch": LAUNCH}}]},
     "two arms are named 'a' (arms 1 and 2)"),
    ({"arms": [{"name": "best", "engine": {"launch": LAUNCH}}]}, "which a gate reads as arms.best"),
    ({"arms": [{"name": "x", "engine": {"launch": LAUNCH}, "endpoint": {"base_url": "http://h:1/v1"}}]},
     "either launches (engine) or attaches"),
    ({"arms": [{"name": "x"}]}, "an arm needs engine.launch or endpoint.base_url"),
    ({"arms": [{"name": "x", "engine": {"launch": LAUNCH}, "flags": "-np 2"}]}, "arms.0.flags: unknown field"),
    ({"objective": "peak_tokens_per_s"}, "ranking by raw peak tokens/s is not offered"),
    ({"run": {"load": {"pattern": "closed", "concurrency": 1}}}, "declare run.slo"),
    ({"run": {**BASE["run"], "engine": {"launch": LAUNCH}}}, "each arm launches its own"),
    ({"run": {**BASE["run"], "load": {"pattern": "closed"}}}, "load.pattern: closed needs load.concurrency"),
    ({"objective": "cost.usd_per_million_tokens"}, "needs a cost for every arm"),
    ({"cost": {"gpu_hour_usd": 1.0, "input_usd_per_million": 0.45}}, "not both"),
    ({"managed": {"gpu_hour_usd": 1.0}}, "managed: needs input_usd_per_million"),
])
def test_a_bad_campaign_is_refused_with_what_to_change(change: dict[str, Any], words: str) -> None:
    with pytest.raises(SpecError, match=None) as caught:
        parse_campaign(_campaign(**change), "c.yaml")
    assert words in str(caught.value)


def _requests() -> pa.Table:
    # four measured successes: prompt 100/100/200/200, completion 10/10/30/30; two meet the SLO
    return pa.table({"prompt_tokens": [100.0, 100.0, 200.0, 200.0], "completion_tokens": [10.0, 10.0, 30.0, 30.0]})


def test_cost_owned_divides_the_windows_hourly_cost_by_each_token_class() -> None:
    ok = np.array([True, True, True, True])
    meets = np.array([True, True, False, False])
    windows: list[Any] = [{"duration_s": 1800.0}, {"duration_s": 1800.0}]  # one hour in all
    cost = cost_figures({"gpu_hour_usd": 3.0, "gpus": 2}, _requests(), ok, meets, windows)
    assert cost is not None and cost["basis"] == "owned" and cost["usd_per_hour"] == 6.0
    assert cost["usd_for_window"] == pytest.approx(6.0)
    # USD 6 over 600 input, 80 output, 680 tokens
    assert cost["throughput"]["usd_per_million_input_tokens"] == pytest.approx(6.0 / 600 * 1e6)
    assert cost["throughput"]["usd_per_million_output_tokens"] == pytest.approx(6.0 / 80 * 1e6)
    assert cost["throughput"]["usd_per_million_tokens"] == pytest.approx(6.0 / 680 * 1e6)
    # only the two requests meeting the SLO count at goodput: 200 input + 20 output
    assert cost["goodput"] is not None
    assert cost["goodput"]["usd_per_million_tokens"] == pytest.approx(6.0 / 220 * 1e6)


def test_cost_managed_charges_the_tokens_served_at_the_declared_prices() -> None:
    ok = np.array([True, True, True, False])  # the last request failed: not billed, not served
    cost = cost_figures({"input_usd_per_million": 0.45, "output_usd_per_million": 3.20}, _requests(), ok, None,
                        [{"duration_s": 10.0}])  # type: ignore[list-item]
    assert cost is not None and cost["basis"] == "managed" and cost["usd_per_hour"] is None
    usd = (400 * 0.45 + 50 * 3.20) / 1e6
    assert cost["usd_for_window"] == pytest.approx(usd)
    assert cost["throughput"]["usd_per_million_tokens"] == pytest.approx(usd / 450 * 1e6)
    assert cost["goodput"] is None and cost_figures(None, _requests(), ok, None, []) is None


def test_a_month_priced_managed_and_owned_with_its_break_even() -> None:
    month = monthly_cost(200.0, 40.0, 0.45, 3.20, 2.5, live_sequences=20, sequences_per_card=36)
    assert month.managed_usd == pytest.approx(200 * 0.45 + 40 * 3.20)  # 218
    assert month.cards == 1 and month.owned_usd == pytest.approx(2.5 * 730)
    assert month.break_even_million_tokens == pytest.approx(1825 / (218 / 240))
    # 100 live sequences need 3 replicas of 36; a volume beyond one replica's throughput adds more
    assert monthly_cost(1, 1, None, None, 1.0, gpus_per_replica=2, live_sequences=100, sequences_per_card=36).cards == 6
    busy = monthly_cost(3000.0, 0.0, None, None, 1.0, tokens_per_s_per_card=1000.0)  # 2,628 M per replica-month
    assert busy.cards == 2 and busy.managed_usd is None and busy.break_even_million_tokens is None


def _row(name: str, objective: float | None, status: str = "ranked", model: str = "m",
         varies: dict[str, str] | None = None, round_: int = 1, kind: str = "chat") -> ArmRow:
    invariants: dict[str, Any] = {"model": model, "precision": {"kv": "f16"}, "workload": "w"}
    if kind != "chat":
        invariants["endpoint"] = kind
    return ArmRow(name=name, varies=varies or {}, status=status, objective=objective, invariants=invariants,
                  round=round_)


def _arms(*names: str, **extra: Any) -> Any:
    campaign, _ = parse_campaign(_campaign(arms=[{"name": n, "endpoint": {"base_url": "http://127.0.0.1:9/v1"}}
                                                 for n in names], **extra))
    return campaign


def _reps(name: str, values: list[float | None], **kw: Any) -> list[ArmRow]:
    return [_row(name, v, round_=i + 1, **kw) for i, v in enumerate(values)]


def test_arms_are_summarized_over_their_rounds_and_only_whole_valid_arms_are_ranked() -> None:
    campaign = _arms("slow", "fast", "stopped", "other", "declared")
    rows = [*_reps("slow", [1.0, 1.1, 0.9]), *_reps("fast", [3.0, 3.1, 2.9]), _row("stopped", None, status="held"),
            *_reps("other", [9.0, 9.0, 9.0], model="m2"),
            *_reps("declared", [2.0, 2.05, 1.95], model="m3", varies={"model": "a distill"})]
    rows[4].status, rows[4].reason = "invalid", "client_not_bound: busy"  # fast's round 2
    arms, rankings = summarize_arms(rows, campaign)
    (ranking,) = rankings.values()
    by_name = {a.name: a for a in arms}
    assert by_name["fast"].status == "invalid" and by_name["fast"].reason == "round 2: client_not_bound: busy"
    assert by_name["stopped"].rank is None and by_name["other"].status == "not_comparable"
    assert "model differs from arm slow's" in str(by_name["other"].reason)
    # declared 2.0 +- 0.05 against slow 1.0 +- 0.1 over three rounds: Welch's t = 1.0 / sqrt(0.05^2/3 + 0.1^2/3)
    # = 15.5 on 2.9 df, p ~ 0.0007, and 50 % apart: separated, so declared is best and ranks alone
    assert ranking.groups == [["declared"], ["slow"]] and ranking.best == "declared"
    assert by_name["declared"].rank == 1 and by_name["slow"].rank == 2 and by_name["slow"].tied_with == []
    assert by_name["slow"].interval["n"] == 3 and by_name["slow"].objective == pytest.approx(1.0)


def test_the_interval_is_students_t_over_the_repetitions() -> None:
    found = interval_of([1.0, 2.0, 3.0])  # mean 2, sd 1, t(0.975, 2) = 4.3027: 2 +- 4.3027 / sqrt(3)
    assert found.mean == 2.0 and found.sd == pytest.approx(1.0)
    assert (found.low, found.high) == (pytest.approx(2 - 2.48416, abs=1e-4), pytest.approx(2 + 2.48416, abs=1e-4))
    single = interval_of([5.0])
    assert single.low is None and single.high is None and single.sd is None


def test_ties_overlaps_and_one_repetition_name_no_best_arm() -> None:
    # twins: 1 % apart within a spread of 1 %: t = 1 / sqrt(1/3 + 1/3) = 1.22, p = 0.29: a tie
    twins = rank_by_repetitions({"a": [100.0, 101.0, 99.0], "b": [101.0, 102.0, 100.0]}, True, 0.05)
    assert twins.best is None and twins.tied_for_first == ["b", "a"] and twins.ranks == {"a": 1, "b": 1}
    assert twins.pairs[0].why.startswith("tied: Holm-adjusted p 0.2")
    # 2 % apart within a spread of 0.1 %: certain, and too small to act on: a tie all the same
    close = rank_by_repetitions({"a": [100.0, 100.1, 99.9], "b": [102.0, 102.1, 101.9]}, True, 0.05)
    assert close.best is None and close.pairs[0].significant and not close.pairs[0].separated
    assert close.pairs[0].why == "tied: the difference (2.0%) is under min_difference 5%"
    # a chain: top ~ mid and mid ~ low (spread too wide to tell), top far from low
    chain = rank_by_repetitions({"top": [10.0, 10.2, 9.8], "mid": [8.0, 10.0, 6.0], "low": [5.0, 5.1, 4.9]},
                                True, 0.05)
    assert chain.ranks == {"top": 1, "mid": 1, "low": 2} and chain.groups == [["top", "mid"], ["low"]]
    assert chain.tied_with == {"top": ["mid"], "mid": ["top", "low"], "low": ["mid"]} and chain.best is None
    # one repetition each: no interval, no test, no best, however far apart
    once = rank_by_repetitions({"a": [1.0], "b": [100.0]}, True, 0.05)
    assert once.best is None and once.pairs[0].p is None and once.tied_for_first == ["b", "a"]
    # lower is better for cost
    cost = rank_by_repetitions({"cheap": [0.20, 0.21, 0.19], "dear": [0.90, 0.92, 0.88]}, False, 0.05)
    assert cost.best == "cheap" and cost.ranks == {"cheap": 1, "dear": 2}


def test_rounds_rotate_the_arms_order() -> None:
    campaign = _arms("a", "b", "c", repetitions=3)
    assert [(r, arm.name) for r, arm in turns(campaign)] == [
        (1, "a"), (1, "b"), (1, "c"), (2, "b"), (2, "c"), (2, "a"), (3, "c"), (3, "a"), (3, "b")]


def test_a_gate_on_the_best_arm_of_a_tie_fails_saying_which_arms_tie() -> None:
    from passport.judge import campaign_record, evaluate_campaign_gate, parse_condition
    from passport.judge._campaign import Progress

    campaign = _arms("a", "b")
    record = campaign_record(campaign, "campaign.yaml", "0" * 64,
                             [*_reps("a", [10.0, 10.1, 9.9]), *_reps("b", [10.05, 10.0, 9.95])], "t", Progress())
    assert record["best"] is None and record["tied_for_first"] == ["a", "b"]
    conditions = [parse_condition("arms.best.goodput.requests_per_s > 1", resolve_campaign_name),
                  parse_condition("arms.a.goodput.requests_per_s > 1", resolve_campaign_name)]
    best, named = evaluate_campaign_gate(record, conditions)
    assert not best.passed and best.message.startswith("no best arm: a and b tie for first")
    assert named.passed is False  # the row's goodput figure comes from passports this record has none of
    assert "4. goodput.requests_per_s: a and b tie" in record["advice"][3]


def test_arms_of_several_endpoint_kinds_are_ranked_each_kind_apart() -> None:
    """A RAG pipeline's campaign: two embedders, a reranker and two generators. Requests per second
    of an embedder (thousands) and of a generator (tens) say nothing of each other, so no arm is
    ranked against another kind's, none is not-comparable for another kind's model or workload,
    and no single best arm is named; two embedders whose repetitions overlap (A/A) tie."""
    from passport.judge import campaign_record, evaluate_campaign_gate, parse_condition
    from passport.judge._campaign import Progress

    campaign = _arms("emb-a", "emb-b", "rerank", "gen-fast", "gen-slow")
    rows = [*_reps("emb-a", [900.0, 910.0, 890.0], model="bge", kind="embeddings"),
            *_reps("emb-b", [905.0, 895.0, 900.0], model="bge", kind="embeddings"),
            *_reps("rerank", [300.0, 310.0, 290.0], model="reranker", kind="rerank"),
            *_reps("gen-fast", [20.0, 20.2, 19.8], model="llm"), *_reps("gen-slow", [10.0, 10.1, 9.9], model="llm")]
    arms, rankings = summarize_arms(rows, campaign)
    assert set(rankings) == {"embeddings", "rerank", "chat"}
    by_name = {a.name: a for a in arms}
    assert all(a.status == "ranked" for a in arms), [(a.name, a.reason) for a in arms]
    assert (by_name["emb-a"].rank, by_name["emb-b"].rank) == (1, 1) and rankings["embeddings"].best is None
    assert by_name["emb-a"].tied_with == ["emb-b"]  # never a generator, whatever its figure
    assert by_name["rerank"].rank == 1 and rankings["rerank"].best == "rerank"  # the only reranker, as a lone arm is
    assert (by_name["gen-fast"].rank, by_name["gen-slow"].rank) == (1, 2) and rankings["chat"].best == "gen-fast"
    record = campaign_record(campaign, "campaign.yaml", "0" * 64, rows, "t", Progress())
    assert record["best"] is None and record["tied_for_first"] == []
    assert record["by_kind"]["chat"]["best"] == "gen-fast"
    assert record["by_kind"]["embeddings"]["tied_for_first"] == ["emb-a", "emb-b"]
    assert all({p["a"], p["b"]} <= {"emb-a", "emb-b"} or {p["a"], p["b"]} <= {"gen-fast", "gen-slow"}
               for p in record["comparisons"])
    assert any(line.startswith("chat: 4. goodput.requests_per_s: gen-fast is best") for line in record["advice"])
    (best,) = evaluate_campaign_gate(record, [parse_condition("arms.best.goodput.requests_per_s > 1",
                                                              resolve_campaign_name)])
    assert not best.passed and "each ranked apart (best per kind: embeddings: none (emb-a and emb-b tie); " \
        "rerank: rerank; chat: gen-fast)" in best.message


def test_campaign_gate_names_resolve_or_say_what_exists() -> None:
    assert resolve_campaign_name("arms.held").path == ("arms", "held")
    target = resolve_campaign_name("arms.best.goodput.requests_per_s")
    assert target.path == ("arms", "best", "goodput", "requests_per_s") and target.kind == "number"
    assert resolve_campaign_name("arms.np2.ttft.p99").kind == "latency"
    with pytest.raises(GateError, match="did you mean 'arms.best.goodput.requests_per_s'"):
        resolve_campaign_name("arms.best.goodput.request_per_s")


def test_a_campaign_given_to_run_says_which_command_runs_it(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(BASE))
    with pytest.raises(SpecError, match=r"is a campaign spec .* run it with `passport campaign"):
        load_spec(path)
    campaign, specs, raw = load_campaign(path)
    assert raw == BASE and list(specs) == ["a", "b"] and campaign.objective == "goodput.requests_per_s"


def test_the_pairwise_tests_and_intervals_agree_with_scipy() -> None:
    from scipy import stats

    rng = np.random.default_rng(3)
    values = {name: list(rng.normal(mean, 0.08 * mean, 4)) for name, mean in (("a", 10.0), ("b", 11.0), ("c", 14.0))}
    ranking = rank_by_repetitions(values, True, 0.05)
    raw = {(p.a, p.b): stats.ttest_ind(values[p.a], values[p.b], equal_var=False).pvalue for p in ranking.pairs}
    ordered = sorted(raw.values())
    for pair in ranking.pairs:  # Holm by hand: the i-th smallest p times (m - i), kept monotone
        assert pair.p == pytest.approx(raw[pair.a, pair.b], rel=1e-6)
        i = ordered.index(raw[pair.a, pair.b])
        expected = max(min(1.0, (len(ordered) - j) * ordered[j]) for j in range(i + 1))
        assert pair.p_holm == pytest.approx(expected, rel=1e-6)
    found = interval_of(values["c"])
    mean, half = np.mean(values["c"]), stats.t.ppf(0.975, 3) * np.std(values["c"], ddof=1) / 2.0
    assert (found.low, found.high) == (pytest.approx(mean - half), pytest.approx(mean + half))


def test_operations_name_flag_changes_within_one_engine_and_another_program_as_such() -> None:
    from passport.judge._advice import _operations

    data = _campaign(arms=[
        {"name": "np1", "engine": {"launch": "llama-server -m {model_path} --port {port} -np 1"}},
        {"name": "np2", "engine": {"launch": "llama-server -m {model_path} --port {port} -np 2"}},
        {"name": "v", "engine": {"launch": "env OMP_NUM_THREADS=1 vllm serve {model_path} --port {port}"}}])
    campaign, _ = parse_campaign(data)
    line = _operations(campaign)
    assert "np2 adds `-np 2`; drops `-np 1` against np1" in line
    assert "v runs another program (`vllm`) than np1 (`llama-server`)" in line and "OMP_NUM_THREADS" not in line
