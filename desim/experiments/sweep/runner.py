"""Running a sweep: plan it, hand its runs to an executor, merge each finished
run into the study's database, and summarise the chosen metrics.

Layout on disk: the plan is a row of the study database's ``sweeps`` table;
workers write ``<study>/runs/sweeps/<sweep_id>/<run_id>.duckdb``, which the
parent merges into ``<study>/runs/desim.duckdb`` and then deletes.

A run that fails or whose worker dies is stored as ``failed`` and the sweep
carries on; a Python caller is then warned (:class:`RunsFailedWarning`) once
the sweep has ended. ``resume=<sweep_id>`` reruns only the planned runs that are
missing or not ``completed``, with their planned seeds, so no run is
duplicated and a resumed sweep ends with the panels an uninterrupted one
would have.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from desim.errors import shell_arg
from desim.experiments.branches import refuse_resume_after_edit
from desim.experiments.recording import as_root
from desim.experiments.sweep.checks import ctrl_c_stays_ctrl_c, unknown_names
from desim.experiments.sweep.executors import check_executor, check_workers, make_executor
from desim.experiments.sweep.merge import (
    WaitFn,
    keep_unmerged_calls,
    load_plan,
    merge_run,
    record_failure,
    record_plan,
    run_statuses,
    study_version,
)
from desim.experiments.sweep.plan import PlannedRun, SweepError, SweepPlan, make_plan
from desim.experiments.sweep.summary import sweep_table, warn_runs_failed
from desim.experiments.sweep.worker import RunOutcome, RunTask
from desim.store.files import remove_db
from desim.store import Catalogue, StoreError, StudyLayout, open_store, queries
from desim.store.health import claim_folder as claim
from desim.store.health import release_folder, remove_abandoned
from desim.study.files import load_study


@dataclass
class SweepResult:
    """What a sweep did: its plan, how each run ended, and the summary table."""

    sweep_id: str
    study_root: Path
    plan: SweepPlan
    statuses: dict[str, str]
    errors: dict[str, str]
    ran: list[str]
    table: list[dict[str, Any]]
    wall_seconds: float
    metrics: list[str] = field(default_factory=list)

    @property
    def completed(self) -> int:
        return sum(1 for s in self.statuses.values() if s == "completed")

    @property
    def failed(self) -> list[str]:
        return [r for r, s in self.statuses.items() if s != "completed"]


StartFn = Callable[[SweepPlan, int], None]
ProgressFn = Callable[[RunOutcome, int, int], None]


def sweep_dir(study_root: str | Path, sweep_id: str) -> Path:
    return StudyLayout(study_root).sweep_dir(sweep_id)


def claim_folder(study_root: str | Path, sweep_id: str, on_wait: WaitFn | None = None) -> Path:
    """The sweep's worker folder, marked with this process; folders left by sweeps whose process died
    (killed parents) are removed first, so none piles up, once the paid LLM calls of the runs they left
    unmerged are kept (:func:`keep_unmerged_calls`). A sweep another live process is running is refused."""
    base = StudyLayout(study_root).sweeps
    if base.is_dir():
        for other in base.iterdir():
            remove_abandoned(other, before=lambda gone: keep_unmerged_calls(study_root, gone, on_wait))
    folder = sweep_dir(study_root, sweep_id)
    try:
        claim(folder, f"sweep {sweep_id}")
    except RuntimeError as e:
        raise SweepError(str(e)) from None
    return folder


def _say_repeats(db: StudyLayout, plan: SweepPlan, version_id: str, n_steps: int) -> None:
    """A note when runs of this sweep repeat completed runs of another, exactly (same code, values, seeds
    and steps: the same panels): a query pooling the two sweeps would count each of them twice."""
    with open_store(db) as con:
        repeats = queries.repeated_sweep_runs(con, version_id, [r.seed for r in plan.runs], n_steps, plan.sweep_id)
    if repeats:
        import warnings

        from desim.errors import DesimNotice
        said = ", ".join(f"{n} of sweep {s}" for s, n in repeats)
        warnings.warn(DesimNotice(f"sweep {plan.sweep_id} repeats runs already stored ({said}): same code, values, "
                                  "seeds and steps, so the same panels; pooling the sweeps in SQL would count those "
                                  "runs twice (--seed gives other replicates)"), stacklevel=3)


def _resume_plan(study_root: Path, sweep_id: str) -> tuple[SweepPlan, dict[str, dict]]:
    layout = StudyLayout(study_root)
    if not layout.db.exists():
        raise SweepError(f"cannot resume '{sweep_id}': {layout.db} does not exist")
    with open_store(layout) as con:
        plan = load_plan(Catalogue(con), sweep_id)
        if plan is None:
            raise SweepError(f"cannot resume: no sweep '{sweep_id}' in {layout.db}")
        return plan, run_statuses(Catalogue(con), sweep_id)


def run_sweep(study_root: str | Path, grid: dict[str, list] | None = None, replicates: int = 1,
              workers: int | None = None, backend: str = "local", address: str | None = None,
              metrics: list[str] | None = None, *, steps: int | None = None, seed: int | None = None,
              resume: str | None = None, on_start: StartFn | None = None,
              on_run: ProgressFn | None = None, on_wait: WaitFn | None = None) -> SweepResult:
    """Run every combination of ``grid`` x ``replicates`` (or the unfinished runs of sweep
    ``resume``) on ``backend`` with ``workers`` processes, merging each run as it ends.

    ``grid`` maps a declared study parameter to its values: a list, a tuple or a
    1-D numpy array (``np.linspace(0.1, 0.3, 3)``), each value of the parameter's
    type (text is read as ``--set`` reads it; a numpy scalar is the Python value
    of its kind); a single value is refused (give ``[0.2]``), as are a 2-D array
    and a set. ``on_start(plan, n_to_run)`` is called once the
    plan is recorded (from then on the sweep can be resumed by its id), and
    ``on_run(outcome, done, n_to_run)`` after each run is merged, and
    ``on_wait(message)`` when a merge has to wait for another process that
    holds the study's store (a ``desim run`` started during the sweep). Returns
    the runs' statuses and :func:`sweep_table` of ``metrics``.

    Everything that can be refused is refused before the plan is recorded (a
    combination ``desim run`` would refuse, ``workers`` below 1, an unknown
    ``backend``, a metric the study does not record, a study Ray workers cannot
    import), so a recorded sweep is one ``--resume`` can finish. A Ctrl-C leaves
    as ``KeyboardInterrupt``, the completed runs kept.

    A study no local worker process can run (its classes defined in a notebook,
    ``__main__:Env``; a program read from standard input) has its runs run one
    at a time in this process, the same code and the same panels; with
    ``workers`` other than 1 a :class:`RunsInProcessWarning` says so, why, and
    how to get the workers back (:func:`~desim.experiments.sweep.executors.worker_obstacle`).

    A run that fails does not stop the others. When a planned run has not
    completed, the call warns with a :class:`RunsFailedWarning` (how many, the
    first error, the ``resume=`` call) once every run has ended and what
    completed is stored, because ``table`` then summarises fewer replicates
    than planned. A warning rather than an exception, as ``desim.effect``
    does: the completed runs and the result (``failed``, ``errors``) are worth
    having in hand, and a caller that must not go on makes it an error with
    ``warnings.simplefilter("error", RunsFailedWarning)`` (raised at the end,
    nothing lost, the result as its ``result``). ``desim sweep`` reports the
    failed runs itself and exits 2.
    """
    study_root = as_root(study_root)
    with ctrl_c_stays_ctrl_c():
        result = _run_sweep(study_root, grid, replicates, workers, backend, address, metrics, steps, seed, resume,
                            on_start, on_run, on_wait)
    failed = result.failed
    if failed:      # everything that completed is stored by now
        planned = len(result.plan.runs)
        counted = (f"only {result.completed} of {planned} planned runs completed, and its table (sweep_table) "
                   "summarises those alone" if result.completed else
                   f"none of its {planned} planned runs completed: its table (sweep_table) has nothing to summarise")
        warn_runs_failed(f"sweep {result.sweep_id}", len(failed), counted,
                         {r: e for r, e in result.errors.items() if r in failed},
                         f"run_sweep({str(study_root)!r}, resume={result.sweep_id!r}) "
                         f"(desim sweep {shell_arg(study_root)} --resume {result.sweep_id})", result)
    return result


def _run_sweep(study_root, grid, replicates, workers, backend, address, metrics, steps, seed, resume, on_start,
               on_run, on_wait) -> SweepResult:
    started = time.perf_counter()
    root = Path(study_root)
    db = StudyLayout(root)
    check_workers(workers)
    if resume:
        if grid:
            raise SweepError("--resume reruns a recorded sweep with its own grid; do not give --set too")
        plan, known = _resume_plan(root, resume)
        todo = [r for r in plan.runs if known.get(r.run_id, {}).get("status") != "completed"]
        done = [r.run_id for r in plan.runs if known.get(r.run_id, {}).get("status") == "completed"]
        if todo and done:
            refuse_resume_after_edit(root, done[0], SweepError, f"sweep {resume}")
    else:
        plan = make_plan(root, grid or {}, replicates, seed=seed, steps=steps)
        todo = list(plan.runs)
    wrong = unknown_names(root, plan.runs[0].parameters, metrics, seed=plan.base_seed) if todo else None
    if wrong:       # before the runs, not after them: a misspelt metric must not cost the whole sweep
        raise SweepError(wrong)
    if todo:        # a backend or a study the workers cannot take, said now; the warning at the caller's line
        check_executor(backend, root, workers, address, "run_sweep", SweepError, stacklevel=3)
    if not resume:
        record_plan(db, plan, on_wait)
    version_id = study_version(db, load_study(root), on_wait)
    if not resume:
        _say_repeats(db, plan, version_id, load_study(root, steps=plan.n_steps).simulation.n_steps)
    folder = claim_folder(root, plan.sweep_id, on_wait)
    tasks = [RunTask(str(root.resolve()), plan.sweep_id, r.run_id, r.seed, r.parameters, plan.n_steps,
                     str(StudyLayout.worker_store(folder, r.run_id).resolve())) for r in todo]
    if on_start:
        on_start(plan, len(tasks))
    by_id = {r.run_id: r for r in plan.runs}
    errors: dict[str, str] = {}
    if tasks:   # a resume with nothing left to run starts no workers (nor Ray)
        with make_executor(backend, root, workers, address) as executor:
            for done, outcome in enumerate(executor.run(tasks), 1):
                _store_outcome(root, db, plan, by_id[outcome.run_id], outcome, version_id, on_wait)
                if outcome.error:
                    errors[outcome.run_id] = outcome.error
                if on_run:
                    on_run(outcome, done, len(tasks))
    keep_unmerged_calls(db, folder, on_wait)        # a worker that died (its run never merged): what it paid
    shutil.rmtree(folder, ignore_errors=True)
    release_folder(folder)
    try:
        folder.parent.rmdir()   # runs/sweeps, once no sweep is in progress
    except OSError:
        pass
    final = _resume_plan(root, plan.sweep_id)[1]
    statuses = {r.run_id: final.get(r.run_id, {}).get("status", "missing") for r in plan.runs}
    table = sweep_table(root, plan.sweep_id, metrics)
    chosen = list(dict.fromkeys(row["metric"] for row in table))
    return SweepResult(plan.sweep_id, root, plan, statuses, errors, [t.run_id for t in tasks], table,
                       time.perf_counter() - started, chosen)


def _store_outcome(root: Path, db: StudyLayout, plan: SweepPlan, run: PlannedRun, outcome: RunOutcome,
                   version_id: str, on_wait: WaitFn | None = None) -> None:
    """Merge a finished run's file, or store the run as failed when its worker left none
    (or a file that cannot be read: that fails the run, not the sweep)."""
    try:
        if outcome.worker_file and Path(outcome.worker_file).exists():
            try:
                merge_run(db, outcome.worker_file, run.run_id, version_id, on_wait)
                return
            except (StoreError, ValueError) as e:
                outcome.status, outcome.error = "failed", "; ".join(
                            x for x in (outcome.error, f"could not merge the worker's file: {e}") if x)
        try:
            spec = load_study(root, steps=plan.n_steps, seed=run.seed, params=run.parameters)
        except Exception:  # the run's own settings broke the study: record it with the defaults
            spec = load_study(root, steps=plan.n_steps)
        record_failure(db, spec, plan, run, outcome.error or "the run left no output", version_id, on_wait)
    finally:
        if outcome.worker_file:
            remove_db(outcome.worker_file, run.run_id)
