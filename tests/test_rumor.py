"""rumor_network: the rumour spreads through rounds, reach saturates, and the
official correction cuts the spreaders compared with a branch without it."""
from __future__ import annotations

import json

import duckdb
import pytest

import desim
from desim.branch import branch
from storeq import sql

CORRECTION_STEP = 6


def series(root, run_id, name):
    return [v for _, v in sql(root, "SELECT step, value FROM metrics WHERE run_id = ? AND name = ? ORDER BY step",
                              [run_id, name])]


@pytest.fixture(scope="module")
def rumor(tmp_path_factory):
    """The default study (1,000 agents), run once, then branched at the correction step without it."""
    import shutil
    from pathlib import Path
    root = tmp_path_factory.mktemp("rumor") / "rumor_network"
    shutil.copytree(Path(__file__).resolve().parent.parent / "studies" / "rumor_network", root,
                    ignore=shutil.ignore_patterns("runs", "__pycache__"))
    parent = desim.run_study(desim.load_study(root)).run_id
    env_file = root / "environment" / "environment.json"
    env = json.loads(env_file.read_text())
    assert [b["at_step"] for b in env["broadcasts"]] == [CORRECTION_STEP]
    env["broadcasts"] = []
    env_file.write_text(json.dumps(env))
    without = branch(root, parent, CORRECTION_STEP, note="no correction").run_id
    return root, parent, without


def test_the_study_is_what_it_says(rumor):
    root, parent, _ = rumor
    (n, rounds, status), = sql(root, "SELECT n_agents, interaction_rounds, status FROM runs WHERE run_id = ?", [parent])
    assert (n, rounds, status) == (1000, 3, "completed")
    cfg = json.loads(sql(root, "SELECT config FROM runs WHERE run_id = ?", [parent])[0][0])
    assert cfg["population"]["interaction"]["kind"] == "watts_strogatz"
    assert cfg["population"]["propagation"] == "contagion"
    # posts happen in every round, so the rumour travels several hops within a week
    assert {r for (r,) in sql(root, "SELECT DISTINCT round FROM messages WHERE run_id = ? AND step >= 1",
                              [parent])} == {0, 1, 2}
    assert {k for (k,) in sql(root, "SELECT DISTINCT kind FROM messages WHERE run_id = ?", [parent])} == {"post"}
    events = sql(root, "SELECT step, kind, name FROM events WHERE run_id = ?", [parent])
    assert events == [(CORRECTION_STEP, "broadcast", "official_correction")]


def test_reach_rises_then_saturates(rumor):
    root, _, without = rumor
    reach = series(root, without, "reach")
    assert all(b >= a for a, b in zip(reach, reach[1:]))          # nobody unhears a rumour
    assert reach[0] == pytest.approx(5 / 1000)                      # the seed spreaders
    gains = [b - a for a, b in zip(reach, reach[1:])]
    assert max(gains) > 0.05                                        # it rises...
    assert reach[-1] > 0.8
    assert reach[-1] - reach[-4] < 0.02                             # ...and levels off


def test_metrics_agree_with_the_panel(rumor):
    root, parent, _ = rumor
    shares = {s: series(root, parent, f"share_{s}") for s in ("ignorant", "spreader", "stifler")}
    for i in range(len(shares["ignorant"])):
        assert sum(shares[s][i] for s in shares) == pytest.approx(1.0)
    counts = dict(((s, v), n) for s, v, n in sql(
        root, "SELECT step, CAST(state.rumor_state AS VARCHAR), count(*) FROM panel WHERE run_id = ? GROUP BY ALL", [parent]))
    for step in (3, 8, 12):
        assert counts.get((step, "spreader"), 0) / 1000 == pytest.approx(shares["spreader"][step])
    # new spreaders in a step = agents ignorant before it and informed after it, from the panel
    new = series(root, parent, "new_spreaders")
    for step in (2, 4, 6):
        (converted,), = sql(root, "SELECT count(*) FROM panel a JOIN panel b ON a.agent_id = b.agent_id "
                                  "WHERE a.run_id = ? AND b.run_id = ? AND a.step = ? AND b.step = ? "
                                  "AND CAST(a.state.rumor_state AS VARCHAR) = 'ignorant' AND CAST(b.state.rumor_state AS VARCHAR) <> 'ignorant'",
                            [parent, parent, step - 1, step])
        assert new[step] == converted
    reach = series(root, parent, "reach")
    heard = dict(sql(root, "SELECT step, avg(CASE WHEN CAST(state.heard AS BOOLEAN) THEN 1.0 ELSE 0.0 END) "
                           "FROM panel WHERE run_id = ? GROUP BY step", [parent]))
    assert reach[5] == pytest.approx(heard[5])


def test_correction_lowers_spreaders_compared_with_a_branch_without_it(rumor):
    root, parent, without = rumor
    # the branch replays the parent exactly before the fork
    differ = sql(root, "SELECT count(*) FROM panel a JOIN panel b ON a.step = b.step AND a.agent_id = b.agent_id "
                       "WHERE a.run_id = ? AND b.run_id = ? AND a.step < ? AND a.state <> b.state",
                 [parent, without, CORRECTION_STEP])[0][0]
    assert differ == 0
    with_c, without_c = series(root, parent, "share_spreader"), series(root, without, "share_spreader")
    after = range(CORRECTION_STEP, CORRECTION_STEP + 5)
    assert all(with_c[t] < without_c[t] for t in after)
    assert sum(with_c[t] for t in after) < 0.5 * sum(without_c[t] for t in after)
    assert series(root, parent, "reach")[-1] < series(root, without, "reach")[-1]


def test_same_seed_same_panel(rumor, tmp_path):
    root, parent, _ = rumor
    spec = desim.load_study(root)  # now without the correction; the first steps must not care
    again = desim.run_study(spec, db_path=tmp_path / "again.duckdb").run_id
    con = duckdb.connect(str(tmp_path / "again.duckdb"), read_only=True)
    mine = con.execute("SELECT step, agent_id, state::VARCHAR FROM panel WHERE run_id = ? AND step < ? "
                       "ORDER BY ALL", [again, CORRECTION_STEP]).fetchall()
    con.close()
    stored = sql(root, "SELECT step, agent_id, state::VARCHAR FROM panel WHERE run_id = ? AND step < ? ORDER BY ALL",
                 [parent, CORRECTION_STEP])
    assert mine == stored and len(mine) == 1000 * (CORRECTION_STEP - 1)


def test_report_shows_the_branch_against_its_parent(rumor):
    from desim.report import write_report
    root, parent, without = rumor
    paths = write_report(root, run_id=without)
    html = paths["html"].read_text()
    assert f"{without} is a branch of {parent} forked at step {CORRECTION_STEP}" in html
    assert html.count('src="data:image/png;base64,') == 4
