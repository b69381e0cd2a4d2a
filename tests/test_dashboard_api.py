"""The dashboard's JSON API over a real uvicorn server, real studies and real runs."""
from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import httpx
import pytest

from dashboard_helpers import (ODD_IDS, copy_study, make_studies, odd_ids_study, server_thread, sql, write_live_file,
                               write_lock)
from desim.study.files import load_study
from desim.experiments.runs import run_study
from waits import HANG_S


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    studies_dir = tmp_path_factory.mktemp("dash") / "studies"
    studies = make_studies(studies_dir)
    with server_thread(studies_dir) as url:
        with httpx.Client(base_url=url, timeout=HANG_S) as client:
            yield {"url": url, "client": client, "dir": studies_dir, **studies}


def runs_of(study):
    return [r[0] for r in sql(study, "SELECT run_id FROM runs ORDER BY started_at")]


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


def test_study_list_shows_status_and_error_cards(site):
    body = site["client"].get("/api/studies").json()
    by_id = {s["id"]: s for s in body["studies"]}
    assert {"opinion_diffusion", "broken", "norun"} <= set(by_id)
    good = by_id["opinion_diffusion"]
    latest = sql(site["good"], "SELECT run_id, status FROM runs ORDER BY started_at DESC LIMIT 1")[0]
    assert good["error"] is None and good["status"] == "completed"
    assert good["last_run"]["run_id"] == latest[0]
    assert "simulation/simulation.json" in by_id["broken"]["error"]
    assert "malformed JSON" in by_id["broken"]["error"]
    assert by_id["norun"]["error"] is None and by_id["norun"]["status"] is None     # never run: neutral


def test_broken_study_page_is_an_error_while_others_work(site):
    broken = site["client"].get("/api/studies/broken")
    assert broken.status_code == 200 and "simulation.json" in broken.json()["error"]
    norun = site["client"].get("/api/studies/norun").json()
    assert norun["error"] is None and "does not exist" in norun["store_error"]
    assert any("too_late" in w and "never fires" in w for w in norun["warnings"])
    assert norun["population"]["interaction"] == "watts_strogatz"
    good = site["client"].get("/api/studies/opinion_diffusion")
    assert good.status_code == 200 and good.json()["error"] is None
    assert site["client"].get("/api/studies/nothere").status_code == 404


def test_study_page_population_interventions_and_runs(site):
    st = site["client"].get("/api/studies/opinion_diffusion").json()
    good = site["good"]
    latest = sql(good, "SELECT run_id FROM runs WHERE status='completed' ORDER BY started_at DESC LIMIT 1")[0][0]
    n_agents = sql(good, "SELECT count(*) FROM initial_states WHERE run_id = ?", [latest])[0][0]
    card = st["population"]
    assert card["size"] == n_agents
    assert (card["interaction"], card["propagation"]) == ("watts_strogatz", "broadcast_then_local")
    assert card["n_edges"] == sql(good, "SELECT count(*) FROM edges WHERE run_id = ?", [latest])[0][0]
    opinion = next(d for d in card["distributions"] if d["name"] == "opinion")
    assert sum(opinion["counts"]) == n_agents
    lo, hi = sql(good, "SELECT min(CAST(state.opinion AS DOUBLE)), max(CAST(state.opinion AS DOUBLE)) "
                       "FROM initial_states WHERE run_id = ?", [latest])[0]
    assert opinion["min"] == pytest.approx(lo) and opinion["max"] == pytest.approx(hi)
    assert [e["name"] for e in st["interventions"]["scheduled_events"]] == ["campaign_starts"]
    assert [b["ttl"] for b in st["interventions"]["broadcasts"]] == [2]
    fired = sql(good, "SELECT step, name FROM events WHERE run_id = ? ORDER BY step, name", [latest])
    assert [(e["step"], e["name"]) for e in st["store"]["events"]] == fired
    assert [r["run_id"] for r in st["store"]["runs"]] == runs_of(good)
    assert all(r["status"] == "completed" for r in st["store"]["runs"])
    assert st["busy"] is False


def test_metrics_of_two_runs_match_sql(site):
    ids = runs_of(site["good"])
    body = site["client"].get("/api/studies/opinion_diffusion/metrics", params=[("run", i) for i in ids]).json()
    for rid in ids:
        rows = sql(site["good"], "SELECT name, step, value FROM metrics WHERE run_id = ? ORDER BY name, step", [rid])
        got = [(name, step, value) for name, pts in sorted(body["series"][rid].items()) for step, value in pts]
        assert got == rows
        assert body["sources"][rid] == "store"
    # the two seeds give different curves: overlaying them shows two lines
    assert body["series"][ids[0]]["mean_opinion"] != body["series"][ids[1]]["mean_opinion"]


def test_panel_filters_and_pages(site):
    rid = runs_of(site["good"])[0]
    get = lambda **q: site["client"].get("/api/studies/opinion_diffusion/panel", params={"run": rid, **q}).json()
    step3 = get(step=3, page_size=500)
    expected = sql(site["good"], "SELECT agent_id, state FROM panel WHERE run_id=? AND step=3 ORDER BY agent_id", [rid])
    assert step3["total"] == len(expected)
    assert [(r["agent_id"], r["state"]) for r in step3["rows"]] == [(a, s) for a, s in expected]
    one = get(agent_id="a03", page_size=500)
    assert [r["step"] for r in one["rows"]] == list(range(1, 13))
    assert get(action_kind="post")["total"] == sql(site["good"], "SELECT count(*) FROM panel WHERE run_id=? AND "
                                                                 "action_kind='post'", [rid])[0][0]
    assert get(action_kind="nothing")["total"] == 0
    p0, p1 = get(page=0, page_size=7), get(page=1, page_size=7)
    keys = sql(site["good"], "SELECT step, agent_id FROM panel WHERE run_id=? ORDER BY step, agent_id LIMIT 14", [rid])
    assert [(r["step"], r["agent_id"]) for r in p0["rows"] + p1["rows"]] == keys


def test_agent_trajectory_and_messages(site):
    rid = runs_of(site["good"])[1]
    a = site["client"].get("/api/studies/opinion_diffusion/agent", params={"run": rid, "agent_id": "a05"}).json()
    rows = sql(site["good"], "SELECT step, state, action_kind FROM panel WHERE run_id=? AND agent_id='a05' "
                             "ORDER BY step", [rid])
    assert [(s["step"], s["state"], s["action_kind"]) for s in a["steps"]] == [(t, s, k) for t, s, k in rows]
    assert a["initial"] == (sql(site["good"], "SELECT state FROM initial_states WHERE run_id=? AND "
                                                        "agent_id='a05'", [rid])[0][0])
    posted = sql(site["good"], "SELECT step, round FROM messages WHERE run_id=? AND author_id='a05' ORDER BY step", [rid])
    assert [(m["step"], m["round"]) for m in a["messages"]] == posted
    assert site["client"].get("/api/studies/opinion_diffusion/agent", params={"run": rid, "agent_id": "zz9"}
                              ).status_code == 404

    m = site["client"].get("/api/studies/opinion_diffusion/messages", params={"run": rid, "step": 4}).json()
    counts = sql(site["good"], "SELECT round, count(*) FROM messages WHERE run_id=? AND step=4 GROUP BY round "
                               "ORDER BY round", [rid])
    assert [(r["round"], r["count"], len(r["messages"])) for r in m["rounds"]] == [(r, c, c) for r, c in counts]


def test_network_view_data_over_every_agent(site):
    rid = runs_of(site["good"])[0]
    url = "/api/studies/opinion_diffusion/network"
    net = site["client"].get(url, params={"run": rid, "state": "opinion"}).json()
    n = sql(site["good"], "SELECT count(*) FROM initial_states WHERE run_id=?", [rid])[0][0]
    m = net["meta"]
    assert net["view"] == m["suggested"] == "network" and m["n_agents"] == n and len(net["node"]["ids"]) == n
    assert len(net["network"]["edges"]) // 2 == sql(site["good"], "SELECT count(*) FROM edges WHERE run_id=?", [rid])[0][0]
    assert m["steps"] == list(range(13)) and m["kind"] == "numeric" and m["categories"] == []
    at5 = dict(sql(site["good"], "SELECT agent_id, CAST(state.opinion AS DOUBLE) FROM panel WHERE run_id=? AND step=5", [rid]))
    assert m["means"][5] == pytest.approx(sum(at5.values()) / n)
    # the positions are the network's stored layout, written on this first request
    from desim.report.network_picture import read_network, stored_positions
    from desim.store import open_store
    files = sorted((site["good"] / "runs" / "layouts").glob("*.parquet"))
    assert files and net["network"]["layout"]["file"].startswith("runs/layouts/")
    with open_store(site["good"]) as con:
        xy, info = stored_positions(read_network(con, site["good"], rid))
    assert info["reused"] and net["network"]["x"] == pytest.approx(xy[:, 0].round(4).tolist())
    assert "captions" in net and "network" in net["captions"] and net["size_keys"]["network"]
    # another view of the same run, then a bad one
    comm = site["client"].get(url, params={"run": rid, "state": "opinion", "view": "communities"}).json()
    assert comm["view"] == "communities" and sum(comm["communities"]["size"]) == n
    assert site["client"].get(url, params={"run": rid, "state": "opinion", "view": "hairball"}).status_code == 400
    assert site["client"].get(url, params={"run": rid, "state": "nope"}).status_code == 404


def test_network_view_with_a_categorical_state_counts_everyone_in_the_declared_order(site):
    rumor = copy_study(site["dir"], "rumor_network", "rumor_network")
    rid = run_study(load_study(rumor, steps=3)).run_id
    url = "/api/studies/rumor_network/network"
    net = site["client"].get(url, params={"run": rid, "state": "rumor_state"}).json()
    m = net["meta"]
    declared = json.loads((rumor / "study.json").read_text())["state_colors"]["rumor_state"]
    assert m["categories"] == [c for c in declared if c in m["categories"]] and len(m["categories"]) >= 2
    assert dict(zip(m["categories"], m["palette"])) == {c: declared[c] for c in m["categories"]}
    import base64
    codes = base64.b64decode(net["node"]["frames"][3])
    stored = dict(sql(rumor, "SELECT agent_id, CAST(state.rumor_state AS VARCHAR) FROM panel WHERE run_id=? AND step=3", [rid]))
    assert [m["categories"][c] for c in codes] == [stored[a] for a in net["node"]["ids"]]
    everyone = dict(sql(rumor, "SELECT CAST(state.rumor_state AS VARCHAR), count(*) FROM panel WHERE run_id=? AND step=3 "
                               "GROUP BY 1", [rid]))
    assert {c: v for c, v in zip(m["categories"], m["counts"][3]) if v} == everyone
    assert m["has_messages"] and net["node"]["posters"]
    # the views the run allows: no transmission tree (the rumour model records no infector)
    assert set(m["available"]) == {"network", "communities", "adoption"}
    assert site["client"].get(url, params={"run": rid, "state": "rumor_state", "view": "tree"}).status_code == 404


def test_state_series_as_shares_and_bands(site):
    rid = runs_of(site["good"])[0]
    bands = site["client"].get("/api/studies/opinion_diffusion/states", params={"run": rid, "state": "opinion"}).json()
    assert bands["kind"] == "numeric" and bands["steps"] == list(range(13))
    med = sql(site["good"], "SELECT median(CAST(state.opinion AS DOUBLE)) FROM panel WHERE run_id=? AND step=4",
              [rid])[0][0]
    assert bands["quantiles"][4][2] == pytest.approx(med)
    rumor = site["dir"] / "rumor_network"
    if not rumor.exists():
        copy_study(site["dir"], "rumor_network", "rumor_network")
        run_study(load_study(rumor, steps=3))
    rrid = runs_of(rumor)[-1]
    shares = site["client"].get("/api/studies/rumor_network/states", params={"run": rrid, "state": "rumor_state"}).json()
    assert shares["kind"] == "categorical"
    at2 = dict(sql(rumor, "SELECT CAST(state.rumor_state AS VARCHAR), count(*) FROM panel WHERE run_id=? AND step=2 GROUP BY 1",
                   [rrid]))
    assert {c: shares["counts"][c][2] for c in at2} == at2
    flags = site["client"].get("/api/studies/rumor_network/states", params={"run": rrid, "state": "heard"}).json()
    assert flags["kind"] == "boolean" and set(flags["categories"]) <= {"false", "true"}
    assert flags["colors"][flags["categories"].index("false")] == "#b0b7c3"      # booleans: off is grey


def test_an_integer_state_of_few_values_is_shown_as_shares_not_a_band(site):
    """Schelling's type is 0 or 1: a 0-1 quantile band with its mean at 0.5 says nothing; its shares do."""
    schelling = site["dir"] / "schelling"
    if not schelling.exists():
        copy_study(site["dir"], "schelling", "schelling")
        run_study(load_study(schelling, steps=2))
    rid = runs_of(schelling)[-1]
    types = site["client"].get("/api/studies/schelling/states", params={"run": rid, "state": "type"}).json()
    assert types["kind"] == "categorical" and types["categories"] == ["0", "1"]
    at2 = dict(sql(schelling, "SELECT CAST(state.type AS VARCHAR), count(*) FROM panel WHERE run_id=? AND step=2 "
                              "GROUP BY 1", [rid]))
    assert {c: types["counts"][c][2] for c in at2} == at2
    # many integer values (Sugarscape's sugar, say) stay a band: the rule is the report's
    x = site["client"].get("/api/studies/schelling/states", params={"run": rid, "state": "x"}).json()
    assert x["kind"] == "numeric"


def test_report_diffusion_player_is_linked_and_served(site):
    rid = runs_of(site["good"])[0]
    st = site["client"].get("/api/studies/opinion_diffusion").json()
    assert st["diffusion_player"] is True
    url = "/api/studies/opinion_diffusion/diffusion"
    assert site["client"].get(url, params={"run": rid, "state": "opinion"}).status_code == 405   # it writes files
    same = {"Origin": site["url"], "X-Desim-Request": "1"}
    res = site["client"].post(url, params={"run": rid, "state": "opinion"}, headers=same)
    assert res.status_code == 200, res.text
    url = res.json()["url"]
    assert url.startswith("/files/opinion_diffusion/runs/")
    page = site["client"].get(url)
    assert page.status_code == 200 and "<html" in page.text.lower()


BAD_QUERIES = [
    ("panel", {"run": "x' OR '1'='1"}),
    ("panel", {"run": "{rid}", "step": "1; DROP TABLE panel"}),
    ("panel", {"run": "{rid}", "step": "-1"}),
    ("panel", {"run": "{rid}", "step": "1e3"}),
    ("panel", {"run": "{rid}", "agent_id": "a00\x00"}),
    ("agent", {"run": "{rid}", "agent_id": "x" * 300}),
    ("panel", {"run": "{rid}", "page_size": "100000"}),
    ("panel", {"run": "{rid}", "page": "0x10"}),
    ("metrics", {"run": "r1) OR (1=1"}),
    ("messages", {"run": "{rid}", "step": "2 OR 1=1"}),
    ("messages", {"run": "{rid}"}),
    ("network", {"run": "{rid}", "state": "opinion') FROM runs; --"}),
    ("network", {"run": "{rid}", "state": "$.opinion"}),
    ("events", {"run": "../../etc"}),
    ("events", {"run": "{rid}\n"}),                 # '$' of a regex lets a trailing newline through
    ("network", {"run": "{rid}", "state": "opinion\n"}),
    ("grid", {"run": "{rid}", "state": "type') FROM runs; --"}),
    ("grid", {"run": "{rid}", "state": "type", "step": "1; DROP TABLE panel"}),
    ("grid", {"run": "x' OR '1'='1", "state": "type"}),
    ("live", {"metrics": "{rid},x' OR 1=1"}),
]


@pytest.mark.parametrize("route,params", BAD_QUERIES)
def test_sql_shaped_and_out_of_range_input_is_rejected(site, route, params):
    rid = runs_of(site["good"])[0]
    before = sql(site["good"], "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM panel), "
                               "(SELECT count(*) FROM metrics)")
    res = site["client"].get(f"/api/studies/opinion_diffusion/{route}",
                             params={k: v.replace("{rid}", rid) for k, v in params.items()})
    assert res.status_code == 400, res.text
    assert "error" in res.json()
    assert sql(site["good"], "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM panel), "
                             "(SELECT count(*) FROM metrics)") == before


def test_sql_shaped_agent_id_and_action_kind_are_only_bound_values(site):
    rid = runs_of(site["good"])[0]
    before = sql(site["good"], "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM panel)")
    base = "/api/studies/opinion_diffusion"
    assert site["client"].get(f"{base}/agent", params={"run": rid, "agent_id": "a00' OR 1=1 --"}).status_code == 404
    for q in ({"agent_id": "a00' OR 1=1 --"}, {"action_kind": "post'; DELETE FROM runs; --"}):
        res = site["client"].get(f"{base}/panel", params={"run": rid, **q})
        assert res.status_code == 200 and res.json()["total"] == 0
    assert sql(site["good"], "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM panel)") == before


def test_agent_ids_with_any_characters_are_reachable(site):
    odd = site["dir"] / "odd_ids"
    if not odd.exists():
        odd_ids_study(site["dir"])
    rid = runs_of(odd)[0]
    for agent in ODD_IDS:
        res = site["client"].get("/api/studies/odd_ids/agent", params={"run": rid, "agent_id": agent})
        assert res.status_code == 200, (agent, res.text)
        assert res.json()["agent_id"] == agent and [s["step"] for s in res.json()["steps"]] == [1, 2, 3]
        page = site["client"].get("/api/studies/odd_ids/panel", params={"run": rid, "agent_id": agent}).json()
        assert page["total"] == 3


def test_cross_origin_and_headerless_posts_are_refused(site):
    rid = runs_of(site["good"])[0]
    url = "/api/studies/opinion_diffusion/diffusion"
    q = {"run": rid, "state": "opinion"}
    before = sorted(p.name for p in (site["good"] / "runs").rglob("*.html"))
    for headers in ({"Origin": "http://evil.example", "X-Desim-Request": "1"},        # another site
                    {"Origin": "null", "X-Desim-Request": "1"},                      # a sandboxed or file page
                    {"Referer": "http://127.0.0.1:1/x", "X-Desim-Request": "1"},     # another port
                    {"X-Desim-Request": "1"},                                        # no origin at all
                    {"Origin": site["url"]}):                                        # a plain form: no header
        res = site["client"].post(url, params=q, headers=headers)
        assert res.status_code == 403, (headers, res.text)
        assert "refused" in res.json()["error"]
    assert sorted(p.name for p in (site["good"] / "runs").rglob("*.html")) == before


TRAVERSALS = [
    "/static/../app.py",
    "/static/%2e%2e/app.py",
    "/static/..%2fdata.py",
    "/static/%2E%2E%2Fdata.py",
    "/static/%252e%252e/app.py",
    "/static/..\\app.py",
    "/files/opinion_diffusion/../../../../etc/passwd",
    "/files/opinion_diffusion/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/files/opinion_diffusion/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/files/opinion_diffusion//etc/passwd",
    "/files/opinion_diffusion/%2fetc%2fpasswd",
    "/files/..%2f..%2fetc/passwd",
    "/files/opinion_diffusion/./study.json",
    "/files/opinion_diffusion/runs/..%5c..%5cstudy.json",
    "/files/opinion_diffusion/escape/outside.txt",
    "/api/studies/..%2fnorun",
    "/api/studies/%2e%2e",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_path_traversal_is_rejected(site, path):
    outside = site["dir"].parent / "outside.txt"
    outside.write_text("SECRET outside the studies folder")
    link = site["good"] / "escape"
    if not link.exists():
        link.symlink_to(site["dir"].parent, target_is_directory=True)
    status, body = raw_get(site["url"], path)
    assert status in (400, 404), (status, body[:200])
    assert b"SECRET" not in body and b"root:" not in body and b"def " not in body and b'"id"' not in body


def test_only_loopback_host_headers_are_answered(site):
    for evil in ("evil.example:80", "127.0.0.1.evil.example", "10.0.0.1", "[2001:db8::1]:80", ""):
        assert site["client"].get("/api/studies", headers={"Host": evil}).status_code == 400, evil
    for loopback in ("localhost", "localhost:8787", "127.0.0.1", "127.0.0.2:9000", "127.255.1.9", "[::1]:8787"):
        assert site["client"].get("/api/studies", headers={"Host": loopback}).status_code == 200, loopback


def test_files_inside_the_study_and_static_assets_are_served(site):
    status, body = raw_get(site["url"], "/files/opinion_diffusion/study.json")
    assert status == 200 and json.loads(body)["id"] == "opinion_diffusion"
    for asset in ("/", "/static/app.js", "/static/app.css"):
        assert raw_get(site["url"], asset)[0] == 200
    assert raw_get(site["url"], "/static/nothere.js")[0] == 404
    for vendored in ("uPlot.iife.min.js", "LICENSE.uplot"):
        status, body = raw_get(site["url"], f"/static/vendor/{vendored}")
        assert status == 200 and len(body) > 1000, vendored
    status, body = raw_get(site["url"], "/static/netview.js")     # the report's renderer, served as a script
    assert status == 200 and b"window.DesimNet" in body


def test_locked_store_serves_last_good_data_and_live_progress(site, tmp_path):
    good, client = site["good"], site["client"]
    stored = runs_of(good)
    client.get("/api/studies/opinion_diffusion").raise_for_status()        # read once before the lock
    series = {"mean_opinion": [0.5, 0.52, 0.55], "support_share": [0.4, 0.45, 0.5]}
    live = write_live_file(good, "rlive01", step=2, n_steps=10, metrics=series)
    try:
        with write_lock(good):
            listing = {s["id"]: s for s in client.get("/api/studies").json()["studies"]}
            assert listing["opinion_diffusion"]["status"] == "running"
            assert listing["opinion_diffusion"]["last_run"]["run_id"] == "rlive01"
            assert listing["norun"]["status"] is None and listing["broken"]["error"]   # the others still answer

            st = client.get("/api/studies/opinion_diffusion").json()
            assert st["busy"] is True and st["stale"] is True and st["error"] is None
            runs = {r["run_id"]: r for r in st["store"]["runs"]}
            assert set(runs) == set(stored) | {"rlive01"}                       # last good copy + live run
            assert runs["rlive01"]["status"] == "running" and runs["rlive01"]["last_step"] == 2

            m = client.get("/api/studies/opinion_diffusion/metrics",
                           params=[("run", "rlive01"), ("run", stored[0])]).json()
            assert m["busy"] is True and m["sources"]["rlive01"] == "live"
            assert m["series"]["rlive01"]["mean_opinion"] == [[0, 0.5], [1, 0.52], [2, 0.55]]

            panel = client.get("/api/studies/opinion_diffusion/panel", params={"run": stored[0]})
            assert panel.status_code == 200 and panel.json()["busy"] is True
            assert "run in progress" in panel.json()["message"]

            write_live_file(good, "rlive01", step=3, n_steps=10, metrics={k: v + [0.6] for k, v in series.items()})
            lv = client.get("/api/studies/opinion_diffusion/live").json()["runs"]
            assert next(r for r in lv if r["run_id"] == "rlive01")["metrics"]["mean_opinion"][-1] == [3, 0.6]
        st = client.get("/api/studies/opinion_diffusion").json()
        assert st["busy"] is False
    finally:
        live.unlink()
    assert runs_of(good) == stored


def test_half_written_live_file_and_corrupt_store_do_not_break_the_page(site):
    norun = site["norun"]
    (norun / "runs" / "live").mkdir(parents=True)
    (norun / "runs" / "live" / "rhalf.json").write_text('{"run_id": "rhalf", "status": "runn')
    (norun / "runs" / "desim.duckdb").write_bytes(b"this is not a duckdb file" * 100)
    try:
        st = site["client"].get("/api/studies/norun")
        assert st.status_code == 200
        assert "cannot be opened" in st.json()["store_error"]
        assert site["client"].get("/api/studies/norun/live").json() == {"runs": []}
        listing = {s["id"]: s for s in site["client"].get("/api/studies").json()["studies"]}
        assert "cannot be opened" in listing["norun"]["error"]
        assert listing["opinion_diffusion"]["status"] == "completed"
    finally:
        (norun / "runs" / "desim.duckdb").unlink()
        (norun / "runs" / "live" / "rhalf.json").unlink()


def test_truncated_store_is_a_4xx_with_a_relative_path(site):
    broken = copy_study(site["dir"], "opinion_diffusion", "truncated")
    rid = run_study(load_study(broken, steps=2)).run_id
    db = broken / "runs" / "desim.duckdb"
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 3])
    st = site["client"].get("/api/studies/truncated")
    assert st.status_code == 200 and "truncated/runs/desim.duckdb" in st.json()["store_error"]
    for res in (st, site["client"].get("/api/studies/truncated/metrics", params={"run": rid}),
                site["client"].get("/api/studies/truncated/panel", params={"run": rid})):
        assert str(site["dir"]) not in res.text
    res = site["client"].get("/api/studies/truncated/panel", params={"run": rid})
    assert res.status_code == 422 and "cannot be read" in res.json()["error"], res.text
    listing = {s["id"]: s for s in site["client"].get("/api/studies").json()["studies"]}
    assert "truncated/runs/desim.duckdb" in listing["truncated"]["error"]
    assert str(site["dir"]) not in json.dumps(listing["truncated"])


def test_a_store_cut_short_of_its_header_blocks_is_broken_not_busy(site):
    """Truncated so far that DuckDB cannot even open it: a damaged store (422), not a writer holding it (the
    page said "run in progress" and polled for ever), and desim sql says the same."""
    broken = copy_study(site["dir"], "opinion_diffusion", "cut")
    rid = run_study(load_study(broken, steps=2)).run_id
    db = broken / "runs" / "desim.duckdb"
    db.write_bytes(db.read_bytes()[:100_000])
    res = site["client"].get("/api/studies/cut/panel", params={"run": rid})
    assert res.status_code == 422 and "cut/runs/desim.duckdb cannot be opened (damaged or truncated?)" in \
        res.json()["error"], res.text
    assert "busy" not in res.json()
    from desim.store import StoreBroken, open_store
    with pytest.raises(StoreBroken, match="cannot be opened \\(damaged or truncated\\?\\)"):
        with open_store(broken):
            pass


def test_the_study_page_is_kept_until_a_study_file_changes(site):
    """The lint behind the study page runs once per version of the study's files, not per poll; an edit of a
    file is seen on the next request."""
    from desim.dashboard import data as dashboard_data
    study = site["dir"] / "norun"
    first = site["client"].get("/api/studies/norun").json()
    calls = []
    meta = json.loads((study / "study.json").read_text())
    real = dashboard_data._study_config
    dashboard_data._study_config = lambda root: calls.append(root) or real(root)   # this process's own data module
    dashboard_data._configs.clear()
    try:
        assert dashboard_data.study_config(study)["study"]["title"] == first["study"]["title"]
        assert dashboard_data.study_config(study)["study"]["title"] == first["study"]["title"]
        kept = len(calls)
        assert kept == 1                # the second read was the kept one
        (study / "study.json").write_text(json.dumps({**meta, "title": "A new title"}))
        assert dashboard_data.study_config(study)["study"]["title"] == "A new title"
        assert len(calls) == kept + 1
        assert site["client"].get("/api/studies/norun").json()["study"]["title"] == "A new title"   # the server too
    finally:
        dashboard_data._study_config = real
        (study / "study.json").write_text(json.dumps(meta))


def test_a_read_that_fails_in_passing_is_read_again_and_a_damaged_store_still_fails(monkeypatch):
    """While a sweep merges its runs, a healthy store can fail one read: the request reads again and
    answers; a store that fails every read is a 422."""
    from desim.dashboard import app as dash_app
    from desim.dashboard import data as dash_data
    monkeypatch.setattr(dash_app, "BROKEN_RETRIES", (0.0, 0.0))
    calls = []

    def flaky(request):
        calls.append(1)
        if len(calls) == 1:
            raise dash_data.BrokenStore("s/runs/desim.duckdb cannot be read (damaged or truncated?): in passing")
        return {"ok": True}

    res = dash_app.api(flaky)(None)
    assert res.status_code == 200 and json.loads(res.body) == {"ok": True} and len(calls) == 2

    def broken(request):
        calls.append(1)
        raise dash_data.BrokenStore("s/runs/desim.duckdb cannot be read (damaged or truncated?): for good")

    calls.clear()
    res = dash_app.api(broken)(None)
    assert res.status_code == 422 and "for good" in json.loads(res.body)["error"] and len(calls) == 3


def test_a_killed_runs_progress_file_is_stale_not_live(site):
    """A run killed with SIGKILL leaves its progress file saying running: its process is gone, so the study
    list, the live poll and the study page call it stale, not a run in progress."""
    import socket
    import subprocess
    import sys
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()                                    # a pid no process has now
    norun = site["norun"]
    path = write_live_file(norun, "rkilled01", step=14, n_steps=60, metrics={})
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "pid": dead.pid, "host": socket.gethostname()}))
    try:
        assert site["client"].get("/api/live").json()["live"]["norun"] == []
        listing = {s["id"]: s for s in site["client"].get("/api/studies").json()["studies"]}
        assert listing["norun"]["status"] != "running"
        runs = site["client"].get("/api/studies/norun/live").json()["runs"]
        assert [(r["run_id"], r["status"]) for r in runs] == [("rkilled01", "stale")]
        page = site["client"].get("/api/studies/norun").json()
        assert [r["status"] for r in page["live"]] == ["stale"]
    finally:
        path.unlink()


def test_each_sweep_run_carries_its_values_of_the_grid_the_studys_own_too(site):
    from desim.experiments.sweep import run_sweep
    root = copy_study(site["dir"], "opinion_diffusion", "swept")
    sweep = run_sweep(root, {"n_agents": [40, 500]}, replicates=1, workers=1, steps=1)    # 500: the study's own
    runs = {r["run_id"]: r for r in site["client"].get("/api/studies/swept").json()["store"]["runs"]}
    for planned in sweep.plan.runs:
        assert runs[planned.run_id]["sweep_values"] == f"n_agents={planned.combo['n_agents']}"


def test_an_unknown_run_or_version_is_a_404_without_the_servers_paths(site):
    client = site["client"]
    for path in ("/api/studies/opinion_diffusion/metrics", "/api/studies/opinion_diffusion/events"):
        res = client.get(path, params={"run": "rNOPE00000"})
        assert res.status_code == 404 and "no run 'rNOPE00000' in this study" in res.json()["error"], res.text
    res = client.get("/api/studies/opinion_diffusion/versions/vNOPE0000/diff")
    assert res.status_code == 404 and str(site["dir"]) not in res.text, res.text
