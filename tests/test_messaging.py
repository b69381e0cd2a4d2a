"""The message bus and the neighbour feed: the seed page's visibility rule,
what becomes a message, draining, pruning, and the engine writing every round's
posts to the ``messages`` table."""
from __future__ import annotations

import json
import re
import random

import duckdb
import networkx as nx
import pytest

from desim import Action, InMemoryMessageBus, Message, NeighborFeed, RunFailed, load_study, neighbors_fn, run_study

# a - b - c - d triangle a,b,c plus tail d; e is nobody's neighbour
GRAPH = nx.Graph([("a", "b"), ("a", "c"), ("b", "c"), ("c", "d")])
GRAPH.add_node("e")
AGENTS = ["a", "b", "c", "d", "e"]


def feed(carry: bool = False) -> NeighborFeed:
    return NeighborFeed(neighbors_fn(GRAPH), InMemoryMessageBus(carry_previous_step=carry))


def post(agent: str, step: int, kind: str = "post", **payload) -> Action:
    return Action(agent_id=agent, step=step, kind=kind, payload=payload or {"content": {"from": agent}})


def seen(messages: list[Message]) -> set[tuple[str, int, int]]:
    return {(m.author_id, m.step, m.round) for m in messages}


def run_step(f: NeighborFeed, step: int, rounds: int) -> dict[int, dict[str, set]]:
    """A step as the engine drives it: every round, everyone reads, then everyone posts."""
    views = {}
    for r in range(rounds):
        views[r] = {a: seen(f.local_for(a, step, r)) for a in AGENTS}
        f.ingest([post(a, step) for a in AGENTS], step, r)
    return views


def test_worked_example_three_rounds():
    views = run_step(feed(carry=False), step=1, rounds=3)
    # r=0: nothing from this step - no one has posted yet
    assert all(v == set() for v in views[0].values())
    # r=1: every neighbour's round-0 post
    assert views[1]["a"] == {("b", 1, 0), ("c", 1, 0)}
    assert views[1]["c"] == {("a", 1, 0), ("b", 1, 0), ("d", 1, 0)}
    assert views[1]["d"] == {("c", 1, 0)}
    # r=2: neighbours' round-0 and round-1 posts
    assert views[2]["a"] == {("b", 1, 0), ("c", 1, 0), ("b", 1, 1), ("c", 1, 1)}
    assert views[2]["d"] == {("c", 1, 0), ("c", 1, 1)}
    # an agent never reads its own post, and nobody is e's neighbour
    assert all(author != a for r in views for a, v in views[r].items() for author, _, _ in v)
    assert all(views[r]["e"] == set() for r in views)
    assert all("e" not in {author for author, _, _ in v} for r in views for v in views[r].values())


def test_single_round_never_sees_same_step_posts():
    f = feed(carry=False)
    for step in (1, 2, 3):
        views = run_step(f, step, rounds=1)
        assert all(v == set() for v in views[0].values()), step
    # even after everyone posted this step, round 0 of the same step shows nothing
    assert all(f.local_for(a, 3, 0) == [] for a in AGENTS)


def test_carry_previous_step_shows_last_steps_posts_only():
    f = feed(carry=True)
    run_step(f, 1, rounds=1)
    views = run_step(f, 2, rounds=1)
    assert views[0]["a"] == {("b", 1, 0), ("c", 1, 0)}
    assert views[0]["d"] == {("c", 1, 0)}
    assert views[0]["e"] == set()
    # at step 3 the step-1 posts are two steps old: gone; step 2's are visible
    views = run_step(f, 3, rounds=1)
    assert views[0]["a"] == {("b", 2, 0), ("c", 2, 0)}


def test_carry_and_rounds_combine():
    f = feed(carry=True)
    run_step(f, 1, rounds=2)
    views = run_step(f, 2, rounds=2)
    assert views[0]["d"] == {("c", 1, 0), ("c", 1, 1)}
    assert views[1]["d"] == {("c", 1, 0), ("c", 1, 1), ("c", 2, 0)}


def test_only_post_and_reply_become_messages():
    f = feed()
    actions = [post("a", 1, "move", to=[1, 2]), post("b", 1, "choose_meal", choice="cook"),
               post("c", 1, "post", content="hello"), post("d", 1, "reply", content="hi", reply_to="c")]
    before = [a.model_dump() for a in actions]
    posted = f.ingest(actions, step=1, round_idx=0)
    assert [(m.author_id, m.kind, m.content) for m in posted] == [("c", "post", "hello"), ("d", "reply", "hi")]
    assert posted[1].reply_to == "c"
    # the feed builds messages without validation; they are nonetheless valid, complete messages
    for m in posted:
        assert Message.model_validate(m.model_dump()) == m
    assert posted[0].model_dump() == Message(author_id="c", step=1, round=0, content="hello").model_dump()
    assert [a.model_dump() for a in actions] == before          # passed through untouched
    drained = f.bus.drain()
    assert [m.author_id for m in drained] == ["c", "d"]
    # the move and the meal choice reach nobody
    assert seen(f.local_for("c", 1, 1)) == {("d", 1, 0)}
    assert seen(f.local_for("b", 1, 1)) == {("c", 1, 0)}


def test_drain_returns_in_posting_order_and_clears():
    f = feed()
    f.ingest([post("a", 1), post("b", 1)], 1, 0)
    f.ingest([post("c", 1)], 1, 1)
    first = f.bus.drain()
    assert [(m.author_id, m.step, m.round) for m in first] == [("a", 1, 0), ("b", 1, 0), ("c", 1, 1)]
    assert f.bus.drain() == []
    f.ingest([post("d", 2)], 2, 0)
    assert [m.author_id for m in f.bus.drain()] == ["d"]
    # draining does not take messages off the feed
    assert seen(f.local_for("a", 1, 2)) == {("b", 1, 0), ("c", 1, 1)}


def test_what_a_study_drains_itself_is_kept_for_the_store_once_desim_stores_the_bus():
    f = feed()
    f.ingest([post("a", 1)], 1, 0)
    assert len(f.bus.drain()) == 1 and f.bus.taken == 1             # before desim stored any: counted as lost
    f.ingest([post("b", 1)], 1, 0)
    assert f.bus.drain_columns()["author_id"] == ["b"] and f.bus.taken == 1     # the store's drain
    f.bus.post(Message(author_id="c", step=1, round=1, content={}))
    f.bus.post_batch(1, 2, [], [])                                   # an empty batch posts nothing
    assert len(f.bus.drain()) == 1 and f.bus.taken == 1             # a study's own: kept for the store
    f.bus.post(Message(author_id="d", step=1, round=2, content={}))
    assert f.bus.drain_columns()["author_id"] == ["c", "d"]          # what it took, then the rest, in order
    assert f.bus.drain_columns()["author_id"] == [] and f.bus.drain() == []

    class Quiet(InMemoryMessageBus):                                # a bus whose drain is its rule for the store
        def drain(self):
            return [m for m in super().drain() if m.content != "secret"]

    quiet = Quiet()
    quiet.post(Message(author_id="a", step=1, round=0, content="secret"))
    quiet.post(Message(author_id="b", step=1, round=0, content="shown"))
    assert quiet.drain_columns()["content"] == ["shown"] and quiet.taken == 0
    quiet.post(Message(author_id="c", step=2, round=0, content="secret"))
    quiet.post(Message(author_id="d", step=2, round=0, content="kept"))
    assert [m.content for m in quiet.drain()] == ["kept"]            # the study's drain, by its rule
    assert quiet.drain_columns()["content"] == ["kept"]             # kept for the store, by the same rule


def test_old_steps_are_pruned():
    bus = InMemoryMessageBus(carry_previous_step=True)
    for step in range(1, 6):
        bus.post(Message(author_id="b", step=step, round=0, content=step))
    # steps 4 and 5 may still be read; 1..3 can never be seen again and are gone from memory
    assert bus.stored_steps() == [4, 5]
    # a read that would need them is refused: by the rule it would see step 2 and 3's posts, not nothing
    with pytest.raises(ValueError, match=r"no longer holds step 2's posts, which a read at step 3 would see: "
                                         r"it keeps the latest step posted to \(5\) and the one before"):
        bus.visible_to("a", ["b"], 3, 1)
    assert [m.content for m in bus.visible_to("a", ["b"], 5, 1)] == [4, 5]
    assert len(bus.drain()) == 5                                 # pruning never loses undrained messages


def test_matches_the_rule_on_a_random_graph():
    """The indexed bus returns exactly what the rule, applied to every stored message, returns."""
    rnd = random.Random(3)
    g = nx.gnp_random_graph(30, 0.15, seed=3)
    ids = [f"x{i}" for i in range(30)]
    g = nx.relabel_nodes(g, dict(enumerate(ids)))
    nb = neighbors_fn(g)
    for carry in (False, True):
        bus = InMemoryMessageBus(carry_previous_step=carry)
        everything: list[Message] = []
        for step in range(1, 5):
            for r in range(3):
                for a in ids:
                    want = {(m.author_id, m.step, m.round, m.content) for m in everything
                            if m.author_id in nb(a) and m.author_id != a
                            and ((m.step == step and m.round < r) or (carry and m.step == step - 1))}
                    got = bus.visible_to(a, nb(a), step, r)
                    assert len(got) == len(want)
                    assert {(m.author_id, m.step, m.round, m.content) for m in got} == want
                for a in rnd.sample(ids, 12):
                    for k in range(rnd.randint(1, 2)):
                        m = Message(author_id=a, step=step, round=r, content=f"{a}/{step}/{r}/{k}")
                        bus.post(m)
                        everything.append(m)


# --- through the engine ---------------------------------------------------------------
CHATTER = '''
from desim import Action, DecisionModel, EnvironmentProvider, InMemoryMessageBus, NeighborFeed, Observation, neighbors_fn


class Env(EnvironmentProvider):
    def reset(self, seed):
        self.bus = InMemoryMessageBus(carry_previous_step=False)
        self.feed = NeighborFeed(neighbors_fn(self.ctx.graph), self.bus)
        self.said = {a: 0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, r):
        return [Observation(agent_id=a, step=t, round_idx=r, local_information={
            "feed": sorted([m.author_id, m.step, m.round] for m in self.feed.local_for(a, t, r))}) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.said[a.agent_id] += 1
        self.feed.ingest(actions, self.ctx.step, self.ctx.round_idx)

    def agent_state(self, agent_id):
        return {"said": self.said[agent_id]}


class Talk(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="post",
                       payload={"content": {"round": o.round_idx, "saw": o.local_information["feed"]}})
                for o in observations]
'''


def chatter_study(root, rounds: int, steps: int, record_rounds: bool):
    for sub in ("environment", "population", "simulation"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "model.py").write_text(CHATTER)
    (root / "study.json").write_text(json.dumps({"id": "chatter"}))
    (root / "environment" / "environment.json").write_text(json.dumps({"provider": {"ref": "model:Env"}}))
    (root / "population" / "population.json").write_text(json.dumps({
        "personas": [{"agent_id": f"p{i}"} for i in range(7)],
        "interaction": {"kind": "ring", "k": 2}, "propagation": "contagion"}))
    (root / "simulation" / "simulation.json").write_text(json.dumps({
        "n_steps": steps, "interaction_rounds": rounds, "seed": 1, "record_rounds": record_rounds,
        "decision": {"ref": "model:Talk"}}))
    return load_study(root)


@pytest.fixture
def chatter_run(tmp_path):
    spec = chatter_study(tmp_path / "chatter", rounds=3, steps=12, record_rounds=True)
    db = tmp_path / "chatter.duckdb"
    result = run_study(spec, db_path=db)
    con = duckdb.connect(str(db), read_only=True)
    yield result.run_id, con
    con.close()


def test_twelve_steps_three_rounds_make_twelve_panel_rows(chatter_run):
    run_id, con = chatter_run
    rows = con.execute("SELECT agent_id, count(*), min(step), max(step) FROM panel WHERE run_id = ? "
                       "GROUP BY agent_id ORDER BY agent_id", [run_id]).fetchall()
    assert len(rows) == 7
    assert all(r[1:] == (12, 1, 12) for r in rows)
    # the state counts every round's post: 36 decisions went into each agent's 12 rows
    said = con.execute("SELECT CAST(state.said AS VARCHAR) FROM panel WHERE run_id = ? AND step = 12", [run_id]).fetchall()
    assert {int(s[0]) for s in said} == {36}


def test_messages_table_holds_every_post_of_every_round(chatter_run):
    run_id, con = chatter_run
    rows = con.execute("SELECT step, round, author_id, content FROM messages WHERE run_id = ?", [run_id]).fetchall()
    assert len(rows) == 12 * 3 * 7
    assert {(s, r) for s, r, _, _ in rows} == {(s, r) for s in range(1, 13) for r in range(3)}
    edges = con.execute("SELECT source, target FROM edges WHERE run_id = ?", [run_id]).fetchall()
    nbrs: dict[str, set] = {}
    for a, b in edges:
        nbrs.setdefault(a, set()).add(b)
        nbrs.setdefault(b, set()).add(a)
    for step, rnd, author, content in rows:
        content = json.loads(content)
        assert content["round"] == rnd                      # stored under the round it was posted in
        expected = sorted([b, step, r] for b in nbrs[author] for r in range(rnd))
        assert content["saw"] == expected, (step, rnd, author)


def test_record_rounds_writes_every_round(chatter_run):
    run_id, con = chatter_run
    rows = con.execute("SELECT step, round, count(*), count(DISTINCT agent_id) FROM round_actions "
                       "WHERE run_id = ? GROUP BY step, round ORDER BY step, round", [run_id]).fetchall()
    assert [(s, r) for s, r, _, _ in rows] == [(s, r) for s in range(1, 13) for r in range(3)]
    assert all(n == 7 and d == 7 for _, _, n, d in rows)
    final = con.execute("SELECT agent_id, payload FROM round_actions WHERE run_id = ? AND step = 5 "
                        "AND round = 2 ORDER BY agent_id", [run_id]).fetchall()
    panel = con.execute("SELECT agent_id, payload FROM panel WHERE run_id = ? AND step = 5 "
                        "ORDER BY agent_id", [run_id]).fetchall()
    assert final == panel and all(isinstance(p, dict) for _, p in final)


KEEPER = CHATTER + '''

class Keeper(Env):
    """Keeps its own record of every post with bus.drain() at each step's close (the seed's words)."""

    def reset(self, seed):
        super().reset(seed)
        self.kept = []

    def end_step(self, t):
        self.kept += self.bus.drain()

    def agent_state(self, agent_id):
        return {"said": self.said[agent_id], "kept": len(self.kept)}


class KeeperThatStores(Keeper):
    """The same, handing what it drained to the store itself."""

    def reset(self, seed):
        super().reset(seed)
        self.mine = []

    def end_step(self, t):
        self.mine = self.bus.drain()
        self.kept += self.mine

    def drain_messages(self):
        return self.mine
'''


AHEAD = (CHATTER + '''

class Ahead(Env):
    """Posts one message stamped with a step that has not come yet."""

    def end_step(self, t):
        if t == 2:
            self.bus.post(Message(author_id="ghost", step=99, round=7, content={}))
''').replace("from desim import Action,", "from desim import Message, Action,", 1)


def test_a_message_stamped_with_a_later_step_fails_the_run_naming_it(tmp_path):
    spec = chatter_study(tmp_path / "ahead", rounds=2, steps=4, record_rounds=False)
    (spec.root / "model.py").write_text(AHEAD)
    (spec.root / "environment" / "environment.json").write_text(json.dumps({"provider": {"ref": "model:Ahead"}}))
    db = tmp_path / "ahead.duckdb"
    with pytest.raises(RunFailed) as failed:
        run_study(load_study(spec.root), db_path=db)
    assert "step 2: a message by 'ghost' is stamped step 99, after the step it was posted in" in str(failed.value)
    with duckdb.connect(str(db), read_only=True) as con:       # the steps before it are kept
        assert con.execute("SELECT max(step) FROM panel").fetchone() == (1,)


def keeper_run(tmp_path, env: str):
    spec = chatter_study(tmp_path / env, rounds=3, steps=4, record_rounds=False)
    (spec.root / "model.py").write_text(KEEPER)
    (spec.root / "environment" / "environment.json").write_text(json.dumps({"provider": {"ref": f"model:{env}"}}))
    return load_study(spec.root), tmp_path / f"{env}.duckdb"


@pytest.mark.parametrize("env", ["Keeper", "KeeperThatStores"])
def test_a_study_that_drains_the_bus_itself_as_the_seed_says_loses_nothing(tmp_path, env):
    """The seed persists messages "via bus.drain()": a study doing that at each step's close stopped the run
    (the messages table would have lost them). desim now keeps what a study drains for the store, so the
    table is whole either way, and a study handing its own drain to the store (drain_messages) counts once."""
    spec, db = keeper_run(tmp_path, env)
    result = run_study(spec, db_path=db)
    with duckdb.connect(str(db), read_only=True) as con:
        (stored,) = con.execute("SELECT count(*) FROM messages WHERE run_id = ?", [result.run_id]).fetchone()
        (distinct,) = con.execute("SELECT count(DISTINCT (step, round, author_id)) FROM messages WHERE run_id = ?",
                                  [result.run_id]).fetchone()
        (kept,) = con.execute("SELECT DISTINCT CAST(state.kept AS INTEGER) FROM panel WHERE run_id = ? AND step = 4",
                              [result.run_id]).fetchone()
    assert stored == distinct == kept == 4 * 3 * 7


def test_a_study_that_drains_before_desim_stores_anything_is_told(tmp_path):
    """Posts drained in reset, before step 0's messages are stored, cannot be kept for the table: said."""
    spec, db = keeper_run(tmp_path, "Keeper")
    model = spec.root / "model.py"
    model.write_text(model.read_text().replace(
        "        super().reset(seed)\n        self.kept = []",
        "        super().reset(seed)\n        self.bus.post(Message(author_id='p0', step=0, round=0, content={}))\n"
        "        self.kept = list(self.bus.drain())", 1).replace("from desim import Action,",
                                                              "from desim import Message, Action,", 1))
    with pytest.raises(Exception) as failed:        # at set-up: nothing recorded
        run_study(load_study(spec.root), db_path=db)
    assert not db.exists()
    assert re.search(r"1 messages were drained from Keeper's InMemoryMessageBus before desim stored them \(the "
                     r"study calls bus\.drain\(\) itself, at model\.py:\d+\)", str(failed.value)), str(failed.value)


@pytest.mark.parametrize("where", ["renamed", "feed_only", "two_buses"])
def test_every_bus_the_environment_holds_is_stored_whatever_its_name(tmp_path, where):
    """The seed lets the environment own its bus under any name: a bus kept as ``self.chatter``, or only
    inside its ``NeighborFeed``, had its messages silently left out of the table (0 stored of 63)."""
    spec = chatter_study(tmp_path / where, rounds=3, steps=3, record_rounds=False)
    model = CHATTER
    if where == "renamed":
        model = model.replace("self.bus", "self.chatter")
    elif where == "feed_only":
        model = model.replace("self.bus = InMemoryMessageBus(carry_previous_step=False)\n        ", "").replace(
            "NeighborFeed(neighbors_fn(self.ctx.graph), self.bus)",
            "NeighborFeed(neighbors_fn(self.ctx.graph), InMemoryMessageBus(carry_previous_step=False))")
    else:       # a second feed, in a dict by channel, over a bus of its own: both buses' posts are stored
        model = model.replace("        self.said = {", "        self.side = {'gossip': NeighborFeed(neighbors_fn(self.ctx.graph), "
                              "InMemoryMessageBus())}\n        self.said = {").replace(
            "        self.feed.ingest(actions, self.ctx.step, self.ctx.round_idx)",
            "        self.feed.ingest(actions, self.ctx.step, self.ctx.round_idx)\n"
            "        self.side['gossip'].ingest(actions[:1], self.ctx.step, self.ctx.round_idx)")
    assert model != CHATTER
    (spec.root / "model.py").write_text(model)
    db = tmp_path / f"{where}.duckdb"
    run_id = run_study(load_study(spec.root), db_path=db).run_id
    with duckdb.connect(str(db), read_only=True) as con:
        (stored,) = con.execute("SELECT count(*) FROM messages WHERE run_id = ?", [run_id]).fetchone()
    assert stored == 3 * 3 * 7 + (3 * 3 if where == "two_buses" else 0)


def test_rounds_leave_no_trace_without_record_rounds(tmp_path):
    spec = chatter_study(tmp_path / "quiet", rounds=2, steps=2, record_rounds=False)
    db = tmp_path / "quiet.duckdb"
    run_id = run_study(spec, db_path=db).run_id
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM round_actions WHERE run_id = ?", [run_id]).fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM messages WHERE run_id = ?", [run_id]).fetchone()[0] == 2 * 2 * 7
    finally:
        con.close()


# --- the columnar feed gives what the per-agent bus gives -------------------------------
def _random_posts(rnd: random.Random, n: int, share: float) -> list[int]:
    return sorted(rnd.sample(range(n), int(n * share)))


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("carry", [False, True])
def test_columnar_feed_equals_in_memory_bus(directed, carry):
    import numpy as np

    from desim.messaging.columnar import ColumnarFeed
    rnd = random.Random(11)
    n = 40
    g = nx.gnp_random_graph(n, 0.12, seed=5, directed=directed)
    g.add_edge(3, 3)                                            # a self-loop is never heard
    ids = [f"v{i:02d}" for i in range(n)]
    g = nx.relabel_nodes(g, dict(enumerate(ids)))
    objects = NeighborFeed(neighbors_fn(g), InMemoryMessageBus(carry_previous_step=carry))
    columns = ColumnarFeed.from_graph(g, ids, carry_previous_step=carry)
    for step in range(1, 5):
        for r in range(3):
            asked = np.array(_random_posts(rnd, n, 0.6) if r == 1 else list(range(n)))
            got = columns.visible(asked, step, r)
            assert len(got.offsets) == len(asked) + 1
            for i, p in enumerate(asked):
                lo, hi = got.offsets[i], got.offsets[i + 1]
                assert set(got.recipient[lo:hi].tolist()) <= {i}
                mine = list(zip([ids[a] for a in got.author[lo:hi]], got.step[lo:hi].tolist(),
                                got.round[lo:hi].tolist(), got.column("x")[lo:hi].tolist()))
                ref = [(m.author_id, m.step, m.round, m.content["x"]) for m in objects.local_for(ids[p], step, r)]
                assert mine == ref, (step, r, ids[p])      # same messages, same order
                assert got.sum("x")[i] == pytest.approx(sum(x for *_, x in ref))
            for block in (7, 1 << 15):                   # several blocks, and one
                count, total = columns.neighbour_sum(asked, step, r, "x", block=block)
                assert count.tolist() == got.counts().tolist()
                assert total == pytest.approx(got.sum("x"))
            authors = list(range(n)) if step == 3 else _random_posts(rnd, n, 0.5)   # step 3: everyone posts
            xs = [rnd.random() for _ in authors]
            objects.ingest([Action(agent_id=ids[a], step=step, kind="post", payload={"content": {"x": x}})
                            for a, x in zip(authors, xs)], step, r)
            columns.post(np.array(authors), step, r, {"x": np.array(xs)})
        drained = columns.drain()
        ref = objects.bus.drain()
        assert drained.column("author_id").to_pylist() == [m.author_id for m in ref]
        assert drained.column("round").to_pylist() == [m.round for m in ref]
        assert [c["x"] for c in drained.column("content").to_pylist()] == [m.content["x"] for m in ref]
        assert columns.drain().num_rows == 0
    assert columns.stored_steps() == [3, 4]


def test_columnar_feed_sums_and_refuses_double_posts():
    import numpy as np

    from desim.messaging.columnar import ColumnarFeed
    columns = ColumnarFeed.from_graph(GRAPH, AGENTS)
    columns.post(np.array([0, 1, 2, 3]), 1, 0, {"v": np.array([1.0, 2.0, 4.0, 8.0])})
    seen_now = columns.visible(np.arange(5), 1, 1)
    # a hears b, c; b hears a, c; c hears a, b, d; d hears c; e nobody
    assert seen_now.sum("v").tolist() == [6.0, 5.0, 11.0, 4.0, 0.0]
    assert seen_now.counts().tolist() == [2, 2, 3, 1, 0]
    assert np.isnan(seen_now.mean("v")[4])
    assert columns.visible(np.arange(5), 1, 0).counts().tolist() == [0] * 5
    with pytest.raises(ValueError, match="posts twice"):
        columns.post(np.array([2, 2]), 1, 1, {"v": np.array([1.0, 1.0])})
    with pytest.raises(ValueError, match="kind 'move'"):
        columns.post(np.array([2]), 1, 1, {"v": np.array([1.0])}, kind="move")
    assert [m.author_id for m in columns.drain_messages()] == ["a", "b", "c", "d"]


def test_the_run_counts_every_message_it_stores_those_posted_at_reset_included(study_copy):
    root = study_copy("opinion_diffusion")
    result = run_study(load_study(root, steps=2, params={"n_agents": 40}))
    with duckdb.connect(str(result.store_path), read_only=True) as con:
        by_step = dict(con.execute("SELECT step, count(*) FROM messages WHERE run_id = ? GROUP BY step",
                                   [result.run_id]).fetchall())
    assert by_step[0] == 40                              # everyone states an opinion at reset
    assert result.counters["messages"] == sum(by_step.values())


def test_export_writes_every_rounds_actions_when_the_run_recorded_them(tmp_path):
    import pyarrow.csv as pcsv
    from desim.store.export import export
    spec = chatter_study(tmp_path / "chatter", rounds=3, steps=2, record_rounds=True)
    result = run_study(spec)
    written = {p.name for p in export(spec.root, tmp_path / "out", fmt="csv")}
    assert "round_actions.csv" in written and "llm_calls.csv" not in written      # no LLM: no empty file
    rows = pcsv.read_csv(tmp_path / "out" / "round_actions.csv").to_pylist()
    with duckdb.connect(str(result.store_path), read_only=True) as con:
        (stored,) = con.execute("SELECT count(*) FROM round_actions").fetchone()
    assert len(rows) == stored == 2 * 3 * 7 and {r["round"] for r in rows} == {0, 1, 2}


def test_what_counts_as_an_environments_bus():
    """self.bus whatever its type (a bus of the study's own that cannot be drained fails loudly, as it did);
    other attributes only if they are desim's buses or feeds over them, alone or in a collection of any size;
    anything else (a mock whose every attribute is callable, a dict of values) is not a bus."""
    from unittest import mock

    from desim.study.contract import EnvironmentProvider, message_buses

    class Env(EnvironmentProvider):
        pass

    env = Env()
    env.own = InMemoryMessageBus()
    env.feeds = {f"channel{i}": NeighborFeed(lambda a: [], InMemoryMessageBus()) for i in range(65)}
    env.opinions = {f"a{i}": 0.5 for i in range(1000)}
    env.helper = mock.MagicMock()
    assert len(message_buses(env)) == 66
    env.bus = object()
    assert message_buses(env)[0] is env.bus
    with pytest.raises(AttributeError):
        env.drain_messages()
