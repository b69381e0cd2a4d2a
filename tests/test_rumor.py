"""rumor_network: the rumour spreads through rounds, reach saturates, and the
official correction cuts the spreaders compared with a branch without it."""
from __future__ import annotations

import json
import math

import duckdb
import pytest

import desim
from desim.experiments.branches import branch
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


def mt_copy(root, interaction):
    """The study with ``interaction`` as its network, no correction, and no recorded rounds."""
    pop_file, env_file = root / "population" / "population.json", root / "environment" / "environment.json"
    pop, env = json.loads(pop_file.read_text()), json.loads(env_file.read_text())
    pop["interaction"] = interaction
    env["broadcasts"] = []
    pop_file.write_text(json.dumps(pop))
    env_file.write_text(json.dumps(env))
    return root


CLASSIC_MT = {"transmission": "maki_thompson", "p_believe": 1.0, "p_stop": 1.0, "n_seeds": 1}


@pytest.mark.slow
def test_maki_thompson_leaves_a_fifth_ignorant_on_a_complete_graph(study_copy, tmp_path):
    """Maki & Thompson's limit: a fraction of about 0.203 never hears the rumour (the root of
    x = exp(-2 (1 - x))). 400 agents, 8 seeds, 8 weeks of 3 rounds (the spreaders are gone by week 6)."""
    from scipy import stats
    root = mt_copy(study_copy("rumor_network"), {"kind": "complete"})
    finals = []
    for seed in range(1, 9):
        db = tmp_path / f"mt{seed}.duckdb"
        run = desim.run_study(desim.load_study(root, seed=seed, steps=8, params={**CLASSIC_MT, "n_agents": 400}),
                              db_path=db).run_id
        con = duckdb.connect(str(db), read_only=True)
        m = dict(((s, n), v) for s, n, v in con.execute(
            "SELECT step, name, value FROM metrics WHERE run_id = ?", [run]).fetchall())
        # one contact per spreader per round: every tell goes to a neighbour, at most one per agent and round
        per_round = con.execute("SELECT max(c) FROM (SELECT count(*) c FROM messages WHERE run_id = ? "
                                "AND kind = 'tell' GROUP BY step, round, author_id)", [run]).fetchone()[0]
        kinds = {k for (k,) in con.execute("SELECT DISTINCT kind FROM messages WHERE run_id = ?", [run]).fetchall()}
        con.close()
        assert per_round == 1 and kinds == {"tell"}
        assert m[(8, "share_spreader")] == 0                        # the rumour has died out
        assert m[(8, "reach")] == pytest.approx(1 - m[(8, "share_ignorant")])
        finals.append(m[(8, "share_ignorant")])
    x = 0.2
    for _ in range(50):
        x = math.exp(-2 * (1 - x))
    assert x == pytest.approx(0.2032, abs=1e-4)
    mean, se = sum(finals) / len(finals), stats.sem(finals)
    assert abs(mean - x) <= stats.t.ppf(0.975, len(finals) - 1) * se + 0.005   # within the 95 % interval


def test_maki_thompson_settles_tells_in_turn_order(study_copy, tmp_path):
    """A told ignorant believes and spreads from the next round; a teller who meets someone who knows
    stops; the panel shows it: a spreader's only actions are tells, and stiflers told someone informed."""
    root = mt_copy(study_copy("rumor_network"), {"kind": "watts_strogatz", "k": 6, "p": 0.1})
    db = tmp_path / "mt.duckdb"
    run = desim.run_study(desim.load_study(root, seed=3, steps=6, params={**CLASSIC_MT, "n_seeds": 5}),
                          db_path=db).run_id
    con = duckdb.connect(str(db), read_only=True)
    kinds = {k for (k,) in con.execute("SELECT DISTINCT action_kind FROM round_actions WHERE run_id = ?",
                                       [run]).fetchall()}
    tells = con.execute("SELECT r.agent_id, CAST(r.payload.to AS VARCHAR) FROM round_actions r WHERE r.run_id = ? "
                        "AND r.action_kind = 'tell'", [run]).fetchall()
    edges = {frozenset(e) for e in con.execute("SELECT source, target FROM edges WHERE run_id = ?", [run]).fetchall()}
    reach = con.execute("SELECT value FROM metrics WHERE run_id = ? AND name = 'reach' AND step = 6",
                        [run]).fetchone()[0]
    con.close()
    assert kinds == {"tell"} and len(tells) > 5
    assert all(frozenset((a, b)) in edges for a, b in tells)       # every contact is a neighbour
    assert 5 / 1000 < reach < 1.0


def test_unknown_transmission_is_refused(study_copy):
    root = study_copy("rumor_network")
    with pytest.raises(desim.StudyConfigError, match="parameters.transmission: rumor_network: must be one of"):
        desim.run_study(desim.load_study(root, steps=1, params={"transmission": "gossip"}))
