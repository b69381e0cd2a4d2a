"""The grid player (desim viz grid) and the grid frames in reports, on real Schelling and Sugarscape runs:
the frames against SQL on the panel, the sugar left against the study's own metric, the files, the CLI,
and the reports opened in Chromium."""
from __future__ import annotations

import json
import re

import matplotlib.image as mpimg
import numpy as np
import pytest
from playwright.sync_api import sync_playwright

import desim
from desim.cli import main
from desim.report import grid_payload, write_report
from desim.report.grid import CODES
from browser import launch
from storeq import sql

@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A small Schelling run (20x20, 6 steps) and a Sugarscape run (25 steps) in fresh study copies."""
    import shutil
    from pathlib import Path
    base = tmp_path_factory.mktemp("grid")
    studies = Path(__file__).resolve().parent.parent / "studies"
    out = {}
    for name, steps, params in (("schelling", 6, {"width": 20, "height": 20}), ("sugarscape", 25, {})):
        root = base / name
        shutil.copytree(studies / name, root, ignore=shutil.ignore_patterns("runs", "__pycache__"))
        out[name] = (root, desim.run_study(desim.load_study(root, seed=3, steps=steps, params=params)).run_id)
    return out


def cells_from_sql(root, run_id, step, field, width, hide_dead=False):
    """(x, y) -> value of ``field`` at ``step`` (initial states as step 0), straight from the store."""
    table, where = ("initial_states", "") if step == 0 else ("panel", f"AND step = {step}")
    alive = "CAST(state.alive AS VARCHAR)" if hide_dead else "NULL"      # Schelling has no alive field
    rows = sql(root, f"SELECT CAST(state.x AS INT), CAST(state.y AS INT), CAST(state.{field} AS VARCHAR), "
                     f"{alive} FROM {table} WHERE run_id = ? {where}", [run_id])
    return {(x, y): v for x, y, v, alive in rows if not (hide_dead and alive == "false")}


def move_slider(page, to: str) -> None:
    """The player's slider to frame ``to`` (a number, or ``s.max``), as a person drags it."""
    page.evaluate(f"() => {{ const s = document.getElementById('step'); s.value = {to}; "
                  "s.dispatchEvent(new Event('input')); }")


def canvas_colours(page, stride: int = 1) -> int:
    """Distinct colours on the player's canvas, every ``stride``-th pixel."""
    return page.evaluate("stride => { const c = document.getElementById('grid'); const d = c.getContext('2d')"
                         ".getImageData(0, 0, c.width, c.height).data; const s = new Set(); "
                         "for (let i = 0; i < d.length; i += 4 * stride) s.add(d[i] + ',' + d[i+1] + ',' + d[i+2]);"
                         " return s.size; }", stride)


def test_schelling_frames_are_the_panel(runs):
    root, run_id = runs["schelling"]
    p = grid_payload(root, "type", run_id)
    assert (p["width"], p["height"]) == (20, 20) and p["kind"] == "categorical" and p["categories"] == ["0", "1"]
    assert [f["step"] for f in p["frames"]] == list(range(7)) and p["layer"] is None
    for k in (0, 3, 6):
        want = cells_from_sql(root, run_id, k, "type", 20)
        cells = p["frames"][k]["cells"]
        got = {(i % 20, i // 20): p["categories"][CODES.index(c)] for i, c in enumerate(cells) if c != "."}
        assert got == want and len(want) == 320                          # density 0.8 of 400 cells
        assert p["frames"][k]["counts"] == {c: sum(1 for v in want.values() if v == c) for c in ("0", "1")}
    assert p["frames"][0]["cells"] != p["frames"][6]["cells"]          # the unhappy moved


def test_sugarscape_hides_the_dead_and_replays_the_sugar_left(runs):
    root, run_id = runs["sugarscape"]
    p = grid_payload(root, "metabolism", run_id)
    assert (p["width"], p["height"]) == (50, 50) and p["categories"] == ["1", "2", "3", "4"]
    population = dict(sql(root, "SELECT step, value FROM metrics WHERE run_id = ? AND name = 'population'", [run_id]))
    sugar_left = dict(sql(root, "SELECT step, value FROM metrics WHERE run_id = ? AND name = 'sugar_left'", [run_id]))
    for f in p["frames"][1:]:
        assert f["agents"] == population[f["step"]] == sum(c != "." for c in f["cells"])
    want = cells_from_sql(root, run_id, 25, "metabolism", 50, hide_dead=True)
    last = p["frames"][-1]["cells"]
    assert {(i % 50, i // 50): str(CODES.index(c) + 1) for i, c in enumerate(last) if c != "."} == want
    layer = p["layer"]
    assert layer["name"] == "sugar left" and layer["whole"] and layer["range"] == [0.0, 4.0]
    assert [f["total"] for f in layer["frames"][1:]] == [sugar_left[s] for s in range(1, 26)]
    assert layer["frames"][0]["total"] == 4622
    # the map as shipped: row r of sugar-map.txt is y = r
    first_row = (root / "sugar-map.txt").read_text().splitlines()[0].split()
    assert layer["frames"][0]["cells"][:50] == "".join(first_row)


def test_viz_grid_cli_writes_the_player_and_small_multiples(runs, capsys):
    root, run_id = runs["schelling"]
    assert main(["viz", "grid", str(root), "--state", "happy", "--run", run_id]) == 0
    out = capsys.readouterr().out
    html_path = re.search(r"player: (\S+)", out).group(1)
    png_path = re.search(r"small multiples: (\S+)", out).group(1)
    html = open(html_path, encoding="utf-8").read()
    blob = json.loads(re.search(r'<script type="application/json" id="desim-grid-data">(.*?)</script>', html,
                                re.S).group(1))
    assert blob["field"] == "happy" and blob["categories"] == ["false", "true"] and len(blob["frames"]) == 7
    assert "<script src" not in html and "http" not in html.split("<script>")[1]   # offline
    img = mpimg.imread(png_path)
    assert img.shape[0] > 300 and img[..., :3].std() > 0.05


def test_viz_grid_refuses_what_it_cannot_draw(runs, study_copy, capsys):
    root, run_id = runs["schelling"]
    assert main(["viz", "grid", str(root), "--state", "no_such_field"]) != 0
    assert "no field 'no_such_field'" in capsys.readouterr().err
    od = study_copy("opinion_diffusion")
    desim.run_study(desim.load_study(od, steps=1, params={"n_agents": 20}))
    assert main(["viz", "grid", str(od), "--state", "opinion"]) != 0
    assert "no numeric 'x' and 'y' fields" in capsys.readouterr().err


@pytest.mark.browser
def test_reports_show_the_grid_in_chromium(runs, tmp_path):
    """Both reports, opened in Chromium: the grid figure is there, decoded, and drawn at full size."""
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            # Sugarscape's agents coloured by their sugar, not by `alive` (its first display state: the grid
            # draws the living, every one of them alive)
            for name, caption in (("schelling", "coloured by 'type'"), ("sugarscape", "coloured by 'sugar'")):
                root, run_id = runs[name]
                paths = write_report(root, run_id=run_id)
                assert (paths["dir"] / "grid.png").exists()
                page = browser.new_page(viewport={"width": 1100, "height": 900})
                page.goto(paths["html"].as_uri())
                assert page.inner_text("h2:has-text('The grid')") == "The grid"
                fig = page.locator("#fig-grid")
                fig.scroll_into_view_if_needed()
                size = page.evaluate("() => { const i = document.querySelector('#fig-grid img'); "
                                     "return [i.complete, i.naturalWidth, i.getBoundingClientRect().width]; }")
                assert size[0] and size[1] > 500 and size[2] > 400
                assert caption in fig.inner_text()
                shot = tmp_path / f"{name}.png"
                fig.screenshot(path=str(shot))
                rgb = mpimg.imread(shot)[..., :3]
                # the map itself: many distinct colours (agents, empty cells, the sugar levels)
                assert len(np.unique((rgb * 255).astype(int).reshape(-1, 3), axis=0)) > 20
                page.close()
        finally:
            browser.close()


@pytest.mark.browser
def test_player_draws_and_steps_in_chromium(runs):
    root, run_id = runs["sugarscape"]
    from desim.report import grid_player
    paths = grid_player(root, "alive", run_id)
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page()
            page.goto(paths["html"].as_uri())
            assert "initial state" in page.inner_text("#label")
            move_slider(page, "s.max")
            label, counts = page.inner_text("#label"), page.inner_text("#counts")
            population = sql(root, "SELECT value FROM metrics WHERE run_id = ? AND name = 'population' "
                                   "AND step = 25", [run_id])[0][0]
            assert "step 25" in label and f"{int(population)} agents shown" in label
            assert f"alive true: {int(population)}" in counts and "sugar left in all" in counts
            assert canvas_colours(page, 97) >= 4                                           # sugar levels and agents
        finally:
            browser.close()


def test_numeric_field_offers_per_frame_and_log_scales(runs):
    """Sugar wealth grows over the run: on the whole run's range the first frames are one dark colour. The
    'frame' scale bins each frame on its own minimum..maximum (from SQL here), the 'log' scale on
    log(1 + value) over the whole run."""
    from desim.report.grid import NUMERIC_BINS
    root, run_id = runs["sugarscape"]
    p = grid_payload(root, "sugar", run_id)
    assert p["kind"] == "numeric" and set(p["scales"]) == {"run", "frame", "log"}
    lo_run, hi_run = p["range"]
    for k in (1, 12, 25):
        want = {xy: float(v) for xy, v in cells_from_sql(root, run_id, k, "sugar", 50, hide_dead=True).items()}
        lo, hi = min(want.values()), max(want.values())
        assert p["scales"]["frame"]["ranges"][k] == [lo, hi]
        cells = p["frames"][k]["scaled"]["frame"]
        for (x, y), v in want.items():
            expected = min(NUMERIC_BINS - 1, int((v - lo) / ((hi - lo) or 1) * NUMERIC_BINS))
            assert CODES.index(cells[y * 50 + x]) == expected
        logged = p["frames"][k]["scaled"]["log"]
        for (x, y), v in want.items():
            t = (np.log1p(v) - np.log1p(lo_run)) / (np.log1p(hi_run) - np.log1p(lo_run))
            assert abs(CODES.index(logged[y * 50 + x]) - min(NUMERIC_BINS - 1, int(t * NUMERIC_BINS))) <= 1
    # the point of it: early on, the whole-run scale uses few colours and the frame's own scale many
    first = p["frames"][1]
    used = lambda cells: len({c for c in cells if c != "."})
    assert used(first["scaled"]["frame"]) > 2 * used(first["cells"])


@pytest.mark.browser
def test_player_switches_colour_scale_in_chromium(runs):
    root, run_id = runs["sugarscape"]
    from desim.report import grid_player
    paths = grid_player(root, "sugar", run_id)
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page()
            page.goto(paths["html"].as_uri())
            page.wait_for_selector("canvas[data-frame='0']")
            move_slider(page, "1")
            whole = canvas_colours(page)
            hi_run = page.inner_text("#scale-hi")
            page.select_option("#scale", "frame")
            page.wait_for_selector("canvas[data-scale='frame']")
            assert canvas_colours(page) > whole           # the spread of step 1 shows
            want = max(v for (v,) in sql(root, "SELECT CAST(state.sugar AS DOUBLE) FROM panel WHERE run_id = ? "
                                                "AND step = 1 AND state.alive", [run_id]))
            assert float(page.inner_text("#scale-hi")) == pytest.approx(want, rel=5e-3) and page.inner_text("#scale-hi") != hi_run
            page.select_option("#scale", "log")
            page.wait_for_selector("canvas[data-scale='log']")
            assert "log scale" in page.inner_text("#scale-hi")
        finally:
            browser.close()
