"""The dashboard in a real Chromium (Debian's, driven by Playwright) against
``desim dashboard`` started as a subprocess over real studies and runs.

Screenshots go to ``test-artifacts/`` (git-ignored) for a person to look at.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from playwright.sync_api import sync_playwright

from dashboard_helpers import ARTIFACTS, make_studies, server_process, sql

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
LIVE_AGENTS, LIVE_STEPS = 4000, 40     # a run of several seconds (~0.2-0.5 s per step here)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    studies_dir = tmp_path_factory.mktemp("dashb") / "studies"
    studies = make_studies(studies_dir)
    ARTIFACTS.mkdir(exist_ok=True)
    with server_process(studies_dir) as url:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            yield {"url": url, "browser": browser, **studies}
            browser.close()


@pytest.fixture
def page(site):
    context = site["browser"].new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(20_000)
    yield pg
    context.close()
    assert errors == [], f"JavaScript errors in the page: {errors}"


def shot(pg, name: str) -> None:
    pg.screenshot(path=str(ARTIFACTS / f"dashboard_{name}.png"), full_page=True)


def latest_run(study) -> str:
    return sql(study, "SELECT run_id FROM runs WHERE status='completed' ORDER BY started_at DESC LIMIT 1")[0][0]


def test_study_list_loads_with_error_cards(site, page):
    page.goto(site["url"] + "/#/")
    page.wait_for_selector('[data-study="opinion_diffusion"] .badge')
    assert page.inner_text('[data-study="opinion_diffusion"] .badge') == "completed"
    assert "malformed JSON" in page.inner_text('[data-study="broken"].error-card')
    assert page.locator('[data-study="norun"].error-card').count() == 0
    assert page.inner_text('[data-study="norun"] .badge') == "no runs"
    shot(page, "list")


def test_study_page_population_card_and_metric_chart(site, page):
    good = site["good"]
    rid = latest_run(good)
    page.goto(site["url"] + "/#/study/opinion_diffusion")
    page.wait_for_selector("#metric-charts svg.metric-chart")
    n_agents = sql(good, "SELECT count(*) FROM initial_states WHERE run_id=?", [rid])[0][0]
    assert page.inner_text("#population-card .pop-size") == str(n_agents)
    assert page.inner_text("#population-card .pop-interaction").startswith("watts_strogatz")
    assert page.inner_text("#population-card .pop-propagation") == "broadcast_then_local"
    assert page.locator("#population-card svg.dist rect.bar").count() > 0
    for name, count in sql(good, "SELECT name, count(*) FROM metrics WHERE run_id=? GROUP BY name", [rid]):
        points = page.locator(f'svg.metric-chart[data-metric="{name}"] circle.pt[data-run="{rid}"]')
        assert points.count() == count
    drawn = [(int(c.get_attribute("data-step")), float(c.get_attribute("data-value"))) for c in
             page.locator(f'svg.metric-chart[data-metric="mean_opinion"] circle.pt[data-run="{rid}"]').all()]
    assert drawn == sql(good, "SELECT step, value FROM metrics WHERE run_id=? AND name='mean_opinion' ORDER BY step",
                        [rid])
    # intervention markers at the campaign's step, on the timeline and on the charts
    assert page.locator('svg.metric-chart[data-metric="mean_opinion"] line.marker[data-step="2"]').count() >= 1
    assert page.locator("#timeline .tl-event").count() == 1
    # the latest run is a branch: nested under its parent, and its own fired events mark the charts
    parent = sql(good, "SELECT parent_run_id, fork_step FROM runs WHERE run_id=?", [rid])[0]
    assert parent[1] == 6
    assert "from step 6" in page.inner_text(f'#runs-tree li[data-run="{parent[0]}"] li[data-run="{rid}"]')
    page.wait_for_selector('svg.metric-chart[data-metric="mean_opinion"] line.marker[data-step="6"]', state="attached")
    # overlay the other run: its points appear too
    other = [r for (r,) in sql(good, "SELECT run_id FROM runs ORDER BY started_at") if r != rid][1]
    page.check(f'input.overlay[data-run="{other}"]')
    page.wait_for_selector(f'svg.metric-chart[data-metric="mean_opinion"] circle.pt[data-run="{other}"]')
    assert page.locator(f'svg.metric-chart[data-metric="mean_opinion"] circle.pt[data-run="{other}"]').count() == 13
    # branch minus parent: zero before the fork (replayed steps), the counter-campaign's effect after
    page.check("#diff-mode")
    diff = f'svg.metric-chart[data-mode="diff"][data-metric="mean_opinion"] circle.pt[data-run="{rid}"]'
    page.wait_for_selector(diff)
    values = {int(c.get_attribute("data-step")): float(c.get_attribute("data-value")) for c in page.locator(diff).all()}
    expected = dict(sql(good, "SELECT b.step, b.value - p.value FROM metrics b JOIN metrics p USING (step, name) "
                              "WHERE b.run_id=? AND p.run_id=? AND name='mean_opinion'", [rid, parent[0]]))
    assert sorted(values) == sorted(expected) == list(range(13))
    assert all(values[t] == 0 for t in range(6))
    assert values == expected
    assert any(values[t] != 0 for t in range(6, 13))
    page.uncheck("#diff-mode")
    page.wait_for_selector('svg.metric-chart[data-mode="level"]')
    page.wait_for_selector("#panel-total")
    assert page.get_attribute("#panel-total", "data-total") == str(
        sql(good, "SELECT count(*) FROM panel WHERE run_id=?", [rid])[0][0])
    page.fill("#f-step", "4")
    page.click("#panel-filters button[type=submit]")
    page.wait_for_selector(f'#panel-total[data-total="{n_agents}"]')
    page.click("text=Show network")
    page.wait_for_selector("#net-svg circle.node")
    assert page.locator("#net-svg circle.node").count() == n_agents
    shot(page, "study")
    # the report's diffusion player, built on request and embedded from the study's runs/ folder
    page.click("text=Full diffusion player (report)")
    page.wait_for_selector("#report-player", timeout=60_000)
    assert page.get_attribute("#report-player", "src").startswith("/files/opinion_diffusion/runs/")
    frame = page.frame_locator("#report-player")
    frame.locator("body *").first.wait_for(timeout=30_000)
    page.locator("#network").screenshot(path=str(ARTIFACTS / "dashboard_report_player.png"))


def test_agent_view_shows_trajectory(site, page):
    good = site["good"]
    rid = latest_run(good)
    page.goto(site["url"] + "/#/study/opinion_diffusion")
    page.wait_for_selector("#panel-table a.agent-link")
    agent = page.inner_text("#panel-table a.agent-link >> nth=0")
    page.click("#panel-table a.agent-link >> nth=0")
    page.wait_for_selector("#trajectory tbody tr[data-step]")
    rows = sql(good, "SELECT step, state FROM panel WHERE run_id=? AND agent_id=? ORDER BY step", [rid, agent])
    assert page.locator("#trajectory tbody tr[data-step]").count() == len(rows) == 12
    cell = page.inner_text('#trajectory tbody tr[data-step="7"] td.json >> nth=0')
    assert json.loads(cell) == json.loads(rows[6][1])
    assert page.locator('#agent-view svg.metric-chart[data-metric="opinion"] circle.pt').count() == 13
    assert page.locator("#agent-messages tbody tr").count() == sql(
        good, "SELECT count(*) FROM messages WHERE run_id=? AND author_id=?", [rid, agent])[0][0]
    shot(page, "agent")
    page.click('#trajectory tbody tr[data-step="3"] a')
    page.wait_for_selector("#messages-view .round")
    counts = sql(good, "SELECT round, count(*) FROM messages WHERE run_id=? AND step=3 GROUP BY round", [rid])
    assert page.locator("#messages-view .round .message").count() == sum(c for _, c in counts)


def test_broken_study_shows_error_card(site, page):
    page.goto(site["url"] + "/#/study/broken")
    page.wait_for_selector(".error-card")
    assert "simulation.json" in page.inner_text(".error-card")
    page.goto(site["url"] + "/#/study/norun")
    page.wait_for_selector("#population-card")
    assert "does not exist" in page.inner_text(".error-card")
    assert "too_late" in page.inner_text("#population-card .warnings")


def test_run_started_during_the_test_appears_live_and_grows(site, page):
    good = site["good"]
    before = {r for (r,) in sql(good, "SELECT run_id FROM runs")}
    page.goto(site["url"] + "/#/study/opinion_diffusion")
    page.wait_for_selector("#panel-total")           # the page has done its store reads
    run = subprocess.Popen([sys.executable, "-m", "desim.cli", "run", str(good), "--steps", str(LIVE_STEPS),
                            "--set", f"n_agents={LIVE_AGENTS}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        page.wait_for_selector("#live-banner .live-run", timeout=60_000)
        rid = page.get_attribute("#live-banner .live-run", "data-run")
        assert rid not in before
        pts = f'svg.metric-chart[data-metric="mean_opinion"] circle.pt[data-run="{rid}"]'
        page.wait_for_selector(pts, timeout=60_000)
        first = page.locator(pts).count()
        page.wait_for_function(f"document.querySelectorAll('{pts}').length > {first}", timeout=60_000)
        grown = page.locator(pts).count()
        assert first < grown <= LIVE_STEPS + 1
        assert page.locator(f'#runs-tree li[data-run="{rid}"] .badge').first.inner_text() == "running"
        shot(page, "live_running")
        # a page opened while the run holds the store: last good data, live progress, no error
        second = page.context.new_page()
        second.goto(site["url"] + "/#/study/opinion_diffusion")
        banner = second.wait_for_selector(f'#live-banner .live-run[data-run="{rid}"]', timeout=30_000)
        assert banner.inner_text().startswith(f"run in progress: {rid} at step")
        assert second.locator(".error-card").count() == 0
        second.wait_for_selector(pts)                    # its curve so far, from the live file
        assert second.locator(f'#runs-tree li[data-run="{rid}"]').count() == 1
        second.screenshot(path=str(ARTIFACTS / "dashboard_live_opened_during_run.png"), full_page=True)
        second.close()
        out, err = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, err          # the dashboard never blocked the run's writes
    assert f"run {rid}: completed" in out
    page.wait_for_selector(f'#runs-tree li[data-run="{rid}"] > .badge[data-status="completed"]', timeout=30_000)
    page.wait_for_function(f"document.querySelectorAll('{pts}').length === {LIVE_STEPS + 1}", timeout=30_000)
    assert sql(good, "SELECT count(*) FROM metrics WHERE run_id=? AND name='mean_opinion'", [rid])[0][0] == \
        LIVE_STEPS + 1
    assert page.locator("#live-banner .live-run").count() == 0
    shot(page, "live_done")
