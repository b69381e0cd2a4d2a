"""A run's network pictures: the stored layout and communities, the frames of a state, the views' data.

:mod:`desim.network_views` computes on plain arrays (communities, the community view, adoption placements,
node sizes); this module reads a run through the store's named reads (``desim.store.network_reads``),
keeps the layout and the communities of its network under the network's key (``desim.store.layouts``),
and returns what the report's player, its PNGs and the dashboard draw, as JSON-ready dicts
(:func:`picture`). The drawing itself is :mod:`desim.report.diffusion` (PNG and the offline player) and
the dashboard's page; both draw these same dicts with the same encodings.

Two functions make the report's diffusion player, one job each: :func:`diffusion_player` here computes
the picture (laying the network out, or reusing its stored layout) and hands it to
:func:`desim.report.diffusion.diffusion_player`, which only draws a picture it is given. The first is the
one call a user makes (``desim viz diffusion`` makes it too); ``desim.network_views.diffusion_player``, as
it was documented before this module existed, still finds it.
"""
from __future__ import annotations

import base64
import time
import warnings
from dataclasses import dataclass, field as dc_field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from desim import layout as lay     # looked up at each call: a test sets lay.MULTILEVEL_FROM
from desim.errors import DesimNotice
from desim.network_views import (adoption_positions, change_steps, communities, community_view, degree_radius,
                                 hop_distances, suggested_view)
from desim.report import data
from desim.report.diffusion import diffusion_player as draw, study_colors
from desim.report.figures import ordered_categories, ramp_colors
from desim.report.palette import category_colors
from desim.store import layouts, network_reads
from desim.store.layout import StudyLayout
from desim.study.files import study_file_or_none

LAYOUT_SEED = 1            # one layout per network, whatever the seed of the run that drew it
NUMERIC_BINS = 32          # colours of a numeric state (viridis)
NO_VALUE = 255             # the code of "no value" in a frame
MAX_NODES = 20_000         # the offline player embeds every agent up to this many (then the community view)
MAX_CATEGORIES = 20        # a categorical state with more values than this (agent ids, free text) is refused
SIZE_BY_DEGREE_FROM = 4.0  # nodes are sized by degree when the largest degree is this many times the median
MISSING_COLOR = "#cccccc"


@dataclass
class RunNetwork:
    """A run's network: its agents (sorted ids), its undirected links as positions (u < v, unique),
    the key its layout and communities are stored under, and where the study is."""

    study_root: Path
    run_id: str
    ids: list[str]
    edges: np.ndarray
    key: str
    _degree: np.ndarray | None = dc_field(default=None, repr=False)

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def degree(self) -> np.ndarray:
        if self._degree is None:
            self._degree = np.bincount(self.edges.ravel(), minlength=self.n).astype(np.int64)
        return self._degree


def read_network(con, study_root, run_id: str) -> RunNetwork:
    """The run's network from its store (``con``, read-only): ids, canonical links and their key."""
    ids, rows = network_reads.network(con, run_id)
    edges = lay.index_edges(rows, np.arange(len(ids)))
    return RunNetwork(Path(study_root), run_id, ids, edges, lay.indexed_key(edges, ids, LAYOUT_SEED))


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def stored_positions(net: RunNetwork, progress=None) -> tuple[np.ndarray, dict[str, Any]]:
    """The network's layout: read from ``runs/layouts/<key>.parquet``, or computed
    (:func:`desim.layout.layout`, with ``progress(fraction, message)``) and stored there first (``kept``:
    whether it could be; a study that cannot be written gets its layout all the same, :func:`_keep`).
    Returns the (n, 2) positions and ``{method, seconds, reused, file, kept}``."""
    found = layouts.read_positions(net.study_root, net.key, net.ids)
    where = _relative(layouts.positions_file(net.study_root, net.key), net.study_root)
    levels = {"two_levels": two_level_layout(net)}
    if found is not None:
        xy, meta = found
        return xy, {"method": meta.get("method", lay.METHOD), "seconds": meta.get("seconds"), "reused": True,
                    "file": where, "kept": True, **levels}
    c0, w0 = time.process_time(), time.perf_counter()
    xy = lay.layout(net.edges, np.arange(net.n), seed=LAYOUT_SEED, progress=progress)
    meta = {"method": lay.METHOD, "seed": LAYOUT_SEED, "n": net.n, "links": int(len(net.edges)),
            "seconds": round(time.perf_counter() - w0, 3), "cpu_seconds": round(time.process_time() - c0, 3),
            "run_id": net.run_id}
    kept = _keep(lambda: layouts.write_positions(net.study_root, net.key, net.ids, xy, meta), net.study_root)
    return xy, {"method": lay.METHOD, "seconds": meta["seconds"], "reused": False, "file": where, "kept": kept,
                **levels}


_NOT_KEPT: set[Path] = set()
"""The studies whose layouts could not be kept, said once each per process (a dashboard draws many pictures)."""


def _keep(write, root: Path) -> bool:
    """Store a computed layout or communities (``write()``), which are only a cache: a study that cannot be
    written (read-only, a full disk) still gets its picture, computed again next time, and one note says so.
    The note goes to the command's or the server's stderr, never to a web client."""
    try:
        write()
        return True
    except OSError as e:
        if root.resolve() not in _NOT_KEPT:
            _NOT_KEPT.add(root.resolve())
            why = e.strerror or type(e).__name__
            warnings.warn(DesimNotice(f"{StudyLayout(root).layouts} cannot be written ({why}): the network pictures' "
                                      "layout and communities are used but not kept, and are computed again next "
                                      "time"), stacklevel=3)
        return False


def two_level_layout(net: RunNetwork) -> bool:
    """Whether :func:`desim.layout.layout` draws (part of) this network in two levels: it does so for each
    connected piece of ``MULTILEVEL_FROM`` agents or more (its clumps are then Leiden groups placed
    first, a drawing device, not the communities of the community view)."""
    return net.n >= lay.MULTILEVEL_FROM and len(lay.components(net.n, net.edges)[0]) >= lay.MULTILEVEL_FROM


def stored_communities(net: RunNetwork, progress=None) -> tuple[np.ndarray, dict[str, Any]]:
    """Leiden communities of the network (:func:`communities`), read from beside its layout or
    computed and stored there first; ``(labels, {method, seconds, reused})``."""
    found = layouts.read_communities(net.study_root, net.key, net.ids)
    if found is not None:
        labels, meta = found
        return labels, {"method": meta.get("method"), "seconds": meta.get("seconds"), "reused": True}
    if progress:
        progress(0.0, f"communities of {net.n:,} agents (Leiden)")
    w0 = time.perf_counter()
    labels = communities(net.edges, np.arange(net.n), seed=LAYOUT_SEED) if net.n else np.zeros(0, np.int64)
    meta = {"method": "igraph Leiden, modularity, 2 passes", "seed": LAYOUT_SEED, "n": net.n,
            "seconds": round(time.perf_counter() - w0, 3)}
    kept = _keep(lambda: layouts.write_communities(net.study_root, net.key, net.ids, labels, meta), net.study_root)
    if progress:
        progress(1.0, f"{int(labels.max()) + 1 if net.n else 0} communities")
    return labels, {"method": meta["method"], "seconds": meta["seconds"], "reused": False, "kept": kept}


# --- the frames of one state field ------------------------------------------------------------------

@dataclass
class StateFrames:
    """One state field of every agent at every step (step 0: the initial states).

    Categorical (text, booleans, integers with few values): ``codes`` (steps, n) int16 into
    ``categories`` (in the study's declared order, see ``desim.report.figures.ordered_categories``),
    -1 for no value; ``colors`` one per category. Numeric: ``values`` (steps, n) float, NaN for no
    value, drawn in ``NUMERIC_BINS`` viridis colours over ``range``.
    """

    field: str
    kind: str
    steps: list[int]
    categories: list[str]
    colors: list[str]
    codes: np.ndarray | None = None
    values: np.ndarray | None = None
    range: tuple[float, float] = (0.0, 1.0)

    def bins(self) -> np.ndarray:
        """(steps, n) uint8 colour codes: the category, or the numeric bin; ``NO_VALUE`` for none."""
        if self.kind == "categorical":
            return np.where(self.codes >= 0, self.codes, NO_VALUE).astype(np.uint8)
        lo, hi = self.range
        span = (hi - lo) or 1.0
        b = np.clip(((self.values - lo) / span * NUMERIC_BINS).astype(float), 0, NUMERIC_BINS - 1)
        return np.where(np.isfinite(self.values), np.nan_to_num(b).astype(np.int64), NO_VALUE).astype(np.uint8)

    def counts(self) -> np.ndarray:
        """(steps, categories) agents per category at each step, over every agent."""
        k = len(self.categories)
        valid = self.codes >= 0
        flat = (np.arange(len(self.steps))[:, None] * k + np.where(valid, self.codes, 0))[valid]
        return np.bincount(flat, minlength=len(self.steps) * k).reshape(len(self.steps), k)

    def means(self) -> list[float | None]:
        out = []
        for row in self.values:
            ok = np.isfinite(row)
            out.append(float(row[ok].mean()) if ok.any() else None)
        return out

    @property
    def palette(self) -> list[str]:
        if self.kind == "categorical":
            return list(self.colors)
        return ramp_colors(NUMERIC_BINS)


def read_frames(con, run_id: str, name: str, n: int, declared: dict[str, str] | None = None,
                ids: Sequence[str] = ()) -> StateFrames:
    """The state field ``name`` of every agent and step, from the store (``con``).

    A categorical field of more than :data:`MAX_CATEGORIES` values is refused (``ReportError``): one
    colour per category cannot tell thousands apart (a field of agent ids such as ``infected_by``, whose
    picture is the transmission tree), and the frames hold a category in one byte. ``ids``, the run's
    agents, only make the message say when the values are agent ids."""
    kind = data.display_kind(con, run_id, name)        # ReportError when the run has no such field
    raw = network_reads.field_frames(con, run_id, name, numeric=kind == "numeric")
    steps = raw["steps"]
    where = {s: i for i, s in enumerate(steps)}
    row = np.array([where[s] for s in raw["step"].tolist()], dtype=np.int64) if len(raw["step"]) else raw["step"]
    if kind == "numeric":
        values = np.full((len(steps), n), np.nan)
        values[row, raw["pos"]] = raw["value"]
        finite = values[np.isfinite(values)]
        rng = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        return StateFrames(name, kind, steps, [], [], values=values, range=rng)
    labels = raw["labels"]
    cats = ordered_categories(labels, declared)
    if len(cats) > MAX_CATEGORIES:
        raise data.ReportError(too_many_categories(run_id, name, cats, ids))
    remap = np.array([cats.index(c) for c in labels] + [-1], dtype=np.int64)
    codes = np.full((len(steps), n), -1, dtype=np.int16)
    codes[row, raw["pos"]] = remap[raw["code"]]
    return StateFrames(name, kind, steps, cats, category_colors(cats, declared), codes=codes)


def too_many_categories(run_id: str, name: str, categories: Sequence[str], ids: Sequence[str] = ()) -> str:
    """Why a state field with too many values has no network picture, and what to draw instead."""
    known = set(ids)
    agent_ids = bool(known) and sum(c in known for c in categories) > len(categories) / 2
    what = " (most are agent ids)" if agent_ids else ""
    instead = ("; who passed the state to whom is the transmission tree: `--view tree` with the model's state "
               "field (e.g. --state state)" if agent_ids else "")
    return (f"run {run_id}: state field '{name}' has {len(categories):,} distinct values{what}; the network "
            f"views colour agents by category and draw at most {MAX_CATEGORIES} categories: choose a state field "
            f"with fewer values{instead}")


def seed_agents(frames: StateFrames) -> tuple[np.ndarray, str]:
    """The seeds of a diffusion: the agents not in the most common initial category (the ones a model's
    ``seeds`` put in its seed state; the initial spreaders of a rumour). Positions and the rule in words."""
    if frames.kind != "categorical" or not len(frames.steps):
        return np.zeros(0, np.int64), ""
    first = frames.codes[0]
    valid = first[first >= 0]
    if not len(valid):
        return np.zeros(0, np.int64), ""
    common = int(np.bincount(valid).argmax())
    seeds = np.flatnonzero((first >= 0) & (first != common))
    return seeds, f"the agents not in the most common initial state ('{frames.categories[common]}')"


# --- the views ---------------------------------------------------------------------------------------

def _r(values, digits: int = 4) -> list:
    return np.round(np.asarray(values, dtype=float), digits).tolist()


def _b64(arr: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(arr, dtype=np.uint8).tobytes()).decode("ascii")


def size_rule(degree: np.ndarray) -> tuple[str, np.ndarray]:
    """How nodes are sized: ``("degree", radius)`` (area proportional to degree, :func:`degree_radius`)
    when degrees vary (the largest at least :data:`SIZE_BY_DEGREE_FROM` times the median), else
    ``("constant", ones)``: a ring lattice's nodes all look alike. Never by state."""
    degree = np.asarray(degree)
    positive = degree[degree > 0]
    if len(positive) and degree.max() >= SIZE_BY_DEGREE_FROM * float(np.median(positive)):
        return "degree", degree_radius(degree, r_min=1.0, r_max=6.0)
    return "constant", np.ones(len(degree))


def tree_data(parent: np.ndarray, when: np.ndarray, roots: np.ndarray) -> dict[str, np.ndarray]:
    """A transmission tree laid out in time: ``nodes`` (positions of the agents in it: the roots and
    every agent with a parent), ``x`` their step, ``y`` in [0, 1] (leaves evenly spaced, a parent
    midway between its first and last child, each chain of infections a contiguous band, the largest
    first), ``parent`` (-1 for a root), ``offspring`` (how many it infected).

    ``parent``, ``when``: per agent, the position of its infector (-1: none) and the step it was
    infected (-1: never); ``roots``: the seeds (step 0 unless ``when`` says otherwise)."""
    n = len(parent)
    inside = (parent >= 0) | np.isin(np.arange(n), roots)
    nodes = np.flatnonzero(inside)
    children: dict[int, list[int]] = {}
    for c in nodes.tolist():
        p = int(parent[c])
        if p >= 0 and inside[p]:
            children.setdefault(p, []).append(c)
    root_list = [int(c) for c in nodes if parent[c] < 0 or not inside[parent[c]]]
    for kids in children.values():
        kids.sort(key=lambda c: (when[c], c))
    size = {}
    for c in sorted(nodes.tolist(), key=lambda c: -int(max(when[c], 0))):   # latest first: children before parents
        size[c] = 1 + sum(size.get(k, 1) for k in children.get(c, []))
    # iterative post-order: leaves get the next slot, parents the middle of their children
    y = {}
    slot = 0
    for r in sorted(root_list, key=lambda c: (-size.get(c, 1), when[c], c)):
        stack = [(r, False)]
        while stack:
            node, done = stack.pop()
            kids = children.get(node, [])
            if done or not kids:
                if kids:
                    y[node] = (y[kids[0]] + y[kids[-1]]) / 2
                else:
                    y[node] = slot
                    slot += 1
                continue
            stack.append((node, True))
            for k in reversed(kids):
                stack.append((k, False))
    ys = np.array([y[c] for c in nodes.tolist()], dtype=float)
    ys = 1 - ys / max(slot - 1, 1)
    offspring = np.bincount(parent[nodes][parent[nodes] >= 0], minlength=n)[nodes] if len(nodes) else np.zeros(0)
    x = np.where(when[nodes] >= 0, when[nodes], 0)
    return {"nodes": nodes, "x": x.astype(np.int64), "y": ys, "parent": parent[nodes], "offspring": offspring}


def _posted_share(labels: np.ndarray, steps: list[int], post_step: np.ndarray, post_pos: np.ndarray) -> np.ndarray:
    k = int(labels.max()) + 1 if len(labels) else 0
    size = np.bincount(labels, minlength=k).astype(float)
    out = np.zeros((len(steps), k))
    where = {s: i for i, s in enumerate(steps)}
    for i, s in enumerate(post_step.tolist()):
        if s in where:
            out[where[s], labels[post_pos[i]]] += 1
    return out / np.maximum(size, 1)[None, :]


def picture(study_root, state: str, run_id: str | None = None, *, views: Sequence[str] | None = None,
            max_nodes: int = MAX_NODES, progress=None) -> dict[str, Any]:
    """Everything the network views of one run and one state field draw, as JSON-ready data.

    ``views``: which of ``network`` (every agent at its stored layout position), ``communities``
    (one disc per Leiden community, its state shares), ``adoption`` (agents on rings by hops from
    the seeds, or by the step they changed state) and ``tree`` (who passed the state to whom, when
    the model records ``infected_by``) to include (``"suggested"``: the one that reads at this size);
    default: every one the run allows, the
    node-level ones only up to ``max_nodes`` agents. ``progress(fraction, message)`` hears about
    the slow parts (reading, the layout, the communities).

    The keys: ``meta`` (study, run, field, kind, steps, categories in the declared order and their
    colours, counts or means over **all** agents per step, whether the run stored messages, the
    seeds, the available views and the suggested one) and one entry per included view; ``node``
    (ids, positions, links, radius and size rule, frames as base64 uint8 codes per step, posters per
    step) is there when a node-level view is.
    """
    say = progress or (lambda f, m: None)
    root = Path(study_root)
    declared = study_colors(root, state)
    say(0.0, "reading the run's network and states")
    with data.connect(root) as con:
        run = data.recorded_run(con, run_id, root)
        rid = run["run_id"]
        net = read_network(con, root, rid)
        frames = read_frames(con, rid, state, net.n, declared, net.ids)
        n_messages = network_reads.message_count(con, rid)
        post_step, post_pos = network_reads.posters(con, rid) if n_messages else (np.zeros(0, np.int64),) * 2
        transmissions = network_reads.first_transmissions(con, rid) if frames.kind == "categorical" else None
    categorical = frames.kind == "categorical"
    seeds, seed_rule = seed_agents(frames)
    has_tree = transmissions is not None and len(transmissions[0]) > 0
    node_ok = net.n <= max_nodes
    allowed = (["network"] if node_ok else []) + ["communities"] \
        + (["adoption"] if node_ok and categorical and net.n else []) + (["tree"] if node_ok and has_tree else [])
    # each view this run does not allow, and why, so a caller can say what it left out
    left_out: dict[str, str] = {}
    if not node_ok:
        left_out = dict.fromkeys(("network", "adoption", "tree"), f"{net.n:,} agents, more than max_nodes ({max_nodes:,})")
    else:
        if not categorical:
            left_out["adoption"] = f"'{state}' is a number, not a state agents adopt"
        if not has_tree:
            left_out["tree"] = ("the run records no 'infected_by' (who passed the state to whom)" if categorical
                                else f"'{state}' is a number")
    suggested = suggested_view(net.n) if suggested_view(net.n) in allowed else (allowed[0] if allowed else "communities")
    wanted = [v for v in dict.fromkeys(suggested if v == "suggested" else v for v in (allowed if views is None else views))
              if v in allowed]
    size_by, radius = size_rule(net.degree)
    meta: dict[str, Any] = {
        "study": run["study_id"], "title": _study_title(root), "run_id": rid, "field": state, "kind": frames.kind,
        "time_unit": run.get("time_unit") or "step", "n_agents": net.n, "n_links": int(len(net.edges)),
        "steps": frames.steps, "categories": frames.categories, "palette": frames.palette, "missing": MISSING_COLOR,
        "n_messages": int(n_messages), "has_messages": bool(n_messages),
        "seeds": {"count": int(len(seeds)), "rule": seed_rule},
        "available": allowed, "views": wanted, "suggested": suggested, "left_out": left_out,
        # how far the run had got: a run still going, stopped or failed is drawn up to its last stored step
        "run": {"status": run["status"], "n_steps": run.get("n_steps"), "error": run.get("error")},
        "size_by": size_by, "degree": {"min": int(net.degree.min()) if net.n else 0,
                                       "median": float(np.median(net.degree)) if net.n else 0.0,
                                       "max": int(net.degree.max()) if net.n else 0},
        "max_nodes": max_nodes,
    }
    if categorical:
        meta["counts"] = frames.counts().tolist()
    else:
        meta["range"] = list(frames.range)
        meta["means"] = frames.means()
    out: dict[str, Any] = {"meta": meta}

    node_views = [v for v in wanted if v in ("network", "adoption", "tree")]
    if node_views:
        bins = frames.bins()
        node: dict[str, Any] = {"ids": net.ids, "radius": _r(radius, 3), "frames": [_b64(b) for b in bins]}
        if n_messages:
            posters: dict[str, list[int]] = {}
            for s, p in zip(post_step.tolist(), post_pos.tolist()):
                posters.setdefault(str(s), []).append(p)
            node["posters"] = posters
        out["node"] = node
    if "network" in wanted:
        xy, info = stored_positions(net, progress)
        out["network"] = {"x": _r(xy[:, 0]), "y": _r(xy[:, 1]), "edges": net.edges.ravel().tolist(), "layout": info}
    if "communities" in wanted:
        labels, cinfo = stored_communities(net, progress)
        say(0.9, "community view")
        if categorical:
            codes, k = frames.codes, len(frames.categories)
        else:
            codes, k = frames.bins().astype(np.int64), NUMERIC_BINS
            codes = np.where(codes == NO_VALUE, -1, codes)
        view = community_view(labels, net.edges, codes, k, seed=LAYOUT_SEED) if net.n else None
        if view is not None:
            entry = {"size": view["size"].tolist(), "x": _r(view["x"]), "y": _r(view["y"]),
                     "radius": _r(view["radius"], 5), "source": view["source"].tolist(),
                     "target": view["target"].tolist(), "weight": view["weight"].tolist(),
                     "internal": view["internal"].tolist(), "method": cinfo["method"], "reused": cinfo["reused"]}
            if categorical:
                entry["shares"] = np.round(view["shares"], 4).tolist()
            else:
                sums = np.zeros((len(frames.steps), len(view["size"])))
                cnt = np.zeros_like(sums)
                vals = frames.values
                ok = np.isfinite(vals)
                for t in range(len(frames.steps)):
                    np.add.at(sums[t], labels[ok[t]], vals[t][ok[t]])
                    np.add.at(cnt[t], labels[ok[t]], 1)
                means = np.divide(sums, cnt, out=np.full_like(sums, np.nan), where=cnt > 0)
                entry["means"] = [[None if not np.isfinite(v) else round(float(v), 5) for v in row] for row in means]
            if n_messages:
                entry["posted"] = np.round(_posted_share(labels, frames.steps, post_step, post_pos), 4).tolist()
            if node_ok and "node" in out:
                entry["labels"] = labels.tolist()
            out["communities"] = entry
    if "adoption" in wanted:
        hops = hop_distances(net.edges, np.arange(net.n), seeds.tolist()) if len(seeds) else np.full(net.n, -1)
        changed = change_steps(frames.codes) if len(frames.steps) else np.full(net.n, -1)
        changed = np.where(np.isin(np.arange(net.n), seeds), 0, changed)
        entry = {"changed": {"levels": changed.tolist()}}
        by_change = adoption_positions(changed, net.edges)
        entry["changed"].update({"x": _r(by_change[:, 0]), "y": _r(by_change[:, 1])})
        if len(seeds):
            by_hops = adoption_positions(hops, net.edges)
            entry["hops"] = {"levels": hops.tolist(), "x": _r(by_hops[:, 0]), "y": _r(by_hops[:, 1])}
        out["adoption"] = entry
    if "tree" in wanted:
        pos, step, by = transmissions
        parent = np.full(net.n, -1, dtype=np.int64)
        when = np.full(net.n, -1, dtype=np.int64)
        parent[pos] = by
        when[pos] = step
        # a seed is a root infected at step 0: in SIS a seed that recovers and is infected again has an
        # infector in its state, and keeping it would close a loop (it infected its infector first)
        parent[seeds] = -1
        when[seeds] = 0
        t = tree_data(parent, when, seeds)
        offspring = t["offspring"]
        out["tree"] = {"nodes": t["nodes"].tolist(), "x": t["x"].tolist(), "y": _r(t["y"], 5),
                       "parent": t["parent"].tolist(), "offspring": offspring.tolist(),
                       "transmitted": int((t["parent"] >= 0).sum()), "roots": int((t["parent"] < 0).sum()),
                       "field": "infected_by"}
    say(1.0, "view data ready")
    return out


def _study_title(root: Path) -> str:
    study = study_file_or_none(root)
    return study.title if study is not None else ""


def diffusion_player(study_root, state: str, run_id: str | None = None, *, out_dir=None, view: str | None = None,
                     pngs: list[str] | None = None, messages: bool = False, max_nodes: int = MAX_NODES,
                     max_panels: int = 12, progress=None) -> dict[str, Any]:
    """The report's diffusion player of one run and state, in one call: :func:`picture` (the stored
    layout and communities reused, or computed and stored first), then
    :func:`desim.report.diffusion.diffusion_player` draws it. Returns its paths (and ``picture``).

    The same name as the function that draws, for a different job: that one only draws a picture it is
    given (the report cannot lay a network out there); this one makes the picture first."""
    views = None
    if view or pngs:
        wanted = {view} | set(pngs or []) if pngs != ["all"] else None
        views = None if wanted is None else sorted(v for v in wanted if v)
        if views is not None:
            views = sorted(set(views) | {"communities"} | ({"network"} if "adoption" in views or "tree" in views else set()))
    pic = picture(study_root, state, run_id, views=views, max_nodes=max_nodes, progress=progress)
    if progress:
        progress(1.0, "drawing the player and its figures")
    paths = draw(study_root, state, pic["meta"]["run_id"], picture=pic, out_dir=out_dir, view=view, pngs=pngs,
                 messages=messages, max_panels=max_panels)
    paths["picture"] = pic
    return paths
