"""The network diffusion player: a run's network, nodes coloured by a state
field, one frame per step (step 0 is the initial state).

Two outputs from the same frames:

* ``diffusion.html``: a self-contained player (canvas, slider, play button,
  inline script, no CDN). The frames are embedded as JSON in
  ``<script type="application/json" id="desim-diffusion-data">`` so a test
  or a notebook can read exactly what is drawn;
* ``diffusion.png``: small multiples of up to 12 evenly spaced frames.

The layout is computed once per run and is stable: a spring layout started
from seeded random positions (a start on a circle in id order left the hubs
of a Barabasi-Albert graph on the ring). A spring layout costs O(n²) per
iteration, so the number of iterations shrinks as the graph grows, but never
below ``MIN_ITERATIONS``. Graphs above ``max_nodes`` agents are drawn as a breadth-first
neighbourhood of ``sample_size`` agents around a seeded start (a thousand
dots still read as a network, and lay out in seconds); the figure and the
player say so, and give the whole population's counts too.
Messages per step light the edges of the agents who posted in that step.
Category colours are the study's (``state_colors`` in ``study.json``, see
``desim.report.palette``), the same as in the dashboard and the report's figures.
"""
from __future__ import annotations

from html import escape
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402

from desim.report import data  # noqa: E402
from desim.report.figures import file_stem, png, state_key  # noqa: E402
from desim.report.palette import category_colors, declared_colors  # noqa: E402
from desim.report.player import page, panel_steps  # noqa: E402
from desim.report.sampling import sample_nodes  # noqa: E402,F401 - part of this module's interface
from desim.store import StudyLayout, queries, states  # noqa: E402
from desim.study.files import StudyConfigError, read_json  # noqa: E402

MAX_NODES = 5000
SAMPLE_SIZE = 1000
NUMERIC_BINS = 32
LAYOUT_BUDGET = 3e7  # node pairs x iterations: about 3 s of spring layout on this machine
MIN_ITERATIONS = 15
MISSING = "#cccccc"


def _hex(rgba) -> str:
    return "#{:02x}{:02x}{:02x}".format(*(int(round(255 * c)) for c in rgba[:3]))


def _unit(xy: np.ndarray) -> np.ndarray:
    """Scale positions into [0, 1] on each axis."""
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    span = np.where(hi - lo > 0, hi - lo, 1.0)
    return (xy - lo) / span


def _spring(graph: nx.Graph, nodes: list[str], seed: int) -> np.ndarray:
    """One connected piece: a spring layout started from a circle in id order."""
    n = len(nodes)
    if n == 1:
        return np.array([[0.5, 0.5]])
    rng = np.random.default_rng(seed)
    start = {a: tuple(rng.uniform(-1, 1, 2)) for a in nodes}
    iterations = int(min(50, max(MIN_ITERATIONS, LAYOUT_BUDGET / (n * n))))
    pos = nx.spring_layout(graph.subgraph(nodes), pos=start, seed=seed, iterations=iterations, method="force")
    return _unit(np.array([pos[a] for a in nodes], dtype=float))


def layout(graph: nx.Graph, nodes: list[str], seed: int) -> np.ndarray:
    """Stable 2-D positions in [0, 1] for ``nodes`` (in that order).

    Each connected component is laid out on its own and the components are
    packed in rows, largest first, in a square cell whose side grows with the
    square root of its size: otherwise separate groups (dorms, households)
    collapse onto each other. A graph without edges becomes a grid in id order.
    """
    if not nodes:
        return np.zeros((0, 2))
    order = {a: i for i, a in enumerate(nodes)}
    if graph.number_of_edges() == 0:
        parts = [[a] for a in nodes]
    else:
        parts = sorted((sorted(c, key=order.get) for c in nx.connected_components(graph)),
                       key=lambda c: (-len(c), order[c[0]]))
    sides = [np.sqrt(len(c)) for c in parts]
    width = max(max(sides), np.sqrt(sum(side * side for side in sides)) * 1.1)
    xy = np.zeros((len(nodes), 2))
    x = y = row = 0.0
    for part, side in zip(parts, sides):
        if x + side > width + 1e-9:
            x, y, row = 0.0, y + row, 0.0
        inner = _spring(graph, part, seed) if len(part) > 1 else np.array([[0.5, 0.5]])
        for a, (px, py) in zip(part, inner):
            xy[order[a]] = (x + side * (0.1 + 0.8 * px), -(y + side * (0.1 + 0.8 * py)))
        x, row = x + side, max(row, side)
    return _unit(xy)


def _frames(con, run_id: str, field: str, nodes: list[str]) -> tuple[list[int], dict]:
    """Per step, each node's value of ``field`` (initial states as step 0)."""
    rows = states.values(con, run_id, field, nodes)
    index = {a: i for i, a in enumerate(nodes)}
    steps: list[int] = []
    values: dict[int, list] = {}
    for step, agent, v in rows:
        if step not in values:
            steps.append(step)
            values[step] = [None] * len(nodes)
        values[step][index[agent]] = v
    return steps, values


def _posters(con, run_id: str, nodes: list[str]) -> dict[int, list[int]]:
    """Per step, the positions (in ``nodes``) of the agents who posted a message."""
    index = {a: i for i, a in enumerate(nodes)}
    out: dict[int, list[int]] = {}
    for step, author in queries.posters(con, run_id, nodes):
        out.setdefault(step, []).append(index[author])
    return out


def study_colors(study_root: str | Path, field: str) -> dict[str, str]:
    """The colours ``study.json`` declares for ``field`` ({} when none or unreadable)."""
    try:
        return declared_colors(read_json(Path(study_root) / "study.json"), field)
    except (StudyConfigError, AttributeError):
        return {}


def _encode(kind: str, steps: list[int], values: dict[int, list], population_counts: dict | None,
            declared: dict[str, str] | None = None):
    """Colour codes per node per frame, the palette, and per-frame counts by category."""
    if kind == "categorical":
        cats = sorted({"null" if v is None else v for s in steps for v in values[s]})
        palette = category_colors(cats, declared)
        code = {c: i for i, c in enumerate(cats)}
        frames = []
        for s in steps:
            codes = [code["null" if v is None else v] for v in values[s]]
            counts = {c: 0 for c in cats}
            for v in values[s]:
                counts["null" if v is None else v] += 1
            frame = {"step": s, "codes": codes, "counts": counts}
            if population_counts:
                i = population_counts["steps"].index(s)
                frame["population_counts"] = {c: population_counts["counts"][c][i]
                                              for c in population_counts["categories"]}
            frames.append(frame)
        return {"categories": cats, "palette": palette}, frames
    nums = [[None if v is None else float(v) for v in values[s]] for s in steps]
    flat = [v for row in nums for v in row if v is not None]
    lo, hi = (min(flat), max(flat)) if flat else (0.0, 1.0)
    span = (hi - lo) or 1.0
    cmap = plt.get_cmap("viridis", NUMERIC_BINS)
    palette = [_hex(cmap(i)) for i in range(NUMERIC_BINS)] + [MISSING]
    frames = []
    for s, row in zip(steps, nums):
        codes = [NUMERIC_BINS if v is None else min(NUMERIC_BINS - 1, int((v - lo) / span * NUMERIC_BINS))
                 for v in row]
        present = [v for v in row if v is not None]
        frames.append({"step": s, "codes": codes, "mean": (sum(present) / len(present)) if present else None})
    return {"range": [lo, hi], "palette": palette}, frames


def diffusion_player(study_root: str | Path, state: str, run_id: str | None = None,
                     max_nodes: int = MAX_NODES, sample_size: int = SAMPLE_SIZE,
                     out_dir: str | Path | None = None, max_panels: int = 12) -> dict[str, Path]:
    """Write ``diffusion_<state>.html`` and ``diffusion_<state>.png`` for one run; returns their paths.

    Above ``max_nodes`` agents only a neighbourhood of ``min(sample_size, max_nodes)`` is drawn.
    """
    with data.connect(study_root) as con:
        run = data.resolve_run(con, run_id)
        rid = run["run_id"]
        ids = queries.agent_ids(con, rid)
        graph = nx.Graph()
        graph.add_nodes_from(ids)
        graph.add_edges_from(queries.edges(con, rid))
        kind = data.field_kind(con, rid, state)
        sampled = len(ids) > max_nodes
        nodes = sample_nodes(graph, ids, min(sample_size, max_nodes), run["seed"]) if sampled else ids
        steps, values = _frames(con, rid, state, nodes)
        posters = _posters(con, rid, nodes)
        population = data.category_counts(con, rid, state) if sampled and kind == "categorical" else None
    sub = graph.subgraph(nodes)
    xy = layout(sub, nodes, seed=int(run["seed"]) & 0x7FFFFFFF)
    index = {a: i for i, a in enumerate(nodes)}
    edges = [(index[a], index[b]) for a, b in sub.edges()]
    colouring, frames = _encode(kind, steps, values, population, study_colors(study_root, state))
    for f in frames:
        f["posters"] = posters.get(f["step"], [])
    note = (f"Sampled view: {len(nodes):,} of {len(ids):,} agents, a breadth-first neighbourhood of the "
            f"network (only edges among them). Counts are over the sample; the whole population's are "
            f"given beside them." if sampled else "")
    if not edges:
        note = (note + " " if note else "") + "The run saved no network edges: agents are laid out on a grid in id order."
    payload = {"study": run["study_id"], "run_id": rid, "field": state, "kind": kind,
               "time_unit": run["time_unit"], "n_agents": len(ids), "sampled": sampled, "note": note,
               "nodes": nodes, "x": [round(float(v), 4) for v in xy[:, 0]],
               "y": [round(float(v), 4) for v in xy[:, 1]], "edges": [v for e in edges for v in e],
               **colouring, "frames": frames}
    out = Path(out_dir) if out_dir else StudyLayout(study_root).report_dir(rid)
    out.mkdir(parents=True, exist_ok=True)
    html_path = out / f"diffusion_{file_stem(state)}.html"
    html_path.write_text(player_html(payload), encoding="utf-8")
    png_path = out / f"diffusion_{file_stem(state)}.png"
    png_path.write_bytes(small_multiples(payload, xy, edges, max_panels))
    return {"html": html_path, "png": png_path, "dir": out}


def small_multiples(payload: dict, xy: np.ndarray, edges: list[tuple[int, int]], max_panels: int) -> bytes:
    frames = payload["frames"]
    chosen = panel_steps(len(frames), max_panels)
    cols = min(4, max(1, len(chosen)))
    rows = -(-len(chosen) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3 * cols, 3 * rows + 0.9), squeeze=False)
    palette = np.array(payload["palette"])
    segments = [[xy[a], xy[b]] for a, b in edges]
    size = max(1.0, min(30.0, 6000 / max(1, len(xy))))
    for ax in axes.flat:
        ax.set_axis_off()
    for ax, i in zip(axes.flat, chosen):
        f = frames[i]
        if segments:
            ax.add_collection(LineCollection(segments, colors="0.6", linewidths=0.3, alpha=0.35, zorder=1))
        ax.scatter(xy[:, 0], xy[:, 1], c=palette[f["codes"]] if len(xy) else [], s=size, linewidths=0, zorder=2)
        label = "initial" if f["step"] == 0 else f"{payload['time_unit']} {f['step']}"
        if payload["kind"] == "categorical":
            label += "\n" + ", ".join(f"{c} {n}" for c, n in f["counts"].items())
        elif f.get("mean") is not None:
            label += f"\nmean {f['mean']:.3f}"
        ax.set_title(label, fontsize=8)
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(-0.03, 1.03)
        ax.set_aspect("equal")
    title = f"{payload['study']}: '{payload['field']}' on the network, run {payload['run_id']}"
    if payload["sampled"]:
        title += f"\nSAMPLED VIEW: {len(xy):,} of {payload['n_agents']:,} agents (breadth-first neighbourhood)"
    if not edges:
        title += "\nno network edges saved with this run: agents on a grid in id order"
    fig.suptitle(title, fontsize=10)
    state_key(fig, axes, payload, "o", list(payload.get("categories", [])))
    return png(fig)


PLAYER_JS = r"""
(function () {
  const D = JSON.parse(document.getElementById('desim-diffusion-data').textContent);
  const canvas = document.getElementById('net'), ctx = canvas.getContext('2d');
  const label = document.getElementById('label'), counts = document.getElementById('counts');
  const W = canvas.width, H = canvas.height, pad = 12, n = D.nodes.length;
  const px = i => pad + D.x[i] * (W - 2 * pad), py = i => pad + (1 - D.y[i]) * (H - 2 * pad);
  const r = Math.max(1.2, Math.min(6, 120 / Math.sqrt(Math.max(1, n))));
  function draw(k) {
    const f = D.frames[k];
    ctx.clearRect(0, 0, W, H);
    ctx.strokeStyle = 'rgba(150,150,150,0.25)'; ctx.lineWidth = 0.5; ctx.beginPath();
    for (let e = 0; e < D.edges.length; e += 2) {
      ctx.moveTo(px(D.edges[e]), py(D.edges[e])); ctx.lineTo(px(D.edges[e + 1]), py(D.edges[e + 1]));
    }
    ctx.stroke();
    if (f.posters.length) {
      const lit = new Uint8Array(n); f.posters.forEach(i => { lit[i] = 1; });
      ctx.strokeStyle = 'rgba(255,140,0,0.55)'; ctx.lineWidth = 0.9; ctx.beginPath();
      for (let e = 0; e < D.edges.length; e += 2) {
        const a = D.edges[e], b = D.edges[e + 1];
        if (lit[a] || lit[b]) { ctx.moveTo(px(a), py(a)); ctx.lineTo(px(b), py(b)); }
      }
      ctx.stroke();
    }
    for (let i = 0; i < n; i++) {
      ctx.fillStyle = D.palette[f.codes[i]];
      ctx.beginPath(); ctx.arc(px(i), py(i), r, 0, 2 * Math.PI); ctx.fill();
    }
    label.textContent = (f.step === 0 ? 'initial state' : D.time_unit + ' ' + f.step) +
      ' (frame ' + (k + 1) + ' of ' + D.frames.length + '), ' + f.posters.length + ' agents posted';
    if (D.kind === 'categorical') {
      counts.textContent = D.categories.map(c => c + ': ' + f.counts[c] +
        (f.population_counts ? ' (population ' + f.population_counts[c] + ')' : '')).join(' \u00b7 ');
    } else {
      counts.textContent = 'mean ' + (f.mean === null ? 'n/a' : f.mean.toFixed(3));
    }
  }
  desimControls(D.frames.length, draw, 700);
})();
"""


def _legend_html(payload: dict) -> str:
    if payload["kind"] == "categorical":
        return " ".join(f'<span class="key"><i style="background:{c}"></i>{escape(str(n))}</span>'
                        for n, c in zip(payload["categories"], payload["palette"]))
    lo, hi = payload["range"]
    stops = ", ".join(payload["palette"][:-1])
    return (f'<span class="key">{lo:.3g} <b class="ramp" style="background:linear-gradient(to right, {stops})">'
            f"</b> {hi:.3g}</span>")


def player_html(payload: dict) -> str:
    return page(payload, title=f"{payload['study']}: {payload['field']} over the network (run {payload['run_id']})",
                data_id="desim-diffusion-data", canvas_id="net", legend=_legend_html(payload), script=PLAYER_JS,
                caption="Edges lit in orange: the agent posted a message in that step.",
                css=".key i { border-radius: 50%; }\n"
                    ".ramp { display: inline-block; width: 160px; height: 0.8em; vertical-align: middle; }\n")
