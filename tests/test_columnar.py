"""The columnar (batch) path end to end, through the two reference studies that use it.

What must hold is what holds on the per-agent path: one panel row per agent
per step, each agent's own action in its own row, the same seed giving the
same panel bit for bit, and study code that misbehaves stopping the run with
an error naming the step or the agent while the completed steps stay stored.
"""
from __future__ import annotations

import hashlib

import pytest

import desim
from desim.run.assemble import assemble
from desim.study.contract import has_columnar_path
from desim.study.refs import study_module
from storeq import store_path
from storeq import query

SMALL = {"width": 12, "height": 12, "homophily": 0.5}   # 115 agents
N_SMALL = round(0.8 * 144)


def panel_hash(db, run_id) -> str:
    rows = query(db, "SELECT step, agent_id, state::VARCHAR, action_kind, payload::VARCHAR, action_source "
                     "FROM panel WHERE run_id=? ORDER BY step, agent_id", [run_id])
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def run(root, seed=3, steps=6, rounds=None, params=SMALL):
    result = desim.run_study(desim.load_study(root, seed=seed, steps=steps, rounds=rounds, params=params))
    return store_path(root), result.run_id


@pytest.mark.parametrize("name", ["schelling", "sugarscape"])
def test_reference_studies_take_the_columnar_path(study_copy, name):
    root = study_copy(name)
    model = study_module(root)
    spec = desim.load_study(root)
    env = getattr(model, spec.environment.provider.ref.split(":")[1])
    dec = getattr(model, spec.simulation.decision.ref.split(":")[1])
    assert has_columnar_path(env(), dec())
    assert assemble(spec).columnar


def test_one_row_per_agent_per_step_with_typed_state_columns(study_copy):
    root = study_copy("schelling")
    db, run_id = run(root, steps=7)
    assert query(db, "SELECT count(*), count(DISTINCT agent_id), count(DISTINCT step), min(step), max(step) "
                     "FROM panel WHERE run_id=?", [run_id])[0] == (N_SMALL * 7, N_SMALL, 7, 1, 7)
    assert query(db, "SELECT count(*) FROM initial_states WHERE run_id=?", [run_id])[0][0] == N_SMALL
    state, payload, source = query(db, "SELECT state, payload, action_source FROM panel "
                                       "WHERE run_id=? AND step=1 AND action_kind='move' LIMIT 1", [run_id])[0]
    assert set(state) == {"x", "y", "type", "happy"}
    assert set(payload) == {"to_x", "to_y"} and source == "rule"
    types = query(db, "SELECT DISTINCT typeof(state.x), typeof(state.type), typeof(state.happy), "
                      "typeof(payload.to_x) FROM panel WHERE run_id=? AND payload IS NOT NULL", [run_id])
    assert types == [("BIGINT", "BIGINT", "BOOLEAN", "BIGINT")]
    ids = [r[0] for r in query(db, "SELECT DISTINCT agent_id FROM panel WHERE run_id=? ORDER BY 1", [run_id])]
    assert ids[0] == "s000000" and ids[-1] == f"s{N_SMALL - 1:06d}"


def test_each_action_lands_in_its_own_agents_row(study_copy):
    """A mover's row holds its new cell, which is its payload's destination; a stayer has no action."""
    root = study_copy("schelling")
    db, run_id = run(root, steps=5)
    rows = query(db, """
        WITH pos AS (SELECT agent_id, step, state FROM panel WHERE run_id=$1
                     UNION ALL SELECT agent_id, 0, state FROM initial_states WHERE run_id=$1)
        SELECT p.action_kind, CAST(p.state.x AS VARCHAR), CAST(p.state.y AS VARCHAR), CAST(p.payload.to_x AS VARCHAR), CAST(p.payload.to_y AS VARCHAR),
               CAST(b.state.x AS VARCHAR), CAST(b.state.y AS VARCHAR)
        FROM panel p JOIN pos b ON b.agent_id = p.agent_id AND b.step = p.step - 1
        WHERE p.run_id=$1""", [run_id])
    assert len(rows) == N_SMALL * 5
    kinds = [r[0] for r in rows]
    assert kinds.count("move") > 10 and kinds.count(None) > 10 and set(kinds) == {"move", None}
    for kind, x, y, to_x, to_y, x0, y0 in rows:
        assert ((x, y) != (x0, y0)) == (kind == "move")
        if kind == "move":
            assert (x, y) == (to_x, to_y)
        else:
            assert to_x is None and to_y is None


def test_several_rounds_still_write_one_row_per_agent_per_step(study_copy):
    root = study_copy("schelling")
    db, run_id = run(root, steps=4, rounds=3)
    assert query(db, "SELECT count(*) FROM panel WHERE run_id=?", [run_id])[0][0] == N_SMALL * 4
    assert query(db, "SELECT interaction_rounds FROM runs WHERE run_id=?", [run_id])[0][0] == 3


@pytest.mark.parametrize("name, params", [("schelling", SMALL), ("sugarscape", {"n_agents": 120})])
def test_same_seed_same_panel_other_seed_other_panel(study_copy, name, params):
    root = study_copy(name)
    db, first = run(root, seed=8, steps=8, params=params)
    _, again = run(root, seed=8, steps=8, params=params)
    _, other = run(root, seed=9, steps=8, params=params)
    assert panel_hash(db, first) == panel_hash(db, again)
    assert panel_hash(db, first) != panel_hash(db, other)
    metrics = "SELECT step, name, value FROM metrics WHERE run_id=? ORDER BY step, name"
    assert query(db, metrics, [first]) == query(db, metrics, [again])


BAD_MODELS = '''

class ShortAnswer(Relocation):
    """Answers for one agent too few from step 3 on."""

    def decide_columns(self, obs, idx, t, round_idx):
        acts = super().decide_columns(obs, idx, t, round_idx)
        if t >= 3:
            acts.acted, acts.payload = acts.acted[1:], {k: v[1:] for k, v in acts.payload.items()}
        return acts


class Crowding(Relocation):
    """Sends every agent to the same cell at step 2."""

    def decide_columns(self, obs, idx, t, round_idx):
        acts = super().decide_columns(obs, idx, t, round_idx)
        if t == 2:
            acts.acted = np.ones(len(idx), bool)
            acts.payload = {"to_x": np.zeros(len(idx), np.int32), "to_y": np.zeros(len(idx), np.int32)}
        return acts
'''


@pytest.mark.parametrize("decision, message, steps_kept", [
    ("ShortAnswer", r"step 3 round 0: decide_columns must return ActionColumns with 115 entries", 2),
    ("Crowding", r"agents \['s0000\d\d', 's0000\d\d'.*share cell x=0, y=0", 1),
])
def test_misbehaving_study_code_fails_the_run_and_keeps_completed_steps(study_copy, decision, message,
                                                                        steps_kept):
    root = study_copy("schelling")
    with open(root / "model.py", "a", encoding="utf-8") as f:
        f.write(BAD_MODELS)
    sim = root / "simulation" / "simulation.json"
    sim.write_text(sim.read_text().replace("model:Relocation", f"model:{decision}"))
    with pytest.raises(desim.RunFailed, match=message) as err:
        run(root, steps=6)
    db = store_path(root)
    run_id = err.value.run_id
    assert query(db, "SELECT status FROM runs WHERE run_id=?", [run_id])[0][0] == "failed"
    assert query(db, "SELECT count(*), max(step) FROM panel WHERE run_id=?", [run_id])[0] == (
        N_SMALL * steps_kept, steps_kept)


@pytest.mark.parametrize("name, params", [("schelling", SMALL), ("sugarscape", {"n_agents": 150})])
def test_a_branch_replays_columnar_actions_to_the_same_states(study_copy, name, params):
    """Steps before the fork come from the parent's stored actions through ``apply_columns``."""
    from desim.experiments.branches import branch

    root = study_copy(name)
    db, parent = run(root, seed=4, steps=8, params=params)
    child = branch(root, parent, 5, spec=desim.load_study(root, seed=4, steps=8, params=params)).run_id
    states = "SELECT step, agent_id, state::VARCHAR FROM panel WHERE run_id=? ORDER BY step, agent_id"
    assert query(db, states, [child]) == query(db, states, [parent])
    sources = dict(query(db, "SELECT step < 5, string_agg(DISTINCT action_source, ',') FROM panel "
                             "WHERE run_id=? AND action_kind IS NOT NULL GROUP BY 1", [child]))
    assert sources == {True: "replay", False: "rule"}


def test_a_large_drained_table_becomes_json_a_slice_at_a_time_with_every_text_intact():
    # more rows than one slice: the texts are each value's own canonical JSON, in order, nulls kept
    import numpy as np
    import orjson
    import pyarrow as pa

    from desim.store.tables import _JSON_SLICE, message_table
    n = _JSON_SLICE + 1234
    v = np.arange(n) / 7.0
    content = pa.StructArray.from_arrays([pa.array(v), pa.array(np.arange(n))], names=["v", "a"],
                                         mask=pa.array(np.arange(n) % 50_000 == 3))
    out = message_table(pa.table({"author_id": pa.array([f"x{i}" for i in range(n)]), "content": content}), 4)
    texts = out.column("content").to_pylist()
    assert len(texts) == n and out.column("step").to_pylist()[:2] == [4, 4]
    for i in (0, 3, _JSON_SLICE - 1, _JSON_SLICE, n - 1):
        want = None if i % 50_000 == 3 else orjson.dumps({"v": float(v[i]), "a": i}, option=orjson.OPT_SORT_KEYS).decode()
        assert texts[i] == want


def test_a_columnar_feed_keeps_what_a_study_drains_for_the_store():
    """As InMemoryMessageBus: once desim stores the feed's posts (drain_columns), a study's own drain() no
    longer takes them from the messages table; before that it is counted as taken (and the run says so)."""
    import networkx as nx
    import numpy as np

    from desim.messaging.columnar import ColumnarFeed
    g = nx.relabel_nodes(nx.path_graph(4), {i: f"v{i}" for i in range(4)})
    feed = ColumnarFeed.from_graph(g, [f"v{i}" for i in range(4)])
    post = lambda step, r, who: feed.post(np.array(who), step, r, {"x": np.array([float(w) for w in who])})
    post(0, 0, [0])
    assert feed.drain().num_rows == 1 and feed.taken == 1                # before any store drain: lost
    post(1, 0, [1])
    assert feed.drain_columns().column("author_id").to_pylist() == ["v1"]
    post(1, 1, [2])
    assert feed.drain().num_rows == 1 and feed.taken == 1                # a study's own: kept
    post(2, 0, [3])
    assert feed.drain_columns().column("author_id").to_pylist() == ["v2", "v3"]
    assert feed.drain_columns().num_rows == 0
