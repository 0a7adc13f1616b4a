"""The history as a self-contained HTML page: an inline SVG trend plot (no script, no external
file), one point per run in time order with its interval as a bar, coloured by the `--by`
field; runs that are not VALID drawn hollow and grey (a grey cross on the axis when they have no
figure), flagged runs ringed in red, identity changes marked by a dashed line with what changed,
each run's start (UTC) under the axis; below it, the same points as a table."""

from __future__ import annotations

import html

from passport.ledger._history import History, Point

__all__ = ["history_html", "figure_scale"]

_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 960, 420, 80, 200, 30, 60
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def figure_scale(metric: str) -> tuple[float, str]:
    """(multiplier, unit) a history shows a metric in: latencies (seconds) in ms, rates and
    counts as they are."""
    return (1.0, "/s") if metric.startswith(("throughput.", "goodput.")) or metric.endswith(".n") else (1000.0, "ms")


def _fmt(value: float | None, factor: float) -> str:
    return "—" if value is None else f"{value * factor:.4g}"


def history_html(h: History) -> str:
    """The page (see the module docstring)."""
    factor, unit = figure_scale(h.metric)
    drawn = [p for p in h.points if p.bounds is not None]
    values = [b for p in drawn if (bounds := p.bounds) is not None for b in bounds]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (high - low) * 0.1 or abs(high) * 0.1 or 1.0
    low, high = low - pad, high + pad
    n = max(len(h.points), 1)
    x_of = {id(p): _LEFT + (i + 0.5) * (_W - _LEFT - _RIGHT) / n for i, p in enumerate(h.points)}

    def y(v: float) -> float:
        return _TOP + (high - v) / (high - low) * (_H - _TOP - _BOTTOM)

    colours = {b: _PALETTE[i % len(_PALETTE)] for i, b in enumerate(dict.fromkeys(p.by for p in h.points))}
    svg = [f'<svg id="trend" xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
           f'viewBox="0 0 {_W} {_H}" role="img" aria-label="{html.escape(h.metric)} over time">',
           f'<line x1="{_LEFT}" y1="{_H - _BOTTOM}" x2="{_W - _RIGHT}" y2="{_H - _BOTTOM}" stroke="#333"/>',
           f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_H - _BOTTOM}" stroke="#333"/>']
    for k in range(5):
        v = low + (high - low) * k / 4
        svg.append(f'<text x="{_LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="11">{v * factor:.4g}</text>')
    svg.append(f'<text x="16" y="{_TOP + (_H - _TOP - _BOTTOM) / 2:.0f}" font-size="12" transform="rotate(-90 16 '
               f'{_TOP + (_H - _TOP - _BOTTOM) / 2:.0f})" text-anchor="middle">{html.escape(h.metric)} ({unit})</text>')
    for point in h.points:
        x = x_of[id(point)]
        if point.changes:
            label = html.escape("; ".join(point.changes))
            svg.append(f'<line class="change" x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{_H - _BOTTOM}" '
                       f'stroke="#999" stroke-dasharray="4 3"><title>{label}</title></line>')
            svg.append(f'<text x="{x + 3:.1f}" y="{_TOP + 10}" font-size="9" fill="#666">'
                       f'{html.escape(point.changes[0])[:40]}</text>')
        svg.append(f'<text x="{x:.1f}" y="{_H - _BOTTOM + 14}" font-size="9" text-anchor="middle">'
                   f'{html.escape(point.created_utc[5:16].replace("T", " "))}</text>')
        bounds = point.bounds
        if bounds is None:  # no figure (a run held before timing): a mark on the axis, with why
            svg.append(f'<text class="novalue" x="{x:.1f}" y="{_H - _BOTTOM - 4}" font-size="14" fill="#999" '
                       f'text-anchor="middle">×<title>{html.escape(f"{point.run_id} {point.verdict}: no value")}'
                       '</title></text>')
            continue
        colour = colours[point.by] if point.verdict == "VALID" else "#999"
        svg.append(f'<line x1="{x:.1f}" y1="{y(bounds[0]):.1f}" x2="{x:.1f}" y2="{y(bounds[1]):.1f}" '
                   f'stroke="{colour}" stroke-width="2"/>')
        assert point.value is not None
        fill = colour if point.verdict == "VALID" else "white"
        tip = html.escape(f"{point.run_id} {point.created_utc} {point.verdict} {_fmt(point.value, factor)} {unit}"
                          f" [{_fmt(point.low, factor)}, {_fmt(point.high, factor)}] {h.by or ''}={point.by}")
        svg.append(f'<circle class="point {point.verdict.lower()}" cx="{x:.1f}" cy="{y(point.value):.1f}" r="5" '
                   f'fill="{fill}" stroke="{colour}" stroke-width="2"><title>{tip}</title></circle>')
        if point.flagged:
            svg.append(f'<circle class="flagged" cx="{x:.1f}" cy="{y(point.value):.1f}" r="10" fill="none" '
                       'stroke="#d62728" stroke-width="2"/>')
    legend_x = _W - _RIGHT + 16
    for i, (name, colour) in enumerate(colours.items()):
        svg.append(f'<circle cx="{legend_x}" cy="{_TOP + 8 + i * 18}" r="5" fill="{colour}"/>'
                   f'<text x="{legend_x + 10}" y="{_TOP + 12 + i * 18}" font-size="11">'
                   f'{html.escape(f"{h.by}={name}" if h.by else "runs")}</text>')
    base = _TOP + 12 + len(colours) * 18
    svg.append(f'<text x="{legend_x}" y="{base + 10}" font-size="11">hollow: not VALID</text>')
    svg.append(f'<text x="{legend_x}" y="{base + 28}" font-size="11" fill="#d62728">ringed: moved (see below)</text>')
    svg.append("</svg>")
    rows = "".join(_row(p, factor) for p in h.points)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>passport history: {html.escape(h.metric)}</title>
<style>body{{font-family:sans-serif;margin:24px}}table{{border-collapse:collapse}}td,th{{padding:2px 8px;
border-bottom:1px solid #ddd;font-size:13px;text-align:left}}.flag{{color:#d62728;font-weight:bold}}</style></head>
<body><h1>{html.escape(h.metric)} over time</h1>
<p>{len(h.points)} runs, each with its interval (the passport's 95 % interval). A run is flagged when its interval
lies wholly outside those of the last {h.window} VALID runs of the same workload and schedule.</p>
{"".join(svg)}
<table id="points"><tr><th>created (UTC)</th><th>run</th><th>{html.escape(h.by or "")}</th><th>verdict</th>
<th>value ({unit})</th><th>interval</th><th>moved</th><th>identity changes</th></tr>{rows}</table>
</body></html>
"""


def _row(p: Point, factor: float) -> str:
    moved = '<td class="flag">moved</td>' if p.flagged else "<td></td>"
    return (f"<tr><td>{html.escape(p.created_utc)}</td><td>{html.escape(p.run_id)}</td>"
            f"<td>{html.escape(str(p.by))}</td><td>{html.escape(p.verdict)}</td><td>{_fmt(p.value, factor)}</td>"
            f"<td>[{_fmt(p.low, factor)}, {_fmt(p.high, factor)}]</td>{moved}"
            f"<td>{html.escape('; '.join(p.changes))}</td></tr>")
