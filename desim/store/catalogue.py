"""The catalogue: the store's own tables (runs, versions, sweeps, effects, effect_pairs) and the named
operations on them. Nothing outside ``desim.store`` writes SQL; it calls these.

``Catalogue(con)`` wraps an open connection (``with open_store(layout, read_only=False) as con:``);
reads work on a read-only connection too. A store opened read-only before any writer of this desim
brought it up to date may lack the newer tables (sweeps, effects): their reads then answer "none".
"""
from __future__ import annotations

import json
import os
import socket
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb

from desim.store.connection import StoreError, fetch_dicts, has_table
from desim.store.schema import MADE_BY_HAND
from desim.version import __version__
from desim.versions import code_changes, code_texts, config_hash, diff_configs


def now() -> datetime:
    """The store's timestamps: naive UTC."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Catalogue:
    """Named operations on one open connection's catalogue tables."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con

    # --- runs -------------------------------------------------------------------------------
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
        self.con.execute("UPDATE runs SET status='running', finished_at=NULL, error=NULL, end_reason=NULL, pid=?, "
                         "host=?, heartbeat_at=? WHERE run_id=?", [os.getpid(), socket.gethostname(), now(), run_id])

    def finish_run(self, run_id: str, status: str, error: str | None = None,
                   wall_seconds: float | None = None, last_step: int | None = None,
                   traceback: str | None = None, end_reason: str | None = None) -> None:
        """How a run ended: its status, error, last step, and for a run the study ended early, why."""
        self.con.execute("UPDATE runs SET status=?, error=?, traceback=?, finished_at=?, heartbeat_at=?, "
                         "wall_seconds=coalesce(wall_seconds, 0) + coalesce(?, 0), "
                         "last_step=coalesce(?, last_step), end_reason=? WHERE run_id=?",
                         [status, error, traceback, now(), now(), wall_seconds, last_step, end_reason, run_id])

    def run(self, run_id: str) -> dict[str, Any] | None:
        """The runs row of ``run_id``, or None."""
        rows = fetch_dicts(self.con, "SELECT * FROM runs WHERE run_id = ?", [run_id])
        return rows[0] if rows else None

    def runs(self, *, with_config: bool = True, run_ids: list[str] | None = None) -> list[dict[str, Any]]:
        """Every run (or those of ``run_ids``), oldest first."""
        cols = "*" if with_config else "* EXCLUDE (config)"
        if run_ids is None:
            return fetch_dicts(self.con, f"SELECT {cols} FROM runs ORDER BY started_at")
        return fetch_dicts(self.con, f"SELECT {cols} FROM runs WHERE run_id IN (SELECT unnest(?)) "
                                     "ORDER BY started_at", [list(run_ids)])

    def run_interventions(self, run_ids: list[str]) -> dict[str, dict[str, list]]:
        """Each run's interventions as it ran them (its resolved configuration: ``--set`` and sweep values
        in), ``{run_id: {"scheduled_events": [...], "broadcasts": [...]}}``: what a chart marks for a run."""
        rows = self.con.execute("SELECT run_id, config->'$.environment.scheduled_events', "
                                "config->'$.environment.broadcasts' FROM runs WHERE run_id IN (SELECT unnest(?))",
                                [list(run_ids)]).fetchall()
        return {r: {"scheduled_events": json.loads(e) if e else [], "broadcasts": json.loads(b) if b else []}
                for r, e, b in rows}

    def run_ids(self) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()]

    def latest_run(self, *, status: str | None = None, prefer_plain: bool = False) -> dict[str, Any] | None:
        """The newest run (of ``status``, when given). With ``prefer_plain``, the newest made by hand (not one
        of a sweep's or an effect's runs), or the newest of any kind when there is none: the run a command
        means when it is given none (``desim.open(...).panel()`` prefers the same, of any status)."""
        where, params = ("WHERE status = ? ", [status]) if status else ("", [])
        order = ""
        if prefer_plain:
            made = MADE_BY_HAND if has_table(self.con, "effect_pairs") else "sweep_id IS NULL"   # an older store
            order = f"({made}) DESC, "
        rows = fetch_dicts(self.con, f"SELECT * FROM runs {where}ORDER BY {order}started_at DESC, run_id DESC LIMIT 1",
                           params)
        return rows[0] if rows else None

    def reusable_control(self, config: dict[str, Any], code_hash: str) -> str | None:
        """A completed, non-branch run of exactly this configuration and code (an effect's control)."""
        for run_id, stored in self.con.execute(          # another desim may compute another panel from them
                "SELECT run_id, config FROM runs WHERE status = 'completed' AND kind <> 'branch' AND code_hash = ? "
                "AND desim_version = ? ORDER BY started_at", [code_hash, __version__]).fetchall():
            if json.loads(stored) == config:
                return run_id
        return None

    def twin_before(self, run_id: str) -> str | None:
        """An earlier completed run made by hand (not a branch, a sweep's or an effect's) of exactly ``run_id``'s
        configuration, seed included, code and desim version: for a rule-based study the same panel, bit for bit,
        so a second ``desim run`` of it is no replicate (its summary says so)."""
        row = self.con.execute("SELECT config, code_hash, started_at, desim_version FROM runs WHERE run_id = ?",
                               [run_id]).fetchone()
        if row is None or row[1] is None:
            return None
        made = MADE_BY_HAND if has_table(self.con, "effect_pairs") else "sweep_id IS NULL"
        config = json.loads(row[0])
        for other, stored in self.con.execute(
                f"SELECT run_id, config FROM runs WHERE run_id <> ? AND status = 'completed' AND kind <> 'branch' "
                f"AND code_hash = ? AND started_at < ? AND desim_version = ? AND {made} ORDER BY started_at DESC",
                [run_id, row[1], row[2], row[3]]).fetchall():
            if json.loads(stored) == config:
                return other
        return None

    def forget_run(self, run_id: str) -> None:
        """Remove a run's row (its data folder is the caller's: ``desim.store.files``)."""
        self.con.execute("DELETE FROM main.runs WHERE run_id = ?", [run_id])

    # --- versions ---------------------------------------------------------------------------
    def ensure_version(self, study_id: str, config: dict[str, Any], *, kind: str, code: dict[str, str] | None = None,
                       parent_run_id: str | None = None, fork_step: int | None = None,
                       note: str | None = None, root: Path | None = None) -> tuple[str, bool]:
        """The version id for ``config`` and ``code`` (created if new) and whether it was created now.

        A new version's parent is the version the study was last run at (the files
        the user then edited: after an edit reverted, the version it went back to,
        not the newest made), else the newest that is not a branch; a branch's is the
        version of its parent run. With the
        study's folder ``root``, a new version keeps the texts of its files
        (:meth:`keep_code_texts`), so that ``desim diff`` shows what changed in them.
        """
        con = self.con
        code = code or {}
        h = config_hash(config, code)
        if kind != "branch":
            row = con.execute("SELECT version_id FROM versions WHERE study_id=? AND config_hash=? AND kind<>'branch' "
                              "ORDER BY created_at LIMIT 1", [study_id, h]).fetchall()
            if row:
                if root is not None:    # a version recorded before texts were kept gets them now (same hashes)
                    self._keep_texts_of(root, code)
                return row[0][0], False
        parent = (con.execute("SELECT v.version_id, v.config, v.code FROM runs r JOIN versions v USING (version_id) "
                              "WHERE v.study_id=? AND v.kind<>'branch' ORDER BY r.started_at DESC LIMIT 1",
                              [study_id]).fetchone()
                  or con.execute("SELECT version_id, config, code FROM versions WHERE study_id=? AND kind<>'branch' "
                                 "ORDER BY created_at DESC LIMIT 1", [study_id]).fetchone())
        if kind == "branch" and parent_run_id:
            parent = con.execute("SELECT v.version_id, v.config, v.code FROM runs r JOIN versions v USING (version_id) "
                                 "WHERE r.run_id=?", [parent_run_id]).fetchone() or parent
        diff = []
        if parent:
            old_code = json.loads(parent[2]) if parent[2] else {}
            diff = diff_configs({**json.loads(parent[1]), "code": old_code}, {**config, "code": code})
        version_id = f"v{uuid.uuid4().hex[:8]}"
        con.execute("INSERT INTO versions (version_id, study_id, parent_version_id, parent_run_id, fork_step, kind, "
                    "note, config, config_hash, diff, created_at, code) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    [version_id, study_id, parent[0] if parent else None, parent_run_id, fork_step,
                     "branch" if kind == "branch" else ("version" if parent else "initial"), note, json.dumps(config),
                     h, json.dumps(diff, default=str), now(), json.dumps(code, sort_keys=True)])
        if root is not None:
            self._keep_texts_of(root, code)
        return version_id, True

    def _keep_texts_of(self, root: Path, code: dict[str, str]) -> None:
        """Keep the texts of ``code``'s files the store does not have yet: only those are read again (a run's
        files were just read to hash them, and most are unchanged since the last version)."""
        kept = self.code_texts(list(code.values()))
        missing = {rel: h for rel, h in code.items() if h not in kept}
        if missing:
            self.keep_code_texts(code_texts(root, missing))

    def keep_code_texts(self, texts: dict[str, str]) -> None:
        """Keep the texts of a version's files by hash (``desim.versions.code_texts``), once each."""
        if texts:
            self.con.executemany("INSERT OR IGNORE INTO code_texts VALUES (?, ?)", list(texts.items()))

    def code_texts(self, hashes: list[str]) -> dict[str, str]:
        """The kept texts of ``hashes`` (a file whose text was not kept is missing)."""
        if not hashes or not has_table(self.con, "code_texts"):     # a store written before texts were kept
            return {}
        return dict(self.con.execute("SELECT hash, text FROM code_texts WHERE hash IN (SELECT unnest(?))",
                                     [list(hashes)]).fetchall())

    def version(self, version_id: str) -> dict[str, Any] | None:
        """One version, its configuration and code (``{path: hash}``) included."""
        rows = fetch_dicts(self.con, "SELECT * FROM versions WHERE version_id = ?", [version_id])
        return rows[0] if rows else None

    def parent_version(self, version_id: str) -> str | None:
        row = self.con.execute("SELECT parent_version_id FROM versions WHERE version_id=?", [version_id]).fetchone()
        return row[0] if row else None

    def latest_run_of(self, version_id: str) -> str | None:
        """The run a new version's first run descends from: the newest of ``version_id`` made by hand, else the
        newest of any kind (a sweep's or an effect's run is not where the next version was worked on from)."""
        made = MADE_BY_HAND if has_table(self.con, "effect_pairs") else "sweep_id IS NULL"   # an older store
        rows = self.con.execute(f"SELECT run_id FROM runs WHERE version_id=? ORDER BY ({made}) DESC, started_at DESC, "
                                "run_id DESC LIMIT 1", [version_id]).fetchall()
        return rows[0][0] if rows else None

    def versions(self) -> list[dict[str, Any]]:
        """Every version without its configuration, oldest first."""
        return fetch_dicts(self.con, "SELECT version_id, parent_version_id, parent_run_id, fork_step, kind, note, "
                                     "config_hash, diff, created_at FROM versions ORDER BY created_at")

    # --- sweeps -----------------------------------------------------------------------------
    def record_plan(self, sweep_id: str, study_id: str, base_seed: int, replicates: int, n_steps: int | None,
                    grid: dict, plan_json: str) -> None:
        self.con.execute("INSERT INTO sweeps VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         [sweep_id, study_id, now(), base_seed, replicates, n_steps, json.dumps(grid), plan_json])

    def sweep(self, sweep_id: str) -> dict[str, Any] | None:
        """The sweeps row (its ``plan`` as JSON text), or None (also when the store has no sweeps yet)."""
        if not has_table(self.con, "sweeps"):
            return None
        rows = fetch_dicts(self.con, "SELECT * FROM sweeps WHERE sweep_id = ?", [sweep_id])
        return rows[0] if rows else None

    def unfinished(self) -> list[dict[str, Any]]:
        """Sweeps and effects with runs still to complete (``kind``, ``id``, ``done``, ``planned``), oldest
        first: one killed before it merged any run has no run in the store to show it, only its plan."""
        out = []
        if has_table(self.con, "sweeps"):
            out += fetch_dicts(self.con, """
                SELECT 'sweep' AS kind, s.sweep_id AS id, s.created_at,
                       (SELECT count(*) FROM runs r WHERE r.sweep_id = s.sweep_id AND r.status = 'completed') AS done,
                       json_array_length(s.plan -> '$.runs') AS planned
                FROM sweeps s""")
        if has_table(self.con, "effects"):
            out += [{"kind": "effect", "id": e["effect_id"], "created_at": e["created_at"],
                     "done": e["completed_pairs"], "planned": e["replicates"]} for e in self.effects()]
        return sorted((u for u in out if u["done"] < u["planned"]), key=lambda u: (u["created_at"], u["id"]))

    def sweep_grids(self, sweep_ids) -> dict[str, list[str]]:
        """The parameters each sweep varies, in the order given (``[]`` for replicates alone), by sweep id."""
        out = {}
        for sid in sweep_ids:
            row = self.sweep(sid)
            out[sid] = list(json.loads(row["grid"])) if row and row.get("grid") else []
        return out

    def sweep_ids(self) -> list[str]:
        if not has_table(self.con, "sweeps"):
            return []
        return [r[0] for r in self.con.execute("SELECT sweep_id FROM sweeps ORDER BY created_at").fetchall()]

    def sweep_runs(self, sweep_id: str) -> list[dict[str, Any]]:
        """The runs of a sweep already in the store, with what a summary needs."""
        return fetch_dicts(self.con, "SELECT run_id, status, error, seed, n_steps, last_step, time_unit, config "
                                     "FROM runs WHERE sweep_id = ? ORDER BY run_id", [sweep_id])

    def run_statuses(self, sweep_id: str) -> dict[str, dict[str, Any]]:
        """``run_id -> {run_id, status, error, last_step, n_steps, end_reason}`` for the runs of a sweep already
        in the store."""
        return {r["run_id"]: r for r in fetch_dicts(
            self.con, "SELECT run_id, status, error, last_step, n_steps, end_reason FROM runs WHERE sweep_id = ?",
            [sweep_id])}

    # --- effects ----------------------------------------------------------------------------
    def record_effect(self, effect: dict[str, Any], pairs: list[dict[str, Any]]) -> None:
        """An effect's row and its control/treatment pairs."""
        self.con.execute("INSERT INTO effects VALUES (?,?,?,?,?,?,?,?,?,?)",
                         [effect["effect_id"], effect["study_id"], now(), effect["at_step"],
                          json.dumps(effect["treatment"], sort_keys=True), json.dumps(effect["control"], sort_keys=True),
                          effect["replicates"], effect["base_seed"], effect["n_steps"], effect.get("note")])
        for p in pairs:
            self.con.execute("INSERT INTO effect_pairs VALUES (?,?,?,?,?,?)",
                             [effect["effect_id"], p["replicate"], p["seed"], p["control_run_id"],
                              p["treatment_run_id"], p["reused"]])

    def effects(self) -> list[dict[str, Any]]:
        """Every recorded effect with its completed pairs (for the dashboard and the CLI)."""
        if not has_table(self.con, "effects"):
            return []
        return fetch_dicts(self.con, """
            SELECT e.effect_id, e.at_step, e.treatment, e.control, e.replicates, e.n_steps, e.created_at, e.note,
                   count(r.run_id) FILTER (WHERE r.status = 'completed') AS completed_pairs
            FROM effects e LEFT JOIN effect_pairs p USING (effect_id)
            LEFT JOIN runs r ON r.run_id = p.treatment_run_id
            GROUP BY ALL ORDER BY e.created_at""")

    def effect(self, effect_id: str) -> dict[str, Any] | None:
        if not has_table(self.con, "effects"):
            return None
        rows = fetch_dicts(self.con, "SELECT * FROM effects WHERE effect_id = ?", [effect_id])
        return rows[0] if rows else None

    def hold_pair(self, effect_id: str, replicate: int) -> None:
        """Make a pair's treatment its control run (a control that ended before the fork step: see
        ``desim.experiments.effects``)."""
        self.con.execute("UPDATE effect_pairs SET treatment_run_id = control_run_id WHERE effect_id = ? AND "
                         "replicate = ?", [effect_id, replicate])

    def effect_pairs(self, effect_id: str) -> list[dict[str, Any]]:
        """An effect's pairs with how each run ended."""
        return fetch_dicts(self.con, """
            SELECT p.*, c.status AS control_status, t.status AS treatment_status, t.error AS treatment_error,
                   c.last_step AS control_last_step, t.last_step AS treatment_last_step,
                   c.end_reason AS control_end_reason, t.end_reason AS treatment_end_reason
            FROM effect_pairs p LEFT JOIN runs c ON c.run_id = p.control_run_id
            LEFT JOIN runs t ON t.run_id = p.treatment_run_id WHERE p.effect_id = ? ORDER BY p.replicate""",
                           [effect_id])

    # --- moving runs between stores --------------------------------------------------------------
    def merge_run_row(self, worker_db: str | Path, run_id: str, version_id: str, move_data) -> None:
        """Replace this store's ``run_id`` row by the one in ``worker_db`` (joining ``version_id``), and call
        ``move_data()`` inside the same transaction: a failed move leaves the row as it was. A worker file
        DuckDB cannot read raises :class:`StoreError`."""
        try:
            self._merge_run_row(worker_db, run_id, version_id, move_data)
        except duckdb.Error as e:
            raise StoreError(f"{worker_db}: {e}") from None

    def _merge_run_row(self, worker_db, run_id: str, version_id: str, move_data) -> None:
        con = self.con
        con.execute(f"ATTACH {_literal(Path(worker_db).resolve())} AS w (READ_ONLY)")
        try:
            present = {r[0] for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'w'").fetchall()}
            if "runs" not in present or not con.execute(
                    "SELECT count(*) FROM w.runs WHERE run_id = ?", [run_id]).fetchone()[0]:
                raise ValueError(f"{worker_db} holds no run '{run_id}'")
            self._refuse_other_code(run_id, version_id)
            here = con.execute("SELECT current_database()").fetchone()[0]
            cols = [c for c in self._run_columns("w") if c in set(self._run_columns(here))]
            names = ", ".join(cols)
            con.begin()
            try:
                con.execute("DELETE FROM main.runs WHERE run_id = ?", [run_id])
                con.execute(f"INSERT INTO main.runs ({names}) SELECT {names} FROM w.runs WHERE run_id = ?", [run_id])
                con.execute("UPDATE main.runs SET version_id = ? WHERE run_id = ?", [version_id, run_id])
                move_data()
                con.commit()
            except BaseException:
                con.rollback()
                raise
        finally:
            con.execute("DETACH w")

    def version_code(self, version_id: str) -> dict[str, str] | None:
        """The code a version recorded (``{file: hash}``), None for a version that recorded none."""
        row = self.con.execute("SELECT code FROM versions WHERE version_id = ?", [version_id]).fetchone()
        return json.loads(row[0]) if row and row[0] else None

    def _refuse_other_code(self, run_id: str, version_id: str) -> None:
        """A worker's run whose code is not its version's (the study's files edited while a sweep or an effect
        ran) is refused: joined to that version, a sweep's summary would pool two models as one."""
        ran = self.con.execute("SELECT code FROM w.runs WHERE run_id = ?", [run_id]).fetchone()[0]
        kept = self.con.execute("SELECT code FROM main.versions WHERE version_id = ?", [version_id]).fetchone()
        if not ran or not kept or not kept[0]:
            return
        changed = code_changes(json.loads(kept[0]), json.loads(ran))
        if changed:
            raise ValueError(f"the study's code changed while it ran ({', '.join(changed)}): run {run_id} ran "
                             f"other code than version {version_id}, so it is not kept with it; restore the code "
                             "and resume, or start anew for the new code")

    def _run_columns(self, database: str) -> list[str]:
        return [r[0] for r in self.con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_catalog = ? "
            "AND table_schema = 'main' AND table_name = 'runs' ORDER BY ordinal_position", [database]).fetchall()]

    def copy_for_branch(self, run_id: str, until: int, dest: str | Path) -> None:
        """Copy what a branch of ``run_id`` at ``until + 1`` reads (its runs row, its actions for steps
        ``1..until``) into the new DuckDB file ``dest``, which a worker reads while this store stays free."""
        con = self.con
        con.execute(f"ATTACH {_literal(Path(dest).resolve())} AS x")
        try:
            con.execute("CREATE TABLE x.runs AS SELECT * FROM main.runs WHERE run_id = ?", [run_id])
            for table in ("panel", "round_actions"):
                con.execute(f"CREATE TABLE x.{table} AS SELECT * FROM main.{table} WHERE run_id = ? AND step <= ?",
                            [run_id, until])
        finally:
            con.execute("DETACH x")


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"
