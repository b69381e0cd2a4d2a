"""The report as one self-contained HTML file: figures are base64 data URIs,
the style is inline, nothing is fetched, so it opens offline and can be mailed."""
from __future__ import annotations

import base64
from html import escape

from desim.report.content import Report, Table
from desim.report.numbers import CLIPPED

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 960px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.1em; } .subtitle { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.85em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.85em; } .note { color: #777; font-size: 0.85em; }
.scroll { max-width: 100%; overflow-x: auto; }
th { overflow-wrap: anywhere; } td { overflow-wrap: anywhere; max-width: 28em; }
"""


def _is_number(text: str) -> bool:
    try:
        float(text.removesuffix(CLIPPED))      # an interval end clipped at its bounds is a number too
        return True
    except ValueError:
        return False


def table_html(t: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in t.columns)
    body = []
    for row in t.rows:
        cells = "".join(f'<td class="num">{escape(v)}</td>' if t.align_numbers and _is_number(v)
                        else f"<td>{escape(v)}</td>"
                        for v in row)
        body.append(f"<tr>{cells}</tr>")
    note = f'<p class="note">{escape(t.note)}</p>' if t.note else ""
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
            f"</tbody></table></div>{note}")


def render(report: Report) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             f"<title>{escape(report.title)}: {escape(report.subtitle)}</title>",
             f"<style>{STYLE}</style>", "</head>", "<body>",
             f"<h1>{escape(report.title)}</h1>", f'<p class="subtitle">{escape(report.subtitle)}</p>']
    for section in report.sections:
        parts.append(f"<section><h2>{escape(section.title)}</h2>")
        parts += [f"<p>{escape(p)}</p>" for p in section.paragraphs]
        for fig in section.figures:
            data = base64.b64encode(fig.png).decode("ascii")
            parts.append(f'<figure id="fig-{escape(fig.name)}"><img alt="{escape(fig.title)}" '
                         f'src="data:image/png;base64,{data}">'
                         f"<figcaption>{escape(fig.caption)}</figcaption></figure>")
        parts += [table_html(t) for t in section.tables]
        parts.append("</section>")
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)
