"""Exporting a run that is still going, or was killed: every table of it stops at one step, and runs.json says
what the runs table says.

The study here waits at the start of each step until the test lets it go (a file per step), so the test sees the
run at known steps whatever the machine's speed; the run is read through the store (``runs()``'s
``last_step``), never after a fixed sleep."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import desim
from desim.cli import main
from desim.store import StudyData
from tiny_study import write_tiny_study

HANG_S = 60

MODEL = '''
import time
from pathlib import Path

from desim import (Action, DecisionModel, EnvironmentProvider, InMemoryMessageBus, Message, MetricCollector,
                   Observation)

HERE = Path(__file__).parent


class Env(EnvironmentProvider):
    def reset(self, seed):
        self.bus = InMemoryMessageBus()
        self.x = {a: 0 for a in self.ctx.agent_ids}

    def advance_to(self, t):
        return super().advance_to(t) + [{"kind": "tick", "name": "tick", "detail": {"t": t}}]

    def observe_batch(self, ids, t, round_idx):
        # step t begins only once the test has made 'go-<t>' (or 'go-all'); a minute at most, so a failing
        # test never leaves a run behind for ever
        deadline = time.monotonic() + 60
        while not (HERE / f"go-{t}").exists() and not (HERE / "go-all").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.x[a.agent_id] += 1
            self.bus.post(Message(author_id=a.agent_id, step=self.ctx.step, round=self.ctx.round_idx,
                                  content={"x": self.x[a.agent_id]}))

    def agent_state(self, agent_id):
        return {"x": self.x[agent_id]}


class Decide(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="post") for o in observations]


class Count(MetricCollector):
    def collect(self, t, environment, actions):
        return {"total": float(sum(environment.x.values()))}
'''

STEPPED = ("panel", "metrics", "events", "messages")


@pytest.fixture
def gated(tmp_path):
    """A study whose steps wait for the test (``go-<t>``), and a function starting a run of it in another
    process; every run started is let go and waited for (or killed) at the end."""
    root = write_tiny_study(tmp_path / "gated", MODEL, {"n_steps": 12, "decision": {"ref": "model:Decide"},
                                                         "collector": {"ref": "model:Count"}}, agents=3)
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "desim.cli", "run", str(root), "--quiet"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    yield root, start
    (root / "go-all").touch()
    for proc in procs:
        try:
            proc.communicate(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def let_go(root: Path, *steps: int) -> None:
    for t in steps:
        (root / f"go-{t}").touch()


def wait_for_step(root: Path, proc: subprocess.Popen, step: int) -> str:
    """The run's id once it has stored ``step`` (its store says so); fails at once if the process ends first."""
    deadline = time.monotonic() + HANG_S
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended ({proc.returncode}) before step {step}: {proc.stderr.read()}")
        if (root / "runs" / "desim.duckdb").exists():
            rows = [r for r in StudyData(root).runs().to_pylist() if r["status"] == "running"]
            if rows and rows[0]["last_step"] >= step:
                assert rows[0]["last_step"] == step, rows[0]
                return rows[0]["run_id"]
        if time.monotonic() > deadline:
            raise AssertionError(f"the run never reached step {step}")
        time.sleep(0.05)


def last_steps(out: Path) -> dict[str, int]:
    return {t: pc.max(pq.read_table(out / f"{t}.parquet", columns=["step"]).column("step")).as_py() for t in STEPPED}


def test_a_running_run_is_exported_up_to_one_step_in_every_table(gated, tmp_path, monkeypatch, capsys):
    """The run stands at step 3 when the export begins; while the export reads its tables (here: just before
    the metrics), it goes on to step 5. Each table read by a query of its own, the panel stopped at 3 and the
    metrics, events and messages at 5: all stop at 3, and the export says so."""
    root, start = gated
    let_go(root, 1, 2, 3)
    proc = start()
    run_id = wait_for_step(root, proc, 3)
    real_metrics = StudyData.metrics

    def metrics_after_two_more_steps(self, *args, **kwargs):
        if not (root / "go-5").exists():
            let_go(root, 4, 5)
            wait_for_step(root, proc, 5)
        return real_metrics(self, *args, **kwargs)

    monkeypatch.setattr(StudyData, "metrics", metrics_after_two_more_steps)
    out = tmp_path / "out"
    assert main(["export", str(root), "--run", run_id, "--out", str(out)]) == 0
    assert (root / "go-5").exists()                   # the run did move on during the export
    assert last_steps(out) == dict.fromkeys(STEPPED, 3)
    err = capsys.readouterr().err
    assert f"run {run_id} was still running" in err and "up to step 3" in err
    row = pq.read_table(out / "runs.parquet").to_pylist()[0]
    (meta,) = json.loads((out / "runs.json").read_text())
    assert (row["status"], row["last_step"]) == (meta["status"], meta["last_step"]) == ("running", 3)
    assert pq.read_table(out / "initial_states.parquet").num_rows == 3


def test_runs_json_says_what_the_runs_table_says_of_a_killed_run(gated, tmp_path):
    """runs.json gave the catalogue's row as it was written ('running', last_step -1) while runs.parquet gave
    the run as desim runs shows it ('stale', its last stored step)."""
    root, start = gated
    let_go(root, 1, 2)
    proc = start()
    run_id = wait_for_step(root, proc, 2)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=HANG_S)
    out = tmp_path / "out"
    assert main(["export", str(root), "--run", run_id, "--out", str(out)]) == 0
    row = pq.read_table(out / "runs.parquet").to_pylist()[0]
    (meta,) = json.loads((out / "runs.json").read_text())
    assert (row["status"], row["last_step"]) == (meta["status"], meta["last_step"]) == ("stale", 2)
    assert last_steps(out) == dict.fromkeys(STEPPED, 2)
    assert desim.open(root).runs().to_pylist()[0]["status"] == "stale"

