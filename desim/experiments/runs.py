"""Running a study: assemble it, run the engine into a recorder, say how it ended.

:func:`run_study` is the one way a study runs, for the command line, notebooks, sweeps and the
validator alike. A ``warm_start`` in ``simulation.json`` makes the run a branch of that run at that
step (decided here, once); otherwise the study is assembled (``desim.run.assemble``), its behaviour
model decides every step, and a :class:`~desim.store.recorder.Recorder` keeps the run in the study's
store (or, with ``db_path=":memory:"``, a :class:`~desim.store.recorder.MemorySink` keeps nothing).

What a run's author should know of its configuration (:func:`outside_the_run`) is said here once, in
``RunResult.warnings``, for Python and the command line alike.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from desim.experiments.branches import BranchRefused, WarmStartRefused, branch
from desim.experiments.recording import RunResult, as_spec, record, sink_for
from desim.run.assemble import assemble
from desim.run.execute import gc_paused
from desim.store.reader import check_db_path, check_new_run_id
from desim.study.files import FILES, StudySpec
from desim.study.params import parameter_fields


def run_study(study, *, db_path: str | Path | None = None, run_id: str | None = None, sweep_id: str | None = None,
              note: str | None = None, on_step: Callable[[int, dict], None] | None = None,
              manage_gc: bool = True, handle_signals: bool = True) -> RunResult:
    """Run ``study`` (a ``desim.Study``, or a ``StudySpec`` from ``load_study``) once.

    ``db_path`` keeps the run in another DuckDB file than the study's (a ``.duckdb`` path; a sweep
    worker's), or nowhere (``":memory:"``: the steps reach ``on_step`` only, and ``result.panel()`` and
    the other reads refuse, having nothing to read); ``on_step(step, metrics)`` hears each step as it is
    kept. ``run_id`` names the run (default: a new ``r`` + 10 hex digits): letters, digits, ``-`` and
    ``_``, not one the store holds already (``desim.store.reader.RUN_ID``), refused before anything is
    written. A ``warm_start`` makes the run a branch (refused, before anything is written, when it cannot
    be exact). ``result.warnings`` says what of the configuration its author should know: an
    intervention after the last step, which never fires (``desim run`` prints the same lines)."""
    check_db_path(db_path)
    spec = as_spec(study)
    if run_id is not None:
        check_new_run_id(run_id, spec.root, db_path)
    warnings = outside_the_run(spec)
    warm = spec.simulation.warm_start
    if warm:
        try:
            result = branch(spec.root, warm.from_run, warm.at_step, spec=spec, note=note or "warm start",
                            db_path=db_path, run_id=run_id, sweep_id=sweep_id, on_step=on_step, manage_gc=manage_gc,
                            handle_signals=handle_signals)
        except BranchRefused as e:      # refused before anything is written: said as the file's mistake
            raise WarmStartRefused(spec.root / FILES["simulation"][0], [("warm_start", str(e))]) from None
    else:
        result = run_once(spec, db_path=db_path, run_id=run_id, sweep_id=sweep_id, note=note, on_step=on_step,
                          manage_gc=manage_gc, handle_signals=handle_signals)
    result.warnings[:0] = warnings      # the configuration's first, then what the run found (a branch's replay)
    return result


def run_once(spec: StudySpec, *, db_path: str | Path | None = None, run_id: str | None = None,
             sweep_id: str | None = None, note: str | None = None, on_step: Callable[[int, dict], None] | None = None,
             manage_gc: bool = True, handle_signals: bool = True) -> RunResult:
    """One run of ``spec`` from step 0, its behaviour model deciding every step (no warm start)."""
    with gc_paused(manage_gc):      # set-up makes many objects and no cyclic garbage worth a pass
        run = assemble(spec, run_id)
    return record(run, sink_for(spec, db_path, sweep_id=sweep_id, note=note), on_step=on_step,
                  manage_gc=manage_gc, handle_signals=handle_signals)


ENVIRONMENT = FILES["environment"][0]


def outside_the_run(spec: StudySpec) -> list[str]:
    """The interventions of ``spec`` (its parameters resolved, ``--set`` included) that fall after its
    last step and so never fire: a run, a sweep or an effect over such values measures nothing of them.
    Each line names the field, the step, and the parameter it came from when one did. The one place
    that says so: ``run_study`` puts the lines in ``RunResult.warnings``, ``desim validate`` (through
    ``desim.lint``), ``desim sweep`` and ``desim effect`` print them."""
    sim, env = spec.simulation, spec.environment
    uses = parameter_fields(spec.files.get("environment"))
    out = []
    for key, kind, items in (("scheduled_events", "scheduled event", env.scheduled_events),
                             ("broadcasts", "broadcast", env.broadcasts)):
        for i, item in enumerate(items):
            if item.at_step > sim.n_steps:
                field = f"{key}[{i}].at_step"
                origin = f" (parameter '{uses[field]}')" if field in uses else ""
                out.append(f"{ENVIRONMENT}: {field}: {kind} '{item.name}' is at step {item.at_step}{origin}, "
                           f"after the last step ({sim.n_steps}): it never fires")
    return out
