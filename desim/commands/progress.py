"""How a long command says how far it got, on stderr: a bar with the elapsed time and an estimate of
the time left on a terminal; plain timestamped lines at a steady interval anywhere else (a log file,
a SLURM or nohup log, a pipe), so a log never stays empty until the end; nothing with ``--quiet``.

``DESIM_PROGRESS`` chooses for every command: ``auto`` (the default: a bar on a terminal, lines
elsewhere), ``bar``, ``lines`` or ``off``; ``DESIM_PROGRESS_EVERY`` is the seconds between two lines
(default 10; the first and the last are always written).

The time left (:func:`time_left`) is the rate of the recent units, from the end of the first one on: the
first step of a run also imports the study's code and builds its population and network, and the first
runs of a sweep start their worker processes, so an estimate from it overstated a long run's time many
times over. It is shown once a few units after the first are timed.
"""
from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TextIO

MODES = ("auto", "bar", "lines", "off")
EVERY_S = 10.0
MIN_UNITS = 2      # units timed after the first one before a time left is estimated
RECENT = 20        # the estimate's rate is over the last RECENT reports (the first unit's end while fewer)


def chosen_mode(quiet: bool = False, stream: TextIO | None = None) -> str:
    """``bar``, ``lines`` or ``off``: ``--quiet``, then ``DESIM_PROGRESS``, then whether ``stream``
    (stderr) is a terminal. An unknown ``DESIM_PROGRESS`` is said once and read as ``auto``."""
    if quiet:
        return "off"
    stream = stream or sys.stderr
    mode = os.environ.get("DESIM_PROGRESS", "auto").strip().lower() or "auto"
    if mode not in MODES:
        stream.write(f"desim: DESIM_PROGRESS={mode!r} is not one of {', '.join(MODES)}; using auto\n")
        mode = "auto"
    if mode == "auto":
        return "bar" if stream.isatty() else "lines"
    return mode


def every_s(stream: TextIO | None = None) -> float:
    """``DESIM_PROGRESS_EVERY``: seconds between timestamped lines; a value that is no number is said once
    and read as the default."""
    text = os.environ.get("DESIM_PROGRESS_EVERY", "")
    if not text.strip():
        return EVERY_S
    try:
        return max(0.0, float(text))
    except ValueError:
        (stream or sys.stderr).write(f"desim: DESIM_PROGRESS_EVERY={text!r} is not a number of seconds; "
                                     f"using {EVERY_S:g}\n")
        return EVERY_S


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 04 min``: how long, as a person reads it."""
    s = int(round(seconds))
    if s < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def time_left(marks: Sequence[tuple[int, float]], total: int) -> float | None:
    """Seconds left for ``total`` units at the rate of the units between the first and the last of ``marks``
    (``(units done, seconds)`` as reported, oldest first), or None while that says nothing yet.

    ``marks`` start at the end of the first unit, never before it, so its set-up cost (imports, building
    the population) is not taken for the pace of the rest; None until ``MIN_UNITS`` more are done, with
    ``total`` unknown (0), or when every unit is done."""
    if not total or len(marks) < 2:
        return None
    (done_then, then), (done_now, now) = marks[0], marks[-1]
    if done_now >= total or done_now - done_then < MIN_UNITS or now <= then:
        return None
    return (now - then) / (done_now - done_then) * (total - done_now)


class Progress:
    """Progress over ``total`` units (steps, runs): call it with the number done so far.

    Its call signature is the engine's ``on_step(step, metrics)``, so it is given to a run as it is;
    ``total`` 0 means unknown (a resume or a branch): the count and elapsed time, no estimate.
    ``clock`` gives the seconds (a test gives invented timings)."""

    def __init__(self, total: int, label: str, unit: str = "step", quiet: bool = False,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.perf_counter):
        self.total, self.label, self.unit = total, label, unit
        self.stream = stream or sys.stderr
        self.mode = chosen_mode(quiet, self.stream)
        self.every = every_s(self.stream) if self.mode == "lines" else EVERY_S
        self.clock = clock
        self.t0 = clock()
        self._last_line: float | None = None
        self._bar_open = False
        self._marks: deque[tuple[int, float]] = deque(maxlen=RECENT + 1)   # (done, time) of the recent reports
        self._done = 0              # the last step (or run) reported
        self._line_done = 0         # the last one a timestamped line said

    def __call__(self, done: int, *_) -> None:
        if self.mode == "off" or done < 1:
            return
        try:
            self._report(done)
        except OSError:         # nobody reads any more (a pipe closed by `| head`): the run goes on, unreported
            self.mode = "off"

    def _report(self, done: int) -> None:
        now = self.clock()
        elapsed = now - self.t0
        self._done = done
        self._marks.append((done, now))
        if self.mode == "bar":
            self._bar(done, elapsed)
        elif self._last_line is None or now - self._last_line >= self.every or done == self.total:
            self._line(done, now)

    def _line(self, done: int, now: float, estimate: bool = True) -> None:
        self._last_line = now
        self._line_done = done
        stamp = datetime.now().isoformat(timespec="seconds")
        self.stream.write(f"{stamp} {self.label}: {self._where(done)}, elapsed {duration(now - self.t0)}"
                          f"{self._left() if estimate else ''}\n")
        self.stream.flush()

    def finish(self) -> None:
        """The work is over, whether or not it reached ``total`` (a run that ended early, a branch whose
        length was not known, a stop): the bar's line is closed, so that what is printed next starts on
        a line of its own, and in lines mode the last step reported is said if no line said it yet."""
        if self.mode == "off" or self._done < 1:
            return
        try:
            if self._bar_open:
                self.stream.write("\n")
                self._bar_open = False
            elif self.mode == "lines" and self._line_done != self._done:
                self._line(self._done, self.clock(), estimate=False)   # it is over: no time left to guess
            self.stream.flush()
        except OSError:
            self.mode = "off"

    def note(self, text: str) -> None:
        """A line of its own (a failed run, a wait), not overwritten by the bar."""
        if self.mode == "off":
            return
        if self._bar_open:
            self.stream.write("\n")
            self._bar_open = False
        stamp = "" if self.mode == "bar" else datetime.now().isoformat(timespec="seconds") + " "
        try:
            self.stream.write(f"{stamp}{self.label}: {text}\n")
            self.stream.flush()
        except OSError:
            self.mode = "off"

    def _where(self, done: int) -> str:
        if not self.total:
            return f"{self.unit} {done}"
        return f"{self.unit} {done}/{self.total} ({100 * done // self.total} %)"

    def _left(self) -> str:
        left = time_left(self._marks, self.total)
        return "" if left is None else f", about {duration(left)} left"

    def _bar(self, done: int, elapsed: float) -> None:
        filled = int(30 * done / self.total) if self.total else 0
        bar = f"[{'#' * filled}{'.' * (30 - filled)}] " if self.total else ""
        self.stream.write(f"\r{self.label} {bar}{self._where(done)}, {duration(elapsed)}"
                          f"{self._left()}   ")
        self._bar_open = True
        if self.total and done >= self.total:
            self.stream.write("\n")
            self._bar_open = False
        self.stream.flush()


class RunsProgress:
    """Progress over the runs of a sweep or an effect, once they are planned (``start``, which the
    command writes): a line of its own for a run that did not complete, and ``waiting`` for a note
    while nothing finishes."""

    bar: Progress | None = None
    label = "desim"

    def waiting(self, reason: str) -> None:
        """The command waits for the study's store, which another process holds: to record its plan (before
        ``start``, no bar yet) or to merge finished runs. Said once a wait, in the bar's output when it
        shows one, else as ``desim run`` says its wait (a ``desim: note:`` line on stderr, ``--quiet`` or
        not): a sweep or an effect that a notebook's connection kept from starting was silent for as long."""
        why = reason.split(". Another process holds it")[0]      # who holds it, not the advice to give up
        if self.bar is not None and self.bar.mode != "off":
            self.bar.note(f"the study's store is held by another process; desim waits for it and goes on when "
                          f"it is free (workers carry on): {why}")
            return
        try:
            sys.stderr.write(f"desim: note: {self.label}: the study's store is held by another process; desim "
                             f"waits for it and goes on when it is free (close a notebook's connection to it; "
                             f"Ctrl-C stops): {why}\n")
            sys.stderr.flush()
        except OSError:     # nobody reads stderr any more: the command goes on
            pass

    def run_done(self, outcome, done: int, label: str) -> None:
        """``done`` runs so far; ``label`` names the run that ended in the line of one not completed."""
        if self.bar is None:
            return
        if outcome.status != "completed":
            self.bar.note(f"{label}: {outcome.error}")
        self.bar(done)

    def finish(self) -> None:
        """Closes the bar's line, whether every run was done or not (a stop, a failure to go on)."""
        if self.bar is not None:
            self.bar.finish()


def add_quiet_arg(p) -> None:
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress on stderr (also DESIM_PROGRESS=off; =lines for timestamped lines, =bar)")
