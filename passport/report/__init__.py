"""The human-readable side: report.md and report.html (one list of blocks rendered twice, with
plots), the CLI's headline lines, comparison and sweep reports, and JUnit XML for CI. It reads
passports and the figures `passport.audit` computes; it decides nothing (`passport.judge`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from passport._lazy import lazy_names

# Loaded on first use (PEP 562): a command pays only for the names it uses.
if TYPE_CHECKING:
    from passport.report._baseline_text import baseline_line
    from passport.report._campaign_report import arm_lines, campaign_blocks, campaign_lines
    from passport.report._compare_report import comparison_blocks
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
        to_html,
        to_markdown,
        write_reports,
    )
    from passport.report._junit import junit_cases, junit_gate
    from passport.report._plots import CDF_METRICS, SweepPoint, latency_cdfs, sweep_curve, timeline
    from passport.report._run_report import (
        HEADLINE_METRICS,
        caveats,
        check_reports,
        cost_lines,
        headline_lines,
        ms,
        run_report_blocks,
        slo_lines,
    )
    from passport.report._sweep_report import level_line, summary_lines, sweep_blocks

__all__ = [
    "CDF_METRICS",
    "HEADLINE_METRICS",
    "LAYOUT_KEY",
    "REPORT_LAYOUT",
    "Block",
    "Bullets",
    "Heading",
    "Image",
    "Para",
    "SweepPoint",
    "Table",
    "Verdict",
    "arm_lines",
    "campaign_blocks",
    "campaign_lines",
    "caveats",
    "cost_lines",
    "check_reports",
    "comparison_blocks",
    "headline_lines",
    "junit_cases",
    "junit_gate",
    "baseline_line",
    "latency_cdfs",
    "level_line",
    "ms",
    "render_reports",
    "run_report_blocks",
    "slo_lines",
    "summary_lines",
    "sweep_blocks",
    "sweep_curve",
    "timeline",
    "to_html",
    "to_markdown",
    "write_reports",
]

_HOME = {name: module for module, names in {
    "passport.report._baseline_text": (
        "baseline_line",
    ),
    "passport.report._campaign_report": (
        "arm_lines", "campaign_blocks", "campaign_lines",
    ),
    "passport.report._compare_report": (
        "comparison_blocks",
    ),
    "passport.report._doc": (
        "LAYOUT_KEY", "REPORT_LAYOUT", "Block", "Bullets", "Heading", "Image", "Para", "Table", "Verdict",
        "render_reports", "to_html", "to_markdown", "write_reports",
    ),
    "passport.report._junit": (
        "junit_cases", "junit_gate",
    ),
    "passport.report._plots": (
        "CDF_METRICS", "SweepPoint", "latency_cdfs", "sweep_curve", "timeline",
    ),
    "passport.report._run_report": (
        "HEADLINE_METRICS", "caveats", "check_reports", "cost_lines", "headline_lines", "ms",
        "run_report_blocks", "slo_lines",
    ),
    "passport.report._sweep_report": (
        "level_line", "summary_lines", "sweep_blocks",
    ),
}.items() for name in names}

if not TYPE_CHECKING:  # for the type checker every name is imported above; unknown ones are errors
    __getattr__, __dir__ = lazy_names(__name__, _HOME)
