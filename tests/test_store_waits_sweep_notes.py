"""``desim sweep`` and ``desim effect`` say that they wait for a held store before their progress bar exists.

Their first waits (recording the plan, the study's version) come before the bar is made, and the note was
dropped while there was no bar: a notebook's open connection kept a sweep silent for as long as it held the
store, while ``desim run`` says after 5 s that it waits. They now say it as ``desim run`` does."""
from __future__ import annotations

import queue
import subprocess
import sys
import threading

import pytest

from desim.cli import main
from desim.commands.effect import PairsProgress
from desim.commands.sweep import SweepProgress
from desim.store import StudyLayout
from walk_study import write_walk_study
from waits import HANG_S, holding

BUSY = ("cannot open walk/runs/desim.duckdb for writing: it is locked by process 4242 (python3.11). Another "
        "process holds it: a desim run writing to it, or a reader that keeps a connection open (a notebook's "
        "duckdb.connect); wait for it, close that connection, or use another study copy.")


@pytest.mark.parametrize("progress", [SweepProgress("walk", "walk", "local", 2), PairsProgress("walk", "walk"),
                                      SweepProgress("walk", "walk", "local", 2, quiet=True)],
                         ids=["sweep", "effect", "sweep --quiet"])
def test_a_wait_before_the_runs_are_planned_is_said(progress, capsys):
    progress.waiting(BUSY)
    err = capsys.readouterr().err
    assert err.startswith("desim: note: walk: the study's store is held by another process; desim waits for it")
    assert "locked by process 4242 (python3.11)" in err
    assert "use another study copy" not in err      # the advice to give up is not what a wait says
    assert err.count("\n") == 1


def test_a_wait_with_a_quiet_bar_is_said_too(capsys):
    """--quiet: no bar, but the wait is said, as desim run --quiet says its own."""
    progress = SweepProgress("walk", "walk", "local", 2, quiet=True)

    class Plan:
        sweep_id, grid, replicates = "s1", {"x": [1, 2]}, 1

    progress.start(Plan(), 2)
    progress.waiting(BUSY)
    assert "desim: note: walk: the study's store is held by another process" in capsys.readouterr().err




@pytest.mark.slow
def test_a_sweep_kept_from_starting_by_a_notebooks_connection_says_that_it_waits(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=2)
    assert main(["run", str(root), "--quiet"]) == 0
    argv = [sys.executable, "-m", "desim.cli", "sweep", str(root), "--set", "lockdown_day=1,2", "--workers", "1",
            "--allow"]
    lines: queue.Queue = queue.Queue()
    with holding(StudyLayout(root).db) as holder:
        sweep = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=lambda: [lines.put(line) for line in sweep.stderr] + [lines.put(None)],
                         daemon=True).start()
        said = []
        try:
            while not said or "waits for it" not in said[-1]:
                try:
                    line = lines.get(timeout=HANG_S)
                except queue.Empty:
                    raise AssertionError(f"the sweep said nothing of its wait in {HANG_S:g} s: {''.join(said)}") \
                        from None
                assert line is not None, f"the sweep ended ({sweep.wait()}) without saying it waits: {''.join(said)}"
                said.append(line)
        except BaseException:
            sweep.kill()
            raise
        assert said[-1].startswith("desim: note: walk: the study's store is held by another process")
        assert f"process {holder.pid} (" in said[-1]
        assert sweep.poll() is None         # it waits, and goes on once the connection is closed
    out, _ = sweep.communicate(timeout=HANG_S)
    assert sweep.returncode == 0, "".join(said)
    assert "2 of 2 runs completed" in out
