"""Branches of multi-round studies, fork steps at the edges of a run, what a branch says about its replayed
steps, and the files that make a version (found by a newcomer walkthrough of branches and versions)."""
from __future__ import annotations

import json

import duckdb
import pytest

import desim
from desim.cli import main
from desim.experiments.branches import BranchRefused, branch
from desim.experiments.effects import EffectError, run_effect
from storeq import sql, store_path
from tiny_study import write_tiny_study

MODEL = '''
from desim import (Action, DecisionModel, EnvironmentProvider, InMemoryMessageBus, Message, MetricCollector, NeighborFeed,
                   Observation, neighbors_fn)


class Talk(EnvironmentProvider):
    """Agents post a lean (a nested dict) in the rounds before the last and settle in the last."""

    def reset(self, seed):
        self.x = {a: 0.0 for a in self.ctx.agent_ids}
        self.lean = {a: None for a in self.ctx.agent_ids}
        self.bus = InMemoryMessageBus()
        self.feed = NeighborFeed(neighbors_fn(self.ctx.graph), self.bus)

    def observe_batch(self, ids, t, round_idx):
        heard = self.feed.contents(ids, t, round_idx)
        return [Observation(agent_id=a, step=t, round_idx=round_idx, local_physical={"x": self.x[a]},
                            local_information={"heard": [m["lean"]["v"] for m in h]}) for a, h in zip(ids, heard)]

    def apply(self, actions):
        for a in actions:
            if a.kind == "post":
                self.lean[a.agent_id] = a.payload["content"]["lean"]["v"]     # a dict, in replay too
            else:
                self.x[a.agent_id] = a.payload["x"]
        self.feed.ingest(actions, self.ctx.step, self.ctx.round_idx)

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id], "lean": self.lean[agent_id]}


class Seeing(Talk):
    """Talk, and the panel keeps the step at which each agent last observed (state set in observe_batch)."""

    def reset(self, seed):
        super().reset(seed)
        self.seen = {a: 0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        for a in ids:
            self.seen[a] = t
        return super().observe_batch(ids, t, round_idx)

    def agent_state(self, agent_id):
        return {**super().agent_state(agent_id), "seen": self.seen[agent_id]}


class Announcing(Talk):
    """Talk, and agent a0 announces each round from observe_batch: a post no replayed step makes."""

    def observe_batch(self, ids, t, round_idx):
        self.bus.post(Message(author_id="a0", step=t, round=round_idx, content={"lean": {"v": 0.5}}))
        return super().observe_batch(ids, t, round_idx)


class Lean(DecisionModel):
    def decide_batch(self, observations, memories):
        rng, push = self.ctx.rng("lean"), self.ctx.interventions.value("push", 0.0)
        out = []
        for o in observations:
            heard = o.local_information["heard"]
            v = round(o.local_physical["x"] + push + float(rng.random()) + sum(heard) / (1 + len(heard)), 6)
            if o.round_idx == self.ctx.rounds - 1:
                out.append(Action(agent_id=o.agent_id, step=o.step, kind="settle", payload={"x": v}))
            else:
                out.append(Action(agent_id=o.agent_id, step=o.step, kind="post",
                                  payload={"content": {"lean": {"v": v}}}))
        return out


class Mean(MetricCollector):
    def collect(self, t, environment, actions):
        xs = list(environment.x.values())
        return {"mean_x": sum(xs) / len(xs)}
'''


def talk_study(root, *, env="Talk", rounds=2, record_rounds=True, n_steps=5, stop_when=None):
    for sub in ("simulation", "population", "environment"):
        (root / sub).mkdir(parents=True)
    (root / "model.py").write_text(MODEL)
    (root / "study.json").write_text(json.dumps({"id": root.name, "display_metrics": ["mean_x"]}))
    sim = {"n_steps": n_steps, "interaction_rounds": rounds, "record_rounds": record_rounds, "seed": 3,
           "decision": {"ref": "model:Lean"}, "collector": {"ref": "model:Mean"}, "parameters": {"push_at": 3}}
    if stop_when:
        sim["stop_when"] = stop_when
    (root / "simulation" / "simulation.json").write_text(json.dumps(sim))
    (root / "population" / "population.json").write_text(json.dumps({
        "personas": [{"agent_id": f"a{i}"} for i in range(6)], "interaction": {"kind": "ring", "k": 2}}))
    (root / "environment" / "environment.json").write_text(json.dumps({
        "provider": {"ref": f"model:{env}"}, "layers": {"push": 0.0},
        "scheduled_events": [{"at_step": "$push_at", "name": "push", "target": "push", "op": "set", "value": 1.0}]}))
    return root


def rows(root, run_id, below=None):
    cut = f" AND step < {int(below)}" if below else ""
    return sql(root, f"SELECT step, agent_id, state::VARCHAR, action_kind, payload::VARCHAR FROM panel "
                     f"WHERE run_id = '{run_id}'{cut} ORDER BY step, agent_id")


# --- multi-round branches ---------------------------------------------------------------------------------
def test_a_multi_round_branch_replays_a_nested_post_payload_as_the_dict_it_was(tmp_path):
    """The posts' ``content`` is a nested dict found only in the rounds before the last: the replay took the
    payload's stored kinds from the panel (the final round's actions), so it handed ``apply`` JSON text."""
    root = talk_study(tmp_path / "talk")
    parent = desim.run_study(desim.load_study(root))
    child = branch(root, parent.run_id, 4)
    assert child.status == "completed", child.error
    assert rows(root, child.run_id, below=4) == rows(root, parent.run_id, below=4)
    assert child.warnings == []
    same = branch(root, parent.run_id, 3)       # no treatment: the branch is its parent, every step
    assert rows(root, same.run_id) == rows(root, parent.run_id)


def test_a_branch_at_step_1_replays_nothing_so_needs_no_recorded_rounds(tmp_path):
    root = talk_study(tmp_path / "talk", record_rounds=False)
    parent = desim.run_study(desim.load_study(root))
    child = branch(root, parent.run_id, 1, params={"push_at": 2})
    assert child.status == "completed" and child.steps_done == 5
    assert sql(root, f"SELECT step FROM events WHERE run_id = '{child.run_id}'") == [(2,)]
    with pytest.raises(BranchRefused, match="record_rounds: true"):
        branch(root, parent.run_id, 2)                  # from step 2 on, rounds are replayed


def test_an_effect_from_step_1_of_a_multi_round_study_needs_no_recorded_rounds(tmp_path):
    root = talk_study(tmp_path / "talk", record_rounds=False, n_steps=3)
    effect = run_effect(root, 1, {"push_at": 2}, replicates=2, workers=1)
    assert effect.completed == 2 and not effect.errors
    with pytest.raises(EffectError, match="record_rounds: true"):
        run_effect(root, 2, {"push_at": 2}, replicates=2, workers=1)


# --- fork steps at the edges of a run ----------------------------------------------------------------------
def test_a_fork_after_the_parents_last_step_is_refused_naming_the_steps_not_record_rounds(tmp_path):
    root = talk_study(tmp_path / "talk")
    parent = desim.run_study(desim.load_study(root)).run_id
    with pytest.raises(BranchRefused, match=r"--at-step 9 is after run r\w+'s last step 5: .* forks at 1\.\.6") as e:
        branch(root, parent, 9)
    assert "record_rounds" not in str(e.value)
    with pytest.raises(BranchRefused, match=r"--at-step 6 is after the branch's last step 5: .*--steps N, N >= 6"):
        branch(root, parent, 6)
    longer = branch(root, parent, 6, steps=7)           # the last step + 1, run longer: steps 6 and 7 decided
    assert longer.status == "completed" and longer.steps_done == 7
    assert rows(root, longer.run_id, below=6) == rows(root, parent, below=6)


def test_steps_0_is_refused_not_taken_for_the_parents_steps(tmp_path):
    root = talk_study(tmp_path / "talk")
    parent = desim.run_study(desim.load_study(root)).run_id
    with pytest.raises(BranchRefused, match="--steps must be 1 or more, got 0"):
        branch(root, parent, 2, steps=0)
    assert sql(root, "SELECT count(*) FROM runs") == [(1,)]


def test_a_run_that_ended_with_its_process_is_forked_only_inside_it(tmp_path):
    root = talk_study(tmp_path / "talk", stop_when=[{"metric": "mean_x", "op": ">", "value": 1.0}])
    parent = desim.run_study(desim.load_study(root))
    last = parent.steps_done
    assert parent.end_reason and last < 5
    with pytest.raises(BranchRefused, match=rf"ended at step {last} \(stop_when: .*forks at a step inside it, "
                                            rf"1\.\.{last}, not {last + 1}"):
        branch(root, parent.run_id, last + 1)
    assert branch(root, parent.run_id, last).status == "completed"


def test_the_branch_command_says_what_it_replayed_and_decided(tmp_path, capsys):
    root = talk_study(tmp_path / "talk")
    parent = desim.run_study(desim.load_study(root)).run_id
    assert main(["branch", str(root), "--from-run", parent, "--at-step", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "no step replayed (a branch at step 1 runs from step 0), 1..5 decided" in out and "1..0" not in out
    assert main(["branch", str(root), "--from-run", parent, "--at-step", "0", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("desim: error: --at-step must be 1 or more, got 0")


# --- a replayed step that is not its parent's -------------------------------------------------------------
def test_a_branch_whose_replayed_step_differs_from_its_parent_says_so(tmp_path, capsys):
    root = talk_study(tmp_path / "seeing", env="Seeing")
    parent = desim.run_study(desim.load_study(root)).run_id
    child = branch(root, parent, 4)
    assert child.status == "completed" and len(child.warnings) == 1
    assert child.warnings[0].startswith("the branch's replayed step 3 is not its parent's: seen in 6 of 6 rows "
                                        "(agent a0: 3 -> 0)")
    assert "observe_batch" in child.warnings[0]
    assert main(["branch", str(root), "--from-run", parent, "--at-step", "4", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: the branch's replayed step 3 is not its parent's: seen in 6 of 6 rows")
    # a warm start in simulation.json is the same branch, and desim run says the same
    path = root / "simulation" / "simulation.json"
    sim = json.loads(path.read_text())
    path.write_text(json.dumps({**sim, "warm_start": {"from_run": parent, "at_step": 4}}))
    assert main(["run", str(root), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "warning: the branch's replayed step 3 is not its parent's: seen in 6 of 6 rows" in err


def test_a_branch_whose_replayed_step_lacks_posts_made_in_observe_batch_says_so(tmp_path):
    root = talk_study(tmp_path / "announcing", env="Announcing")
    parent = desim.run_study(desim.load_study(root)).run_id
    child = branch(root, parent, 4)
    assert child.status == "completed" and len(child.warnings) == 1
    n = sql(root, f"SELECT count(*) FROM messages WHERE run_id = '{parent}' AND step = 3")[0][0]
    m = sql(root, f"SELECT count(*) FROM messages WHERE run_id = '{child.run_id}' AND step = 3")[0][0]
    assert m < n
    assert f"messages ({n} in the parent, {m} in the branch)" in child.warnings[0]


# --- what makes a version ---------------------------------------------------------------------------------
def test_a_data_file_the_code_reads_is_part_of_the_version(tmp_path, capsys):
    root = talk_study(tmp_path / "talk")
    (root / "prices.txt").write_text("1 2 3\n")
    parent = desim.run_study(desim.load_study(root)).run_id
    (root / "README.md").write_text("notes on the study\n")      # documentation is not an input
    (root / "figure.png").write_bytes(b"\x89PNG")
    (root / "cache.txt").write_text("written by a run")       # a data file added since: the parent never read it
    assert branch(root, parent, 3).status == "completed"
    (root / "helpers.py").write_text("X = 1\n")                # a module added since: code may import it
    with pytest.raises(BranchRefused, match=r"helpers\.py \(added\)"):
        branch(root, parent, 3)
    (root / "helpers.py").unlink()
    (root / "prices.txt").write_text("1 2 4\n")
    with pytest.raises(BranchRefused, match=r"prices\.txt \(edited\)"):
        branch(root, parent, 3)
    desim.run_study(desim.load_study(root))             # a new version
    assert main(["runs", str(root)]) == 0
    assert "prices.txt edited" in capsys.readouterr().out


def test_a_branch_of_a_multi_round_branch_replays_the_rounds_of_both(tmp_path):
    """A branch stores the rounds of the steps it decided; those of the steps it replayed are its parent's.
    A branch of it after its fork was refused for want of rounds of the steps 1..T-1 it never stored."""
    root = talk_study(tmp_path / "talk", n_steps=6)
    parent = desim.run_study(desim.load_study(root)).run_id
    first = branch(root, parent, 3, params={"push_at": 4})
    second = branch(root, first.run_id, 5)
    assert second.status == "completed" and second.warnings == []
    assert rows(root, second.run_id) == rows(root, first.run_id)        # no treatment: the first branch again
    assert rows(root, second.run_id, below=3) == rows(root, parent, below=3)
    third = branch(root, second.run_id, 6)                              # and a branch of that one
    assert third.status == "completed" and third.warnings == []
    assert rows(root, third.run_id) == rows(root, first.run_id)
    assert sql(root, f"SELECT step FROM events WHERE run_id = '{third.run_id}' ORDER BY step") == [(4,)]
    # each branch's round_actions are whole, as its panel is: the replayed steps' rounds are its parent's
    rounds = ("SELECT step, round, agent_id, action_kind, payload::VARCHAR FROM round_actions WHERE run_id = ? "
              "ORDER BY ALL")
    for child, parent_of in ((first.run_id, parent), (second.run_id, first.run_id), (third.run_id, second.run_id)):
        got, want = sql(root, rounds, [child]), sql(root, rounds, [parent_of])
        assert sorted({r[0] for r in got}) == list(range(1, 7))
        fork = sql(root, "SELECT fork_step FROM runs WHERE run_id = ?", [child])[0][0]
        assert [r for r in got if r[0] < fork] == [r for r in want if r[0] < fork]
    assert set(sql(root, "SELECT DISTINCT action_source FROM round_actions WHERE run_id = ? AND step < 3",
                   [first.run_id])) == {("replay",)}


def test_a_branch_of_a_columnar_multi_round_run_replays_it(tmp_path):
    """The sir template (columnar) with two rounds a step and record_rounds: a branch at step 5 with nothing
    changed replays steps 1..4 from the stored rounds and decides the rest as the parent did, row for row
    (it crashed on DuckDB's unfinished result before the replay's ids were registered)."""
    assert main(["new", "sirb", "--template", "sir", "--dir", str(tmp_path)]) == 0
    root = tmp_path / "sirb"
    path = root / "simulation" / "simulation.json"
    sim = json.loads(path.read_text())
    sim.update(interaction_rounds=2, record_rounds=True, n_steps=12)
    sim.pop("stop_when")
    path.write_text(json.dumps(sim))
    parent = desim.run_study(desim.load_study(root))
    child = branch(root, parent.run_id, 5)
    assert child.status == "completed" and not child.warnings
    panel = "SELECT step, agent_id, state, action_kind, payload FROM panel WHERE run_id = ? ORDER BY step, agent_id"
    rows = sql(root, panel, [parent.run_id])
    assert len(rows) == 12 * len(sql(root, "SELECT * FROM initial_states WHERE run_id = ?", [parent.run_id]))
    assert sql(root, panel, [child.run_id]) == rows
    first = branch(root, parent.run_id, 1)              # replays nothing, so needs no recorded rounds
    assert first.status == "completed" and sql(root, panel, [first.run_id]) == rows


ERRANDS = '''
from desim import Action, DecisionModel, EnvironmentProvider, Observation


class Env(EnvironmentProvider):
    def reset(self, seed):
        self.x = {a: 0 for a in self.ctx.agent_ids}

    def errand(self):
        yield self.ctx.sim.timeout(1.5)         # sent at the close of step 2: away for step 3, back for 4

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] += 1

    def end_step(self, t):
        if t == 2:
            self.ctx.occupy("a1", self.errand())

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id]}


class Decide(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="move") for o in observations]
'''


@pytest.mark.parametrize("agent_processes", [True, False])
def test_a_replayed_step_records_the_agents_away_as_the_parent_did(tmp_path, agent_processes):
    """An agent on an errand during step 3 is away in the parent's panel; a branch at step 5 replays step 3,
    and its row says away too (a replay opened no round gate, so it recorded nobody away)."""
    root = write_tiny_study(tmp_path / "errands", ERRANDS, {"n_steps": 5, "decision": {"ref": "model:Decide"},
                                                             "agent_processes": agent_processes})
    parent = desim.run_study(desim.load_study(root))
    child = branch(root, parent.run_id, 5)
    rows = "SELECT step, agent_id, away, action_kind, state FROM panel WHERE run_id = ? ORDER BY step, agent_id"
    assert [r[:3] for r in sql(root, rows, [parent.run_id]) if r[2]] == [(3, "a1", True)]
    assert sql(root, rows, [child.run_id]) == sql(root, rows, [parent.run_id])
    assert child.warnings == []


def test_compare_skips_a_json_state_field_with_its_reason(tmp_path):
    """A state field holding lists (a path walked) has no difference and no categories: compare lists it as
    skipped with the reason, instead of one 'category' per distinct list."""
    from desim.experiments.comparisons import compare
    model = ERRANDS.replace('return {"x": self.x[agent_id]}',
                            'return {"x": self.x[agent_id], "path": list(range(self.x[agent_id] + 1))}')
    root = write_tiny_study(tmp_path / "paths", model, {"n_steps": 4, "decision": {"ref": "model:Decide"}},
                            study={"display_states": ["x", "path"]})
    a = desim.run_study(desim.load_study(root)).run_id
    b = desim.run_study(desim.load_study(root, seed=9)).run_id
    out = compare(root, a, b)
    assert [s["field"] for s in out["skipped"]] == ["path"] and "JSON" in out["skipped"][0]["reason"]
    assert {c.get("field") for c in out["categorical"]} <= {"x"} and {p["field"] for p in out["paired"]} == {"x"}


ENDING = '''
from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation


class Env(EnvironmentProvider):
    """Each run's process is over at step 3 or at step 99, drawn from its seed."""

    def reset(self, seed):
        self.x = {a: 0.0 for a in self.ctx.agent_ids}
        self.end = 3 if self.ctx.streams.numpy("end").random() < 0.5 else 99

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        push = self.ctx.interventions.value("push", 0.0)
        for a in actions:
            self.x[a.agent_id] += 1.0 + push

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id]}


class Decide(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="move") for o in observations]


class Over(MetricCollector):
    def collect(self, t, environment, actions):
        return {"over": 1.0 if t >= environment.end else 0.0, "mean_x": sum(environment.x.values()) / 3}
'''


SEED_HOLDING_THE_FIRST = 2     # with this seed replicate 0's control ends at step 3 (a held pair comes first)


def test_an_effect_holds_a_pair_whose_control_ended_before_the_fork(tmp_path, capsys):
    """A control whose process ended (stop_when) before the fork step cannot be branched; the effect holds the
    pair (its treatment is the control: nothing is decided after the end) instead of failing it for ever, and
    the other pairs are branched as usual."""
    from desim.experiments.effects import effect_table, held_pairs
    root = write_tiny_study(
        tmp_path / "ending", ENDING,
        {"n_steps": 8, "decision": {"ref": "model:Decide"}, "collector": {"ref": "model:Over"},
         "parameters": {"push_at": 50}, "stop_when": [{"metric": "over", "op": ">=", "value": 1}]},
        study={"display_metrics": ["mean_x"]},
        environment={"layers": {"push": 0.0}, "scheduled_events": [
            {"at_step": "$push_at", "name": "push", "target": "push", "op": "set", "value": 1.0}]})
    effect = run_effect(root, 5, {"push_at": 5}, replicates=6, workers=1, seed=SEED_HOLDING_THE_FIRST)
    controls = {r: (last, reason) for r, last, reason in
                sql(root, "SELECT run_id, last_step, end_reason FROM runs WHERE kind = 'run'")}
    ended = {r for r, (last, reason) in controls.items() if reason and last < 5}
    assert 0 < len(ended) < 6                                   # some of each
    assert effect.pairs[0]["control_run_id"] in ended
    assert {p["control_run_id"] for p in held_pairs(effect.pairs)} == ended
    assert effect.completed == 6 and effect.errors == {}
    held = [p for p in effect.pairs if p["control_run_id"] in ended]
    assert all(p["treatment_run_id"] == p["control_run_id"] for p in held)
    # the held pairs differ by 0; the others by the push from step 5 on
    last = {m["step"]: m for m in effect_table(root, effect.effect_id)["metrics"] if m["name"] == "mean_x"}[8]
    # a branch pushes each agent one more at steps 5..8: 4 more on average; a held pair 0
    assert last["n"] == 6 and last["mean"] == pytest.approx(4 * (6 - len(ended)) / 6)
    # the runs that ended before the last step are said, with the last step any run reached
    runs = {r for p in effect.pairs for r in (p["control_run_id"], p["treatment_run_id"])}
    early = sql(root, "SELECT run_id, last_step FROM runs WHERE end_reason IS NOT NULL AND last_step < 8")
    early = {r: last for r, last in early if r in runs}
    reached = max(last for (last,) in sql(root, "SELECT last_step FROM runs"))
    note = effect_table(root, effect.effect_id)["notes"][0]
    assert note.startswith(f"{len(early)} of the {len(runs)} runs ended with their process before step 8")
    assert f"the last step any run reached is {reached}." in note
    assert main(["effect", str(root), "--resume", effect.effect_id, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"{len(ended)} pair(s) held" in out and f"note: {note}" in out
    data = desim.open(root)
    arms = {r["run_id"]: r["arm"] for r in data.runs().to_pylist()}
    assert {arms[r] for r in ended} == {"control"}          # a held control is still its effect's control
    # and the arms pair up replicate by replicate, a held pair's control in both
    pairs = list(zip(data.select_runs(effect=effect.effect_id, arm="control"),
                     data.select_runs(effect=effect.effect_id, arm="treatment")))
    assert pairs == [(p["control_run_id"], p["treatment_run_id"]) for p in effect.pairs]
    assert [c for c, t in pairs if c == t] == sorted(ended, key=lambda r: int(r.rsplit("c", 1)[1]))
    # a branch failed and resumed joins the other branches' version, not the held pair's (its control's)
    redo = next(t for c, t in pairs if c != t)
    db = duckdb.connect(str(store_path(root)))
    db.execute("UPDATE runs SET status = 'failed' WHERE run_id = ?", [redo])
    db.close()
    assert main(["effect", str(root), "--resume", effect.effect_id, "--quiet"]) == 0
    versions = sql(root, "SELECT DISTINCT v.version_id, v.kind FROM runs r JOIN versions v USING (version_id) "
                         "WHERE r.kind = 'branch'")
    assert len(versions) == 1 and versions[0][1] == "branch"


def test_a_payload_field_the_parent_fills_only_after_the_fork_is_no_difference(tmp_path):
    """The parent's agents stay (no payload) until step 5, then move with {"to": t}: its panel has a payload_to
    column, null at the replayed steps. A branch at step 3 replays steps 1..2 exactly, and says nothing."""
    model = ERRANDS.replace(
        'return [Action(agent_id=o.agent_id, step=o.step, kind="move") for o in observations]',
        'return [Action(agent_id=o.agent_id, step=o.step, kind="move", payload={"to": o.step}) if o.step >= 5 '
        'else Action(agent_id=o.agent_id, step=o.step, kind="stay") for o in observations]')
    root = write_tiny_study(tmp_path / "later", model, {"n_steps": 6, "decision": {"ref": "model:Decide"}})
    parent = desim.run_study(desim.load_study(root))
    assert "payload_to" in desim.open(root).panel(parent.run_id).column_names
    child = branch(root, parent.run_id, 3, steps=4)     # ends before the parent's first move
    assert child.status == "completed" and child.warnings == []


# --- what a branch may differ in: the label the engine never reads, and rounds as the engine runs them -------
def test_correcting_the_propagation_label_does_not_block_a_branch(tmp_path):
    """The seed: ``propagation`` is a declarative tag the engine never reads, to be set to describe what was
    built; a branch of a run made before the label was corrected replays and pairs as any other."""
    root = talk_study(tmp_path / "talk")
    parent = desim.run_study(desim.load_study(root)).run_id
    population = root / "population" / "population.json"
    population.write_text(json.dumps({**json.loads(population.read_text()), "propagation": "contagion"}))
    child = branch(root, parent, 3)
    assert child.status == "completed" and child.warnings == []
    assert rows(root, child.run_id, below=3) == rows(root, parent, below=3)
    # anything else in the population still makes a version, not a branch
    population.write_text(json.dumps({**json.loads(population.read_text()), "interaction": {"kind": "ring", "k": 4}}))
    with pytest.raises(BranchRefused, match=r"population\.interaction\.k changed"):
        branch(root, parent, 3)


def test_interaction_rounds_0_and_1_are_the_same_study_for_a_warm_start(tmp_path):
    """0 is clamped to 1 by the engine: a study whose file now says 1 warm-starts from a run made with 0."""
    root = talk_study(tmp_path / "talk", rounds=0, record_rounds=False)
    parent = desim.run_study(desim.load_study(root)).run_id
    sim = root / "simulation" / "simulation.json"
    sim.write_text(json.dumps({**json.loads(sim.read_text()), "interaction_rounds": 1,
                               "warm_start": {"from_run": parent, "at_step": 3}}))
    child = desim.run_study(desim.load_study(root))
    assert child.status == "completed"
    assert rows(root, child.run_id, below=3) == rows(root, parent, below=3)
    sim.write_text(json.dumps({**json.loads(sim.read_text()), "interaction_rounds": 2}))
    with pytest.raises(BranchRefused, match=r"interaction_rounds"):
        desim.run_study(desim.load_study(root))
