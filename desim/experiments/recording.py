"""The plumbing every run shares: where it is kept (a sink) and running an assembled study into it.

``run_study``, ``branch`` and ``resume`` differ in what they assemble and which actions they replay;
all three end here.
"""
from __future__ import annotations

import os

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from desim.errors import RunInterrupted
from desim.run.assemble import Run
from desim.run.execute import execute
from desim.run.sources import Decide, Replay
from desim.store import StudyData, StudyLayout
from desim.store.recorder import MemorySink, Recorder
from desim.study.files import StudySpec

MEMORY = ":memory:"


@dataclass
class RunResult:
    """How a run ended, with its data one call away (``result.panel()``, ``result.metrics()``)."""

    run_id: str
    status: str
    store_path: Path
    steps_done: int
    rows_written: int
    wall_seconds: float
    error: str | None = None
    counters: dict[str, Any] = field(default_factory=dict)
    end_reason: str | None = None       # why a completed run ended before n_steps (stop_when, ctx.end_run)
    stopped_by: int | None = None       # the signal that interrupted the run (SIGTERM, SIGHUP, SIGINT), if one did
    warnings: list[str] = field(default_factory=list)   # what the run did that its author should know (a branch
    #                                                     whose replayed steps are not its parent's rows)

    def _repr_html_(self) -> str:
        """Jupyter's view: how the run ended and its metrics at its last step."""
        from desim.store.reader import html_table
        facts = [["run", self.run_id], ["status", self.status + (f" ({self.error})" if self.error else "")],
                 ["steps", self.steps_done], ["panel rows", self.rows_written], ["wall time", f"{self.wall_seconds:.2f} s"],
                 ["store", self.store_path]]
        if self.end_reason:
            facts.append(["ended early", self.end_reason])
        metrics = ""
        if str(self.store_path) != MEMORY and self.steps_done > 0:
            wide = self.metrics().to_pylist()
            if wide:
                last = wide[-1]
                metrics = (f"<p>metrics at step {last['step']}</p>" +
                           html_table(["metric", "value"], [[k, f"{v:.6g}" if isinstance(v, float) else v]
                                                            for k, v in last.items() if k not in ("run_id", "step")]))
        return f"<div>{html_table(['', ''], facts)}{metrics}</div>"

    # the run's data, each an Arrow table (``.to_pandas()``); see ``desim.store.reader``
    def data(self):
        return StudyData(self.store_path)

    def panel(self, columns=None, steps=None):
        return self.data().panel(self.run_id, columns, steps)

    def metrics(self, wide: bool = True):
        return self.data().metrics(self.run_id, wide)

    def messages(self):
        return self.data().messages(self.run_id)

    def events(self):
        return self.data().events(self.run_id)

    def initial_states(self):
        return self.data().initial_states(self.run_id)


def as_spec(study: Any) -> StudySpec:
    """A ``StudySpec`` from a ``desim.Study`` or a ``StudySpec``."""
    if isinstance(study, StudySpec):
        return study
    spec = getattr(study, "spec", None)
    if callable(spec):
        return spec()
    raise TypeError(f"run_study needs a desim.Study or what desim.load_study returns, not {type(study).__name__}")


def as_root(study: Any) -> Path:
    """The folder of a study given by its path or as a ``desim.Study``, which is saved first: a sweep or an
    effect reads the study's files (its workers load them), and a Study not yet run has none written."""
    if isinstance(study, (str, os.PathLike)):
        return Path(study)
    save = getattr(study, "save", None)
    if callable(save):
        return Path(save())
    raise TypeError(f"expected a study folder or a desim.Study, not {type(study).__name__}")


def sink_for(spec: StudySpec, db_path: str | Path | None = None, **row: Any):
    """Where a run of ``spec`` is kept: the study's store, another DuckDB file, or nowhere (``":memory:"``)."""
    if db_path is not None and str(db_path) == MEMORY:
        return MemorySink()
    layout = StudyLayout.at(db_path) if db_path is not None else StudyLayout(spec.root)
    return Recorder(layout, **row)


def record(run: Run, sink, replay: dict[int, list] | None = None, *, on_step=None, manage_gc: bool = True,
           handle_signals: bool = True) -> RunResult:
    """Run an assembled study into ``sink``; ``replay`` holds stored actions for the steps before a fork."""
    source = Replay(replay, run.decision) if replay else Decide(run.decision)
    where = sink.layout.db if isinstance(sink, Recorder) else Path(MEMORY)
    o = execute(run, source, sink, store_path=where, on_step=on_step, manage_gc=manage_gc,
                handle_signals=handle_signals)
    result = RunResult(o.run_id, o.status, where, o.steps_done, o.rows_written, o.wall_seconds, o.error, o.counters,
                       o.end_reason, o.stopped_by, warnings=list(o.warnings))
    if o.ctrl_c:        # the caller's Ctrl-C: the run is kept (interrupted, or completed if it came too late
        raise RunInterrupted(result, run.root)      # to stop a step), and the caller stops too
    return result
