"""A study's network read from a file: an edge list, a CSV with attribute columns, or GraphML.

``population.json``::

    "interaction": {"kind": "file", "path": "contacts.csv"}                    # beside population.json
    "interaction": {"kind": "file", "path": "net.txt", "format": "edgelist", "directed": true}
    "interaction": {"kind": "file", "path": "net.graphml"}

* ``edgelist``: one edge per line, ``source target`` or ``source target weight`` separated by blanks
  (a number in the third place is the edge's ``weight``); ``#`` starts a comment;
* ``csv``: a header line naming a ``source`` and a ``target`` column (``source_column`` and
  ``target_column`` rename them); every other column is an edge attribute and holds numbers, an empty
  cell a missing value (NaN in the arrays, NULL in the ``edges`` table, no key in ``ctx.graph``'s data);
* ``graphml``: one ``<graph>`` whose nodes are agent ids; numeric edge data (``attr.type`` int, long,
  float or double) become edge attributes, a key's ``<default>`` the value of the edges without data, and
  numeric keys of one name (networkx writes a ``long`` and a ``double`` key for a weight holding 1 and
  0.5) one attribute; text edge data is refused naming its key, node data is not read; its
  ``edgedefault`` must agree with the study's ``directed``.

Numbers are in plain decimal notation (``desim.study.files.NUMBER``), as a roster's are.

Every end, and every node a GraphML file declares, must be an agent of the population. A file without
edges, a self-loop, an edge given twice (either way round, on an undirected network), an unknown agent
id, a non-numeric attribute or an attribute name the ``edges`` table cannot hold (given twice, twice but
for case, or one of its own columns: SQL column names ignore case) is refused naming the file, the line
(for GraphML, the edge's place among the file's edges and its ends) and the field, before anything is
written. Attributes are kept with the edges (the ``edges`` table has a column for each) and reach study
code as networkx edge data (``ctx.graph.edges[a, b]["weight"]``) and as arrays aligned with the edges
(``ctx.network``). Each edge's line (GraphML: place) is kept too, so that a check made later, when a
model reads an attribute (``desim.diffusion``'s per-edge parameters), can name it in the file.
"""
from __future__ import annotations

import csv
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from desim.errors import StudyConfigError
from desim.study.files import read_text
from desim.study.rosters import INTEGER, NUMBER, check_named     # one rule for rosters and edges: a CSV cell's
                                                                  # number, a header's column without a name

FORMATS = ("edgelist", "csv", "graphml")
RESERVED = {"source", "target", "run_id"}      # the edges table's own columns (compared ignoring case)
GRAPHML_NUMBERS = {"int": INTEGER, "integer": INTEGER, "long": INTEGER, "float": NUMBER, "double": NUMBER}
NONFINITE = ("nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity")

# (line or GraphML place, where, source id, target id, attributes): one edge as a reader found it
Row = tuple[int, str, str, str, dict[str, float]]


def format_of(path: Path, declared: str | None) -> str:
    if declared:
        return declared
    suffix = path.suffix.lower()
    return {".csv": "csv", ".graphml": "graphml", ".xml": "graphml"}.get(suffix, "edgelist")


def place(fmt: str, number: int, source: str, target: str, attribute: str | None = None) -> str:
    """Where an edge is in its file: ``line 7``, or for GraphML (which has no useful lines: a whole file
    may be one) ``edge 7 (a0 -> a1)``, the seventh ``<edge>`` of the file, so two edges with the same ends
    are told apart; with ``attribute``, its field too, as the readers name it (``line 7, column p``)."""
    where = f"edge {number} ({source} -> {target})" if fmt == "graphml" else f"line {number}"
    if attribute is None:
        return where
    field = {"graphml": f"attribute {attribute}", "edgelist": f"column 3 ({attribute})"}.get(fmt, f"column {attribute}")
    return f"{where}, {field}"


def read_edges(path: Path, fmt: str, ids: list[str], index: dict[str, int], *, directed: bool,
               source_column: str = "source", target_column: str = "target"
               ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """``(source positions, target positions, {attribute: values}, lines)`` of the file's edges, in file
    order; ``lines`` (int32) holds each edge's line, or for GraphML its place among the ``<edge>``s."""
    if fmt == "graphml":
        rows = _graphml(path, ids, index, directed)
    elif fmt == "csv":
        rows = _csv(path, source_column, target_column)
    else:
        text = read_text(path, "network file")
        fast = _plain_edgelist(text, ids, directed)
        if fast is not None:
            return fast
        rows = _edgelist(text, path)
    if not rows:
        raise StudyConfigError(path, [("", 'has no edges (a network without edges is "interaction": '
                                           '{"kind": "none"})')])
    src = np.empty(len(rows), np.int64)
    dst = np.empty(len(rows), np.int64)
    lines = np.fromiter((r[0] for r in rows), np.int32, len(rows))
    names: list[str] = []
    for *_, attrs in rows:
        names += [k for k in attrs if k not in names]
    values = {k: np.full(len(rows), np.nan) for k in names}
    seen: dict[tuple[int, int], str] = {}
    for i, (_, where, a, b, attrs) in enumerate(rows):
        for end in (a, b):
            if end not in index:
                raise StudyConfigError(path, [(where, _unknown(end, ids))])
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
    return src, dst, values, lines


def _unknown(end: str, ids: list[str]) -> str:
    shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
    return f"unknown agent id '{end}' (the population's ids: {shown})"


def _number(text: str, path: Path, where: str, name: str) -> float:
    """A cell as a number in plain decimal notation, as a roster's numbers are read (``1_000`` and ``nan``,
    which Python's ``float`` takes, are refused); an empty cell is a missing value, NaN in the arrays."""
    text = text.strip()
    if not text:
        return math.nan
    if not NUMBER.fullmatch(text):
        what = "is not a finite number" if text.lower() in NONFINITE else "is not a number (edge attributes are numbers)"
        raise StudyConfigError(path, [(f"{where}, column {name}", f"'{text}' {what}")])
    x = float(text)
    if not math.isfinite(x):
        raise StudyConfigError(path, [(f"{where}, column {name}", f"'{text}' is not a finite number")])
    return x


def _clash(names: list[str]) -> tuple[int, int] | None:
    """The first two of ``names`` the ``edges`` table cannot both hold, ``(earlier, later)`` positions:
    the same name twice, or two names that differ only by case (DuckDB's column names ignore case, so
    ``Weight`` beside ``weight`` would come out as ``weight_1``)."""
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        j = first.setdefault(name.lower(), i)
        if j != i:
            return j, i
    return None


def _plain_edgelist(text: str, ids: list[str], directed: bool
                    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], np.ndarray] | None:
    """The common large file, ``source target`` per line separated by one space, read in C (Arrow's CSV
    reader, the ids looked up in one pass): 3,000,000 edges in about a second instead of thirteen. Anything
    else, and any file with a problem (an unknown id, a self-loop, an edge twice, a line of three fields), is
    left to the line-by-line reader, which names the line at fault; so the answer is the same either way."""
    if not text.strip() or any(c in text for c in ("#", "\t", "\r", "  ")):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    data = text.encode()
    try:
        table = pacsv.read_csv(pa.BufferReader(data),
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
    lines = _filled_lines(data)
    if len(lines) != len(src):              # not one row per non-empty line: let the line reader say why
        return None
    return src, dst, {}, lines


def _filled_lines(data: bytes) -> np.ndarray:
    """The numbers (from 1) of the non-empty lines of ``data``: the lines Arrow's reader made rows of (it
    skips empty ones), found in numpy so that a large file pays no Python loop for them."""
    newline = np.flatnonzero(np.frombuffer(data, np.uint8) == ord("\n"))
    starts = np.concatenate(([0], newline + 1))
    ends = np.append(newline, len(data))
    return (np.flatnonzero(ends > starts) + 1).astype(np.int32)


def _edgelist(text: str, path: Path) -> list[Row]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        parts = body.split()
        where = f"line {n}"
        if len(parts) not in (2, 3):
            hint = ("; networkx's write_edgelist writes each edge's attributes as a {...} dict: write it with "
                    "data=False, data=['weight'], or as CSV with attribute columns" if "{" in body else "")
            raise StudyConfigError(path, [(where, f"expected 'source target' or 'source target weight', "
                                           f"got {len(parts)} fields{hint}")])
        attrs = {"weight": _number(parts[2], path, where, "3 (weight)")} if len(parts) == 3 else {}
        rows.append((n, where, parts[0], parts[1], attrs))
    return rows


def _csv(path: Path, source: str, target: str) -> list[Row]:
    text = read_text(path, "network file")
    if not text.strip():
        return []
    reader = csv.reader(text.splitlines(keepends=True))
    header = [h.strip() for h in next(reader, [])]
    for name in (source, target):
        if name not in header:
            raise StudyConfigError(path, [("line 1", f"no '{name}' column (columns: {', '.join(header) or 'none'})")])
    check_named(path, header)
    clash = _clash(header)
    if clash:
        a, b = (header[i] for i in clash)
        what = (f"column '{b}' is given twice" if a == b else
                f"columns '{a}' and '{b}' differ only by case (the edges table's column names ignore case)")
        raise StudyConfigError(path, [("line 1", f"{what}: columns {clash[0] + 1} and {clash[1] + 1}; "
                                                 "name each column once")])
    s, t = header.index(source), header.index(target)
    extra = [(i, h) for i, h in enumerate(header) if i not in (s, t)]
    for i, name in extra:
        if name.lower() in RESERVED:
            raise StudyConfigError(path, [("line 1", f"column '{name}' cannot be an edge attribute (the edges table "
                                           f"has {', '.join(sorted(RESERVED))}, in any case; name it otherwise)")])
    rows = []
    for row in reader:
        n = reader.line_num
        where = f"line {n}"
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise StudyConfigError(path, [(where, f"{len(row)} fields, but the header has {len(header)}")])
        attrs = {h: _number(row[i], path, where, h) for i, h in extra}
        rows.append((n, where, row[s].strip(), row[t].strip(), attrs))
    return rows


def _local(tag: str) -> str:
    """An element's name without its XML namespace (``{http://graphml.graphdrawing.org/xmlns}edge``)."""
    return tag.rsplit("}", 1)[-1]


def _graphml(path: Path, ids: list[str], index: dict[str, int], directed: bool) -> list[Row]:
    """The edges of a GraphML file, read with ElementTree rather than networkx's reader: the checks need
    what that reader drops (the edges' order in the file, a second graph, the declared direction, which
    key a value that is not a number belongs to), and a network of arrays does not need its graph."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise StudyConfigError(path, [("", "network file not found")]) from None
    except OSError as e:
        raise StudyConfigError(path, [("", f"cannot be read: {e.strerror or e}")]) from None
    if not data.strip():
        return []
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise StudyConfigError(path, [("", f"cannot be read as GraphML: {e}")]) from None
    graphs = [e for e in root.iter() if _local(e.tag) == "graph"]
    if len(graphs) != 1:
        raise StudyConfigError(path, [("", "cannot be read as GraphML: no <graph> element" if not graphs else
                                       f"holds {len(graphs)} <graph> elements (a nested or second graph); a study's "
                                       "network is one graph: keep one per file")])
    graph = graphs[0]
    default = graph.get("edgedefault")
    if default in ("directed", "undirected") and (default == "directed") != directed:
        raise StudyConfigError(path, [("graph", _direction(f'declares edgedefault="{default}"', directed))])
    keys = _keys(path, root, data)
    defaults = _edge_defaults(path, keys)
    used: dict[str, str] = {}           # attribute name -> the first key id giving it, in the order first used
    used.update((name, key_id) for name, (key_id, _) in defaults.items())
    for n, node in enumerate((e for e in graph if _local(e.tag) == "node"), 1):
        if node.get("id") not in index:
            raise StudyConfigError(path, [(f"node {n}", _unknown(str(node.get("id")), ids))])
    rows = []
    for element in graph:
        tag = _local(element.tag)
        if tag == "hyperedge":
            raise StudyConfigError(path, [("", "holds a <hyperedge>: a study's network has edges of two ends")])
        if tag != "edge":
            continue
        n = len(rows) + 1
        a, b = element.get("source"), element.get("target")
        where = place("graphml", n, str(a), str(b))
        if a is None or b is None:
            raise StudyConfigError(path, [(where, "an <edge> needs a source and a target")])
        own = element.get("directed")
        if own in ("true", "false") and (own == "true") != directed:
            raise StudyConfigError(path, [(where, _direction(f'has an edge with directed="{own}"', directed))])
        attrs: dict[str, float] = {}
        given: dict[str, str] = {}      # attribute name -> the key id that gave it on this edge
        for d in element:
            if _local(d.tag) != "data" or len(d) or d.text is None or not d.text.strip():
                continue            # drawing markup (yEd's), or no value: the edge has no such attribute
            key_id = d.get("key")
            if key_id not in keys:
                raise StudyConfigError(path, [(where, f"<data key=\"{key_id}\"> names no <key> of the file")])
            key = keys[key_id]
            if key.get("for", "all") not in ("edge", "all"):
                raise StudyConfigError(path, [(where, (
                    f"<data key=\"{key_id}\"> is on an edge, but key '{key_id}' is declared for=\"{key.get('for')}\" "
                    "(GraphML: its values belong to those elements, not to edges); declare the key for=\"edge\", or "
                    "give the edges a key of their own"))])
            name, kind = key.get("attr.name") or key_id, key.get("attr.type", "string")
            value = _graphml_number(d.text.strip(), kind, key_id, name, path, f"{where}, attribute {name}")
            if name in given and given[name] == key_id:
                raise StudyConfigError(path, [(f"{where}, attribute {name}", f"key '{key_id}' is given twice; "
                                                                             "give it once")])
            if name in given:       # keys of one name are one attribute: an edge has one value of it
                raise StudyConfigError(path, [(f"key {key_id}", (
                    f"keys '{given[name]}' and '{key_id}' both name the edge attribute '{name}', and {where} has "
                    f"a value of each ({attrs[name]:g} and {value:g}); give each edge one"))])
            given[name] = key_id
            used.setdefault(name, key_id)
            attrs[name] = value
        for name, (_, value) in defaults.items():
            attrs.setdefault(name, value)
        rows.append((n, where, a, b, attrs))
    _check_keys(path, [(key_id, name) for name, key_id in used.items()])
    return rows


def _keys(path: Path, root: ET.Element, data: bytes) -> dict[str | None, ET.Element]:
    """The file's ``<key>``s by id. An id declared twice is refused, naming it and its lines: GraphML's key ids
    are unique, since a ``<data key="d0">`` names its key by id alone, and a reader keeping the last of two
    (a ``double`` after a ``string``, or the other way round) would read or refuse the values by a
    declaration the file's author may not have meant."""
    keys: dict[str | None, ET.Element] = {}
    for key in root:
        if _local(key.tag) != "key":
            continue
        key_id = key.get("id")
        if key_id in keys:
            declared = re.finditer(rb"<(?:[\w.-]+:)?key\b[^>]*?\sid\s*=\s*([\"'])" + re.escape(str(key_id).encode())
                                   + rb"\1", data)
            lines = [data.count(b"\n", 0, m.start()) + 1 for m in declared][:2]
            where = (f" (both on line {lines[0]})" if lines[0] == lines[1] else f" (lines {lines[0]} and {lines[1]})") \
                if len(lines) == 2 else ""
            raise StudyConfigError(path, [(f"key {key_id}", (
                f"key id '{key_id}' is declared twice{where}: a <data key=\"{key_id}\"> could mean either; give each "
                "<key> its own id"))])
        keys[key_id] = key
    return keys


def _edge_defaults(path: Path, keys: dict[str | None, ET.Element]) -> dict[str, tuple[str, float]]:
    """``{attribute name: (key id, value)}`` of the keys for edges (``for`` "edge" or "all", the GraphML
    default) that declare a ``<default>``: as the GraphML specification says, the value of every edge
    without a ``<data>`` of its own for that attribute. Keys that share a name (networkx writes one per
    Python type) must not declare different defaults: which would an edge without data get?"""
    out: dict[str, tuple[str, float]] = {}
    for key_id, key in keys.items():
        if key.get("for", "all") not in ("edge", "all"):
            continue
        found = next((d for d in key if _local(d.tag) == "default"), None)
        if found is None or found.text is None or not found.text.strip():
            continue
        name, kind = key.get("attr.name") or str(key_id), key.get("attr.type", "string")
        value = _graphml_number(found.text.strip(), kind, str(key_id), name, path, f"key {key_id}, <default>")
        if name in out and out[name][1] != value:
            raise StudyConfigError(path, [(f"key {key_id}", f"keys '{out[name][0]}' and '{key_id}' both name the edge "
                                           f"attribute '{name}', with different defaults ({out[name][1]:g} and "
                                           f"{value:g}); give one default")])
        out.setdefault(name, (str(key_id), value))
    return out


def _direction(what: str, directed: bool) -> str:
    """The message for a GraphML file whose direction contradicts the study's ``directed``: the study's
    setting decides (it is what every other network kind, the store and the dashboard read), so the
    two must agree rather than one silently winning."""
    setting = "true" if directed else "false (the default)"
    return (f"the file {what}, but population.json's interaction.directed is {setting}; set \"directed\": "
            f"{'false' if directed else 'true'} in interaction, or write the file as "
            f"{'directed' if directed else 'undirected'}")


def _graphml_number(text: str, kind: str, key_id: str, name: str, path: Path, where: str) -> float:
    """A ``<data>`` (or ``<default>``) value of key ``key_id`` as a number. Edge attributes are numbers
    only: they are kept as float arrays (``ctx.network``) and float columns of the ``edges`` table, so a
    key of another ``attr.type`` (string, boolean) given on an edge is refused, naming it, rather than
    dropped while a model may read it; networkx's int and float keys of one name read as one attribute."""
    pattern = GRAPHML_NUMBERS.get(kind)
    if pattern is None:
        raise StudyConfigError(path, [(where, (
            f"'{text}' is not a number: key '{key_id}' declares attr.type=\"{kind}\", and edge attributes are "
            "numbers (attr.type int, long, float or double; the edges table keeps no text); recode "
            f"'{name}' as numbers, or remove the key's <data> from the edges"))])
    if text.lower() in NONFINITE:
        raise StudyConfigError(path, [(where, f"'{text}' is not a finite number")])
    if not pattern.fullmatch(text):
        raise StudyConfigError(path, [(where, f"'{text}' cannot be read as {kind} (key '{key_id}' declares "
                                              f"attr.type=\"{kind}\")")])
    x = float(text)
    if not math.isfinite(x):
        raise StudyConfigError(path, [(where, f"'{text}' is not a finite number")])
    return x


def _check_keys(path: Path, named: list[tuple[str, str]]) -> None:
    """The GraphML attributes the edges have, as ``(first key id giving it, attribute name)``: no two names
    that differ only by case, and none of the edges table's own columns, as a CSV header's. Several keys
    of one name are one attribute (networkx writes a ``long`` and a ``double`` key when a weight holds
    both 1 and 0.5): every edge attribute is a float, so they do not conflict."""
    clash = _clash([name for _, name in named])
    if clash:
        (k1, a), (k2, b) = (named[i] for i in clash)
        raise StudyConfigError(path, [(f"key {k2}", f"keys '{k1}' ('{a}') and '{k2}' ('{b}') name edge attributes "
                                                    "that differ only by case (the edges table's column names ignore "
                                                    "case); name each once")])
    for key_id, name in named:
        if name.lower() in RESERVED:
            raise StudyConfigError(path, [(f"key {key_id}", f"'{name}' cannot be an edge attribute (the edges table "
                                                           f"has {', '.join(sorted(RESERVED))}, in any case; name "
                                                           "it otherwise)")])
