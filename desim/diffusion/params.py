"""A model's parameters: declared once with their ranges, checked on construction, resolved per run.

A numeric parameter is given in ``simulation.json`` in one of three forms:

* a number (or ``"$name"``, a study parameter): the same value for every node or edge;
* ``{"attribute": "recovery_rate"}``: one value per node, the persona attribute of that name
  (a roster column, or a provider's attribute); ``"default"`` covers personas without it;
* ``{"edge": "p"}``: one value per edge, the networkx edge attribute of that name on
  ``ctx.graph``; ``"default"`` covers edges without it.

Which forms a parameter accepts is part of its declaration (``per_node``, ``per_edge``):
a recovery rate may vary by node, a transmission probability by node (the susceptibility
of the node at risk) or by edge. Numbers are checked against the declared range on
construction (so ``desim run`` stops before anything is written, naming
``simulation/simulation.json`` and the field); per-node and per-edge values are checked when
the run starts, naming the agent or the edge.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from desim.diffusion.network import MissingEdgeValue, Network
from desim.errors import StudyConfigError
from desim.records import is_number
from desim.versions import POPULATION_FILE, SIMULATION_FILE


@dataclass(frozen=True)
class Param:
    """One declared parameter: ``lo <= value <= hi`` (``lo_open``/``hi_open`` make a bound strict)."""

    name: str
    default: Any = None           # None: required
    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    per_node: bool = False
    per_edge: bool = False
    choices: tuple = ()           # a text parameter: one of these
    doc: str = ""

    def range_text(self) -> str:
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        if self.integer:
            return f"an integer >= {self.lo:g}" if self.hi == math.inf else f"an integer in [{self.lo:g}, {self.hi:g}]"
        if self.hi == math.inf:
            return f"{'>' if self.lo_open else '>='} {self.lo:g}"
        return f"in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}"

    def accepts(self, x: float) -> bool:
        lo_ok = x > self.lo if self.lo_open else x >= self.lo
        hi_ok = x < self.hi if self.hi_open else x <= self.hi
        return lo_ok and hi_ok


def prob(name: str, default: Any = None, per_node: bool = True, per_edge: bool = False, doc: str = "") -> Param:
    return Param(name, default, 0.0, 1.0, per_node=per_node, per_edge=per_edge, doc=doc)


class Problems:
    """Collects (field, message) pairs and raises them as one ``StudyConfigError``."""

    def __init__(self, file: str, where: str):
        self.file, self.where, self.items = file, where, []

    def add(self, name: str, message: str) -> None:
        self.items.append((f"{self.where}.{name}" if self.where else name, message))

    def raise_any(self) -> None:
        if self.items:
            raise StudyConfigError(self.file, self.items)


def check_args(owner: str, declared: dict[str, Param], given: dict[str, Any], file: str = SIMULATION_FILE,
               where: str = "decision.args") -> dict[str, Any]:
    """The arguments with defaults filled in, or a ``StudyConfigError`` listing every problem:
    an unknown name, a missing required one, a value of the wrong kind or out of range."""
    problems = Problems(file, where)
    out: dict[str, Any] = {}
    for name in given:
        if name not in declared:
            problems.add(name, f"unknown parameter of {owner} (it takes {', '.join(declared) or 'none'})")
    for name, p in declared.items():
        if name not in given:
            if p.default is None:
                problems.add(name, f"required by {owner} ({p.doc or p.range_text()})")
            else:
                out[name] = p.default
            continue
        value = given[name]
        message = check_value(p, value)
        if message:
            problems.add(name, message)
        out[name] = value
    problems.raise_any()
    return out


def check_value(p: Param, value: Any) -> str | None:
    """What is wrong with ``value`` for ``p`` (None when it is fine)."""
    if isinstance(value, dict):
        forms = [k for k, ok in (("attribute", p.per_node), ("edge", p.per_edge)) if ok]
        if not forms:
            return f"must be a number {p.range_text()} (it cannot vary by node or edge)"
        keys = set(value)
        kind = [k for k in ("attribute", "edge") if k in keys]
        if len(kind) != 1 or kind[0] not in forms or keys - {kind[0], "default"}:
            allowed = " or ".join('{"%s": NAME, "default": x}' % f for f in forms)
            return f"a per-{'node' if 'attribute' in forms else 'edge'} value is {allowed} (got {value})"
        if not isinstance(value[kind[0]], str) or not value[kind[0]]:
            return f"{kind[0]} must name an attribute (got {value[kind[0]]!r})"
        if "default" in value:
            inner = check_value(p, value["default"])
            if inner:
                return f"default {inner}"
        return None
    if p.choices:
        return None if value in p.choices else f"must be {p.range_text()} (got {value!r})"
    if not is_number(value):
        return f"must be a number {p.range_text()} (got {type(value).__name__} {value!r})"
    if p.integer and not float(value).is_integer():
        return f"must be {p.range_text()} (got {value})"
    if not math.isfinite(value) or not p.accepts(float(value)):
        return f"must be {p.range_text()} (got {value})"
    return None


class Value:
    """A resolved numeric parameter: a scalar, one value per node, or one value per CSR entry."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: float | np.ndarray):
        self.kind, self.value = kind, value

    @property
    def scalar(self) -> bool:
        return self.kind == "scalar"

    def nodes(self, nodes: np.ndarray) -> float | np.ndarray:
        """The value at these nodes (a per-edge value has no node form)."""
        return self.value if self.kind == "scalar" else self.value[nodes]

    def edges(self, positions: np.ndarray, targets: np.ndarray) -> float | np.ndarray:
        """The value at these CSR entries; a per-node value is read at the entries' ``targets``."""
        if self.kind == "scalar":
            return self.value
        return self.value[positions] if self.kind == "edge" else self.value[targets]

    def everywhere(self, n: int) -> np.ndarray:
        """One value per node (scalars broadcast)."""
        return np.full(n, float(self.value)) if self.kind == "scalar" else self.value


def resolve(owner: str, p: Param, value: Any, ctx, network: Network | None = None,
            direction: str = "out") -> Value:
    """Turn a checked argument into a ``Value`` for this run, checking every node's or edge's value."""
    if not isinstance(value, dict):
        return Value("scalar", float(value))
    default = value.get("default")
    if "attribute" in value:
        name = value["attribute"]
        out = np.empty(len(ctx.personas), np.float64)
        # the attributes as the interventions left them once an event has changed any (else the personas')
        iv = ctx.interventions
        changed = iv.attributes if iv.attribute_changes else None
        for i, persona in enumerate(ctx.personas):
            v = (persona.attributes if changed is None else changed[persona.agent_id]).get(name)
            if v is None:       # missing, or an empty roster cell: the default stands in for both
                v = default
            if v is None and not any(name in q.attributes for q in ctx.personas):     # a misspelt name, a column
                held = sorted({k for q in ctx.personas for k in q.attributes})        # the roster lacks
                raise StudyConfigError(POPULATION_FILE, [("personas", (
                    f"no agent has attribute '{name}' (their attributes: {', '.join(held) or 'none'}), which "
                    f"{owner}'s {p.name} reads (decision.args.{p.name}; or give a \"default\")"))])
            if v is None or not is_number(v):
                what = "has no attribute" if v is None else f"has {name} = {v!r}, not a number:"
                raise StudyConfigError(POPULATION_FILE, [(f"agent '{persona.agent_id}'", (
                    f"{what} '{name}', which {owner}'s {p.name} reads (decision.args.{p.name}; "
                    f"give every agent one, or a \"default\")" if v is None else
                    f"{what} {owner}'s {p.name} reads it (decision.args.{p.name})"))])
            out[i] = v
        _check_array(owner, p, out, lambda i: f"agent '{ctx.agent_ids[i]}'", f"attribute '{name}'", POPULATION_FILE)
        return Value("node", out)
    name = value["edge"]
    ids = ctx.agent_ids
    origin = getattr(getattr(ctx, "network", None), "origin", None)    # a network file's lines
    try:
        out = network.edge_values(name, direction, default)
    except MissingEdgeValue as e:
        net = getattr(ctx, "network", None)
        if origin and e.edge and origin(ctx.index[e.edge[0]], ctx.index[e.edge[1]]):
            held = sorted(net.edges()[2])
            if name not in held:        # the file has no such attribute at all: a misspelt name, not a gap
                raise StudyConfigError(net.file, [("", f"no edge attribute '{name}' (its numeric attributes: "
                                                       f"{', '.join(held) or 'none'}); {owner}'s {p.name} reads it "
                                                       f"({_ARGS.format(p.name)}; or give a \"default\")")]) from None
        found = origin and e.edge and origin(ctx.index[e.edge[0]], ctx.index[e.edge[1]], name)
        if found:           # a network file: the line (GraphML: the edge) without the value
            raise StudyConfigError(found[0], [(found[1], f"edge '{e.edge[0]}' - '{e.edge[1]}' has no value "
                                                         f"(give every edge one, or a \"default\"); {owner}'s "
                                                         f"{p.name} reads it ({_ARGS.format(p.name)})")]) from None
        raise StudyConfigError(POPULATION_FILE, [("interaction", f"{e}; {owner}'s {p.name} reads it "
                                                            f"(decision.args.{p.name})")]) from None
    rows = network.rows(direction)
    cols = network.out_indices if direction == "out" else network.in_indices

    def ends(k):        # the positions of entry k's edge, source first
        return (int(rows[k]), int(cols[k])) if direction == "out" else (int(cols[k]), int(rows[k]))
    k = _first_bad(p, out)
    if k is not None:
        u, v = ends(k)
        found = origin and origin(u, v, name)
        if found:           # a network file: the line (GraphML: the edge) where the value was read
            raise StudyConfigError(found[0], [(found[1], f"{name} = {out[k]:g} (edge '{ids[u]}' - '{ids[v]}'), "
                                                         f"but {owner}'s {p.name} must be {p.range_text()} "
                                                         f"({_ARGS.format(p.name)})")])
        raise StudyConfigError(POPULATION_FILE, [(f"edge '{ids[u]}' - '{ids[v]}'", (
            f"edge attribute '{name}' = {out[k]:g}: {owner}'s {p.name} must be {p.range_text()} "
            f"(decision.args.{p.name})"))])
    return Value("edge", out)


_ARGS = "decision.args.{} in " + SIMULATION_FILE       # where a parameter is set, when the file named is another


def _first_bad(p: Param, values: np.ndarray) -> int | None:
    """The position of the first value outside ``p``'s range (or not finite), None when all are in it."""
    lo = values > p.lo if p.lo_open else values >= p.lo
    hi = values < p.hi if p.hi_open else values <= p.hi
    bad = np.flatnonzero(~(lo & hi & np.isfinite(values)))
    return int(bad[0]) if len(bad) else None


def _check_array(owner, p: Param, values: np.ndarray, who, what: str, file: str) -> None:
    i = _first_bad(p, values)
    if i is not None:
        raise StudyConfigError(file, [(who(i), f"{what} = {values[i]:g}: {owner}'s {p.name} must be "
                                               f"{p.range_text()} (decision.args.{p.name})")])
