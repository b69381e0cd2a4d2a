"""The dashboard in a real Chromium (Debian's, driven by Playwright) against
``desim dashboard`` started as a subprocess over real studies and runs.

Screenshots go to ``test-artifacts/`` (git-ignored) for a person to look at.

Every wait is on something the page or the run signals (an element drawn, a data attribute set, a
file the run writes when it reaches a step); the only time limit is the suite's hang guard.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from playwright.sync_api import sync_playwright

from browser import launch
from desim.cli import main
from dashboard_helpers import (ARTIFACTS, ROOT, ba_study, held_study, make_studies, odd_ids_study, server_process,
                               sir_study, sql, wait_for_file, watched_page)
from waits import HANG_S

pytestmark = pytest.mark.browser
LIVE_AGENTS, LIVE_STEPS, HOLDS = 300, 8, (2, 5)   # the live run waits at the end of steps 2 and 5 until let go
BA_AGENTS = 400     # a scale-free graph with hubs and leaves; the 5,000-node sizes are measured in benchmarks/
# the study page has drawn its first loads (charts above the panel), so a click in the panel lands where it
# was aimed: clicking while the charts were still arriving hit whatever the layout shift put there
READY = "#study-title[data-ready]"
DECLARED = json.loads((ROOT / "studies" / "rumor_network" / "study.json").read_text())["state_colors"]["rumor_state"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    studies_dir = tmp_path_factory.mktemp("dashb") / "studies"
    studies = make_studies(studies_dir)
    studies["odd"] = odd_ids_study(studies_dir)
    studies["ba"] = ba_study(studies_dir, BA_AGENTS)
    studies["sir"] = sir_study(studies_dir, BA_AGENTS)
    studies["live"] = held_study(studies_dir, HOLDS)
    studies["live_slow"] = held_study(studies_dir, (2,), name="live_slow")
    studies["timing"] = timing_study(studies_dir)
    studies["seeds"] = sweep_study(studies_dir)
    studies["fold"] = fold_study(studies_dir)
    ARTIFACTS.mkdir(exist_ok=True)
    with server_process(studies_dir) as url:
        with sync_playwright() as pw:
            browser = launch(pw)
            yield {"url": url, "browser": browser, **studies}
            browser.close()


@pytest.fixture
def page(site):
    yield from watched_page(site["browser"])


def shot(pg, name: str) -> None:
    pg.screenshot(path=str(ARTIFACTS / f"dashboard_{name}.png"), full_page=True)


def latest_run(study) -> str:
    return sql(study, "SELECT run_id FROM runs WHERE status='completed' ORDER BY started_at DESC LIMIT 1")[0][0]


def chart(pg, metric: str, mode: str | None = None) -> str:
    return f'figure.chart[data-metric="{metric}"]' + (f'[data-mode="{mode}"]' if mode else "")


def drawn_series(pg, selector: str) -> dict[str, list]:
    """What a uPlot chart was given to draw, per series: its element's data-series."""
    return {k: [tuple(p) for p in v] for k, v in json.loads(pg.get_attribute(selector, "data-series")).items()}


def rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))


def pixels_near(png_path, color: tuple[int, int, int], tol: int = 40) -> int:
    import numpy as np
    from PIL import Image
    img = np.asarray(Image.open(png_path).convert("RGB"), dtype=int)
    return int((np.abs(img - np.array(color)).max(axis=2) <= tol).sum())


def timing_study(studies_dir):
    """opinion_diffusion (12 agents) run once with --set campaign_week=4: its file says week 2."""
    from dashboard_helpers import copy_study
    study = copy_study(studies_dir, "opinion_diffusion", "timing")
    assert main(["run", str(study), "--set", "campaign_week=4", "--set", "n_agents=12", "--quiet"]) == 0
    return study


def sweep_study(studies_dir):
    """opinion_diffusion (12 agents) swept over two replicates: each run has a derived seed of up to 19 digits."""
    from dashboard_helpers import copy_study
    study = copy_study(studies_dir, "opinion_diffusion", "seeds")
    assert main(["sweep", str(study), "--set", "campaign_week=3", "--set", "n_agents=12", "--replicates", "2",
                 "--workers", "1", "--quiet"]) == 0
    return study


def fold_study(studies_dir):
    """opinion_diffusion (12 agents, 3 weeks): a run by hand, then a sweep of 7 runs."""
    from dashboard_helpers import copy_study
    study = copy_study(studies_dir, "opinion_diffusion", "fold")
    small = ["--set", "n_agents=12", "--steps", "3", "--quiet"]
    assert main(["run", str(study), *small]) == 0
    assert main(["sweep", str(study), "--replicates", "7", "--workers", "1", *small]) == 0
    return study


def test_a_large_sweep_is_one_folded_line_that_opens_and_counts_its_drawn_runs(site, page):
    """A sweep of 200 runs was 200 lines of the runs card; a sweep of 6 runs or more is one line until opened,
    saying how many of its runs completed and how many are drawn; the run made by hand stays listed."""
    study = site["fold"]
    [(sweep,)] = sql(study, "SELECT DISTINCT sweep_id FROM runs WHERE sweep_id IS NOT NULL")
    [(mine,)] = sql(study, "SELECT run_id FROM runs WHERE sweep_id IS NULL")
    page.goto(site["url"] + "/#/study/fold")
    page.wait_for_selector(READY)
    group = f'#runs-tree li.sweep-group[data-sweep="{sweep}"]'
    assert page.locator(f"{group} > details").evaluate("d => d.open") is False
    ticked = page.evaluate(f"[...document.querySelectorAll('{group} input.overlay')].filter(b => b.checked).length")
    assert page.inner_text(f"{group} summary") == (f"sweep {sweep}: 7 runs (7 completed)"
                                                   + (f", {ticked} drawn" if ticked else ""))
    assert page.is_visible(f'#runs-tree li[data-run="{mine}"]')          # the run by hand is listed
    page.click(f"{group} summary")
    box = page.locator(f"{group} input.overlay:not(:checked)").first
    box.check()
    page.wait_for_function(f"document.querySelector('{group} .drawn-count').textContent === ', {ticked + 1} drawn'")
    shot(page, "runs_sweep_folded")


def test_runs_tree_shows_whole_seeds_and_what_each_run_changed(site, page):
    """A derived seed is past 2**53, where a JavaScript number rounds it: the tree keeps it exact (shown short,
    whole on hover), and says what each run changed from the study's files, as `desim runs` does."""
    study = site["seeds"]
    runs = sql(study, "SELECT run_id, CAST(seed AS VARCHAR) FROM runs ORDER BY started_at")
    assert len(runs) == 2 and any(abs(int(seed)) > 2**53 for _, seed in runs)
    page.goto(site["url"] + "/#/study/seeds")
    page.wait_for_selector(READY)
    for rid, seed in runs:
        li = f'#runs-tree li[data-run="{rid}"]'
        assert page.get_attribute(f"{li} .run-seed", "data-seed") == seed
        assert page.get_attribute(f"{li} .run-seed", "title") == f"seed {seed}"
        shown = page.inner_text(f"{li} .run-seed").strip()
        assert shown == f"seed {seed[:4]}…{seed[-4:]}"
        assert page.inner_text(f"{li} code.run-set") == "--set campaign_week=3 --set n_agents=12"
    shot(page, "runs_tree_seeds")


def test_legend_chips_stay_whole_in_a_narrow_chart(site):
    """uPlot's legend is a table; the page's table styles shaded half of each chip and the chips ran past the
    chart's edge. In a narrow window, with every run ticked, each chip lies inside its chart."""
    context = site["browser"].new_context(viewport={"width": 560, "height": 900})
    pg = context.new_page()
    try:
        pg.goto(site["url"] + "/#/study/seeds")
        pg.wait_for_selector(READY)
        for box in pg.locator("#runs-tree input.overlay").all():
            if not box.is_checked():
                box.check()
        sel = chart(pg, "mean_opinion")
        pg.wait_for_function(f"Object.keys(JSON.parse(document.querySelector('{sel}').dataset.series)).length === 2")
        pg.wait_for_selector(f"{sel} .u-legend .u-series >> nth=2")
        out = pg.evaluate("""sel => { const fig = document.querySelector(sel), r = fig.getBoundingClientRect();
            return {right: r.right, left: r.left,
                    chips: [...fig.querySelectorAll('.u-legend .u-series')].map(c => { const b = c.getBoundingClientRect();
                           return [b.left, b.right]; }),
                    shades: [...fig.querySelectorAll('.u-legend th, .u-legend td')].map(c => getComputedStyle(c).backgroundColor)}; }""",
                          sel)
        assert len(out["chips"]) == 3        # the step axis and both runs
        assert all(out["left"] - 0.5 <= a and b <= out["right"] + 0.5 for a, b in out["chips"]), out
        assert set(out["shades"]) == {"rgba(0, 0, 0, 0)"}
        pg.locator(sel).screenshot(path=str(ARTIFACTS / "dashboard_narrow_legend.png"))
    finally:
        context.close()


def test_timeline_puts_plans_and_what_fired_on_their_own_rows(site, page):
    """The campaign planned at week 4 and its firing at week 4 are two named rows, the plan above; no text of
    the timeline runs outside the picture."""
    page.goto(site["url"] + "/#/study/timing")
    page.wait_for_selector(READY)
    planned = '#timeline g.tl-row[data-row="planned"][data-name="campaign_starts"]'
    fired = '#timeline g.tl-row[data-row="fired"][data-name="campaign_starts"]'
    want = sorted(step for (step,) in sql(site["timing"], "SELECT step FROM events WHERE name = 'campaign_starts'"))
    assert page.get_attribute(fired, "data-steps") == ",".join(map(str, want)) == "4"
    assert page.get_attribute(planned, "data-steps") == "4"
    y_planned = page.locator(f"{planned} .tl-event").bounding_box()["y"]
    y_fired = page.locator(f"{fired} .tl-fired").bounding_box()["y"]
    assert y_fired > y_planned + 10
    assert "event campaign_starts" in page.locator(f"{planned} .tl-label").text_content()
    outside = page.evaluate("""() => { const svg = document.getElementById('timeline'), w = svg.viewBox.baseVal.width;
        return [...svg.querySelectorAll('text')].map(t => t.getBBox()).filter(b => b.x < 0 || b.x + b.width > w).length; }""")
    assert outside == 0
    # the descriptions stay right of the row names (the plot starts where the names' column ends)
    plot_left = page.evaluate("() => +document.querySelector('#timeline .tl-guide').getAttribute('x1')")
    lefts = page.locator("#timeline .tl-note").evaluate_all("els => els.map(e => e.getBBox().x)")
    assert lefts and min(lefts) >= plot_left
    assert page.locator("#timeline .tl-unit").text_content() == "week"
    page.locator("#interventions").screenshot(path=str(ARTIFACTS / "dashboard_timeline.png"))


def test_panel_tells_which_payload_fields_are_whose(site, page):
    """rumor_network posts carry 'rumor', hearing carries nothing: the panel view says so (from the panel's own
    non-null cells), and a row shows only its kind's fields."""
    study = site["ba"]
    rid = latest_run(study)
    page.goto(site["url"] + "/#/study/rumor_ba")
    page.wait_for_selector(READY)
    page.wait_for_selector("#payload-kinds .payload-kind")
    kinds = {k: fields for k, fields in page.locator("#payload-kinds .payload-kind").evaluate_all(
        "els => els.map(e => [e.dataset.kind, e.dataset.fields])")}
    want = {k: "rumor" if n else "" for k, n in sql(
        study, "SELECT action_kind, count(payload.rumor) FROM panel WHERE run_id = ? AND action_kind IS NOT NULL "
               "GROUP BY action_kind", [rid])}
    assert kinds == want and kinds["post"] == "rumor" and kinds["hear"] == ""
    page.select_option("#f-kind", "hear")
    page.click("#panel-filters button[type=submit]")
    n_hear = sql(study, "SELECT count(*) FROM panel WHERE run_id = ? AND action_kind = 'hear'", [rid])[0][0]
    page.wait_for_selector(f'#panel-total[data-total="{n_hear}"]')
    assert set(page.locator("#panel-table td.payload").all_inner_texts()) == {"–"}
    page.select_option("#f-kind", "post")
    page.click("#panel-filters button[type=submit]")
    n_post = sql(study, "SELECT count(*) FROM panel WHERE run_id = ? AND action_kind = 'post'", [rid])[0][0]
    page.wait_for_selector(f'#panel-total[data-total="{n_post}"]')
    assert all(json.loads(t).keys() == {"rumor"} for t in page.locator("#panel-table td.payload").all_inner_texts())


def test_markers_come_from_the_run_s_own_values(site, page):
    """A run made with --set campaign_week=4 is marked at step 4, where its campaign happened, not at the
    study file's default (step 2)."""
    study = site["timing"]
    assert json.loads((study / "environment" / "environment.json").read_text())["scheduled_events"][0]["at_step"] \
        == "$campaign_week"
    assert sql(study, "SELECT step, name FROM events WHERE step > 0 ORDER BY step")[0] == (4, "campaign_starts")
    page.goto(site["url"] + "/#/study/timing")
    page.wait_for_selector(READY)
    page.wait_for_function("document.querySelector('figure.chart[data-metric=\"mean_opinion\"]')?.dataset.markers"
                           " === '4'")
    # labelled in the study's own unit of time (its simulation.json says week), not "step"
    assert "week 4: campaign_starts" in page.inner_text(f'{chart(page, "mean_opinion")} .chart-events')
    assert "week 2" not in page.inner_text(f'{chart(page, "mean_opinion")} .chart-events')
    assert page.locator(f'{chart(page, "mean_opinion")} .u-legend .u-series').first.inner_text().startswith("week")
    # the timeline plans the campaign where this run had it, and says so
    assert page.get_attribute("#timeline .tl-event", "data-step") == "4"
    assert "resolved them" in page.inner_text("#timeline-source")
    shot(page, "resolved_markers")


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
    page.wait_for_selector(f'{chart(None, "mean_opinion")} canvas')
    n_agents = sql(good, "SELECT count(*) FROM initial_states WHERE run_id=?", [rid])[0][0]
    assert page.inner_text("#population-card .pop-size") == str(n_agents)
    assert page.inner_text("#population-card .pop-interaction").startswith("watts_strogatz")
    assert page.inner_text("#population-card .pop-propagation") == "broadcast_then_local"
    assert page.locator("#population-card svg.dist rect.bar").count() > 0
    for name, count in sql(good, "SELECT name, count(*) FROM metrics WHERE run_id=? GROUP BY name", [rid]):
        assert len(drawn_series(page, chart(page, name))[rid]) == count
    drawn = drawn_series(page, chart(page, "mean_opinion"))[rid]
    assert drawn == sql(good, "SELECT step, value FROM metrics WHERE run_id=? AND name='mean_opinion' ORDER BY step",
                        [rid])
    # intervention markers at the campaign's step, on the timeline and on the charts; the latest run is a
    # branch: nested under its parent, and its own fired events (step 6) mark the charts
    page.wait_for_function("document.querySelector('figure.chart[data-metric=\"mean_opinion\"]').dataset.markers"
                           " === '2,6'")
    # the timeline plans what the branch (the latest run) resolved: the campaign and its counter-campaign
    assert sorted(page.locator("#timeline .tl-event").evaluate_all("els => els.map(e => +e.dataset.step)")) == [2, 6]
    parent = sql(good, "SELECT parent_run_id, fork_step FROM runs WHERE run_id=?", [rid])[0]
    assert parent[1] == 6
    assert "from step 6" in page.inner_text(f'#runs-tree li[data-run="{parent[0]}"] li[data-run="{rid}"]')
    assert "week 6: counter_campaign" in page.inner_text(f'{chart(page, "mean_opinion")} .chart-events')
    # overlay the other run: its curve appears too
    other = [r for (r,) in sql(good, "SELECT run_id FROM runs ORDER BY started_at") if r != rid][1]
    page.check(f'input.overlay[data-run="{other}"]')
    page.wait_for_function(f"'{other}' in JSON.parse(document.querySelector('{chart(page, 'mean_opinion')}')"
                           ".dataset.series)")
    assert len(drawn_series(page, chart(page, "mean_opinion"))[other]) == 13
    page.uncheck(f'input.overlay[data-run="{other}"]')
    # branch minus parent: zero before the fork (replayed steps), the counter-campaign's effect after
    page.check("#diff-mode")
    diff = chart(page, "mean_opinion", "diff")
    page.wait_for_selector(f"{diff} canvas")
    page.wait_for_function(f"(JSON.parse(document.querySelector('{diff}').dataset.series)['{rid}'] || []).length > 0")
    values = dict(drawn_series(page, diff)[rid])
    expected = dict(sql(good, "SELECT b.step, b.value - p.value FROM metrics b JOIN metrics p USING (step, name) "
                              "WHERE b.run_id=? AND p.run_id=? AND name='mean_opinion'", [rid, parent[0]]))
    assert sorted(values) == sorted(expected) == list(range(13))
    assert all(values[t] == 0 for t in range(6))
    assert values == expected
    assert any(values[t] != 0 for t in range(6, 13))
    # a chart whose differences go negative: its tick labels keep the minus sign, and a zero line is drawn
    negative = [n for (n,) in sql(good, "SELECT DISTINCT b.name FROM metrics b JOIN metrics p USING (step, name) "
                                        "WHERE b.run_id=? AND p.run_id=? AND b.value < p.value", [rid, parent[0]])]
    assert negative, "the branch lowers no metric: the fixture no longer tests negative differences"
    for name in negative:
        sel = chart(page, name, "diff")
        page.wait_for_function(f"document.querySelector('{sel}').dataset.zeroLine !== undefined")
        ticks = json.loads(page.get_attribute(sel, "data-yticks"))
        assert any(t.startswith("\u2212") for t in ticks), ticks
        assert any(float(t) == 0 for t in ticks if t and not t.startswith("\u2212"))
        low = min(v for _, v in drawn_series(page, sel)[rid])
        lowest_tick = min(float(t.replace("\u2212", "-")) for t in ticks if t)
        assert lowest_tick <= low + abs(low) * 0.5       # the ticks cover the negative values
    page.locator(chart(page, "mean_opinion", "diff")).screenshot(path=str(ARTIFACTS / "dashboard_difference.png"))
    page.uncheck("#diff-mode")
    page.wait_for_selector(chart(page, "mean_opinion", "level"))
    # display states: opinion is numeric, drawn as quantile bands of all agents
    page.wait_for_selector(f'#state-charts {chart(page, "opinion", "bands")} canvas')
    page.wait_for_selector("#panel-total")
    assert page.get_attribute("#panel-total", "data-total") == str(
        sql(good, "SELECT count(*) FROM panel WHERE run_id=?", [rid])[0][0])
    page.fill("#f-step", "4")
    page.click("#panel-filters button[type=submit]")
    page.wait_for_selector(f'#panel-total[data-total="{n_agents}"]')
    page.click("text=Show network")
    page.wait_for_selector('#net-view[data-drawn^="network:0:"]')
    assert page.get_attribute("#net-view", "data-nodes") == str(n_agents)
    shot(page, "study")
    # the report's diffusion player, built on request and embedded from the study's runs/ folder
    page.click("text=Full diffusion player (report)")
    page.wait_for_selector("#report-player")
    assert page.get_attribute("#report-player", "src").startswith("/files/opinion_diffusion/runs/")
    frame = page.frame_locator("#report-player")
    frame.locator("body *").first.wait_for()
    page.locator("#network").screenshot(path=str(ARTIFACTS / "dashboard_report_player.png"))


@pytest.mark.parametrize("width", [1280, 1920])
def test_no_chart_overflows_its_card(site, width):
    context = site["browser"].new_context(viewport={"width": width, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(HANG_S * 1000)
    try:
        pg.goto(site["url"] + "/#/study/opinion_diffusion")
        pg.wait_for_selector(READY)
        pg.wait_for_selector("#state-charts figure.chart canvas")
        # every chart has followed its cell's width (each figure says the width it was last drawn at)
        pg.wait_for_function("""() => [...document.querySelectorAll('figure.chart')].every(f =>
            f.uplot && f.dataset.drawnWidth === String(Math.floor(f.getBoundingClientRect().width)))""")
        boxes = pg.evaluate("""() => [...document.querySelectorAll('figure.chart')].map(f => {
            const card = f.closest('.card').getBoundingClientRect();
            const plot = f.querySelector('.uplot').getBoundingClientRect();
            const canvas = f.querySelector('canvas').getBoundingClientRect();
            return {metric: f.dataset.metric, card: [card.left, card.right], plot: [plot.left, plot.right],
                    canvas: [canvas.left, canvas.right], scroll: f.scrollWidth, client: f.clientWidth};
        })""")
        assert len(boxes) >= 5
        for b in boxes:
            assert b["card"][0] <= b["plot"][0] and b["plot"][1] <= b["card"][1], b
            assert b["canvas"][1] <= b["card"][1] and b["canvas"][1] - b["canvas"][0] > 200, b
            assert b["scroll"] <= b["client"] + 1, b
        assert pg.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        if width == 1920:
            pg.screenshot(path=str(ARTIFACTS / "dashboard_study_1920.png"), full_page=True)
    finally:
        context.close()


def drawn(pg) -> dict:
    """What the network renderer put on the canvas: per node its radius (px) and colour, the view and frame."""
    return pg.evaluate("document.getElementById('net-view').desimNet.drawn()")


def show_step(pg, k: int) -> None:
    pg.evaluate(f"(() => {{ const s = document.querySelector('#net-view .dn-step'); s.value = {k}; "
                "s.dispatchEvent(new Event('input')); })()")


def test_ba_network_with_counts_over_all_and_declared_colours(site, page):
    ba = site["ba"]
    rid = latest_run(ba)
    page.goto(site["url"] + "/#/study/rumor_ba")
    page.wait_for_selector("#net-run")
    page.select_option("#net-state", "rumor_state")
    page.click("text=Show network")
    # the layout is the network's, computed in Python and stored: drawn at once, nothing settles in the page
    page.wait_for_selector('#net-view[data-drawn="network:0:0"]')
    assert list((ba / "runs" / "layouts").glob("*.parquet"))
    assert page.get_attribute("#net-view", "data-nodes") == str(BA_AGENTS)
    assert int(page.get_attribute("#net-view", "data-links")) == sql(
        ba, "SELECT count(*) FROM edges WHERE run_id=?", [rid])[0][0]
    # the message overlay is off until ticked
    assert page.get_attribute("#net-view", "data-overlay") == "off" and not page.is_checked("#net-view .dn-messages")
    last = sql(ba, "SELECT max(step) FROM panel WHERE run_id=?", [rid])[0][0]
    at_start = drawn(page)
    show_step(page, last)
    page.wait_for_selector(f'#net-view[data-drawn="network:{last}:0"]')
    counts = json.loads(page.get_attribute("#net-view .dn-legend", "data-counts"))
    stored = dict(sql(ba, "SELECT CAST(state.rumor_state AS VARCHAR), count(*) FROM panel WHERE run_id=? AND step=? GROUP BY 1",
                      [rid, last]))
    assert {k: v for k, v in counts.items() if v} == stored
    assert sum(counts.values()) == BA_AGENTS
    assert f"all {BA_AGENTS:,} agents" in page.inner_text("#net-view .dn-legend")
    # the study's declared colours, in the declared order, in the legend and on the drawn nodes
    order = page.eval_on_selector_all("#net-view .dn-legend [data-category]", "els => els.map(e => e.dataset.category)")
    assert order == [c for c in DECLARED if c in order]
    for category, color in DECLARED.items():
        if category in order:
            style = page.get_attribute(f'#net-view .dn-legend [data-category="{category}"] i', "style")
            assert color.lower() in style.lower() or "rgb(%d, %d, %d)" % rgb(color) in style
    # sizes: by degree (said in the key), the same for the same degree whatever the state, never by rarity
    at_end = drawn(page)
    assert page.get_attribute("#net-view", "data-size-by") == "degree"
    assert "degree" in page.inner_text("#net-view .dn-size")
    assert at_start["radius"] == at_end["radius"] and at_start["color"] != at_end["color"]
    edges = sql(ba, "SELECT source, target FROM edges WHERE run_id=?", [rid])
    agents = [a for (a,) in sql(ba, "SELECT agent_id FROM initial_states WHERE run_id=? ORDER BY agent_id", [rid])]
    degree = {a: 0 for a in agents}
    for a, b in edges:
        degree[a] += 1
        degree[b] += 1
    by_degree: dict[int, set] = {}
    for a, r in zip(agents, at_end["radius"]):
        by_degree.setdefault(degree[a], set()).add(round(r, 4))
    assert all(len(v) == 1 for v in by_degree.values())
    final = dict(sql(ba, "SELECT agent_id, CAST(state.rumor_state AS VARCHAR) FROM panel WHERE run_id=? AND step=?",
                     [rid, last]))
    rare = min(stored, key=stored.get)
    low = min(degree.values())
    rare_low = [r for a, r in zip(agents, at_end["radius"]) if final[a] == rare and degree[a] == low]
    common_low = [r for a, r in zip(agents, at_end["radius"]) if final[a] != rare and degree[a] == low]
    assert not rare_low or max(rare_low) <= min(common_low)          # a rare category's nodes are not larger
    png = ARTIFACTS / "dashboard_ba_network.png"
    page.locator("#network").screenshot(path=str(png))
    assert pixels_near(png, rgb(DECLARED["ignorant"])) > 2000
    # the overlay toggles on, and stays on through every view; each view waits on its own signal
    page.check("#net-view .dn-messages")
    page.wait_for_selector(f'#net-view[data-drawn="network:{last}:1"]')
    for view in ("communities", "adoption", "network"):
        page.click(f'#net-view .dn-views button[data-view="{view}"]')
        page.wait_for_selector(f'#net-view[data-drawn="{view}:{last}:1"]')
    assert page.locator('#net-view .dn-views button[data-view="tree"]').count() == 0   # no infector recorded
    # the shares chart of the same state uses the declared colours too
    colors = json.loads(page.get_attribute(f'#state-charts {chart(page, "rumor_state", "shares")}', "data-colors"))
    assert {c: colors[c] for c in DECLARED} == DECLARED


def test_a_state_model_in_the_community_and_tree_views(site, page):
    """An SIR run: the community view (the one a large network opens on), the transmission tree, and no
    word or check box about posts, since the model posts none."""
    page.goto(site["url"] + "/#/study/sir_ba")
    page.wait_for_selector("#net-run")
    page.select_option("#net-state", "state")
    page.click("text=Show network")
    page.wait_for_selector('#net-view[data-drawn^="network:0:"]')
    assert page.locator("#net-view .dn-messages").count() == 0
    page.click('#net-view .dn-views button[data-view="communities"]')
    page.wait_for_selector('#net-view[data-drawn^="communities:0:"]')
    assert page.get_attribute("#net-view", "data-size-by") == "agents"
    assert "disc area" in page.inner_text("#net-view .dn-size")
    show_step(page, 12)
    page.wait_for_selector('#net-view[data-drawn^="communities:12:"]')
    page.locator("#network").screenshot(path=str(ARTIFACTS / "dashboard_sir_communities.png"))
    page.click('#net-view .dn-views button[data-view="tree"]')
    page.wait_for_selector('#net-view[data-drawn^="tree:12:"]')
    for view in ("communities", "tree"):
        page.click(f'#net-view .dn-views button[data-view="{view}"]')
        page.wait_for_selector(f'#net-view[data-drawn^="{view}:12:"]')
        text = page.inner_text("#net-view")
        assert "post" not in text and "messag" not in text, view
    assert "infected_by" in page.inner_text("#net-view .dn-caption")
    page.locator("#network").screenshot(path=str(ARTIFACTS / "dashboard_sir_tree.png"))


def test_long_labels_do_not_overlap_in_the_dashboard(site, page):
    page.goto(site["url"] + "/#/study/rumor_ba")
    page.wait_for_selector("#net-run")
    page.select_option("#net-state", "rumor_state")
    page.click("text=Show network")
    page.wait_for_selector('#net-view[data-drawn="network:0:0"]')
    page.evaluate("""() => { const root = document.getElementById('net-view');
        document.querySelectorAll('#net-view .dn-label').forEach((e, i) => {
            e.textContent = 'a category label long enough to need most of a line on its own, number ' + i; }); }""")
    boxes = page.eval_on_selector_all("#net-view .dn-legend > span, #net-view .dn-size > span",
                                      "els => els.map(e => { const b = e.getBoundingClientRect(); "
                                      "return [b.left, b.top, b.right, b.bottom]; })")
    right = page.evaluate("document.getElementById('network').getBoundingClientRect().right")
    for i, a in enumerate(boxes):
        assert a[2] <= right
        for b in boxes[i + 1:]:
            assert a[2] <= b[0] + 0.5 or b[2] <= a[0] + 0.5 or a[3] <= b[1] + 0.5 or b[3] <= a[1] + 0.5, (a, b)


def test_declared_colours_in_the_report_player(site, page):
    page.goto(site["url"] + "/#/study/rumor_ba")
    page.wait_for_selector("#net-run")
    page.select_option("#net-state", "rumor_state")
    page.click("text=Full diffusion player (report)")
    page.wait_for_selector("#report-player")
    frame = page.frame_locator("#report-player")
    payload = json.loads(frame.locator("#desim-diffusion-data").text_content())
    meta = payload["meta"]
    assert {c: meta["palette"][meta["categories"].index(c)] for c in DECLARED if c in meta["categories"]} == \
        {c: v for c, v in DECLARED.items() if c in meta["categories"]}
    frame.locator('#desim-net[data-drawn]').wait_for()
    for category, color in DECLARED.items():
        if category in meta["categories"]:
            assert frame.locator(f'.dn-legend [data-category="{category}"] i[style*="{color}"]').count() == 1
    page.locator("#network").screenshot(path=str(ARTIFACTS / "dashboard_report_player_ba.png"))


def test_cross_origin_post_is_refused(site, page):
    """A page elsewhere submits a form to the dashboard's one writing endpoint: refused, nothing written."""
    good = site["good"]
    rid = latest_run(good)
    target = f"{site['url']}/api/studies/opinion_diffusion/diffusion?run={rid}&state=opinion"
    before = sorted(p.name for p in (good / "runs").rglob("*.html"))
    page.set_content(f'<form method="post" action="{target}"><button id="go">go</button></form>')
    with page.expect_response(lambda r: "/diffusion" in r.url) as answer:
        page.click("#go")
    assert answer.value.status == 403
    assert "cross-origin" in answer.value.text()
    assert sorted(p.name for p in (good / "runs").rglob("*.html")) == before


def test_agent_ids_of_any_characters_open(site, page):
    from dashboard_helpers import ODD_IDS
    odd = site["odd"]
    rid = latest_run(odd)
    page.goto(site["url"] + "/#/study/odd_ids")
    page.wait_for_selector(READY)
    for agent in ODD_IDS:
        link = page.locator("#panel-table a.agent-link", has_text=agent).first
        link.click()
        page.wait_for_selector("#trajectory tbody tr[data-step]")
        assert page.inner_text("#agent-view h1") == f"Agent {agent}"
        assert page.locator("#trajectory tbody tr[data-step]").count() == sql(
            odd, "SELECT count(*) FROM panel WHERE run_id=? AND agent_id=?", [rid, agent])[0][0] == 3
        page.go_back()
        page.wait_for_selector(READY)


def test_agent_view_shows_trajectory(site, page):
    good = site["good"]
    rid = latest_run(good)
    page.goto(site["url"] + "/#/study/opinion_diffusion")
    page.wait_for_selector(READY)
    agent = page.inner_text("#panel-table a.agent-link >> nth=0")
    page.click("#panel-table a.agent-link >> nth=0")
    page.wait_for_selector("#trajectory tbody tr[data-step]")
    rows = sql(good, "SELECT step, state FROM panel WHERE run_id=? AND agent_id=? ORDER BY step", [rid, agent])
    assert page.locator("#trajectory tbody tr[data-step]").count() == len(rows) == 12
    # each number to 6 significant digits, the exact stored value in the cell's tooltip
    cell = page.locator('#trajectory tbody tr[data-step="7"] td.json >> nth=0')
    stored = rows[6][1]
    assert json.loads(cell.get_attribute("title")) == stored
    shown = json.loads(cell.inner_text())
    assert shown.keys() == stored.keys() and shown != stored
    assert all(v == float(f"{stored[k]:.6g}") for k, v in shown.items())
    assert len(drawn_series(page, '#agent-view figure.chart[data-metric="opinion"]')[rid]) == 13
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


METRICS_OF_SLOW = "**/api/studies/live_slow/metrics**"


def test_the_live_card_polls_while_the_stores_reads_are_still_going(site, page):
    """The page began polling a running run only once it had read the finished runs' metrics, states and
    panel, which take seconds on a store of long runs: the live card sat at "Waiting for the run's first
    steps" meanwhile. Here the metrics read is held unanswered; the live curves must still come."""
    study = site["live_slow"]
    run = subprocess.Popen([sys.executable, "-m", "desim.cli", "run", str(study), "--steps", "4",
                            "--set", "n_agents=60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held, released = [], False
    try:
        wait_for_file(study / "held-2", run)          # running, its first steps in its live file
        page.route(METRICS_OF_SLOW, lambda route: route.continue_() if released else held.append(route))
        page.goto(site["url"] + "/#/study/live_slow")
        page.wait_for_selector(".live-card .live-charts")       # drawn from the live file
        assert held, "the page asked the store for the finished run's metrics"
        assert page.locator(READY).count() == 0                 # and is still waiting for them
    finally:
        (study / "release-2").touch()
        released = True                     # the page's later reads (its reload when the run ends) go through
        for route in held:
            route.continue_()
        out, err = run.communicate(timeout=HANG_S)
    assert run.returncode == 0, err
    page.wait_for_selector(READY)


def test_run_started_during_the_test_appears_live_and_grows(site, page):
    """A run started while the page is open shows up live and its curves grow step by step. The run
    waits at the end of steps 2 and 5 (writing a file to say so) until the test lets it go, so the page
    is checked at known points of a run in progress, however fast or slow the machine."""
    live = site["live"]
    before = {r for (r,) in sql(live, "SELECT run_id FROM runs")}
    page.goto(site["url"] + "/#/study/live")
    page.wait_for_selector(READY)                    # the page has done its store reads
    run = subprocess.Popen([sys.executable, "-m", "desim.cli", "run", str(live), "--steps", str(LIVE_STEPS),
                            "--set", f"n_agents={LIVE_AGENTS}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        wait_for_file(live / "held-2", run)          # steps 0 and 1 are stored; the run waits in step 2
        page.wait_for_selector("#live-banner .live-run")
        rid = page.get_attribute("#live-banner .live-run", "data-run")
        assert rid not in before
        sel = chart(page, "mean_opinion")
        pts = f"(JSON.parse((document.querySelector('{sel}') || {{dataset: {{}}}}).dataset.series || '{{}}')['{rid}'] || []).length"
        page.wait_for_function(f"{pts} === 2")
        assert page.locator(f'#runs-tree li[data-run="{rid}"] .badge').first.inner_text() == "running"
        # what the live run changed from the study's files, as `desim runs` prints it
        changes = f"--steps {LIVE_STEPS} --set n_agents={LIVE_AGENTS}"
        assert page.inner_text(f'#runs-tree li[data-run="{rid}"] code.run-set') == changes
        assert f"({changes})" in page.inner_text("#live-banner")
        (live / "release-2").touch()
        wait_for_file(live / "held-5", run)          # steps 0..4 stored, still running
        page.wait_for_function(f"{pts} === 5")       # the same page's curve grew
        assert page.locator(f'#runs-tree li[data-run="{rid}"] .badge').first.inner_text() == "running"
        shot(page, "live_running")
        # a page opened while the run is going: last good data, live progress, no error
        second = page.context.new_page()
        second.goto(site["url"] + "/#/study/live")
        banner = second.wait_for_selector(f'#live-banner .live-run[data-run="{rid}"]')
        assert banner.inner_text().startswith(f"run in progress: {rid} at week")
        assert second.locator(".error-card").count() == 0
        second.wait_for_function(f"{pts} === 5")     # its curve so far, from the live file
        assert second.locator(f'#runs-tree li[data-run="{rid}"]').count() == 1
        second.screenshot(path=str(ARTIFACTS / "dashboard_live_opened_during_run.png"), full_page=True)
        second.close()
        (live / "release-5").touch()
        out, err = run.communicate(timeout=HANG_S)
    finally:
        for hold in HOLDS:                           # never leave the run waiting
            (live / f"release-{hold}").touch()
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, err          # the dashboard never blocked the run's writes
    assert f"run {rid}: completed" in out
    page.wait_for_selector(f'#runs-tree li[data-run="{rid}"] > .badge[data-status="completed"]')
    page.wait_for_function(f"{pts} === {LIVE_STEPS + 1}")
    assert sql(live, "SELECT count(*) FROM metrics WHERE run_id=? AND name='mean_opinion'", [rid])[0][0] == \
        LIVE_STEPS + 1
    assert page.locator("#live-banner .live-run").count() == 0
    shot(page, "live_done")
