"""The sweep report: knee and saturation first, the curve, then one row per level."""

from __future__ import annotations

from passport.judge import LevelResult, SweepOutcome, load_text
from passport.model import RunSpec, SweepSpec
from passport.report._doc import Block, Bullets, Heading, Image, Para, Table
from passport.report._plots import SweepPoint, sweep_curve
from passport.report._run_report import ms, num

__all__ = ["sweep_blocks", "summary_lines"]


def summary_lines(outcome: SweepOutcome) -> list[str]:
    """The sweep's verdict in a few lines: knee, saturation, early stop."""
    lines = [f"knee: {load_text(outcome.vary, outcome.knee)} ({outcome.knee_note})" if outcome.knee is not None
             else f"knee: none ({outcome.knee_note})",
             f"saturation: {load_text(outcome.vary, outcome.saturation)} ({outcome.saturation_note})"
             if outcome.saturation is not None else
             f"saturation: {'unknown' if outcome.saturation_note.startswith('not judged') else 'not reached'} "
             f"({outcome.saturation_note})"]
    if outcome.stop_reason:
        lines.append(f"stopped early: {outcome.stop_reason}"
                     + (f"; not run: {', '.join(f'{x:g}' for x in outcome.not_run)}" if outcome.not_run else ""))
    return lines


def _row(lv: LevelResult) -> list[str]:
    slo = "unknown (incomplete)" if not lv.complete else ("—" if lv.slo_met is None else
                                                          ("met" if lv.slo_met else "missed"))
    return [f"{lv.load:g}", lv.verdict, num(lv.throughput_rps, 3), num(lv.output_tokens_per_s, 1), ms(lv.ttft_p50_s),
            ms(lv.ttft_p99_s), ms(lv.itl_p50_s), ms(lv.e2e_p99_s),
            "—" if lv.error_rate is None else f"{lv.error_rate:.1%}",
            "—" if lv.achieved_fraction is None else f"{lv.achieved_fraction:.0%}", slo, num(lv.goodput_rps, 3),
            f"`{lv.run}`"]


def sweep_blocks(outcome: SweepOutcome, spec: RunSpec) -> list[Block]:
    """The sweep report: knee and saturation first, the curve, then one row per level."""
    load_label = "offered rate (requests/s)" if outcome.vary == "rate" else "concurrency (requests in flight)"
    points = [SweepPoint(lv.load, lv.throughput_rps, lv.ttft_p50_s, lv.ttft_p99_s, lv.itl_p50_s, lv.slo_met,
                         lv.tokens_per_s_per_user_p50) for lv in outcome.levels]
    blocks: list[Block] = [Para("**" + "**; **".join(summary_lines(outcome)) + "**")]
    if spec.slo:
        blocks.append(Para(f"SLO: {', '.join(f'`{k} <= {v}`' for k, v in spec.slo.items())}."))
    if outcome.levels:
        blocks.append(Image("sweep_curve.png", sweep_curve(points, load_label, outcome.knee, outcome.saturation),
                            "Latency and throughput by load level (knee: green triangle; saturation: red square), and "
                            "throughput against the median tokens/s per user."))
    blocks += [Heading("Levels"),
               Table(["load", "verdict", "req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms",
                      "E2E p99 ms", "errors", "achieved", "SLO", "goodput req/s", "run folder (levels/)"],
                     [_row(lv) for lv in outcome.levels])]
    if outcome.probe is not None:
        blocks += [Heading("Saturation probe"),
                   Table(["concurrency", "verdict", "req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms",
                          "E2E p99 ms", "errors", "achieved", "SLO", "goodput req/s", "run folder (levels/)"],
                         [_row(outcome.probe)])]
    blocks += [Heading("Notes"), Bullets([
        "Each level is a complete run with its own passport under levels/; `passport verify` checks any of them.",
        ("Each level drew its own prompts (same length distributions, workload seed + level number), so the "
         "engine's prompt cache carried nothing from one level to the next."
         if (spec.sweep or SweepSpec()).fresh_prompts
         else "Every level sent the same prompts: later levels may hit the engine's prompt cache."),
        "A level past saturation is usually INVALID (its latencies include queueing): that is what the sweep is "
        "for, and its verdict is shown as is.",
    ])]
    return blocks
