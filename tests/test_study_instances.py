"""``desim.Study`` given component instances: every run builds its components afresh from the recorded ref and
arguments (the rule a branch and a resume follow), so what an instance keeps on ``self`` never passes from one run
into the next or between two runs at once; and the study's files are written so that a run reading them while
another run saves them never sees half a file."""
from __future__ import annotations

import json
import os
import threading
import time

import pytest

import desim
from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation, Persona, PopulationProvider


class Line(EnvironmentProvider):
    def reset(self, seed):
        rng = self.ctx.streams.numpy("init")
        self.x = {a: float(rng.uniform()) for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx, local_physical={"x": self.x[a]}) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] = a.payload["x"]

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id]}


class Learner(DecisionModel):
    """Keeps a count of the steps it has decided on itself: a model that learns as it runs."""

    def __init__(self, rate: float = 0.01):
        self.rate = rate
        self.steps_seen = 0

    def decide_batch(self, observations, memories):
        self.steps_seen += 1
        return [Action(agent_id=o.agent_id, step=o.step, kind="move",
                       payload={"x": o.local_physical["x"] + self.rate * self.steps_seen}) for o in observations]


RENDEZVOUS: threading.Barrier | None = None     # set while two runs must be under way at once


class Pull(DecisionModel):
    """Moves each agent by the run's parameter ``k`` (read from ``self.ctx``, the run it was given)."""

    def __init__(self, noise: float = 0.01):
        self.noise = noise

    def decide_batch(self, observations, memories):
        if RENDEZVOUS is not None and observations and observations[0].step == 1:
            RENDEZVOUS.wait()       # both runs assembled (each component given its ctx) before either decides
        rng = self.ctx.rng("noise")
        k = self.ctx.params["k"]
        return [Action(agent_id=o.agent_id, step=o.step, kind="move",
                       payload={"x": o.local_physical["x"] + k + self.noise * float(rng.normal())})
                for o in observations]


class Mean(MetricCollector):
    def collect(self, t, environment, actions):
        return {"mean_x": sum(environment.x.values()) / len(environment.x)}


class Numbered(PopulationProvider):
    """Names its agents after how many populations it has made: state kept on ``self``."""

    def __init__(self, n: int = 4):
        self.n = n
        self.made = 0

    def personas(self, rng):
        self.made += 1
        return [Persona(agent_id=f"p{self.made}_{i}") for i in range(self.n)]


def table(result, what="panel"):
    rows = getattr(result, what)().drop(["run_id"])
    return rows.sort_by([(c, "ascending") for c in ("step", "agent_id") if c in rows.column_names]).to_pylist()


# --- 1. an instance's state does not pass from one run into the next ------------------------------------------------

def learner_study(folder, decision):
    return desim.Study(environment=Line, decision=decision, collector=Mean, population=6, steps=4, seed=5,
                       interaction={"kind": "ring", "k": 2}, folder=folder)


def test_the_same_study_run_twice_with_an_instance_gives_the_same_panel(tmp_path):
    study = learner_study(tmp_path / "inst", Learner(rate=0.01))
    first, second = desim.run_study(study), desim.run_study(study)
    assert table(second) == table(first)
    assert table(second, "metrics") == table(first, "metrics")
    # the same as the study given the class and its arguments, and the panel a fresh model gives
    by_ref = learner_study(tmp_path / "ref", {"ref": Learner, "args": {"rate": 0.01}})
    assert table(desim.run_study(by_ref)) == table(first)
    assert [m["mean_x"] for m in table(first, "metrics")][1:] == pytest.approx(
        [table(first, "metrics")[0]["mean_x"] + 0.01 * sum(range(1, s + 1)) for s in range(1, 5)])


def test_the_instance_given_is_not_the_one_a_run_uses(tmp_path):
    learner = Learner(rate=0.01)
    desim.run_study(learner_study(tmp_path / "s", learner))
    assert learner.steps_seen == 0          # each run built its own Learner(rate=0.01)
    assert "ctx" not in vars(learner)


def test_an_instance_changed_after_the_study_was_made_runs_and_records_as_changed(tmp_path):
    learner = Learner(rate=0.01)
    study = learner_study(tmp_path / "s", learner)
    learner.rate = 0.5                      # its arguments are read again when the study is saved for a run
    result = desim.run_study(study)
    recorded = json.loads((study.folder / "simulation" / "simulation.json").read_text())
    assert recorded["decision"] == {"ref": f"{Learner.__module__}:Learner", "args": {"rate": 0.5}}
    again = desim.run_study(learner_study(tmp_path / "again", Learner(rate=0.5)))
    assert table(result) == table(again)


def test_a_population_provider_instance_is_built_again_for_each_run(tmp_path):
    provider = Numbered(n=4)
    study = desim.Study(environment=Line, decision=Learner, population=provider, steps=2, folder=tmp_path / "s")
    first, second = desim.run_study(study), desim.run_study(study)
    assert [r["agent_id"] for r in table(first)] == [r["agent_id"] for r in table(second)]
    assert {r["agent_id"] for r in table(first)} == {f"p1_{i}" for i in range(4)}
    assert table(second) == table(first) and provider.made == 0


# --- 2. two runs of one study at once ---------------------------------------------------------------------------------

def pull_study(folder):
    return desim.Study(environment=Line, decision=Pull(noise=0.05), collector=Mean, population=20, steps=5, seed=3,
                       parameters={"k": 1.0}, interaction={"kind": "ring", "k": 2}, folder=folder)


def test_two_runs_of_one_study_at_once_each_give_their_own_panel(tmp_path):
    global RENDEZVOUS
    study = pull_study(tmp_path / "s")
    # each run in a store of its own: a read of one DuckDB file while this process writes it is the store's
    # business (StoreBusyError), not this test's
    expected = {k: table(desim.run_study(study.spec(params={"k": k}), db_path=tmp_path / f"alone-{k}.duckdb"))
                for k in (1.0, 2.0)}
    assert expected[1.0] != expected[2.0]
    results, failed = {}, []

    def run(k):
        try:
            results[k] = desim.run_study(study.spec(params={"k": k}), db_path=tmp_path / f"together-{k}.duckdb",
                                         handle_signals=False)
        except BaseException as e:      # noqa: BLE001 (reported below, in the test's thread)
            failed.append(e)
            if RENDEZVOUS is not None:
                RENDEZVOUS.abort()

    RENDEZVOUS = threading.Barrier(2, timeout=60)
    try:
        threads = [threading.Thread(target=run, args=(k,)) for k in (1.0, 2.0)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        RENDEZVOUS = None
    assert not failed, failed
    assert {k: table(r) for k, r in results.items()} == expected


def test_a_reader_never_sees_part_of_a_study_file_being_saved(tmp_path):
    study = pull_study(tmp_path / "s")
    folder = study.save()
    stop, bad, saves = threading.Event(), [], [0]

    def save():
        while not stop.is_set():
            study.title = "one" if study.title != "one" else "two " * 2000      # a change to write, and long
            study.save()
            saves[0] += 1

    writer = threading.Thread(target=save)
    writer.start()
    try:
        end = time.monotonic() + 1.0
        while time.monotonic() < end and not bad:
            text = (folder / "study.json").read_text(encoding="utf-8")
            try:
                json.loads(text)
            except ValueError:
                bad.append(text[:80])
    finally:
        stop.set()
        writer.join()
    assert saves[0] > 10 and not bad, bad
    assert not [p.name for p in folder.rglob(".*")]      # no temporary file left beside the study's files


def test_a_changed_file_is_replaced_in_one_step_and_an_unchanged_one_not_written(tmp_path):
    study = pull_study(tmp_path / "s")
    folder = study.save()
    files = {rel: folder / rel for rel in ("study.json", "simulation/simulation.json",
                                           "population/population.json", "environment/environment.json")}
    for path in files.values():
        os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    before = {rel: os.stat(path) for rel, path in files.items()}
    study.save()
    desim.run_study(study)                  # a run of an unchanged study writes none of its files
    after = {rel: os.stat(path) for rel, path in files.items()}
    assert {rel: (s.st_ino, s.st_mtime_ns) for rel, s in after.items()} == \
        {rel: (s.st_ino, s.st_mtime_ns) for rel, s in before.items()}
    study.simulation["seed"] = 9
    study.save()
    changed = os.stat(files["simulation/simulation.json"])
    assert changed.st_ino != before["simulation/simulation.json"].st_ino      # a new file renamed over the old
    assert json.loads(files["simulation/simulation.json"].read_text())["seed"] == 9
    assert os.stat(files["study.json"]).st_mtime_ns == 1_000_000_000
    assert oct(changed.st_mode & 0o777) == oct(0o666 & ~_umask())       # as write_text would make it


def _umask() -> int:
    import subprocess
    return int(subprocess.run(["sh", "-c", "umask"], capture_output=True, text=True, check=True).stdout, 8)


def test_two_runs_at_once_of_a_study_without_a_folder_share_one_temporary_folder(tmp_path, monkeypatch):
    import tempfile

    import desim.study.study as study_module
    made = []
    real = tempfile.mkdtemp

    def slow_mkdtemp(*args, **kwargs):      # widen the moment between "no folder yet" and "this folder"
        time.sleep(0.2)
        made.append(real(*args, dir=tmp_path, **kwargs))
        return made[-1]

    monkeypatch.setattr(study_module.tempfile, "mkdtemp", slow_mkdtemp)
    study = desim.Study(environment=Line, decision=Learner(rate=0.1), population=3, steps=1)
    folders = []
    threads = [threading.Thread(target=lambda: folders.append(study.save())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and folders == [study.folder, study.folder]
