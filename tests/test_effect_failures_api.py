"""An effect or a sweep called from Python whose runs fail does not hand back a partial result in silence:
it warns (``RunsFailedWarning``: how many runs, the first error, the ``resume=`` call) once what completed
is stored; a caller that makes the warning an error loses nothing; the command line, which reports the
failures itself and exits 2, prints no Python warning."""
from __future__ import annotations

import re
import warnings

import pytest

import desim
from desim.cli import main
from desim.experiments.effects import RunsFailedWarning
from desim.experiments.sweep import run_sweep
from storeq import sql
from walk_study import write_walk_study

ONE = ["--workers", "1", "--quiet"]

# the second treatment (a branch, run id "<effect>-t1") fails at step 4 until a file 'healed' is beside the study
FAILING_BRANCH = '''
    def decide_batch(self, observations, memories):
        t = observations[0].step
        if t == 4 and self.ctx.run_id.endswith("-t1") and not (self.ctx.root / "healed").exists():
            raise ValueError("branch t1 refuses step 4")
'''


def failing_branch_study(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=5, lockdown_day=4)
    model = root / "model.py"
    text = model.read_text()
    head = "\n    def decide_batch(self, observations, memories):\n        t = observations[0].step\n"
    assert head in text
    model.write_text(text.replace(head, FAILING_BRANCH, 1))
    return root


def statuses(root) -> dict[str, str]:
    return dict(sql(root, "SELECT run_id, status FROM runs"))


def test_an_effect_with_a_failed_branch_warns_and_resume_finishes_it(tmp_path):
    root = failing_branch_study(tmp_path)
    with pytest.warns(RunsFailedWarning) as caught:
        result = desim.effect(root, 3, {"lockdown_day": 3}, replicates=2, workers=1)
    (warning,) = [w for w in caught if w.category is RunsFailedWarning]
    eid = result.effect_id
    message = str(warning.message)
    assert message.startswith(f"effect {eid}: 1 run did not complete, so only 1 of 2 pairs completed")
    assert f"first error, {eid}-t1: " in message and "ValueError: branch t1 refuses step 4" in message
    assert f"desim.effect({str(root)!r}, resume={eid!r})" in message
    assert warning.filename == __file__          # it points at the caller's line, not into desim
    assert warning.message.result is not None and warning.message.result.effect_id == eid
    # the warning came after everything that completed was stored
    assert statuses(root) == {f"{eid}-c0": "completed", f"{eid}-c1": "completed", f"{eid}-t0": "completed",
                              f"{eid}-t1": "failed"}
    assert result.completed == 1 and result.failed == [f"{eid}-t1"]
    assert {m["n"] for m in desim.effect_table(root, eid)["metrics"]} == {1}

    (root / "healed").touch()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RunsFailedWarning)      # a complete effect does not warn
        done = desim.effect(root, resume=eid, workers=1)
    assert done.completed == 2 and not done.errors
    assert {m["n"] for m in desim.effect_table(root, eid)["metrics"]} == {2}


def test_a_caller_that_makes_it_an_error_gets_it_raised_with_the_runs_kept(tmp_path):
    root = failing_branch_study(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RunsFailedWarning)
        with pytest.raises(RunsFailedWarning, match=r"1 run did not complete.*refuses step 4") as raised:
            desim.effect(root, 3, {"lockdown_day": 3}, replicates=2, workers=1)
    eid = raised.value.result.effect_id
    assert sorted(statuses(root).values()) == ["completed", "completed", "completed", "failed"]
    assert raised.value.result.failed == [f"{eid}-t1"]
    assert not (root / "runs" / "effects").exists()        # its worker files cleaned up as on any return


def test_a_sweep_with_a_failed_run_warns_and_its_command_line_does_not(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk", n_steps=3, lockdown_day=2)
    with pytest.warns(RunsFailedWarning) as caught:
        result = run_sweep(root, {"exit_step": ["0", "2"]}, workers=1)
    (warning,) = [w for w in caught if w.category is RunsFailedWarning]
    sid, (bad,) = result.sweep_id, result.failed
    message = str(warning.message)
    assert message.startswith(f"sweep {sid}: 1 run did not complete, so only 1 of 2 planned runs completed")
    assert f"first error, {bad}: study code called sys.exit(3) during step 2" in message
    assert f"run_sweep({str(root)!r}, resume={sid!r})" in message
    assert statuses(root) == {f"{sid}-0-0": "completed", bad: "failed"}

    # desim sweep and desim effect say it their own way (exit status 2, the failed runs, --resume): a
    # Python warning on top would only repeat it, so even one made an error does not escape them
    with warnings.catch_warnings():
        warnings.simplefilter("error", RunsFailedWarning)
        assert main(["sweep", str(root), "--resume", sid, *ONE]) == 2
        out = capsys.readouterr().out
        assert "0 failed" not in out and f"rerun them: desim sweep {root} --resume {sid}" in out
        effect_root = failing_branch_study(tmp_path / "effect")
        assert main(["effect", str(effect_root), "--at-step", "3", "--set", "lockdown_day=3", "--replicates", "2",
                     *ONE]) == 2
        out = capsys.readouterr().out
        assert re.search(r"effect ef\w+: 1 of 2 pairs completed", out) and "--resume ef" in out
