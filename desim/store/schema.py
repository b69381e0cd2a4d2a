"""The store's schema: the catalogue tables, their migrations in order, and the views over the run data.

The catalogue lives in the DuckDB file; the run data lives beside it as Parquet (``desim.store.files``)
and is read through views. A store written by an older desim is brought up to date by running
:data:`MIGRATIONS` in order each time a writer opens it; every statement is idempotent, so a store
of any age ends up with the same tables and columns.
"""
from __future__ import annotations

from pathlib import Path

# Every change to the catalogue, oldest first. Append; never edit or reorder.
MIGRATIONS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS runs (
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
    )""",
    """CREATE TABLE IF NOT EXISTS versions (
        version_id VARCHAR PRIMARY KEY, study_id VARCHAR NOT NULL, parent_version_id VARCHAR,
        parent_run_id VARCHAR, fork_step INTEGER, kind VARCHAR NOT NULL, note VARCHAR,
        config JSON NOT NULL, config_hash VARCHAR NOT NULL, diff JSON, created_at TIMESTAMP NOT NULL
    )""",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS version_id VARCHAR",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS overrides JSON",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS code JSON",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS code_hash VARCHAR",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS pid INTEGER",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS host VARCHAR",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS heartbeat_at TIMESTAMP",
    "ALTER TABLE versions ADD COLUMN IF NOT EXISTS code JSON",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS traceback VARCHAR",
    """CREATE TABLE IF NOT EXISTS sweeps (
        sweep_id VARCHAR PRIMARY KEY,
        study_id VARCHAR NOT NULL,
        created_at TIMESTAMP NOT NULL,
        base_seed BIGINT NOT NULL,
        replicates INTEGER NOT NULL,
        n_steps INTEGER,
        grid JSON NOT NULL,
        plan JSON NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS effects (
        effect_id VARCHAR PRIMARY KEY, study_id VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
        at_step INTEGER NOT NULL, treatment JSON NOT NULL, control JSON NOT NULL, replicates INTEGER NOT NULL,
        base_seed BIGINT NOT NULL, n_steps INTEGER NOT NULL, note VARCHAR
    )""",
    """CREATE TABLE IF NOT EXISTS effect_pairs (
        effect_id VARCHAR NOT NULL, replicate INTEGER NOT NULL, seed BIGINT NOT NULL,
        control_run_id VARCHAR NOT NULL, treatment_run_id VARCHAR NOT NULL, reused BOOLEAN NOT NULL
    )""",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS end_reason VARCHAR",     # completed before n_steps: why
    # the text of each file a version's code lists, by the hash ``versions.code`` gives it (the study's Python
    # and text data files up to ``desim.versions.TEXT_LIMIT``): "what changed" answered with a diff of the code
    "CREATE TABLE IF NOT EXISTS code_texts (hash VARCHAR PRIMARY KEY, text VARCHAR NOT NULL)",
)

# view name -> the data file it reads (one per run and table, see desim.store.files)
VIEWS = {"panel": "panel", "initial_states": "initial", "metrics": "metrics", "events": "events",
         "messages": "messages", "edges": "edges", "round_actions": "round_actions", "llm_calls": "llm_calls"}


def _glob_root(data: Path) -> str:
    """The data folder's absolute path as the start of a DuckDB glob that matches only itself, quoted for a
    SQL string. DuckDB's glob reads ``*``, ``?`` and ``[...]`` in any part of the pattern, so each of ``*``,
    ``?`` and ``[`` becomes a class of one character (``[*]``, ``[?]``, ``[[]``), which matches it alone (a
    ``]`` with no ``[`` before it is itself). Unescaped, the views of a study at ``g2/trial[1]`` read the
    runs of ``g2/trial1``, and a study under ``thesis [2024]/`` read none."""
    return _glob_literal(data.resolve()).replace("'", "''")


def _glob_literal(path: Path) -> str:
    """``path`` as a DuckDB glob that matches only itself (:func:`_glob_root`): a list of exact files is globbed
    too, and ``trial[1]/.../panel.parquet`` read ``trial1``'s file of the same run (a copied study)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in str(path))


def _files(root: str, name: str) -> str:
    return (f"read_parquet('{root}/run_id=*/**/{name}.parquet', hive_partitioning = true, union_by_name = true, "
            "hive_types = {'run_id': VARCHAR})")


def files_sql(paths: list[Path]) -> str:
    """A table function reading exactly these runs' files (``run_id`` from their folders' names)."""
    quoted = ", ".join("'" + _glob_literal(p.resolve()).replace("'", "''") + "'" for p in paths)
    return f"read_parquet([{quoted}], hive_partitioning = true, union_by_name = true, hive_types = {{'run_id': VARCHAR}})"


def view_sql(data: Path, temp: bool, live: dict[str, list[tuple[str, str, bool]]] | None = None) -> dict[str, str]:
    """``{view: CREATE statement}`` over the data folder ``data`` (its absolute path is in the text).

    ``live`` adds the runs still going: ``{file name: [(run id, registered relation, merged before)]}``,
    each run's committed journal registered as a relation. The Parquet part leaves out a live run
    that had no merged file when its journal was read, so a connection that outlives the run's
    end (its merge) does not count its rows twice."""
    root = _glob_root(data)
    kind = "TEMP VIEW" if temp else "VIEW"
    live = live or {}

    def rows(name: str, columns: str = "run_id, * EXCLUDE (run_id)", journal_columns: str = "*") -> str:
        runs = live.get(name, [])
        fresh = [run for run, _, merged in runs if not merged]
        where = (" WHERE run_id NOT IN (" + ", ".join(_quoted(r) for r in fresh) + ")") if fresh else ""
        parts = [f"SELECT {columns} FROM {_files(root, name)}{where}"]
        parts += [f"SELECT {_quoted(run)} AS run_id, {journal_columns} FROM {relation}" for run, relation, _ in runs]
        return " UNION ALL BY NAME ".join(parts)

    out = {view: f"CREATE OR REPLACE {kind} {view} AS {rows(name)}" for view, name in VIEWS.items()}
    out["states"] = (f"CREATE OR REPLACE {kind} states AS "
                     f"{rows('initial', 'run_id, 0 AS step, agent_id, state', '0 AS step, agent_id, state')} "
                     f"UNION ALL BY NAME {rows('panel', 'run_id, step, agent_id, state', 'step, agent_id, state')}")
    return out


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def file_pattern(data: Path, view: str) -> str:
    """The text a view's definition holds when it reads the data folder ``data``."""
    root = _glob_root(data)
    return f"'{root}/run_id=*/**/{VIEWS.get(view, 'panel')}.parquet'"


# Two runs side by side: the same agent (or metric) at the same step in a treatment and a control run (a
# branch and its parent, an effect's pair, two runs compared). The one place two runs are joined.
#
# A run that ended with its process (completed early: stop_when or ctx.end_run, so end_reason is set) holds
# its last state: against the other run's later steps it is paired as it ended (an epidemic that died out at
# step 8 has no infected at step 30 either). A run that merely has fewer steps (n_steps, interrupted) holds
# nothing: the pair stops where it stops. ``until`` carries a pair of two ended runs on to that step, so
# every pair of an effect reaches the same last step.
# A run made by hand: not one of a sweep's runs, nor a control or a branch of an effect. The run a command (and
# ``latest_run()`` in SQL) means when it is given none is the newest of these, or the newest of any kind.
MADE_BY_HAND = ("sweep_id IS NULL AND run_id NOT IN (SELECT control_run_id FROM effect_pairs UNION ALL "
                "SELECT treatment_run_id FROM effect_pairs)")
LATEST = ("CREATE OR REPLACE {temp} MACRO latest_run() AS (SELECT run_id FROM runs ORDER BY ({made}) DESC, "
          "started_at DESC, run_id DESC LIMIT 1)")
NEVER_HELD = 2147483647     # held_from of a run that did not end with its process: past any step
HELD = ("CREATE OR REPLACE {temp} MACRO held_from(run) AS coalesce((SELECT last_step FROM runs WHERE run_id = run "
        f"AND status = 'completed' AND end_reason IS NOT NULL), {NEVER_HELD}::BIGINT)")
PAIRED = """CREATE OR REPLACE {temp} MACRO {name}(treatment, control, until := 0) AS TABLE
 WITH t AS (SELECT * FROM {table} WHERE run_id = treatment), c AS (SELECT * FROM {table} WHERE run_id = control)
 SELECT t.step, t.{key}, {values}
 FROM t JOIN c ON c.step = t.step AND c.{key} = t.{key}
 UNION ALL
 SELECT c.step, c.{key}, {values}
 FROM c JOIN t ON t.{key} = c.{key}
 WHERE t.step = held_from(treatment) AND c.step > held_from(treatment)
 UNION ALL
 SELECT t.step, t.{key}, {values}
 FROM t JOIN c ON c.{key} = t.{key}
 WHERE c.step = held_from(control) AND t.step > held_from(control)
 UNION ALL
 SELECT s.step, t.{key}, {values}
 FROM t JOIN c ON c.{key} = t.{key},
      (SELECT unnest(generate_series(greatest(held_from(treatment), held_from(control)) + 1, until)) AS step) s
 WHERE t.step = held_from(treatment) AND c.step = held_from(control)"""
# each run's rows are taken first (the CTEs), then joined: joined on the key alone, as the held branches are,
# the filters on run_id came after the join and every run's files were read (3.1 s for 4 pairs of a
# 20-run store; 0.7 s so)
PAIRS = {"paired_panel": ("panel", "agent_id", "t.state AS treatment_state, c.state AS control_state"),
         "paired_metrics": ("metrics", "name", "t.value AS treatment_value, c.value AS control_value")}

EFFECT_LAST_STEP = ("SELECT max(x.last_step) FROM effect_pairs y JOIN runs x ON x.run_id IN "
                    "(y.treatment_run_id, y.control_run_id) WHERE y.effect_id = $effect")
"""The last step any run of the effect reached: where the pairs of runs that ended early are carried to."""


def paired_sql(temp: bool, effects: bool = True) -> list[str]:
    """The statements that define ``latest_run``, ``held_from`` and the paired macros (``effects``: whether
    the store has the ``effect_pairs`` table: an older store, read without migrating, may not)."""
    kind = "TEMP" if temp else ""
    made = MADE_BY_HAND if effects else "sweep_id IS NULL"
    return [LATEST.format(temp=kind, made=made), HELD.format(temp=kind)] + [PAIRED.format(temp=kind, name=name, table=table, key=key, values=values)
                                       for name, (table, key, values) in PAIRS.items()]
