"""Branches, versions, resume and compare, on real stores and a real killed process."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import desim
from desim.experiments.branches import BranchRefused, branch, resume
from desim.cli import main
from desim.experiments.comparisons import compare
from desim.store import StudyLayout
from desim.store.health import last_step
from storeq import sql_desim, store_path
from probe_study import log_of, write_probe_study
from storeq import query as rows
from waits import HANG_S

EVENT7 = {"at_step": 7, "name": "level_up", "target": "level", "op": "set", "value": 3.0}


def panel(db, run_id, until=10**6):
    return rows(db, "SELECT step, agent_id, state::VARCHAR, action_kind, payload::VARCHAR, action_rationale "
                    "FROM panel WHERE run_id=? AND step<=? ORDER BY step, agent_id", [run_id, until])


def set_env(root, fn):
    path = root / "environment" / "environment.json"
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def test_branch_replays_then_diverges(tmp_path):
    root = write_probe_study(tmp_path / "probe", n_agents=6, n_steps=12)
    parent = desim.run_study(desim.load_study(root))
    set_env(root, lambda d: d["scheduled_events"].append(EVENT7))
    child = branch(root, parent.run_id, 7, note="level rises at step 7")
    db = store_path(root)
    assert child.status == "completed"
    # decide_batch only for steps 7..12
    assert [e[1] for e in log_of(root) if e[0] == "decide"] == list(range(7, 13))
    # initial states and steps 1..6 identical
    assert rows(db, "SELECT agent_id, state::VARCHAR FROM initial_states WHERE run_id=? ORDER BY 1", [child.run_id]) \
        == rows(db, "SELECT agent_id, state::VARCHAR FROM initial_states WHERE run_id=? ORDER BY 1", [parent.run_id])
    assert panel(db, child.run_id, 6) == panel(db, parent.run_id, 6)
    assert set(rows(db, "SELECT DISTINCT action_source FROM panel WHERE run_id=? AND step<7", [child.run_id])) \
        == {("replay",)}
    assert set(rows(db, "SELECT DISTINCT action_source FROM panel WHERE run_id=? AND step>=7", [child.run_id])) \
        == {("rule",)}
    metric = "SELECT step, value FROM metrics WHERE run_id=? AND name='mean_value' ORDER BY step"
    pm, cm = dict(rows(db, metric, [parent.run_id])), dict(rows(db, metric, [child.run_id]))
    assert all(pm[s] == cm[s] for s in range(0, 7))
    assert all(pm[s] != cm[s] for s in range(7, 13))
    assert rows(db, "SELECT kind, parent_run_id, fork_step, note FROM runs WHERE run_id=?", [child.run_id]) == \
        [("branch", parent.run_id, 7, "level rises at step 7")]
    # compare: zero before the fork, not after
    data = compare(root, parent.run_id, child.run_id, states=["value"])
    assert data["fork_step"] == 7
    diffs = {(m["name"], m["step"]): m["diff"] for m in data["metrics"]}
    assert diffs[("mean_value", 6)] == 0 and diffs[("mean_value", 9)] == cm[9] - pm[9]
    paired = {p["step"]: p for p in data["paired"]}
    assert paired[3]["mean_diff"] == 0 and paired[8]["n"] == 6 and paired[8]["max_diff"] != 0


def test_branch_without_change_reproduces_parent(tmp_path, capsys):
    root = write_probe_study(tmp_path / "probe", n_agents=5, n_steps=8, rounds=1)
    parent = desim.run_study(desim.load_study(root))
    assert main(["branch", str(root), "--from-run", parent.run_id, "--at-step", "4", "--note", "no change"]) == 0
    child_id = rows(store_path(root), "SELECT run_id FROM runs WHERE kind='branch'")[0][0]
    assert panel(store_path(root), child_id) == panel(store_path(root), parent.run_id)
    assert main(["runs", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"└ {child_id}  branch from step 4" in out


def test_multi_round_branch_refused_unless_rounds_recorded(tmp_path):
    root = write_probe_study(tmp_path / "probe", n_steps=6, rounds=3)
    parent = desim.run_study(desim.load_study(root))
    db = store_path(root)
    before = rows(db, "SELECT count(*) FROM runs")[0][0], rows(db, "SELECT count(*) FROM panel")[0][0]
    with pytest.raises(BranchRefused, match="interaction_rounds is 3") as info:
        branch(root, parent.run_id, 4)
    assert "final-round actions" in str(info.value)
    assert (rows(db, "SELECT count(*) FROM runs")[0][0], rows(db, "SELECT count(*) FROM panel")[0][0]) == before
    assert [e for e in log_of(root) if e[0] == "decide" and e[1] < 4] != []  # from the parent only

    recorded_root = write_probe_study(tmp_path / "recorded", n_steps=6, rounds=3, record_rounds=True)
    parent = desim.run_study(desim.load_study(recorded_root))
    child = branch(recorded_root, parent.run_id, 4)
    assert panel(store_path(recorded_root), child.run_id) == panel(store_path(recorded_root), parent.run_id)


def test_branch_refuses_other_changes_and_says_which(tmp_path):
    root = write_probe_study(tmp_path / "probe", n_steps=8)
    parent = desim.run_study(desim.load_study(root))
    set_env(root, lambda d: d["scheduled_events"].append({**EVENT7, "at_step": 2, "name": "early"}))
    with pytest.raises(BranchRefused, match=r"scheduled_events before step 5 changed \(early\)"):
        branch(root, parent.run_id, 5)
    set_env(root, lambda d: d["scheduled_events"].clear())
    pop = root / "population" / "population.json"
    data = json.loads(pop.read_text())
    data["personas"][0]["attributes"]["group"] = "z"
    pop.write_text(json.dumps(data))
    with pytest.raises(BranchRefused, match=r"population\.personas\[0\]\.attributes\.group changed"):
        branch(root, parent.run_id, 5)
    with pytest.raises(BranchRefused, match="simulation.seed changed"):
        branch(root, parent.run_id, 5, spec=desim.load_study(root, seed=99))


def test_branch_of_incomplete_parent_refused(tmp_path):
    root = write_probe_study(tmp_path / "probe", n_steps=8, decision_args={"fail_step": 4})
    with pytest.raises(desim.RunFailed) as info:
        desim.run_study(desim.load_study(root))
    with pytest.raises(BranchRefused, match="complete only up to step 3"):
        branch(root, info.value.run_id, 6)


@pytest.mark.slow
def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    root = write_probe_study(tmp_path / "probe", n_agents=7, n_steps=10, rounds=2,
                             decision_args={"mode": "sigkill_once", "fail_step": 6},
                             env_args={"tick_every": 0.25})
    proc = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root)], capture_output=True, text=True,
                          timeout=HANG_S)
    assert proc.returncode == -9
    db = store_path(root)
    (run_id, status, recorded), = rows(db, "SELECT run_id, status, last_step FROM runs")
    # runs.last_step is written when a run ends; a killed run's step folders say how far it got
    assert (status, last_step(StudyLayout(root), run_id, recorded)) == ("running", 5)
    # a plain DuckDB connection sees ended runs; desim's reader also reads a killed run's journal
    assert rows(db, "SELECT max(step) FROM panel")[0][0] is None
    assert sql_desim(root, "SELECT max(step) FROM panel")[0][0] == 5
    proc = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root), "--resume", run_id],
                          capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr
    assert rows(db, "SELECT status, last_step FROM runs WHERE run_id=?", [run_id]) == [("completed", 10)]
    fresh = desim.run_study(desim.load_study(root))  # the marker exists now: runs straight through
    assert panel(db, run_id) == panel(db, fresh.run_id)
    assert rows(db, "SELECT count(*) FROM panel WHERE run_id=?", [run_id])[0][0] == 70
    metric = "SELECT step, name, value FROM metrics WHERE run_id=? ORDER BY step, name"
    assert rows(db, metric, [run_id]) == rows(db, metric, [fresh.run_id])


def test_stop_run_interrupts_cleanly_and_resumes(tmp_path):
    root = write_probe_study(tmp_path / "probe", n_steps=6, decision_args={"mode": "stop_once", "fail_step": 4})
    first = desim.run_study(desim.load_study(root))
    db = store_path(root)
    assert first.status == "interrupted" and "budget spent" in first.error
    assert rows(db, "SELECT status, last_step FROM runs") == [("interrupted", 3)]
    done = resume(root, first.run_id)
    assert done.status == "completed" and done.rows_written == 3 * 5
    fresh = desim.run_study(desim.load_study(root))
    assert panel(db, first.run_id) == panel(db, fresh.run_id)


def test_edits_become_versions_with_a_diff(tmp_path):
    root = write_probe_study(tmp_path / "probe", n_steps=3)
    a = desim.run_study(desim.load_study(root))
    b = desim.run_study(desim.load_study(root, seed=3))  # a run-time override is not an edit
    set_env(root, lambda d: d["layers"].update(level=2.0))
    c = desim.run_study(desim.load_study(root))
    db = store_path(root)
    kinds = dict(rows(db, "SELECT run_id, kind FROM runs"))
    assert kinds == {a.run_id: "run", b.run_id: "run", c.run_id: "version"}
    assert rows(db, "SELECT parent_run_id FROM runs WHERE run_id=?", [c.run_id]) == [(b.run_id,)]
    (diff,), = rows(db, "SELECT diff FROM versions WHERE kind='version'")
    assert json.loads(diff) == [{"path": "environment.layers.level", "old": 1.0, "new": 2.0}]


NULLABLE = '''
from desim import Action, DecisionModel, EnvironmentProvider, InMemoryMessageBus, NeighborFeed, Observation, neighbors_fn


class Env(EnvironmentProvider):
    def reset(self, seed):
        self.bus = InMemoryMessageBus(carry_previous_step=True)
        self.feed = NeighborFeed(neighbors_fn(self.ctx.graph), self.bus)
        self.waited = {a: 0.0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, r):
        return [Observation(agent_id=a, step=t, round_idx=r, local_physical={"waited": self.waited[a]}) for a in ids]

    def apply(self, actions):
        for a in actions:
            wait = a.payload["wait"]          # None when the agent did not queue: a key the study relies on
            self.waited[a.agent_id] += 0.0 if wait is None else wait
        self.feed.ingest(actions, self.ctx.step, self.ctx.round_idx)

    def agent_state(self, agent_id):
        return {"waited": self.waited[agent_id]}


class Queue(DecisionModel):
    def decide_batch(self, observations, memories):
        out = []
        for o in observations:
            queued = (o.step + o.round_idx + int(o.agent_id[1:])) % 3 == 0
            out.append(Action(agent_id=o.agent_id, step=o.step, kind="post",
                              payload={"queued": queued, "wait": 1.5 if queued else None}))
        return out
'''


@pytest.mark.parametrize("rounds", [1, 3])
def test_a_branch_replays_a_payload_field_the_study_set_to_none(tmp_path, rounds):
    """The stored payload struct holds every kind's fields, nulls for those a kind lacks; the replay dropped
    every null, so ``apply`` reading ``payload["wait"]`` (None when the agent did not queue) failed with
    KeyError in the branch, and the replayed messages lost ``"wait": null``."""
    root = tmp_path / f"nullable{rounds}"
    for sub in ("environment", "population", "simulation"):
        (root / sub).mkdir(parents=True)
    (root / "model.py").write_text(NULLABLE)
    (root / "study.json").write_text(json.dumps({"id": "nullable"}))
    (root / "environment" / "environment.json").write_text(json.dumps({"provider": {"ref": "model:Env"}}))
    (root / "population" / "population.json").write_text(json.dumps({
        "personas": [{"agent_id": f"p{i}"} for i in range(6)], "interaction": {"kind": "ring", "k": 2},
        "propagation": "contagion"}))
    (root / "simulation" / "simulation.json").write_text(json.dumps({
        "n_steps": 6, "interaction_rounds": rounds, "record_rounds": rounds > 1, "seed": 3,
        "decision": {"ref": "model:Queue"}}))
    parent = desim.run_study(desim.load_study(root))
    child = branch(root, parent.run_id, 4)
    assert child.status == "completed"
    db = store_path(root)
    assert panel(db, child.run_id) == panel(db, parent.run_id)
    messages = "SELECT step, round, author_id, content::VARCHAR FROM messages WHERE run_id=? ORDER BY ALL"
    got, want = rows(db, messages, [child.run_id]), rows(db, messages, [parent.run_id])
    assert got == want and any('"wait":null' in c for *_, c in want)


def test_compare_trusts_branches_of_one_run_and_warns_of_a_new_version_with_another_seed(tmp_path):
    """A new version's first run names the run before it as its parent: compare took the two for a branch
    and its parent and said nothing of their different code and seed. Two branches of one run, each a
    version of its own (their interventions differ), were warned of as different versions."""
    root = write_probe_study(tmp_path / "probe", n_steps=8)
    base = desim.run_study(desim.load_study(root, seed=11))
    set_env(root, lambda d: d["layers"].update(level=2.0))          # an edit: the next run starts a version
    edited = desim.run_study(desim.load_study(root, seed=12))
    db = store_path(root)
    assert rows(db, "SELECT kind, parent_run_id FROM runs WHERE run_id=?", [edited.run_id]) == \
        [("version", base.run_id)]
    notes = compare(root, base.run_id, edited.run_id)["notes"]
    assert any("different versions" in n for n in notes) and any("different seeds" in n for n in notes), notes

    set_env(root, lambda d: d["layers"].update(level=1.0))
    parent = desim.run_study(desim.load_study(root))
    set_env(root, lambda d: d["scheduled_events"].append(EVENT7))
    first = branch(root, parent.run_id, 7)
    set_env(root, lambda d: d["scheduled_events"].__setitem__(-1, {**EVENT7, "value": 5.0}))
    second = branch(root, parent.run_id, 7)
    third = branch(root, second.run_id, 8)                           # a branch of a branch
    for a, b in ((first.run_id, second.run_id), (first.run_id, third.run_id), (parent.run_id, third.run_id)):
        assert compare(root, a, b)["notes"] == [], (a, b)


@pytest.mark.parametrize("damage", ["short", "garbled"])
def test_a_journal_damaged_by_a_power_loss_costs_its_steps_not_the_study(tmp_path, damage):
    """A killed run whose journal segment is shorter than its commit log says (a power loss: the log's last
    lines reached the disk, the segment's last bytes not) made every read of the study fail with a raw
    OSError. Now its last whole step is what is read, and resume goes on from there. Bytes that are there
    but garbled leave that one run out of the views, with a note; the other runs stay readable; and resume
    goes on from the last step that reads whole."""
    root = write_probe_study(tmp_path / "probe", n_agents=7, n_steps=10,
                             decision_args={"mode": "sigkill_once", "fail_step": 6})
    proc = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root)], capture_output=True, text=True,
                          timeout=HANG_S)
    assert proc.returncode == -9
    db = store_path(root)
    (run_id,), = rows(db, "SELECT run_id FROM runs")
    folder = StudyLayout(root).run_dir(run_id) / "journal"
    segment = folder / "metrics.0.arrows"
    if damage == "short":
        os.truncate(segment, segment.stat().st_size - 10)
        assert sql_desim(root, "SELECT max(step) FROM metrics")[0][0] == 4       # step 5 is not whole
        proc = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root), "--resume", run_id],
                              capture_output=True, text=True, timeout=HANG_S)
        assert proc.returncode == 0, proc.stderr
        fresh = desim.run_study(desim.load_study(root))
        assert panel(db, run_id) == panel(db, fresh.run_id)
        metric = "SELECT step, name, value FROM metrics WHERE run_id=? ORDER BY step, name"
        assert rows(db, metric, [run_id]) == rows(db, metric, [fresh.run_id])
    else:
        other = desim.run_study(desim.load_study(root)).run_id          # the marker exists: runs through
        data = bytearray(segment.read_bytes())
        data[len(data) // 2:] = b"\xff" * (len(data) - len(data) // 2)
        segment.write_bytes(bytes(data))
        out = subprocess.run([sys.executable, "-m", "desim.cli", "sql", str(root),
                              "SELECT DISTINCT run_id FROM metrics", "--csv"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["run_id", other]
        assert f"desim: note: run {run_id} is left out of the views: " in out.stderr
        assert "metrics.0.arrows is damaged" in out.stderr
        # a resume failed at its merge, reading the garbled bytes: it now goes on from the last step it reads
        proc = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root), "--resume", run_id],
                              capture_output=True, text=True, timeout=HANG_S)
        assert proc.returncode == 0, proc.stderr
        assert f"run {run_id} goes on from step " in proc.stderr
        assert panel(db, run_id) == panel(db, other)
        metric = "SELECT step, name, value FROM metrics WHERE run_id=? ORDER BY step, name"
        assert rows(db, metric, [run_id]) == rows(db, metric, [other])


def test_a_killed_run_is_exported_and_read_as_desim_runs_shows_it(tmp_path):
    """``desim export`` of a run killed at step 6 wrote ``status=running, last_step=-1`` beside a panel of
    five steps (the table's values until a run ends); ``desim.open(...).runs()`` said the same."""
    import pyarrow.parquet as pq
    root = write_probe_study(tmp_path / "probe", n_agents=7, n_steps=10,
                             decision_args={"mode": "sigkill_once", "fail_step": 6})
    proc = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root)], capture_output=True, text=True,
                          timeout=HANG_S)
    assert proc.returncode == -9
    runs = desim.open(root).runs()
    assert (runs.column("status").to_pylist(), runs.column("last_step").to_pylist()) == (["stale"], [5])
    assert main(["export", str(root), "--out", str(tmp_path / "out")]) == 0
    exported = pq.read_table(tmp_path / "out" / "runs.parquet")
    assert (exported.column("status").to_pylist(), exported.column("last_step").to_pylist()) == (["stale"], [5])
    assert pq.read_table(tmp_path / "out" / "panel.parquet").column("step").to_pylist()[-1] == 5
