"""The human-readable side of a passport: report.md, report.html (with plots) and the CLI's
headline lines.

Verdicts are reported as MLPerf LoadGen does: "Result is: VALID", one line per rule, then
recommendations for whatever failed. A reader sees at a glance the verdict, the headline
numbers and every caveat (a failed or skipped rule, an unmet SLO, a discarded repetition, an
incomplete run, state that was not controlled). Latencies are shown in milliseconds; the
passport keeps seconds. Both files render the same blocks (`_doc.py`).
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import numpy as np

from passport.audit import (
    RAW_FILES,
    REPORT_FILES,
    AccuracyFigures,
    AccuracyPhaseFigures,
    Distribution,
    HeadroomFigures,
    PacerFigures,
    RunFiles,
    StatFigures,
    per_request_samples,
)
from passport.model import Passport
from passport.report._doc import (
    LAYOUT_KEY,
    REPORT_LAYOUT,
    Block,
    Bullets,
    Heading,
    Image,
    Para,
    Table,
    Verdict,
    render_reports,
)

__all__ = ["run_report_blocks", "check_reports", "headline_lines", "slo_lines", "cost_lines", "accuracy_lines",
           "caveats", "num", "HEADLINE_METRICS",
           "ms"]

HEADLINE_METRICS = ("ttft.any", "ttft.content", "itl.chunk", "itl.token", "tpot", "e2e", "ttft.any.sched",
                    "dispatch_lag")
_WHOLE_KINDS = ("embeddings", "rerank", "score")  # endpoint kinds answered whole: no token times
_RATES = ("throughput.output_tokens_per_s", "throughput.total_tokens_per_s", "throughput.requests_per_s",
          "goodput.requests_per_s", "goodput.output_tokens_per_s", "concurrency")


def ms(value: float | None) -> str:
    """Seconds as milliseconds with two decimals, or an em dash for no value."""
    return "—" if value is None else f"{value * 1000:.2f}"


def num(value: float | None, digits: int = 2) -> str:
    """A figure with `digits` decimals, or an em dash for no value."""
    return "—" if value is None else f"{value:.{digits}f}"


# (metric id, unit, decimals) of the rates the kinds past chat add, in the headline's order
_KIND_RATES = (("throughput.inputs_per_s", "inputs/s", 1), ("throughput.documents_per_s", "documents/s", 1),
               ("throughput.input_tokens_per_s", "input tok/s", 1), ("throughput.audio_s_per_s", "audio s/s", 2))


def headline_lines(p: Passport) -> list[str]:
    """A few lines for the terminal: verdict, the headline latencies and throughput."""
    m = p.results["metrics"]
    model = p.identity.get("model.id")
    engine = p.identity.get("engine.name")
    lines = [
        f"Result is: {p.verdict}",
        f"model {model.value if model else '?'} on {engine.value if engine else 'unknown engine'}; "
        f"{p.protocol.schedule.pattern}, {p.validity.counts.get('measured')} measured requests, "
        f"{p.validity.counts.get('succeeded')} succeeded",
    ]
    chunk = m.get("itl.chunk")
    for metric_id in ("ttft.any", "itl.chunk", "itl.token", "tpot", "e2e"):
        s = m.get(metric_id)
        if metric_id == "itl.token" and (s is None or chunk is None or s["n"] == chunk["n"]):
            continue  # one token a chunk: itl.token is itl.chunk
        if s is not None and s["n"]:
            lines.append(f"{metric_id:<10} p50 {ms(s['p50']):>9} ms   p99 {ms(s['p99']):>9} ms   (n={s['n']})")
    out = m.get("throughput.output_tokens_per_s")
    req = m.get("throughput.requests_per_s")
    rates = [f"{num(m[key]['mean'], digits)} {unit}" for key, unit, digits in _KIND_RATES
             if m.get(key) is not None and m[key]["n"]]
    if rates:  # a kind past chat: its own rates lead (an embedder's output tokens are none)
        lines.append(f"throughput {', '.join(rates)}, {num(req['mean'] if req else None, 3)} req/s")
    elif out is not None and out["n"]:
        lines.append(f"throughput {num(out['mean'])} output tok/s, {num(req['mean'] if req else None, 3)} req/s")
    rtfx = m.get("rtfx.request")
    if rtfx is not None and rtfx["n"]:
        lines.append(f"{'rtfx':<10} p50 {num(rtfx['p50']):>9} x   min {num(rtfx.get('min')):>9} x   "
                     f"(n={rtfx['n']}, audio s per wall s, per request)")
    lines += slo_lines(p)
    lines += cost_lines(p)[:1]
    lines += accuracy_lines(p)
    for rule in p.validity.rules:
        if rule["status"] in ("FAIL", "WARN"):
            lines.append(f"{rule['status']}: {rule['name']}: {rule['message']}")
    return lines


def slo_lines(p: Passport) -> list[str]:
    """The SLO verdict, each target against its measured value, and goodput; empty without an SLO."""
    slo = p.results.get("slo")
    if slo is None:
        return []
    good = p.results["metrics"].get("goodput.requests_per_s")
    lines = [f"SLO {'met' if slo['met'] else 'NOT met'}: "
             + ", ".join(f"{t['name']} {ms(t['measured_s'])} ms {'<=' if t['met'] else '>'} {ms(t['bound_s'])} ms"
                         if t["measured_s"] is not None else f"{t['name']} undefined (failures) > {ms(t['bound_s'])} ms"
                         for t in slo["targets"])]
    attained = "—" if slo["attainment"] is None else f"{slo['attainment']:.1%}"
    lines.append(f"goodput {num(good['mean'] if good else None, 3)} req/s: {slo['requests_meeting']} of "
                 f"{slo['requests_measured']} measured requests ({attained}) met every target")
    return lines


def _usd(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def cost_lines(p: Passport) -> list[str]:
    """What the measured window cost at the declared prices; empty without `cost:`."""
    cost = p.results.get("cost")
    if cost is None:
        return []
    t, g = cost["throughput"], cost["goodput"]
    basis = (f"owned: {cost['gpus']} x USD {cost['gpu_hour_usd']:g}/h" if cost["basis"] == "owned"
             else f"managed: USD {cost['input_usd_per_million']:g} in / {cost['output_usd_per_million']:g} out "
                  "per million")
    lines = [f"cost ({basis}): USD {_usd(t['usd_per_million_tokens'])} per million tokens, "
             f"{_usd(t['usd_per_million_output_tokens'])} per million output tokens"
             + ("" if g is None else f"; at SLO goodput {_usd(g['usd_per_million_tokens'])} per million tokens")]
    lines.append(f"the window ({cost['window_s']:.1f} s, {cost['input_tokens']:,} input + "
                 f"{cost['output_tokens']:,} output tokens served) cost USD {cost['usd_for_window']:.4g}; each "
                 "figure divides that by one class of tokens, so they do not add up")
    return lines


def _share_cell(phase: AccuracyPhaseFigures | None) -> str:
    if phase is None:
        return "—"
    if phase["accuracy"] is None:
        return f"no answer ({phase['failed']} failed)"
    interval = f"95 % {phase['ci_low']:.2f}..{phase['ci_high']:.2f}"
    return (f"{phase['accuracy']:.3f} ({phase['correct']}/{phase['n']}; {interval})"
            + (f", {phase['failed']} failed" if phase["failed"] else ""))


def _drop_cell(sets: AccuracyFigures) -> str:
    d = sets["paired"]
    if d is None:
        return "—"
    return (f"{d['drop']:+.3f} (95 % {d['drop_low']:+.2f}..{d['drop_high']:+.2f}; {d['worse']} worse, {d['better']} "
            f"better of {d['n_pairs']}; p {d['p_value']:.2g})")


def accuracy_lines(p: Passport) -> list[str]:
    """Each accuracy set alone and under load with the drop; empty without `accuracy:`."""
    return [f"accuracy {name}: alone {_share_cell(a['alone'])}, under load {_share_cell(a['under_load'])}, "
            f"drop {_drop_cell(a)}" for name, a in (p.results.get("accuracy") or {}).items()]


def caveats(p: Passport) -> list[str]:
    """Everything a reader must know before trusting the figures, one line each."""
    out = []
    if not p.validity.complete:
        out.append(f"**Incomplete:** {p.validity.incomplete_reason}; the figures cover only what was sent.")
    if p.validity.forced:
        out.append("**Forced:** the canaries failed and the timing ran anyway (--force).")
    if p.validity.recovered:
        out.append(f"**Recovered:** {p.validity.recovered}.")
    for r in p.validity.rules:
        if r["status"] != "PASS":
            out.append(f"{r['status']} `{r['name']}`: {r['message']}")
    slo = p.results.get("slo")
    if slo is not None and not slo["met"]:
        out.append("the declared SLO was not met: " + slo_lines(p)[0].removeprefix("SLO NOT met: "))
    if not p.protocol.prefix_cache.get("enforced"):
        out.append(f"prefix-cache state `{p.protocol.prefix_cache.get('declared')}` was declared but not enforced: "
                   f"{p.protocol.prefix_cache.get('reason') or p.protocol.prefix_cache.get('method', '')}")
    if p.results["peak_memory"]["value_bytes"] is None:
        out.append(f"peak memory unknown: {p.results['peak_memory'].get('reason')}")
    return out


def _stat_row(metric_id: str, s: StatFigures) -> list[str]:
    return [f"`{metric_id}`", str(s["n"]), ms(s["p50"]), ms(s["p90"]), ms(s["p99"]), ms(s["mean"]), ms(s["max"])]


def _value(v: object) -> str:
    text = "—" if v is None else str(v)
    return text if len(text) <= 80 else text[:77] + "..."


def _results_blocks(p: Passport) -> list[Block]:
    m = p.results["metrics"]
    whole = (p.protocol.effective.get("endpoint") or {}).get("api") in _WHOLE_KINDS  # nothing generated
    latencies = [k for k in HEADLINE_METRICS if k in m and not (whole and k.split(".")[0] in ("ttft", "itl", "tpot"))]
    blocks: list[Block] = [
        Heading("Latency (ms)"),
        Table(["metric", "n", "p50", "p90", "p99", "mean", "max"], [_stat_row(k, m[k]) for k in latencies]),
    ]
    fi = p.results["metrics_failure_inclusive"]
    if any(s["n_failed"] for s in fi.values()):
        blocks += [Para("Failure-inclusive (each failed request counts as infinitely slow):"),
                   Table(["metric", "n", "failed", "p50", "p90", "p99"],
                         [[f"`{k}`", str(s["n"]), str(s["n_failed"] or 0), ms(s["p50"]), ms(s["p90"]), ms(s["p99"])]
                          for k, s in fi.items()])]
    rates = [k for k, _, _ in _KIND_RATES] + [k for k in _RATES if not (whole and "output_tokens" in k)]
    blocks += [Heading("Throughput"),
               Table(["metric", "repetitions", "mean", "min", "max"],
                     [[f"`{k}`", str(m[k]["n"]), num(m[k]["mean"]), num(m[k]["min"]), num(m[k]["max"])]
                      for k in rates if k in m])]
    rtfx = m.get("rtfx.request")
    if rtfx is not None:
        blocks += [Heading("Real-time factor per request (audio s per wall s)"),
                   Para("`rtfx.request`: the clip's seconds / (end - sent) of each successful measured request; "
                        "higher is better, so the slow tail is the minimum."),
                   Table(["metric", "n", "min", "p50", "mean", "max"],
                         [["`rtfx.request`", str(rtfx["n"]), num(rtfx["min"]), num(rtfx["p50"]), num(rtfx["mean"]),
                           num(rtfx["max"])]])]
    speed = m.get("tps.user")
    if speed is not None and not whole:  # passports before it was defined have none
        blocks += [Heading("Speed per user (tokens/s)"),
                   Para("`tps.user`: completion tokens / (end - first token) of each successful measured request "
                        "with two or more tokens, the decode speed one user sees; higher is better, so the slow "
                        "tail is the minimum."),
                   Table(["metric", "n", "min", "p50", "mean", "max"],
                         [["`tps.user`", str(speed["n"]), num(speed["min"]), num(speed["p50"]), num(speed["mean"]),
                           num(speed["max"])]])]
    if p.results.get("slo") is not None:
        blocks += [Heading("SLO"), Bullets(slo_lines(p))]
    if p.results.get("cost") is not None:
        blocks += [Heading("Cost"), Bullets(cost_lines(p))]
    discard = p.results.get("discard")
    if discard is not None:
        items = [f"repetition {d['repetition']}: discarded by `{d['rule']}` ({d['message']}); its requests stay in "
                 "requests.parquet and count in no figure" for d in discard["discarded"]] or ["none discarded"]
        items += [f"`{n['rule']}` could not be evaluated: {n['reason']}" for n in discard["not_evaluable"]]
        blocks += [Heading("Discarded repetitions (pre-registered rules)"),
                   Para(f"Rules declared before the run: {', '.join(f'`{r}`' for r in discard['rules'])}."),
                   Bullets(items)]
    server = p.results.get("server")
    if server is not None:
        items = [f"`{k}`: peak {v['peak']:.3g}, mean {v['mean']:.3g} ({int(v['n'])} samples)"
                 for k, v in server["gauges"].items()]
        items += [f"`{k}` over the window: +{v:,.0f}" for k, v in server["counter_deltas"].items()]
        if server["prefix_cache_hit_rate"] is not None:
            items.append(f"prefix-cache hit rate: {server['prefix_cache_hit_rate']:.1%}")
        if server["gpu_memory_peak_bytes"] is not None:
            items.append(f"GPU memory peak {server['gpu_memory_peak_bytes'] / 2**30:.2f} GiB ({server['gpu_source']})")
        items.append(f"energy: {server['energy_j']:,.0f} J" if server["energy_j"] is not None
                     else f"energy: not measured ({server['energy_reason']})")
        if server["scrape_failures"]:
            items.append(f"{server['scrape_failures']} scrapes failed (see telemetry.parquet, source `sampler`)")
        blocks += [Heading("Server (telemetry over the measurement window)"), Bullets(items)]
    usage = p.results.get("prefix_cache_usage")
    if usage is not None and usage.get("share_of_prompt_tokens") is not None:
        blocks.append(Para(f"Cached prompt tokens (usage): {usage['cached_tokens']:,} "
                           f"({float(usage['share_of_prompt_tokens'] or 0):.1%} of prompt tokens, "
                           f"{usage['requests_reporting']} requests reporting)."))
    pm = p.results["peak_memory"]
    c = p.results["client"]
    blocks.append(Para(
        (f"Peak memory: {pm['value_bytes'] / 2**20:.1f} MiB ({pm['source']})." if pm["value_bytes"] is not None
         else f"Peak memory: unknown ({pm.get('reason')}).")
        + f" Client: CPU share mean {num(c['cpu_share_mean'])} / max {num(c['cpu_share_max'])}, loop lag p99 "
          f"{num(c['loop_lag_p99_ms'])} ms, dispatch lag p99 {num(c['dispatch_lag_p99_ms'], 3)} ms."))
    headroom = c.get("headroom")
    if headroom is not None:
        blocks.append(Para(headroom_sentence(headroom)))
    pacer = c.get("pacer")
    if pacer is not None:
        blocks.append(Para(
            f"Pacer ({_pacer_thread(pacer)}): {pacer['sends_raw']:,} sends written by its thread at their deadline, "
            f"{pacer['sends_via_loop']:,} "
            f"handed to the event loop (TLS), {pacer['withdrawn']:,} withdrawn, {pacer['armed_late']:,} armed after "
            f"their deadline (the loop was behind); {pacer['cpu_s']:.3f} s of its thread's CPU"
            + (f", {pacer['cpu_us_per_send']:.0f} us per send." if pacer["cpu_us_per_send"] is not None else ".")))
    workers = c.get("workers")
    if workers:
        blocks.append(Table(["worker", "requests", "CPU share mean", "CPU share max", "loop lag p99 ms",
                             "dispatch lag p99 ms"],
                            [[str(w["worker"]), str(w["requests"]), num(w["cpu_share_mean"]), num(w["cpu_share_max"]),
                              num(w["loop_lag_p99_ms"]), num(w["dispatch_lag_p99_ms"], 3)] for w in workers]))
    return blocks


def _pacer_thread(pacer: PacerFigures) -> str:
    """Which thread kept the sends: the C helper's (real-time or not) or Python's."""
    native = pacer.get("native")
    if native is None:
        return "its thread not recorded"
    if not native:
        return "a Python thread"
    return "a C thread, real-time" if pacer.get("realtime") else "a C thread, ordinary priority"


def headroom_sentence(h: HeadroomFigures) -> str:
    """The client's headroom in words: what the run sent against what this client paces here."""
    cal = h["calibration"]
    verdict = (f"{h['factor']:.1f}x below the ceiling" if h["factor"] > 1
               else "at or past the ceiling: open-loop sends were likely late (see dispatch lag)")
    return (f"Client headroom: {h['requests_per_s']:,.1f} requests/s and {h['chunks_per_s']:,.0f} chunks/s sent, "
            f"against ~{h['ceiling_requests_per_s']:,.0f} requests/s at {h['chunks_per_request']:.1f} chunks each "
            f"that {h['workers']} worker(s) pace here ({verdict}; calibration {cal['cpu_us_per_request']:.0f} us per "
            f"request + {cal['cpu_us_per_chunk']:.1f} us per chunk, {cal['how']} {cal['measured_utc']}; predicted "
            f"CPU share {h['predicted_cpu_share']:.2f} per worker).")


def _dist_cells(d: Distribution | None) -> list[str]:
    if not d:
        return ["—"] * 5
    return [str(d["n"]), f"{d['mean']:.1f}", f"{d['p50']:g}", f"{d['p99']:g}", f"{d['max']:g}"]


def _traffic_blocks(p: Passport) -> list[Block]:
    """What was offered and answered: lengths target vs realized, shapes, sessions, checks."""
    r = p.results
    blocks: list[Block] = []
    lengths, shapes, sessions, checks = r.get("lengths"), r.get("shapes"), r.get("sessions"), r.get("checks")
    if lengths:
        li, lo = lengths["input_tokens"], lengths["output_tokens"]
        rows = [["input, target", *_dist_cells(li["target"])], ["input, our tokenizer", *_dist_cells(li["client"])],
                ["input, server (single requests)", *_dist_cells(li["server"])],
                ["output, target", *_dist_cells(lo["target"])], ["output, realized", *_dist_cells(lo["realized"])]]
        if lengths.get("reasoning_tokens"):
            rows.append(["reasoning (apart from output text)", *_dist_cells(lengths["reasoning_tokens"])])
        blocks += [Heading("Lengths (tokens)"), Table(["", "n", "mean", "p50", "p99", "max"], rows)]
        if lo.get("met_target_share") is not None:
            blocks.append(Para(f"Requests whose max_tokens was the target (ignore_eos) that reached it: "
                               f"{lo['met_target_share']:.1%}."))
    if shapes:
        blocks += [Heading("Traffic shapes"),
                   Table(["shape", "requests", "outcomes", "TTFT p50 (ms)", "E2E p50 (ms)"],
                         [[f"`{k}`", str(v["requests"]), ", ".join(f"{o} {n}" for o, n in v["outcomes"].items()),
                           ms(v["ttft_p50_s"]), ms(v["e2e_p50_s"])] for k, v in shapes.items()])]
    if sessions:
        s = sessions
        blocks += [Heading("Sessions (multi-turn)"),
                   Para(f"{s['started']} sessions started, {s['completed']} completed, {s['cut_short']} cut short by "
                        f"a failed turn; {s['turns_sent']} of {s['turns_planned']} planned turns sent."),
                   Table(["turn", "n", "context p50 (tokens)", "context max"],
                         [[t, str(v["n"]), f"{v['p50']:g}", f"{v['max']:g}"]
                          for t, v in s["context_tokens_by_turn"].items()])]
    accuracy = r.get("accuracy")
    if accuracy:
        blocks += [Heading("Accuracy alone and under load"),
                   Table(["set", "scorer", "alone", "under load", "drop (alone - under load)"],
                         [[f"`{k}`", v["scorer"], _share_cell(v["alone"]), _share_cell(v["under_load"]), _drop_cell(v)]
                          for k, v in accuracy.items()]),
                   Para("Every answer, both ways, is in accuracy.parquet; `passport verify` scores each again. The "
                        "drop pairs the items answered both ways (an item's first answer under load); p is the "
                        "exact one-sided sign test on the items that changed.")]
    if checks:
        blocks += [Heading("Answer checks"),
                   Table(["check", "requests", "checked", "passed", "results"],
                         [[f"`{k}`", str(v["requests"]), str(v["checked"]), str(v["passed"]),
                           ", ".join(f"{a} {n}" for a, n in v["results"].items())] for k, v in checks.items()])]
    return blocks


def _validity_blocks(p: Passport) -> list[Block]:
    blocks: list[Block] = [
        Heading("Validity"), Para(f"Result is: {p.verdict}"),
        Table(["rule", "status", "measured", "threshold", "detail"],
              [[r["name"], r["status"], _value(r["measured"]) if r["measured"] is not None else "—",
                _value(r["threshold"]) if r["threshold"] is not None else "—", r["message"]]
               for r in p.validity.rules]),
    ]
    c = p.validity.canaries
    if c["status"] != "not_run":
        largest = c.get("largest_context_served_tokens")
        blocks.append(Para(f"Canaries: suite `{c['suite']}` v{c.get('suite_version')} "
                           f"(sha256 `{(c.get('suite_sha256') or '')[:16]}…`): {c.get('reason')}"
                           + (f"; the largest context served {largest} tokens" if largest else "") + "."))
        failures = c.get("failures")
        if failures:
            blocks.append(Table(["case", "kind", "category", "reason", "expected", "actual"],
                                [[f"`{f['case_id']}`", f["kind"], f["category"], f["reason"], _value(f["expected"]),
                                  _value(f["actual"])] for f in failures]))
    recs = [r for r in p.validity.rules if r["recommendation"]]
    if recs:
        blocks += [Para("Recommendations:"), Bullets([f"{r['name']}: {r['recommendation']}" for r in recs])]
    blocks += [Para("Counts (measured requests; — = not checked by this run):"),
               Bullets([f"{k}: {'—' if v is None else v}" for k, v in p.validity.counts.items()])]
    return blocks


def _protocol_blocks(p: Passport) -> list[Block]:
    pr = p.protocol
    load = pr.effective["load"]
    window = (f"window {pr.schedule.window_s} s" if pr.schedule.window_s is not None
              else f"window of {load['measure']['requests']} requests")
    items = [
        f"load: {pr.schedule.pattern}, {pr.schedule.n_scheduled} scheduled ({pr.schedule.n_warmup} warm-up"
        + (", drained before the first measured request" if load["warmup"].get("barrier") else "") + "), "
        f"{window}, repetitions {load['repetitions']}",
        f"workload: {pr.workload.n_requests} requests, sha256 `{pr.workload.sha256[:16]}…`, tokenizer "
        f"{pr.workload.tokenizer} ({'exact' if pr.workload.exact_lengths else 'approximate'} lengths)"
        + (f"; {pr.workload.note}" if pr.workload.note else ""),
        f"schedule sha256 `{pr.schedule.sha256[:16]}…`, seeds {pr.seeds}",
        f"request parameters: `{pr.request_params}`; max_tokens is the "
        f"{'target (enforced)' if pr.max_tokens_is_target else 'cap'}",
        f"prefix cache: {pr.prefix_cache.get('policy') or pr.prefix_cache['declared']}"
        + (f" ({pr.prefix_cache.get('chosen')})" if pr.prefix_cache.get("declared") == "auto" else "")
        + f" (enforced: {pr.prefix_cache['enforced']}; {pr.prefix_cache.get('method', '')}"
        + (f"; {pr.prefix_cache['reason']}" if pr.prefix_cache.get("reason") else "") + ")",
        f"canaries: {p.validity.canaries['status']} ({p.validity.canaries.get('reason') or ''})",
        f"harness {pr.harness.version} at {pr.harness.git_revision or 'unknown revision'}"
        f"{' (dirty)' if pr.harness.git_dirty else ''}, Python {pr.harness.python}, uvloop {pr.harness.uvloop}",
        f"overrides: {', '.join(f'{o.field}={o.value} ({o.source})' for o in pr.overrides) or 'none'}",
    ]
    retry = load.get("on_reject", {}).get("retry", "none")
    if retry != "none":  # the default (never retried) goes unsaid, as in passports before it existed
        policy = load["on_reject"]
        items.insert(1, f"rejections (429/503): {retry}, at most {policy['max_retries']} retries, each after at most "
                        f"{policy['max_wait_s']:g} s ({p.validity.counts.get('retries', 0)} attempts retried)")
    w = pr.workload
    if w.shapes:
        items.append(f"traffic: {w.entries} entries; " + ", ".join(f"{k} {v}" for k, v in w.shapes.items())
                     + (f"; JSON Schema sent as {w.structured_output_form}" if w.structured_output_form else ""))
    if w.tokenizer_check is not None:
        tc = w.tokenizer_check
        items.append(f"server tokenizer check: {tc['agreed']} of {tc['checked']} prompts counted alike"
                     if tc["checked"] else f"server tokenizer check: {tc.get('note')}")
    if pr.declared is not None:
        items.append(f"declared before the first timed request ({pr.declared.file}, {pr.declared.written_utc}, "
                     f"sha256 `{pr.declared.sha256[:16]}…`): SLO `{pr.effective.get('slo') or {}}`, discard rules "
                     f"`{pr.effective.get('discard') or []}`, realized context per sequence "
                     f"{pr.declared.context_tokens_per_sequence or 'unknown'}")
    return [Heading("Protocol"), Bullets(items)]


def _plot_blocks(p: Passport, folder: Path) -> list[Block]:
    from passport.report._plots import CDF_METRICS, latency_cdfs, per_request, timeline  # matplotlib: not for headlines

    files = RunFiles(folder)
    requests = files.table("requests")
    if requests is None:
        return []
    samples = per_request_samples(files, CDF_METRICS)
    series = {p.name: {k: np.concatenate(v) if v else np.zeros(0) for k, v in samples.items()}}
    windows = [((w["start_ns"] or 0) / 1e9, (w["end_ns"] or 0) / 1e9) for w in p.results["windows"]
               if w["start_ns"] is not None and w["end_ns"] is not None]
    png, notes = timeline(requests, files.table("chunks"), files.table("telemetry"), windows)
    return [
        Heading("Plots"),
        Image("latency_cdf.png", latency_cdfs(series),
              "Latency ECDFs of successful measured requests (the samples the results count), p50/p90/p99 "
              "marked."),
        Image("per_request.png", per_request(requests),
              "Each successful measured request: TTFT and TPOT over the run, TTFT against input length, and "
              "tokens/s per user."),
        Image("timeline.png", png, "Requests in flight and output throughput over the run; shaded: measurement "
                                   "windows. " + " ".join(f"Note: {n}." for n in notes)),
    ]


def run_report_blocks(p: Passport, folder: Path) -> list[Block]:
    """The whole run report: verdict, caveats, headline numbers, plots, then the four parts."""
    counts = p.validity.counts
    blocks: list[Block] = [
        Verdict(p.verdict, f"Run `{p.run_id}`, finished {p.created_utc}; {counts.get('measured')} measured "
                           f"requests, {counts.get('succeeded')} succeeded; passport schema {p.schema_version}."),
    ]
    found = caveats(p)
    blocks += [Heading("Caveats"), Bullets(found, kind="caveats") if found else Para("None.")]
    blocks += _results_blocks(p)
    blocks += _traffic_blocks(p)
    blocks += _plot_blocks(p, folder)
    blocks += _validity_blocks(p)
    blocks += [Heading("Identity"),
               Table(["field", "value", "source"],
                     [[k, _value(sv.value), sv.source + (f" ({sv.via})" if sv.via else "")]
                      for k, sv in p.identity.items()])]
    blocks += _protocol_blocks(p)
    blocks += [Heading("Files"),
               Table(["file", "rows", "bytes", "sha256"],
                     [[name, str(f["rows"]) if f["rows"] is not None else "—", str(f["bytes"]), f"`{f['sha256']}`"]
                      for name, f in p.files.items() if name in RAW_FILES])]
    return blocks


def check_reports(p: Passport, folder: Path) -> tuple[list[str], list[str]]:
    """Re-render a run's reports from its passport and raw files: (each report file the passport
    lists that differs from the fresh rendering, notes). report.md is text and always compared;
    report.html and the plots embed PNGs, compared only when this matplotlib is the one that
    drew them (a note says so otherwise)."""
    listed = [name for name in p.files if name in REPORT_FILES or name.startswith("plots/")]
    if not listed:
        return [], []
    recorded = p.protocol.harness.libraries.get("matplotlib")
    try:
        installed: str | None = metadata.version("matplotlib")
    except metadata.PackageNotFoundError:
        installed = None
    same_drawing = recorded is not None and recorded == installed
    layout = int(p.protocol.harness.libraries.get(LAYOUT_KEY, "1"))
    if layout != REPORT_LAYOUT:
        return [], [f"reports laid out by an earlier passport (report layout {layout}; this is {REPORT_LAYOUT}): "
                    "their hashes are checked, they are not re-rendered"]
    rendered = render_reports(f"Passport: {p.name}", run_report_blocks(p, folder))
    problems = [f"{name}: listed in the passport but not part of its report" for name in listed
                if name not in rendered]
    problems += [f"{name}: part of the report but not listed in the passport" for name in rendered
                 if name not in listed]
    for name in listed:
        path = folder / name
        if name != "report.md" and not same_drawing:
            continue
        if name in rendered and path.is_file() and path.read_bytes() != rendered[name]:
            problems.append(f"{name}: differs from a fresh rendering of the passport and raw logs (edited after "
                            "the run)")
    notes = [] if same_drawing else [f"report.html and plots not re-rendered byte for byte: drawn with matplotlib "
                                     f"{recorded}, this is {installed} (their hashes are still checked)"]
    return problems, notes
