"""Ctrl-C during a run started from Python (a notebook's "interrupt kernel") stops the run cleanly at a step
boundary, keeps it resumable, and stops the caller too: ``run_study`` raises ``RunInterrupted``, a
``KeyboardInterrupt``, instead of returning, so a loop of replicates does not carry on with the next run."""
from __future__ import annotations

import os
import signal

import pytest

import desim
from desim.errors import RunInterrupted
from storeq import sql
from walk_study import write_walk_study


def ctrl_c_at(step: int):
    """An ``on_step`` that presses Ctrl-C (SIGINT to this process) once step ``step`` is kept."""
    def on_step(t, metrics):
        if t == step:
            os.kill(os.getpid(), signal.SIGINT)
    return on_step


def test_ctrl_c_stops_the_run_and_the_callers_loop(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=6)
    before = signal.getsignal(signal.SIGINT)        # the caller's (ignored when pytest runs in the background)
    finished = []
    with pytest.raises(KeyboardInterrupt) as stopped:
        for seed in (1, 2):
            finished.append(desim.run_study(desim.load_study(root, seed=seed), on_step=ctrl_c_at(2)))
    assert finished == []                       # the loop stopped at its first run
    assert isinstance(stopped.value, RunInterrupted) and not isinstance(stopped.value, Exception)
    result = stopped.value.result
    assert (result.status, result.steps_done, result.stopped_by) == ("interrupted", 2, signal.SIGINT)
    assert f"desim.resume({str(root)!r}, {result.run_id!r})" in str(stopped.value)
    assert sql(root, "SELECT run_id, status, last_step FROM runs") == [(result.run_id, "interrupted", 2)]
    # the handler is the caller's again, and the run resumes to the panel of a run never stopped
    assert signal.getsignal(signal.SIGINT) == before
    resumed = desim.resume(root, result.run_id)
    assert (resumed.status, resumed.steps_done) == ("completed", 6)
    whole = desim.run_study(desim.load_study(root, seed=1))
    panel = "SELECT step, agent_id, state::VARCHAR FROM panel WHERE run_id = ? ORDER BY step, agent_id"
    assert sql(root, panel, [result.run_id]) == sql(root, panel, [whole.run_id])


def test_a_branch_from_python_stops_the_same_way(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=6)
    parent = desim.run_study(desim.load_study(root))
    with pytest.raises(RunInterrupted) as stopped:
        desim.branch(root, parent.run_id, 2, on_step=ctrl_c_at(4))
    assert (stopped.value.result.status, stopped.value.result.steps_done) == ("interrupted", 4)


def test_ctrl_c_during_the_last_step_leaves_the_run_completed_and_still_stops_the_caller(tmp_path):
    """Too late to stop a step: the run completes, stored whole, and the loop stops all the same."""
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    finished = []
    with pytest.raises(RunInterrupted) as stopped:
        for seed in (1, 2):
            finished.append(desim.run_study(desim.load_study(root, seed=seed), on_step=ctrl_c_at(3)))
    assert finished == []
    result = stopped.value.result
    assert (result.status, result.steps_done, result.stopped_by) == ("completed", 3, None)
    assert str(stopped.value) == f"Ctrl-C as run {result.run_id} ended: it completed its 3 steps and is stored"
    assert sql(root, "SELECT status, last_step FROM runs") == [("completed", 3)]


def test_ctrl_c_during_the_end_of_run_merge_lets_it_finish_and_stops_the_caller(tmp_path, monkeypatch):
    from desim.store import files
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    merge = files.RunFiles.merge

    def merge_under_ctrl_c(self):
        os.kill(os.getpid(), signal.SIGINT)
        return merge(self)
    monkeypatch.setattr(files.RunFiles, "merge", merge_under_ctrl_c)
    with pytest.raises(RunInterrupted) as stopped:
        desim.run_study(desim.load_study(root))
    assert stopped.value.result.status == "completed"
    assert sql(root, "SELECT status, count(DISTINCT step) FROM panel JOIN runs USING (run_id) GROUP BY status") \
        == [("completed", 3)]


def test_a_second_ctrl_c_inside_a_step_says_which_run_what_is_kept_and_how_to_go_on(tmp_path, capsys):
    from desim.cli import main
    root = write_walk_study(tmp_path / "walk", n_steps=5)
    model = root / "model.py"           # the walk's exit_step: two Ctrl-Cs there instead of sys.exit
    model.write_text(model.read_text().replace(
        "sys.exit(3)", "import os, signal\n            os.kill(os.getpid(), signal.SIGINT)\n"
                       "            os.kill(os.getpid(), signal.SIGINT)"))
    assert main(["run", str(root), "--set", "exit_step=3"]) == 130
    (run_id, status, last), = sql(root, "SELECT run_id, status, last_step FROM runs")
    assert (status, last) == ("interrupted", 2)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"desim: interrupted: a second Ctrl-C stopped run {run_id} inside step 3: steps 1..2 are kept, "
                   f"step 3 is lost; desim run {root} --resume {run_id} continues it")


def test_a_ctrl_c_after_a_sigterm_is_not_called_a_second_ctrl_c(tmp_path, capsys):
    from desim.cli import main
    root = write_walk_study(tmp_path / "walk", n_steps=5)
    model = root / "model.py"           # a SIGTERM asks for the step boundary; the Ctrl-C after it stops now
    model.write_text(model.read_text().replace(
        "sys.exit(3)", "import os, signal\n            os.kill(os.getpid(), signal.SIGTERM)\n"
                       "            os.kill(os.getpid(), signal.SIGINT)"))
    assert main(["run", str(root), "--set", "exit_step=3"]) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "a Ctrl-C after SIGTERM stopped run" in err and "second Ctrl-C" not in err
