"""The dashboard's charts of a run that ended early, in Debian's Chromium against `desim dashboard`.

The `sir` template's run stops through `stop_when` (nobody infectious) long before its 500-day cap: the
metric charts, the states over time and the intervention timeline end at the run's last step, as the
report's figures do. Its charts start with the study's display_metrics; a metric it does not display that
holds one value throughout (an SIR's `new_S`, 0 at every step) is named with that value, not drawn flat.

Every wait is on something the page signals (``#study-title[data-ready]``, an element drawn).
"""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import sync_playwright

from browser import launch
from dashboard_helpers import ARTIFACTS, server_process, sql, watched_page
from desim.cli import main

pytestmark = pytest.mark.browser
READY = "#study-title[data-ready]"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    studies_dir = tmp_path_factory.mktemp("s46dash") / "studies"
    assert main(["new", "sir", "--template", "sir", "--dir", str(studies_dir)]) == 0
    study = studies_dir / "sir"
    assert main(["run", str(study), "-q"]) == 0
    # a run killed mid-way (SIGKILL at step 6): its row still says running, its process is gone
    import subprocess
    import sys
    from probe_study import write_probe_study
    killed = write_probe_study(studies_dir / "killed", n_agents=5, n_steps=10,
                               decision_args={"mode": "sigkill_once", "fail_step": 6})
    assert subprocess.run([sys.executable, "-m", "desim.cli", "run", str(killed)], capture_output=True).returncode == -9
    ARTIFACTS.mkdir(exist_ok=True)
    with server_process(studies_dir) as url:
        with sync_playwright() as pw:
            browser = launch(pw)
            yield {"url": url, "browser": browser, "study": study, "killed": killed}
            browser.close()


@pytest.fixture
def page(site):
    yield from watched_page(site["browser"])


def test_a_run_that_ended_early_fills_its_charts_and_a_metric_that_never_changes_is_named_not_drawn(site, page):
    study = site["study"]
    (last, n_steps, reason), = sql(study, "SELECT last_step, n_steps, end_reason FROM runs")
    assert reason and last < n_steps / 2            # stop_when ended it well before its cap
    shown = json.loads((study / "study.json").read_text())["display_metrics"]
    page.goto(f"{site['url']}/#/study/sir")
    page.wait_for_selector(READY)
    page.wait_for_selector("#state-charts figure.chart canvas")
    drawn = page.eval_on_selector_all("#metric-charts figure.chart", "fs => fs.map(f => [f.dataset.metric, f.dataset.xmax])")
    names = [m for m, _ in drawn]
    assert names[:len(shown)] == shown
    assert {x for _, x in drawn} == {str(last)}
    assert page.get_attribute("#state-charts figure.chart", "data-xmax") == str(last)
    assert page.get_attribute("#timeline", "data-xmax") == str(last)
    # the metrics that never change, and only those, are named instead of drawn
    flat = {n for (n,) in sql(study, "SELECT name FROM metrics GROUP BY name HAVING min(value) = max(value)")}
    assert flat == {"new_S"}
    assert "new_S" not in names and set(names) | flat == {n for (n,) in sql(study, "SELECT DISTINCT name FROM metrics")}
    assert page.get_attribute("#metric-charts .flat-metrics", "data-metrics") == "new_S"
    assert "new_S = 0" in page.inner_text("#metric-charts .flat-metrics")
    page.screenshot(path=str(ARTIFACTS / "dashboard_s46_ended_early.png"), full_page=True)


def test_the_player_s_legend_never_rounds_agents_away(site, page, tmp_path):
    """1 infectious agent of 2,500 is "<0.1 %" beside its count in the offline player (the dashboard's network
    card draws with the same script), not "0.0 %"; the 2,499 others ">99.9 %", not "100.0 %"."""
    import desim
    from desim.report import network_picture
    from diffusion_studies import write_study
    root = write_study(tmp_path / "one_seed", "SIR", {"beta": 0.15, "gamma": 0.2}, env={"seeds": 1}, n_steps=2,
                       population={"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": 2500}},
                                   "interaction": {"kind": "barabasi_albert", "m": 2}, "propagation": "network"})
    desim.run_study(desim.load_study(root))
    html = network_picture.diffusion_player(root, "state", view="communities")["html"]
    page.goto(html.as_uri())
    page.wait_for_selector('#desim-net[data-drawn^="communities:0"]')
    counts = dict(page.eval_on_selector_all(".dn-legend [data-category]",
                                            "els => els.map(e => [e.dataset.category, e.querySelector('.dn-count').textContent])"))
    assert counts["I"] == "1 (<0.1 %)" and counts["S"] == "2,499 (>99.9 %)" and counts["R"] == "0 (0 %)"


def test_a_killed_run_is_called_stale_as_desim_runs_calls_it(site, page, capsys):
    """The dashboard's badge said "interrupted" for a run killed with SIGKILL, `desim runs` "stale" and the
    docs "stalled"; "interrupted" is a clean stop at a step's end, which this was not. One name: stale."""
    assert main(["runs", str(site["killed"])]) == 0
    assert " stale " in capsys.readouterr().out
    page.goto(f"{site['url']}/#/study/killed")
    page.wait_for_selector(READY)
    badge = page.locator("#runs-tree li .badge").first
    assert badge.inner_text() == "stale" and badge.get_attribute("data-status") == "stale"
