"""``desim.run.memory``: each agent remembers its own last ``window`` final-round actions however
many steps ago, checked against a reference with one ``collections.deque(maxlen=window)``
per agent over long random sequences of steps with agents absent; ``for_batch`` as a
sequence; and one run through the engine with an agent away on an errand."""
from __future__ import annotations

import json
import random
from collections import deque

import pytest

from desim import Action, load_study, run_study
from desim.run.memory import Memory
from desim.study.refs import study_module


def act(agent: str, step: int, n: int = 0) -> Action:
    return Action(agent_id=agent, step=step, kind="say", payload={"n": n})


class Reference:
    """One deque per agent: what the memory must hold."""

    def __init__(self, ids, window):
        self.d = {a: deque(maxlen=window) for a in ids}

    def push(self, actions):
        for a in actions:
            self.d[a.agent_id].append(a)

    def of(self, agent):
        return list(self.d[agent])


def same(got: list, want: list) -> bool:
    return len(got) == len(want) and all(g is w for g, w in zip(got, want))


@pytest.mark.parametrize("window", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", range(4))
def test_matches_one_deque_per_agent(window, seed):
    rnd = random.Random(seed * 10 + window)
    ids = [f"a{i}" for i in range(12)]
    mem, ref = Memory(ids, window), Reference(ids, window)
    absent_long = rnd.choice(ids)                   # one agent away for a long stretch
    for step in range(1, 301):
        p_present = rnd.choice([1.0, 1.0, 0.9, 0.5, 0.1, 0.0])
        present = [a for a in ids if rnd.random() < p_present]
        if 50 <= step < 150 and absent_long in present:
            present.remove(absent_long)
        rnd.shuffle(present)                          # any order within a step
        actions = [act(a, step, rnd.randrange(1000)) for a in present]
        mem.push(actions)
        ref.push(actions)
        for a in ids:
            assert same(mem.of(a), ref.of(a)), (step, a)
        if step == 149:                               # still away: what it holds is from before step 50
            held = mem.of(absent_long)
            assert held and all(x.step < 50 for x in held)
        batch = rnd.sample(ids, rnd.randint(0, len(ids)))
        got = mem.for_batch(batch)
        assert len(got) == len(batch)
        for i, a in enumerate(batch):
            assert same(got[i], ref.of(a)), (step, a)


def test_an_agent_away_for_many_steps_keeps_what_it_did_before():
    ids = ["a", "b", "c"]
    mem = Memory(ids, 2)
    before = [act("a", 1, 1), act("a", 2, 2)]
    mem.push([before[0], act("b", 1), act("c", 1)])
    mem.push([before[1], act("b", 2), act("c", 2)])
    for step in range(3, 60):                        # a is away; everyone else acts every step
        mem.push([act("b", step), act("c", step)])
    assert same(mem.of("a"), before)
    assert [x.step for x in mem.of("b")] == [58, 59]
    back = act("a", 60, 3)
    mem.push([back, act("b", 60), act("c", 60)])
    assert same(mem.of("a"), [before[1], back])
    assert mem.of("nobody") == []


def test_oldest_first_and_only_the_last_window():
    ids = ["a"]
    mem = Memory(ids, 3)
    pushed = [act("a", s, s) for s in range(1, 8)]
    for x in pushed:
        mem.push([x])
    assert same(mem.of("a"), pushed[-3:])
    assert [x.payload["n"] for x in mem.of("a")] == [5, 6, 7]
    first = Memory(ids, 3)
    first.push([pushed[0]])
    assert same(first.of("a"), pushed[:1])                # fewer than window steps so far


def test_window_zero_remembers_nothing():
    ids = ["a", "b"]
    mem = Memory(ids, 0)
    for step in range(1, 5):
        mem.push([act("a", step), act("b", step)])
    assert mem.of("a") == [] and mem.of("b") == []
    batch = mem.for_batch(["b", "a", "b"])
    assert len(batch) == 3
    assert list(batch) == [[], [], []] and batch == [[], [], []]


def test_for_batch_is_a_sequence():
    ids = ["a", "b", "c", "d"]
    mem, ref = Memory(ids, 2), Reference(ids, 2)
    for step, present in enumerate([["a", "b", "c", "d"], ["a", "c"], ["d", "a"], ["b"]], start=1):
        actions = [act(x, step) for x in present]
        mem.push(actions)
        ref.push(actions)
    order = ["d", "b", "a", "c", "a"]
    want = [ref.of(x) for x in order]
    got = mem.for_batch(order)
    assert len(got) == 5
    assert got == want and want == got                     # both directions
    assert not (got != want)
    assert got != [ref.of(x) for x in reversed(order)]
    assert got != want[:-1] and got != want + [[]]
    assert got != "not a sequence of memories" and got != 3
    assert list(got) == want and [m for m in got] == want
    assert got[0] == want[0] and got[-1] == want[-1] and got[2] == want[2]
    assert got[1:3] == want[1:3] and got[::2] == want[::2] and got[::-1] == want[::-1]
    assert got[10:] == []
    with pytest.raises(IndexError):
        got[5]
    assert list(reversed(got)) == want[::-1]
    assert want[1] in got and got.index(want[1]) == 1
    assert mem.for_batch([]) == [] and len(mem.for_batch([])) == 0
    # each item is a plain list: changing it does not change the memory
    got[0].append("junk")
    assert mem.of("d") == ref.of("d")


def test_a_batch_taken_before_a_push_still_reads_what_it_held():
    """``decide_batch`` has always received a list of lists: what each agent remembered when
    it decided. A model that keeps its ``memories`` (to log or explain a decision later) must
    still read that, not the memory of a later step."""
    ids = ["a", "b"]
    mem = Memory(ids, 2)
    mem.push([act("a", 1), act("b", 1)])
    held = mem.for_batch(["a", "b"])
    snapshot = [list(m) for m in held]
    mem.push([act("a", 2), act("b", 2)])
    mem.push([act("a", 3), act("b", 3)])
    assert held == snapshot


# --- through the engine -----------------------------------------------------------------------
MODEL = '''
from desim import Action, DecisionModel, EnvironmentProvider, Observation

DECIDED = []        # (step, round, agent, payload): every action returned
SEEN = []           # (step, round, agent, [(step, round) of each remembered action]) as received
HELD = []           # (step, round, ids, the memories object itself)


class Env(EnvironmentProvider):
    def reset(self, seed):
        DECIDED.clear(); SEEN.clear(); HELD.clear()
        self.last = {a: None for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, r):
        return [Observation(agent_id=a, step=t, round_idx=r) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.last[a.agent_id] = a.payload["round"]
        t, r = self.ctx.step, self.ctx.round_idx
        if t == self.ctx.params["leave_at"] and r == self.ctx.rounds - 1:
            self.ctx.occupy("p1", self._errand())

    def _errand(self):
        yield self.ctx.sim.timeout(self.ctx.params["away_for"])

    def agent_state(self, agent_id):
        return {"last_round": self.last[agent_id]}


class Remember(DecisionModel):
    def decide_batch(self, observations, memories):
        out = []
        HELD.append((observations[0].step, observations[0].round_idx,
                     [o.agent_id for o in observations], memories))
        for o, m in zip(observations, memories):
            SEEN.append((o.step, o.round_idx, o.agent_id, [(x.step, x.payload["round"]) for x in m]))
            payload = {"round": o.round_idx, "at": [o.step, o.round_idx]}
            out.append(Action(agent_id=o.agent_id, step=o.step, kind="say", payload=payload))
            DECIDED.append((o.step, o.round_idx, o.agent_id, payload))
        return out
'''


def errand_study(root, *, n_steps=9, rounds=2, window=2, leave_at=3, away_for=2.5):
    for sub in ("environment", "population", "simulation"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "model.py").write_text(MODEL)
    (root / "study.json").write_text(json.dumps({"id": root.name}))
    (root / "environment" / "environment.json").write_text(json.dumps({"provider": {"ref": "model:Env"}}))
    (root / "population" / "population.json").write_text(json.dumps({
        "personas": [{"agent_id": f"p{i}"} for i in range(4)], "interaction": {"kind": "ring", "k": 2}}))
    (root / "simulation" / "simulation.json").write_text(json.dumps({
        "n_steps": n_steps, "interaction_rounds": rounds, "seed": 3, "memory_window": window,
        "parameters": {"leave_at": leave_at, "away_for": away_for},
        "decision": {"ref": "model:Remember"}}))
    return root


@pytest.fixture
def errand_run(tmp_path):
    root = errand_study(tmp_path / "errand")
    run_study(load_study(root), db_path=tmp_path / "errand.duckdb")
    return study_module(root)


def test_memory_through_the_engine_survives_an_errand(errand_run):
    module = errand_run
    rounds, window = 2, 2
    present = {}
    for step, r, agent, _ in module.DECIDED:
        present.setdefault(step, set()).add(agent) if r == rounds - 1 else None
    # p1 left after step 3 and came back for step 6: it decided nothing in steps 4 and 5
    p1_steps = sorted({s for s, _, a, _ in module.DECIDED if a == "p1"})
    assert p1_steps == [1, 2, 3, 6, 7, 8, 9]
    assert all(present[s] == {"p0", "p1", "p2", "p3"} for s in (1, 2, 3, 6))
    assert present[4] == present[5] == {"p0", "p2", "p3"}

    # the reference: one deque per agent fed each closed step's final-round actions
    ref = {a: deque(maxlen=window) for a in ("p0", "p1", "p2", "p3")}
    final: dict[int, list] = {}
    for step, r, agent, payload in module.DECIDED:
        if r == rounds - 1:
            final.setdefault(step, []).append((agent, payload))
    expected = {}
    for step in range(1, 10):
        for r in range(rounds):
            for a in ref:
                expected[(step, r, a)] = [(s, p["round"]) for s, p in ref[a]]
        for agent, payload in final.get(step, []):
            ref[agent].append((step, payload))
    assert len(module.SEEN) == len(module.DECIDED)
    for step, r, agent, seen in module.SEEN:
        assert seen == expected[(step, r, agent)], (step, r, agent)

    # and in plain words: back at step 6, p1 remembers steps 2 and 3 (final round only);
    # the others remember steps 4 and 5
    at6 = {a: m for s, r, a, m in module.SEEN if s == 6 and r == 0}
    assert at6["p1"] == [(2, 1), (3, 1)]
    assert at6["p0"] == at6["p2"] == at6["p3"] == [(4, 1), (5, 1)]
    at7 = {a: m for s, r, a, m in module.SEEN if s == 7 and r == 1}
    assert at7["p1"] == [(3, 1), (6, 1)]


def test_memories_kept_by_the_model_still_read_as_received(errand_run):
    """A decision model that keeps the ``memories`` it was handed reads, after the run, what it
    was handed (see test_a_batch_taken_before_a_push_still_reads_what_it_held)."""
    module = errand_run
    seen = {(s, r, a): m for s, r, a, m in module.SEEN}
    for step, r, ids, memories in module.HELD:
        now = [[(x.step, x.payload["round"]) for x in m] for m in memories]
        assert now == [seen[(step, r, a)] for a in ids], (step, r)
