"""Progress on stderr for long commands: timestamped lines when stderr is no terminal (a log file, a
scheduler's log), a bar with elapsed time and time left on a terminal, nothing with --quiet."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

from desim.commands.progress import Progress, duration
from walk_study import write_walk_study
from waits import HANG_S

STAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d walk: step (\d+)/12 \((\d+) %\), elapsed [\d.]+ s")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(root, *args, **env):
    return subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root), *args], capture_output=True,
                          text=True, timeout=HANG_S, env={**os.environ, "DESIM_PROGRESS": "auto", **env})


def test_a_run_into_a_log_writes_timestamped_lines_as_it_goes(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=12)
    done = run(root, DESIM_PROGRESS_EVERY="0")          # stderr is a pipe: lines, one a step here
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if STAMPED.match(line)]
    assert [int(STAMPED.match(line).group(1)) for line in lines] == list(range(1, 13))
    assert ["left" in line for line in lines[:3]] == [False, False, True]    # once 2 steps after the first
    assert "left" not in lines[-1] and "(100 %)" in lines[-1]
    assert "\r" not in done.stderr
    # the default interval writes the first and the last step at least, never nothing
    lines = [line for line in run(root).stderr.splitlines() if STAMPED.match(line)]
    assert len(lines) >= 2 and "step 1/12" in lines[0] and "step 12/12" in lines[-1]
    for quiet in (run(root, "--quiet"), run(root, DESIM_PROGRESS="off")):
        assert quiet.returncode == 0 and not any(STAMPED.match(line) for line in quiet.stderr.splitlines())


def test_on_a_terminal_a_bar_with_elapsed_time_and_time_left(monkeypatch):
    monkeypatch.setenv("DESIM_PROGRESS", "auto")
    out = Terminal()
    bar = Progress(4, "walk", stream=out)
    for step in range(1, 5):
        bar(step, {})
    text = out.getvalue()
    assert bar.mode == "bar" and text.count("\r") == 4 and text.endswith("\n")
    assert "[" + "#" * 7 + "." * 23 + "] step 1/4 (25 %)" in text and "left" in text
    assert "step 4/4 (100 %)" in text.split("\r")[-1] and "left" not in text.split("\r")[-1]
    quiet = Terminal()
    Progress(4, "walk", stream=quiet, quiet=True)(1, {})
    assert quiet.getvalue() == ""


def test_durations_read_as_a_person_reads_them():
    assert [duration(s) for s in (3.25, 42, 185, 7440)] == ["3.2 s", "42 s", "3 min 05 s", "2 h 04 min"]


def test_a_closed_pipe_stops_the_progress_lines_not_the_run():
    """`desim run ... 2>&1 | head -1`: once nobody reads, writing raises BrokenPipeError; the run goes on."""
    from desim.commands.progress import Progress

    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def isatty(self):
            return False

    p = Progress(10, "study", stream=Closed())
    p(1)
    p.note("a note")
    p(2)
    assert p.mode == "off"


def test_work_that_ends_before_its_total_closes_the_bar_and_says_its_last_step(monkeypatch):
    """A run that its study ended early (stop_when), a branch whose length is not known: what is printed
    next starts on a line of its own, and a log says the last step even between two timed lines."""
    monkeypatch.setenv("DESIM_PROGRESS", "auto")
    out = Terminal()
    bar = Progress(100, "epi", stream=out)
    for step in range(1, 68):
        bar(step, {})
    assert not out.getvalue().endswith("\n")
    bar.finish()
    bar.finish()                                        # said once however often it is called
    assert out.getvalue().endswith("   \n") and out.getvalue().count("\n") == 1
    monkeypatch.setenv("DESIM_PROGRESS", "lines")
    monkeypatch.setenv("DESIM_PROGRESS_EVERY", "3600")
    log = io.StringIO()
    lines = Progress(0, "branch of r1", stream=log)
    for step in range(1, 13):
        lines(step, {})
    lines.finish()
    lines.finish()
    said = log.getvalue().splitlines()
    assert len(said) == 2 and "step 1," in said[0] and "step 12," in said[1] and "left" not in said[1]
    nothing = Progress(5, "none", stream=io.StringIO())
    nothing.finish()                                    # nothing reported: nothing to close
    assert nothing.stream.getvalue() == ""


def test_a_run_its_study_ends_early_says_its_last_step_in_the_log(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=12)
    sim = root / "simulation" / "simulation.json"
    config = json.loads(sim.read_text())
    config["stop_when"] = [{"metric": "mean_x", "op": "<", "value": -3}]     # the lockdown's drift: at step 8
    sim.write_text(json.dumps(config))
    done = run(root, DESIM_PROGRESS="lines", DESIM_PROGRESS_EVERY="3600")
    assert done.returncode == 0, done.stderr
    assert "ended after step 8 of 12" in done.stdout
    said = [line for line in done.stderr.splitlines() if " walk: step " in line]
    assert len(said) == 2 and "step 1/12 (8 %)" in said[0] and "step 8/12 (66 %)" in said[1]
