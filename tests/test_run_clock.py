"""A run is never recorded ``completed`` without every step it claims: a study process's event at a NaN time
(SimPy orders events by time in a heap, and NaN breaks the order without a word, so a step's close ran after
the run had ended) is refused where it is made, and a clock that runs out before the last step is stored
fails the run."""
from __future__ import annotations

import json

import pytest

from desim import load_study, run_study
from desim.cli import main
from desim.errors import RunFailed
from desim.run.engine import Engine
from storeq import sql
from walk_study import write_walk_study

COURIER = '''

class Courier(Line):
    """A study process beside the agents: a delivery at t = 2.5, then one at a time that is no number."""

    def reset(self, seed):
        super().reset(seed)
        self.ctx.sim.process(self.deliver())

    def deliver(self):
        yield self.ctx.sim.timeout(2.5)
        yield self.ctx.sim.timeout(float("nan"))   # the bad delay
'''


def courier_study(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=5)
    (root / "model.py").write_text((root / "model.py").read_text() + COURIER)
    env = root / "environment" / "environment.json"
    config = json.loads(env.read_text())
    config["provider"]["ref"] = "model:Courier"
    env.write_text(json.dumps(config))
    return root


def test_an_event_at_a_nan_time_fails_the_run_at_the_line_that_made_it(tmp_path, capsys):
    root = courier_study(tmp_path)
    assert main(["run", str(root), "-q"]) == 2
    err = capsys.readouterr().err
    line = next(i for i, text in enumerate((root / "model.py").read_text().splitlines(), 1) if "the bad delay" in text)
    assert (f"t=2.5 (step 2): study process Courier.deliver failed at {root}/model.py:{line}: ValueError: an event "
            "NaN time units from now (t=2.5): a delay must be a number") in err
    [(status, last_step)] = sql(root, "SELECT status, last_step FROM runs")
    assert (status, last_step) == ("failed", 2)
    assert sql(root, "SELECT max(step) FROM panel") == [(2,)]           # what was stored is kept


def test_a_clock_that_runs_out_before_the_last_step_is_stored_fails_the_run(tmp_path, monkeypatch):
    root = write_walk_study(tmp_path / "walk", n_steps=5)
    real = Engine._close_step

    def lost_after_3(self, t, actions, events, present):    # steps 4 and 5 run, their close never reaches the collector
        if t <= 3:
            real(self, t, actions, events, present)
    monkeypatch.setattr(Engine, "_close_step", lost_after_3)
    with pytest.raises(RunFailed) as failed:
        run_study(load_study(root))
    assert "the run's clock ran out before step 5 was stored (step 3 was the last)" in str(failed.value)
    assert sql(root, "SELECT status, last_step FROM runs") == [("failed", 3)]


def test_a_study_process_that_yields_no_event_is_named_with_its_line(tmp_path, capsys):
    """SimPy raises this from its own frame, naming the process's line in its message only."""
    root = courier_study(tmp_path)
    model = root / "model.py"
    model.write_text(model.read_text().replace('yield self.ctx.sim.timeout(float("nan"))   # the bad delay',
                                               'yield 5   # the bad delay'))
    assert main(["run", str(root), "-q"]) == 2
    line = next(i for i, text in enumerate(model.read_text().splitlines(), 1) if "the bad delay" in text)
    assert (f"t=2.5 (step 2): study process deliver failed at {root}/model.py:{line}: it yielded 5, not a SimPy "
            "event (yield env.timeout(delay) to wait)") in capsys.readouterr().err


def test_a_run_its_study_ends_at_reset_is_complete_at_step_0_in_memory_and_in_validate(tmp_path, capsys):
    """ctx.end_run in reset ends the run before step 1: complete, in the store and in memory alike (the clock
    check took a memory sink's step 0 for a step never stored)."""
    root = write_walk_study(tmp_path / "walk", n_steps=4)
    (root / "model.py").write_text((root / "model.py").read_text() + """

class Over(Line):
    def reset(self, seed):
        super().reset(seed)
        self.ctx.end_run("nothing to do")
""")
    env = root / "environment" / "environment.json"
    config = json.loads(env.read_text())
    config["provider"]["ref"] = "model:Over"
    env.write_text(json.dumps(config))
    in_memory = run_study(load_study(root), db_path=":memory:")
    assert (in_memory.status, in_memory.steps_done, in_memory.end_reason) == ("completed", 0, "nothing to do")
    assert main(["validate", str(root)]) == 0, capsys.readouterr()
    stored = run_study(load_study(root))
    assert (stored.status, stored.steps_done) == ("completed", 0)
