"""Running a study: assemble it, run the engine into a recorder, say how it ended.

:func:`run_study` is the one way a study runs, for the command line, notebooks, sweeps and the
validator alike. A ``warm_start`` in ``simulation.json`` makes the run a branch of that run at that
step (decided here, once); otherwise the study is assembled (``desim.run.assemble``), its behaviour
model decides every step, and a :class:`~desim.store.recorder.Recorder` keeps the run in the study's
store (or, with ``db_path=":memory:"``, a :class:`~desim.store.recorder.MemorySink` keeps nothing).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from desim.experiments.branches import branch
from desim.experiments.recording import RunResult, as_spec, record, sink_for
from desim.run.assemble import assemble
from desim.run.execute import gc_paused
from desim.study.files import StudySpec


def run_study(study, *, db_path: str | Path | None = None, run_id: str | None = None, sweep_id: str | None = None,
              note: str | None = None, on_step: Callable[[int, dict], None] | None = None,
              manage_gc: bool = True, handle_signals: bool = True) -> RunResult:
    """Run ``study`` (a ``desim.Study``, or a ``StudySpec`` from ``load_study``) once.

    ``db_path`` keeps the run in another DuckDB file than the study's (a sweep worker's), or nowhere
    (``":memory:"``); ``on_step(step, metrics)`` hears each step as it is kept. A ``warm_start`` makes
    the run a branch (refused, before anything is written, when it cannot be exact)."""
    spec = as_spec(study)
    warm = spec.simulation.warm_start
    if warm:
        return branch(spec.root, warm.from_run, warm.at_step, spec=spec, note=note or "warm start", db_path=db_path,
                      run_id=run_id, sweep_id=sweep_id, on_step=on_step, manage_gc=manage_gc,
                      handle_signals=handle_signals)
    return run_once(spec, db_path=db_path, run_id=run_id, sweep_id=sweep_id, note=note, on_step=on_step,
                    manage_gc=manage_gc, handle_signals=handle_signals)


def run_once(spec: StudySpec, *, db_path: str | Path | None = None, run_id: str | None = None,
             sweep_id: str | None = None, note: str | None = None, on_step: Callable[[int, dict], None] | None = None,
             manage_gc: bool = True, handle_signals: bool = True) -> RunResult:
    """One run of ``spec`` from step 0, its behaviour model deciding every step (no warm start)."""
    with gc_paused(manage_gc):      # set-up makes many objects and no cyclic garbage worth a pass
        run = assemble(spec, run_id)
    return record(run, sink_for(spec, db_path, sweep_id=sweep_id, note=note), on_step=on_step,
                  manage_gc=manage_gc, handle_signals=handle_signals)
