"""A campaign's advice, in the order a team makes an engine choice: does it fit, is it correct,
does it meet the SLO, then the objective with its intervals, then cost (and owning against
renting), then what differs operationally. When the arms tie on the objective the advice falls
to the next criterion (cost, then the launch with fewer moving parts) and says so; when that
ties too it says the choice is free on these figures. Pure words over the summaries, so verify
recomputes them."""

from __future__ import annotations

import shlex

from passport.judge._arms import ArmSummary
from passport.judge._ranking import Ranking, rank_by_repetitions
from passport.model import OBJECTIVES, CampaignSpec

__all__ = ["advice", "name_list"]


def name_list(names: list[str]) -> str:
    """a; a and b; a, b and c."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1] if names else "none"


def _value(v: float | None) -> str:
    return "—" if v is None else f"{v:.4g}"


def _with_interval(arm: ArmSummary) -> str:
    low, high = arm.interval["low"], arm.interval["high"]
    band = f" [{_value(low)}, {_value(high)}]" if low is not None and high is not None else " (no interval)"
    return f"{arm.name} {_value(arm.objective)}{band}"


def _fit(arms: list[ArmSummary]) -> str:
    said = []
    for arm in arms:
        if arm.fit is not None:
            said.append(f"{arm.name} {arm.fit['lines'][-1]}" + (" (never launched)" if not arm.fit["fits"] else ""))
        configured, realized = arm.kv_tokens["configured"], arm.kv_tokens["realized"]
        if configured and realized is not None and realized < configured:
            said.append(f"{arm.name} asks for {configured:,} KV tokens and realized {realized:,} "
                        f"({realized / configured:.0%})")
    return "Fit: " + ("; ".join(said) if said else "no arm declares its memory (arms[].capacity); every launch that "
                      "said its context realized what it asked for")


def _correct(arms: list[ArmSummary]) -> str:
    by_status: dict[str, list[str]] = {}
    for arm in arms:
        if arm.status not in ("does_not_fit", "failed", "held") and arm.canaries is not None:
            by_status.setdefault(arm.canaries, []).append(arm.name)
    said = []
    if "passed" in by_status:
        said.append(f"the canaries passed on {name_list(by_status.pop('passed'))}")
    if "not_run" in by_status:
        said.append(f"no canaries ran on {name_list(by_status.pop('not_run'))}: their answers are unchecked")
    said += [f"canaries {status.replace('_', ' ')} on {name_list(names)}" for status, names in by_status.items()]
    held = [a for a in arms if a.status == "held"]
    if held:
        said.append(f"held by the canaries, never ranked: {'; '.join(f'{a.name} ({a.reason})' for a in held)}")
    failed = [a for a in arms if a.status == "failed"]
    if failed:
        said.append(f"failed: {'; '.join(f'{a.name} ({a.reason})' for a in failed)}")
    return "Correct: " + ("; ".join(said) or "no arm was timed")


def _slo(campaign: CampaignSpec, arms: list[ArmSummary]) -> str:
    slo = campaign.run.get("slo") or {}
    if not slo:
        return "SLO: none declared"
    bounds = ", ".join(f"{k} <= {v}" for k, v in slo.items())
    timed = [a for a in arms if a.status not in ("held", "failed", "does_not_fit")
             and any(r["run"] for r in a.repetitions)]
    met = [a.name for a in timed if a.slo_met]
    missed = [f"{a.name} ({sum(1 for r in a.repetitions if r['slo_met'] is False)} of "
              f"{sum(1 for r in a.repetitions if r['run'])} repetitions)" for a in timed if a.slo_met is False]
    return (f"SLO ({bounds}): met in every repetition by {name_list(met)}"
            + (f"; missed by {', '.join(missed)}" if missed else ""))


def _objective(campaign: CampaignSpec, ranked: list[ArmSummary], ranking: Ranking) -> str:
    objective = campaign.objective
    if not ranked:
        return f"{objective}: no arm ranked"
    if ranking.best is not None:
        best = next(a for a in ranked if a.name == ranking.best)
        others = [a for a in ranked if a.name != best.name]
        return (f"{objective}: {best.name} is best, {_with_interval(best)} (95 %, {best.interval['n']} repetitions)"
                + (f", separated from {', '.join(_with_interval(a) for a in others)}" if others else "")
                + f" (Holm-corrected, at least {campaign.min_difference:.0%} apart)")
    tied = [a for a in ranked if a.name in ranking.tied_for_first]
    if any(a.interval["low"] is None for a in tied):
        return (f"{objective}: {', '.join(_with_interval(a) for a in tied)}: one repetition each, so no interval "
                "exists and no arm is named best (set repetitions: 3 or more)")
    rest = ranking.groups[1:]
    below = "; below them: " + "; ".join(", ".join(g) for g in rest) if rest else ""
    return (f"{objective}: {name_list([a.name for a in tied])} tie (no difference between them both survives "
            f"Holm at 5 % and reaches {campaign.min_difference:.0%}): {', '.join(_with_interval(a) for a in tied)}"
            f"{below}; choose on cost or simplicity")


def _cost_values(arm: ArmSummary) -> list[float]:
    found = [r["cost"].get("usd_per_million_tokens_at_goodput") or r["cost"].get("usd_per_million_tokens")
             for r in arm.repetitions if r.get("cost")]
    return [float(v) for v in found if v is not None]


def _moving_parts(campaign: CampaignSpec, names: list[str]) -> str:
    launches = {a.name: a.engine.launch for a in campaign.arms if a.engine is not None and a.name in names}
    if len(launches) < 2:
        return "the choice is free on these figures"
    counts = {n: len(shlex.split(cmd)) for n, cmd in launches.items()}
    fewest = min(counts.values())
    simplest = [n for n, c in counts.items() if c == fewest]
    if len(simplest) == len(counts):
        return f"their launches are equally long ({fewest} arguments): the choice is free on these figures"
    return (f"fewer moving parts: choose {name_list(simplest)} (a launch of {fewest} arguments, against "
            + ", ".join(f"{n} {c}" for n, c in counts.items() if n not in simplest) + ")")


def _cost(campaign: CampaignSpec, ranked: list[ArmSummary], ranking: Ranking, managed: list[str]) -> str:
    priced = {a.name: values for a in ranked if (values := _cost_values(a))}
    line = "Cost: " + ("no cost declared (cost: gpu_hour_usd or prices)" if not priced else
                       "USD per million tokens at goodput: " + ", ".join(
                           f"{n} {_value(sum(v) / len(v))}" for n, v in priced.items()))
    tied = ranking.tied_for_first if ranking.best is None and len(ranking.tied_for_first) > 1 else []
    if tied and not campaign.objective.startswith("cost"):
        among = {n: priced[n] for n in tied if n in priced}
        if len(among) == len(tied):
            by_cost = rank_by_repetitions(among, OBJECTIVES["cost.usd_per_million_tokens"], campaign.min_difference)
            if by_cost.best is not None:
                line += f"; the arms tie on the objective, so cost decides: {by_cost.best} is cheapest, separated"
            else:
                line += (f"; the arms tie on the objective and on cost too, so "
                         f"{_moving_parts(campaign, tied)}")
        else:
            line += f"; the arms tie on the objective and not all have a cost, so {_moving_parts(campaign, tied)}"
    if managed:
        line += "; against the managed endpoint: " + "; ".join(managed)
    return line


def _flags(launch: str) -> list[str]:
    """A launch command as its options: each flag with the value after it (`-np 2`)."""
    words, out = shlex.split(launch), list[str]()
    for word in words:
        if out and out[-1].startswith("-") and " " not in out[-1] and not word.startswith("-"):
            out[-1] += f" {word}"
        else:
            out.append(word)
    return out


def _operations(campaign: CampaignSpec) -> str:
    said = []
    attached = [a.name for a in campaign.arms if a.engine is None]
    launched = [a for a in campaign.arms if a.engine is not None]
    if launched:
        said.append("each engine launched once and kept up for every round" if campaign.relaunch == "once"
                    else "each engine launched afresh every round")
        reference = launched[0]
        for arm in launched[1:]:
            assert arm.engine is not None and reference.engine is not None
            program, theirs_program = arm.engine.program(), reference.engine.program()
            if program != theirs_program:  # another engine: its flags are its own, not changes to these
                said.append(f"{arm.name} runs another program (`{program}`) than {reference.name} "
                            f"(`{theirs_program}`)")
                continue
            mine, theirs = _flags(arm.engine.launch), _flags(reference.engine.launch)
            added = [t for t in mine if t not in theirs]
            removed = [t for t in theirs if t not in mine]
            change = "; ".join([*(f"adds `{t}`" for t in added), *(f"drops `{t}`" for t in removed)])
            said.append(f"{arm.name} {change or 'launches the same command'} against {reference.name}")
    if attached:
        said.append(f"{name_list(attached)} {'attaches' if len(attached) == 1 else 'attach'} to "
                    f"{'a server' if len(attached) == 1 else 'servers'} already running (launched by someone else)")
    return "Operations: " + "; ".join(said)


def advice(campaign: CampaignSpec, arms: list[ArmSummary], ranking: Ranking, managed: list[str]) -> list[str]:
    """The numbered lines of a campaign's advice (see the module docstring)."""
    ranked = [a for a in arms if a.status == "ranked"]
    lines = [_fit(arms), _correct(arms), _slo(campaign, arms), _objective(campaign, ranked, ranking),
             _cost(campaign, ranked, ranking, managed), _operations(campaign)]
    return [f"{i}. {line}" for i, line in enumerate(lines, 1)]
