"""The dashboard's runs list says what each LLM run paid for and how many of its decisions fell back to the
study's rule: a run against a server answering nothing ends 'completed' with every decision the rule's, and
the dashboard showed it as a plain success (no LLM figure at all). Real runs, the real server, Chromium."""
from __future__ import annotations

import json
import os

import pytest
from playwright.sync_api import sync_playwright

import desim
from browser import launch
from dashboard_helpers import ARTIFACTS, copy_study, server_process, sql, watched_page
from llm_servers import dead_url

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    studies_dir = tmp_path_factory.mktemp("dashllm") / "studies"
    studies_dir.mkdir()
    copy_study(studies_dir, "opinion_diffusion", "opinion_diffusion")
    root = copy_study(studies_dir, "opinion_diffusion_llm", "opinion_diffusion_llm")
    path = root / "simulation" / "simulation.json"
    sim = json.loads(path.read_text())
    sim["llm"].update(max_retries=0, on_unavailable="fallback")
    path.write_text(json.dumps(sim))
    scripted = desim.run_study(desim.load_study(root, steps=2)).run_id
    os.environ["DESIM_LLM_BASE_URL"] = dead_url()
    try:
        fell_back = desim.run_study(desim.load_study(root, steps=2, params={"llm_kind": "openai"}))
    finally:
        del os.environ["DESIM_LLM_BASE_URL"]
    assert fell_back.status == "completed"
    ARTIFACTS.mkdir(exist_ok=True)
    with server_process(studies_dir) as url:
        with sync_playwright() as pw:
            browser = launch(pw)
            yield {"url": url, "browser": browser, "root": root, "scripted": scripted, "fell_back": fell_back.run_id}
            browser.close()


def test_each_llm_run_says_its_cost_and_a_run_mostly_fallen_back_is_marked(site):
    root = site["root"]
    decisions = sql(root, "SELECT count(*) FROM llm_calls WHERE run_id = ?", [site["fell_back"]])[0][0]
    assert decisions == 12 * 2 * 3
    for pg in watched_page(site["browser"]):
        pg.goto(site["url"] + "/#/study/opinion_diffusion_llm")
        pg.wait_for_selector("#study-title[data-ready]")
        warned = pg.locator(f'li[data-run="{site["fell_back"]}"] .run-llm')
        assert "run-llm-warn" in warned.get_attribute("class")
        assert warned.inner_text() == (f"LLM: 0 paid calls (tokens 0 in, 0 out), {decisions} of {decisions} "
                                       "decisions fell back to the rule (100 %)")
        calm = pg.locator(f'li[data-run="{site["scripted"]}"] .run-llm')
        assert "run-llm-warn" not in calm.get_attribute("class")
        assert calm.inner_text() == (f"LLM: 0 paid calls (tokens 0 in, 0 out), {decisions} scripted, 0 of "
                                     f"{decisions} decisions fell back to the rule")
        pg.locator("#runs-tree").screenshot(path=str(ARTIFACTS / "dashboard_llm_runs.png"))
