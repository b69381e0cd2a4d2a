"""The dashboard API's statuses for studies and stores that cannot be read, over a real uvicorn server on
loopback (docs/dashboard.md, API): a study whose files do not validate is a 200 page carrying its `error`
(the page draws it as a card); a study with no store is a 404 for the routes that read one; a store file
that is there but cannot be read is a 422, whether it is not a DuckDB database at all (it was a 404, "not
found", for a file that is found) or a truncated one."""
from __future__ import annotations

import json

import httpx
import pytest

from dashboard_helpers import copy_study, server_thread
from desim.experiments.runs import run_study
from desim.study.files import load_study
from waits import HANG_S

NOT_A_DB = "notdb/runs/desim.duckdb cannot be opened: it is not a DuckDB database"


def small_run(studies_dir, name: str) -> tuple:
    study = copy_study(studies_dir, "opinion_diffusion", name)
    sim_path = study / "simulation" / "simulation.json"
    sim = json.loads(sim_path.read_text())
    sim["parameters"]["n_agents"] = 12
    sim_path.write_text(json.dumps(sim))
    return study, run_study(load_study(study, steps=2)).run_id


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    studies_dir = tmp_path_factory.mktemp("statuses") / "studies"
    studies_dir.mkdir()
    runs = {}
    badkey, runs["badkey"] = small_run(studies_dir, "badkey")
    meta = json.loads((badkey / "study.json").read_text())
    meta["titel"] = "a misspelt key"
    (badkey / "study.json").write_text(json.dumps(meta))
    notdb, runs["notdb"] = small_run(studies_dir, "notdb")
    (notdb / "runs" / "desim.duckdb").write_bytes(b"this is not a duckdb file" * 100)
    trunc, runs["trunc"] = small_run(studies_dir, "trunc")
    db = trunc / "runs" / "desim.duckdb"
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 3])
    copy_study(studies_dir, "opinion_diffusion", "norun")
    with server_thread(studies_dir) as url:
        with httpx.Client(base_url=url, timeout=HANG_S) as client:
            yield {"client": client, "dir": studies_dir, "runs": runs}


def test_a_study_whose_files_do_not_validate_is_a_page_with_its_error(site):
    res = site["client"].get("/api/studies/badkey")
    assert res.status_code == 200, res.text
    assert "badkey/study.json: titel: unknown key" in res.json()["error"]
    listing = {s["id"]: s for s in site["client"].get("/api/studies").json()["studies"]}
    assert "titel: unknown key" in listing["badkey"]["error"]
    # its stored runs are still read from the store
    rid = site["runs"]["badkey"]
    res = site["client"].get("/api/studies/badkey/metrics", params={"run": rid})
    assert res.status_code == 200 and res.json()["series"][rid], res.text


@pytest.mark.parametrize("route, run", [("panel", "abc"), ("metrics", "abc"), ("panel", "recorded"),
                                        ("metrics", "recorded"), ("events", "recorded"), ("messages", "recorded")])
def test_a_store_that_is_not_a_duckdb_file_is_a_422(site, route, run):
    """Each answer waits for the two reads again that any store failing a read gets (0.7 s in all)."""
    params = {"run": site["runs"]["notdb"] if run == "recorded" else run}
    if route == "messages":
        params["step"] = 1
    res = site["client"].get(f"/api/studies/notdb/{route}", params=params)
    assert res.status_code == 422 and res.json() == {"error": NOT_A_DB}, res.text
    assert str(site["dir"]) not in res.text


def test_a_version_diff_on_a_store_that_is_not_a_duckdb_file_is_a_422(site):
    res = site["client"].get("/api/studies/notdb/versions/vabc/diff")
    assert res.status_code == 422 and "notdb/runs/desim.duckdb cannot be opened" in res.json()["error"], res.text
    assert str(site["dir"]) not in res.text


def test_the_study_page_of_an_unreadable_store_is_whole_with_its_store_error(site):
    for sid, said in (("notdb", NOT_A_DB), ("trunc", "trunc/runs/desim.duckdb cannot be read")):
        res = site["client"].get(f"/api/studies/{sid}")
        assert res.status_code == 200 and said in res.json()["store_error"], res.text
        assert res.json()["error"] is None and res.json()["population"]


def test_a_truncated_store_is_a_422_too(site):
    rid = site["runs"]["trunc"]
    for route in ("metrics", "panel"):
        res = site["client"].get(f"/api/studies/trunc/{route}", params={"run": rid})
        assert res.status_code == 422 and "trunc/runs/desim.duckdb cannot be read" in res.json()["error"], res.text


def test_no_store_and_no_study_are_404s(site):
    res = site["client"].get("/api/studies/norun/panel", params={"run": "abc"})
    assert res.status_code == 404 and "does not exist" in res.json()["error"], res.text
    assert site["client"].get("/api/studies/norun/versions/vabc/diff").status_code == 404
    assert site["client"].get("/api/studies/nothere").status_code == 404
    res = site["client"].get("/api/studies/badkey/panel", params={"run": "abc"})
    assert res.status_code == 404 and "no run 'abc'" in res.json()["error"], res.text
