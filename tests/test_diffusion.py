"""The diffusion player and its figures: what is drawn is what the panel says, in honest encodings.

Small graphs only (a few hundred agents); the 5,000- and 100,000-agent sizes are measured in
benchmarks/bench_network_views.py.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from itertools import combinations
from pathlib import Path

import matplotlib.image as mpimg
import networkx as nx
import numpy as np
import pytest

import desim
from desim.cli import main
from desim.report import ReportError, diffusion_player
from desim.report import diffusion as drawing
from desim.report import network_picture
from desim.report.figures import ordered_categories
from diffusion_studies import write_study
from storeq import sql

N_AGENTS = 150
STEPS = 10
LONG = ["an agent who has never heard of the rumour at all", "a committed spreader of the rumour to every neighbour",
        "a former spreader who stopped telling it after the official correction"]


def player_data(path) -> dict:
    m = re.search(r'<script type="application/json" id="desim-diffusion-data">(.*?)</script>',
                  path.read_text(encoding="utf-8"), re.S)
    assert m, "no embedded picture"
    return json.loads(m.group(1))


def frames(d) -> list[np.ndarray]:
    return [drawing.decode(f) for f in d["node"]["frames"]]


def state_counts(root, run_id, step, field="rumor_state"):
    table, where = ("initial_states", "") if step == 0 else ("panel", " AND step = ?")
    rows = sql(root, f"SELECT CAST(state.{field} AS VARCHAR) FROM {table} WHERE run_id = ?{where}",
               [run_id] + ([step] if step else []))
    return Counter(v for (v,) in rows)


@pytest.fixture
def rumor(study_copy):
    root = study_copy("rumor_network")
    run = desim.run_study(desim.load_study(root, steps=STEPS, params={"n_agents": N_AGENTS}))
    return root, run.run_id


def sir_study(root, n=300, kind=None, colors=None, steps=25):
    population = {"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": n}},
                  "interaction": kind or {"kind": "barabasi_albert", "m": 2}}
    write_study(root, "SIR", {"beta": 0.15, "gamma": 0.2}, env={"seeds": 4}, population=population, n_steps=steps)
    study = json.loads((root / "study.json").read_text())
    study["state_colors"] = {"state": colors or {"S": "#4c78a8", "I": "#d62728", "R": "#9e9e9e"}}
    (root / "study.json").write_text(json.dumps(study))
    return root, desim.run_study(desim.load_study(root)).run_id


@pytest.fixture
def sir(tmp_path):
    return sir_study(tmp_path / "sir")


def test_player_frames_count_what_the_panel_holds(rumor):
    root, run_id = rumor
    paths = network_picture.diffusion_player(root, "rumor_state")
    assert paths["html"] == root / "runs" / "reports" / run_id / "diffusion_rumor_state.html"
    d = player_data(paths["html"])
    m = d["meta"]
    assert m["run_id"] == run_id and m["kind"] == "categorical" and m["n_agents"] == N_AGENTS
    assert m["steps"] == list(range(STEPS + 1)) and len(d["node"]["ids"]) == N_AGENTS
    (n_edges,) = sql(root, "SELECT count(*) FROM edges WHERE run_id = ?", [run_id])[0]
    assert len(d["network"]["edges"]) == 2 * n_edges
    declared = list(json.loads((root / "study.json").read_text())["state_colors"]["rumor_state"])
    assert m["categories"] == [c for c in declared if c in m["categories"]]        # the declared order
    ids = d["node"]["ids"]
    for k, codes in enumerate(frames(d)):
        step = m["steps"][k]
        drawn = Counter(m["categories"][c] for c in codes)
        assert drawn == state_counts(root, run_id, step)                          # what is coloured
        assert dict(zip(m["categories"], m["counts"][k])) == {c: drawn.get(c, 0) for c in m["categories"]}
    assert any(Counter(f.tolist())[m["categories"].index("spreader")] for f in frames(d)[1:])
    # the message overlay's data: who posted in each step, exactly
    assert m["has_messages"]
    for step in range(1, STEPS + 1):
        authors = {a for (a,) in sql(root, "SELECT DISTINCT author_id FROM messages WHERE run_id = ? AND step = ?",
                                     [run_id, step])}
        assert {ids[i] for i in d["node"]["posters"].get(str(step), [])} == authors
    img = mpimg.imread(paths["png"])
    assert img.shape[1] == drawing.WIDTH and img[..., :3].std() > 0.05


def test_the_layout_is_stored_once_and_reused_by_later_pictures_and_branches(rumor):
    root, run_id = rumor
    first = network_picture.diffusion_player(root, "rumor_state", out_dir=root / "a")["picture"]
    files = list((root / "runs" / "layouts").glob("*.parquet"))
    assert first["network"]["layout"]["reused"] is False and len(files) == 2     # positions and communities
    stamp = {f: f.stat().st_mtime_ns for f in files}
    again = network_picture.diffusion_player(root, "rumor_state", out_dir=root / "b")["picture"]
    assert again["network"]["layout"]["reused"] is True and again["communities"]["reused"] is True
    assert again["network"]["x"] == first["network"]["x"] and again["network"]["y"] == first["network"]["y"]
    assert {f: f.stat().st_mtime_ns for f in files} == stamp
    child = desim.branch(root, run_id, 4, note="same network, replayed to step 3")
    branched = network_picture.picture(root, "rumor_state", child.run_id, views=["network"])
    assert branched["network"]["layout"]["reused"] is True                        # the parent's network, its layout
    assert branched["network"]["x"] == first["network"]["x"]
    assert sorted((root / "runs" / "layouts").glob("*.parquet")) == sorted(files)
    assert 0 <= min(first["network"]["x"]) and max(first["network"]["x"]) <= 1


def test_sizes_are_by_degree_or_constant_never_by_state(rumor, sir):
    root, run_id = sir
    d = network_picture.picture(root, "state", run_id, views=["network"])
    m, radius = d["meta"], np.asarray(d["node"]["radius"])
    degree = np.bincount(np.asarray(d["network"]["edges"]), minlength=m["n_agents"])
    assert m["size_by"] == "degree"                               # a scale-free graph: hubs are sized
    for k in set(degree.tolist()):
        assert len(set(radius[degree == k].tolist())) == 1        # the same degree, the same size, whatever the state
    order = np.argsort(degree, kind="stable")
    assert (np.diff(radius[order]) >= 0).all() and radius.max() > radius.min()
    last = frames(d)[-1]
    rare = min(range(len(m["categories"])), key=lambda c: (last == c).sum() or 10 ** 9)
    same = [i for i in range(m["n_agents"]) if degree[i] == np.median(degree)]
    assert len({radius[i] for i in same if last[i] == rare} | {radius[i] for i in same}) == 1
    ws_root, ws_run = rumor                                     # a ring lattice: every node the same size
    ws = network_picture.picture(ws_root, "rumor_state", ws_run, views=["network"])
    assert ws["meta"]["size_by"] == "constant" and set(ws["node"]["radius"]) == {1.0}
    assert "the same size" in drawing.size_key(ws["meta"], "network")
    assert "\u221d degree" in drawing.size_key(m, "network")


def test_a_state_model_says_nothing_about_posts(sir, rumor):
    root, run_id = sir
    d = network_picture.picture(root, "state", run_id)
    assert d["meta"]["has_messages"] is False and "posters" not in d["node"]
    words = list(drawing.captions(d).values()) + [drawing.size_key(d["meta"], v) for v in drawing.VIEW_NAMES]
    for view in d["meta"]["views"]:
        fig = drawing.view_figure(d, view, messages=True)          # asked for, yet there is nothing to show
        words += [t.get_text() for t in fig.texts]
    assert not [w for w in words if re.search(r"\bpost|messag", w)], "a model with no messages mentions posts"
    rroot, rrun = rumor
    r = network_picture.picture(rroot, "rumor_state", rrun)
    assert "posted" in drawing.captions(r)["network"]


def test_legend_follows_the_declared_order(tmp_path):
    root, run_id = sir_study(tmp_path / "order", colors={"R": "#9e9e9e", "S": "#4c78a8", "I": "#d62728"})
    d = network_picture.picture(root, "state", run_id, views=["communities"])
    assert d["meta"]["categories"] == ["R", "S", "I"]
    assert d["meta"]["palette"] == ["#9e9e9e", "#4c78a8", "#d62728"]
    assert ordered_categories(["b", "null", "a", "c"], {"c": "#000000"}) == ["c", "a", "b", "null"]


def test_transmission_tree_is_who_infected_whom(sir):
    root, run_id = sir
    d = network_picture.picture(root, "state", run_id, views=["tree"])
    t, ids = d["tree"], d["node"]["ids"]
    first = {}
    for agent, step, by in sql(root, "SELECT agent_id, step, CAST(state.infected_by AS VARCHAR) FROM panel "
                                     "WHERE run_id = ? AND state.infected_by IS NOT NULL ORDER BY step", [run_id]):
        first.setdefault(agent, (step, by))
    got = {ids[a]: (x, ids[p]) for a, x, p in zip(t["nodes"], t["x"], t["parent"]) if p >= 0}
    assert got == first and t["transmitted"] == len(first)
    seeds = {a for (a,) in sql(root, "SELECT agent_id FROM initial_states WHERE run_id = ? AND state.state = 'I'",
                               [run_id])}
    assert {ids[a] for a, p in zip(t["nodes"], t["parent"]) if p < 0} == seeds
    assert sum(t["offspring"]) == t["transmitted"]
    assert all(0 <= y <= 1 for y in t["y"])


def test_adoption_rings_are_hops_from_the_seeds(sir):
    root, run_id = sir
    d = network_picture.picture(root, "state", run_id, views=["adoption"])
    ids = d["node"]["ids"]
    g = nx.Graph()
    g.add_nodes_from(ids)
    g.add_edges_from(sql(root, "SELECT source, target FROM edges WHERE run_id = ?", [run_id]))
    seeds = [a for (a,) in sql(root, "SELECT agent_id FROM initial_states WHERE run_id = ? AND state.state = 'I'",
                               [run_id])]
    hops = nx.multi_source_dijkstra_path_length(g, seeds)
    assert d["adoption"]["hops"]["levels"] == [hops.get(a, -1) for a in ids]
    changed = d["adoption"]["changed"]["levels"]
    assert all(changed[ids.index(s)] == 0 for s in seeds)


def test_ring_labels_are_tagged_above_the_nodes_so_they_read_among_them(sir):
    """The adoption view labels its rings (hops) in the first panel, inside bands full of nodes: each
    label sits above the nodes on an opaque white tag, or it is lost among them."""
    import matplotlib.pyplot as plt
    root, run_id = sir
    d = network_picture.picture(root, "state", run_id, views=["adoption"])
    fig = drawing.view_figure(d, "adoption")
    first = fig.axes[0]
    labels = [t for t in first.texts if t.get_text().isdigit() or t.get_text() == "never"]
    nodes = max(c.get_zorder() for c in first.collections)
    assert labels and labels[0].get_text() == "0"
    for t in labels:
        tag = t.get_bbox_patch()
        assert tag is not None and t.get_zorder() > nodes, t.get_text()
        assert tag.get_facecolor()[:3] == (1.0, 1.0, 1.0) and tag.get_facecolor()[3] >= 0.9
    plt.close(fig)


def test_no_text_overlaps_in_the_figures_even_with_long_labels(sir):
    root, run_id = sir
    d = network_picture.picture(root, "state", run_id)
    d["meta"]["categories"] = LONG
    d["meta"]["study"] = "a study whose name is long enough to wrap " * 3
    for view in ("network", "communities", "adoption", "tree"):
        fig = drawing.view_figure(d, view)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in fig.texts if t.get_text().strip()]
        width, height = fig.canvas.get_width_height()
        for text, b in boxes:
            assert b.x0 >= -0.5 and b.x1 <= width + 0.5 and b.y0 >= -0.5 and b.y1 <= height + 0.5, (view, text)
        for (ta, a), (tb, b) in combinations(boxes, 2):
            assert not a.overlaps(b) or a.x1 <= b.x0 + 0.5 or b.x1 <= a.x0 + 0.5 or a.y1 <= b.y0 + 0.5 \
                or b.y1 <= a.y0 + 0.5, f"{view}: {ta!r} overlaps {tb!r}"
        for ax in fig.axes:
            axes_box = ax.get_window_extent(renderer)
            for text, b in boxes:
                if ax.get_visible() and ax.axison is False:
                    assert not (b.x0 < axes_box.x1 - 1 and axes_box.x0 + 1 < b.x1 and b.y0 < axes_box.y1 - 1
                                and axes_box.y0 + 1 < b.y1), f"{view}: {text!r} over a panel"
        import matplotlib.pyplot as plt
        plt.close(fig)


def test_small_multiples_are_evenly_spaced():
    assert drawing.shown_frames(8, 12) == (list(range(8)), 1)
    idx, stride = drawing.shown_frames(41, 12)
    assert stride == 4 and idx == list(range(0, 41, 4))
    idx, stride = drawing.shown_frames(42, 9)
    assert len(idx) <= 9 and idx[0] == 0 and idx[-1] == 41
    assert set(np.diff(idx[:-1]).tolist()) == {stride}           # regular, the last frame added at the end


def test_the_frame_note_says_the_stride_as_an_ordinal():
    meta = {"steps": list(range(17)), "time_unit": "week"}
    assert drawing._frame_note(meta, list(range(0, 17, 2)), 2).startswith("Every 2nd week of 16 (9 of 17 frames)")
    meta = {"steps": list(range(34)), "time_unit": "day"}
    assert drawing._frame_note(meta, [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33], 3).startswith("Every 3rd day")
    assert [drawing._ordinal(k) for k in (1, 4, 11, 12, 13, 21, 22, 111)] == [
        "1st", "4th", "11th", "12th", "13th", "21st", "22nd", "111th"]


def test_cli_prints_progress_and_writes_every_view(sir, capsys, monkeypatch):
    monkeypatch.setenv("DESIM_PROGRESS", "lines")          # stderr is no terminal here
    root, run_id = sir
    assert main(["viz", "diffusion", str(root), "--state", "state", "--view", "all"]) == 0
    out, err = capsys.readouterr()
    assert "layout of 300 agents" in err and "DrL" in err and "communities" in err
    assert "(computed and stored)" in out
    [layout] = [line for line in out.splitlines() if line.startswith("layout: ")]
    assert Path(layout.split()[1]).is_file()        # a path from here, not from inside the study
    folder = root / "runs" / "reports" / run_id
    for name in ("diffusion_state.png", "diffusion_state_communities.png", "diffusion_state_adoption.png",
                 "diffusion_state_tree.png", "diffusion_state.html"):
        assert (folder / name).is_file() and str(folder / name) in out
    assert main(["viz", "diffusion", str(root), "--state", "state", "--view", "network", "--messages"]) == 0
    out, err = capsys.readouterr()
    assert "(reused)" in out and "view data ready" in err
    assert main(["viz", "diffusion", str(root), "--state", "state", "--quiet"]) == 0
    assert "view data ready" not in capsys.readouterr().err
    assert main(["viz", "diffusion", str(root), "--state", "nope"]) == 2
    with pytest.raises(ReportError, match=r"desim\.report\.network_picture\.diffusion_player\("):
        diffusion_player(root, "state")


def test_continuous_field(study_copy):
    root = study_copy("opinion_diffusion")
    run = desim.run_study(desim.load_study(root, params={"n_agents": 30}))
    d = network_picture.picture(root, "opinion", run.run_id)
    m = d["meta"]
    assert m["kind"] == "numeric" and len(m["steps"]) == 13 and "adoption" not in m["available"]
    lo, hi = m["range"]
    (smin, smax) = sql(root, "SELECT min(CAST(state.opinion AS DOUBLE)), max(CAST(state.opinion AS DOUBLE)) "
                             "FROM states WHERE run_id = ?", [run.run_id])[0]
    assert (lo, hi) == pytest.approx((smin, smax))
    ids = d["node"]["ids"]
    for k in range(1, 13):
        rows = dict(sql(root, "SELECT agent_id, CAST(state.opinion AS DOUBLE) FROM panel WHERE run_id = ? AND step = ?",
                        [run.run_id, k]))
        assert m["means"][k] == pytest.approx(sum(rows.values()) / len(rows))
        codes = frames(d)[k]
        order = sorted(rows, key=rows.get)
        drawn = [int(codes[ids.index(a)]) for a in order]
        assert drawn == sorted(drawn) and drawn[0] < drawn[-1]        # darker for lower opinions


@pytest.mark.browser
def test_player_runs_in_a_browser_with_the_overlay_off(rumor):
    """Offline in Chromium: every view draws, the overlay is off until ticked, the legend keeps the declared
    order, sizes stay put while states change, and long labels do not overlap."""
    from playwright.sync_api import sync_playwright

    from browser import launch
    from waits import HANG_S
    root, _ = rumor
    html = network_picture.diffusion_player(root, "rumor_state")["html"]
    d = player_data(html)
    errors, fetched = [], []
    with sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            page.set_default_timeout(HANG_S * 1000)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: fetched.append(r.url))
            page.goto(html.as_uri())
            page.wait_for_selector('#desim-net[data-drawn="network:0:0"]')
            assert page.get_attribute("#desim-net", "data-overlay") == "off"
            assert not page.is_checked(".dn-messages")
            order = page.eval_on_selector_all(".dn-legend [data-category]", "els => els.map(e => e.dataset.category)")
            assert order == d["meta"]["categories"]
            first = page.evaluate("document.getElementById('desim-net').desimNet.drawn()")
            page.fill(".dn-step", str(STEPS))
            page.dispatch_event(".dn-step", "input")
            page.wait_for_selector(f'#desim-net[data-drawn="network:{STEPS}:0"]')
            last = page.evaluate("document.getElementById('desim-net').desimNet.drawn()")
            assert first["radius"] == last["radius"] and first["color"] != last["color"]
            assert set(first["radius"]) == {first["radius"][0]}       # a ring lattice: one size
            page.check(".dn-messages")
            page.wait_for_selector(f'#desim-net[data-drawn="network:{STEPS}:1"]')
            assert page.get_attribute("#desim-net", "data-overlay") == "on"
            for view in d["meta"]["views"]:
                page.click(f'.dn-views button[data-view="{view}"]')
                page.wait_for_selector(f'#desim-net[data-drawn^="{view}:"]')
                assert page.get_attribute("#desim-net", "data-overlay") == "on"    # the toggle holds in every view
            drawn = page.evaluate("""() => { const c = document.querySelector('.dn-canvas');
                const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                let n = 0; for (let i = 3; i < px.length; i += 4) if (px[i] > 0) n++; return n; }""")
            assert drawn > 1000
            # long labels: the legend wraps, no two entries overlap, none leaves the page
            long = dict(d)
            long["meta"] = {**d["meta"], "categories": LONG}
            page.evaluate("""data => { const root = document.getElementById('desim-net');
                root.desimNet.dispose(); DesimNet.mount(root, data, {}); }""", {**long, "captions": {}, "size_keys": {}})
            page.wait_for_selector('#desim-net[data-drawn="network:0:0"]')
            boxes = page.eval_on_selector_all(".dn-legend > span, .dn-size > span, .dn-controls > *",
                                              "els => els.map(e => { const b = e.getBoundingClientRect(); "
                                              "return [b.left, b.top, b.right, b.bottom]; })")
            width = page.evaluate("document.documentElement.clientWidth")
            for a, b in combinations(boxes, 2):
                assert a[2] <= b[0] + 0.5 or b[2] <= a[0] + 0.5 or a[3] <= b[1] + 0.5 or b[3] <= a[1] + 0.5, (a, b)
            assert all(b[2] <= width for b in boxes)
        finally:
            browser.close()
    assert errors == []
    assert all(u.startswith("file:") for u in fetched)      # nothing from the network


def test_a_misspelt_state_names_the_fields_the_run_has(rumor, capsys):
    root, run_id = rumor
    assert main(["viz", "diffusion", str(root), "--state", "rumour_state", "-q"]) == 2
    err = capsys.readouterr().err
    assert err == (f"desim: error: run {run_id}: the panel state has no field 'rumour_state' (its fields: "
                   "rumor_state, heard); did you mean 'rumor_state'?\n")
