"""A signal that lands when a run has nothing left to do does not make it ``interrupted``: during the last
step (seen at its boundary, once the step is stored), during the end-of-run merge (which finishes), or as
the ``desim run`` process prints and exits after the run. The run is stored ``completed`` and the command
exits 0 without a word of interruption; a signal during an earlier step still interrupts it
(test_run_status.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import desim
from desim.cli import main
from desim.store import files
from storeq import sql
from walk_study import write_walk_study
from waits import HANG_S

N_STEPS = 4

# the last step's decision says it has started (a file 'ready') and waits for a file 'go': the test
# sends its signal in between, so the signal lands during the last step, always
LAST_STEP_WAITS = '''
    def decide_batch(self, observations, memories):
        t = observations[0].step
        if t == self.ctx.n_steps:
            (self.ctx.root / "ready").touch()
            given = time.monotonic() + HANG_S
            while not (self.ctx.root / "go").exists() and time.monotonic() < given:
                time.sleep(0.01)
'''


def waiting_study(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=N_STEPS, lockdown_day=2)
    model = root / "model.py"
    text = model.read_text()
    head = "\n    def decide_batch(self, observations, memories):\n        t = observations[0].step\n"
    assert head in text
    text = text.replace(head, LAST_STEP_WAITS, 1).replace("import time\n", f"import time\n\nHANG_S = {HANG_S}\n", 1)
    model.write_text(text)
    return root


def wait_for_file(path, proc):
    deadline = time.monotonic() + HANG_S
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"timed out waiting for {path}"
        time.sleep(0.02)


def test_sigterm_during_the_last_step_leaves_the_run_completed_and_exits_0(tmp_path):
    """Seen at the last step's boundary, once the step is stored: nothing is left to stop (the engine
    consults the signal after each stored step; after the last one its stop request goes unheard)."""
    root = waiting_study(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "desim.cli", "run", str(root)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for_file(root / "ready", proc)
    proc.send_signal(signal.SIGTERM)
    (root / "go").touch()
    out, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 0, (out, err)
    (run_id, status, last, error), = sql(root, "SELECT run_id, status, last_step, error FROM runs")
    assert (status, last, error) == ("completed", N_STEPS, None)
    assert sql(root, "SELECT count(DISTINCT step) FROM panel") == [(N_STEPS,)]
    assert f"run {run_id}: completed\n" in out
    assert "interrupted" not in out + err and "resume" not in out + err and "stopped by" not in out + err


def test_a_signal_during_the_merge_lets_it_finish(tmp_path, monkeypatch):
    """Two SIGTERMs as the run's step files merge into the store (the second would stop a run now): the
    merge finishes and the run is completed, every step kept."""
    root = write_walk_study(tmp_path / "walk", n_steps=N_STEPS, lockdown_day=2)
    merge = files.RunFiles.merge

    def merge_under_signals(self):
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        return merge(self)

    monkeypatch.setattr(files.RunFiles, "merge", merge_under_signals)
    before = signal.getsignal(signal.SIGTERM)
    result = desim.run_study(desim.load_study(root))
    assert (result.status, result.steps_done, result.stopped_by) == ("completed", N_STEPS, None)
    assert sql(root, "SELECT status, last_step FROM runs") == [("completed", N_STEPS)]
    assert sql(root, "SELECT count(DISTINCT step) FROM panel") == [(N_STEPS,)]
    assert signal.getsignal(signal.SIGTERM) is before       # a library caller gets its handler back


# desim's command line as its console script runs it, then a SIGTERM once main() has returned and a SIGHUP
# as the interpreter exits: where a scheduler's time limit races the end of a completed run
AFTER_MAIN = """
import atexit, json, os, signal, sys
from desim.cli import main
code = main(json.loads(sys.argv[1]))
os.kill(os.getpid(), signal.SIGTERM)
print("exiting with", code, flush=True)
atexit.register(os.kill, os.getpid(), signal.SIGHUP)
sys.exit(code)
"""


def test_sigterm_as_the_command_exits_after_a_completed_run_exits_0(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=N_STEPS, lockdown_day=2)
    done = subprocess.run([sys.executable, "-c", AFTER_MAIN, json.dumps(["run", str(root), "--quiet"])],
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "exiting with 0" in done.stdout and "interrupted" not in done.stdout + done.stderr
    assert sql(root, "SELECT status, last_step FROM runs") == [("completed", N_STEPS)]


def test_sigterm_as_the_command_exits_after_a_completed_branch_exits_0(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=N_STEPS, lockdown_day=2)
    parent = desim.run_study(desim.load_study(root)).run_id
    done = subprocess.run([sys.executable, "-c", AFTER_MAIN, json.dumps(["branch", str(root), "--from-run", parent, "--at-step", "2", "-q"])],
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "exiting with 0" in done.stdout and "interrupted" not in done.stdout + done.stderr
    assert sql(root, "SELECT status FROM runs WHERE run_id <> ?", [parent]) == [("completed",)]


def test_the_command_called_in_process_gives_the_handlers_back(tmp_path):
    """A test or a notebook calling desim.cli.main goes on after the run: its SIGTERM and Ctrl-C handlers
    are as they were, not held until the process exits."""
    root = write_walk_study(tmp_path / "walk", n_steps=2, lockdown_day=2)
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    assert main(["run", str(root), "--quiet"]) == 0
    assert {s: signal.getsignal(s) for s in before} == before
