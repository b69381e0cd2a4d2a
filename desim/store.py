"""The panel store: one embedded DuckDB file per study keeps every run.

Tables (see SPEC section 5): ``runs``, ``initial_states``, ``panel`` (one row
per agent per step), ``metrics`` (long: one row per step and metric),
``events``, ``messages``, ``edges`` (the run's network), ``round_actions``
(only with ``record_rounds``), ``llm_calls`` and ``versions``.

Two rules shape this module:

* a step is written in one transaction, so a reader never sees half a step
  and a crash loses at most the step in flight;
* rows travel as Arrow tables and are inserted in bulk. Row-by-row
  ``executemany`` runs at about 2,000 rows/s; an Arrow insert at about a
  million.

DuckDB allows one writing process per file. A run holds the write lock for
its duration; readers that must not wait (the dashboard) use
:func:`read_only` and the live progress files the engine writes beside the
database (see ``desim.live``).
"""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import duckdb
import pyarrow as pa

from . import __version__

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
CREATE TABLE IF NOT EXISTS initial_states (
    run_id VARCHAR NOT NULL, agent_id VARCHAR NOT NULL, state JSON
);
CREATE TABLE IF NOT EXISTS panel (
    run_id VARCHAR NOT NULL, step INTEGER NOT NULL, agent_id VARCHAR NOT NULL,
    state JSON, action_kind VARCHAR, action_payload JSON, action_source VARCHAR,
    action_rationale VARCHAR
);
CREATE TABLE IF NOT EXISTS metrics (
    run_id VARCHAR NOT NULL, step INTEGER NOT NULL, name VARCHAR NOT NULL, value DOUBLE
);
CREATE TABLE IF NOT EXISTS events (
    run_id VARCHAR NOT NULL, step INTEGER NOT NULL, kind VARCHAR NOT NULL,
    name VARCHAR NOT NULL, detail JSON
);
CREATE TABLE IF NOT EXISTS messages (
    run_id VARCHAR NOT NULL, step INTEGER NOT NULL, round INTEGER NOT NULL,
    author_id VARCHAR NOT NULL, channel VARCHAR, kind VARCHAR, content JSON,
    audience VARCHAR, reply_to VARCHAR
);
CREATE TABLE IF NOT EXISTS edges (
    run_id VARCHAR NOT NULL, source VARCHAR NOT NULL, target VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS round_actions (
    run_id VARCHAR NOT NULL, step INTEGER NOT NULL, round INTEGER NOT NULL,
    agent_id VARCHAR NOT NULL, action_kind VARCHAR, action_payload JSON,
    action_source VARCHAR, action_rationale VARCHAR
);
CREATE TABLE IF NOT EXISTS llm_calls (
    run_id VARCHAR NOT NULL, step INTEGER, round INTEGER, agent_id VARCHAR,
    model VARCHAR, prompt_hash VARCHAR, tokens_in INTEGER, tokens_out INTEGER,
    latency_ms DOUBLE, cached BOOLEAN, outcome VARCHAR, attempts INTEGER, endpoint VARCHAR
);
ALTER TABLE llm_calls ADD COLUMN IF NOT EXISTS endpoint VARCHAR;
CREATE TABLE IF NOT EXISTS versions (
    version_id VARCHAR PRIMARY KEY, study_id VARCHAR NOT NULL, parent_version_id VARCHAR,
    parent_run_id VARCHAR, fork_step INTEGER, kind VARCHAR NOT NULL, note VARCHAR,
    config JSON NOT NULL, config_hash VARCHAR NOT NULL, diff JSON, created_at TIMESTAMP NOT NULL
);
ALTER TABLE runs ADD COLUMN IF NOT EXISTS version_id VARCHAR;
"""

def store_path(study_root: str | Path) -> Path:
    """Where a study's database lives: ``studies/<id>/runs/desim.duckdb``."""
    return Path(study_root) / "runs" / "desim.duckdb"


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _json_expr(table: pa.Table, column: str) -> str:
    """SQL turning an Arrow column into DuckDB JSON: text is cast, structs are serialised."""
    typ = table.schema.field(column).type
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_null(typ):
        return f"CAST({column} AS JSON)"
    return f"to_json({column})"


class Store:
    """A read-write connection to one study's database."""

    def __init__(self, path: str | Path, attempts: int = 40, wait: float = 0.05):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(attempts):  # a reader (the dashboard) holds the file for milliseconds
            try:
                self.con = duckdb.connect(str(self.path))
                break
            except duckdb.IOException as e:
                if attempt == attempts - 1 or "lock" not in str(e).lower():
                    raise StoreBusyError(f"cannot open {self.path} for writing: {e}. Another desim process "
                                         "is probably writing to it; wait for it or use another study copy.") from None
                time.sleep(wait)
        self.con.execute(SCHEMA)

    # --- runs -----------------------------------------------------------------
    def start_run(self, *, run_id: str, study_id: str, kind: str, seed: int, n_steps: int,
                  rounds: int, time_unit: str, config: dict, parameters: dict,
                  parent_run_id: str | None = None, fork_step: int | None = None,
                  note: str | None = None, sweep_id: str | None = None, n_agents: int | None = None,
                  version_id: str | None = None) -> None:
        self.con.execute(
            "INSERT INTO runs (run_id, study_id, kind, parent_run_id, fork_step, seed, n_steps, "
            "interaction_rounds, time_unit, config, parameters, sweep_id, version_id, note, started_at, "
            "status, n_agents, desim_version) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,'running',?,?)",
            [run_id, study_id, kind, parent_run_id, fork_step, seed, n_steps, rounds, time_unit,
             json.dumps(config), json.dumps(parameters, sort_keys=True), sweep_id, version_id, note, now(),
             n_agents, __version__])

    def reopen_run(self, run_id: str) -> None:
        """Mark an interrupted or failed run as running again (resume)."""
        self.con.execute("UPDATE runs SET status='running', finished_at=NULL, error=NULL WHERE run_id=?", [run_id])

    def finish_run(self, run_id: str, status: str, error: str | None = None,
                   wall_seconds: float | None = None) -> None:
        self.con.execute("UPDATE runs SET status=?, error=?, finished_at=?, "
                         "wall_seconds=coalesce(wall_seconds, 0) + coalesce(?, 0) WHERE run_id=?",
                         [status, error, now(), wall_seconds, run_id])

    def run_row(self, run_id: str) -> dict[str, Any] | None:
        rows = fetch_dicts(self.con, "SELECT * FROM runs WHERE run_id = ?", [run_id])
        return rows[0] if rows else None

    # --- bulk writes ------------------------------------------------------------
    def _insert(self, target: str, table: pa.Table, select: str, params: list) -> None:
        name = f"_arrow_{target}"
        self.con.register(name, table)
        try:
            self.con.execute(f"INSERT INTO {target} {select.format(src=name)}", params)
        finally:
            self.con.unregister(name)

    def write_initial(self, run_id: str, table: pa.Table, metrics: dict[str, float],
                      events: list[dict], messages: pa.Table | None) -> None:
        """Initial states (before step 1), step-0 metrics and step-0 events, in one transaction."""
        self.con.begin()
        try:
            self._insert("initial_states", table,
                         f"SELECT ?, agent_id, {_json_expr(table, 'state')} FROM {{src}}", [run_id])
            self._write_rows(run_id, 0, metrics, events, messages)
            self.con.execute("UPDATE runs SET last_step = 0 WHERE run_id = ?", [run_id])
            self.con.commit()
        except BaseException:
            self.con.rollback()
            raise

    def write_edges(self, run_id: str, edges: Iterable[tuple[str, str]]) -> None:
        pairs = list(edges)
        table = pa.table({"source": pa.array([str(a) for a, _ in pairs], pa.string()),
                          "target": pa.array([str(b) for _, b in pairs], pa.string())})
        self._insert("edges", table, "SELECT ?, source, target FROM {src}", [run_id])

    def write_step(self, run_id: str, step: int, panel: pa.Table, metrics: dict[str, float],
                   events: list[dict], messages: pa.Table | None, round_actions: pa.Table | None = None,
                   llm_calls: pa.Table | None = None) -> None:
        """Everything about one step in one transaction."""
        self.con.begin()
        try:
            self._insert("panel", panel,
                         f"SELECT ?, ?, agent_id, {_json_expr(panel, 'state')}, action_kind, "
                         f"{_json_expr(panel, 'action_payload')}, action_source, action_rationale FROM {{src}}",
                         [run_id, step])
            self._write_rows(run_id, step, metrics, events, messages)
            if round_actions is not None and round_actions.num_rows:
                self._insert("round_actions", round_actions,
                             f"SELECT ?, ?, round, agent_id, action_kind, "
                             f"{_json_expr(round_actions, 'action_payload')}, action_source, "
                             f"action_rationale FROM {{src}}", [run_id, step])
            if llm_calls is not None and llm_calls.num_rows:
                self._insert("llm_calls", llm_calls,
                             "SELECT ?, step, round, agent_id, model, prompt_hash, tokens_in, tokens_out, "
                             "latency_ms, cached, outcome, attempts, endpoint FROM {src}", [run_id])
            self.con.execute("UPDATE runs SET last_step = ? WHERE run_id = ?", [step, run_id])
            self.con.commit()
        except BaseException:
            self.con.rollback()
            raise

    def _write_rows(self, run_id: str, step: int, metrics: dict[str, float], events: list[dict],
                    messages: pa.Table | None) -> None:
        if metrics:  # a handful of rows: one statement with list parameters beats an Arrow scan
            self.con.execute("INSERT INTO metrics SELECT ?, ?, unnest(?::VARCHAR[]), unnest(?::DOUBLE[])",
                             [run_id, step, list(metrics), [float(v) for v in metrics.values()]])
        if events:
            self._insert("events", pa.table({
                "kind": [e["kind"] for e in events], "name": [e["name"] for e in events],
                "detail": [json.dumps(e.get("detail"), sort_keys=True, default=str) for e in events]}),
                "SELECT ?, ?, kind, name, CAST(detail AS JSON) FROM {src}",
                [run_id, step])
        if messages is not None and messages.num_rows:
            self._insert("messages", messages, "SELECT ?, ?, round, author_id, channel, kind, "
                         f"{_json_expr(messages, 'content')}, audience, reply_to FROM {{src}}", [run_id, step])

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
    """A read-only connection, retried briefly while a writer holds the lock."""
    last: Exception | None = None
    for _ in range(attempts):
        try:
            return duckdb.connect(str(path), read_only=True)
        except duckdb.IOException as e:
            last = e
            time.sleep(wait)
    raise StoreBusyError(f"{path} is locked by a writing process: {last}")


def fetch_dicts(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]
