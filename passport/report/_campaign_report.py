"""The campaign report, from campaign.json alone: the answer first (the best arm, or the arms
that tie), the advice in the order a team decides, the table of arms with their intervals and
rank groups, the pairwise comparisons, the chart, cost, invariants, then every repetition."""

from __future__ import annotations

from typing import Any

from passport.report._doc import Block, Bullets, Heading, Image, Para, Table, Verdict
from passport.report._plots import ArmPoint, campaign_chart
from passport.report._run_report import ms, num

__all__ = ["campaign_blocks", "campaign_lines", "arm_lines", "answer_line"]


def _kv(row: dict[str, Any]) -> str:
    configured, realized = row["kv_tokens"]["configured"], row["kv_tokens"]["realized"]
    if configured is None and realized is None:
        return "—"
    text = f"{'—' if configured is None else f'{configured:,}'} / {'—' if realized is None else f'{realized:,}'}"
    if configured and realized is not None and realized < configured:
        text += f" ({realized / configured:.0%})"
    return text


def _interval(row: dict[str, Any]) -> str:
    low, high = row["interval"]["low"], row["interval"]["high"]
    return "—" if low is None or high is None else f"[{low:.4g}, {high:.4g}]"


def arm_lines(data: dict[str, Any]) -> list[str]:
    """One line per arm for the terminal: rank group, name, status, the objective's mean and
    interval over its repetitions, the arms it ties with."""
    out = []
    for row in data["arms"]:
        rank = "—" if row["rank"] is None else f"#{row['rank']}"
        value = "—" if row["objective"] is None else f"{row['objective']:.4g} {_interval(row)}"
        tied = f"  tied with {', '.join(row['tied_with'])}" if row["tied_with"] else ""
        out.append(f"{rank:>4} {row['name']:<16} {row['status']:<15} {data['objective']} {value} "
                   f"({row['repetitions_run']} run{'s' if row['repetitions_run'] != 1 else ''}){tied}")
    return out


def answer_line(data: dict[str, Any]) -> str:
    """The campaign's answer in one line: the best arm, or which arms tie, or none ranked."""
    from passport.judge import no_best_reason

    best = data["best"]
    if best is not None:
        row = next(r for r in data["arms"] if r["name"] == best)
        return (f"best by {data['objective']}: {best} ({num(row['objective'], 4)} {_interval(row)}, separated from "
                "every other arm)")
    return no_best_reason(data)


def campaign_lines(data: dict[str, Any]) -> list[str]:
    """The campaign's answer and advice in a few lines, for the terminal and the report's head."""
    counts = data["counts"]
    lines = [answer_line(data), *data["advice"]]
    lines.append(f"{counts['total']} arm(s) x {data['repetitions']} round(s): {counts['ranked']} ranked, "
                 f"{counts['held']} held, {counts['failed']} failed, {counts['does_not_fit']} did not fit, "
                 f"{counts['incomplete']} incomplete, {counts['invalid']} invalid, {counts['not_comparable']} not "
                 "comparable")
    for row in data["arms"]:
        if row["status"] != "ranked":
            lines.append(f"{row['name']}: {row['status'].replace('_', ' ')}: {row['reason']}")
    if data.get("not_run"):
        lines.append(f"not run ({'interrupted' if data['interrupted'] else 'stopped'}): {', '.join(data['not_run'])}"
                     "; `passport campaign SPEC --resume FOLDER` runs them")
    return lines


def _row_cells(row: dict[str, Any]) -> list[str]:
    cost = row.get("cost") or {}
    return [
        "—" if row["rank"] is None else str(row["rank"]), f"`{row['name']}`", row["status"].replace("_", " "),
        num(row["objective"], 4), _interval(row), ", ".join(row["tied_with"]) or "—", str(row["repetitions_run"]),
        row["verdict"] or "—", row["canaries"] or "—", _kv(row),
        "—" if row["context_per_sequence"] is None else f"{row['context_per_sequence']:,}",
        num(row["throughput"].get("requests_per_s"), 3), num(row["throughput"].get("output_tokens_per_s"), 1),
        ms(row["ttft"].get("p50")), ms(row["ttft"].get("p99")), ms(row["e2e"].get("p50")), ms(row["e2e"].get("p99")),
        num(row["goodput"].get("requests_per_s"), 3),
        "—" if row["peak_memory_bytes"] is None else f"{row['peak_memory_bytes'] / 2**20:,.0f}",
        num(cost.get("usd_per_million_tokens"), 4), num(cost.get("usd_per_million_tokens_at_goodput"), 4),
    ]


def _accuracy_blocks(data: dict[str, Any]) -> list[Block]:
    """Speed against accuracy: each arm's objective and rate beside every set's accuracy alone and
    under load (means over its repetitions); empty when no arm scored accuracy."""
    rows = [r for r in data["arms"] if r.get("accuracy")]
    if not rows:
        return []
    names = list(dict.fromkeys(n for r in rows for n in r["accuracy"]))

    def cell(a: dict[str, float | None] | None) -> str:
        if a is None:
            return "—"
        return f"{num(a['alone'], 3)} / {num(a['under_load'], 3)} (drop {num(a['drop'], 3)})"

    return [Heading("Speed against accuracy"),
            Para("Each set's accuracy alone / under load, and the drop over the items answered both ways (means over "
                 "the arm's repetitions). An arm whose accuracy_drop rule warned, or below the campaign's "
                 "min_accuracy, is held from the ranking."),
            Table(["arm", "status", data["objective"], "req/s", *(f"`{n}`" for n in names)],
                  [[f"`{r['name']}`", r["status"].replace("_", " "), num(r["objective"], 4),
                    num(r["throughput"].get("requests_per_s"), 3), *(cell(r["accuracy"].get(n)) for n in names)]
                   for r in rows])]


def campaign_blocks(data: dict[str, Any]) -> list[Block]:
    """The whole report (see the module docstring)."""
    rows = data["arms"]
    best = data["best"]
    tied = data["tied_for_first"]
    word = best if best else ("TIE: " + ", ".join(tied) if len(tied) > 1 else "NO BEST ARM" if tied
                              else "BEST PER KIND" if data.get("by_kind") else "NO ARM RANKED")
    blocks: list[Block] = [
        Verdict(word, answer_line(data)),
        Para(f"Objective: `{data['objective']}` (sustained over the measurement window; never raw peak tokens/s), "
             f"the mean of {data['repetitions']} repetition(s) per arm in rounds whose order rotates, with a 95 % "
             f"t-interval; arms compared pairwise by Welch's t, Holm-corrected at {data['alpha']:g}, and separated "
             f"only when also at least {data['min_difference']:.0%} apart."
             + (f" SLO: {', '.join(f'`{k} <= {v}`' for k, v in data['slo'].items())}." if data["slo"] else "")
             + f" Every arm got the same workload, schedule, load, decoding, window and warm-up (`run:` of "
               f"{data['spec_file']})."
             + (f" The arms serve {len(data['by_kind'])} endpoint kinds ({', '.join(data['by_kind'])}); each kind is "
                "ranked apart, and ranks and ties are within a kind." if data.get("by_kind") else "")),
        Heading("Advice, in the order a team decides"),
        Bullets(data["advice"]),
        Heading("Arms"),
        Table(["rank", "arm", "status", data["objective"], "95 % interval", "tied with", "runs", "verdict",
               "canaries", "KV tokens configured / realized",
               "context per sequence", "req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms", "E2E p50 ms",
               "E2E p99 ms", "goodput req/s", "peak MiB", "USD / M tokens", "USD / M at goodput"],
              [_row_cells(r) for r in rows]),
    ]
    if data["comparisons"]:
        blocks += [Heading("Pairwise comparisons"),
                   Table(["arms", "difference", "relative", "p", "p (Holm)", "separated", "why"],
                         [[f"`{c['a']}` − `{c['b']}`", f"{c['difference']:.4g}", f"{c['relative']:.1%}",
                           "—" if c["p"] is None else f"{c['p']:.3g}",
                           "—" if c["p_holm"] is None else f"{c['p_holm']:.3g}",
                           "yes" if c["separated"] else "no", c["why"]] for c in data["comparisons"]])]
    blocks += _accuracy_blocks(data)
    unranked = [f"`{r['name']}` ({r['status'].replace('_', ' ')}): {r['reason']}" for r in rows
                if r["status"] != "ranked"]
    if unranked:
        blocks += [Heading("Not ranked, and why"), Bullets(unranked, kind="caveats")]
    points = [ArmPoint(r["name"], r["status"], r["objective"], r["ttft"].get("p99"),
                       r["throughput"].get("requests_per_s"), r["interval"]["low"], r["interval"]["high"], r["rank"])
              for r in rows]
    blocks.append(Image("campaign.png", campaign_chart(points, data["objective"]),
                        f"{data['objective']} per arm, and TTFT p99 against throughput."))
    if data["managed_lines"]:
        blocks += [Heading("Managed against owned"), Bullets(data["managed_lines"])]
    varies = [f"`{r['name']}`: " + "; ".join(f"{k}: {v}" for k, v in r["varies"].items()) for r in rows if r["varies"]]
    if varies:
        blocks += [Heading("What each arm varies (declared)"), Bullets(varies)]
    broken = [f"`{r['name']}`: {b}" for r in rows for b in r["broken"]]
    blocks += [Heading("Comparability"),
               Bullets(broken or ["every timed arm matches the reference arm's model, precision, decoding, workload, "
                                  "load and window, or declares what it varies"])]
    fits = [f"`{r['name']}`: {r['fit']['lines'][-1]}" for r in rows if r.get("fit")]
    if fits:
        blocks += [Heading("Capacity arithmetic (before launch)"), Bullets(fits)]
    discards = [f"`{r['name']}`: {d}" for r in rows for d in r["discarded"]]
    if discards:
        blocks += [Heading("Discarded repetitions (pre-registered rules)"), Bullets(discards)]
    runs = [[f"`{r['name']}`", str(rep["round"]), rep["status"].replace("_", " "), num(rep["objective"], 4),
             f"[passport]({rep['run']}/passport.json), [report]({rep['run']}/report.html)" if rep["run"] else
             (rep["reason"] or "—")] for r in rows for rep in r["repetitions"]]
    if runs:
        blocks += [Heading("Every repetition"), Table(["arm", "round", "status", data["objective"], "run"], runs)]
    return blocks
