"""The diffusion player: one frame per step whose colours count what the panel says."""
from __future__ import annotations

import json
import re
from collections import Counter

import matplotlib.image as mpimg
import pytest

import desim
from desim.cli import main
from desim.report import diffusion_player
from storeq import sql

N_AGENTS = 150
STEPS = 10


def player_data(path) -> dict:
    m = re.search(r'<script type="application/json" id="desim-diffusion-data">(.*?)</script>',
                  path.read_text(encoding="utf-8"), re.S)
    assert m, "no embedded frame data"
    return json.loads(m.group(1))


def state_counts(root, run_id, step, ids=None):
    """Counts of rumor_state at a step straight from the store (step 0: initial states)."""
    table, where = ("initial_states", "") if step == 0 else ("panel", " AND step = ?")
    rows = sql(root, f"SELECT agent_id, CAST(state.rumor_state AS VARCHAR) FROM {table} WHERE run_id = ?{where}",
               [run_id] + ([step] if step else []))
    return Counter(v for a, v in rows if ids is None or a in ids)


@pytest.fixture
def rumor(study_copy):
    root = study_copy("rumor_network")
    run = desim.run_study(desim.load_study(root, steps=STEPS, params={"n_agents": N_AGENTS}))
    return root, run.run_id


def test_player_has_one_frame_per_step_with_panel_counts(rumor):
    root, run_id = rumor
    paths = diffusion_player(root, "rumor_state")
    assert paths["html"] == root / "runs" / "reports" / run_id / "diffusion_rumor_state.html"
    d = player_data(paths["html"])
    assert d["run_id"] == run_id and d["kind"] == "categorical" and not d["sampled"]
    assert [f["step"] for f in d["frames"]] == list(range(STEPS + 1))
    assert len(d["nodes"]) == N_AGENTS and len(d["x"]) == N_AGENTS
    (n_edges,) = sql(root, "SELECT count(*) FROM edges WHERE run_id = ?", [run_id])[0]
    assert len(d["edges"]) == 2 * n_edges
    cats = d["categories"]
    assert set(cats) <= {"ignorant", "spreader", "stifler"}
    for f in d["frames"]:
        drawn = Counter(cats[c] for c in f["codes"])          # what the player colours
        assert drawn == state_counts(root, run_id, f["step"])  # what the panel holds
        assert {k: v for k, v in f["counts"].items() if v} == dict(drawn)
    # the rumour spread: some frame after the start has spreaders
    assert any(Counter(f["codes"])[cats.index("spreader")] for f in d["frames"][1:])
    # messages per step light the posters' edges
    for f in d["frames"][1:]:
        authors = {a for (a,) in sql(root, "SELECT DISTINCT author_id FROM messages WHERE run_id = ? AND step = ?",
                                     [run_id, f["step"]])}
        assert {d["nodes"][i] for i in f["posters"]} == authors
    img = mpimg.imread(paths["png"])
    assert img.shape[1] == 1200 and img.shape[0] > 600
    assert img[..., :3].std() > 0.05


def test_layout_is_stable(rumor):
    root, _ = rumor
    a = player_data(diffusion_player(root, "rumor_state", out_dir=root / "a")["html"])
    b = player_data(diffusion_player(root, "rumor_state", out_dir=root / "b")["html"])
    assert a["x"] == b["x"] and a["y"] == b["y"]
    assert 0 <= min(a["x"]) and max(a["x"]) <= 1


def test_large_graphs_are_sampled_and_say_so(rumor):
    root, run_id = rumor
    paths = diffusion_player(root, "rumor_state", max_nodes=60)
    d = player_data(paths["html"])
    assert d["sampled"] and len(d["nodes"]) == 60 and d["n_agents"] == N_AGENTS
    assert "Sampled view: 60 of 150 agents" in d["note"]
    assert "Sampled view: 60 of 150 agents" in paths["html"].read_text()
    ids = set(d["nodes"])
    for f in d["frames"]:
        drawn = Counter(d["categories"][c] for c in f["codes"])
        assert drawn == state_counts(root, run_id, f["step"], ids)
        whole = state_counts(root, run_id, f["step"])
        assert {k: v for k, v in f["population_counts"].items() if v} == dict(whole)
    # a breadth-first neighbourhood: every sampled agent has a sampled neighbour
    edges = list(zip(d["edges"][::2], d["edges"][1::2]))
    assert {i for e in edges for i in e} == set(range(60))


def test_continuous_field_and_cli(study_copy, capsys):
    root = study_copy("opinion_diffusion")
    run = desim.run_study(desim.load_study(root, params={"n_agents": 30}))
    assert main(["viz", "diffusion", str(root), "--state", "opinion"]) == 0
    out = root / "runs" / "reports" / run.run_id / "diffusion_opinion.html"
    assert str(out) in capsys.readouterr().out
    d = player_data(out)
    assert d["kind"] == "numeric" and len(d["frames"]) == 13
    lo, hi = d["range"]
    (smin, smax) = sql(root, "SELECT min(CAST(state.opinion AS DOUBLE)), max(CAST(state.opinion AS DOUBLE)) "
                             "FROM (SELECT state FROM panel WHERE run_id = ? UNION ALL "
                             "SELECT state FROM initial_states WHERE run_id = ?)", [run.run_id, run.run_id])[0]
    assert (lo, hi) == pytest.approx((smin, smax))
    for f in d["frames"][1:]:
        rows = dict(sql(root, "SELECT agent_id, CAST(state.opinion AS DOUBLE) FROM panel "
                              "WHERE run_id = ? AND step = ?", [run.run_id, f["step"]]))
        assert f["mean"] == pytest.approx(sum(rows.values()) / len(rows))
        # darker colours for lower opinions: codes are ordered like the values
        order = sorted(rows, key=rows.get)
        codes = [f["codes"][d["nodes"].index(a)] for a in order]
        assert codes == sorted(codes) and codes[0] < codes[-1]
    assert main(["viz", "diffusion", str(root), "--state", "nope"]) == 2


@pytest.mark.browser
def test_player_runs_in_a_browser(rumor):
    """The inline script draws and the slider moves frames, offline, in Chromium."""
    from playwright.sync_api import sync_playwright

    from browser import launch
    root, _ = rumor
    html = diffusion_player(root, "rumor_state")["html"]
    errors, fetched = [], []
    with sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: fetched.append(r.url))
            page.goto(html.as_uri())
            assert page.text_content("#label").startswith("initial state (frame 1 of 11)")
            page.fill("#step", "4")
            page.dispatch_event("#step", "input")
            assert page.text_content("#label").startswith("week 4 (frame 5 of 11)")
            drawn = page.evaluate("""() => { const c = document.getElementById('net');
                const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                let n = 0; for (let i = 3; i < px.length; i += 4) if (px[i] > 0) n++; return n; }""")
            assert drawn > 1000
        finally:
            browser.close()
    assert errors == []
    assert all(u.startswith("file:") for u in fetched)  # nothing from the network


def test_separate_groups_do_not_collapse_onto_each_other():
    """Cliques (dorms, households) get a cell each instead of piling up in the middle."""
    import networkx as nx
    from desim.report.diffusion import layout
    g = nx.Graph()
    groups = [[f"g{k}a{i}" for i in range(6)] for k in range(4)]
    for members in groups:
        g.add_edges_from((a, b) for i, a in enumerate(members) for b in members[i + 1:])
    nodes = [a for members in groups for a in members]
    xy = layout(g, nodes, seed=1)
    boxes = [(xy[6 * k:6 * k + 6].min(axis=0), xy[6 * k:6 * k + 6].max(axis=0)) for k in range(4)]
    for i in range(4):
        for j in range(i + 1, 4):
            (lo1, hi1), (lo2, hi2) = boxes[i], boxes[j]
            assert (hi1 < lo2).any() or (hi2 < lo1).any(), f"groups {i} and {j} overlap"
    # members of a group are spread out, not on one spot
    assert min(float(((xy[0] - xy[k]) ** 2).sum()) for k in range(1, 6)) > 1e-4
