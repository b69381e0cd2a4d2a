"""Positioned studies in the dashboard: Schelling's and Sugarscape's agents drawn on their grid (not as a
network laid out by id), and Sugarscape's dead agents (``alive: false``) left out of every state's
distribution and of the grid by the store's one rule, which says so.

The API tests run against a real uvicorn server in a thread; the browser tests against ``desim dashboard``
in a subprocess, in Debian's Chromium. Every wait is on something the page signals (a data attribute set
when a step is drawn); the only limit is the suite's hang guard.
"""
from __future__ import annotations

import json
import statistics

import httpx
import pytest

from dashboard_helpers import ARTIFACTS, copy_study, positioned_studies, server_process, server_thread, sql, watched_page
from desim.experiments.runs import run_study
from desim.store import open_store, states
from desim.study.files import load_study
from waits import HANG_S

SUGAR_STEPS = 40       # Sugarscape's population falls from 400 to about 300 in the first 40 steps


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    studies_dir = tmp_path_factory.mktemp("dashp") / "studies"
    studies = positioned_studies(studies_dir, schelling_steps=3, sugarscape_steps=SUGAR_STEPS)
    studies["opinion"] = copy_study(studies_dir, "opinion_diffusion", "opinion_diffusion")
    run_study(load_study(studies["opinion"], steps=2, params={"n_agents": 12}))
    with server_thread(studies_dir) as url:
        with httpx.Client(base_url=url, timeout=HANG_S) as client:
            yield {"url": url, "client": client, "dir": studies_dir, **studies}


def latest(study) -> str:
    return sql(study, "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")[0][0]


def grid(site, study: str, state: str, step: int) -> dict:
    res = site["client"].get(f"/api/studies/{study}/grid",
                             params={"run": latest(site[study]), "state": state, "step": step})
    assert res.status_code == 200, res.text
    return res.json()


# --- the grid, through the API ---------------------------------------------------------------------
def test_schelling_agents_are_on_their_cells_coloured_by_type(site):
    g = grid(site, "schelling", "type", 2)
    rid = latest(site["schelling"])
    want = sql(site["schelling"], "SELECT agent_id, state.x, state.y, CAST(state.type AS VARCHAR) FROM panel "
                                  "WHERE run_id = ? AND step = 2 ORDER BY agent_id", [rid])
    a = g["agents"]
    got = [(i, x, y, g["categories"][v]) for i, x, y, v in zip(a["id"], a["x"], a["y"], a["v"])]
    assert got == want and len(got) == 2000
    params = json.loads((site["schelling"] / "simulation" / "simulation.json").read_text())["parameters"]
    assert (g["width"], g["height"]) == (params["width"], params["height"]) == (50, 50)
    assert g["kind"] == "categorical" and g["step"] == 2 and g["last_step"] == 3 and g["dead"] == 0
    counts = dict(sql(site["schelling"], "SELECT CAST(state.type AS VARCHAR), count(*) FROM panel WHERE run_id = ? "
                                         "AND step = 2 GROUP BY 1", [rid]))
    assert g["counts"] == counts
    # the grid's colours are the state charts' colours for the same field
    shares = site["client"].get("/api/studies/schelling/states", params={"run": rid, "state": "type"}).json()
    assert dict(zip(g["categories"], g["colors"])) == dict(zip(shares["categories"], shares["colors"]))
    # a step past the run's end is its last step
    assert grid(site, "schelling", "type", 10_000)["step"] == 3


def test_the_study_page_says_which_studies_are_positioned(site):
    assert site["client"].get("/api/studies/schelling").json()["population"]["positioned"] is True
    assert site["client"].get("/api/studies/sugarscape").json()["population"]["positioned"] is True
    assert site["client"].get("/api/studies/opinion_diffusion").json()["population"]["positioned"] is False
    res = site["client"].get("/api/studies/opinion_diffusion/grid",
                             params={"run": latest(site["opinion"]), "state": "opinion", "step": 1})
    assert res.status_code == 404 and "not positioned" in res.json()["error"]


def test_sugarscape_grid_leaves_out_the_dead_and_draws_the_sugar_left(site):
    from desim.report.grid import grid_payload
    rid = latest(site["sugarscape"])
    g = grid(site, "sugarscape", "sugar", SUGAR_STEPS)
    living = sql(site["sugarscape"], "SELECT agent_id, state.x, state.y, state.sugar FROM panel WHERE run_id = ? "
                                     "AND step = ? AND state.alive ORDER BY agent_id", [rid, SUGAR_STEPS])
    dead = sql(site["sugarscape"], "SELECT count(*) FROM panel WHERE run_id = ? AND step = ? AND NOT state.alive",
               [rid, SUGAR_STEPS])[0][0]
    assert dead > 50                        # the test means something: many have died
    a = g["agents"]
    assert list(zip(a["id"], a["x"], a["y"], a["v"])) == [(i, x, y, float(s)) for i, x, y, s in living]
    assert (g["shown"], g["dead"]) == (len(living), dead)
    assert g["mean"] == pytest.approx(statistics.fmean(s for *_, s in living))
    # the scale is the whole run's range over the living agents
    lo, hi = sql(site["sugarscape"], "SELECT min(state.sugar), max(state.sugar) FROM states WHERE run_id = ? "
                                     "AND state.alive", [rid])[0]
    assert g["range"] == [lo, hi]
    # the layer under the agents is the study's own (Landscape.grid_layer), as the report draws it
    report = grid_payload(site["sugarscape"], "sugar", rid)
    assert g["layer"]["name"] == "sugar left" and len(g["layer"]["values"]) == g["width"] * g["height"] == 2500
    assert g["layer"]["total"] == report["layer"]["frames"][SUGAR_STEPS]["total"]
    assert report["frames"][SUGAR_STEPS]["agents"] == g["shown"]


# --- dead agents in the state charts -----------------------------------------------------------------
def test_a_state_band_leaves_out_dead_agents_and_says_how_many(site):
    """Sugarscape's dead keep their last sugar (zero or below) in the panel: a band over every row is pulled
    down by the dead. Sugar is read over the living, with the dead left out counted at each step."""
    rid = latest(site["sugarscape"])
    bands = site["client"].get("/api/studies/sugarscape/states", params={"run": rid, "state": "sugar"}).json()
    per_step = {step: (n, med, gone) for step, n, med, gone in sql(
        site["sugarscape"], "SELECT step, count(*) FILTER (WHERE state.alive), "
                            "median(state.sugar) FILTER (WHERE state.alive), count(*) FILTER (WHERE NOT state.alive) "
                            "FROM states WHERE run_id = ? GROUP BY step", [rid])}
    assert bands["kind"] == "numeric" and bands["steps"] == list(range(SUGAR_STEPS + 1))
    for k, step in enumerate(bands["steps"]):
        n, med, gone = per_step[step]
        assert (bands["n"][k], bands["left_out"][k]) == (n, gone)
        assert bands["quantiles"][k][2] == pytest.approx(med)
    assert bands["excluded"] == {"field": "alive", "most": per_step[SUGAR_STEPS][2], "last": per_step[SUGAR_STEPS][2]}
    # alive itself counts everyone: its shares are the deaths
    alive = site["client"].get("/api/studies/sugarscape/states", params={"run": rid, "state": "alive"}).json()
    assert alive["counts"]["false"][-1] == per_step[SUGAR_STEPS][2] and alive["excluded"] is None
    assert alive["counts"]["false"][-1] + alive["counts"]["true"][-1] == 400
    # a category of the living: vision's counts add up to the living at each step
    vision = site["client"].get("/api/studies/sugarscape/states", params={"run": rid, "state": "vision"}).json()
    assert vision["kind"] == "categorical"
    assert sum(vision["counts"][c][-1] for c in vision["categories"]) == per_step[SUGAR_STEPS][0]
    # one rule: the report's bands are the same numbers
    with open_store(site["sugarscape"]) as con:
        report = states.quantile_bands(con, rid, "sugar")
    assert report["quantiles"] == bands["quantiles"] and report["n"] == bands["n"]
    # a study whose agents do not die is read over everyone, and says nothing
    schelling = site["client"].get("/api/studies/schelling/states",
                                   params={"run": latest(site["schelling"]), "state": "type"}).json()
    assert schelling["excluded"] is None and set(schelling["left_out"]) == {0}


# --- in the browser ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser_site(site):
    from playwright.sync_api import sync_playwright

    from browser import launch
    ARTIFACTS.mkdir(exist_ok=True)
    with server_process(site["dir"]) as url:
        with sync_playwright() as pw:
            browser = launch(pw)
            yield {**site, "url": url, "browser": browser}
            browser.close()


@pytest.fixture
def page(browser_site):
    yield from watched_page(browser_site["browser"])


def cell_colours(page, cells: list[tuple[int, int]]) -> list[str]:
    """The colour drawn at the centre of each (x, y) cell of the grid's canvas, as #rrggbb."""
    return page.evaluate("""cells => { const c = document.getElementById('grid-canvas'), n = +document.getElementById('grid-view').dataset.cell;
        const ctx = c.getContext('2d');
        return cells.map(([x, y]) => { const d = ctx.getImageData(Math.floor(x * n + n / 2), Math.floor(y * n + n / 2), 1, 1).data;
            return '#' + [d[0], d[1], d[2]].map(v => v.toString(16).padStart(2, '0')).join(''); }); }""",
                         [list(c) for c in cells])


@pytest.mark.browser
def test_schelling_is_drawn_on_its_grid_at_the_chosen_step(browser_site, page):
    study = browser_site["schelling"]
    rid = latest(study)
    page.goto(browser_site["url"] + "/#/study/schelling")
    page.wait_for_selector("#study-title[data-ready]")
    # no network card: the study has no network, its agents have cells
    assert page.locator("#network").count() == 0
    page.wait_for_selector('#grid-view[data-drawn="type:3"]')          # it opens on the run's last step
    page.fill("#grid-step-number", "2")
    page.dispatch_event("#grid-step-number", "change")
    page.wait_for_selector('#grid-view[data-drawn="type:2"]')
    stage = page.locator("#grid-view")
    assert (stage.get_attribute("data-width"), stage.get_attribute("data-height")) == ("50", "50")
    rows = sql(study, "SELECT state.x, state.y, CAST(state.type AS VARCHAR) FROM panel WHERE run_id = ? AND step = 2",
               [rid])
    colours = {c: page.locator(f'#grid-legend li[data-category="{c}"] .swatch').evaluate(
        "e => getComputedStyle(e).backgroundColor") for c in ("0", "1")}

    def hex_of(css: str) -> str:
        return "#" + "".join(f"{int(v):02x}" for v in css[css.index("(") + 1:-1].split(",")[:3])

    colours = {c: hex_of(v) for c, v in colours.items()}
    assert colours["0"] != colours["1"]
    drawn = cell_colours(page, [(x, y) for x, y, _ in rows])
    assert drawn == [colours[t] for _, _, t in rows]           # every agent in its cell, in its type's colour
    taken = {(x, y) for x, y, _ in rows}
    empty = [(x, y) for x in range(50) for y in range(50) if (x, y) not in taken]
    assert empty and set(cell_colours(page, empty)) == {"#eef0f3"}
    counts = dict(sql(study, "SELECT CAST(state.type AS VARCHAR), count(*) FROM panel WHERE run_id = ? AND step = 2 "
                             "GROUP BY 1", [rid]))
    assert json.loads(stage.get_attribute("data-counts")) == counts
    page.locator("#grid").screenshot(path=str(ARTIFACTS / "dashboard_schelling_grid.png"))


@pytest.mark.browser
def test_sugarscape_grid_and_bands_say_the_dead_are_left_out(browser_site, page):
    study = browser_site["sugarscape"]
    rid = latest(study)
    page.goto(browser_site["url"] + "/#/study/sugarscape")
    page.wait_for_selector("#study-title[data-ready]")
    # the sugar band is over the living, and says how many dead it left out
    dead = sql(study, "SELECT count(*) FROM panel WHERE run_id = ? AND step = ? AND NOT state.alive",
               [rid, SUGAR_STEPS])[0][0]
    sugar = page.locator('#state-charts figure.chart[data-metric="sugar"]')
    assert "living agents" in sugar.locator(".chart-title").inner_text()
    assert f"dead agents (alive = false) left out: {dead} at the last step" in sugar.locator(".chart-note").inner_text()
    # the grid opens on the first display state that is not alive itself (the dead are not drawn)
    page.wait_for_selector(f'#grid-view[data-drawn="sugar:{SUGAR_STEPS}"]')
    assert page.get_attribute("#grid-view", "data-dead") == str(dead)
    assert f"{dead} dead (alive = false), not drawn" in page.inner_text("#grid-legend")
    page.select_option("#grid-state", "vision")
    page.wait_for_selector(f'#grid-view[data-drawn="vision:{SUGAR_STEPS}"]')
    living = sql(study, "SELECT state.x, state.y, CAST(state.vision AS VARCHAR) FROM panel WHERE run_id = ? "
                        "AND step = ? AND state.alive", [rid, SUGAR_STEPS])
    assert int(page.get_attribute("#grid-view", "data-shown")) == len(living)
    g = grid(browser_site, "sugarscape", "vision", SUGAR_STEPS)
    colour = dict(zip(g["categories"], g["colors"]))
    assert cell_colours(page, [(x, y) for x, y, _ in living]) == [colour[v] for *_, v in living]
    assert "sugar left" in page.inner_text("#grid-legend")
    page.locator("#grid").screenshot(path=str(ARTIFACTS / "dashboard_sugarscape_grid.png"))
    page.locator("#state-charts").screenshot(path=str(ARTIFACTS / "dashboard_sugarscape_states.png"))
