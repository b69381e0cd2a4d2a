"""Long runs in the dashboard: a long run in progress on its own step axis (it does not stretch the charts
of the runs compared), many scheduled events that still read, and the end of a run that never leaves a
section blank (the curves from the run's progress file, and a word for what is still being read; the run
says when it is storing its data).

Against ``desim dashboard`` in a subprocess and Debian's Chromium. The runs wait at a known step (the
``held_study`` model) until the test lets them go; a slow store is made by holding the page's store reads
(Playwright routes) until the test lets them through. Every wait is on a signal; the only limit is the
suite's hang guard.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import httpx
import pytest

from dashboard_helpers import (ARTIFACTS, copy_study, held_study, many_events_study, server_process, sql,
                               wait_for_file, watched_page, write_live_file, write_lock)
from desim.experiments.runs import run_study
from desim.store.live import Heartbeat, LiveFile, read_live
from desim.study.files import load_study
from waits import HANG_S

READY = "#study-title[data-ready]"
LONG_STEPS, EVENTS_EVERY = 10_000, 250        # five-digit steps, 39 firings of two events, 4 broadcasts


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    studies_dir = tmp_path_factory.mktemp("dashl") / "studies"
    studies = {"axis": held_study(studies_dir, (2,), name="axis"),
               "ending": held_study(studies_dir, (2,), name="ending"),
               "many": many_events_study(studies_dir, LONG_STEPS, EVENTS_EVERY),
               "finishing": copy_study(studies_dir, "opinion_diffusion", "finishing")}
    run_study(load_study(studies["finishing"], steps=2, params={"n_agents": 12}))
    ARTIFACTS.mkdir(exist_ok=True)
    from playwright.sync_api import sync_playwright

    from browser import launch
    with server_process(studies_dir) as url:
        with sync_playwright() as pw:
            browser = launch(pw)
            yield {"url": url, "browser": browser, "dir": studies_dir, **studies}
            browser.close()


@pytest.fixture
def page(site):
    yield from watched_page(site["browser"])


def series(page, selector: str) -> dict[str, list]:
    return json.loads(page.get_attribute(selector, "data-series"))


def points(selector: str, rid: str) -> str:
    """A page expression: how many points the chart at ``selector`` has for run ``rid``."""
    return (f"(JSON.parse((document.querySelector('{selector}') || {{dataset: {{}}}}).dataset.series || '{{}}')"
            f"['{rid}'] || []).length")


def start_run(study, steps: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "desim.cli", "run", str(study), "--steps", str(steps),
                             "--set", "n_agents=12"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(study, run: subprocess.Popen, holds=(2,)) -> str:
    for hold in holds:
        (study / f"release-{hold}").touch()
    out, err = run.communicate(timeout=HANG_S)
    assert run.returncode == 0, err
    return out


# --- 3: a long run in progress keeps to its own step axis ------------------------------------------
@pytest.mark.browser
def test_a_long_live_run_has_its_own_axis_and_joins_the_comparison_only_when_ticked(site, page):
    study = site["axis"]
    done = sql(study, "SELECT run_id, n_steps FROM runs WHERE status = 'completed'")
    assert len(done) == 1 and done[0][1] == 2
    short = done[0][0]
    page.goto(site["url"] + "/#/study/axis")
    page.wait_for_selector(READY)
    run = start_run(study, 400)
    try:
        wait_for_file(study / "held-2", run)                  # steps 0 and 1 stored, 400 to go
        card = page.wait_for_selector("#live-runs .live-card[data-run]")
        rid = card.get_attribute("data-run")
        live = '#live-runs figure.chart[data-metric="mean_opinion"]'
        page.wait_for_function(f"{points(live, rid)} === 2")
        metric = '#metric-charts figure.chart[data-metric="mean_opinion"]'
        x_max = f"document.querySelector('{metric}').uplot.scales.x.max"
        # the finished 2-step run is drawn on its own steps, not on the live run's 400
        assert page.get_attribute(metric, "data-xmax") == "2" and page.evaluate(x_max) == 2
        assert set(series(page, metric)) == {short}
        assert page.get_attribute(live, "data-xmax") == "400"
        assert page.evaluate(f"document.querySelector('{live}').uplot.scales.x.max") == 400
        page.screenshot(path=str(ARTIFACTS / "dashboard_live_own_axis.png"), full_page=True)
        # ticked, the live run is compared with the finished one, deliberately, on one axis
        page.check(f'#runs-tree input.overlay[data-run="{rid}"]')
        # the series are set on the figure before its chart is built: wait for both, the chart on one axis
        page.wait_for_function(f"{points(metric, rid)} === 2 && (document.querySelector('{metric}').uplot "
                               "|| {scales: {x: {}}}).scales.x.max === 400")
        assert page.get_attribute(metric, "data-xmax") == "400"
        assert set(series(page, metric)) == {short, rid}
    finally:
        finish(study, run)


# --- 4: many scheduled events ------------------------------------------------------------------------
def overlaps(boxes: list[list[float]]) -> list[tuple]:
    """Pairs of boxes [left, top, right, bottom] that overlap by more than half a pixel."""
    out = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if min(a[2], b[2]) - max(a[0], b[0]) > 0.5 and min(a[3], b[3]) - max(a[1], b[1]) > 0.5:
                out.append((a, b))
    return out


@pytest.mark.browser
def test_many_scheduled_events_read_on_the_timeline_and_under_each_chart(site, page):
    study = site["many"]
    fired = {name: steps for name, steps in sql(study, "SELECT name, list(step ORDER BY step) FROM events "
                                                       "GROUP BY name")}
    assert len(fired["campaign_on"]) + len(fired["campaign_off"]) == LONG_STEPS // EVENTS_EVERY - 1 == 39
    page.goto(site["url"] + "/#/study/many_events")
    page.wait_for_selector(READY)
    # the timeline: one row per intervention however often it is planned, a mark at each of its steps
    planned = page.locator('#timeline g.tl-row[data-row="planned"]').evaluate_all(
        "els => els.map(e => [e.dataset.name, e.dataset.steps])")
    names = [n for n, _ in planned]
    assert len(names) == len(set(names)) == len(fired)
    assert dict(planned)["campaign_on"] == ",".join(map(str, fired["campaign_on"]))
    assert page.locator('#timeline g.tl-row[data-name="campaign_on"] .tl-event').count() == len(fired["campaign_on"])
    # no text of the timeline runs into another or out of the picture (row names, descriptions, axis labels)
    boxes = page.evaluate("""() => { const svg = document.getElementById('timeline');
        return [...svg.querySelectorAll('text')].map(t => { const b = t.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; }); }""")
    width = page.evaluate("document.getElementById('timeline').viewBox.baseVal.width")
    assert overlaps(boxes) == [] and all(0 <= b[0] and b[2] <= width for b in boxes)
    ticks = page.locator("#timeline .tl-tick").evaluate_all("els => els.map(e => e.textContent)")
    assert ticks[0] == "0" and len(ticks) >= 4 and ticks[-1].replace(",", "").isdigit()
    # under each chart, one entry per intervention: its steps said once, not one label per firing
    for figure in page.locator("#metric-charts figure.chart").all():
        entries = figure.locator(".chart-events [data-event]")
        got = dict(entries.evaluate_all("els => els.map(e => [e.dataset.event, e.dataset.steps])"))
        assert got == {name: ",".join(map(str, steps)) for name, steps in fired.items()}
        on = figure.locator('.chart-events [data-event="campaign_on"]').inner_text()
        assert on == f"steps 250–9,750, every 500 ({len(fired['campaign_on'])}×): campaign_on"
        spans = entries.evaluate_all("els => els.map(e => { const b = e.getBoundingClientRect(); "
                                     "return [b.left, b.top, b.right, b.bottom]; })")
        box = figure.bounding_box()
        assert overlaps(spans) == [] and all(box["x"] - 0.5 <= s[0] and s[2] <= box["x"] + box["width"] + 0.5
                                             for s in spans)
    page.locator("#interventions").screenshot(path=str(ARTIFACTS / "dashboard_many_events_timeline.png"))
    page.locator("#metric-charts").screenshot(path=str(ARTIFACTS / "dashboard_many_events_charts.png"))


# --- 5: the end of a run ------------------------------------------------------------------------------
@pytest.mark.browser
def test_when_a_run_ends_no_section_is_blank_while_the_store_is_read(site, page):
    """After a run of millions of rows the store takes seconds to read. The page that followed the run keeps
    its curves (from the run's progress file) and says what it is still reading, until the store answers."""
    study = site["ending"]
    page.goto(site["url"] + "/#/study/ending")
    page.wait_for_selector(READY)
    run = start_run(study, 4)
    try:
        wait_for_file(study / "held-2", run)
        rid = page.wait_for_selector("#live-runs .live-card[data-run]").get_attribute("data-run")
        # from here the store is slow: its answers wait until the test lets them through
        held, gate = [], {"open": False}
        page.route(re.compile(r"/api/studies/ending/(metrics|states|panel|grid)"),
                   lambda route: route.continue_() if gate["open"] else held.append(route))
    finally:
        finish(study, run)
    metric = '#metric-charts figure.chart[data-metric="mean_opinion"]'
    # the page saw the run end and read the study again, in place; its new runs tree is drawn ...
    page.wait_for_selector(f'#runs-tree li[data-run="{rid}"] > .badge[data-status="completed"]')
    # ... and with it, at once, the run's whole curves (from its progress file) and what is being read
    assert len(series(page, metric).get(rid, [])) == 5
    assert "progress file" in page.inner_text("#legend [data-loading]")
    assert f"Reading the states of run {rid}" in page.inner_text("#state-charts [data-loading]")
    assert f"Reading the panel of run {rid}" in page.inner_text("#panel-table [data-loading]")
    assert page.locator("#live-runs .live-card").count() == 0
    assert held, "the page read nothing from the store"
    page.screenshot(path=str(ARTIFACTS / "dashboard_run_ended_reading.png"), full_page=True)
    gate["open"] = True
    for route in held:
        route.continue_()
    # the store's answers replace the notes
    page.wait_for_selector('#state-charts figure.chart[data-metric="opinion"]')
    page.wait_for_selector("#panel-total")
    stored = [list(r) for r in sql(study, "SELECT step, value FROM metrics WHERE run_id = ? AND name = 'mean_opinion' "
                                          "ORDER BY step", [rid])]
    page.wait_for_function("document.querySelector('#legend [data-loading]') === null")
    assert series(page, metric)[rid] == stored
    assert page.locator("#metric-charts [data-loading], #state-charts [data-loading], #panel-table [data-loading]").count() == 0


@pytest.mark.browser
def test_a_run_storing_its_data_says_so(site, page):
    """Between its last step and its end a run merges its data into the store, which it holds meanwhile: the
    page says the run is storing its data and keeps its curves, rather than show a run that seems stuck."""
    study = site["finishing"]
    page.goto(site["url"] + "/#/study/finishing")
    page.wait_for_selector(READY)
    curve = [0.5, 0.52, 0.55, 0.56, 0.57, 0.58]
    live = write_live_file(study, "rfinishing1", step=5, n_steps=5, metrics={"mean_opinion": curve}, phase="finishing")
    try:
        with write_lock(study):
            line = page.wait_for_selector('#live-banner .live-run[data-run="rfinishing1"][data-phase="finishing"]')
            assert "has done its 5 weeks and is storing its data" in line.inner_text()
            assert "storing its data" in page.inner_text('#live-runs .live-card[data-run="rfinishing1"] h2')
            chart = '#live-runs figure.chart[data-metric="mean_opinion"]'
            page.wait_for_function(f"{points(chart, 'rfinishing1')} === 6")
            page.locator("#live-runs").screenshot(path=str(ARTIFACTS / "dashboard_run_finishing.png"))
    finally:
        live.unlink()


def test_the_live_file_says_finishing_from_the_last_step_to_the_end(tmp_path):
    path = tmp_path / "live" / "r1.json"
    live = LiveFile(path, "r1", "s", 3, "run")
    beat = Heartbeat(live, every=3600)
    for t in range(4):
        live.step(t, {"m": float(t)})
    live.finishing()                  # the run's steps are over: it now stores its data, the heart still beating
    assert beat._thread.is_alive()
    data = read_live(path)
    assert (data["status"], data["phase"], data["step"], data["metrics"]["m"]) == ("running", "finishing", 3,
                                                                                  [0.0, 1.0, 2.0, 3.0])
    beat.stop()
    live.finish("completed", None)
    data = read_live(path)
    assert data["status"] == "completed" and "phase" not in data


def test_the_live_endpoint_gives_an_ended_run_s_series_when_asked(site):
    study = site["finishing"]
    live = write_live_file(study, "rended1", step=2, n_steps=2, metrics={"mean_opinion": [0.1, 0.2, 0.3]},
                           status="completed")
    try:
        with httpx.Client(base_url=site["url"], timeout=HANG_S) as client:
            plain = client.get("/api/studies/finishing/live").json()["runs"]
            asked = client.get("/api/studies/finishing/live", params={"metrics": "rended1"}).json()["runs"]
            bad = client.get("/api/studies/finishing/live", params={"metrics": "x' OR 1=1"})
    finally:
        live.unlink()
    assert "metrics" not in next(r for r in plain if r["run_id"] == "rended1")
    assert next(r for r in asked if r["run_id"] == "rended1")["metrics"]["mean_opinion"] == [[0, 0.1], [1, 0.2], [2, 0.3]]
    assert bad.status_code == 400
