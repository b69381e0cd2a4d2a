"""The sugarscape study reproduces SPEC section 11 through the real engine and DuckDB.

Epstein & Axtell report that under G1 + M the 400 agents die back to a
plateau of about 224-230 by step 200-500, the survivors having better vision
and lower metabolism than the founders. Three seeds run 250 steps each here
(the 500-step run is in benchmarks/bench_sugarscape.py); the plateau is the
mean population over steps 200-250, averaged over the seeds.
"""
from __future__ import annotations

import numpy as np
import pytest

import desim
from desim.refs import study_module
from desim.store import store_path
from storeq import query

STEPS = 250


def run(root, seed, steps, **params):
    result = desim.run_study(desim.load_study(root, seed=seed, steps=steps, params=params))
    assert result.status == "completed"
    return store_path(root), result.run_id


def series(db, run_id, name):
    return dict(query(db, "SELECT step, value FROM metrics WHERE run_id=? AND name=? ORDER BY step", [run_id, name]))


def test_population_plateaus_at_the_carrying_capacity_and_selects_traits(study_copy):
    root = study_copy("sugarscape")
    plateaus = []
    for seed in (1, 2, 3):
        db, run_id = run(root, seed, STEPS)
        pop = series(db, run_id, "population")
        vision, metabolism = series(db, run_id, "mean_vision"), series(db, run_id, "mean_metabolism")
        assert pop[0] == 400
        plateaus.append(np.mean([pop[t] for t in range(200, STEPS + 1)]))
        # a plateau, not a slide: the last 50 steps lose only a few agents
        assert pop[200] - pop[STEPS] <= 8
        # selection: survivors see further and burn less than the founders
        assert vision[STEPS] > vision[0] + 0.2
        assert metabolism[STEPS] < metabolism[0] - 0.5
        # uniform draws: founders average about 3.5 and 2.5 (within 4 standard errors)
        assert vision[0] == pytest.approx(3.5, abs=0.35) and metabolism[0] == pytest.approx(2.5, abs=0.25)
    assert 218 <= np.mean(plateaus) <= 236


def test_dead_agents_keep_their_rows_marked_not_alive(study_copy):
    root = study_copy("sugarscape")
    db, run_id = run(root, 4, 40)
    # exactly one row per agent per step, dead or alive
    assert query(db, "SELECT count(*), count(DISTINCT agent_id) FROM panel WHERE run_id=?", [run_id])[0] == (
        400 * 40, 400)
    # the population metric counts the living rows of the panel
    alive = query(db, "SELECT step, count(*) FILTER (WHERE CAST(state.alive AS BOOLEAN)) FROM panel "
                      "WHERE run_id=? GROUP BY step ORDER BY step", [run_id])
    pop = series(db, run_id, "population")
    assert [(s, float(n)) for s, n in alive] == [(s, pop[s]) for s, _ in alive]
    assert pop[40] < 400
    # death is final, a dead agent's sugar is zero or below, and its last action is the one it died after
    assert query(db, """
        SELECT count(*) FROM panel a JOIN panel b ON a.agent_id = b.agent_id AND b.step = a.step + 1
        WHERE a.run_id=$1 AND b.run_id=$1 AND NOT CAST(a.state.alive AS BOOLEAN)
          AND CAST(b.state.alive AS BOOLEAN)""", [run_id])[0][0] == 0
    dead = query(db, "SELECT count(*), max(CAST(state.sugar AS INT)), count(action_kind) FROM panel "
                     "WHERE run_id=? AND NOT CAST(state.alive AS BOOLEAN)", [run_id])[0]
    assert dead[0] > 0 and dead[1] <= 0 and dead[2] == 400 - pop[40]
    # the living act every step: they move or stay
    assert query(db, "SELECT DISTINCT action_kind FROM panel WHERE run_id=? AND "
                     "CAST(state.alive AS BOOLEAN) ORDER BY 1", [run_id]) == [("move",), ("stay",)]
    # at most one living agent per cell
    assert query(db, "SELECT max(c) FROM (SELECT count(*) c FROM panel WHERE run_id=? AND "
                     "CAST(state.alive AS BOOLEAN) GROUP BY step, CAST(state.x AS VARCHAR), CAST(state.y AS VARCHAR))", [run_id])[0][0] == 1


def test_moves_stay_on_the_lattice_lines_within_vision(study_copy):
    root = study_copy("sugarscape")
    db, run_id = run(root, 5, 10)
    rows = query(db, """
        SELECT CAST(a.state.x AS INT), CAST(a.state.y AS INT), CAST(b.state.x AS INT),
               CAST(b.state.y AS INT), CAST(a.state.vision AS INT)
        FROM panel b JOIN (SELECT agent_id, step, state FROM panel WHERE run_id=$1
                           UNION ALL SELECT agent_id, 0, state FROM initial_states WHERE run_id=$1) a
          ON a.agent_id = b.agent_id AND a.step = b.step - 1
        WHERE b.run_id=$1 AND b.action_kind = 'move'""", [run_id])
    assert len(rows) > 100
    for x0, y0, x1, y1, vision in rows:
        dx, dy = min(abs(x1 - x0), 50 - abs(x1 - x0)), min(abs(y1 - y0), 50 - abs(y1 - y0))
        assert (dx == 0) != (dy == 0) and max(dx, dy) <= vision


def test_landscape_has_two_peaks_of_four_and_capacities_zero_to_four(study_copy):
    model = study_module(study_copy("sugarscape"))
    capacity = model.two_peaks()
    assert capacity.shape == (50, 50)
    assert set(np.unique(capacity)) == {0, 1, 2, 3, 4}
    for px, py in model.PEAKS:
        assert capacity[py, px] == 4
    # two separate peaks with lower land between them and bare corners
    assert capacity[25, 25] < 4 and capacity[0, 0] == 0 and capacity[49, 49] == 0
    assert np.array_equal(capacity, capacity.T)  # the peaks mirror each other
