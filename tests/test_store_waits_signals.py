"""A signal to ``desim run`` while it waits for a held store to record its start ends it at once, nothing recorded.

The wait never asked whether a stop was requested: after one SIGTERM the run waited on, and once the store was
free it recorded the run, ran a step and ended ``interrupted`` (exit 143, an unwanted run left behind); two
SIGTERMs gave exit 2, "stopped by a second SIGTERM during step 0". Now the signal ends the wait and the command,
with the signal's exit status (143 SIGTERM, 130 Ctrl-C) and one line saying the run was not started."""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading

import pytest

from desim.cli import main
from desim.store import StudyLayout
from storeq import sql
from walk_study import write_walk_study
from waits import HANG_S, holding




def line_with(lines: queue.Queue, text: str, said: list[str]) -> str:
    """The next line from ``lines`` (a process's stderr, read by a thread) that holds ``text``."""
    while True:
        try:
            line = lines.get(timeout=HANG_S)
        except queue.Empty:
            raise AssertionError(f"nothing said {text!r} in {HANG_S:g} s: {''.join(said)}") from None
        if line is None:
            raise AssertionError(f"the run ended without saying {text!r}: {''.join(said)}")
        said.append(line)
        if text in line:
            return line


@pytest.mark.slow
@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "Ctrl-C"])
def test_a_signal_while_a_run_waits_to_start_ends_it_at_once_with_nothing_recorded(tmp_path, sig, status):
    root = write_walk_study(tmp_path / "walk", n_steps=2)
    assert main(["run", str(root), "--quiet"]) == 0
    layout = StudyLayout(root)
    before = sql(root, "SELECT run_id FROM runs")
    files = sorted(layout.live.iterdir()) + sorted(layout.data.iterdir())     # progress files, run folders
    with holding(layout.db):
        run = subprocess.Popen([sys.executable, "-m", "desim.cli", "run", str(root), "--steps", "2"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in run.stderr] + [lines.put(None)],
                         daemon=True).start()
        said: list[str] = []
        try:
            line_with(lines, "waits for the study's store", said)
            os.kill(run.pid, sig)
            # the holder still holds the store: the run ends while it waits, not once the store is free
            returncode = run.wait(HANG_S)
        finally:
            if run.poll() is None:
                run.kill()
        after = []
        while (line := lines.get(timeout=HANG_S)) is not None:
            after.append(line)
    assert returncode == status, "".join(said + after)
    name = "Ctrl-C" if sig == signal.SIGINT else "SIGTERM"
    assert len(after) == 1 and after[0].startswith(f"desim: {name} while run "), after     # one line
    assert "the run was not started, nothing recorded" in after[0]
    assert run.stdout.read() == ""          # no run summary: there is no run
    assert sql(root, "SELECT run_id FROM runs") == before
    assert sorted(layout.live.iterdir()) + sorted(layout.data.iterdir()) == files


def test_a_second_signal_while_the_wait_ends_stops_nothing_mid_way():
    """Two signals close together (a scheduler's TERM, then another): the first ends the wait at its next try;
    the second, landing before that try, raises nothing where the wait happens to be (it gave exit 2, "stopped
    by a second SIGTERM during step 0"). Once the run is recorded, a second signal stops it at once, as ever."""
    from desim.errors import StopRun
    from desim.run.execute import RunNotStarted, Signals

    class Ctx:
        step = 0

    recorded = False
    signals = Signals(Ctx(), "rwaiting", lambda: recorded)
    assert signals.stop_request() is None           # waiting, no signal yet
    signals._on_signal(signal.SIGTERM, None)
    signals._on_signal(signal.SIGTERM, None)        # no StopRun raised inside the wait
    stop = signals.stop_request()
    assert isinstance(stop, RunNotStarted) and stop.signum == signal.SIGTERM
    assert str(stop) == ("SIGTERM while run rwaiting waited for the study's store (held by another process): the "
                         "run was not started, nothing recorded")
    recorded = True                                 # the run is recorded: its stop is at a step boundary
    assert signals.stop_request() is None
    with pytest.raises(StopRun, match="second SIGTERM"):
        signals._on_signal(signal.SIGTERM, None)
