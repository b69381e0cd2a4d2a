"""Checks a sweep or an effect makes before it records anything.

A sweep or an effect that starts and then fails on its input leaves a
recorded sweep or effect and failed runs that no ``--resume`` can mend. So
what ``desim run`` refuses before writing (the study assembled with the run's
values) and the names a command will read afterwards (``--metrics``,
``--states``) are checked first, and a Ctrl-C that DuckDB turned into an
error is made a Ctrl-C again.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from desim.errors import DesimError, RunFailed, StudyConfigError, StudyError
from desim.experiments.recording import record
from desim.run.assemble import assemble
from desim.store.recorder import MemorySink
from desim.study.files import StudySpec, load_study


class _SetUpDone(Exception):
    """Raised by :class:`_SetUpOnly` where a run would be recorded: its set-up went through."""


class _SetUpOnly(MemorySink):
    """A sink that ends a run in memory at the moment ``desim run`` would record it: after the study's
    set-up (``reset``, step 0's events, initial states and metrics), before its first step."""

    def open(self, run) -> None:
        raise _SetUpDone


def refuse_unrunnable(spec: StudySpec, error: type[Exception], where: str) -> None:
    """Raise ``error`` (its message starting with ``where``) when ``desim run`` would refuse ``spec`` before
    writing anything: the study assembled with these values, its population, network and objects built,
    and its set-up run in memory up to step 0 (``reset`` included: ``n_seeds=-3`` failing there was recorded
    as a failed run of a sweep that no ``--resume`` could mend). A value only the study's own code checks
    (``rule=foo``) is refused here."""
    try:
        try:
            record(assemble(spec), _SetUpOnly(), manage_gc=False, handle_signals=False)
        except _SetUpDone:
            pass
    except DesimError as e:
        if isinstance(e, StudyConfigError):     # its file named from where the command was typed, as desim run does
            e = e.under(spec.root)
        refused = error(f"{where}: {e}")
        refused.traceback = getattr(e, "traceback", "")    # --traceback / DESIM_TRACEBACK=1 show the study's
        raise refused from None


class _Names(MemorySink):
    """A sink that keeps nothing but the names of the metrics and state fields a run produces."""

    def __init__(self):
        super().__init__()
        self.metrics: set[str] = set()
        self.states: set[str] = set()

    def step_zero(self, run, states, metrics, events, messages):
        out = super().step_zero(run, states, metrics, events, messages)
        self.metrics.update(metrics)
        self.states.update(f.name for f in out["initial"].schema.field("state").type)
        return out

    def write(self, record, messages) -> None:
        super().write(record, messages)
        self.states.update(f.name for f in record.panel.schema.field("state").type)


def recorded_names(root, params: dict, *, seed: int | None = None) -> tuple[set, set]:
    """The metric names and state fields a run of the study with ``params`` records, from its steps 0 and 1
    run in memory (an LLM study on scripted replies, as ``desim validate`` probes: never a paid call)."""
    if "llm_kind" in params:
        params = {**params, "llm_kind": "scripted"}
    spec = load_study(root, steps=1, seed=seed, params=params)
    sink = _Names()
    try:
        record(assemble(spec), sink, on_step=lambda step, values: sink.metrics.update(values), manage_gc=False,
               handle_signals=False)
    except RunFailed as e:      # said as the study's error, not as a failed run: nothing was kept
        refused = StudyError(f"step 1 of the study, run in memory to learn the names of its metrics and states, "
                             f"failed: {e.error}")
        refused.traceback = e.traceback
        raise refused from None
    return sink.metrics, sink.states


def unknown_names(root, params: dict, metrics: list[str] | None, states: list[str] | None = None, *,
                  seed: int | None = None) -> str | None:
    """What is wrong with ``--metrics`` and ``--states`` for runs with ``params`` (None: nothing), so a
    misspelt name is refused before anything runs instead of failing (or printing nothing) after."""
    if not metrics and not states:
        return None
    have_metrics, have_states = recorded_names(root, params, seed=seed)
    for option, names, have, what in (("--metrics", metrics, have_metrics, "the study's collector reports"),
                                      ("--states", states, have_states, "the agents' states have")):
        unknown = [n for n in names or [] if n not in have]
        if unknown:
            return (f"{option}: unknown name(s) {', '.join(unknown)} ({what}: "
                    f"{', '.join(sorted(have)) or 'none'})")
    return None


@contextmanager
def ctrl_c_stays_ctrl_c() -> Iterator[None]:
    """DuckDB turns a Ctrl-C that lands during a query into ``RuntimeError('Query interrupted')``; it is
    still the user's Ctrl-C, so it leaves as ``KeyboardInterrupt`` (exit status 130, the command's
    ``--resume`` line) instead of a traceback."""
    try:
        yield
    except RuntimeError as e:
        if "interrupted" not in str(e).lower() or isinstance(e, DesimError):
            raise
        raise KeyboardInterrupt(str(e)) from None
