"""Merging a worker's run into the study's store, and recording sweeps.

Only the parent process writes the study's database. For each finished run
it replaces the study's ``runs`` row of that ``run_id`` by the worker's, and
moves the worker's data folder (``data/run_id=<R>``, see
``desim.store.files``) into the study's, replacing any folder the study
already holds for that run with one atomic exchange: merging is idempotent,
so a failed run that ``--resume`` reruns replaces its partial data instead of
adding to it, and a reader never sees half a run.

A worker's file is fresh, so the engine there files its run under a version
of its own; the merged run joins the study's version of the same files
instead (:func:`study_version`), so a sweep adds at most one version.

The study's database is opened only for the length of one merge, and a merge
waits while another process holds it (a ``desim run`` of the same study
started during the sweep): ``on_wait`` hears why, once, and the workers carry
on.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from desim.experiments.sweep.plan import PlannedRun, SweepPlan
from desim.store import Catalogue, StudyLayout, layout_of, open_store
from desim.store.connection import WaitFn
from desim.store.files import carry_paid_calls, remove_run_data, replace_folder
from desim.store.ledger import keep_paid_calls
from desim.study.files import StudySpec
from desim.study.refs import study_code
from desim.versions import code_hash

__all__ = ["WaitFn", "keep_unmerged_calls", "load_plan", "merge_run", "record_failure", "record_plan", "run_statuses",
           "study_version", "writing"]


def writing(study: "str | Path | StudyLayout", on_wait: WaitFn | None = None):
    """The study's store for writing, waiting as long as another process holds it."""
    return open_store(layout_of(study), read_only=False, forever=True, on_wait=on_wait)


def study_version(study: "str | Path | StudyLayout", spec: StudySpec, on_wait: WaitFn | None = None) -> str:
    """The study's version id for its files as they are now (created if they are new)."""
    with writing(study, on_wait) as con:
        return Catalogue(con).ensure_version(spec.id, spec.version_config(), kind="run",
                                             code=study_code(spec),
                                             root=spec.root)[0]


def merge_run(study: "str | Path | StudyLayout", worker_file: str | Path, run_id: str, version_id: str,
              on_wait: WaitFn | None = None) -> None:
    """Replace the study's ``run_id`` by the worker's (its runs row and its data folder);
    the run joins the study's version ``version_id``."""
    layout = layout_of(study)
    source = StudyLayout.at(worker_file).run_dir(run_id)
    target = layout.run_dir(run_id)

    def move() -> None:
        if source.is_dir():
            if target.is_dir():         # an earlier attempt at this run: what it paid an LLM stays counted
                carry_paid_calls(target, source)
            replace_folder(source, target)

    with writing(layout, on_wait) as con:
        Catalogue(con).merge_run_row(worker_file, run_id, version_id, move)


def keep_unmerged_calls(study: "str | Path | StudyLayout", folder: Path, on_wait: WaitFn | None = None) -> None:
    """Before a sweep's or an effect's worker folder is removed: the paid LLM calls of the runs whose workers
    left their stores unmerged (a worker, or the whole sweep, killed), kept in each run's ledger for the attempt
    that runs it again (``desim.store.ledger``). A run the study's store holds as completed was merged before
    the kill: its calls are there already. Waits, as a merge does, while another process writes the store."""
    stores = StudyLayout.worker_stores(folder)
    if not stores:
        return
    layout = layout_of(study)
    with writing(layout, on_wait) as con:
        catalogue = Catalogue(con)
        merged = {run_id for run_id in stores if (catalogue.run(run_id) or {}).get("status") == "completed"}
    for run_id, path in stores.items():
        if run_id not in merged:
            keep_paid_calls(path, run_id, layout.root)


def record_failure(study: "str | Path | StudyLayout", spec: StudySpec, plan: SweepPlan, run: PlannedRun,
                   error: str, version_id: str, on_wait: WaitFn | None = None) -> None:
    """A run whose worker left nothing usable: drop any rows it had, store it as ``failed``."""
    layout = layout_of(study)
    with writing(layout, on_wait) as con:
        catalogue = Catalogue(con)
        con.begin()
        try:
            catalogue.forget_run(run.run_id)
            remove_run_data(layout, run.run_id)
            code = catalogue.version_code(version_id)     # its version's: the code it was to run
            catalogue.start_run(run_id=run.run_id, study_id=spec.id, kind="run", seed=run.seed,
                                n_steps=spec.simulation.n_steps, rounds=spec.rounds,
                                time_unit=spec.simulation.time_unit, config=spec.resolved(),
                                parameters=run.parameters, sweep_id=plan.sweep_id, version_id=version_id,
                                code=code, code_hash=code_hash(code) if code else None)
            catalogue.finish_run(run.run_id, "failed", error)
            con.commit()
        except BaseException:
            con.rollback()
            raise


def record_plan(study: "str | Path | StudyLayout", plan: SweepPlan, on_wait: WaitFn | None = None) -> None:
    with writing(study, on_wait) as con:
        Catalogue(con).record_plan(plan.sweep_id, plan.study_id, plan.base_seed, plan.replicates, plan.n_steps,
                                   plan.grid, plan.to_json())


def load_plan(catalogue: Catalogue, sweep_id: str) -> SweepPlan | None:
    """The plan recorded for ``sweep_id``, or None (also when the study has no sweeps yet)."""
    row = catalogue.sweep(sweep_id)
    return SweepPlan.from_json(row["plan"]) if row else None


def run_statuses(catalogue: Catalogue, sweep_id: str) -> dict[str, dict[str, Any]]:
    """``run_id -> {status, error}`` for the runs of a sweep already in the study's database."""
    return catalogue.run_statuses(sweep_id)
