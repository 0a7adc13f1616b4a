"""The campaign report, from campaign.json alone: the answer first (the best arm and why the
others are not ranked), the table of arms, the chart, cost, invariants, then each arm's notes."""

from __future__ import annotations

from typing import Any

from passport.report._doc import Block, Bullets, Heading, Image, Para, Table, Verdict
from passport.report._plots import ArmPoint, campaign_chart
from passport.report._run_report import ms, num

__all__ = ["campaign_blocks", "campaign_lines", "arm_lines"]


def _kv(row: dict[str, Any]) -> str:
    configured, realized = row["kv_tokens"]["configured"], row["kv_tokens"]["realized"]
    if configured is None and realized is None:
        return "—"
    text = f"{'—' if configured is None else f'{configured:,}'} / {'—' if realized is None else f'{realized:,}'}"
    if configured and realized is not None and realized < configured:
        text += f" ({realized / configured:.0%})"
    return text


def arm_lines(data: dict[str, Any]) -> list[str]:
    """One line per arm for the terminal: rank, name, status, the objective's value."""
    out = []
    for row in data["arms"]:
        rank = "—" if row["rank"] is None else f"#{row['rank']}"
        value = "—" if row["objective"] is None else f"{row['objective']:.4g}"
        out.append(f"{rank:>4} {row['name']:<16} {row['status']:<15} {data['objective']} {value}")
    return out


def campaign_lines(data: dict[str, Any]) -> list[str]:
    """The campaign's answer in a few lines, for the terminal and the report's head."""
    counts = data["counts"]
    best = data["best"]
    rows = {r["name"]: r for r in data["arms"]}
    lines = [f"best by {data['objective']}: {best} ({num(rows[best]['objective'], 4)})" if best
             else f"no arm ranked by {data['objective']}"]
    lines.append(f"{counts['total']} arm(s): {counts['ranked']} ranked, {counts['held']} held by canaries, "
                 f"{counts['failed']} failed, {counts['does_not_fit']} did not fit, {counts['incomplete']} incomplete, "
                 f"{counts['invalid']} invalid, {counts['not_comparable']} not comparable")
    for row in data["arms"]:
        if row["status"] != "ranked":
            lines.append(f"{row['name']}: {row['status'].replace('_', ' ')}: {row['reason']}")
    if data.get("not_run"):
        lines.append(f"not run ({'interrupted' if data['interrupted'] else 'stopped'}): {', '.join(data['not_run'])}")
    return lines


def _row_cells(row: dict[str, Any]) -> list[str]:
    cost = row.get("cost") or {}
    return [
        "—" if row["rank"] is None else str(row["rank"]), f"`{row['name']}`", row["status"].replace("_", " "),
        row["verdict"] or "—", row["canaries"] or "—", _kv(row),
        "—" if row["context_per_sequence"] is None else f"{row['context_per_sequence']:,}",
        num(row["throughput"].get("requests_per_s"), 3), num(row["throughput"].get("output_tokens_per_s"), 1),
        ms(row["ttft"].get("p50")), ms(row["ttft"].get("p99")), ms(row["e2e"].get("p50")), ms(row["e2e"].get("p99")),
        num(row["goodput"].get("requests_per_s"), 3),
        "—" if row["peak_memory_bytes"] is None else f"{row['peak_memory_bytes'] / 2**20:,.0f}",
        num(cost.get("usd_per_million_tokens"), 4), num(cost.get("usd_per_million_tokens_at_goodput"), 4),
    ]


def campaign_blocks(data: dict[str, Any]) -> list[Block]:
    """The whole report (see the module docstring)."""
    rows = data["arms"]
    best = data["best"]
    blocks: list[Block] = [
        Verdict(best if best else "NO ARM RANKED", "; ".join(campaign_lines(data)[:2])),
        Para(f"Objective: `{data['objective']}` (sustained over the measurement window; never raw peak tokens/s)."
             + (f" SLO: {', '.join(f'`{k} <= {v}`' for k, v in data['slo'].items())}." if data["slo"] else "")
             + f" Every arm got the same workload, schedule, load, decoding, window and warm-up (`run:` of "
               f"{data['spec_file']})."),
        Heading("Arms"),
        Table(["rank", "arm", "status", "verdict", "canaries", "KV tokens configured / realized",
               "context per sequence", "req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms", "E2E p50 ms",
               "E2E p99 ms", "goodput req/s", "peak MiB", "USD / M tokens", "USD / M at goodput"],
              [_row_cells(r) for r in rows]),
    ]
    unranked = [f"`{r['name']}` ({r['status'].replace('_', ' ')}): {r['reason']}" for r in rows
                if r["status"] != "ranked"]
    if unranked:
        blocks += [Heading("Not ranked, and why"), Bullets(unranked, kind="caveats")]
    points = [ArmPoint(r["name"], r["status"], r["objective"], r["ttft"].get("p99"),
                       r["throughput"].get("requests_per_s")) for r in rows]
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
    runs = [f"`{r['name']}`: [passport]({r['run']}/passport.json), [report]({r['run']}/report.html), raw logs in "
            f"`{r['run']}/`" for r in rows if r["run"]]
    if runs:
        blocks += [Heading("Each arm's run"), Bullets(runs)]
    return blocks
