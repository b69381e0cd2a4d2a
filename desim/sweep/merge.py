"""Merging a worker's run into the study's store, and recording sweeps.

Only the parent process writes the study's database. For each finished run
it attaches the worker's DuckDB file read-only, replaces the study's ``runs``
row of that ``run_id`` by the worker's, and moves the worker's data folder
(``data/run_id=<R>``, see ``desim.datafiles``) into the study's, replacing any
folder the study already holds for that run with one atomic exchange: merging
is idempotent, so a failed run that ``--resume`` reruns replaces its partial
data instead of adding to it, and a reader never sees half a run.

A worker's file is fresh, so the engine there files its run under a version
of its own; the merged run joins the study's version of the same files
instead (:func:`study_version`), so a sweep adds at most one version.

The study's database is opened only for the length of one merge, so a
dashboard or ``desim sql`` can read between merges.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import duckdb

from ..config import StudySpec
from ..datafiles import data_dir, exchange
from ..store import Store, StoreBusyError, fetch_dicts, now
from ..versions import code_files, ensure_version
from .plan import PlannedRun, SweepPlan

SWEEPS_SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id VARCHAR PRIMARY KEY,
    study_id VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL,
    base_seed BIGINT NOT NULL,
    replicates INTEGER NOT NULL,
    n_steps INTEGER,
    grid JSON NOT NULL,
    plan JSON NOT NULL
)
"""


WaitFn = Callable[[str], None]


def open_store(path: str | Path, timeout: float | None = None, on_wait: WaitFn | None = None) -> Store:
    """The study's database for writing, waiting while another process holds it.

    A ``desim run`` of the same study started during a sweep holds the file for
    its whole run; the sweep then waits for it (``on_wait`` hears why, once)
    instead of failing, and merges when the file is free. ``timeout`` (seconds)
    bounds the wait; ``None`` waits as long as it takes.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    told = False
    while True:
        try:
            store = Store(path)
            store.con.execute(SWEEPS_SCHEMA)
            return store
        except StoreBusyError as e:
            if deadline is not None and time.monotonic() > deadline:
                raise
            if on_wait and not told:
                on_wait(f"the study's store is held by another process; the sweep waits for it and merges "
                        f"when it is free (its workers carry on). {e}")
                told = True
            time.sleep(0.5)


def _run_columns(con: duckdb.DuckDBPyConnection, database: str) -> list[str]:
    return [r[0] for r in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_catalog = ? "
        "AND table_schema = 'main' AND table_name = 'runs' ORDER BY ordinal_position", [database]).fetchall()]


def _replace_folder(source: Path, target: Path) -> None:
    """Put ``source`` at ``target`` (same file system), replacing what is there in one step."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        exchange(source, target)
        shutil.rmtree(source, ignore_errors=True)
    else:
        source.rename(target)


def remove_run_data(db_path: str | Path, run_id: str) -> None:
    shutil.rmtree(data_dir(db_path) / f"run_id={run_id}", ignore_errors=True)


def study_version(study_db: str | Path, spec: StudySpec, on_wait: WaitFn | None = None) -> str:
    """The study's version id for its files as they are now (created if they are new)."""
    with open_store(study_db, on_wait=on_wait) as store:
        return ensure_version(store.con, spec.id, spec.version_config(), kind="run",
                              code=code_files(spec.root, spec.population.roster))[0]


def merge_run(study_db: str | Path, worker_file: str | Path, run_id: str, version_id: str,
              on_wait: WaitFn | None = None) -> None:
    """Replace the study's ``run_id`` by the worker's (its runs row and its data folder);
    the run joins the study's version ``version_id``."""
    source = data_dir(worker_file) / f"run_id={run_id}"
    target = data_dir(study_db) / f"run_id={run_id}"
    with open_store(study_db, on_wait=on_wait) as store:
        con = store.con
        quoted = str(Path(worker_file).resolve()).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS w (READ_ONLY)")
        try:
            present = {r[0] for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'w'").fetchall()}
            if "runs" not in present or not con.execute(
                    "SELECT count(*) FROM w.runs WHERE run_id = ?", [run_id]).fetchone()[0]:
                raise ValueError(f"{worker_file} holds no run '{run_id}'")
            cols = [c for c in _run_columns(con, "w") if c in set(_run_columns(con, current(con)))]
            names = ", ".join(cols)
            con.begin()
            try:
                con.execute("DELETE FROM main.runs WHERE run_id = ?", [run_id])
                con.execute(f"INSERT INTO main.runs ({names}) SELECT {names} FROM w.runs WHERE run_id = ?", [run_id])
                con.execute("UPDATE main.runs SET version_id = ? WHERE run_id = ?", [version_id, run_id])
                if source.is_dir():
                    _replace_folder(source, target)
                con.commit()
            except BaseException:
                con.rollback()
                raise
        finally:
            con.execute("DETACH w")


def current(con: duckdb.DuckDBPyConnection) -> str:
    return con.execute("SELECT current_database()").fetchone()[0]


def record_failure(study_db: str | Path, spec: StudySpec, plan: SweepPlan, run: PlannedRun,
                   error: str, version_id: str, on_wait: WaitFn | None = None) -> None:
    """A run whose worker left nothing usable: drop any rows it had, store it as ``failed``."""
    with open_store(study_db, on_wait=on_wait) as store:
        con = store.con
        con.begin()
        try:
            con.execute("DELETE FROM main.runs WHERE run_id = ?", [run.run_id])
            remove_run_data(study_db, run.run_id)
            store.start_run(run_id=run.run_id, study_id=spec.id, kind="run", seed=run.seed,
                            n_steps=spec.simulation.n_steps, rounds=spec.rounds,
                            time_unit=spec.simulation.time_unit, config=spec.resolved(),
                            parameters=run.parameters, sweep_id=plan.sweep_id, version_id=version_id)
            store.finish_run(run.run_id, "failed", error)
            con.commit()
        except BaseException:
            con.rollback()
            raise


def record_plan(study_db: str | Path, plan: SweepPlan, on_wait: WaitFn | None = None) -> None:
    with open_store(study_db, on_wait=on_wait) as store:
        store.con.execute("INSERT INTO sweeps VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          [plan.sweep_id, plan.study_id, now(), plan.base_seed, plan.replicates,
                           plan.n_steps, json.dumps(plan.grid), plan.to_json()])


def load_plan(con: duckdb.DuckDBPyConnection, sweep_id: str) -> SweepPlan | None:
    """The plan recorded for ``sweep_id``, or None (also when the study has no sweeps yet)."""
    has = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                      "AND table_name = 'sweeps'").fetchone()[0]
    if not has:
        return None
    row = con.execute("SELECT plan FROM sweeps WHERE sweep_id = ?", [sweep_id]).fetchone()
    return SweepPlan.from_json(row[0]) if row else None


def run_statuses(con: duckdb.DuckDBPyConnection, sweep_id: str) -> dict[str, dict[str, Any]]:
    """``run_id -> {status, error}`` for the runs of a sweep already in the study's database."""
    return {r["run_id"]: r for r in fetch_dicts(
        con, "SELECT run_id, status, error FROM runs WHERE sweep_id = ?", [sweep_id])}
