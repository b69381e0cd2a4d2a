"""A run's grid layer is drawn with its own version's code, not with the code the dashboard imported first.

A tiny positioned study whose environment draws a layer (``grid_layer``) from a data file beside its
``model.py``, run three times, each run a new version: the first as written, the second after ``model.py``
was edited (the layer renamed, mirrored left to right and scaled), the third after the data file was
edited. One ``desim dashboard`` is up from before the first edit to after the last (it has drawn the first
run's layer with the first code by then); another is started after the last edit, when the files on disk
are the third version's. Both must draw every run's layer as that run's own version computed it: the code
and data texts the store keeps with each version (``code_texts``).

The runs are ``desim run`` subprocesses (a run in this process would import ``model.py`` once, as the
dashboard used to); the dashboards are ``desim dashboard`` subprocesses, waited on by the URL they print
once they accept connections. The browser test screenshots the grid card of the first two runs to
``test-artifacts/``.
"""
from __future__ import annotations

import math
import subprocess
import sys
from contextlib import ExitStack

import httpx
import pytest

from dashboard_helpers import ARTIFACTS, server_process, sql, watched_page
from grid_walkers import ACROSS, DOWN, HEIGHT, WIDTH, walkers_model, write_walkers, write_weights
from waits import HANG_S

STEPS = 3
FIRST = 'LAYER = ("weight v1", False, 1.0)'
SECOND = 'LAYER = ("weight v2", True, 10.0)'
MODEL = walkers_model(FIRST)


def expected(name: str, mirrored: bool, scale: float, rows: list[list[int]], step: int) -> dict:
    """What a version's grid_layer gives at ``step``: its name and the values, row by row."""
    base = [r[::-1] if mirrored else r for r in rows]
    values = [scale * v + step for r in base for v in r]
    top = max(scale * v + STEPS for r in rows for v in r)
    low = min(scale * v for r in rows for v in r)
    return {"name": name, "values": [float(v) for v in values], "range": [float(low), float(top)]}


# each run's own version: the first as written, the second with model.py edited, the third with weights.txt
VERSIONS = [("weight v1", False, 1.0, ACROSS), ("weight v2", True, 10.0, ACROSS), ("weight v2", True, 10.0, DOWN)]


def desim_run(study) -> str:
    """``desim run`` in its own process (it imports the study's code as it is now); the new run's id."""
    done = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(study), "-q"], capture_output=True,
                          text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr
    return sql(study, "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")[0][0]


def layer(client: httpx.Client, run: str, step: int) -> dict:
    res = client.get("/api/studies/walkers/grid", params={"run": run, "state": "kind", "step": step})
    assert res.status_code == 200, res.text
    g = res.json()
    assert (g["width"], g["height"]) == (WIDTH, HEIGHT) and g["layer_note"] == "", g["layer_note"]
    return g["layer"]


def assert_own_version(client: httpx.Client, runs: list[str], versions: list[str], step: int) -> None:
    got = [layer(client, run, step) for run in runs]
    want = [expected(*version, step) for version in VERSIONS]
    assert [(g["name"], g["range"], g["values"]) for g in got] == [(w["name"], w["range"], w["values"]) for w in want]
    assert [g["version"] for g in got] == versions       # and the answer says whose code drew it


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """The study's three runs, made while one dashboard is up (it drew the first run's layer before any edit);
    yields that dashboard's client beside the runs, their versions and what it answered before the edits."""
    studies_dir = tmp_path_factory.mktemp("gridv") / "studies"
    study = write_walkers(studies_dir / "walkers", MODEL, STEPS, study={"display_states": ["kind"]})
    write_weights(study, ACROSS)
    with ExitStack() as stack:
        runs = [desim_run(study)]
        url = stack.enter_context(server_process(studies_dir))
        client = stack.enter_context(httpx.Client(base_url=url, timeout=HANG_S))
        before = layer(client, runs[0], STEPS)          # the dashboard has imported the first code now
        model = study / "model.py"
        model.write_text(model.read_text().replace(FIRST, SECOND))
        runs.append(desim_run(study))
        write_weights(study, DOWN)
        runs.append(desim_run(study))
        versions = [sql(study, "SELECT version_id FROM runs WHERE run_id = ?", [r])[0][0] for r in runs]
        yield {"study": study, "dir": studies_dir, "client": client, "runs": runs, "versions": versions,
               "before": before}


def test_the_runs_are_three_versions(history):
    """The test means something: each edit made a new version, and the store kept both texts of each file."""
    assert len(set(history["versions"])) == 3
    diff = history["client"].get(f"/api/studies/walkers/versions/{history['versions'][1]}/diff").json()
    [change] = diff["files"]
    assert change["path"] == "model.py" and f"-{FIRST}" in change["diff"] and f"+{SECOND}" in change["diff"]
    diff = history["client"].get(f"/api/studies/walkers/versions/{history['versions'][2]}/diff").json()
    assert [f["path"] for f in diff["files"]] == ["weights.txt"]


def test_a_dashboard_up_across_the_edits_draws_each_run_with_its_own_code(history):
    """Before the fix the dashboard drew the second run's layer with the first code it had imported
    ("weight v1", not mirrored), and the third with that code and the edited weights."""
    want = expected("weight v1", False, 1.0, ACROSS, STEPS)
    assert (history["before"]["name"], history["before"]["values"]) == (want["name"], want["values"])
    for step in (0, 2, STEPS):
        assert_own_version(history["client"], history["runs"], history["versions"], step)


def test_a_dashboard_started_after_the_edits_draws_the_old_runs_with_their_old_code(history):
    """Before the fix a dashboard started now drew every run with the files on disk (the third version)."""
    with server_process(history["dir"]) as url, httpx.Client(base_url=url, timeout=HANG_S) as client:
        assert_own_version(client, history["runs"], history["versions"], STEPS)
        assert_own_version(client, history["runs"], history["versions"], 1)


def test_a_version_whose_code_was_not_kept_is_not_drawn_with_other_code(history, tmp_path):
    """When the store lacks a version's model.py (a store written before texts were kept) and the file has
    changed since, the layer is left out with a note, not drawn with the code on disk."""
    import shutil

    import duckdb

    from storeq import store_path
    studies_dir = tmp_path / "studies"
    study = studies_dir / "walkers"
    shutil.copytree(history["study"], study, ignore=shutil.ignore_patterns("__pycache__"))
    first = history["runs"][0]
    con = duckdb.connect(str(store_path(study)))
    try:
        code = con.execute("SELECT code->>'$.\"model.py\"' FROM runs WHERE run_id = ?", [first]).fetchone()[0]
        con.execute("DELETE FROM code_texts WHERE hash = ?", [code])
    finally:
        con.close()
    with server_process(studies_dir) as url, httpx.Client(base_url=url, timeout=HANG_S) as client:
        g = client.get("/api/studies/walkers/grid", params={"run": first, "state": "kind", "step": STEPS}).json()
        assert g["layer"] is None and "model.py" in g["layer_note"] and "not kept" in g["layer_note"]
        assert len(g["agents"]["id"]) == 4                  # the grid itself is drawn
        # the runs whose code was kept are drawn as before
        second = layer(client, history["runs"][1], STEPS)
        assert second["name"] == "weight v2" and second["version"] == history["versions"][1]


# --- in the browser ----------------------------------------------------------------------------------
LAYER_LOW, LAYER_HIGH = (255, 255, 255), (237, 158, 13)      # grid.js's ramp for a layer


def ramp(value: float, top: float) -> str:
    """The colour grid.js draws a layer's cell in (Math.round: halves up)."""
    t = max(0.0, min(1.0, value / (top or 1)))
    return "#" + "".join(f"{math.floor(lo + (hi - lo) * t + 0.5):02x}" for lo, hi in zip(LAYER_LOW, LAYER_HIGH))


@pytest.fixture
def page(history):
    from playwright.sync_api import sync_playwright

    from browser import launch
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            yield from watched_page(browser)
        finally:
            browser.close()


@pytest.mark.browser
def test_the_grid_card_draws_each_runs_layer_with_its_own_code(history, page):
    """Runs 1 and 2 in the grid card: each empty cell in the colour of its own version's layer value (the
    first grows to the right, the second, mirrored, to the left), the legend naming that version's layer."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(str(history["client"].base_url).rstrip("/") + "/#/study/walkers")
    page.wait_for_selector("#study-title[data-ready]")
    for k, (run, (name, mirrored, scale, rows)) in enumerate(zip(history["runs"][:2], VERSIONS)):
        page.select_option("#grid-run", run)
        page.wait_for_selector(f'#grid-view[data-run="{run}"][data-drawn="kind:{STEPS}"]')
        legend = page.inner_text("#grid-legend")
        assert name in legend and history["versions"][k] in legend
        want = expected(name, mirrored, scale, rows, STEPS)
        taken = {(i + STEPS, i) for i in range(4)}
        empty = [(x, y) for y in range(HEIGHT) for x in range(WIDTH) if (x, y) not in taken]
        drawn = page.evaluate("""cells => { const c = document.getElementById('grid-canvas'), n = +document.getElementById('grid-view').dataset.cell;
            const ctx = c.getContext('2d');
            return cells.map(([x, y]) => { const d = ctx.getImageData(Math.floor(x * n + n / 2), Math.floor(y * n + n / 2), 1, 1).data;
                return '#' + [d[0], d[1], d[2]].map(v => v.toString(16).padStart(2, '0')).join(''); }); }""",
                              [list(c) for c in empty])
        assert drawn == [ramp(want["values"][y * WIDTH + x], want["range"][1]) for x, y in empty]
        page.locator("#grid").screenshot(path=str(ARTIFACTS / f"dashboard_grid_version_{k + 1}.png"))
