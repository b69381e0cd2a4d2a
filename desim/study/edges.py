"""A study's network read from a file: an edge list, a CSV with attribute columns, or GraphML.

``population.json``::

    "interaction": {"kind": "file", "path": "contacts.csv"}                    # beside population.json
    "interaction": {"kind": "file", "path": "net.txt", "format": "edgelist", "directed": true}
    "interaction": {"kind": "file", "path": "net.graphml"}

* ``edgelist``: one edge per line, ``source target`` or ``source target weight`` separated by blanks
  (a number in the third place is the edge's ``weight``); ``#`` starts a comment;
* ``csv``: a header line naming a ``source`` and a ``target`` column (``source_column`` and
  ``target_column`` rename them); every other column is an edge attribute and holds numbers;
* ``graphml``: nodes named by agent ids; numeric edge data become edge attributes.

Every end must be an agent of the population. A self-loop, an edge given twice (either way round,
on an undirected network), an unknown agent id or a non-numeric attribute is refused naming the file,
the line (an edge's ends for GraphML) and the field, before anything is written. Attributes are kept
with the edges (the ``edges`` table has a column for each) and reach study code as networkx edge data
(``ctx.graph.edges[a, b]["weight"]``) and as arrays aligned with the edges (``ctx.network``).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np

from desim.errors import StudyConfigError
from desim.study.files import read_text

FORMATS = ("edgelist", "csv", "graphml")
RESERVED = {"source", "target", "run_id"}      # the edges table's own columns


def format_of(path: Path, declared: str | None) -> str:
    if declared:
        return declared
    suffix = path.suffix.lower()
    return {".csv": "csv", ".graphml": "graphml", ".xml": "graphml"}.get(suffix, "edgelist")


def read_edges(path: Path, fmt: str, ids: list[str], index: dict[str, int], *, directed: bool,
               source_column: str = "source", target_column: str = "target"
               ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """``(source positions, target positions, {attribute: values})`` of the file's edges, in file order."""
    if fmt == "graphml":
        rows = _graphml(path)
    elif fmt == "csv":
        rows = _csv(path, source_column, target_column)
    else:
        text = read_text(path, "network file")
        fast = _plain_edgelist(text, ids, directed)
        if fast is not None:
            return fast
        rows = _edgelist(text, path)
    src = np.empty(len(rows), np.int64)
    dst = np.empty(len(rows), np.int64)
    names: list[str] = []
    for _, _, _, attrs in rows:
        names += [k for k in attrs if k not in names]
    values = {k: np.full(len(rows), np.nan) for k in names}
    seen: dict[tuple[int, int], str] = {}
    for i, (where, a, b, attrs) in enumerate(rows):
        for end in (a, b):
            if end not in index:
                shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
                raise StudyConfigError(path, [(where, f"unknown agent id '{end}' (the population's ids: {shown})")])
        u, v = index[a], index[b]
        if u == v:
            raise StudyConfigError(path, [(where, f"self-loop '{a}' -> '{a}': an agent is not its own neighbour")])
        key = (u, v) if directed or u < v else (v, u)
        if key in seen:
            raise StudyConfigError(path, [(where, f"edge '{a}' - '{b}' appears twice (first at {seen[key]})")])
        seen[key] = where
        src[i], dst[i] = u, v
        for k, x in attrs.items():
            values[k][i] = x
    return src, dst, values


def _number(text: str, path: Path, where: str, name: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise StudyConfigError(path, [(f"{where}, column {name}", f"'{text}' is not a number (edge attributes "
                                       "are numbers)")]) from None
    if not math.isfinite(x):
        raise StudyConfigError(path, [(f"{where}, column {name}", f"'{text}' is not a finite number")])
    return x


def _plain_edgelist(text: str, ids: list[str], directed: bool
                    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None:
    """The common large file, ``source target`` per line separated by one space, read in C (Arrow's CSV
    reader, the ids looked up in one pass): 3,000,000 edges in about a second instead of thirteen. Anything
    else, and any file with a problem (an unknown id, a self-loop, an edge twice, a line of three fields), is
    left to the line-by-line reader, which names the line at fault; so the answer is the same either way."""
    if not text.strip() or any(c in text for c in ("#", "\t", "\r", "  ")):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    try:
        table = pacsv.read_csv(pa.BufferReader(text.encode()),
                               read_options=pacsv.ReadOptions(column_names=["source", "target"]),
                               parse_options=pacsv.ParseOptions(delimiter=" ", quote_char=False),
                               convert_options=pacsv.ConvertOptions(column_types={"source": pa.string(),
                                                                                  "target": pa.string()}))
    except pa.ArrowInvalid:
        return None
    known = pa.array(ids, pa.string())
    ends = [pc.index_in(table.column(c), value_set=known) for c in ("source", "target")]
    if any(e.null_count for e in ends):
        return None
    src, dst = (e.to_numpy().astype(np.int64) for e in ends)
    if np.any(src == dst):
        return None
    lo, hi = (src, dst) if directed else (np.minimum(src, dst), np.maximum(src, dst))
    pairs = np.sort(lo * len(ids) + hi)     # (np.unique is a hundred times slower here)
    if np.any(pairs[1:] == pairs[:-1]):
        return None
    return src, dst, {}


def _edgelist(text: str, path: Path) -> list[tuple[str, str, str, dict[str, float]]]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        parts = body.split()
        where = f"line {n}"
        if len(parts) not in (2, 3):
            raise StudyConfigError(path, [(where, f"expected 'source target' or 'source target weight', "
                                           f"got {len(parts)} fields")])
        attrs = {"weight": _number(parts[2], path, where, "3 (weight)")} if len(parts) == 3 else {}
        rows.append((where, parts[0], parts[1], attrs))
    return rows


def _csv(path: Path, source: str, target: str) -> list[tuple[str, str, str, dict[str, float]]]:
    reader = csv.reader(read_text(path, "network file").splitlines(keepends=True))
    header = [h.strip() for h in next(reader, [])]
    for name in (source, target):
        if name not in header:
            raise StudyConfigError(path, [("line 1", f"no '{name}' column (columns: {', '.join(header) or 'none'})")])
    s, t = header.index(source), header.index(target)
    extra = [(i, h) for i, h in enumerate(header) if i not in (s, t)]
    for _, name in extra:
        if name in RESERVED or not name:
            raise StudyConfigError(path, [("line 1", f"column '{name}' cannot be an edge attribute (the edges table "
                                           f"has {', '.join(sorted(RESERVED))}; name it otherwise)")])
    rows = []
    for row in reader:
        where = f"line {reader.line_num}"
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise StudyConfigError(path, [(where, f"{len(row)} fields, but the header has {len(header)}")])
        attrs = {h: _number(row[i].strip(), path, where, h) for i, h in extra if row[i].strip() != ""}
        rows.append((where, row[s].strip(), row[t].strip(), attrs))
    return rows


def _graphml(path: Path) -> list[tuple[str, str, str, dict[str, float]]]:
    import networkx as nx
    try:
        g = nx.read_graphml(path)
    except FileNotFoundError:
        raise StudyConfigError(path, [("", "network file not found")]) from None
    except Exception as e:  # a malformed file: networkx's parser says what is wrong
        raise StudyConfigError(path, [("", f"cannot be read as GraphML: {e}")]) from None
    rows = []
    for a, b, data in g.edges(data=True):
        where = f"edge {a} -> {b}"
        attrs: dict[str, Any] = {}
        for k, x in data.items():
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise StudyConfigError(path, [(f"{where}, attribute {k}", f"{x!r} is not a number (edge "
                                               "attributes are numbers)")])
            attrs[k] = float(x)
        rows.append((where, str(a), str(b), attrs))
    return rows
