"""The human-readable side of a passport: report.md and the CLI's headline lines.

Verdicts are reported as MLPerf LoadGen does: "Result is: VALID", one line per rule, then
recommendations for whatever failed. Latencies are shown in milliseconds; the passport keeps
seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from passport._model import Passport, Stat

__all__ = ["render_markdown", "headline_lines", "HEADLINE_METRICS"]

HEADLINE_METRICS = ("ttft.any", "ttft.content", "itl.chunk", "tpot", "e2e", "ttft.any.sched", "dispatch_lag")
_RATES = ("throughput.output_tokens_per_s", "throughput.total_tokens_per_s", "throughput.requests_per_s",
          "goodput.requests_per_s", "goodput.output_tokens_per_s", "concurrency")


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1000:.2f}"


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _stat_row(metric_id: str, s: Stat) -> str:
    return (f"| `{metric_id}` | {s.n} | {_ms(s.p50)} | {_ms(s.p90)} | {_ms(s.p99)} | {_ms(s.mean)} | "
            f"{_ms(s.max)} |")


def headline_lines(p: Passport) -> list[str]:
    """A few lines for the terminal: verdict, the headline latencies and throughput."""
    m = p.results.metrics
    model = p.identity.get("model.id")
    engine = p.identity.get("engine.name")
    lines = [
        f"Result is: {p.verdict}",
        f"model {model.value if model else '?'} on {engine.value if engine else 'unknown engine'}; "
        f"{p.protocol.schedule.pattern}, {p.validity.counts.get('measured')} measured requests, "
        f"{p.validity.counts.get('succeeded')} succeeded",
    ]
    for metric_id in ("ttft.any", "itl.chunk", "tpot", "e2e"):
        s = m.get(metric_id)
        if s is not None and s.n:
            lines.append(f"{metric_id:<10} p50 {_ms(s.p50):>9} ms   p99 {_ms(s.p99):>9} ms   (n={s.n})")
    out = m.get("throughput.output_tokens_per_s")
    req = m.get("throughput.requests_per_s")
    if out is not None and out.n:
        lines.append(f"throughput {_num(out.mean)} output tok/s, {_num(req.mean if req else None, 3)} req/s")
    lines += slo_lines(p)
    for rule in p.validity.rules:
        if rule.status in ("FAIL", "WARN"):
            lines.append(f"{rule.status}: {rule.name}: {rule.message}")
    return lines


def slo_lines(p: Passport) -> list[str]:
    """The SLO verdict, each target against its measured value, and goodput; empty without an SLO."""
    slo = p.results.slo
    if slo is None:
        return []
    good = p.results.metrics.get("goodput.requests_per_s")
    lines = [f"SLO {'met' if slo.met else 'NOT met'}: "
             + ", ".join(f"{t.name} {_ms(t.measured_s)} ms {'<=' if t.met else '>'} {_ms(t.bound_s)} ms"
                         if t.measured_s is not None else f"{t.name} undefined (failures) > {_ms(t.bound_s)} ms"
                         for t in slo.targets)]
    attained = "—" if slo.attainment is None else f"{slo.attainment:.1%}"
    lines.append(f"goodput {_num(good.mean if good else None, 3)} req/s: {slo.requests_meeting} of "
                 f"{slo.requests_measured} measured requests ({attained}) met every target")
    return lines


def _value(v: Any) -> str:
    text = str(v)
    return text if len(text) <= 80 else text[:77] + "..."


def render_markdown(p: Passport, folder: Path | None = None) -> str:
    """report.md: verdict, headline numbers, validity rules, counts, identity, protocol, files."""
    m = p.results.metrics
    out: list[str] = [f"# Passport: {p.name}", "", f"**Result is: {p.verdict}**", ""]
    out.append(f"Run `{p.run_id}`, finished {p.created_utc}; schema {p.schema_version}.")
    if not p.validity.complete:
        out.append(f"**Incomplete:** {p.validity.incomplete_reason}. The figures cover only what was sent.")
    out += ["", "## Latency (ms)", "", "| metric | n | p50 | p90 | p99 | mean | max |", "|---|---|---|---|---|---|---|"]
    for metric_id in HEADLINE_METRICS:
        if metric_id in m:
            out.append(_stat_row(metric_id, m[metric_id]))
    fi = p.results.metrics_failure_inclusive
    if any(s.n_failed for s in fi.values()):
        out += ["", "Failure-inclusive (each failed request counts as infinitely slow):", "",
                "| metric | n | failed | p50 | p90 | p99 |", "|---|---|---|---|---|---|"]
        for metric_id, s in fi.items():
            out.append(f"| `{metric_id}` | {s.n} | {s.n_failed or 0} | {_ms(s.p50)} | {_ms(s.p90)} | {_ms(s.p99)} |")
    out += ["", "## Throughput", "", "| metric | repetitions | mean | min | max |", "|---|---|---|---|---|"]
    for metric_id in _RATES:
        rate = m.get(metric_id)
        if rate is not None:
            out.append(f"| `{metric_id}` | {rate.n} | {_num(rate.mean)} | {_num(rate.min)} | {_num(rate.max)} |")
    if p.results.slo is not None:
        out += ["", "## SLO", ""] + [f"- {line}" for line in slo_lines(p)]
    discard = p.results.discard
    if discard is not None:
        out += ["", "## Discarded repetitions (pre-registered rules)", "",
                f"Rules declared before the run: {', '.join(f'`{r}`' for r in discard.rules)}.", ""]
        out += [f"- repetition {d.repetition}: discarded by `{d.rule}` ({d.message}); its requests stay in "
                "requests.parquet and count in no figure" for d in discard.discarded] or ["- none discarded"]
        out += [f"- `{n['rule']}` could not be evaluated: {n['reason']}" for n in discard.not_evaluable]
    pm = p.results.peak_memory
    out += ["", f"Peak memory: {pm.value_bytes / 2**20:.1f} MiB ({pm.source})" if pm.value_bytes is not None
            else f"Peak memory: unknown ({pm.reason})"]
    c = p.results.client
    out.append(f"Client: CPU share mean {_num(c.cpu_share_mean)} / max {_num(c.cpu_share_max)}, "
               f"loop lag p99 {_num(c.loop_lag_p99_ms)} ms, dispatch lag p99 {_num(c.dispatch_lag_p99_ms, 3)} ms.")
    out += ["", "## Validity", "", f"Result is: {p.verdict}", "", "| rule | status | measured | threshold | detail |",
            "|---|---|---|---|---|"]
    for r in p.validity.rules:
        out.append(f"| {r.name} | {r.status} | {_value(r.measured) if r.measured is not None else '—'} | "
                   f"{_value(r.threshold) if r.threshold is not None else '—'} | {r.message} |")
    recs = [r for r in p.validity.rules if r.recommendation]
    if recs:
        out += ["", "Recommendations:", ""] + [f"- {r.name}: {r.recommendation}" for r in recs]
    out += ["", "Counts (measured requests; — = not checked by this run):", ""]
    out += [f"- {k}: {'—' if v is None else v}" for k, v in p.validity.counts.items()]
    out += ["", "## Identity", "", "| field | value | source |", "|---|---|---|"]
    for key, sv in p.identity.items():
        via = f" ({sv.via})" if sv.via else ""
        out.append(f"| {key} | {_value(sv.value)} | {sv.source}{via} |")
    pr = p.protocol
    out += ["", "## Protocol", "",
            f"- load: {pr.schedule.pattern}, {pr.schedule.n_scheduled} scheduled ({pr.schedule.n_warmup} warm-up), "
            + (f"window {pr.schedule.window_s} s" if pr.schedule.window_s is not None
               else f"window of {pr.effective['load']['measure']['requests']} requests")
            + f", repetitions {pr.effective['load']['repetitions']}",
            f"- workload: {pr.workload.n_requests} requests, sha256 `{pr.workload.sha256[:16]}…`, "
            f"tokenizer {pr.workload.tokenizer} ({'exact' if pr.workload.exact_lengths else 'approximate'} lengths)"
            + (f"; {pr.workload.note}" if pr.workload.note else ""),
            f"- schedule sha256 `{pr.schedule.sha256[:16]}…`, seeds {pr.seeds}",
            f"- request parameters: `{pr.request_params}`; max_tokens is the "
            f"{'target (enforced)' if pr.max_tokens_is_target else 'cap'}",
            f"- prefix cache: {pr.prefix_cache['declared']} (enforced: {pr.prefix_cache['enforced']})",
            f"- canaries: {p.validity.canaries.status} ({p.validity.canaries.reason or ''})",
            f"- harness {pr.harness.version} at {pr.harness.git_revision or 'unknown revision'}"
            f"{' (dirty)' if pr.harness.git_dirty else ''}, Python {pr.harness.python}, uvloop {pr.harness.uvloop}",
            f"- overrides: {', '.join(f'{o.field}={o.value} ({o.source})' for o in pr.overrides) or 'none'}",
            "", "## Files", "", "| file | rows | bytes | sha256 |", "|---|---|---|---|"]
    for name, f in p.files.items():
        out.append(f"| {name} | {f.rows if f.rows is not None else '—'} | {f.bytes} | `{f.sha256}` |")
    out.append("")
    return "\n".join(out)
