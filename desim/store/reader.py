"""A study's data in one line: ``desim.open("studies/x").panel().to_pandas()``.

Every method opens the store read-only, runs one query, returns an Arrow table
and closes the store again, so reading and then running in one Python process
(a notebook) just works: DuckDB refuses a writer in a process that holds a
read-only connection to the same file, and this object never keeps one.

Tables come back flat, ready for pandas, polars or R's arrow: a state field is
a column of its own under its name (``opinion``), a payload field is
``payload_<name>``; a state field whose name is taken by a panel column
(``step``) is ``state_<name>``.
"""
from __future__ import annotations

import json
import numbers
import re
from html import escape as html_escape
from pathlib import Path
from typing import Iterable

import duckdb
import pyarrow as pa

from desim.store import queries
from desim.store.catalogue import Catalogue
from desim.store.connection import StoreError, StoreMissing, field, has_table, named_file, open_store
from desim.store.files import RunFiles
from desim.store.health import health_of, last_step, runs_without_data
from desim.store.layout import StudyLayout, layout_of
from desim.store.schema import files_sql

PANEL_COLUMNS = ("run_id", "step", "agent_id", "action_kind", "action_source", "action_rationale", "away")


class NoSuchRun(StoreMissing):
    """The store holds no run of that id (or no run at all)."""


MEMORY = ":memory:"
"""``run_study(db_path=":memory:")``: the run is kept nowhere (its steps reach only ``on_step``)."""


class StudyData:
    """The store of one study (a folder under ``studies/``, or a path to its ``desim.duckdb``)."""

    def __init__(self, study: "str | Path | StudyLayout"):
        if not isinstance(study, StudyLayout) and str(study) == MEMORY:
            # a store is a folder of files: ":memory:" would be read as a folder of that name, and its
            # missing database blamed on a run never made
            raise NoSuchRun("':memory:' is no store: a run made with db_path=':memory:' keeps nothing (its steps "
                            "reach only on_step), so it has no panel, metrics or events to read back. To read a "
                            "run back, run it with db_path=None (the study's store, <study>/runs/) or a path to a "
                            ".duckdb file (its data files go beside it, in <name>-data/)")
        self.layout = layout_of(study)
        self.db = self.layout.db
        if not self.db.exists():
            raise NoSuchRun(self.layout.missing_store())

    def __repr__(self) -> str:
        return f"StudyData({str(self.db)!r})"

    def _repr_html_(self) -> str:
        """Jupyter's view: the runs, newest first, with their parameters and what they belong to."""
        runs = self.runs().to_pylist()[::-1]
        params = sorted({k[6:] for r in runs for k in r if k.startswith("param_")})
        head = ["run", "kind", "status", "steps", "seed", "part of"] + params
        rows = []
        for r in runs[:20]:
            part = (f"sweep {r['sweep_id']}" if r.get("sweep_id") else
                    f"effect {r['effect_id']} ({r['arm']})" if r.get("effect_id") else "")
            rows.append([r["run_id"], r["kind"], r["status"], f"{max(r['last_step'], 0)}/{r['n_steps']}", r["seed"],
                         part] + [r.get(f"param_{p}") for p in params])
        more = f"<p>{len(runs) - 20} older runs not shown (runs() has them all)</p>" if len(runs) > 20 else ""
        return (f"<div><b>desim store</b> <code>{_html(self.db)}</code>: {len(runs)} runs{html_table(head, rows)}"
                f"{more}</div>")

    # --- any query -------------------------------------------------------------------
    def sql(self, query: str, params: list | dict | None = None) -> pa.Table:
        """A read-only query over the store's tables and views, as an Arrow table; a failing query raises
        :class:`QueryError` with DuckDB's message (one naming a state or payload field bare, ``status``, adds
        that in SQL they are ``state.status`` and ``payload.<name>``: the tables here name them flat)."""
        return user_query(self.layout, query, params)

    def run_rows(self, run_ids: list[str]) -> list[dict]:
        """The runs rows of ``run_ids`` as dicts (JSON columns as text), oldest first."""
        with open_store(self.layout) as con:
            return Catalogue(con).runs(run_ids=run_ids)

    def runs(self) -> pa.Table:
        """Every run, oldest first: the ``runs`` table, with what a run belongs to as typed columns of its
        own (``sweep_id``; ``effect_id`` and ``arm``, ``control`` or ``treatment``, for an effect's runs)
        and one column per study parameter, ``param_<name>``, typed by its values (no JSON to parse).

        A run still ``running`` in the table is as ``desim runs`` shows it: ``status`` ``stale`` when its
        process is gone (killed), and ``last_step`` the last step it has stored (the table's is written
        when a run ends, -1 until then). A run whose data folder is gone is ``missing data``, as there
        (``desim.store.health.data_missing``): its rows are in no table."""
        table = self._roles()
        keys = list(zip(*(table.column(c).to_pylist() for c in ("run_id", "status", "last_step"))))
        gone = runs_without_data(self.layout, keys)
        checked = [i for i, (run_id, status, _) in enumerate(keys) if status == "running" or run_id in gone]
        if checked:
            rows = table.to_pylist()
            status, last = table.column("status").to_pylist(), table.column("last_step").to_pylist()
            for i in checked:
                status[i] = health_of(self.layout, rows[i])
                last[i] = last_step(self.layout, rows[i]["run_id"], last[i], rows[i]["status"])
            for name, values in (("status", status), ("last_step", last)):
                at = table.schema.get_field_index(name)
                table = table.set_column(at, table.schema.field(at), pa.array(values, table.schema.field(at).type))
        values = [json.loads(p) if p else {} for p in table.column("parameters").to_pylist()]
        for name in dict.fromkeys(k for v in values for k in v):
            try:
                column = pa.array([v.get(name) for v in values], from_pandas=False)
            except (pa.ArrowException, TypeError, ValueError):      # mixed kinds across runs: as JSON text
                column = pa.array([None if name not in v else json.dumps(v[name]) for v in values], pa.string())
            table = table.append_column(f"param_{name}", column)
        return table

    def _roles(self) -> pa.Table:
        """The ``runs`` table with ``effect_id`` and ``arm``, oldest first (what ``runs`` types further)."""
        with open_store(self.layout) as con:
            return con.sql(_RUNS_WITH_ROLES if _has_effects(con) else _RUNS_PLAIN).to_arrow_table()

    def select_runs(self, *, sweep: str | None = None, effect: str | None = None, arm: str | None = None,
                    status: str | None = None) -> list[str]:
        """The ids of the runs of a sweep, of an effect (``arm``: ``control`` or ``treatment``, in replicate
        order so that the two arms pair up), of a status, oldest first: give them as ``run=`` to ``panel``,
        ``metrics`` and the others.

        An effect's runs are those its pairs name (``effect_pairs``), controls and treatments: a control may be
        reused by several effects, and the one ``effect_id`` label ``runs()`` gives a run names only one of
        them."""
        if arm not in (None, "control", "treatment"):
            raise ValueError(f"arm is 'control' or 'treatment', not {arm!r}")
        if arm is not None and effect is None:
            raise ValueError("arm= selects within an effect: give effect= too")
        runs = self._roles()
        if arm is not None:
            # an arm is read from the effect's pairs, in replicate order, so that the two arms zip into pairs;
            # a held pair (its control ended before the fork) is its control run in both arms
            found = self._arm(effect, arm)
            if sweep is not None or status is not None:
                rows = dict(zip(runs.column("run_id").to_pylist(),
                                zip(runs.column("sweep_id").to_pylist(), runs.column("status").to_pylist())))
                found = [r for r in found if (sweep is None or rows[r][0] == sweep)
                         and (status is None or rows[r][1] == status)]
        else:
            keep = [True] * runs.num_rows
            for column, wanted in (("sweep_id", sweep), ("status", status)):
                if wanted is not None:
                    keep = [k and v == wanted for k, v in zip(keep, runs.column(column).to_pylist())]
            if effect is not None:
                members = set(self._arm(effect, "control")) | set(self._arm(effect, "treatment"))
                keep = [k and r in members for k, r in zip(keep, runs.column("run_id").to_pylist())]
            found = [r for r, k in zip(runs.column("run_id").to_pylist(), keep) if k]
        if not found:
            raise NoSuchRun(f"no run in {self.db} with " + ", ".join(
                f"{k}={v!r}" for k, v in (("sweep", sweep), ("effect", effect), ("arm", arm), ("status", status))
                if v is not None))
        return found

    def _arm(self, effect: str, arm: str) -> list[str]:
        """The runs of one arm of an effect that the store holds, in replicate order."""
        column = "control_run_id" if arm == "control" else "treatment_run_id"
        with open_store(self.layout) as con:
            if not _has_effects(con):
                return []
            return [r for (r,) in con.execute(f"SELECT p.{column} FROM effect_pairs p JOIN runs r ON r.run_id = "
                                              f"p.{column} WHERE p.effect_id = ? ORDER BY p.replicate",
                                              [effect]).fetchall()]

    def effect_pairs(self, run: str | Iterable[str] | None = None) -> pa.Table:
        """The ``effect_pairs`` rows whose control or treatment is one of the runs, by effect and replicate: which
        control each treatment is paired with (a held pair, whose control ended before the fork, names its
        control in both), which a run's single ``effect_id``/``arm`` label in ``runs()`` cannot say of a
        control that several effects reused."""
        runs = self.run_ids(run)
        return self._catalogue("effect_pairs", "SELECT * FROM effect_pairs WHERE control_run_id IN (SELECT "
                               "unnest($runs)) OR treatment_run_id IN (SELECT unnest($runs)) "
                               "ORDER BY effect_id, replicate", runs)

    def effects(self, run: str | Iterable[str] | None = None) -> pa.Table:
        """The ``effects`` rows of the effects the runs are a control or a treatment of (:meth:`effect_pairs`):
        each effect's fork step, treatment and control settings, replicates and seeds."""
        runs = self.run_ids(run)
        return self._catalogue("effects", "SELECT * FROM effects WHERE effect_id IN (SELECT effect_id FROM "
                               "effect_pairs WHERE control_run_id IN (SELECT unnest($runs)) OR treatment_run_id "
                               "IN (SELECT unnest($runs))) ORDER BY created_at, effect_id", runs)

    def sweeps(self, run: str | Iterable[str] | None = None) -> pa.Table:
        """The ``sweeps`` rows of the sweeps the runs belong to (their ``sweep_id``): each sweep's grid, plan,
        replicates and base seed."""
        runs = self.run_ids(run)
        return self._catalogue("sweeps", "SELECT * FROM sweeps WHERE sweep_id IN (SELECT sweep_id FROM runs "
                               "WHERE run_id IN (SELECT unnest($runs))) ORDER BY created_at, sweep_id", runs)

    def _catalogue(self, table: str, query: str, runs: list[str]) -> pa.Table:
        """``query`` (on the catalogue table ``table``, ``$runs`` the run ids) as an Arrow table; a table with no
        columns when the store has no such table (one written before sweeps or effects, read unmigrated)."""
        with open_store(self.layout) as con:
            if not has_table(con, table):
                return pa.table({})
        return self.sql(query, {"runs": runs})

    def run_ids(self, run: str | Iterable[str] | None) -> list[str]:
        """``None`` is the latest plain run: the newest run that is not one of a sweep's or an effect's
        runs (a run or a branch made by hand), or the newest run of any kind when there is none; a
        string is one run; a list those runs (each checked). ``select_runs`` picks a sweep's or an
        effect's runs."""
        if run is None:
            latest = self.sql("SELECT latest_run() AS run_id").column("run_id")[0].as_py()
            if latest is None:
                raise NoSuchRun(f"{self.db} holds no runs yet")
            return [latest]
        wanted = [run] if isinstance(run, str) else list(run)
        known = set(self.sql("SELECT run_id FROM runs WHERE run_id IN (SELECT unnest(?))",
                             [wanted]).column("run_id").to_pylist())
        missing = [r for r in wanted if r not in known]
        if missing:
            raise NoSuchRun(f"no run '{missing[0]}' in {self.db} (desim runs lists them)")
        return wanted

    # --- the panel ---------------------------------------------------------------------
    def _types(self, runs: list[str]) -> dict[str, dict[str, str]]:
        merged: dict[str, dict[str, str]] = {"state": {}, "payload": {}}
        for r in runs:
            saved = RunFiles(self.layout.data, r).load_types() or {}
            for part in merged:
                for name, kind in saved.get(part, {}).items():
                    merged[part].setdefault(name, kind)
        return merged

    def _source(self, view: str, runs: list[str]) -> str:
        """Where ``runs``' rows of ``view`` are read: their own merged files when every one has ended and all
        recorded the same field types, so each value reads back as stored; else the view over every run, which
        gives a field one type for all of them (a field an integer in one version and a float in a later one
        reads as floats there: in one table the runs' columns cannot keep two types)."""
        files = [RunFiles(self.layout.data, r) for r in runs]
        paths = [f.merged_file(view) for f in files]
        if not runs or None in paths or len({json.dumps(f.load_types(), sort_keys=True) for f in files}) > 1:
            return view
        return files_sql(paths)

    def _flat(self, part: str, runs: list[str], names: Iterable[str] | None = None) -> list[str]:
        types = self._types(runs)
        out = []
        for name in (names if names is not None else types[part]):
            if part == "state":
                # SQL names ignore case: a state field 'Step' would clash with the panel's step
                low = name.lower()
                alias = f"state_{name}" if low in PANEL_COLUMNS or low.startswith("payload_") else name
            else:
                alias = f"payload_{name}"
            quoted = '"' + alias.replace('"', '""') + '"'
            out.append(f"{field(part, name)} AS {quoted}")
        return out

    def panel(self, run: str | Iterable[str] | None = None, columns: Iterable[str] | None = None,
              steps: int | Iterable[int] | None = None) -> pa.Table:
        """One row per agent per step; ``columns`` picks state fields (``opinion``), payload fields
        (``payload_to_x``) or panel columns (``action_kind``), one (a string) or several; ``steps`` one
        step or several."""
        runs = self.run_ids(run)
        types = self._types(runs)
        if isinstance(columns, str):        # one column: not its letters
            columns = [columns]
        if columns is None:
            select = (["run_id", "step", "agent_id"] + self._flat("state", runs) +
                      ["action_kind", "action_source"] + self._flat("payload", runs) +
                      ["action_rationale", "away"])
        else:
            select = ["run_id", "step", "agent_id"]
            for c in columns:
                if c in PANEL_COLUMNS:
                    if c not in select:
                        select.append(c)
                elif c.startswith("payload_") and c[8:] in types["payload"]:
                    select += self._flat("payload", runs, [c[8:]])
                elif c in types["state"] or (c.startswith("state_") and c[6:] in types["state"]):
                    select += self._flat("state", runs, [c if c in types["state"] else c[6:]])
                else:
                    known = sorted(types["state"]) + [f"payload_{p}" for p in types["payload"]] + list(PANEL_COLUMNS)
                    raise KeyError(f"no panel column '{c}' (known: {', '.join(known)})")
        where, params = "run_id IN (SELECT unnest(?))", [runs]
        if steps is not None:
            where += " AND step IN (SELECT unnest(?))"
            params.append(self._panel_steps(runs, steps))
        return self.sql(f"SELECT {', '.join(select)} FROM {self._source('panel', runs)} WHERE {where} "
                        "ORDER BY run_id, step, agent_id", params)

    def _panel_steps(self, runs: list[str], steps: int | Iterable[int]) -> list[int]:
        """``steps`` as a list of ints, checked: a step outside every run's panel would give an empty table
        without a word, and step 0 (the states before the first step) is easily asked of the panel."""
        wanted = [steps] if not isinstance(steps, Iterable) or isinstance(steps, str) else list(steps)
        for step in wanted:
            if isinstance(step, bool) or not isinstance(step, numbers.Integral):
                raise TypeError(f"panel(steps=...): {step!r} is not a step number (an int)")
        wanted = [int(step) for step in wanted]
        last = self.sql("SELECT max(last_step) AS last FROM runs WHERE run_id IN (SELECT unnest(?))",
                        [runs]).column("last")[0].as_py()
        outside = [step for step in wanted if step < 1 or last is None or step > last]
        if outside and len(outside) == len(wanted):
            held = f"steps 1 to {last}" if last and last >= 1 else "no steps yet"
            zero = " (step 0, the states before the first step, is initial_states())" if 0 in outside else ""
            raise ValueError(f"panel(steps=...): the panel of {'run ' + runs[0] if len(runs) == 1 else 'these runs'} "
                             f"holds {held}, not step{'s' if len(outside) > 1 else ''} {', '.join(map(str, outside))}{zero}")
        return wanted

    def payload_fields(self, run: str | None = None) -> dict[str, list[str]]:
        """Which payload fields each action kind fills in one run: ``{"move": ["to_x", "to_y"], "post":
        ["content"]}``. The panel's payload columns are the union of every kind's fields; a field is null
        in the rows of a kind that lacks it."""
        run_id = self.run_ids(run)[0]
        names = list(self._types([run_id])["payload"])
        with open_store(self.layout) as con:
            return queries.payload_fields_by_kind(con, run_id, names)

    def initial_states(self, run: str | Iterable[str] | None = None) -> pa.Table:
        """One row per agent: its state before step 1 (step 0), a column per state field as in the panel.

        A field that is None for every agent at step 0 (a choice not made yet) has no type of its own in the
        run's initial file (Arrow's ``null``); it is given the panel's type of that field, so that step 0
        stacks onto the panel (``pa.concat_tables``, ``pl.concat``) instead of failing on the mismatch."""
        runs = self.run_ids(run)
        flat = self._flat("state", runs)
        table = self.sql(f"SELECT run_id, agent_id, {', '.join(flat) or 'NULL AS state'} "
                         f"FROM {self._source('initial_states', runs)} WHERE run_id IN (SELECT unnest(?)) "
                         "ORDER BY run_id, agent_id", [runs])
        untyped = [f.name for f in table.schema if pa.types.is_null(f.type) and f.name not in ("run_id", "agent_id")]
        if not flat or not untyped:
            return table
        panel = self.sql(f"SELECT {', '.join(flat)} FROM {self._source('panel', runs)} "
                         "WHERE run_id IN (SELECT unnest(?)) LIMIT 0", [runs]).schema
        for name in untyped:
            if name in panel.names and not pa.types.is_null(panel.field(name).type):
                at = table.schema.get_field_index(name)
                table = table.set_column(at, panel.field(name), pa.nulls(table.num_rows, panel.field(name).type))
        return table

    # --- everything else ---------------------------------------------------------------------
    def metrics(self, run: str | Iterable[str] | None = None, wide: bool = True) -> pa.Table:
        """Per step, every metric; ``wide`` gives one column per metric (step 0 included)."""
        runs = self.run_ids(run)
        long = self.sql("SELECT run_id, step, name, value FROM metrics WHERE run_id IN (SELECT unnest(?)) "
                        "ORDER BY run_id, step, name", [runs])
        if not wide:
            return long
        names = sorted(set(long.column("name").to_pylist()))
        if not names:
            return pa.table({"run_id": pa.array([], pa.string()), "step": pa.array([], pa.int32())})
        cols = ", ".join(f"first(value) FILTER (WHERE name = {_literal(n)}) AS " + '"' + n.replace('"', '""') + '"'
                         for n in names)
        return self.sql(f"SELECT run_id, step, {cols} FROM metrics WHERE run_id IN (SELECT unnest(?)) "
                        "GROUP BY run_id, step ORDER BY run_id, step", [runs])

    def messages(self, run: str | Iterable[str] | None = None) -> pa.Table:
        # every column after the keys, so that two posts of one author in one round come out in one order
        # (the sort is not stable: ties came out in either order, run to run)
        return self._table("messages", run, "step, round, author_id, channel, kind, CAST(content AS VARCHAR), "
                                            "audience, reply_to")

    def events(self, run: str | Iterable[str] | None = None) -> pa.Table:
        return self._table("events", run, "step, name, kind, CAST(detail AS VARCHAR)")

    def edges(self, run: str | Iterable[str] | None = None) -> pa.Table:
        return self._table("edges", run, "source, target")

    def llm_calls(self, run: str | Iterable[str] | None = None) -> pa.Table:
        return self._table("llm_calls", run, "step, round, agent_id")

    def round_actions(self, run: str | Iterable[str] | None = None) -> pa.Table:
        runs = self.run_ids(run)
        select = ["run_id", "step", "round", "agent_id", "action_kind", "action_source"] + \
            self._flat("payload", runs) + ["action_rationale"]
        return self.sql(f"SELECT {', '.join(select)} FROM round_actions WHERE run_id IN (SELECT unnest(?)) "
                        "ORDER BY run_id, step, round, agent_id", [runs])

    def _table(self, view: str, run, order: str) -> pa.Table:
        runs = self.run_ids(run)
        return self.sql(f"SELECT * FROM {view} WHERE run_id IN (SELECT unnest(?)) ORDER BY run_id, {order}", [runs])


RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
RUN_ID_FORM = ("1 to 100 letters (a-z, A-Z), digits, '-' or '_', starting with a letter or a digit (desim's own "
               "ids are like r1a2b3c4d5e)")
"""What a run id may be. It names the run's folder ``runs/data/run_id=<R>/``, which the views read back by
DuckDB's hive partitioning: a ``/`` makes folders the views do not read (the run reads back empty), ``..``
escapes the store, a ``=`` makes DuckDB refuse the whole folder ("Hive partition mismatch": every run
unreadable) and ``%2F`` is read back decoded, as another id. It also names the run's live file
``runs/live/<R>.json`` and a worker's ``<R>.duckdb``; ``_`` alone names the empty files every view starts
from (``run_id=_``)."""


class RunIdRefused(StoreError, ValueError):
    """A run id given to ``run_study`` or ``branch`` that the store cannot keep, or already holds; nothing
    was run or written."""


def check_new_run_id(run_id: object, study_root: "str | Path", db_path: "str | Path | None" = None) -> None:
    """Refuse, before anything is assembled or written, a ``run_id`` not of the form :data:`RUN_ID` or
    already taken in the store the run would be kept in (``db_path``'s, or the study's when None; none
    with ``":memory:"``), so that a run id can never write outside its folder, nor a second run take
    the first one's catalogue row (DuckDB's raw primary-key error, after the study was assembled).
    A run started at the same moment by another process with the same id is still refused by the
    catalogue's key, as that raw error."""
    if not isinstance(run_id, str) or RUN_ID.fullmatch(run_id) is None:
        raise RunIdRefused(f"run_id {run_id!r} cannot name a run: a run id is {RUN_ID_FORM}, since it names the "
                           "run's folder runs/data/run_id=<run_id>/")
    if db_path is not None and str(db_path) == MEMORY:
        return                          # kept nowhere: no id is taken
    layout = StudyLayout.at(db_path) if db_path is not None else StudyLayout(study_root)
    if not layout.db.exists():
        return
    rows = StudyData(layout).run_rows([run_id])
    if rows:
        row = rows[0]
        raise RunIdRefused(f"run_id '{run_id}' is taken: {layout.db} already holds run {run_id} ({row['kind']}, "
                           f"{row['status']}, started {row['started_at']:%Y-%m-%d %H:%M:%S}); give another run_id, "
                           "or none for a new one (desim runs lists them)")


class DbPathRefused(StoreError, ValueError):
    """A ``db_path`` given to ``run_study`` or ``branch`` that names no DuckDB file; nothing was run or written."""


def check_db_path(db_path: "str | Path | None") -> None:
    """Refuse a ``db_path`` that is neither ``":memory:"`` nor a ``.duckdb`` file: the run would be kept in a
    DuckDB file of that name, which ``desim.open`` and ``result.panel()`` then read as a study folder
    (``<path>/runs/desim.duckdb``, "does not exist")."""
    if db_path is None or str(db_path) == MEMORY or Path(db_path).suffix == ".duckdb":
        return
    raise DbPathRefused(f"db_path {str(db_path)!r} is no DuckDB file: give a path ending in .duckdb (its data files "
                        "go beside it, in <name>-data/), ':memory:' to keep nothing, or None for the study's store "
                        "(<study>/runs/)")


class QueryError(StoreError):
    """A user's query failed; the message is DuckDB's."""


# What a user's SQL may be: statements that read. A read-only connection still lets COPY ... TO, EXPORT
# DATABASE and ATTACH write files anywhere, the study's code and the store's own data files among them.
READING = {"SELECT", "EXPLAIN", "PRAGMA", "CALL", "MULTI"}      # MULTI: PIVOT, a select in two statements


_COMMENTS = re.compile(r"/\*.*?\*/|--[^\n]*", re.DOTALL)
_ANALYZE = re.compile(r"^\s*EXPLAIN\s+ANALY[SZ]E\b", re.IGNORECASE)


def refuse_writes(con: duckdb.DuckDBPyConnection, text: str) -> None:
    """Raise :class:`QueryError` for a statement of ``text`` that does more than read (``EXPLAIN ANALYZE``
    runs the statement it explains: that one is checked too)."""
    try:
        statements = con.extract_statements(text)
    except duckdb.Error as e:
        raise QueryError(str(e)) from None
    for statement in statements:
        query = _COMMENTS.sub(" ", statement.query)
        if statement.type.name == "EXPLAIN" and _ANALYZE.match(query):
            refuse_writes(con, _ANALYZE.sub("", query, count=1))
        elif statement.type.name not in READING:
            kind = (query.split() or [statement.type.name])[0].upper()     # as typed: INSTALL, not LOAD
            raise QueryError(f"desim sql reads the store; {kind} statements are refused (a query's rows go to a file "
                             "with --csv or --json and a redirection, a run's tables with desim export)")


def user_query(study: "str | Path | StudyLayout", text: str, params: list | dict | None = None) -> pa.Table | None:
    """A user's read-only SQL on the store (``desim sql``, ``StudyData.sql``): an Arrow table, or None for a
    statement that returns no rows; a failing query raises :class:`QueryError` with DuckDB's message."""
    layout = layout_of(study)
    with open_store(layout) as con:
        refuse_writes(con, text)
        try:
            rel = con.sql(text, params=params or None)
            return json_typed(rel.to_arrow_table(), rel.types) if rel is not None else None
        except duckdb.Error as e:
            if named_file(e, layout.data) is not None:
                raise                   # a damaged data file: open_store names it and its run
            message = _without_candidates(str(e))
            hint = ((bare_field_hint(con, message) or json_hint(message)) if isinstance(e, duckdb.BinderException)
                    else struct_value_hint(con, message) if isinstance(e, duckdb.ConversionException) else None)
            raise QueryError(f"{message}\n{hint}" if hint else message) from None


JSON_FIELD = {b"duckdb_type": b"JSON"}
"""The field metadata marking a JSON column in :func:`user_query`'s table."""


def json_typed(table: pa.Table, types: list) -> pa.Table:
    """``table`` with its JSON columns (by DuckDB's ``types``) marked with :data:`JSON_FIELD`: DuckDB hands them
    over as plain text, and ``desim sql --json`` could not tell a JSON value from a string. Marked rather than
    cast to Arrow's JSON type, which Arrow's own CSV writer (and other readers) refuse."""
    for i, kind in enumerate(types):
        if str(kind) == "JSON" and table.schema.types[i] == pa.string():
            table = table.set_column(i, table.schema.field(i).with_metadata(JSON_FIELD), table.column(i))
    return table


def _html(value) -> str:
    return "" if value is None else html_escape(str(value))


def html_table(head: list[str], rows: list[list]) -> str:
    """A plain HTML table (notebook summaries)."""
    return ("<table><thead><tr>" + "".join(f"<th>{_html(h)}</th>" for h in head) + "</tr></thead><tbody>" +
            "".join("<tr>" + "".join(f"<td>{_html(c)}</td>" for c in row) + "</tr>" for row in rows) +
            "</tbody></table>")


_RUNS_PLAIN = ("SELECT *, CAST(NULL AS VARCHAR) AS effect_id, CAST(NULL AS VARCHAR) AS arm FROM runs "
               "ORDER BY started_at, run_id")
_RUNS_WITH_ROLES = """
    SELECT r.*, coalesce(t.effect_id, c.effect_id) AS effect_id,
           CASE WHEN c.effect_id IS NOT NULL THEN 'control' WHEN t.effect_id IS NOT NULL THEN 'treatment' END AS arm
    FROM runs r
    LEFT JOIN (SELECT treatment_run_id AS run_id, min(effect_id) AS effect_id FROM effect_pairs GROUP BY 1) t
           USING (run_id)
    LEFT JOIN (SELECT control_run_id AS run_id, min(effect_id) AS effect_id FROM effect_pairs GROUP BY 1) c
           USING (run_id)
    ORDER BY r.started_at, r.run_id"""
"""The runs with the effect each belongs to and its arm: one label per run (a run that is a treatment: its effect;
a control reused by several effects: the first by id), for a glance; ``effect_pairs`` (``select_runs(effect=)``,
``StudyData.effect_pairs``, the export's ``effect_pairs`` file) has every effect a run belongs to."""


def _has_effects(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store has the effect tables (a store written before effects has not)."""
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'effect_pairs' "
                            "AND database_name = current_database()").fetchall()[0][0])


_NOT_FOUND = re.compile(r'Referenced column "([^"]+)" not found')


def bare_field_hint(con: duckdb.DuckDBPyConnection, message: str) -> str | None:
    """When DuckDB could not find a column that is a state or payload field of the panel, the line
    that says how SQL names it: pandas and ``desim.open`` give state fields as plain columns
    (``status``), SQL keeps them in the ``state`` struct (``state.status``)."""
    m = _NOT_FOUND.search(message)
    if m is None:
        return None
    name = m.group(1)
    try:
        schema = con.sql("SELECT state, payload FROM panel LIMIT 0").to_arrow_table().schema
    except duckdb.Error:
        return None
    for column in ("state", "payload"):
        kind = schema.field(column).type
        if pa.types.is_struct(kind) and kind.get_field_index(name) >= 0:
            return (f"'{name}' is a {column} field: in SQL, {column} fields are {column}.<name> "
                    f"({column}.{name}); desim.open(...).panel() and pandas name it {name if column == 'state' else 'payload_' + name}")
    return None


_TO_STRUCT = re.compile(r"with value (.*) can't be cast to the destination type (STRUCT\(.*\))")


def struct_value_hint(con: duckdb.DuckDBPyConnection, message: str) -> str | None:
    """When DuckDB could not make a value the panel's ``state`` (or ``payload``) struct, the query compared the
    whole struct with one value (``WHERE state = 'I'``): the line that says to compare one of its fields. The
    diffusion models' own state field is called ``state``, so ``state.state`` is the usual fix there."""
    m = _TO_STRUCT.search(message)
    if m is None:
        return None
    value, target = m.groups()
    try:
        rel = con.sql("SELECT state, payload FROM panel LIMIT 0")
    except duckdb.Error:
        return None
    for column, kind in zip(rel.columns, rel.types):
        if str(kind) != target:
            continue
        fields = [name for name, _ in kind.children]
        field = column if column in fields else fields[0]
        return (f"{column} is the struct of every {column} field ({', '.join(fields)}), not one value: compare a "
                f"field, {column}.<name> ({column}.{field} = {value}); desim.open(...).panel() and pandas give "
                "each field as a column of its own")
    return None


def _without_candidates(message: str) -> str:
    """DuckDB's message without the list of every overload of the function it could not match (dozens of
    lines after "Candidate functions:"): the first line says what did not match, and the hint how to fix it."""
    head, sep, _ = message.partition("\n\tCandidate functions:")
    return head if sep else message


_JSON_ARGUMENT = re.compile(r"No function matches the given name and argument types '(\w+)\([^)]*JSON")


def json_hint(message: str) -> str | None:
    """When a function got a JSON value (``messages.content``, ``events.detail``, a field of either), how to make
    it the value it holds: JSON stays JSON in SQL until it is cast."""
    m = _JSON_ARGUMENT.search(message)
    if m is None:
        return None
    return (f"{m.group(1)}() got a JSON value: messages.content and events.detail are JSON, and so is a field of "
            "them (content.x); cast it to what it holds: content.x::DOUBLE, or content->>'x' for text")


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def open(study: str | Path) -> StudyData:  # noqa: A001 - desim.open, like duckdb.connect
    """The store of ``study`` (its folder or its ``desim.duckdb``), read through Arrow tables."""
    return StudyData(study)
