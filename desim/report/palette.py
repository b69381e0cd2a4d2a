"""Colours of state categories, the same in the dashboard, the report's figures and the diffusion player.

A study declares the colours it means in ``study.json``::

    "state_colors": {"status": {"S": "#4c9a5b", "I": "#d62728", "R": "#9e9e9e"}}

Any category it does not name takes the next unused colour of
:data:`PALETTE` (a colour-blind-safe set, Okabe-Ito order), in sorted
category order, so the same study always draws ``spreader`` in the same
colour. Booleans (``false``/``true``) default to grey and a strong blue, the
"off/on" reading people expect.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from desim.study.files import StudyFile

PALETTE = ["#0072b2", "#d55e00", "#009e73", "#e69f00", "#cc79a7", "#56b4e9", "#f0e442", "#7f3c8d",
           "#8c564b", "#17becf"]
BOOLEAN = {"false": "#b0b7c3", "true": "#0072b2"}
MISSING = "#cccccc"


def category_colors(categories: list[str], declared: dict[str, str] | None = None) -> list[str]:
    """One colour per category (in the given order): the declared ones, then the palette."""
    declared = dict(declared or {})
    if not declared and set(categories) <= set(BOOLEAN):
        declared = dict(BOOLEAN)
    used = {c.lower() for c in declared.values()}
    free = iter([c for c in PALETTE if c.lower() not in used])
    out = {}
    for cat in sorted(categories):
        if cat in declared:
            out[cat] = declared[cat]
        elif cat == "null":
            out[cat] = MISSING
        else:
            out[cat] = next(free, None) or PALETTE[len(out) % len(PALETTE)]
    return [out[c] for c in categories]


def declared_colors(study: "StudyFile | None", field: str) -> dict[str, str]:
    """The colours ``study.json`` declares for one state field (``{}`` when none, or no valid study.json)."""
    return dict(study.state_colors.get(field, {})) if study is not None else {}
