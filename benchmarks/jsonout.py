"""The ``--json PATH`` option of the benchmarks: the figures a run measured, as one JSON object.

The printed Markdown is for RESULTS.md and for people; the JSON is for the smoke tests, which check
what the figures mean (positive, consistent with each other, flags true) rather than the layout of a
table. Each script builds the object from the same values it prints.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="also write the figures measured as one JSON object to PATH")


def plain(value):
    """JSON-ready: a NaN (a figure not measured, such as Mesa's under --no-mesa) becomes null, as JSON
    has no NaN; tuples become lists, paths strings, numpy scalars Python numbers."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "dtype") and hasattr(value, "item"):      # a numpy scalar
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def write(path: Path | None, figures: dict) -> None:
    """Write ``figures`` to ``path`` (nothing when the option was not given)."""
    if path is not None:
        Path(path).write_text(json.dumps(plain(figures), indent=1, allow_nan=False) + "\n", encoding="utf-8")
