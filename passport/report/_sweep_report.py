"""The sweep report: knee and saturation first, the curve, then one row per level."""

from __future__ import annotations

from passport.judge import LevelResult, SweepOutcome, load_text
from passport.model import RunSpec, SweepSpec
from passport.report._doc import Block, Bullets, Heading, Image, Para, Table
from passport.report._plots import SweepPoint, sweep_curve
from passport.report._run_report import ms, num

__all__ = ["sweep_blocks", "summary_lines"]


def _unreached(note: str) -> str:
    return "unknown" if note.startswith("not judged") else "none called" if note.startswith("not called") \
        else "not reached"


def summary_lines(outcome: SweepOutcome) -> list[str]:
    """The sweep's verdict in a few lines: knee, saturation, early stop."""
    lines = [f"knee: {load_text(outcome.vary, outcome.knee)} ({outcome.knee_note})" if outcome.knee is not None
             else f"knee: none ({outcome.knee_note})",
             f"saturation: {load_text(outcome.vary, outcome.saturation)} ({outcome.saturation_note})"
             if outcome.saturation is not None else
             f"saturation: {_unreached(outcome.saturation_note)} ({outcome.saturation_note})"]
    if outcome.stop_reason:
        lines.append(f"stopped early: {outcome.stop_reason}"
                     + (f"; not run: {', '.join(f'{x:g}' for x in outcome.not_run)}" if outcome.not_run else ""))
    return lines


def _slo_text(lv: LevelResult) -> str:
    if not lv.complete:
        return "unknown (incomplete)"
    return lv.slo_call or "—"


def _interval(lv: LevelResult) -> str:
    limits = lv.throughput_interval
    return "—" if limits is None else f"{limits[0]:.3f} to {limits[1]:.3f}"


def level_line(vary: str, has_slo: bool, lv: LevelResult) -> str:
    """One level on the terminal: load, verdict, throughput with its 95 % interval, TTFT p99 and
    the SLO's call."""
    unit = "req/s" if vary == "rate" else "concurrency"
    ttft = "—" if lv.ttft_p99_s is None else f"{lv.ttft_p99_s * 1000:.1f} ms"
    limits = lv.throughput_interval
    thr = "—" if lv.throughput_rps is None else f"{lv.throughput_rps:.3f} req/s" + (
        "" if limits is None else f" [{limits[0]:.3f}, {limits[1]:.3f}]")
    slo = ("  SLO unknown (incomplete)" if not lv.complete and has_slo else
           "" if lv.slo_call is None else f"  SLO {lv.slo_call}")
    return f"{unit} {lv.load:>8g}: {lv.verdict:<10} {thr:>32}  TTFT p99 {ttft:>10}{slo}"


def _row(lv: LevelResult) -> list[str]:
    return [f"{lv.load:g}", lv.verdict, num(lv.throughput_rps, 3), _interval(lv), str(lv.repetitions),
            num(lv.output_tokens_per_s, 1), ms(lv.ttft_p50_s), ms(lv.ttft_p99_s), ms(lv.itl_p50_s), ms(lv.e2e_p99_s),
            "—" if lv.error_rate is None else f"{lv.error_rate:.1%}",
            "—" if lv.achieved_fraction is None else f"{lv.achieved_fraction:.0%}", _slo_text(lv),
            num(lv.goodput_rps, 3), f"`{lv.run}`"]


_COLUMNS = ["load", "verdict", "req/s", "req/s 95% interval", "repetitions", "out tok/s", "TTFT p50 ms", "TTFT p99 ms",
            "ITL p50 ms", "E2E p99 ms", "errors", "achieved", "SLO", "goodput req/s", "run folder (levels/)"]


def sweep_blocks(outcome: SweepOutcome, spec: RunSpec) -> list[Block]:
    """The sweep report: knee and saturation first, the curve, then one row per level."""
    load_label = "offered rate (requests/s)" if outcome.vary == "rate" else "concurrency (requests in flight)"
    points = [SweepPoint(lv.load, lv.throughput_rps, lv.ttft_p50_s, lv.ttft_p99_s, lv.itl_p50_s,
                         None if lv.slo_call in (None, "unclear") else lv.slo_call == "met",
                         lv.tokens_per_s_per_user_p50) for lv in outcome.levels]
    blocks: list[Block] = [Para("**" + "**; **".join(summary_lines(outcome)) + "**")]
    if spec.slo:
        blocks.append(Para(f"SLO: {', '.join(f'`{k} <= {v}`' for k, v in spec.slo.items())}."))
    if outcome.levels:
        blocks.append(Image("sweep_curve.png", sweep_curve(points, load_label, outcome.knee, outcome.saturation),
                            "Latency and throughput by load level (knee: green triangle; saturation: red square), and "
                            "throughput against the median tokens/s per user."))
    blocks += [Heading("Levels"),
               Table(_COLUMNS, [_row(lv) for lv in outcome.levels])]
    targets = [[f"{lv.load:g}", t.name, "—" if t.share is None else f"{t.share:.1%}",
                "—" if t.share_low is None or t.share_high is None else f"{t.share_low:.1%} to {t.share_high:.1%}",
                f"{t.needs:.1%}", t.call] for lv in outcome.levels if lv.complete for t in lv.slo_targets]
    if targets:
        blocks += [Heading("SLO by level"),
                   Para("Each target holds when its share of measured requests within the bound (failures outside) "
                        "is at least the share it names; a call is made only when the share's 95% interval (time "
                        "blocks, never narrower than independent requests would give) lies on one side."),
                   Table(["load", "target", "within", "95% interval", "needs", "call"], targets)]
    if outcome.probe is not None:
        blocks += [Heading("Saturation probe"),
                   Table(["concurrency", *_COLUMNS[1:]], [_row(outcome.probe)])]
    blocks += [Heading("Notes"), Bullets([
        "Each level is a complete run with its own passport under levels/; `passport verify` checks any of them.",
        ("Each level drew its own prompts (same length distributions, workload seed + level number), so the "
         "engine's prompt cache carried nothing from one level to the next."
         if (spec.sweep or SweepSpec()).fresh_prompts
         else "Every level sent the same prompts: later levels may hit the engine's prompt cache."),
        "Throughput intervals are 95% Student's t over the level's repetitions (load.repetitions) or, with one, "
        "over ten equal time slices of its window; the knee and saturation are called only where an interval lies "
        "wholly on one side of the threshold.",
        "A level past saturation is usually INVALID (its latencies include queueing): that is what the sweep is "
        "for, and its verdict is shown as is.",
    ])]
    return blocks
