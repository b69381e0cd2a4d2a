"""A run as a whole: the engine into a sink, the process around it, and how it ended.

:func:`execute` runs an assembled study's ``Engine`` into a sink and turns what happened into a
status: ``completed``; ``interrupted`` for a clean stop (``StopRun``: a spent LLM budget, or a
``SIGTERM``, ``SIGHUP`` or first Ctrl-C, which end the run at the next step boundary); ``failed`` for
anything else, with the completed steps kept. Around the loop it manages the process: the signals,
and the cyclic garbage collector, kept away from the run (``docs/performance.md`` says why).

A signal can land when nothing is left to stop. One during the end-of-run merge changes nothing,
however many arrive (:meth:`Signals.finishing`): the merge finishes and the run is what it was. One
after the run, while the ``desim run`` process prints its summary and exits, is ignored when the
command asked for it (:func:`hold_signals_to_exit`), so a run stored ``completed`` exits 0, not 143.
"""
from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from desim.errors import RunFailed, RunStoppedMidStep, StopRun
from desim.run.assemble import Run
from desim.run.checks import RunError
from desim.run.engine import Engine
from desim.run.sink import Sink
from desim.study.contract import model_hook
from desim.study.failures import StudyCodeError, original, process_failure


@dataclass
class Outcome:
    """How a run ended: its status (``completed``, ``interrupted``), how far it got, and its counters."""

    run_id: str
    status: str
    steps_done: int
    rows_written: int
    wall_seconds: float
    error: str | None = None
    counters: dict[str, Any] = field(default_factory=dict)
    end_reason: str | None = None       # a run the study ended before n_steps (stop_when, ctx.end_run)
    stopped_by: int | None = None       # the signal that interrupted the run (its number), if one did
    ctrl_c: bool = False                # a Ctrl-C arrived, whether or not it stopped a step (the last, the merge)
    warnings: list[str] = field(default_factory=list)   # what the behaviour model says of its decisions


def execute(run: Run, source, sink: Sink, *, store_path: Path | str = ":memory:",
            on_step: Callable[[int, dict], None] | None = None, manage_gc: bool = True,
            handle_signals: bool = True) -> Outcome:
    """Run ``run`` into ``sink``, deciding by ``source``; raises :class:`RunFailed` for a failed run
    (its completed steps are kept, in ``store_path``) and returns the :class:`Outcome` otherwise."""
    started = time.perf_counter()
    # the lambda is asked only once the run goes, when ``engine`` exists: whether its run is recorded yet
    signals = Signals(run.ctx, run.run_id, lambda: engine.opened) if handle_signals else None
    engine = Engine(run, source, sink, on_step=on_step, should_stop=signals.requested if signals else None,
                    ready=gc.freeze if manage_gc else None)
    status, error, trace, failure = "running", None, None, None
    with gc_kept_away(manage_gc), one_blas_thread(), (signals or _nothing()):
        try:
            try:
                engine.run()
                last = run.ctx.step if run.ctx.end_reason is not None else run.n_steps
                if sink.last_written < last:    # never "completed" without every step it claims
                    raise RunError(f"the run's clock ran out before step {last} was stored (step "
                                   f"{max(sink.last_written, 0)} was the last): a study process that stops "
                                   "SimPy, or an event SimPy could not order")
                status = "completed"
            except BaseException as e:
                if not engine.opened:       # the study's set-up failed: nothing was recorded, say it as is
                    raise
                status, error, trace, failure = _ended(e, run)
                if isinstance(e, KeyboardInterrupt):    # stored as interrupted below, then said
                    llm = dict(counters()) if (counters := model_hook(run.decision, "counters")) else None
                    raise RunStoppedMidStep(run.run_id, run.root, run.ctx.step, max(sink.last_written, 0), llm,
                                            _what_stopped(signals)) from None
            finally:
                if signals is not None:
                    signals.finishing()     # the merge below finishes, whatever signal arrives now
                # the run's own time: not what it spent waiting for a store another process held
                sink.close(status, error, trace, time.perf_counter() - started - getattr(sink, "waited", 0.0))
        finally:
            run.decision.close()
    if failure is not None:
        raise RunFailed(run.run_id, error, Path(store_path), trace or "",
                        steps_done=max(sink.last_written, 0)) from failure
    counters = {**engine.counters, "rows_written": sink.rows_written, "messages": sink.messages}
    llm = model_hook(run.decision, "counters")
    if llm is not None:
        counters["llm"] = dict(llm())
    ended = run.ctx.end_reason if status == "completed" else None    # completed before n_steps: why
    # a run that stopped early counts the steps it stored, not the one it was in when it stopped
    done = max(sink.last_written, 0) if status != "completed" else run.ctx.step if ended else run.n_steps
    stopped_by = signals.received if signals is not None and status == "interrupted" else None
    said = list(warned()) if (warned := model_hook(run.decision, "warnings")) else []
    said += sink.warnings()
    wall = time.perf_counter() - started - getattr(sink, "waited", 0.0)
    return Outcome(run.run_id, status, done, sink.rows_written, wall, error, counters, ended,
                   stopped_by, signals is not None and signals.ctrl_c, said)


def _what_stopped(signals: "Signals | None") -> str:
    """What raised the ``KeyboardInterrupt`` inside a step, as the user is told it: a second Ctrl-C when the
    handler of :class:`Signals` raised it, else the ``KeyboardInterrupt`` itself (study code that raised it, or a
    Ctrl-C where desim has no handler: a run in a thread, ``handle_signals=False``): no Ctrl-C that never came."""
    if signals is not None and signals.stopped_now:
        first = signals.received
        return "a second Ctrl-C" if first == signal.SIGINT else f"a Ctrl-C after {signal.Signals(first).name}"
    if signals is not None and signals.installed and not signals.ctrl_c:
        return "a KeyboardInterrupt (study code raised it: no Ctrl-C came)"
    return "a KeyboardInterrupt"


def _ended(e: BaseException, run: Run) -> tuple[str, str, str | None, Exception | None]:
    """The status, message, traceback and (for a failed run) cause of a run that raised ``e``."""
    if isinstance(e, StopRun):
        return "interrupted", f"{type(e).__name__}: {e}", None, None
    if isinstance(e, KeyboardInterrupt):
        return "interrupted", "interrupted by the user", None, None
    if isinstance(e, SystemExit):       # a failed run like any other: study code does not choose the exit status
        message = f"study code called sys.exit({e.code!r}) during step {run.ctx.step}"
        return "failed", message, None, RuntimeError(message)
    e = original(e)
    if isinstance(e.__context__, (KeyboardInterrupt, StopRun)):  # a rollback failed under Ctrl-C
        return "interrupted", f"{type(e.__context__).__name__}: {e.__context__}", None, None
    if not isinstance(e, StudyCodeError):   # raised while the clock ran: maybe a study process
        e = process_failure(e, run.root, run.sim.now, run.ctx.step) or e
    if isinstance(e, StudyCodeError):
        return "failed", str(e), e.traceback, e
    return "failed", f"{type(e).__name__}: {e}", "".join(traceback.format_exception(e)), e


@contextmanager
def gc_kept_away(manage: bool):
    """The cyclic collector off for the run (the engine freezes set-up's objects out of its view just
    before the clock starts), back as it was after."""
    was = gc.isenabled()
    if manage:
        gc.disable()
    try:
        yield
    finally:
        if manage:
            gc.unfreeze()
            if was:
                gc.enable()


SET_BY_DESIM = "DESIM_OPENBLAS_NUM_THREADS"    # what desim.cli set OPENBLAS_NUM_THREADS to: not the user's choice


def one_blas_thread():
    """numpy's BLAS on one thread for the run, as the command line has it (``desim.cli``), unless the user
    chose a number (``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``): how BLAS splits a long sum among its
    threads rounds it (a dot product over 20,000 agents), so a run from Python and the same run from the
    command line stored panels that differed in the last bit."""
    chosen = {name for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS") if name in os.environ}
    if os.environ.get("OPENBLAS_NUM_THREADS") == os.environ.get(SET_BY_DESIM):
        chosen.discard("OPENBLAS_NUM_THREADS")      # desim.cli's, set too late for a numpy already loaded
    if chosen:
        return _nothing()
    from threadpoolctl import threadpool_limits      # reads which BLAS numpy loaded: a few ms, once a run
    return threadpool_limits(1, user_api="blas")


@contextmanager
def gc_paused(pause: bool):
    """The cyclic collector off for a block (set-up makes many objects and no cyclic garbage)."""
    was = gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause and was:
            gc.enable()


_held_to_exit = False           # set by hold_signals_to_exit(): the process ends with its run
_HELD_SIGNALS = (signal.SIGTERM, signal.SIGHUP)   # Ctrl-C is not held: see hold_signals_to_exit


def hold_signals_to_exit() -> None:
    """For a process that ends with its run (the ``desim run`` command): once the run is over, SIGTERM and
    SIGHUP are ignored until the process exits, so it exits as the run ended.

    Without it the run's handlers give way to the defaults as the run ends, and a SIGTERM in what is left
    (the summary printed, then the interpreter's exit, about 0.1 s with DuckDB and Arrow loaded) kills the
    process: exit status 143, "interrupted", for a run stored ``completed``; a scheduler's time limit that
    lands there reports a finished job as killed. Ignored rather than noted by a Python handler, because
    the interpreter puts the default action back for a signal with a Python handler as it shuts down, and
    only an ignored one stays ignored to the end. Ctrl-C is left as it was: a person at the terminal
    keeps a way to stop an exit that hangs. Not for a caller that goes on after the run (a notebook, a
    test, a script running several studies): its handlers are put back as they were."""
    global _held_to_exit
    _held_to_exit = True


class RunNotStarted(KeyboardInterrupt):
    """A signal came while the run waited for the study's store to record its start (another process held it):
    the wait ended at once and nothing was recorded. ``signum`` is the signal: ``desim run`` exits 128 + it.
    A ``KeyboardInterrupt``, as a stop request is: an ``except Exception`` around a run must not swallow it."""

    def __init__(self, signum: int, run_id: str):
        self.signum, self.run_id = signum, run_id
        said = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        super().__init__(f"{said} while run {run_id} waited for the study's store (held by another process): the "
                         "run was not started, nothing recorded")


class Signals:
    """SIGTERM, SIGHUP and a first Ctrl-C end the run at the next step boundary; asked twice, it stops now.
    Once the steps are over and the run's files merge (:meth:`finishing`), a signal changes nothing: there
    is nothing left to stop, and stopping the merge would lose what the run has done.

    Before the run is recorded (``opened()`` false), a wait for the store another process holds can ask
    :func:`stop_request` before each try (``desim run`` hands it to ``desim.store.connection.stop_waits_on``:
    the run and the store do not import each other): a signal ends that wait at once, with
    :class:`RunNotStarted`, rather than leave a run recorded once the store is free, only to stop it after
    its first step.

    Handlers are installed only in the main thread (a run in a worker thread cannot own them)."""

    def __init__(self, ctx, run_id: str = "", opened: Callable[[], bool] = lambda: True):
        self.ctx = ctx
        self.run_id = run_id
        self.opened = opened        # whether the run is recorded (the engine has opened its sink)
        self.received: int | None = None
        self.ctrl_c = False         # a SIGINT came, even one too late to stop anything: the caller hears of it
        self._previous: dict[int, Any] = {}
        self._previous_active: "Signals | None" = None
        self._finishing = False
        self._waiting = False       # a wait for the store has asked stop_request: it says the signal itself
        self.stopped_now = False    # a second Ctrl-C raised KeyboardInterrupt inside a step

    @property
    def installed(self) -> bool:
        """The handlers are in place (the main thread): a SIGINT that came would have been seen here."""
        return bool(self._previous)

    def requested(self) -> str | None:
        return signal.Signals(self.received).name if self.received is not None else None

    def finishing(self) -> None:
        """The steps are over and the run is being merged and recorded: from now on a signal changes nothing."""
        self._finishing = True

    def stop_request(self) -> RunNotStarted | None:
        """What ends a wait for the store now: :class:`RunNotStarted` once a signal came, while the run is not
        recorded; None otherwise (a recorded run stops at its step boundary, as ever)."""
        if self._finishing or self.opened():
            return None
        self._waiting = True
        return None if self.received is None else RunNotStarted(self.received, self.run_id)

    def __enter__(self) -> "Signals":
        global _active
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._on_signal)
            self._previous_active, _active = _active, self
        return self

    def __exit__(self, *exc) -> None:
        global _active
        if self._previous:
            _active = self._previous_active
        for sig, handler in self._previous.items():
            signal.signal(sig, signal.SIG_IGN if _held_to_exit and sig in _HELD_SIGNALS else handler)

    def _on_signal(self, signum: int, frame) -> None:
        self.ctrl_c = self.ctrl_c or signum == signal.SIGINT
        if self._finishing:         # nothing left to stop, and the merge must not be cut short
            return
        if self.received is not None and self._waiting and not self.opened():
            return      # the wait for the store ends at its next try, with RunNotStarted: nothing to stop now
        if self.received is not None:            # asked twice: stop now
            self.stopped_now = signum == signal.SIGINT
            raise KeyboardInterrupt if signum == signal.SIGINT else StopRun(
                f"stopped by a second {signal.Signals(signum).name} during step {self.ctx.step}")
        self.received = signum
        if signum == signal.SIGINT and not (self._waiting and not self.opened()):   # a wait says it, at once
            sys.stderr.write(f"\ndesim: stopping after step {self.ctx.step} (Ctrl-C again to stop now)\n")


_active: Signals | None = None       # the signal handling of the run going in the main thread, if any


def stop_request() -> RunNotStarted | None:
    """What ends a wait for the store now, for the run going in the main thread (:meth:`Signals.stop_request`);
    None when no run is going there."""
    return _active.stop_request() if _active is not None else None


@contextmanager
def _nothing():
    yield None
