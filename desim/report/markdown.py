"""The report as Markdown, with figures as PNG files beside it (for a wiki, a
pull request or a notebook)."""
from __future__ import annotations

from desim.report.content import Report, Table


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table_md(t: Table) -> str:
    lines = ["| " + " | ".join(_cell(c) or " " for c in t.columns) + " |",
             "|" + "|".join("---" for _ in t.columns) + "|"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in t.rows]
    if t.note:
        lines += ["", f"_{t.note}_"]
    return "\n".join(lines)


def render(report: Report, figure_files: dict[str, str]) -> str:
    """``figure_files`` maps a figure name to its file name, relative to the Markdown file."""
    out = [f"# {report.title}", "", f"_{report.subtitle}_", ""]
    for section in report.sections:
        out += [f"## {section.title}", ""]
        for p in section.paragraphs:
            out += [p, ""]
        for fig in section.figures:
            out += [f"![{fig.title}]({figure_files[fig.name]})", ""]
            if fig.caption:
                out += [f"_{fig.caption}_", ""]
        for t in section.tables:
            out += [table_md(t), ""]
    return "\n".join(out)
