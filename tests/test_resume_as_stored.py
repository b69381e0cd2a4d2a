"""A resume rebuilds the run from its stored configuration and says it as stored: a compound stop_when
(the SEIR template's) was refused when read back, and the summary read the study's files as they are now,
so a resume that completed exited 2 when the files had since been broken, and said "of N" from them."""
from __future__ import annotations

import json
import os
import signal

import pytest

import desim
from desim.cli import main
from desim.errors import RunInterrupted
from storeq import sql
from walk_study import write_walk_study


def ctrl_c_at(step: int):
    def on_step(t, metrics):
        if t == step:
            os.kill(os.getpid(), signal.SIGINT)
    return on_step


def interrupted_run(root, step: int, **load) -> str:
    with pytest.raises(RunInterrupted) as stopped:
        desim.run_study(desim.load_study(root, **load), on_step=ctrl_c_at(step))
    return stopped.value.result.run_id


def test_a_run_with_a_compound_stop_when_resumes(tmp_path):
    assert main(["new", "seir", "--template", "seir", "--dir", str(tmp_path)]) == 0
    root = tmp_path / "seir"
    stop = json.loads((root / "simulation" / "simulation.json").read_text())["stop_when"]
    assert any("all" in c for c in stop)                    # the template's own {"all": [...]}
    run = interrupted_run(root, 2, params={"n_nodes": "300"}, seed=3)
    resumed = desim.resume(root, run)
    whole = desim.run_study(desim.load_study(root, params={"n_nodes": "300"}, seed=3))
    assert (resumed.status, resumed.steps_done, resumed.end_reason) == (whole.status, whole.steps_done,
                                                                        whole.end_reason)
    panel = "SELECT step, agent_id, state::VARCHAR FROM panel WHERE run_id = ? ORDER BY step, agent_id"
    assert sql(root, panel, [run]) == sql(root, panel, [whole.run_id])


def test_the_summary_of_a_resume_reads_the_run_as_stored(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk", n_steps=6, lockdown_day=2)
    sim = root / "simulation" / "simulation.json"
    config = json.loads(sim.read_text())
    config["stop_when"] = [{"metric": "mean_x", "op": "<", "value": -1e9}]     # never: the run goes to step 4
    sim.write_text(json.dumps(config))
    run = interrupted_run(root, 2, steps=4)
    config["n_stepz"] = 3                                                      # the files broken since
    sim.write_text(json.dumps(config))
    assert main(["run", str(root), "--resume", run, "-q"]) == 0
    out = capsys.readouterr().out
    assert f"run {run}: completed" in out and "steps 4," in out and "messages 0," in out
    assert sql(root, "SELECT status, last_step FROM runs") == [("completed", 4)]
