"""The network diffusion player and its figures: a run's network pictures, drawn.

What is drawn is computed once by :func:`desim.report.network_picture.picture` (the stored layout of the
run's network, its Leiden communities, the frames of one state field, the adoption rings and the
transmission tree) and handed here as one JSON-ready dict; this module only draws it, with the
same encodings everywhere:

* **colours** are the study's (``state_colors`` in ``study.json``), categories in the order the
  study declares them (then any others sorted), so the legend, the slices of a community's pie
  and the shares under each panel all read ``S, I, R`` as declared; numbers on viridis;
* **node size** is constant, or its area is proportional to the agent's degree when degrees vary
  (a scale-free network's hubs), and the key says which; a state never changes a size, and nodes
  are drawn in an order fixed by degree alone (hubs on top), never by state;
* **messages** (who posted in a step) are an overlay, off unless asked for (``messages=True`` for
  the PNGs, a check box in the player), and offered only when the run stored messages: a
  state-based model (SIR) gets no word about posts;
* **text** is measured (Agg's own metrics) and wrapped or placed in rows before anything is
  drawn, so titles, subtitles, keys and the shares under panels never run into each other,
  however long the labels.

Outputs: ``diffusion_<state>.html``, an offline player (every view of the picture, a slider, a
play button, the overlay check box; the picture embedded as JSON in
``<script type="application/json" id="desim-diffusion-data">`` so a test or a notebook reads exactly
what is drawn), and ``diffusion_<state>.png``, small multiples of the suggested view at evenly
spaced steps (every ``s``-th step, the last one added and said so), plus
``diffusion_<state>_<view>.png`` for any other view asked for.

This module computes no layout: :func:`diffusion_player` draws a picture it is given;
``desim.report.network_picture.diffusion_player`` (what ``desim viz diffusion`` calls) computes (or reuses)
the picture and calls it.
"""
from __future__ import annotations

import base64
import json
import math
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.collections import LineCollection, PatchCollection
from matplotlib.colors import to_rgb, to_rgba
from matplotlib.patches import Circle, Wedge

from desim.report.data import ReportError
from desim.report.figures import file_stem, flow_rows, new_figure, png, text_size, wrap_to_width
from desim.report.netview import NETVIEW_CSS, NETVIEW_JS
from desim.report.palette import declared_colors
from desim.store import StudyLayout
from desim.study.files import study_file_or_none

DPI = 100
WIDTH = 1200            # px: every player PNG is this wide
PAD = 16                # px around and between blocks
GAP = 10                # px between legend items
TITLE_PT, SUB_PT, KEY_PT, PANEL_PT, SHARE_PT, NOTE_PT = 12.5, 9.5, 9.0, 9.5, 8.5, 8.0
NO_VALUE = 255
OVERLAY = "#e6781e"     # message links
EDGE = "#7d8a97"
WARN = "#b42318"        # a run drawn before it ended
VIEW_NAMES = {"network": "network", "communities": "communities", "adoption": "adoption", "tree": "transmission tree"}


def layout_words(lay: dict) -> str:
    """How a picture says where its layout came from: reused from its file, computed and stored there, or
    computed and not kept (the study's ``runs/layouts`` cannot be written: a read-only study)."""
    if lay.get("reused"):
        return f"reused from {lay['file']}"
    return "computed and stored" if lay.get("kept", True) else "computed, not kept (runs/layouts cannot be written)"


def study_colors(study_root: str | Path, field: str) -> dict[str, str]:
    """The colours ``study.json`` declares for ``field``, in its order ({} when none or the file is invalid:
    the palette then colours every category)."""
    return declared_colors(study_file_or_none(study_root), field)


# --- words that fit the study ----------------------------------------------------------------------

def step_label(meta: dict, step: int) -> str:
    return "initial state" if step == 0 else f"{meta['time_unit']} {step}"


def size_key(meta: dict, view: str) -> str:
    """What a node's size means in ``view``, in words."""
    d = meta["degree"]
    if view == "communities":
        return "disc area \u221d agents in the community"
    if view == "network" and meta["size_by"] == "degree":
        return f"node area \u221d degree ({d['min']:,}\u2013{d['max']:,} links)"
    if view == "network":
        return f"all nodes the same size (degrees {d['min']:,}\u2013{d['max']:,} are alike)"
    return "all nodes the same size"


def captions(pic: dict) -> dict[str, str]:
    """The caption of each view in ``pic``: what is drawn, how, and from what; posts are mentioned only
    when the run stored messages."""
    m = pic["meta"]
    field = m["field"]
    colour = (f"Colour: each agent's '{field}' at the step, in the study's colours and order"
              if m["kind"] == "categorical" else f"Colour: each agent's '{field}' at the step (viridis, "
                                                  f"{m['range'][0]:.3g} to {m['range'][1]:.3g})")
    posts = (" Tick 'messages' to light the links of the agents who posted in the step (off by default)."
             if m["has_messages"] else "")
    out = {}
    if "network" in pic:
        lay = pic["network"]["layout"]
        out["network"] = (f"Every one of the {m['n_agents']:,} agents at its place in the network's layout "
                          f"({lay['method']}: igraph's DrL force-directed layout"
                          + (", in two levels: groups of agents placed first, so its clumps are a drawing "
                             "device, not communities" if lay.get("two_levels") else "")
                          + f"; computed once for this network and stored, the same for every run, branch and view "
                          f"of it). {colour}. "
                          f"{size_key(m, 'network')[0].upper() + size_key(m, 'network')[1:]}; a state never "
                          f"changes a size. Grey lines: the network's {m['n_links']:,} links.{posts}")
    if "communities" in pic:
        c = pic["communities"]
        what = ("the slices are the shares of each category among its agents at the step, in the legend's order"
                if m["kind"] == "categorical" else f"its colour is the mean '{field}' of its agents at the step")
        out["communities"] = (f"{len(c['size']):,} communities found by Leiden (igraph, modularity), one disc each, "
                              f"its area proportional to its agents (the largest has {max(c['size']):,}); {what}. "
                              f"Lines: links between communities, wider and darker for more links (the strongest "
                              f"joins {max(c['weight'], default=0):,} pairs of agents)."
                              + (" With 'messages' ticked, an orange ring's length is the share of the community's "
                                 "agents who posted in the step." if m["has_messages"] else ""))
    if "adoption" in pic:
        a = pic["adoption"]
        s = m["seeds"]
        hops = (f"'hops': rings by distance in links from the {s['count']:,} seeds ({s['rule']}), ring 0 the seeds, "
                f"the outer ring the agents no seed reaches; " if "hops" in a else "")
        out["adoption"] = (f"Agents placed on rings: {hops}'step changed': rings by the step at which each agent "
                           f"first left its initial state (seeds in the middle, the outer ring those that never "
                           f"did). Inside a ring agents sit next to the neighbours that reached them. {colour}. "
                           f"All nodes the same size; links not drawn.")
    if "tree" in pic:
        t = pic["tree"]
        out["tree"] = (f"Who passed the state to whom, from the state field '{t['field']}': {t['transmitted']:,} "
                       f"transmissions from {t['roots']:,} roots (the seeds). Left to right: the step of "
                       f"infection; each line joins an agent to the agent that infected it, and each chain of "
                       f"infections is a band (the largest first). {colour}; agents not yet infected at the step "
                       f"are hollow.")
    return out


def run_note(meta: dict) -> str:
    """How far the drawn run had got, when it had not simply completed: a run still going, stopped or failed
    is drawn up to its last stored step, and a picture of it must not read as the whole run ("" otherwise).
    The statuses are ``desim report``'s (``desim.store.health``: ``stale`` when its process is gone)."""
    run = meta.get("run") or {}
    status = run.get("status")
    if not status or status == "completed":
        return ""
    unit, last = meta["time_unit"], meta["steps"][-1] if meta["steps"] else 0
    where = f"{unit} {last:,}" + (f" of {run['n_steps']:,}" if run.get("n_steps") else "")
    if status == "running":
        return (f"Run {meta['run_id']} was still going when this was drawn: shown up to {where}, the steps stored "
                f"so far; draw it again when it ends.")
    if status == "stale":
        return (f"Run {meta['run_id']} stopped at {where} without ending (stale: its process is gone); "
                f"`desim run --resume {meta['run_id']}` continues it.")
    why = f": {run['error']}" if run.get("error") else ""
    return f"Run {meta['run_id']} is {status}: it stopped at {where}{why}."


def subtitle(pic: dict, view: str) -> str:
    m = pic["meta"]
    return (f"{m['study']}: '{m['field']}' of {m['n_agents']:,} agents, {m['n_links']:,} links, run {m['run_id']}"
            f" \u2014 {VIEW_NAMES[view]} view")


# --- figure geometry: text measured first, then placed ------------------------------------------

class Sheet:
    """A figure laid out top to bottom in pixels: blocks of text and axes whose sizes are measured on a
    scratch figure before the real one is made, so nothing overlaps and the height fits the content."""

    def __init__(self, width: int = WIDTH):
        self.width = width
        self.scratch = new_figure(figsize=(width / DPI, 4), dpi=DPI)
        self.items: list[tuple] = []
        self.y = PAD

    def size(self, text: str, pt: float, weight: str = "normal") -> tuple[float, float]:
        return text_size(self.scratch, text, pt, weight)

    def lines(self, text: str, pt: float, *, weight: str = "normal", color: str = "#222", x: float = PAD,
              width: float | None = None) -> None:
        width = width or (self.width - 2 * PAD)
        for line in wrap_to_width(self.scratch, text, pt, width, weight):
            h = pt * DPI / 72 * 1.35
            self.items.append(("text", x, self.y, line, pt, weight, color))
            self.y += h

    def keys(self, items: list[tuple[str, str, str]], pt: float = KEY_PT) -> None:
        """A key in rows: ``(glyph, colour, label)`` per item, placed left to right, wrapped by measured width."""
        glyph_w = [self.size(g, pt)[0] for g, _, _ in items]
        label_w = [self.size(label, pt)[0] for _, _, label in items]
        widths = [g + 4 + lw for g, lw in zip(glyph_w, label_w)]
        h = pt * DPI / 72 * 1.45
        for row in flow_rows(widths, self.width - 2 * PAD, 2 * GAP):
            x = PAD
            for i in row:
                glyph, color, label = items[i]
                self.items.append(("text", x, self.y, glyph, pt, "normal", color))
                self.items.append(("text", x + glyph_w[i] + 4, self.y, label, pt, "normal", "#222"))
                x += widths[i] + 2 * GAP
            self.y += h

    def gap(self, px: float = PAD / 2) -> None:
        self.y += px

    def finish(self):
        height = int(math.ceil(self.y + PAD))
        fig = new_figure(figsize=(self.width / DPI, height / DPI), dpi=DPI)
        fig.patch.set_facecolor("white")
        axes = []
        for item in self.items:
            if item[0] == "text":
                _, x, y, text, pt, weight, color = item
                fig.text(x / self.width, 1 - y / height, text, fontsize=pt, weight=weight, color=color,
                         ha="left", va="top")
            else:
                _, x, y, w, h = item
                ax = fig.add_axes([x / self.width, 1 - (y + h) / height, w / self.width, h / height])
                ax.set_axis_off()
                axes.append(ax)
        return fig, axes

    def box(self, x: float, y: float, w: float, h: float) -> None:
        self.items.append(("axes", x, y, w, h))


def shown_frames(n: int, max_panels: int) -> tuple[list[int], int]:
    """Frame positions for small multiples: every ``stride``-th of ``n`` (the smallest stride that keeps
    to ``max_panels``), starting at the first; the last frame is added when the stride misses it."""
    if n <= max_panels:
        return list(range(n)), 1
    stride = max(1, math.ceil((n - 1) / (max_panels - 1)))
    while True:
        idx = list(range(0, n, stride))
        if idx[-1] != n - 1:
            idx.append(n - 1)
        if len(idx) <= max_panels:
            return idx, stride
        stride += 1


def decode(frame: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(frame), dtype=np.uint8)


def _colors(meta: dict) -> np.ndarray:
    """RGBA per colour code (256 rows: the palette, then "no value" grey), so a frame's codes index it."""
    hexes = list(meta["palette"]) + [meta["missing"]] * (256 - len(meta["palette"]))
    return np.array([to_rgba(c) for c in hexes])


def _category_keys(meta: dict) -> list[tuple[str, str, str]]:
    if meta["kind"] == "categorical":
        return [("\u25cf", c, label) for label, c in zip(meta["categories"], meta["palette"])]
    lo, hi = meta["range"]
    pal = meta["palette"]
    return [("\u25cf", pal[0], f"{lo:.3g} (low '{meta['field']}')"), ("\u25cf", pal[len(pal) // 2], "middle"),
            ("\u25cf", pal[-1], f"{hi:.3g} (high)")]


def _share_items(meta: dict, k: int) -> list[tuple[str, str, str]]:
    """Under a panel: each category's share of all agents at frame ``k``, as a coloured dot and a
    percentage (the key above names the colours, so long labels never crowd the panels)."""
    if meta["kind"] != "categorical":
        mean = meta["means"][k]
        return [("", "#222", "mean n/a" if mean is None else f"mean {mean:.3g}")]
    counts = meta["counts"][k]
    total = max(1, sum(counts))
    return [("\u25cf", c, share_text(v, total)) for c, v in zip(meta["palette"], counts)]


def share_text(count: int, total: int) -> str:
    """A category's share of the agents, to one decimal, that never rounds agents away: a share that would
    print as 0.0 % (2 of 5,000) or 100.0 % (4,999 of 5,000) reads "<0.1 % (2)" or ">99.9 % (4,999)", the
    count beside it; none at all is "0 %", everyone "100 %"."""
    if count == 0:
        return "0 %"
    if count == total:
        return "100 %"
    text = f"{100 * count / total:.1f}"
    if text == "0.0":
        return f"<0.1 % ({count:,})"
    if text == "100.0":
        return f">99.9 % ({count:,})"
    return f"{text} %"


def _panels(sheet: Sheet, meta: dict, chosen: list[int], cols: int, aspect: float = 1.0) -> list[tuple[int, float, float]]:
    """Place a grid of panels: each a title above, square axes, shares below. Returns the axes boxes' frames."""
    inner = sheet.width - 2 * PAD
    cell = (inner - (cols - 1) * PAD) / cols
    boxes = []
    for r0 in range(0, len(chosen), cols):
        row = chosen[r0:r0 + cols]
        top = sheet.y
        heights = []
        for j, k in enumerate(row):
            x = PAD + j * (cell + PAD)
            sheet.y = top
            sheet.lines(step_label(meta, meta["steps"][k]), PANEL_PT, weight="bold", x=x, width=cell)
            sheet.box(x, sheet.y, cell, cell * aspect)
            boxes.append((k, x, sheet.y))
            sheet.y += cell * aspect + 4
            items = _share_items(meta, k)
            glyph_w = [sheet.size(g, SHARE_PT)[0] if g else 0 for g, _, _ in items]
            widths = [g + (3 if g else 0) + sheet.size(t, SHARE_PT)[0] for g, (_, _, t) in zip(glyph_w, items)]
            h = SHARE_PT * DPI / 72 * 1.4
            for rrow in flow_rows(widths, cell, GAP):
                xx = x
                for i in rrow:
                    glyph, color, text = items[i]
                    if glyph:
                        sheet.items.append(("text", xx, sheet.y, glyph, SHARE_PT, "normal", color))
                    sheet.items.append(("text", xx + glyph_w[i] + (3 if glyph else 0), sheet.y, text, SHARE_PT,
                                        "normal", "#333"))
                    xx += widths[i] + GAP
                sheet.y += h
            heights.append(sheet.y)
        sheet.y = max(heights) + PAD
    return boxes


def _ordinal(k: int) -> str:
    """2 -> '2nd', 3 -> '3rd', 11 -> '11th', 22 -> '22nd': the frame stride as a reader says it."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def _frame_note(meta: dict, chosen: list[int], stride: int) -> str:
    n = len(meta["steps"])
    unit = meta["time_unit"]
    # a run not completed had more steps to come: the note says these are the ones stored, and why
    status = (meta.get("run") or {}).get("status") or "completed"
    so_far, why = ("", "") if status == "completed" else (" stored so far", {
        "running": "the run was still going; ", "stale": "the run stopped without ending (stale); "}.get(
        status, f"the run is {status}; "))
    if stride == 1:
        return f"Every {unit} shown ({why}{n} frames: the initial state and {n - 1} {unit}s{so_far})."
    last = chosen[-1] - chosen[-2] != stride
    return (f"Every {_ordinal(stride)} {unit} of {n - 1}{so_far} ({why}{len(chosen)} of {n} frames)"
            + (f", and the last ({unit} {meta['steps'][-1]})." if last else "."))


def _square(ax, lo: float = -0.02, hi: float = 1.02) -> None:
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_axis_off()


# --- the views as PNG --------------------------------------------------------------------------------

def _edge_image(xy: np.ndarray, edges: np.ndarray, px: int) -> np.ndarray:
    """The links drawn once, as an RGBA image of ``px`` x ``px``: every panel shows the same links, so
    they are rasterised once instead of once per panel."""
    fig = new_figure(figsize=(px / DPI, px / DPI), dpi=DPI)
    fig.patch.set_alpha(0)
    ax = fig.add_axes([0, 0, 1, 1])
    ax.patch.set_alpha(0)
    _square(ax)
    m = len(edges)
    if m:
        ax.plot(*polyline(xy, edges), color=EDGE, linewidth=0.35, alpha=edge_alpha(m), solid_capstyle="butt")
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).copy()


def polyline(xy: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Segments as one line broken by NaNs (x and y): one path for matplotlib instead of a path per link."""
    seg = np.full((len(edges), 3, 2), np.nan)
    seg[:, 0], seg[:, 1] = xy[edges[:, 0]], xy[edges[:, 1]]
    flat = seg.reshape(-1, 2)
    return flat[:, 0], flat[:, 1]


def edge_alpha(m: int) -> float:
    """The opacity of one link: fainter the more links there are, so that a dense network reads as a
    grey texture under its nodes, not as a grey blot over them (the player uses the same rule)."""
    return float(np.clip(25.0 / np.sqrt(max(m, 1)), 0.03, 0.35))


def grid_shape(n_agents: int, max_panels: int) -> tuple[int, int]:
    """(panels, columns): up to ``max_panels`` panels (the caller's, 12 unless asked otherwise) in 4 columns;
    above 2,000 agents up to 9 of them in 3 columns, so a panel is wide enough (about 370 px) for its agents
    to be told apart (:func:`shown_frames` then picks the frames that fill them)."""
    if n_agents > 2000:
        return min(max_panels, 9), 3
    return max_panels, 4


def node_radius_px(meta: dict, radius: np.ndarray, panel_px: float) -> np.ndarray:
    """Drawing radius in pixels: a base that shrinks with the number of agents, times the picture's
    relative radius (1 for every node, or the degree rule of ``desim.report.network_picture.size_rule``)."""
    base = float(np.clip(0.3 * panel_px / math.sqrt(max(meta["n_agents"], 1)), 0.7, 4.0))
    return base * np.asarray(radius, dtype=float)


def _scatter(ax, x, y, r_px, colors, order, outline=None) -> None:
    s = (2 * r_px * 72 / DPI) ** 2
    ax.scatter(x[order], y[order], s=s[order], c=colors[order], linewidths=0, zorder=3)
    if outline is not None and len(outline):
        ax.scatter(x[outline], y[outline], s=s[outline] * 2.2, facecolors="none", edgecolors=OVERLAY,
                   linewidths=0.8, zorder=4)


def _lit_edges(edges: np.ndarray, posters: list[int], n: int) -> np.ndarray:
    lit = np.zeros(n, bool)
    lit[posters] = True
    return edges[lit[edges[:, 0]] | lit[edges[:, 1]]]


def _figure_head(sheet: Sheet, pic: dict, view: str, extra_keys: list[tuple[str, str, str]]) -> None:
    m = pic["meta"]
    sheet.lines(m.get("title") or m["study"], TITLE_PT, weight="bold")
    sheet.lines(subtitle(pic, view), SUB_PT, color="#444")
    if run_note(m):
        sheet.lines(run_note(m), SUB_PT, weight="bold", color=WARN)
    sheet.gap(4)
    sheet.keys(_category_keys(m) + extra_keys)
    sheet.gap(6)


def node_figure(pic: dict, view: str = "network", *, messages: bool = False, max_panels: int = 12,
                mode: str = "hops"):
    """Small multiples of a node-level view (``network`` or ``adoption``): a matplotlib Figure."""
    m, node = pic["meta"], pic["node"]
    n = m["n_agents"]
    if view == "network":
        xy = np.column_stack([pic["network"]["x"], pic["network"]["y"]])
        radius = np.asarray(node["radius"], dtype=float)
        edges = np.asarray(pic["network"]["edges"], dtype=np.int64).reshape(-1, 2)
    else:
        place = pic["adoption"].get(mode) or pic["adoption"]["changed"]
        xy = np.column_stack([place["x"], place["y"]])
        radius = np.ones(n)
        edges = np.zeros((0, 2), np.int64)
    panels, cols = grid_shape(n, max_panels)
    chosen, stride = shown_frames(len(m["steps"]), panels)
    cols = min(cols, max(1, len(chosen)))
    sheet = Sheet()
    keys = [("\u25cf", "#555", size_key(m, view))]
    if view == "network":
        keys.append(("\u2014", EDGE, "network links"))
    if messages and m["has_messages"]:
        keys.append(("\u2014" if view == "network" else "\u25cb", OVERLAY,
                     "links of agents who posted in the step" if view == "network" else "agents who posted in the step"))
    _figure_head(sheet, pic, view, keys)
    boxes = _panels(sheet, m, chosen, cols)
    note = _frame_note(m, chosen, stride)
    if view == "network":
        lay = pic["network"]["layout"]
        note += f" Layout: {lay['method']} ({layout_words(lay)})."
        if lay.get("two_levels"):
            note += (f" Laid out in two levels ({m['n_agents']:,} agents): its clumps are a drawing device, not "
                     f"communities (the communities view shows those).")
    else:
        note += (" Rings: hops from the seeds (0 = seeds; outermost: not reached)." if mode == "hops" and
                 "hops" in pic["adoption"] else " Rings: the step each agent first changed state (outermost: never).")
    sheet.lines(note, NOTE_PT, color="#555")
    fig, axes = sheet.finish()
    cell = (sheet.width - 2 * PAD - (cols - 1) * PAD) / cols
    r_px = node_radius_px(m, radius, cell)
    order = np.lexsort((np.arange(n), radius))          # by size alone (hubs on top), never by state
    palette = _colors(m)
    edge_img = _edge_image(xy, edges, int(round(cell))) if len(edges) else None
    frames = [decode(f) for f in node["frames"]]
    posters = node.get("posters", {})
    for ax, (k, _, _) in zip(axes, boxes):
        _square(ax)
        if edge_img is not None:
            ax.imshow(edge_img, extent=(-0.02, 1.02, -0.02, 1.02), origin="upper", zorder=1, interpolation="none")
        lit = posters.get(str(m["steps"][k]), []) if messages and m["has_messages"] else []
        if view == "network" and len(lit):
            ax.plot(*polyline(xy, _lit_edges(edges, lit, n)), color=OVERLAY, linewidth=0.6, alpha=0.45, zorder=2)
        if view == "adoption":
            _rings(ax, np.asarray((pic["adoption"].get(mode) or pic["adoption"]["changed"])["levels"]), first=ax is axes[0])
        _scatter(ax, xy[:, 0], xy[:, 1], r_px, palette[frames[k]], order,
                 outline=np.asarray(lit, dtype=np.int64) if view != "network" and len(lit) else None)
    return fig


def _rings(ax, levels: np.ndarray, first: bool) -> None:
    """The guides of the ring placement (``adoption_positions``): a faint circle between bands, labels in the first panel."""
    top = int(levels.max()) if (levels >= 0).any() else -1
    n_bands = top + 2 if (levels < 0).any() else top + 1
    width = 0.5 / (n_bands + 0.5)
    for b in range(n_bands):
        ax.add_patch(Circle((0.5, 0.5), width * (b + 1), fill=False, edgecolor="#d0d5dd", linewidth=0.5, zorder=0))
    if first:
        every = max(1, n_bands // 8)
        for b in range(0, n_bands, every):
            label = "never" if b == n_bands - 1 and (levels < 0).any() else str(b)
            # on a white tag: the bands are full of nodes, and a bare label among them is lost
            ax.text(0.5, 0.5 + width * (b + 0.5), label, fontsize=7, color="#344054", ha="center", va="center",
                    zorder=5, bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "#d0d5dd",
                                    "linewidth": 0.5, "alpha": 0.92})


def community_figure(pic: dict, *, messages: bool = False, max_panels: int = 12):
    """Small multiples of the community view: one disc per community, its shares as a pie."""
    m, c = pic["meta"], pic["communities"]
    panels, cols = grid_shape(len(c["size"]) * 50, max_panels)
    chosen, stride = shown_frames(len(m["steps"]), panels)
    cols = min(cols, max(1, len(chosen)))
    sheet = Sheet()
    keys = [("\u25cf", "#555", size_key(m, "communities")), ("\u2014", EDGE, "links between communities")]
    if messages and m["has_messages"]:
        keys.append(("\u25cb", OVERLAY, "share of the community's agents who posted in the step"))
    _figure_head(sheet, pic, "communities", keys)
    boxes = _panels(sheet, m, chosen, cols)
    sheet.lines(_frame_note(m, chosen, stride) + f" {len(c['size']):,} communities (Leiden, modularity).",
                NOTE_PT, color="#555")
    fig, axes = sheet.finish()
    x, y, r = np.asarray(c["x"]), np.asarray(c["y"]), np.asarray(c["radius"])
    src, dst, w = np.asarray(c["source"], np.int64), np.asarray(c["target"], np.int64), np.asarray(c["weight"], float)
    palette = _colors(m)
    for ax, (k, _, _) in zip(axes, boxes):
        _square(ax, 0, 1)
        if len(src):
            strength = np.sqrt(w / w.max())
            rgba = np.zeros((len(w), 4))
            rgba[:, :3] = to_rgb(EDGE)
            rgba[:, 3] = 0.05 + 0.55 * strength
            seg = np.stack([np.column_stack([x[src], y[src]]), np.column_stack([x[dst], y[dst]])], axis=1)
            ax.add_collection(LineCollection(seg, colors=rgba, linewidths=0.3 + 2.2 * strength, zorder=1))
        wedges, faces = [], []
        for i in range(len(x)):
            if m["kind"] == "categorical":
                start = 90.0
                for cat, share in enumerate(c["shares"][k][i]):
                    if share > 0:
                        wedges.append(Wedge((x[i], y[i]), r[i], start - 360 * share, start))
                        faces.append(palette[cat])
                        start -= 360 * share
            else:
                mean = c["means"][k][i]
                lo, hi = m["range"]
                b = NO_VALUE if mean is None else int(min(len(m["palette"]) - 1,
                                                          max(0, (mean - lo) / ((hi - lo) or 1) * len(m["palette"]))))
                wedges.append(Circle((x[i], y[i]), r[i]))
                faces.append(palette[b])
        ax.add_collection(PatchCollection(wedges, facecolors=faces, edgecolors="white", linewidths=0.3, zorder=2))
        if messages and m["has_messages"] and "posted" in c:
            arcs = [Wedge((x[i], y[i]), r[i] * 1.12, 90 - 360 * s, 90, width=r[i] * 0.08)
                    for i, s in enumerate(c["posted"][k]) if s > 0]
            ax.add_collection(PatchCollection(arcs, facecolors=OVERLAY, edgecolors="none", zorder=3))
    return fig


def tree_figure(pic: dict):
    """The transmission tree over time, and how many each infected agent infected."""
    m, t, node = pic["meta"], pic["tree"], pic["node"]
    sheet = Sheet()
    _figure_head(sheet, pic, "tree", [("\u25cf", "#555", "all nodes the same size"),
                                      ("\u2014", "#98a2b3", "infector to infected")])
    width = sheet.width - 2 * PAD
    tree_w = width * 0.72
    top = sheet.y
    sheet.box(PAD, top, tree_w, 560)
    sheet.box(PAD + 4 * PAD + tree_w, top + 20, width - tree_w - 4 * PAD, 250)
    sheet.y = top + 560 + 22
    sheet.lines(f"{m['time_unit']} of infection (0: the seeds, ringed); a line joins each agent to its infector",
                KEY_PT, color="#333", x=PAD, width=tree_w)
    sheet.gap(4)
    first_half = m["steps"][len(m["steps"]) // 2] if m["steps"] else 0
    x = np.asarray(t["x"], dtype=float)
    offspring = np.asarray(t["offspring"], dtype=np.int64)
    early = offspring[x <= first_half]
    mean = float(early.mean()) if len(early) else float("nan")
    sheet.lines(f"Right: how many agents each infected agent infected, for the {len(early):,} infected by "
                f"{m['time_unit']} {first_half} (later ones had less time before the run ended); mean {mean:.2f}.",
                NOTE_PT, color="#555")
    fig, (ax, hist) = sheet.finish()
    nodes = np.asarray(t["nodes"], dtype=np.int64)
    y = np.asarray(t["y"], dtype=float)
    parent = np.asarray(t["parent"], dtype=np.int64)
    where = {int(a): i for i, a in enumerate(nodes)}
    child = [i for i, p in enumerate(parent.tolist()) if p in where]
    up = np.array([where[int(parent[i])] for i in child], dtype=np.int64)
    child = np.array(child, dtype=np.int64)
    ax.set_axis_on()
    if len(child):
        # an elbow per infection: down (or up) the infector's step, then across to the infected
        elbow = np.full((len(child), 4, 2), np.nan)
        elbow[:, 0] = np.column_stack([x[up], y[up]])
        elbow[:, 1] = np.column_stack([x[up], y[child]])
        elbow[:, 2] = np.column_stack([x[child], y[child]])
        flat = elbow.reshape(-1, 2)
        ax.plot(flat[:, 0], flat[:, 1], color="#98a2b3", linewidth=0.4, alpha=0.8, zorder=1)
    frames = np.stack([decode(f) for f in node["frames"]])
    entered = frames[np.minimum(x.astype(np.int64), len(frames) - 1), nodes] if len(nodes) else np.zeros(0, np.int64)
    palette = _colors(m)
    size = float(np.clip(2200 / max(len(nodes), 1), 1.5, 16))
    roots = parent < 0
    ax.scatter(x[~roots], y[~roots], s=size, c=palette[entered[~roots]], linewidths=0, zorder=2)
    ax.scatter(x[roots], y[roots], s=size * 2.5, c=palette[entered[roots]], edgecolors="#111", linewidths=0.7, zorder=3)
    ax.set_xlim(-0.5, max(m["steps"][-1], 1) + 0.5)
    ax.set_ylim(-0.02, 1.02)
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=8)
    hist.set_axis_on()
    if len(early):
        bins = np.arange(0, max(int(early.max()), 1) + 2) - 0.5
        hist.hist(early, bins=bins, color=m["palette"][1] if len(m["palette"]) > 1 else "#555")
    hist.set_xlabel("agents infected by one agent", fontsize=8.5)
    hist.set_ylabel("infected agents", fontsize=8.5)
    hist.tick_params(labelsize=8)
    for side in ("right", "top"):
        hist.spines[side].set_visible(False)
    return fig


def view_figure(pic: dict, view: str, *, messages: bool = False, max_panels: int = 12, mode: str = "hops"):
    if view == "communities":
        return community_figure(pic, messages=messages, max_panels=max_panels)
    if view == "tree":
        return tree_figure(pic)
    return node_figure(pic, view, messages=messages, max_panels=max_panels, mode=mode)


# --- the offline player -------------------------------------------------------------------------------

def player_html(pic: dict) -> str:
    """A self-contained page: every view of ``pic`` in the shared renderer (``desim.report.netview``)."""
    m = pic["meta"]
    data = {**pic, "captions": captions(pic), "size_keys": {v: size_key(m, v) for v in VIEW_NAMES}}
    blob = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    title = m.get("title") or m["study"]
    sub = (f"{m['study']}: '{m['field']}' over the network of {m['n_agents']:,} agents ({m['n_links']:,} links), "
           f"run {m['run_id']}")
    note = f'<p class="dn-note dn-run-note">{escape(run_note(m))}</p>' if run_note(m) else ""
    if "network" not in pic and m["n_agents"] > m["max_nodes"]:
        note += (f'<p class="dn-note">{m["n_agents"]:,} agents: this player shows the community view only '
                f"(every agent is drawn up to {m['max_nodes']:,}; `desim viz diffusion --max-nodes "
                f"{m['n_agents']}` or the dashboard draw them all).</p>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}: {escape(m['field'])} over the network</title>
<style>
body {{ font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.2em auto; max-width: 960px;
       padding: 0 1em; color: #1d2330; }}
h1 {{ font-size: 1.35rem; margin: 0 0 .2rem; }} .sub {{ color: #475467; margin: 0 0 .6rem; }}
{NETVIEW_CSS}
</style></head><body>
<h1 id="title">{escape(title)}</h1>
<p class="sub" id="subtitle">{escape(sub)}</p>
{note}
<div id="desim-net"></div>
<script type="application/json" id="desim-diffusion-data">{blob}</script>
<script>{NETVIEW_JS}
DesimNet.mount(document.getElementById('desim-net'), JSON.parse(document.getElementById('desim-diffusion-data').textContent), {{}});
</script>
</body></html>
"""


def missing_view_why(meta: dict, view: str, cli: bool = False) -> str:
    """Why the run has no ``view`` (": ..." or ""), naming the option that draws it when there is one
    (``cli``: the command's option only, else the Python argument too)."""
    why = (meta.get("left_out") or {}).get(view)
    if not why:
        return ""
    n = meta["n_agents"]
    if n > meta["max_nodes"] and view in ("network", "adoption", "tree"):
        return (f": {n:,} agents, more than --max-nodes ({meta['max_nodes']:,}); give --max-nodes {n}"
                + ("" if cli else f" (max_nodes={n} in Python)") + " to draw every agent")
    return f": {why}"


def diffusion_player(study_root: str | Path, state: str, run_id: str | None = None, *, picture: dict | None = None,
                     out_dir: str | Path | None = None, max_panels: int = 12, view: str | None = None,
                     pngs: list[str] | None = None, messages: bool = False) -> dict[str, Any]:
    """Write the player ``diffusion_<state>.html`` and the small multiples ``diffusion_<state>.png`` of
    ``picture`` (from :func:`desim.report.network_picture.picture` for this study, state and run); returns
    ``{"html", "png", "pngs": {view: path}, "dir", "view"}``.

    ``view``: the view of ``diffusion_<state>.png`` (default: the picture's suggested one); ``pngs``:
    more views, each as ``diffusion_<state>_<view>.png`` (``["all"]``: every view of the picture);
    ``messages``: draw the message overlay in the PNGs (the player has its own check box, off).
    """
    if picture is None:
        raise ReportError("the diffusion player draws a picture computed by desim.report.network_picture (which "
                          "lays the network out): use `desim viz diffusion` or "
                          "desim.report.network_picture.diffusion_player("
                          f"{str(study_root)!r}, {state!r})")
    m = picture["meta"]
    if m["field"] != state or (run_id is not None and m["run_id"] != run_id):
        raise ReportError(f"the picture is of '{m['field']}' in run {m['run_id']}, not '{state}' in run {run_id}")
    drawable = [v for v in m["views"] if v in picture]
    main = view or (m["suggested"] if m["suggested"] in drawable else (drawable[0] if drawable else None))
    if main not in drawable:
        raise ReportError(f"no '{main}' view of run {m['run_id']}{missing_view_why(m, main)} (views available for "
                          f"this run: {', '.join(m['available'])}; in this picture: {', '.join(drawable) or 'none'})")
    extra = [v for v in (drawable if pngs == ["all"] else (pngs or [])) if v != main]
    unknown = [v for v in extra if v not in drawable]
    if unknown:
        raise ReportError(f"no {', '.join(unknown)} view in this picture (views: {', '.join(drawable)})")
    out = Path(out_dir) if out_dir else StudyLayout(study_root).report_dir(m["run_id"])
    out.mkdir(parents=True, exist_ok=True)
    stem = f"diffusion_{file_stem(state)}"
    html_path = out / f"{stem}.html"
    html_path.write_text(player_html(picture), encoding="utf-8")
    png_path = out / f"{stem}.png"
    png_path.write_bytes(png(view_figure(picture, main, messages=messages, max_panels=max_panels)))
    written = {main: png_path}
    for v in extra:
        path = out / f"{stem}_{v}.png"
        path.write_bytes(png(view_figure(picture, v, messages=messages, max_panels=max_panels)))
        written[v] = path
    return {"html": html_path, "png": png_path, "pngs": written, "dir": out, "view": main}
