"""The step/round engine against the seed page's rules, on real DuckDB files."""
from __future__ import annotations

import hashlib
import json

import duckdb
import pytest

import desim
from storeq import store_path
from probe_study import log_of, write_probe_study
from storeq import query


def panel_hash(db, run_id) -> str:
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT step, agent_id, state::VARCHAR, action_kind, payload::VARCHAR, "
                       "action_source FROM panel WHERE run_id = ? ORDER BY step, agent_id", [run_id]).fetchall()
    con.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


@pytest.mark.parametrize("rounds", [1, 3])
def test_one_row_per_agent_per_step_and_rounds_in_order(tmp_path, rounds):
    root = write_probe_study(tmp_path / "probe", n_agents=5, n_steps=12, rounds=rounds)
    result = desim.run_study(desim.load_study(root))
    db = store_path(root)
    assert result.status == "completed"
    # 12 steps give 12 rows per agent, not 12 x rounds
    assert query(db, "SELECT count(*) FROM panel WHERE run_id=?", [result.run_id])[0][0] == 12 * 5
    assert query(db, "SELECT count(*), count(DISTINCT step) FROM panel WHERE run_id=? AND agent_id='p3'",
                 [result.run_id])[0] == (12, 12)
    assert query(db, "SELECT count(*) FROM initial_states WHERE run_id=?", [result.run_id])[0][0] == 5

    log = log_of(root)
    decides = [(e[1], e[2]) for e in log if e[0] == "decide"]
    assert decides == [(t, r) for t in range(1, 13) for r in range(rounds)]
    # advance_to once per step (plus step 0 at reset), always before that step's round 0
    advances = [e[1] for e in log if e[0] == "advance"]
    assert advances == list(range(0, 13))
    for t in range(1, 13):
        i_adv = log.index(next(e for e in log if e[0] == "advance" and e[1] == t))
        i_obs = log.index(next(e for e in log if e[0] == "observe" and e[1] == t))
        assert i_adv < i_obs
        assert log[i_adv][2] == t  # at simulated time t
    # memory: one entry per agent per step, only final rounds count
    mem_lengths = [e[3] for e in log if e[0] == "decide"]
    for t in range(1, 13):
        for r in range(rounds):
            assert mem_lengths[(t - 1) * rounds + r] == [t - 1] * 5
    # the panel's action is the final round's
    rounds_seen = query(db, "SELECT DISTINCT CAST(payload.round AS INT) FROM panel WHERE run_id=?",
                        [result.run_id])
    assert rounds_seen == [(rounds - 1,)]


@pytest.mark.parametrize("bad_rounds", [0, -2])
def test_rounds_below_one_behave_as_one(tmp_path, bad_rounds):
    root = write_probe_study(tmp_path / "probe", n_steps=3, rounds=bad_rounds)
    spec = desim.load_study(root)
    assert spec.rounds == 1
    result = desim.run_study(spec)
    decides = [(e[1], e[2]) for e in log_of(root) if e[0] == "decide"]
    assert decides == [(1, 0), (2, 0), (3, 0)]
    assert query(store_path(root), "SELECT interaction_rounds FROM runs WHERE run_id=?",
                 [result.run_id])[0][0] == 1


def test_same_seed_same_panel_different_seed_different(tmp_path):
    root = write_probe_study(tmp_path / "probe", n_steps=5, rounds=2)
    a = desim.run_study(desim.load_study(root))
    b = desim.run_study(desim.load_study(root))
    c = desim.run_study(desim.load_study(root, seed=8))
    db = store_path(root)
    assert a.run_id != b.run_id
    assert panel_hash(db, a.run_id) == panel_hash(db, b.run_id)
    assert panel_hash(db, a.run_id) != panel_hash(db, c.run_id)


def test_reference_study_is_reproducible(study_copy):
    root = study_copy("opinion_diffusion")
    a = desim.run_study(desim.load_study(root, params={"n_agents": 60}))
    b = desim.run_study(desim.load_study(root, params={"n_agents": 60}))
    db = store_path(root)
    assert panel_hash(db, a.run_id) == panel_hash(db, b.run_id)
    assert query(db, "SELECT count(*) FROM panel WHERE run_id=?", [a.run_id])[0][0] == 60 * 12


def test_study_process_interleaves_with_steps(tmp_path):
    root = write_probe_study(tmp_path / "probe", n_steps=4, env_args={"tick_every": 0.5})
    desim.run_study(desim.load_study(root))
    log = log_of(root)
    ticks = [e[1] for e in log if e[0] == "tick"]
    assert ticks[:8] == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
    # at step t the ticker has run 2t times (including the tick at exactly t), and agents see it
    seen = {e[1]: e[4][0] for e in log if e[0] == "decide"}
    assert seen == {1: 2, 2: 4, 3: 6, 4: 8}


@pytest.mark.parametrize("rounds", [1, 3])
def test_agent_queuing_at_a_resource_skips_rounds(tmp_path, rounds):
    # p2 joins a queue at the end of step 2; the desk is held until t=3.5, so p2 misses step 3
    root = write_probe_study(tmp_path / "probe", n_steps=5, rounds=rounds,
                             env_args={"busy_agent": "p2", "busy_from_step": 2, "hold_until": 3.5})
    result = desim.run_study(desim.load_study(root))
    log = log_of(root)
    observed = {(e[1], e[2]): e[3] for e in log if e[0] == "observe"}
    for r in range(rounds):
        assert "p2" not in observed[(3, r)]
        assert "p2" in observed[(2, r)] and "p2" in observed[(4, r)]
    assert ("served", "p2", pytest.approx(3.6)) in [(e[0], e[1], e[2]) for e in log if e[0] == "served"]
    rows = dict(query(store_path(root), "SELECT step, action_kind FROM panel WHERE run_id=? AND agent_id='p2'",
                      [result.run_id]))
    assert rows[3] is None and rows[2] == "set" and rows[4] == "set"
    assert query(store_path(root), "SELECT count(*) FROM panel WHERE run_id=? AND step=3",
                 [result.run_id])[0][0] == 5


def test_decision_model_raising_marks_run_failed_and_keeps_steps(tmp_path):
    root = write_probe_study(tmp_path / "probe", n_steps=8, decision_args={"fail_step": 5})
    with pytest.raises(desim.RunFailed) as info:
        desim.run_study(desim.load_study(root))
    assert "the model broke at step 5" in str(info.value)
    db = store_path(root)
    run_id = info.value.run_id
    assert query(db, "SELECT status, last_step FROM runs WHERE run_id=?", [run_id]) == [("failed", 4)]
    assert query(db, "SELECT count(*) FROM initial_states WHERE run_id=?", [run_id])[0][0] == 5
    assert query(db, "SELECT min(step), max(step), count(*) FROM panel WHERE run_id=?", [run_id]) == [(1, 4, 20)]
    # a second run in the same store works
    root_ok = root  # same folder, same store; switch the failure off
    sim = json.loads((root / "simulation" / "simulation.json").read_text())
    sim["decision"]["args"] = {}
    (root / "simulation" / "simulation.json").write_text(json.dumps(sim))
    ok = desim.run_study(desim.load_study(root_ok))
    assert ok.status == "completed"
    assert query(db, "SELECT count(*) FROM panel WHERE run_id=?", [ok.run_id])[0][0] == 40


@pytest.mark.parametrize("fail_at", [2, 4])
def test_a_failure_after_a_step_closes_fails_the_run_at_the_last_step_too(tmp_path, fail_at):
    """What runs once a step has closed (storing it, then ``on_step``) fails the run at any step: at the last
    one SimPy stops with the step loop before the failure is raised, and the run was recorded completed."""
    root = write_probe_study(tmp_path / "probe", n_steps=4)

    def on_step(step, metrics):
        if step == fail_at:
            raise RuntimeError(f"the listener broke at step {step}")
    with pytest.raises(desim.RunFailed) as info:
        desim.run_study(desim.load_study(root), on_step=on_step)
    assert f"the listener broke at step {fail_at}" in str(info.value)
    status = query(store_path(root), "SELECT status FROM runs WHERE run_id=?", [info.value.run_id])
    assert status == [("failed",)]


@pytest.mark.parametrize("mode,needle", [
    ("unknown_agent", "unknown agent 'ghost'"),
    ("duplicate", "two actions for agent 'p0'"),
    ("garbage", "not an Action"),
])
def test_bad_actions_fail_the_run_naming_the_agent(tmp_path, mode, needle):
    root = write_probe_study(tmp_path / "probe", n_steps=4, decision_args={"mode": mode})
    with pytest.raises(desim.RunFailed) as info:
        desim.run_study(desim.load_study(root))
    assert needle in str(info.value)
    assert "step 2" in str(info.value)
    assert query(store_path(root), "SELECT status, last_step FROM runs") == [("failed", 1)]


def test_bad_actions_of_the_right_number_are_refused_too(tmp_path):
    # as many actions as agents, so only the agents' names give the fault away
    root = write_probe_study(tmp_path / "dup", n_steps=4, decision_args={"mode": "duplicate_in_place"})
    with pytest.raises(desim.RunFailed, match="step 2 round 0: two actions for agent 'p0'"):
        desim.run_study(desim.load_study(root))
    # p2 is away at step 3 (queuing at the desk): an action for it there is refused
    root = write_probe_study(tmp_path / "away", n_steps=5, decision_args={"mode": "absent_agent"},
                             env_args={"busy_agent": "p2", "busy_from_step": 2, "hold_until": 3.5})
    with pytest.raises(desim.RunFailed, match="step 3 round 0: action for agent 'p2', which did not take part"):
        desim.run_study(desim.load_study(root))


def test_actions_in_any_order_give_the_same_panel(tmp_path):
    in_order = write_probe_study(tmp_path / "a", n_steps=4, rounds=2)
    backwards = write_probe_study(tmp_path / "b", n_steps=4, rounds=2, decision_args={"mode": "reversed"})
    a = desim.run_study(desim.load_study(in_order))
    b = desim.run_study(desim.load_study(backwards))
    assert b.status == "completed"
    assert panel_hash(store_path(in_order), a.run_id) == panel_hash(store_path(backwards), b.run_id)


def test_agent_without_action_gets_row_without_action(tmp_path):
    root = write_probe_study(tmp_path / "probe", n_steps=3, decision_args={"mode": "skip_first"})
    result = desim.run_study(desim.load_study(root))
    rows = query(store_path(root), "SELECT agent_id, count(*), count(action_kind) FROM panel WHERE run_id=? "
                 "GROUP BY agent_id ORDER BY agent_id", [result.run_id])
    assert rows[0] == ("p0", 3, 0)
    assert all(r[1:] == (3, 3) for r in rows[1:])


def test_events_and_broadcasts_fire_at_their_step(tmp_path):
    root = write_probe_study(
        tmp_path / "probe", n_steps=4,
        events=[{"at_step": 0, "name": "baseline", "target": "level", "op": "set", "value": 2.0},
                {"at_step": 2, "name": "double", "target": "level", "op": "multiply", "value": 2},
                {"at_step": 3, "name": "raise_a", "target": "income", "op": "set", "value": 5,
                 "selector": {"group": "a"}}],
        broadcasts=[{"at_step": 2, "name": "news", "content": "hello", "ttl": 2}])
    result = desim.run_study(desim.load_study(root))
    rows = query(store_path(root), "SELECT step, kind, name, detail->>'affected_agents' FROM events WHERE run_id=? "
                 "ORDER BY step, name", [result.run_id])
    assert rows == [(0, "event", "baseline", None), (2, "event", "double", None), (2, "broadcast", "news", None),
                    (3, "event", "raise_a", "2")]


def test_opting_out_of_agent_processes_gives_the_same_panel(tmp_path):
    with_procs = write_probe_study(tmp_path / "a", n_steps=4, rounds=2)
    without = write_probe_study(tmp_path / "b", n_steps=4, rounds=2, agent_processes=False)
    a = desim.run_study(desim.load_study(with_procs))
    b = desim.run_study(desim.load_study(without))
    assert panel_hash(store_path(with_procs), a.run_id) == panel_hash(store_path(without), b.run_id)
    # errands work the same without standing agent processes: p1 misses step 3 either way
    busy_args = {"busy_agent": "p1", "busy_from_step": 2, "hold_until": 3.5}
    busy_procs = write_probe_study(tmp_path / "c", n_steps=4, env_args=busy_args)
    busy_plain = write_probe_study(tmp_path / "d", n_steps=4, agent_processes=False, env_args=busy_args)
    c = desim.run_study(desim.load_study(busy_procs))
    d = desim.run_study(desim.load_study(busy_plain))
    assert panel_hash(store_path(busy_procs), c.run_id) == panel_hash(store_path(busy_plain), d.run_id)
    assert query(store_path(busy_plain), "SELECT action_kind FROM panel WHERE run_id=? AND agent_id='p1' "
                 "AND step=3", [d.run_id]) == [(None,)]
