"""The study's store: a DuckDB catalogue of runs, and typed panel data in Parquet.

One folder per study keeps every run, ``studies/<id>/runs/``:

* ``desim.duckdb`` holds the catalogue tables ``runs`` and ``versions`` (and
  ``sweeps``), and *views* over the run data: ``panel`` (one row per agent per
  step), ``initial_states``, ``metrics`` (long: one row per step and metric),
  ``events``, ``messages``, ``edges``, ``round_actions`` and ``llm_calls``;
* ``data/`` holds that run data as Parquet files, one folder per closed step
  (see ``desim.datafiles``), typed: ``panel.state`` and ``panel.payload`` are
  structs whose fields keep their types, so ``SELECT avg(state.opinion) FROM
  panel`` needs no cast.

The database file is opened for writing only at the start and the end of a run,
for a few milliseconds; in between, any process can read, including the run's
own data so far. The views hold the data folder's absolute path; the readers in
this package (``read_only``, ``desim.open``, ``desim sql``, the dashboard) define
them afresh for each connection, so a study folder that was moved still reads.
"""
from __future__ import annotations

import json
import os
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb

from . import __version__
from .datafiles import RunFiles, data_dir, ensure_anchors

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY,
    study_id VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,
    parent_run_id VARCHAR,
    fork_step INTEGER,
    seed BIGINT NOT NULL,
    n_steps INTEGER NOT NULL,
    interaction_rounds INTEGER NOT NULL,
    time_unit VARCHAR NOT NULL,
    config JSON NOT NULL,
    parameters JSON,
    sweep_id VARCHAR,
    version_id VARCHAR,
    note VARCHAR,
    started_at TIMESTAMP NOT NULL,
    finished_at TIMESTAMP,
    status VARCHAR NOT NULL,
    last_step INTEGER NOT NULL DEFAULT -1,
    error VARCHAR,
    n_agents INTEGER,
    wall_seconds DOUBLE,
    desim_version VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS versions (
    version_id VARCHAR PRIMARY KEY, study_id VARCHAR NOT NULL, parent_version_id VARCHAR,
    parent_run_id VARCHAR, fork_step INTEGER, kind VARCHAR NOT NULL, note VARCHAR,
    config JSON NOT NULL, config_hash VARCHAR NOT NULL, diff JSON, created_at TIMESTAMP NOT NULL
);
ALTER TABLE runs ADD COLUMN IF NOT EXISTS version_id VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS overrides JSON;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS code JSON;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS code_hash VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS pid INTEGER;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS host VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS heartbeat_at TIMESTAMP;
ALTER TABLE versions ADD COLUMN IF NOT EXISTS code JSON;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS traceback VARCHAR;
"""

# view name -> data file name
VIEWS = {"panel": "panel", "initial_states": "initial", "metrics": "metrics", "events": "events",
         "messages": "messages", "edges": "edges", "round_actions": "round_actions", "llm_calls": "llm_calls"}


class StoreLayoutError(RuntimeError):
    """The database was written by a desim that stored the panel as JSON text."""


def _views_sql(data: Path, temp: bool) -> list[str]:
    root = str(data.resolve()).replace("'", "''")
    kind = "TEMP VIEW" if temp else "VIEW"
    return [f"CREATE OR REPLACE {kind} {view} AS SELECT run_id, * EXCLUDE (run_id) FROM read_parquet("
            f"'{root}/run_id=*/**/{name}.parquet', hive_partitioning = true, union_by_name = true, "
            f"hive_types = {{'run_id': VARCHAR}})"
            for view, name in VIEWS.items()]


def define_views(con: duckdb.DuckDBPyConnection, data: Path, temp: bool, attempts: int = 5) -> None:
    """(Re)define the views over the data folder. Defining one reads the files' schemas; a run
    that is merging its step files at that moment can remove one under us, so try again.

    The stored views are redefined only when the data folder's path changed (a study that was
    moved), since binding them reads every file's footer."""
    wanted = _views_sql(data, temp)
    if not temp:
        root = str(data.resolve()).replace("'", "''")
        stored = dict(con.execute("SELECT view_name, sql FROM duckdb_views() WHERE database_name = "
                                  "current_database() AND schema_name = 'main'").fetchall())
        wanted = [sql for sql, view in zip(wanted, VIEWS)
                  if view not in stored or f"'{root}/run_id=*/**/{VIEWS[view]}.parquet'" not in stored[view]]
    for sql in wanted:
        for attempt in range(attempts):
            try:
                con.execute(sql)
                break
            except duckdb.IOException:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.02)


def check_layout(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a store of the JSON-text layout instead of misreading it."""
    row = con.execute("SELECT c.data_type FROM information_schema.tables t JOIN information_schema.columns c "
                      "USING (table_catalog, table_schema, table_name) WHERE t.table_catalog = current_database() "
                      "AND t.table_schema = 'main' AND t.table_name = 'panel' AND t.table_type = 'BASE TABLE' "
                      "AND c.column_name = 'state'").fetchone()
    if row and row[0] == "JSON":
        raise StoreLayoutError(
            f"{path} was written by an earlier desim that stored the panel as JSON text; this desim stores "
            "typed Parquet files and does not read that layout. Move the file aside (e.g. "
            f"mv {path} {path}.json-layout) and run the study again; the old file still opens in DuckDB.")


def store_path(study_root: str | Path) -> Path:
    """Where a study's database lives: ``studies/<id>/runs/desim.duckdb``."""
    return Path(study_root) / "runs" / "desim.duckdb"


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Store:
    """A read-write connection to one study's database, held briefly (start and end of a run)."""

    def __init__(self, path: str | Path, attempts: int = 40, wait: float = 0.05):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(attempts):  # a reader (the dashboard) holds the file for milliseconds
            try:
                self.con = duckdb.connect(str(self.path))
                break
            except duckdb.ConnectionException as e:
                raise StoreBusyError(
                    f"cannot open {self.path} for writing: this Python process holds a connection to it "
                    f"({e}). Close that connection (con.close()) first; desim.open(...) reads without "
                    "keeping one open.") from None
            except duckdb.IOException as e:
                if attempt == attempts - 1 or "lock" not in str(e).lower():
                    raise StoreBusyError(f"cannot open {self.path} for writing: {e}. Another desim process "
                                         "is probably writing to it; wait for it or use another study copy.") from None
                time.sleep(wait)
        try:
            check_layout(self.con, self.path)
            self.con.execute(SCHEMA)
            self.data = data_dir(self.path)
            ensure_anchors(self.data)
            define_views(self.con, self.data, temp=False)
        except BaseException:
            self.con.close()
            raise

    # --- runs -----------------------------------------------------------------
    def start_run(self, *, run_id: str, study_id: str, kind: str, seed: int, n_steps: int,
                  rounds: int, time_unit: str, config: dict, parameters: dict,
                  parent_run_id: str | None = None, fork_step: int | None = None,
                  note: str | None = None, sweep_id: str | None = None, n_agents: int | None = None,
                  version_id: str | None = None, overrides: dict | None = None,
                  code: dict | None = None, code_hash: str | None = None) -> None:
        """The runs row, with the process that runs it (pid, host) so a dead run can be told apart."""
        self.con.execute(
            "INSERT INTO runs (run_id, study_id, kind, parent_run_id, fork_step, seed, n_steps, "
            "interaction_rounds, time_unit, config, parameters, sweep_id, version_id, note, started_at, "
            "status, n_agents, desim_version, overrides, code, code_hash, pid, host, heartbeat_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,'running',?,?,?,?,?,?,?,?)",
            [run_id, study_id, kind, parent_run_id, fork_step, seed, n_steps, rounds, time_unit,
             json.dumps(config), json.dumps(parameters, sort_keys=True), sweep_id, version_id, note, now(),
             n_agents, __version__, json.dumps(overrides or {}, sort_keys=True),
             json.dumps(code or {}, sort_keys=True), code_hash, os.getpid(), socket.gethostname(), now()])

    def reopen_run(self, run_id: str) -> None:
        """Mark an interrupted or failed run as running again (resume), in this process."""
        self.con.execute("UPDATE runs SET status='running', finished_at=NULL, error=NULL, pid=?, host=?, "
                         "heartbeat_at=? WHERE run_id=?", [os.getpid(), socket.gethostname(), now(), run_id])

    def finish_run(self, run_id: str, status: str, error: str | None = None,
                   wall_seconds: float | None = None, last_step: int | None = None,
                   traceback: str | None = None) -> None:
        self.con.execute("UPDATE runs SET status=?, error=?, traceback=?, finished_at=?, heartbeat_at=?, "
                         "wall_seconds=coalesce(wall_seconds, 0) + coalesce(?, 0), "
                         "last_step=coalesce(?, last_step) WHERE run_id=?",
                         [status, error, traceback, now(), now(), wall_seconds, last_step, run_id])

    def run_row(self, run_id: str) -> dict[str, Any] | None:
        rows = fetch_dicts(self.con, "SELECT * FROM runs WHERE run_id = ?", [run_id])
        return rows[0] if rows else None

    def close(self) -> None:
        try:
            self.con.close()
        except duckdb.Error:
            pass

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class StoreBusyError(RuntimeError):
    """The database is locked by another process."""


def read_only(path: str | Path, attempts: int = 20, wait: float = 0.05) -> duckdb.DuckDBPyConnection:
    """A read-only connection with the views defined for where the study is now.

    Retried briefly while a writer holds the lock (a run does only at its start and end)."""
    path = Path(path)
    last: Exception | None = None
    for _ in range(attempts):
        try:
            con = duckdb.connect(str(path), read_only=True)
            break
        except duckdb.ConnectionException as e:
            raise StoreBusyError(f"cannot open {path} read-only: this Python process holds a writing "
                                 f"connection to it ({e}); close it first") from None
        except duckdb.IOException as e:
            last = e
            time.sleep(wait)
    else:
        raise StoreBusyError(f"{path} is locked by a writing process: {last}")
    try:
        check_layout(con, path)
        data = data_dir(path)
        if (data / "run_id=_").is_dir():
            define_views(con, data, temp=True)
    except BaseException:
        con.close()
        raise
    return con


def fetch_dicts(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]


def last_step(path: str | Path, run_id: str, recorded: int = -1, status: str = "running") -> int:
    """The last step a run has on disk. ``runs.last_step`` is written when a run ends, so it is
    exact for every status but ``running``; a run in progress, or one that was killed, has more
    steps in its step folders than it says, and only then are they looked at."""
    recorded = recorded if recorded is not None else -1
    if status != "running":
        return recorded
    return max(recorded, RunFiles(data_dir(path), run_id).last_step())


def field(column: str, name: str) -> str:
    """SQL for one field of a struct column (``state``, ``payload``), quoted: ``t.state."opinion"``."""
    return f'{column}."' + str(name).replace('"', '""') + '"'
