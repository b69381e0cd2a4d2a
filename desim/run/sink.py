"""What the engine hands a run's output to: the *sink*.

The engine decides nothing about storage; it calls these methods in this order and reads three
counters back. ``desim.store.recorder`` has the two sinks: ``MemorySink`` (types every table, keeps
counts: probes and ``db_path=":memory:"``) and ``Recorder`` (a real store: the catalogue row, the
step files, the live file and heartbeat). The run layer names the protocol here so that it never
imports the store (the layers test pins that).

Order of calls for one run::

    tables = sink.step_zero(run, states, metrics, events, messages)   # typed; nothing recorded yet
    sink.open(run)                                                    # from here, how it ends is kept
    sink.initial(tables)
    for each step t:
        sink.round(t, r, actions)              # only for studies with record_rounds
        record = sink.capture(t, states, actions, away)
        sink.write(record, messages)           # the collector process, once the step has closed
    sink.close(status, error, traceback, wall_seconds)
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class Sink(Protocol):
    rows_written: int       # panel rows kept so far
    messages: int           # messages kept so far (those posted at reset included)
    last_written: int       # the last step kept (-1: none, 0: the initial state)

    def step_zero(self, run: Any, states: Any, metrics: dict[str, float], events: list[dict],
                  messages: Any) -> dict[str, Any]:
        """The run's shape and step 0's tables, typed before anything is recorded (an initial state with no
        stored form is refused as the study's input, with no run left behind)."""

    def open(self, run: Any) -> None:
        """The run begins: from here on, how it ends is recorded."""

    def initial(self, tables: dict[str, Any]) -> None:
        """Keep step 0's tables (from :meth:`step_zero`)."""

    def round(self, t: int, r: int, actions: Any) -> None:
        """One round's actions, typed now (the study may change its objects afterwards)."""

    def capture(self, t: int, states: Any, actions: Any, away: np.ndarray | None) -> Any:
        """Step ``t`` as it closes: its panel rows typed now; returns the record :meth:`write` keeps."""

    def write(self, record: Any, messages: Any) -> None:
        """Keep a closed step's record with the messages drained from the bus for it."""

    def close(self, status: str, error: str | None, traceback: str | None, wall_seconds: float) -> None:
        """The run ended ``status`` (``completed``, ``interrupted`` or ``failed``)."""

    def warnings(self) -> list[str]:
        """What the run's author should know of how the run was kept (a setting that named no field)."""
