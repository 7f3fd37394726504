"""The report rendered: Markdown (figures linked under `figures/`) and one self-contained HTML page
(figures inline), from the document `build_report` makes; nothing here knows an evaluation."""

from __future__ import annotations

import base64
import html
import io
import re
from typing import TYPE_CHECKING

from lm_eval_longmem.report.blocks import FigureBlock, Report, Table, figure_stem

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TITLE = "Long-context memory report"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    """The report as Markdown; figures are linked as `figures/<stem>.png` (`blocks.figure_stem`)."""
    out = [f"# {TITLE}", "", f"Runs: {len(report.runs)} ({', '.join(report.labels)})", ""]
    for section in report.sections:
        out += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Table):
                out.append("| " + " | ".join(map(_md_cell, block.header)) + " |")
                out.append("|" + "---|" * len(block.header))
                out += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in block.rows]
            elif isinstance(block, FigureBlock):
                out.append(f"![{block.caption}](figures/{figure_stem(block)}.png)")
            else:
                out.append(block)
            out.append("")
    return "\n".join(out)


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
th { background: #f3f3f3; overflow-wrap: normal; } td { font-variant-numeric: tabular-nums; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #555; } code { background: #f5f5f5; padding: 0 .2em; }
"""


def _inline(text: str) -> str:
    """HTML of a paragraph's Markdown: escaped, with `code` spans and **bold** (which may hold code spans)."""
    spans: list[str] = []

    def hold(match: re.Match) -> str:  # a code span's text is never read as Markdown
        spans.append(f"<code>{_breakable(match[1])}</code>")
        return f"\x00{len(spans) - 1}\x00"

    held = html.escape(re.sub(r"`([^`]+)`", hold, text))
    bold = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", held)
    return re.sub("\x00(\\d+)\x00", lambda m: spans[int(m[1])], bold)


def _breakable(text: str) -> str:
    """Escaped text with a line-break opportunity (`<wbr>`) after every `/`, `,`, `=` and `_`, so a long path,
    argument list or lm_eval's `__`-joined model folder wraps at its separators rather than widening the
    page (browsers also break after a hyphen; the CSS breaks a cell's text still longer). A header breaks only
    there and between words (`overflow-wrap: normal`): its words set the column's narrowest width, so neither
    it nor a short cell under it breaks inside a word ("bac|ken|d")."""
    return re.sub(r"([/,=_])", r"\1<wbr>", html.escape(text))


def figure_png(fig: Figure, dpi: int = 150) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def render_html(report: Report, pngs: dict[str, bytes]) -> str:
    """The report as one HTML page with every figure inline (base64 PNG)."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(TITLE)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(TITLE)}</h1>",
        f"<p>Runs: {len(report.runs)} ({html.escape(', '.join(report.labels))})</p>",
    ]
    for section in report.sections:
        out.append(f"<h2>{html.escape(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, Table):
                out.append(
                    "<table><thead><tr>"
                    + "".join(f"<th>{_breakable(h)}</th>" for h in block.header)
                    + "</tr></thead><tbody>"
                )
                out += ["<tr>" + "".join(f"<td>{_breakable(c)}</td>" for c in row) + "</tr>" for row in block.rows]
                out.append("</tbody></table>")
            elif isinstance(block, FigureBlock):
                data = base64.b64encode(pngs[block.name]).decode("ascii")
                out.append(
                    f'<figure><img alt="{html.escape(block.caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(block.caption)}</figcaption></figure>"
                )
            else:
                out.append(f"<p>{_inline(block)}</p>")
    out.append("</body></html>")
    return "\n".join(out)
