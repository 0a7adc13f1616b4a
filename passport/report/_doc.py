"""A tiny document model rendered twice: Markdown (report.md) and self-contained HTML (report.html).

Reports are built once as a list of blocks; `to_markdown` and `to_html` render the same blocks,
so the two reports can never say different things. Inline text may use `code` and **bold**
(Markdown's own syntax) and [links](relative/path) to files beside the report, which the HTML
renderer converts after escaping. Images are PNG bytes:
Markdown links to the file written beside it, HTML embeds a data: URL, so report.html is one
file that can be mailed or attached to a CI run.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from passport.audit._versions import LAYOUT_KEY

__all__ = ["Heading", "Para", "Table", "Bullets", "Image", "Verdict", "Block", "to_markdown", "to_html",
           "write_reports", "render_reports", "REPORT_LAYOUT", "LAYOUT_KEY"]


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Bullets:
    items: list[str]
    kind: str = "plain"  # plain | caveats


@dataclass(frozen=True)
class Image:
    """A plot: `file` is its name under the report's plots/ folder."""

    file: str
    png: bytes = field(repr=False)
    caption: str


@dataclass(frozen=True)
class Verdict:
    """The verdict banner: VALID (green), INVALID/NOT COMPARABLE (red), HOLD/other (amber)."""

    word: str
    detail: str


Block = Heading | Para | Table | Bullets | Image | Verdict


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(title: str, blocks: list[Block]) -> str:
    out = [f"# {title}", ""]
    for b in blocks:
        if isinstance(b, Heading):
            out += ["#" * b.level + " " + b.text, ""]
        elif isinstance(b, Para):
            out += [b.text, ""]
        elif isinstance(b, Verdict):
            out += [f"**Result is: {b.word}**", "", b.detail, ""]
        elif isinstance(b, Table):
            out.append("| " + " | ".join(b.headers) + " |")
            out.append("|" + "---|" * len(b.headers))
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
            out.append("")
        elif isinstance(b, Bullets):
            out += [f"- {item}" for item in b.items] + [""]
        else:
            out += [f"![{b.caption}](plots/{b.file})", "", f"*{b.caption}*", ""]
    return "\n".join(out)


_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


# [text](relative/path): a link to a file beside the report; relative paths only (no scheme), so
# nothing a report quotes can become a script or an outside address.
_LINK = re.compile(r"\[([^\]\n]+)\]\(([A-Za-z0-9._/-]+)\)")


def _inline(text: str) -> str:
    escaped = html.escape(text, quote=False)
    linked = _LINK.sub(r'<a href="\2">\1</a>', escaped)
    return _BOLD.sub(r"<strong>\1</strong>", _CODE.sub(r"<code>\1</code>", linked))


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem;
color:#1b1f24;line-height:1.45}
h1{margin-bottom:.3rem}h2{border-bottom:1px solid #d0d7de;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.9rem}
th,td{border:1px solid #d0d7de;padding:.25rem .55rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
code{background:#f6f8fa;padding:0 .25rem;border-radius:3px;font-size:.88em}
.verdict{font-size:1.6rem;font-weight:700;padding:.6rem 1rem;border-radius:6px;display:inline-block;margin:.5rem 0}
.VALID,.COMPARABLE,.PASSED{background:#dafbe1;color:#116329;border:2px solid #2da44e}
.INVALID,.NOT-COMPARABLE,.FAILED{background:#ffebe9;color:#a40e26;border:2px solid #cf222e}
.HOLD,.INCOMPLETE,.other{background:#fff8c5;color:#7d4e00;border:2px solid #d4a72c}
ul.caveats{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:.6rem 1.8rem}
figure{margin:1rem 0}figure img{max-width:100%;border:1px solid #d0d7de}figcaption{color:#57606a;font-size:.9rem}
"""

_NUMERIC = re.compile(r"^[-+]?[0-9][0-9.,]*( ?(ms|s|%|MiB|GiB))?$|^—$")


def to_html(title: str, blocks: list[Block]) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>{html.escape(title)}</h1>"]
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Verdict):
            css = b.word.replace(" ", "-") if b.word in ("VALID", "INVALID", "HOLD", "INCOMPLETE", "COMPARABLE",
                                                          "NOT COMPARABLE", "PASSED", "FAILED") else "other"
            out.append(f'<div class="verdict {css}" id="verdict">Result is: {html.escape(b.word)}</div>')
            out.append(f"<p>{_inline(b.detail)}</p>")
        elif isinstance(b, Table):
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in b.headers)
                       + "</tr></thead><tbody>")
            for row in b.rows:
                cells = "".join(f'<td class="num">{_inline(c)}</td>' if _NUMERIC.match(c) else f"<td>{_inline(c)}</td>"
                                for c in row)
                out.append(f"<tr>{cells}</tr>")
            out.append("</tbody></table>")
        elif isinstance(b, Bullets):
            css = ' class="caveats"' if b.kind == "caveats" else ""
            out.append(f"<ul{css}>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        else:
            data = base64.b64encode(b.png).decode("ascii")
            out.append(f'<figure><img alt="{html.escape(b.caption)}" src="data:image/png;base64,{data}">'
                       f"<figcaption>{_inline(b.caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# The version of what reports hold and how they are laid out, recorded in each passport (as
# protocol.harness.libraries["passport.report-layout"]): `passport verify` re-renders a run's
# reports only when they were laid out by this version (others are checked by their hashes alone),
# so reports can improve without every earlier run folder failing verification. Raise it with any
# change to what a report shows; runs before it was recorded are layout 1.
REPORT_LAYOUT = 2


def render_reports(title: str, blocks: list[Block]) -> dict[str, bytes]:
    """The report files as bytes, by their path in the folder: plots/*.png, report.md, report.html."""
    files = {f"plots/{b.file}": b.png for b in blocks if isinstance(b, Image)}
    files["report.md"] = to_markdown(title, blocks).encode()
    files["report.html"] = to_html(title, blocks).encode()
    return files


def write_reports(folder: Path, title: str, blocks: list[Block]) -> tuple[Path, Path]:
    """Write report.md, report.html and plots/*.png into `folder`; returns (md, html) paths."""
    from harness import real_dir, write_new  # never through a symlink planted in the folder

    folder = Path(folder)
    for name, data in render_reports(title, blocks).items():
        write_new(real_dir((folder / name).parent) / Path(name).name, data)
    return folder / "report.md", folder / "report.html"
