"""The dashboard over awkward studies folders, through ``desim dashboard`` on loopback: a folder or a store the
server may not read, folder names outside ``[A-Za-z0-9_-]`` (a Finder copy's space, accents, Chinese, emoji,
quotes, '%', '#'), a study whose newest runs are a sweep's, and a study folder given in place of a folder of
studies.

The server runs as its own process so that, when the tests run as root (who reads everything), it can run
without the capability that lets root ignore permissions (``setpriv``), as a user's dashboard would."""
from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
import pytest

from desim import load_study, run_study
from desim.dashboard.app import file_url
from desim.experiments.sweep import run_sweep
from storeq import sql
from walk_study import write_walk_study
from waits import HANG_S

# capabilities that let root read and write whatever the permissions say (ro.sh of the reviewers' notes)
AS_A_USER = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner",
             "--inh-caps", "-dac_override,-dac_read_search,-fowner"]
ODD_RUN = "sp ace é 中文 🎉 50%"                                    # a study with a run, under an awkward name
ODD_NAMES = ["opinion_diffusion copy", "café", "中文研究", "🎉 party", "it's \"quoted\"", "100% sure",
             "a#b?c&d=e"]


def walk(studies_dir: Path, folder: str) -> Path:
    """A small random-walk study in ``studies_dir/folder`` (its ``id`` in study.json is a plain one)."""
    root = write_walk_study(studies_dir / folder, n_steps=3)
    meta = json.loads((root / "study.json").read_text())
    meta["id"] = "walk"
    (root / "study.json").write_text(json.dumps(meta))
    return root


@contextmanager
def dashboard(folder: Path):
    """``desim dashboard <folder> --port 0`` as a process that cannot ignore permissions; yields its URL, read
    from the line it prints once it accepts connections."""
    prefix = AS_A_USER if os.geteuid() == 0 else []
    log = folder.parent / f"{folder.name}-dashboard.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(prefix + [sys.executable, "-m", "desim.cli", "dashboard", str(folder), "--port", "0",
                                          "--nice", "0"],
                                stdout=subprocess.PIPE, stderr=err, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = proc.stdout.readline()
        assert "http://" in line, f"desim dashboard did not start: {line}{log.read_text()}"
        yield line.split()[3].rstrip("/")
    finally:
        proc.terminate()
        proc.wait(HANG_S)


def raw_get(url: str, path: str) -> tuple[int, bytes]:
    """A GET that sends ``path`` byte for byte (httpx would normalise ``..``)."""
    parts = urlsplit(url)
    con = http.client.HTTPConnection(parts.hostname, parts.port, timeout=HANG_S)
    try:
        con.putrequest("GET", path, skip_accept_encoding=True)
        con.endheaders()
        res = con.getresponse()
        return res.status, res.read()
    finally:
        con.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    base = tmp_path_factory.mktemp("awkward")
    studies = base / "studies"
    good = walk(studies, "good")
    mine = run_study(load_study(good)).run_id                   # made by hand, then a sweep's runs after it
    run_sweep(good, {"pause": [0.0]}, replicates=2, workers=1)
    odd = walk(studies, ODD_RUN)
    odd_run = run_study(load_study(odd)).run_id
    for name in ODD_NAMES:
        walk(studies, name)
    noperm = walk(studies, "noperm")                            # a colleague's private folder
    storenoperm = walk(studies, "storenoperm")                  # a store the server may not read
    run_study(load_study(storenoperm))
    dirstore = walk(studies, "dirstore")                        # a folder where the store should be
    (dirstore / "runs" / "desim.duckdb").mkdir(parents=True)
    latin = os.fsencode(studies) + b"/caf\xe9"                  # a name that is not UTF-8 (Latin-1)
    os.mkdir(latin)
    Path(os.fsdecode(latin + b"/study.json")).write_text("{}")
    walk(base, "outside")                                       # a study beside the studies folder
    os.chmod(noperm, 0)
    os.chmod(storenoperm / "runs" / "desim.duckdb", 0)
    try:
        with dashboard(studies) as url, httpx.Client(base_url=url, timeout=HANG_S) as client:
            yield {"url": url, "client": client, "dir": studies, "good": good, "mine": mine, "odd": odd,
                   "odd_run": odd_run}
    finally:
        os.chmod(noperm, 0o755)
        os.chmod(storenoperm / "runs" / "desim.duckdb", 0o644)


def study_url(name: str, rest: str = "") -> str:
    """A study's API URL as the page builds it: JavaScript's encodeURIComponent leaves letters, digits and
    ``-_.!~*'()`` as they are and escapes the rest as UTF-8."""
    return "/api/studies/" + quote(name, safe="!*'()") + rest


def test_an_unreadable_folder_or_store_leaves_the_other_studies_listed(site):
    res = site["client"].get("/api/studies")
    assert res.status_code == 200, res.text
    by_id = {s["id"]: s for s in res.json()["studies"]}
    assert not any(str(site["dir"]) in (s["error"] or "") for s in by_id.values())   # no absolute path in a card
    assert by_id["good"]["error"] is None and by_id["good"]["status"] == "completed"
    assert by_id["noperm"]["status"] == "unreadable"
    assert by_id["noperm"]["error"].startswith("noperm/study.json: cannot be read (Permission denied)")
    # the store's own words may change (desim.store says them): the file, relative, and why
    assert "storenoperm/runs/desim.duckdb" in by_id["storenoperm"]["error"]
    assert "permission denied" in by_id["storenoperm"]["error"].lower()
    assert "dirstore/runs/desim.duckdb" in by_id["dirstore"]["error"] and "folder" in by_id["dirstore"]["error"]
    assert site["client"].get("/api/live").status_code == 200       # the list's polling goes on


def test_an_unreadable_study_answers_a_json_error(site):
    page = site["client"].get("/api/studies/noperm")
    assert page.status_code == 422
    assert page.json()["error"].startswith("noperm/study.json: cannot be read (Permission denied)")
    assert str(site["dir"]) not in page.text
    assert site["client"].get("/api/studies/noperm/live").status_code == 422
    store = site["client"].get("/api/studies/storenoperm")              # the study is readable, its store is not
    assert store.status_code == 200 and store.json()["error"] is None
    assert "storenoperm/runs/desim.duckdb" in store.json()["store_error"]
    assert "permission denied" in store.json()["store_error"].lower() and str(site["dir"]) not in store.text
    metrics = site["client"].get("/api/studies/storenoperm/metrics", params={"run": "r1"})
    assert metrics.status_code == 422 and "permission denied" in metrics.json()["error"].lower()
    assert str(site["dir"]) not in metrics.text


def test_every_study_the_list_shows_opens(site):
    client = site["client"]
    listed = {s["id"]: s for s in client.get("/api/studies").json()["studies"]}
    assert set(ODD_NAMES) | {ODD_RUN} <= set(listed)
    for name in ODD_NAMES + [ODD_RUN]:
        assert listed[name]["error"] is None, listed[name]
        status, _ = raw_get(site["url"], study_url(name))               # sent as written, not re-encoded
        assert status == 200, (name, status)
        page = client.get(study_url(name))
        assert page.status_code == 200, (name, page.text)
        assert page.json()["id"] == name and page.json()["error"] is None
        assert page.json()["study"]["title"] == "walk"
        assert client.get(study_url(name, "/live")).status_code == 200
        status, body = raw_get(site["url"], file_url(site["dir"] / name, site["dir"] / name / "study.json"))
        assert status == 200 and json.loads(body)["id"] == "walk", (name, status, body[:200])
    # the runs of a study under such a name read as any other's
    rid = site["odd_run"]
    assert listed[ODD_RUN]["last_run"]["run_id"] == rid
    series = client.get(study_url(ODD_RUN, "/metrics"), params={"run": rid}).json()["series"][rid]
    rows = sql(site["odd"], "SELECT step, value FROM metrics WHERE run_id = ? AND name = 'mean_x' ORDER BY step", [rid])
    assert [tuple(p) for p in series["mean_x"]] == rows


def test_a_name_the_page_cannot_send_back_is_an_error_card(site):
    listed = {s["id"]: s for s in site["client"].get("/api/studies").json()["studies"]}
    assert listed["caf\ufffd"]["error"] == ("caf\ufffd: the folder name is not UTF-8, which the dashboard cannot "
                                           "serve; rename the folder")


@pytest.mark.parametrize("path", [
    "/api/studies/..",
    "/api/studies/%2e%2e",
    "/api/studies/..%2foutside",
    "/api/studies/%2e%2e%2foutside",
    "/api/studies/%252e%252e%252foutside",
    "/api/studies/%2Ftmp",
    "/api/studies/a%00b",
    "/api/studies/%25",
    "/api/studies/..%5coutside",
    "/files/..%2foutside/study.json",
    "/files/%2e%2e/outside/study.json",
    "/files/good/..%2f..%2foutside%2fstudy.json",
    "/files/good/%252e%252e/study.json",
])
def test_a_name_that_could_leave_the_studies_folder_is_refused(site, path):
    status, body = raw_get(site["url"], path)
    assert status in (400, 404), (status, body[:200])
    assert b'"walk"' not in body and b'"id"' not in body


def test_the_last_run_is_latest_run_of_sql_not_a_sweeps(site):
    good = site["good"]
    newest = sql(good, "SELECT run_id FROM runs ORDER BY started_at DESC, run_id DESC LIMIT 1")[0][0]
    assert sql(good, "SELECT sweep_id FROM runs WHERE run_id = ?", [newest])[0][0] is not None
    (latest,) = sql(good, "SELECT latest_run()")[0]
    assert latest == site["mine"]
    listed = {s["id"]: s for s in site["client"].get("/api/studies").json()["studies"]}
    assert listed["good"]["last_run"]["run_id"] == latest
    page = site["client"].get("/api/studies/good").json()
    assert page["store"]["population"]["run_id"] == latest and page["store"]["events_run"] == latest


def test_a_study_folder_given_in_place_of_a_folder_of_studies_is_served(site):
    with dashboard(site["good"]) as url, httpx.Client(base_url=url, timeout=HANG_S) as client:
        body = client.get("/api/studies").json()
        assert [s["id"] for s in body["studies"]] == ["good"]
        assert body["studies"][0]["last_run"]["run_id"] == site["mine"]
        page = client.get("/api/studies/good")
        assert page.status_code == 200 and page.json()["error"] is None
        assert client.get("/api/studies/noperm").status_code == 404        # its siblings are not served
        assert client.get("/api/live").json() == {"live": {"good": []}}


def test_a_file_the_server_cannot_write_is_said_to_be_unwritable_not_unreadable(tmp_path):
    """The report's player written into a read-only study: the folder reads fine; the write is what failed."""
    from desim.dashboard import data
    error = PermissionError(13, "Permission denied", str(tmp_path / "s" / "runs" / "reports"))
    said = data.unreadable(error, tmp_path, "written")
    assert said.startswith("s/runs/reports: cannot be written (Permission denied)") and "read-only" in said
    assert data.unreadable(error, tmp_path).startswith("s/runs/reports: cannot be read (Permission denied)")
