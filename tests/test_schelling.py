"""The schelling study reproduces SPEC section 11 through the real engine and DuckDB.

Published figures are averages over seeds at 50x50, density 0.8, minority 0.5
and 200 steps. The runs here stop at 40-70 steps: at these homophily levels
everyone is happy (and nobody moves any more) well before that, which the
tests check, so the final figure equals the 200-step one. The seed noise of
a three-seed average is 0.001-0.008 by level (studies/schelling/README.md);
the tolerance is 0.015.
"""
from __future__ import annotations

import pytest

import desim
from storeq import store_path
from storeq import query

SEEDS = (11, 12, 13)


def run(root, seed, steps, **params):
    result = desim.run_study(desim.load_study(root, seed=seed, steps=steps, params=params))
    assert result.status == "completed"
    return store_path(root), result.run_id


def metric(db, run_id, name, step):
    return query(db, "SELECT value FROM metrics WHERE run_id=? AND name=? AND step=?", [run_id, name, step])[0][0]


@pytest.mark.parametrize("homophily, published, steps", [(0.3, 0.748, 40), (0.4, 0.828, 40),
                                                     (0.5, 0.885, 45), (0.6, 0.968, 70)])
def test_mean_same_type_share_matches_the_published_figure(study_copy, homophily, published, steps):
    root = study_copy("schelling")
    finals = []
    for seed in SEEDS:
        db, run_id = run(root, seed, steps=steps, homophily=homophily)
        finals.append(metric(db, run_id, "mean_same_share", steps))
        # settled: nobody moved over the last ten steps, so these steps stand for 200
        assert query(db, "SELECT sum(value) FROM metrics WHERE run_id=? AND name='moves' AND step > ?",
                     [run_id, steps - 10])[0][0] == 0
        assert metric(db, run_id, "mean_same_share", 0) == pytest.approx(0.5, abs=0.03)  # random start
        if homophily <= 0.4:  # everyone happy by about step 10-20
            first_all_happy = query(db, "SELECT min(step) FROM metrics WHERE run_id=? "
                                        "AND name='share_happy' AND value = 1", [run_id])[0][0]
            assert first_all_happy is not None and 3 <= first_all_happy <= 30
            assert metric(db, run_id, "share_happy", 0) < 0.9
    assert sum(finals) / len(finals) == pytest.approx(published, abs=0.015)


def test_netlogo_variant_thirty_percent_wanted_gives_about_seventy_percent_similar(study_copy):
    """NetLogo's Segregation model: 2,000 turtles on 51x51, local moves on a torus."""
    root = study_copy("schelling")
    finals = []
    for seed in (1, 2):
        db, run_id = run(root, seed, steps=50, rule="netlogo", torus=True, homophily=0.3,
                         width=51, height=51, density=2000 / 51 ** 2)
        assert metric(db, run_id, "share_happy", 50) == 1.0
        finals.append(metric(db, run_id, "pct_similar", 50))
    assert 66.0 <= sum(finals) / len(finals) <= 76.0


def test_panel_holds_positions_and_types_consistent_with_the_metrics(study_copy):
    root = study_copy("schelling")
    db, run_id = run(root, 5, steps=15, width=20, height=20, homophily=0.5)
    n = round(0.8 * 400)
    # one agent per cell at every step
    assert query(db, "SELECT max(c) FROM (SELECT count(*) c FROM panel WHERE run_id=? "
                     "GROUP BY step, CAST(state.x AS VARCHAR), CAST(state.y AS VARCHAR))", [run_id])[0][0] == 1
    # types never change, half of the agents are the minority
    assert query(db, "SELECT count(DISTINCT agent_id), sum(CAST(state.type AS INT)) FROM panel "
                     "WHERE run_id=? AND step=15", [run_id])[0] == (n, n // 2)
    assert query(db, "SELECT count(*) FROM (SELECT agent_id FROM panel WHERE run_id=? "
                     "GROUP BY agent_id HAVING count(DISTINCT CAST(state.type AS VARCHAR)) > 1)", [run_id])[0][0] == 0
    # the moves metric counts the agents whose position changed since the step before
    changed = query(db, """
        WITH pos AS (SELECT agent_id, step, CAST(state.x AS VARCHAR) x, CAST(state.y AS VARCHAR) y FROM panel WHERE run_id=$1
                     UNION ALL SELECT agent_id, 0, CAST(state.x AS VARCHAR), CAST(state.y AS VARCHAR) FROM initial_states WHERE run_id=$1)
        SELECT a.step, count(*) FILTER (WHERE a.x <> b.x OR a.y <> b.y)
        FROM pos a JOIN pos b ON a.agent_id = b.agent_id AND b.step = a.step - 1
        GROUP BY a.step ORDER BY a.step""", [run_id])
    moves = query(db, "SELECT step, CAST(value AS BIGINT) FROM metrics WHERE run_id=? AND name='moves' "
                      "AND step > 0 ORDER BY step", [run_id])
    assert changed == moves and moves[0][1] > 0
    # share_happy is the panel's share of happy agents
    happy = query(db, "SELECT step, avg(CAST(state.happy AS BOOLEAN)::INT) FROM panel WHERE run_id=? "
                      "GROUP BY step ORDER BY step", [run_id])
    metrics = query(db, "SELECT step, value FROM metrics WHERE run_id=? AND name='share_happy' AND step > 0 "
                        "ORDER BY step", [run_id])
    assert [s for s, _ in happy] == [s for s, _ in metrics]
    assert all(abs(h - m) < 1e-12 for (_, h), (_, m) in zip(happy, metrics))


@pytest.mark.parametrize("params, field", [({"rule": "lottery"}, "parameters.rule"),
                                           ({"density": 1.0}, "parameters.density"),
                                           ({"rule": "netlogo", "torus": False}, "parameters.torus")])
def test_bad_parameters_are_refused_naming_the_parameter(study_copy, params, field):
    root = study_copy("schelling")
    with pytest.raises(desim.StudyConfigError, match=f"simulation/simulation.json: {field}: schelling: "):
        desim.run_study(desim.load_study(root, steps=2, params=params))
    assert not (root / "runs" / "desim.duckdb").exists()   # refused before anything was written
