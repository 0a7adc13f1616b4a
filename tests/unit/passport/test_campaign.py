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
from passport.judge import ArmRow, monthly_cost, rank_arms, resolve_campaign_name
from passport.judge._names import GateError
from passport.model import configured_kv_tokens, load_campaign, load_spec, parse_campaign

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
         varies: dict[str, str] | None = None) -> ArmRow:
    return ArmRow(name=name, varies=varies or {}, status=status, objective=objective,
                  invariants={"model": model, "precision": {"kv": "f16"}, "workload": "w"})


def test_ranking_by_the_objective_leaves_out_held_and_undeclared_differences() -> None:
    rows = [_row("slow", 1.0), _row("fast", 3.0), _row("held", None, status="held"),
            _row("other", 9.0, model="m2"), _row("declared", 2.0, model="m3", varies={"model": "a distill"})]
    rank_arms(rows, "goodput.requests_per_s")
    by_name = {r.name: r for r in rows}
    assert [by_name[n].rank for n in ("fast", "declared", "slow")] == [1, 2, 3]
    assert by_name["held"].rank is None and by_name["other"].rank is None
    assert by_name["other"].status == "not_comparable"
    assert "model differs from arm slow's" in str(by_name["other"].reason)
    rows = [_row("cheap", 0.2), _row("dear", 0.9)]
    rank_arms(rows, "cost.usd_per_million_tokens")  # lower is better
    assert [r.rank for r in rows] == [1, 2]


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
