"""Reading a campaign: one row per repetition from its passport, one summary per arm over its
repetitions, the invariants across arms, the ranking by the declared objective with intervals
(`passport.judge._ranking`), the advice in the order a team decides (`passport.judge._advice`),
and the managed-vs-owned line.

A repetition's status says why it can or cannot be ranked, first match wins:
- `failed`: no passport (the engine did not start, the run raised); `reason` says what;
- `does_not_fit`: the capacity arithmetic said the workload does not fit; never launched;
- `held`: the canaries failed (HOLD); nothing was timed, so nothing to rank; or its accuracy
  under load fails it: the run's accuracy_drop rule warned, or a set's accuracy under load is
  below the campaign's `min_accuracy`;
- `incomplete` / `invalid`: the run stopped early, or a validity rule failed;
- `not_comparable`: its model or precision differs from the reference arm's (the first arm
  with a passport) and the arm did not declare it `varies` (the broken invariant is listed);
- `no_value`: VALID, but the objective has no value (e.g. no cost declared);
- `ranked`: VALID, comparable, with a value.
An arm takes the status of its first repetition (by round) that is not `ranked`, and is ranked
only when every repetition it ran is; ranks start at 1 and are shared by arms that cannot be
told apart (rank groups). Ranking never uses raw peak tokens/s: the objectives are sustained rates over the window,
goodput under the SLO by default, or cost per million tokens. The record is a pure function of
the arms' passports (and the campaign spec), so `passport verify` recomputes all of it.
"""

from __future__ import annotations

import copy
import difflib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from passport._errors import PassportError, RunFolderError
from passport.audit import (
    OpenRun,
    Trust,
    canonical_json,
    content_sha256,
    diff_values,
    open_run,
    read_passport_json,
    sha256_bytes,
)
from passport.judge._advice import advice, name_list
from passport.judge._arms import ArmRow, ArmSummary, Fit
from passport.judge._compare import endpoint_kind, invariant_values
from passport.judge._names import GateError, Kind, Target
from passport.judge._ranking import ALPHA, Ranking, interval_of, rank_by_repetitions
from passport.model import (
    ARM_COUNTS,
    INVARIANT_VARIES,
    OBJECTIVES,
    ArmSpec,
    CampaignSpec,
    Passport,
    configured_kv_tokens,
)
from passport.plan import Architecture, Budget, KiB, MiB, compute

__all__ = ["CAMPAIGN_VERSION", "CAMPAIGN_FILE", "SWEEP_FILE", "campaign_record", "read_campaign", "recompute_campaign",
           "gate_view", "judged_at_knee", "resolve_campaign_name", "ArmRow", "ArmSummary", "Fit", "Progress",
           "check_fit", "summarize_arm", "summarize_arms", "failed_arm", "arm_counts", "managed_lines", "ROW_PATHS",
           "recorded_rows", "spec_digest", "turns", "evaluate_campaign_gate", "no_best_reason",
           "trusted_campaign", "TrustedCampaign"]

# 2: repetitions in rotating rounds, an interval per arm, pairwise comparisons, rank groups, best
# only when separated, the advice.
CAMPAIGN_VERSION = 2
# The invariants compared across arms (campaign version 1 on): compare's first six. Its cache-state
# and validity invariants are not among them: each arm is judged VALID on its own before it is
# ranked, and campaign.json records these six, so a record verifies as it was written.
CAMPAIGN_INVARIANTS = ("model", "precision", "decoding", "workload", "load", "window")
CAMPAIGN_FILE = "campaign.json"
SWEEP_FILE = "sweep.json"  # written by passport.run.run_sweep
# Paths into a row a gate may read (`arms.best.<path>`, `arms.<name>.<path>`) -> kind.
ROW_PATHS: dict[str, str] = {
    "name": "text", "status": "text", "verdict": "text", "canaries": "text", "rank": "number", "objective": "number",
    "throughput.requests_per_s": "number", "throughput.output_tokens_per_s": "number",
    "goodput.requests_per_s": "number", "goodput.output_tokens_per_s": "number",
    "ttft.p50": "latency", "ttft.p99": "latency", "e2e.p50": "latency", "e2e.p99": "latency",
    "slo_met": "bool", "peak_memory_bytes": "number",
    "kv_tokens.configured": "number", "kv_tokens.realized": "number", "context_per_sequence": "number",
    "cost.usd_per_million_tokens": "number", "cost.usd_per_million_output_tokens": "number",
    "cost.usd_per_million_tokens_at_goodput": "number",
    "interval.low": "number", "interval.high": "number", "repetitions_run": "number",
}


def check_fit(arm: ArmSpec, concurrency: int | None) -> Fit | None:
    """Does the arm's declared memory hold its weights and the KV cache its sequences need?
    None when the arm declares no capacity section."""
    c = arm.capacity
    if c is None:
        return None
    needed = c.sequences or concurrency or 1
    budget = Budget.in_gib(c.weights, c.kv_dtype, c.gpu_memory_gib, c.utilization, c.reserve_gib, c.activations_gib,
                           c.kv_pool_gib)
    arch = Architecture(n_params=c.params, full_attention_layers=0) if c.params else None
    try:
        report = compute(arch, budget, c.context_tokens, c.kv_kib_per_token * KiB, c.state_mib_per_sequence * MiB)
    except ValueError as exc:  # nothing left for the KV cache: the weights alone do not fit
        return Fit(False, 0, needed, [str(exc)])
    fit = report.sequences_with_state
    verdict = (f"fits: {fit} live sequences of {c.context_tokens:,} tokens, {needed} needed" if fit >= needed
               else f"does not fit: {fit} live sequences of {c.context_tokens:,} tokens, {needed} needed")
    return Fit(fit >= needed, fit, needed, [*report.lines, verdict])


def failed_arm(arm: ArmSpec, status: str, reason: str, fit: Fit | None = None) -> ArmRow:
    """The row of an arm without a passport (failed to start, raised, or did not fit)."""
    return ArmRow(name=arm.name, varies=dict(arm.varies), status=status, reason=reason,
                  fit=None if fit is None else {"fits": fit.fits, "sequences_fit": fit.sequences_fit,
                                                "sequences_needed": fit.sequences_needed, "lines": fit.lines},
                  kv_tokens={"configured": configured_kv_tokens(arm), "realized": None})


def _identity_int(p: Passport, key: str) -> int | None:
    found = p.identity.get(key)
    return found.value if found is not None and isinstance(found.value, int) else None


def _accuracy(p: Passport) -> dict[str, dict[str, float | None]] | None:
    sets = p.results.get("accuracy")
    if not sets:
        return None
    return {name: {"alone": None if s["alone"] is None else s["alone"]["accuracy"],
                   "under_load": None if s["under_load"] is None else s["under_load"]["accuracy"],
                   "drop": None if s["paired"] is None else s["paired"]["drop"]} for name, s in sets.items()}


def _accuracy_hold(p: Passport, accuracy: dict[str, dict[str, float | None]] | None,
                   min_accuracy: float | None) -> str | None:
    """Why an arm's answers under load hold it from the ranking: the accuracy_drop rule warned,
    or a set's accuracy under load is below the campaign's min_accuracy; None when neither."""
    drop = next((r for r in p.validity.rules if r["name"] == "accuracy_drop" and r["status"] in ("WARN", "FAIL")),
                None)
    if drop is not None:
        return f"accuracy under load: {drop['message']}"
    if min_accuracy is None or accuracy is None:
        return None
    low = [f"{name} {'no value' if a['under_load'] is None else format(a['under_load'], '.3f')}"
           for name, a in accuracy.items() if a["under_load"] is None or a["under_load"] < min_accuracy]
    return f"accuracy under load below min_accuracy {min_accuracy:g}: {', '.join(low)}" if low else None


def summarize_arm(arm: ArmSpec, run: str, p: Passport, fit: Fit | None, objective: str,
                  min_accuracy: float | None = None) -> ArmRow:
    """An arm's row from its passport (status before the cross-arm invariants are compared)."""
    row = failed_arm(arm, "ranked", "", fit)
    row.reason, row.run, row.passport_sha256, row.verdict = None, run, p.content_sha256, p.verdict
    row.canaries = p.validity.canaries["status"]
    row.kv_tokens["realized"] = _identity_int(p, "capacity.kv_tokens")
    row.context_per_sequence = _identity_int(p, "capacity.context_per_sequence")
    row.throughput = {k: p.figure(f"throughput.{k}", "mean") for k in ("requests_per_s", "output_tokens_per_s")}
    row.goodput = {k: p.figure(f"goodput.{k}", "mean") for k in ("requests_per_s", "output_tokens_per_s")}
    row.ttft = {k: p.figure("ttft.any", k) for k in ("p50", "p99")}
    row.e2e = {k: p.figure("e2e", k) for k in ("p50", "p99")}
    slo = p.results.get("slo")
    row.slo_met = None if slo is None else slo["met"]
    row.peak_memory_bytes = p.results["peak_memory"]["value_bytes"]
    cost = p.results.get("cost")
    if cost is not None:
        row.cost = {"basis": cost["basis"], "usd_per_million_tokens": cost["throughput"]["usd_per_million_tokens"],
                    "usd_per_million_output_tokens": cost["throughput"]["usd_per_million_output_tokens"],
                    "usd_per_million_tokens_at_goodput":
                        None if cost["goodput"] is None else cost["goodput"]["usd_per_million_tokens"],
                    "input_tokens": cost["input_tokens"], "output_tokens": cost["output_tokens"]}
    discard = p.results.get("discard")
    if discard is not None:
        row.discarded = [f"repetition {d['repetition']} by {d['rule']!r} ({d['message']})"
                         for d in discard["discarded"]]
    row.accuracy = _accuracy(p)
    row.invariants = {k: v for k, v in invariant_values(p).items() if k in CAMPAIGN_INVARIANTS}
    if endpoint_kind(p) != "chat":  # listed only past the default, so a chat campaign's record reads as before
        row.invariants["endpoint"] = endpoint_kind(p)
    head, _, rest = objective.partition(".")
    source = {"goodput": row.goodput, "throughput": row.throughput}.get(head, row.cost or {})
    row.objective = source.get(rest)
    if p.verdict == "HOLD":
        row.status, row.reason = "held", f"canaries failed: {p.validity.canaries.get('reason')}"
    elif p.verdict in ("INCOMPLETE", "SATURATED"):  # a saturated arm stopped itself: its figures are the queue's
        row.status, row.reason = "incomplete", p.validity.incomplete_reason
    elif p.verdict == "INVALID":
        failed = [f"{r['name']}: {r['message']}" for r in p.validity.rules if r["status"] == "FAIL"]
        row.status, row.reason = "invalid", "; ".join(failed)
    elif (held := _accuracy_hold(p, row.accuracy, min_accuracy)) is not None:
        row.status, row.reason = "held", held
    elif row.objective is None:
        row.status, row.reason = "no_value", f"the passport has no value for {objective}"
    return row


def judged_at_knee(row: ArmRow, sweep: dict[str, Any]) -> ArmRow:
    """A sweep arm's row (summarized at its knee level, else its lowest): without a knee no level
    met the SLO, and the arm is not ranked."""
    if sweep.get("knee") is None and row.status == "ranked":
        row.status = "invalid"
        row.reason = f"no knee: {sweep.get('knee_note')}; shown at its lowest level"
    return row


# Sweep arms are judged at their own knees, so their load levels (and, with fresh prompts, the
# levels' prompts) differ by design; the other invariants still hold.
_SWEEP_EXEMPT = ("load", "workload")


def _compare_invariants(rows: list[ArmRow], mode: str) -> None:
    """Mark rows whose model or precision (or anything else) differs from the reference arm's,
    undeclared."""
    measured = [r for r in rows if r.invariants]
    if not measured:
        return
    reference = measured[0]
    for row in measured[1:]:
        for name, value in row.invariants.items():
            if value == reference.invariants.get(name) or (mode == "sweep" and name in _SWEEP_EXEMPT):
                continue
            if name in INVARIANT_VARIES and name in row.varies:
                continue
            row.broken.append(f"{name} differs from arm {reference.name}'s: {value!r} against "
                              f"{reference.invariants.get(name)!r}"
                              + (f" (declare varies.{name} if intended)" if name in INVARIANT_VARIES else ""))
        if row.broken and row.status in ("ranked", "no_value"):
            row.status, row.reason = "not_comparable", "; ".join(row.broken)


def _mean(values: list[Any]) -> float | None:
    found = [float(v) for v in values if v is not None]
    return sum(found) / len(found) if found else None


def _means(dicts: list[dict[str, Any]]) -> dict[str, float | None]:
    keys = list(dict.fromkeys(k for d in dicts for k in d))
    return {k: _mean([d.get(k) for d in dicts]) for k in keys}


def _summary(reps: list[ArmRow]) -> ArmSummary:
    """An arm's summary from its repetition rows (in round order)."""
    first = reps[0]
    bad = next((r for r in reps if r.status != "ranked"), None)
    status = first.status if bad is None else bad.status
    reason = None if bad is None else (bad.reason if len(reps) == 1 else f"round {bad.round}: {bad.reason}")
    timed = [r for r in reps if r.run is not None]
    costs = [r.cost for r in timed if r.cost is not None]
    cost = None if not costs else {"basis": costs[0]["basis"], **{
        k: _mean([c.get(k) for c in costs]) for k in costs[0] if k != "basis"}}
    verdicts = [r.verdict for r in timed]
    canaries = [r.canaries for r in timed]
    values = [r.objective for r in reps if r.objective is not None]
    interval = interval_of(values) if values and bad is None else None
    return ArmSummary(
        name=first.name, varies=first.varies, status=status, reason=reason, fit=first.fit,
        kv_tokens={"configured": first.kv_tokens["configured"],
                   "realized": next((r.kv_tokens["realized"] for r in timed if r.kv_tokens["realized"] is not None),
                                    None)},
        context_per_sequence=next((r.context_per_sequence for r in timed if r.context_per_sequence is not None), None),
        repetitions_run=len(timed), run=timed[0].run if timed else None,
        verdict=None if not verdicts else next((v for v in verdicts if v != "VALID"), verdicts[0]),
        canaries=None if not canaries else next((c for c in canaries if c != "passed"), canaries[0]),
        throughput=_means([r.throughput for r in timed]), goodput=_means([r.goodput for r in timed]),
        ttft=_means([r.ttft for r in timed]), e2e=_means([r.e2e for r in timed]),
        slo_met=None if not timed or any(r.slo_met is None for r in timed) else all(r.slo_met for r in timed),
        peak_memory_bytes=max((r.peak_memory_bytes for r in timed if r.peak_memory_bytes is not None), default=None),
        cost=cost, discarded=[f"round {r.round}: {d}" for r in timed for d in r.discarded],
        broken=list(dict.fromkeys(b for r in reps for b in r.broken)),
        objective=None if interval is None else interval.mean,
        interval={"low": None if interval is None else interval.low,
                  "high": None if interval is None else interval.high,
                  "sd": None if interval is None else interval.sd, "n": len(values) if bad is None else 0},
        repetitions=[asdict(r) for r in reps], accuracy=_accuracy_means([r.accuracy for r in timed]))


Accuracy = dict[str, dict[str, float | None]]  # by set: alone, under_load, drop


def _accuracy_means(per_rep: list[Accuracy | None]) -> Accuracy | None:
    found = [a for a in per_rep if a]
    if not found:
        return None
    names = list(dict.fromkeys(n for a in found for n in a))
    return {n: _means([a[n] for a in found if n in a]) for n in names}


def _kind(row: ArmRow | ArmSummary) -> str:
    """An arm's endpoint kind (chat unless its invariants list another)."""
    invariants = row.invariants if isinstance(row, ArmRow) else (row.repetitions[0].get("invariants") or {})
    return str(invariants.get("endpoint", "chat"))


def summarize_arms(rows: list[ArmRow], campaign: CampaignSpec) -> tuple[list[ArmSummary], dict[str, Ranking]]:
    """Compare every repetition's invariants with its kind's reference (the first arm of its
    endpoint kind, first timed repetition), summarize each arm over its repetitions and rank the
    arms of each endpoint kind apart (an embedder is never ranked against a generator); on
    copies: `rows` stay as summarized. Returns the arms and each kind's ranking."""
    order = {a.name: i for i, a in enumerate(campaign.arms)}
    reps = sorted(copy.deepcopy(rows), key=lambda r: (order.get(r.name, len(order)), r.round))
    for kind in dict.fromkeys(_kind(r) for r in reps):
        _compare_invariants([r for r in reps if _kind(r) == kind], campaign.mode)
    by_arm: dict[str, list[ArmRow]] = {}
    for row in reps:
        by_arm.setdefault(row.name, []).append(row)
    arms = [_summary(group) for group in by_arm.values()]
    ranked = [a for a in arms if a.status == "ranked"]
    rankings: dict[str, Ranking] = {}
    for kind in dict.fromkeys(_kind(a) for a in ranked) or ["chat"]:
        values = {a.name: [float(r["objective"]) for r in a.repetitions] for a in ranked if _kind(a) == kind}
        rankings[kind] = rank_by_repetitions(values, OBJECTIVES[campaign.objective], campaign.min_difference)
        for arm in ranked:
            if arm.name in values:
                arm.rank, arm.tied_with = rankings[kind].ranks[arm.name], rankings[kind].tied_with[arm.name]
    return arms, rankings


def arm_counts(rows: list[ArmSummary]) -> dict[str, int]:
    """How many arms ended each way (gate names `arms.<count>`)."""
    counts = {name: 0 for name in ARM_COUNTS}
    counts["total"] = len(rows)
    for row in rows:
        counts[row.status] += 1
    return counts


def managed_lines(rows: list[ArmSummary], managed: dict[str, float] | None) -> list[str]:
    """Each owned arm's cost per million tokens (the mean over its repetitions) against the managed
    prices at the same input:output mix, and the share of the time the card must be busy for
    owning to be cheaper."""
    if not managed:
        return []
    lines = []
    for row in rows:
        if row.cost is None or row.cost["basis"] != "owned" or row.cost["usd_per_million_tokens"] is None:
            continue
        owned = float(row.cost["usd_per_million_tokens"])
        inp, out = int(row.cost["input_tokens"]), int(row.cost["output_tokens"])
        price = (managed["input_usd_per_million"] * inp + managed["output_usd_per_million"] * out) / (inp + out)
        busy = owned / price if price else None
        verdict = (f"owning is cheaper while the card is kept at least {busy:.0%} as busy as in this run"
                   if busy is not None and busy <= 1 else
                   "the managed endpoint is cheaper at this workload even with the card always this busy")
        lines.append(f"{row.name}: USD {owned:.4g} per million tokens owned at the measured throughput against "
                     f"USD {price:.4g} managed at this workload's mix ({inp:,} input : {out:,} output tokens); "
                     f"{verdict}")
    return lines


@dataclass(frozen=True)
class Progress:
    """Where a campaign stands: interrupted or not, the (arm, round) turns not run, and when it
    was resumed."""

    interrupted: bool = False
    not_run: list[str] = field(default_factory=list)
    resumed_utc: list[str] = field(default_factory=list)


def campaign_record(campaign: CampaignSpec, spec_file: str, spec_sha256: str, rows: list[ArmRow], created_utc: str,
                    progress: Progress) -> dict[str, Any]:
    """campaign.json: the arms summarized and ranked, the pairwise comparisons, the groups, the
    best arm (or the arms tied for first), the advice, the counts and the managed-vs-owned lines,
    sealed by a content hash."""
    arms, rankings = summarize_arms(rows, campaign)
    managed = None if campaign.managed is None else campaign.managed.model_dump(mode="json", exclude_unset=True)
    lines = managed_lines(arms, managed)
    (ranking,) = rankings.values() if len(rankings) == 1 else (None,)
    data: dict[str, Any] = {
        "campaign_version": CAMPAIGN_VERSION, "name": campaign.name, "created_utc": created_utc,
        "objective": campaign.objective, "mode": campaign.mode, "slo": dict(campaign.run.get("slo") or {}),
        "spec_file": spec_file, "spec_sha256": spec_sha256, "repetitions": campaign.repetitions,
        "relaunch": campaign.relaunch, "min_difference": campaign.min_difference, "alpha": ALPHA,
        "arms": [asdict(a) for a in arms], "counts": arm_counts(arms),
        "comparisons": [asdict(p) for r in rankings.values() for p in r.pairs],
        "groups": [g for r in rankings.values() for g in r.groups],
        "best": None if ranking is None else ranking.best,
        "tied_for_first": [] if ranking is None else ranking.tied_for_first,
        "advice": advice(campaign, arms, ranking, lines) if ranking is not None else [
            f"{kind}: {line}" for kind, r in rankings.items()
            for line in advice(campaign, [a for a in arms if _kind(a) == kind], r, lines)],
        "managed": managed, "managed_lines": lines, "interrupted": progress.interrupted,
        "not_run": progress.not_run, "resumed_utc": progress.resumed_utc,
    }
    if ranking is None:  # arms of several endpoint kinds: each kind's own best, never one across kinds
        data["by_kind"] = {kind: {"best": r.best, "tied_for_first": r.tied_for_first, "groups": r.groups}
                           for kind, r in rankings.items()}
    data = json.loads(json.dumps(data))  # plain JSON values, as read back
    data["content_sha256"] = content_sha256(data)
    return data


def turns(campaign: CampaignSpec) -> list[tuple[int, ArmSpec]]:
    """(round, arm) in the order a campaign runs them: round r (1-based) starts r - 1 arms further
    along the declared order, so every arm takes every place in a round as often as the rounds
    allow."""
    k = len(campaign.arms)
    return [(r + 1, campaign.arms[(r + i) % k]) for r in range(campaign.repetitions) for i in range(k)]


def read_campaign(folder: Path) -> dict[str, Any]:
    """campaign.json of a campaign folder, read within the passport's size cap; RunFolderError
    when there is none or it is not a record of this version."""
    from passport._input import read_bounded
    from passport.audit._verify import MAX_PASSPORT_BYTES

    path = Path(folder) / CAMPAIGN_FILE
    try:
        data = json.loads(read_bounded(path, "campaign record", MAX_PASSPORT_BYTES))
    except (OSError, ValueError) as exc:
        raise RunFolderError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("campaign_version") != CAMPAIGN_VERSION:
        found = data.get("campaign_version") if isinstance(data, dict) else None
        raise RunFolderError(f"{path} is not a campaign record this passport reads (campaign_version "
                             f"{CAMPAIGN_VERSION}; it holds {found!r}: a campaign of version 1 ran one repetition "
                             "per arm and ranks nothing this version can re-derive; run it again)")
    return data


@dataclass(frozen=True)
class TrustedCampaign:
    """A campaign folder gate, show and compare act on: its record, and each repetition's run
    opened through the door (by its path in the folder, as the record names it)."""

    folder: Path
    record: dict[str, Any]
    runs: dict[str, OpenRun]


def trusted_campaign(folder: Path, trust: Trust) -> TrustedCampaign:
    """campaign.json once `recompute_campaign` finds nothing to report, with every repetition's run
    through the door under `trust` (its hash, signature and key, each file it lists): what gate,
    show and compare act on. UntrustedRunError (exit 2) naming what it found otherwise."""
    from passport._errors import UntrustedRunError

    folder = Path(folder)
    record = read_campaign(folder)
    try:
        problems = recompute_campaign(folder, record)
    except (OSError, ValueError, KeyError, TypeError, PassportError) as exc:
        problems = [f"{type(exc).__name__}: {exc}"]
    runs: dict[str, OpenRun] = {}
    if not problems:
        for arm in record["arms"]:
            for rep in arm["repetitions"]:
                if rep["run"] is None:
                    continue
                try:
                    runs[rep["run"]] = open_run(folder / rep["run"], trust)
                except RunFolderError as exc:
                    problems.append(f"arm {arm['name']} round {rep['round']}: {exc}")
    if problems:
        raise UntrustedRunError(f"{folder}: not a campaign to act on: {'; '.join(problems[:5])}"
                                + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
                                + f"; `passport verify {folder}` lists every check")
    return TrustedCampaign(folder, record, runs)


def spec_digest(raw: dict[str, Any]) -> str:
    """The sha256 of a campaign spec as written (its canonical JSON): a resumed campaign must be
    given the same one."""
    return sha256_bytes(canonical_json(raw))


def recorded_rows(folder: Path, recorded: dict[str, Any], campaign: CampaignSpec,
                  specs: dict[str, Any]) -> tuple[list[ArmRow], list[str]]:
    """Every repetition campaign.json records, re-summarized from its passport (whose content
    hash must be the one recorded; a failed or unfitting repetition keeps its recorded reason),
    and the differences found on the way."""
    folder = Path(folder)
    arms = {a.name: a for a in campaign.arms}
    rows, problems = [], []
    for summary in recorded["arms"]:
        arm = arms.get(summary["name"])
        if arm is None:
            problems.append(f"arm {summary['name']!r} is in {CAMPAIGN_FILE} but not in {recorded['spec_file']}")
            continue
        fit = check_fit(arm, specs[arm.name].load.concurrency)
        for old in summary["repetitions"]:
            if old["run"] is None:
                row = failed_arm(arm, old["status"], old["reason"], fit)  # nothing to recompute but the fit
            else:
                # unsealed: an edited arm passport is a difference to report, not a reason to stop
                raw = read_passport_json(folder / old["run"])
                passport = Passport.model_validate(raw)
                if raw.get("content_sha256") != old["passport_sha256"] or \
                        content_sha256(raw) != old["passport_sha256"]:
                    problems.append(f"arm {arm.name} round {old['round']}: {old['run']}/passport.json is not the "
                                    "passport the campaign recorded (its content hash differs: it was edited or "
                                    "replaced)")
                row = summarize_arm(arm, old["run"], passport, fit, campaign.objective, campaign.min_accuracy)
                if campaign.mode == "sweep":  # arms/<sweep>/levels/<level>: the sweep's record two folders up
                    row = judged_at_knee(row, json.loads((folder / old["run"]).parent.parent.joinpath(
                        SWEEP_FILE).read_text()))
            row.round = int(old["round"])
            rows.append(row)
    return rows, problems


def recompute_campaign(folder: Path, recorded: dict[str, Any]) -> list[str]:
    """Differences between campaign.json (`recorded`, as read_campaign read it) and what its spec
    and its arms' passports give: every repetition re-summarized from its passport, the capacity
    arithmetic, the intervals, comparisons, groups, best arm and advice redone; the spec's hash;
    and the record's own content hash."""
    from passport.model import load_campaign

    folder = Path(folder)
    problems = []
    if recorded.get("content_sha256") != content_sha256(recorded):
        problems.append(f"{CAMPAIGN_FILE}: content_sha256 differs (the record was edited after it was written)")
    campaign, specs, raw_spec = load_campaign(folder / recorded["spec_file"])
    rows, found = recorded_rows(folder, recorded, campaign, specs)
    problems += found
    fresh = campaign_record(campaign, recorded["spec_file"], spec_digest(raw_spec), rows, recorded["created_utc"],
                            Progress(recorded["interrupted"], recorded["not_run"], recorded["resumed_utc"]))
    fresh.pop("content_sha256")
    mine = {k: v for k, v in recorded.items() if k != "content_sha256"}
    problems += diff_values(mine, fresh, "campaign")
    return problems


def gate_view(record: dict[str, Any]) -> dict[str, Any]:
    """campaign.json as the gate reads it: `arms.<count>`, `arms.best.<row path>` (absent when no
    arm was ranked) and `arms.<name>.<row path>`."""
    arms: dict[str, Any] = dict(record["counts"])
    rows = {row["name"]: row for row in record["arms"]}
    arms.update(rows)
    if record["best"] is not None:
        arms["best"] = rows[record["best"]]
    return {"arms": arms}


def no_best_reason(record: dict[str, Any]) -> str:
    """Why a campaign names no best arm, in words."""
    tied = record.get("tied_for_first") or []
    if record.get("by_kind"):
        each = "; ".join(f"{kind}: {v['best'] or 'none (' + name_list(v['tied_for_first']) + ' tie)'}"
                         for kind, v in record["by_kind"].items())
        return (f"no single best arm: the arms serve {len(record['by_kind'])} endpoint kinds, each ranked apart "
                f"(best per kind: {each}); gate on arms.<name> instead")
    if not tied:
        return "no arm was ranked, so there is no best arm"
    if record.get("repetitions", 1) < 2 or any(a["interval"]["low"] is None for a in record["arms"]
                                               if a["name"] in tied):
        return (f"no best arm: {name_list(tied)} ran one repetition each, so no interval exists and none is "
                "separated (set repetitions: 3)")
    return f"no best arm: {name_list(tied)} tie for first on {record['objective']} (not separated; see comparisons)"


def evaluate_campaign_gate(record: dict[str, Any], conditions: list[Any]) -> list[Any]:
    """The gate over a campaign: as over a passport (`gate_view`), except that a condition on
    `arms.best.*` with no best arm fails saying which arms tie."""
    from passport.judge._gate import ConditionResult, evaluate_gate

    results = evaluate_gate(gate_view(record), conditions)
    if record["best"] is not None:
        return results
    return [ConditionResult(r.condition, False, None, no_best_reason(record))
            if r.condition.target.path[:2] == ("arms", "best") else r for r in results]


def resolve_campaign_name(name: str) -> Target:
    """The target of a gate name on a campaign; GateError with the closest names when unknown."""
    parts = name.split(".")
    if parts[0] == "arms" and len(parts) == 2 and parts[1] in ARM_COUNTS:
        return Target(name, "number", ("arms", parts[1]))
    if parts[0] == "arms" and len(parts) >= 3:
        rest = ".".join(parts[2:])
        kind = ROW_PATHS.get(rest)
        if kind is not None:
            return Target(name, cast(Kind, kind), ("arms", parts[1], *parts[2:]))
    candidates = [f"arms.{c}" for c in ARM_COUNTS] + [f"arms.best.{p}" for p in ROW_PATHS]
    close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    raise GateError(f"unknown campaign gate name {name!r}: {hint}use arms.<count> ({', '.join(ARM_COUNTS)}), "
                    f"arms.best.<field> or arms.<arm name>.<field>, fields: {', '.join(ROW_PATHS)}")
