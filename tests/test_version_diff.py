"""A version keeps the texts of its study's files, so `desim diff` shows what changed between two versions:
the files' settings and a unified diff of the code and data, not only their hashes."""
from __future__ import annotations

import duckdb
import pytest

import desim
from desim.cli import main
from storeq import store_path


@pytest.fixture
def edited(study_copy):
    """opinion_diffusion run, then its model.py edited and a data file added, and run again."""
    root = study_copy("opinion_diffusion")
    first = desim.run_study(desim.load_study(root, steps=1)).run_id
    model = root / "model.py"
    text = model.read_text()
    model.write_text(text.replace("class ", "# the confidence bound is read once\nclass ", 1))
    (root / "weights.txt").write_text("0.5\n0.25\n")
    second = desim.run_study(desim.load_study(root, steps=1, params={"n_agents": 40})).run_id
    return root, first, second


def test_diff_shows_the_code_and_data_that_changed_as_a_unified_diff(edited, capsys):
    root, first, second = edited
    assert main(["diff", str(root), second]) == 0
    out = capsys.readouterr().out.splitlines()
    con = duckdb.connect(str(store_path(root)), read_only=True)
    v1, v2 = (con.execute("SELECT version_id FROM runs WHERE run_id = ?", [r]).fetchone()[0] for r in (first, second))
    con.close()
    assert out[0] == f"version {v2} since {v1} (each change as {v1}'s -> {v2}'s)"
    assert "model.py (edited)" in out and f"--- {v1}/model.py" in out and f"+++ {v2}/model.py" in out
    assert "+# the confidence bound is read once" in out
    assert "weights.txt (added)" in out and "+0.25" in out
    # the same by version ids, and the other way round
    assert main(["diff", str(root), v1, v2]) == 0
    back = capsys.readouterr().out
    assert "-# the confidence bound is read once" in back and "weights.txt (removed)" in back


def test_diff_says_why_it_cannot_show_a_text(edited, capsys):
    root, first, second = edited
    con = duckdb.connect(str(store_path(root)))
    con.execute("DROP TABLE code_texts")           # a store written before texts were kept
    con.close()
    assert main(["diff", str(root), second]) == 0
    out = capsys.readouterr().out
    assert "model.py (edited): its text was not kept" in out and "hashes " in out
    # the next run of a version recorded without texts keeps them (its files still have its hashes)
    desim.run_study(desim.load_study(root, steps=1))
    assert main(["diff", str(root), second]) == 0
    out = capsys.readouterr().out
    assert "model.py (edited): its text was not kept" in out        # the older version's is gone for good
    assert "weights.txt (added)" in out and "+0.25" in out           # the newer's is back


def test_diff_refuses_what_it_cannot_compare(edited, capsys):
    root, first, second = edited
    assert main(["diff", str(root), "r404"]) == 2
    assert "'r404' is neither a run nor a version" in capsys.readouterr().err
    assert main(["diff", str(root), first]) == 2
    assert "is the study's first: give the version or run to compare it with" in capsys.readouterr().err


def _versions(root, first, second):
    con = duckdb.connect(str(store_path(root)), read_only=True)
    try:
        return [con.execute("SELECT version_id FROM runs WHERE run_id = ?", [r]).fetchone()[0] for r in (first, second)]
    finally:
        con.close()


def test_the_dashboard_serves_a_versions_diff(edited):
    """/api/studies/<id>/versions/<version>/diff: the settings changed and each file's unified diff; an
    unknown version is a 404 and a malformed one a 400."""
    import httpx

    from dashboard_helpers import server_thread
    from waits import HANG_S
    root, first, second = edited
    v1, v2 = _versions(root, first, second)
    with server_thread(root.parent) as url, httpx.Client(base_url=url, timeout=HANG_S) as client:
        body = client.get(f"/api/studies/{root.name}/versions/{v2}/diff").json()
        missing = client.get(f"/api/studies/{root.name}/versions/v0000dead/diff")
        bad = client.get(f"/api/studies/{root.name}/versions/x'y/diff")
    assert (body["older"], body["newer"]) == (v1, v2)
    assert {"path": "parameters.n_agents", "old": 500, "new": 40} not in body["config"]     # --set is the run's
    files = {f["path"]: f for f in body["files"]}
    assert set(files) == {"model.py", "weights.txt"} and files["weights.txt"]["change"] == "added"
    assert "+# the confidence bound is read once\n" in files["model.py"]["diff"]
    assert missing.status_code == 404 and "neither a run nor a version" in missing.json()["error"]
    assert bad.status_code == 400


@pytest.mark.browser
def test_the_runs_tree_opens_a_versions_diff(edited):
    from playwright.sync_api import sync_playwright

    from browser import launch
    from dashboard_helpers import server_thread, watched_page
    root, first, second = edited
    v1, v2 = _versions(root, first, second)
    with server_thread(root.parent) as url, sync_playwright() as pw:
        browser = launch(pw)
        try:
            pages = watched_page(browser)
            page = next(pages)
            page.goto(url + f"/#/study/{root.name}")
            box = f'details.version-diff[data-version="{v2}"]'
            page.click(f"{box} summary")
            page.wait_for_selector(f'{box} .version-files[data-state="shown"]')
            added = page.locator(f'{box} .version-file[data-path="model.py"] pre.diff span.add').all_inner_texts()
            assert added == ["+# the confidence bound is read once"]
            assert page.locator(f'{box} .version-file[data-path="weights.txt"] strong').inner_text() == \
                "weights.txt (added)"
            assert f"against its parent version {v1}" in page.locator(box).inner_text()
            next(pages, None)                   # the page's teardown: no JavaScript error
        finally:
            browser.close()


def test_an_added_or_changed_event_is_named_not_both_lists_printed(study_copy, capsys):
    """An event added to environment.json: `desim diff` names it, a changed one its field; `desim runs` shows
    the branch's changes beside it, and a sweep's runs their values of the grid, the study's own one too."""
    import json
    from desim.experiments.sweep import run_sweep
    root = study_copy("opinion_diffusion")
    parent = desim.run_study(desim.load_study(root, steps=4)).run_id
    env_file = root / "environment" / "environment.json"
    env = json.loads(env_file.read_text())
    first = env["scheduled_events"][0]["name"]
    env["scheduled_events"].append({"at_step": 3, "name": "extra_push", "target": "campaign_position",
                                    "op": "set", "value": 0.2})
    env["scheduled_events"][0]["value"] = 0.75
    env_file.write_text(json.dumps(env))
    assert main(["branch", str(root), "--from-run", parent, "--at-step", "2", "-q"]) == 0
    capsys.readouterr()
    (child,) = [r["run_id"] for r in desim.open(root).runs().to_pylist() if r["kind"] == "branch"]
    assert main(["diff", str(root), child]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert ("  environment.scheduled_events: added 'extra_push' {\"at_step\": 3, \"op\": \"set\", "
            "\"target\": \"campaign_position\", \"value\": 0.2}") in lines
    assert f"  environment.scheduled_events[{first}].value: 0.9 -> 0.75" in lines
    assert len(lines) == 2
    assert main(["runs", str(root)]) == 0
    branch_line = next(line for line in capsys.readouterr().out.splitlines() if child in line)
    assert "changes: environment.scheduled_events: added 'extra_push'" in branch_line
    sweep = run_sweep(root, {"n_agents": [40, 500]}, replicates=1, workers=1, steps=1)   # 500: the study's own
    assert main(["runs", str(root)]) == 0
    out = capsys.readouterr().out
    for r in sweep.plan.runs:
        line = next(line for line in out.splitlines() if r.run_id in line)
        assert line.endswith(f"sweep {sweep.plan.sweep_id}: n_agents={r.combo['n_agents']}")


def test_after_an_edit_is_reverted_the_next_version_is_told_from_the_one_the_study_went_back_to(tmp_path):
    """The parent of a new version was the newest version made, so after a comment added and removed again, an
    edit of a parameter read 'model.py edited' too, and desim diff showed a change nobody made."""
    import json

    import desim
    from desim.store.catalogue import Catalogue
    from desim.store.connection import open_store
    from walk_study import write_walk_study
    root = write_walk_study(tmp_path / "walk", n_steps=2)
    model = root / "model.py"
    first = desim.run_study(desim.load_study(root)).run_id
    original = model.read_text()
    model.write_text(original + "# a comment\n")
    desim.run_study(desim.load_study(root))
    model.write_text(original)                                   # back to the first version
    back = desim.run_study(desim.load_study(root)).run_id
    sim = root / "simulation" / "simulation.json"
    config = json.loads(sim.read_text())
    config["parameters"]["base_drift"] = 0.5
    sim.write_text(json.dumps(config))
    edited = desim.run_study(desim.load_study(root)).run_id
    with open_store(root) as con:
        catalogue = Catalogue(con)
        start, new = (catalogue.run(r)["version_id"] for r in (first, edited))
        assert catalogue.run(back)["version_id"] == start
        version = catalogue.version(new)
        assert version["parent_version_id"] == start
        assert [d["path"] for d in json.loads(version["diff"])] == ["simulation.parameters.base_drift"]
        assert catalogue.run(edited)["parent_run_id"] == back       # the last run of the version it came from


def test_diff_of_a_branch_shows_the_values_it_set(study_copy, capsys):
    """A branch's --set changes no file: the versions alone said 'no change' of a branch that moved its
    campaign a week. The runs' values are compared, the branch's with its parent's."""
    root = study_copy("opinion_diffusion")
    parent = desim.run_study(desim.load_study(root, steps=4, params={"n_agents": 40})).run_id
    assert main(["branch", str(root), "--from-run", parent, "--at-step", "2", "--set", "campaign_week=3", "-q"]) == 0
    con = duckdb.connect(str(store_path(root)), read_only=True)
    (branch,) = con.execute("SELECT run_id FROM runs WHERE kind = 'branch'").fetchone()
    con.close()
    capsys.readouterr()
    for args in ([branch], [branch, parent]):
        assert main(["diff", str(root), *args]) == 0
        out = capsys.readouterr().out.splitlines()
        assert "  no change to the study's files" in out and "  campaign_week: 2 -> 3" in out, out
        assert not any("n_agents" in line for line in out)              # the same in both runs: not a change
    assert main(["diff", str(root), parent, branch]) == 0               # the other way round
    assert "  campaign_week: 3 -> 2" in capsys.readouterr().out.splitlines()


def test_a_new_version_descends_from_the_last_run_made_by_hand_not_a_sweep_s(tmp_path):
    """Edit the code after a run by hand and a sweep: the new version's first run named a sweep's (in the
    reviewer's case an effect's control) run as its parent, not the run the edit was made from."""
    from desim.experiments.sweep import run_sweep
    from desim.store.catalogue import Catalogue
    from desim.store.connection import open_store
    from walk_study import write_walk_study
    root = write_walk_study(tmp_path / "walk", n_steps=2)
    by_hand = desim.run_study(desim.load_study(root)).run_id
    swept = run_sweep(root, {}, replicates=2, workers=1)
    assert swept.completed == 2
    model = root / "model.py"
    model.write_text(model.read_text() + "# an edit\n")
    edited = desim.run_study(desim.load_study(root)).run_id
    with open_store(root) as con:
        assert Catalogue(con).run(edited)["parent_run_id"] == by_hand
