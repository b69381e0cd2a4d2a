"""Two rough edges of the dashboard's study page, over a real ``desim dashboard`` in Chromium:

- a version's changes are said once, under its first run, not under every run of the version;
- the population card's histograms say how many agents have no value for an attribute (a roster's
  empty cells), which the bars leave out.

Every wait is on something the page signals (``#study-title[data-ready]``)."""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import sync_playwright

from browser import launch
from dashboard_helpers import ARTIFACTS, copy_study, server_process, sql, watched_page
from desim.cli import main
from desim.dashboard.data import distributions

READY = "#study-title[data-ready]"
# a roster of 12 people: age empty for 3 of them, region for 1, opinion and media_trust for none
ROSTER = ["agent_id,opinion,media_trust,age,region"] + [
    f"p{i:02d},{0.1 + 0.05 * i:.2f},0.5,{'' if i in (2, 5, 9) else 20 + i},{'' if i == 7 else 'NSEW'[i % 4]}"
    for i in range(12)]


def test_distributions_count_the_agents_with_no_value():
    states = [{"age": 30, "region": "N"}, {"age": None, "region": "S"}, {"region": None}, {"age": 50, "region": "N"}]
    by_name = {d["name"]: d for d in distributions(states)}
    assert (by_name["age"]["kind"], by_name["age"]["n"], by_name["age"]["missing"]) == ("categorical", 2, 2)
    assert (by_name["region"]["kind"], by_name["region"]["n"], by_name["region"]["missing"]) == ("categorical", 3, 1)
    assert distributions([{"x": None}, {"x": None}]) == [{"name": "x", "kind": "empty", "n": 0, "missing": 2}]


def test_whole_numbers_get_a_bar_per_value_or_bins_of_as_many_values():
    """Schelling's x on 0..49, one agent per value: every bin holds as many values, so every bar is as tall
    (12 equal bins held 4 or 5 values, and the edge bars stood 25 % taller); a 0/1 type is two bars."""
    states = [{"x": x, "type": x % 2, "share": x / 49} for x in range(50) for _ in range(4)]
    by_name = {d["name"]: d for d in distributions(states)}
    assert by_name["x"]["kind"] == "numeric" and len(set(by_name["x"]["counts"])) == 1
    assert sum(by_name["x"]["counts"]) == 200 and (by_name["x"]["min"], by_name["x"]["max"]) == (0, 49)
    assert by_name["type"]["kind"] == "categorical"
    assert by_name["type"]["values"] == [{"value": "0", "count": 100}, {"value": "1", "count": 100}]
    assert by_name["share"]["kind"] == "numeric" and len(by_name["share"]["counts"]) == 12


ROSTER_MODEL = '''

class RosterEnvironment(OpinionEnvironment):
    """Each agent's state carries its roster attributes as read (an empty cell is None)."""

    def reset(self, seed):
        super().reset(seed)
        self.attributes = {p.agent_id: dict(p.attributes) for p in self.ctx.personas}

    def agent_state(self, agent_id):
        return {**self.attributes[agent_id], **super().agent_state(agent_id)}
'''


def roster_study(studies_dir):
    """``opinion_diffusion`` on a ring of the 12 people of ``ROSTER``, their attributes in their states: run
    once, then its model edited (a new version) and run twice more."""
    study = copy_study(studies_dir, "opinion_diffusion", "roster")
    with open(study / "model.py", "a") as model:
        model.write(ROSTER_MODEL)
    env_path = study / "environment" / "environment.json"
    env = json.loads(env_path.read_text())
    env["provider"]["ref"] = "model:RosterEnvironment"
    env_path.write_text(json.dumps(env, indent=2))
    pop_path = study / "population" / "population.json"
    pop = json.loads(pop_path.read_text())
    del pop["provider"]
    pop.update(roster="people.csv", interaction={"kind": "ring", "k": 2})
    pop_path.write_text(json.dumps(pop))
    (study / "population" / "people.csv").write_text("\n".join(ROSTER) + "\n")
    assert main(["run", str(study), "--steps", "3", "--quiet"]) == 0
    with open(study / "model.py", "a") as model:
        model.write("\n\nEDITED = True   # a new version of the study's code\n")
    for seed in ("2", "3"):
        assert main(["run", str(study), "--steps", "3", "--seed", seed, "--quiet"]) == 0
    return study


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    studies_dir = tmp_path_factory.mktemp("rough") / "studies"
    studies_dir.mkdir()
    study = roster_study(studies_dir)
    ARTIFACTS.mkdir(exist_ok=True)
    with server_process(studies_dir) as url:
        with sync_playwright() as pw:
            browser = launch(pw)
            yield {"url": url, "browser": browser, "study": study}
            browser.close()


@pytest.fixture
def page(site):
    yield from watched_page(site["browser"])


def test_a_version_s_changes_are_said_once_under_its_first_run(site, page):
    runs = sql(site["study"], "SELECT run_id, version_id FROM runs ORDER BY started_at")
    assert len(runs) == 3 and runs[0][1] != runs[1][1] == runs[2][1]     # v1, then v2 twice
    page.goto(site["url"] + "/#/study/roster")
    page.wait_for_selector(READY)
    page.screenshot(path=str(ARTIFACTS / "rough_edges_runs_versions.png"), full_page=True)
    diffs = page.query_selector_all("#runs-tree .version-diff")
    assert [d.get_attribute("data-version") for d in diffs] == [runs[1][1]]
    # under the version's first run, and its text names what changed
    first = f'#runs-tree li[data-run="{runs[1][0]}"] > .version-diff'
    assert page.inner_text(first).startswith(f"version {runs[1][1]} changed: ") and "model.py" in page.inner_text(first)
    assert page.query_selector(f'#runs-tree li[data-run="{runs[2][0]}"] .version-diff') is None


def test_the_histograms_say_how_many_agents_have_no_value(site, page):
    page.goto(site["url"] + "/#/study/roster")
    page.wait_for_selector(READY)
    card = page.query_selector("#population-card")
    card.screenshot(path=str(ARTIFACTS / "rough_edges_population_missing.png"))
    said = {a: page.query_selector(f'#population-card svg.dist[data-attr="{a}"]') for a in
            ("age", "region", "opinion", "media_trust")}
    assert said["age"].get_attribute("data-missing") == "3"
    assert said["age"].query_selector(".dist-missing").text_content().endswith("3 missing")   # after its title
    assert said["age"].query_selector(".dist-missing title").text_content() == "3 of 12 agents have no age"
    assert said["region"].query_selector(".dist-missing").text_content().endswith("1 missing")
    for complete in ("opinion", "media_trust"):
        assert said[complete].query_selector(".dist-missing") is None
    # the note stays inside its picture, clear of the attribute's name
    box, name, note = (page.evaluate("(el) => { const b = el.getBoundingClientRect(); return [b.left, b.right]; }", x)
                       for x in (said["age"], said["age"].query_selector(".chart-title"),
                                 said["age"].query_selector(".dist-missing")))
    assert box[0] <= note[0] and note[1] <= box[1] + 0.5 and name[1] < note[0]
