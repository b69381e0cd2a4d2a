"""The time left that a long command shows is the pace of its recent units, not of its first one.

A run's first step also imports the study's code and builds its population and network: the walk saw
"about 2 min 28 s left" after step 1 of a run that took 6 s. Timings here are invented, so every
expected value is worked out by hand from them."""
from __future__ import annotations

import io

from desim.commands.progress import MIN_UNITS, RECENT, Progress, time_left


def test_no_estimate_until_a_few_units_after_the_first():
    assert MIN_UNITS == 2
    assert time_left([(1, 2.0)], 100) is None                     # only the first step: its set-up says nothing
    assert time_left([(1, 2.0), (2, 2.25)], 100) is None          # one step after it
    # two steps after the first, 0.25 s each: 97 steps to go at 0.25 s
    assert time_left([(1, 2.0), (2, 2.25), (3, 2.5)], 100) == 24.25


def test_no_estimate_when_the_total_is_unknown_or_reached():
    marks = [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0)]
    assert time_left(marks, 0) is None          # a resume or a branch: no total
    assert time_left(marks, 4) is None          # every unit done
    assert time_left(marks, 10) == 6.0          # 6 to go at 1 s


def test_units_that_finish_together_count_at_their_pace():
    """A sweep's workers end runs in bursts: 2 runs done at 10 s, 6 at 14 s is a run a second."""
    assert time_left([(2, 10.0), (6, 14.0)], 20) == 14.0


class Clock:
    """Invented seconds: each call gives the next."""

    def __init__(self, times):
        self.times = iter(times)

    def __call__(self):
        return next(self.times)


def lines_of(progress: Progress, steps) -> list[str]:
    for step in steps:
        progress(step, {})
    return progress.stream.getvalue().splitlines()


def test_the_first_step_s_set_up_is_not_taken_for_the_pace(monkeypatch):
    """100 steps: set-up and step 1 take 2 s, then 0.25 s a step. The old estimate after step 1 was
    2 s x 99 = 198 s ("3 min 18 s"); the run has 99 x 0.25 = 24.75 s to go."""
    monkeypatch.setenv("DESIM_PROGRESS", "lines")
    monkeypatch.setenv("DESIM_PROGRESS_EVERY", "0")
    times = [0.0, 2.0, 2.25, 2.5, 2.75]
    out = lines_of(Progress(100, "long", stream=io.StringIO(), clock=Clock(times)), range(1, 5))
    assert [line.split(" ", 1)[1] for line in out] == [
        "long: step 1/100 (1 %), elapsed 2.0 s",
        "long: step 2/100 (2 %), elapsed 2.2 s",
        "long: step 3/100 (3 %), elapsed 2.5 s, about 24 s left",       # 97 x 0.25 = 24.25
        "long: step 4/100 (4 %), elapsed 2.8 s, about 24 s left"]       # 96 x 0.25 = 24.0


def test_the_pace_is_the_recent_one(monkeypatch):
    """Steps of 0.1 s, then of 1 s from step 31 on (the population grows): at step 60 the estimate is the
    last RECENT steps' pace, 40 steps x 1 s, where the whole run's average would say far less."""
    monkeypatch.setenv("DESIM_PROGRESS", "lines")
    monkeypatch.setenv("DESIM_PROGRESS_EVERY", "0")
    assert RECENT == 20
    times = [0.0, 5.0]                       # set-up and step 1
    for step in range(2, 61):
        times.append(times[-1] + (0.1 if step <= 30 else 1.0))
    out = lines_of(Progress(100, "grow", stream=io.StringIO(), clock=Clock(times)), range(1, 61))
    assert out[-1].endswith("grow: step 60/100 (60 %), elapsed 38 s, about 40 s left")   # 5 + 29 x 0.1 + 30 x 1


def test_the_bar_waits_for_its_estimate_too(monkeypatch):
    """On a terminal: no time left beside step 1 or 2 of 10; from step 3 the pace of steps 2 and 3."""

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("DESIM_PROGRESS", "auto")
    bar = Progress(10, "walk", stream=Terminal(), clock=Clock([0.0, 3.0, 4.0, 5.0]))
    for step in (1, 2, 3):
        bar(step, {})
    frames = [f for f in bar.stream.getvalue().split("\r") if f]
    assert [("left" in f) for f in frames] == [False, False, True]
    assert "step 3/10 (30 %), 5.0 s, about 7.0 s left" in frames[2]             # 7 steps at 1 s
