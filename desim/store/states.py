"""Reading state fields: one field of every agent at every step, its kind, its distribution over time,
and the paired differences of two runs.

A state field is a typed field of the ``state`` struct (``state."opinion"``, the name quoted by
:func:`~desim.store.connection.field`, never spliced raw). "A field at every step, the initial states as
step 0" is the ``states`` view (``desim.store.schema``); the same agent at the same step in a treatment
and a control run is the ``paired_panel(treatment, control)`` macro. Every query here reads through
those two, so the panel's layout can change in one place.
"""
from __future__ import annotations

from typing import Any

import duckdb

from desim.store.connection import field
from desim.store.schema import EFFECT_LAST_STEP

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
NUMERIC_TYPES = {"DOUBLE", "BIGINT", "INTEGER", "FLOAT", "UBIGINT"}
INTEGER_TYPES = {"BIGINT", "INTEGER", "UBIGINT"}


def _rows(name: str, *, text: bool = False, where: str = "") -> str:
    """``(step, agent_id, v)`` of one field of run ``$run`` (``v`` as text when ``text``, so that numbers,
    booleans and categories share one shape); ``where`` is a fixed fragment written in this module."""
    v = field("state", name)
    if text:
        v = f"CAST({v} AS VARCHAR)"
    return f"SELECT step, agent_id, {v} AS v FROM states WHERE run_id = $run {where}"


def has_field(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether any stored state has field ``name``."""
    try:
        con.execute(f"SELECT {field('state', name)} FROM states LIMIT 0")
        return True
    except duckdb.BinderException:
        return False


# --- one run's field over time --------------------------------------------------------------------
def text_counts(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> list[tuple[int, str | None, int]]:
    """``(step, value as text, agents)`` per step and value."""
    return con.execute(f"SELECT step, v, count(*) FROM ({_rows(name, text=True)}) GROUP BY step, v "
                       "ORDER BY step", {"run": run_id}).fetchall()


def text_stats(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> list[tuple]:
    """``(step, [5, 25, 50, 75, 95 % quantiles], mean, count)`` of a field read as numbers from its text."""
    return con.execute(
        f"SELECT step, quantile_cont(TRY_CAST(v AS DOUBLE), {list(QUANTILES)}), "
        f"avg(TRY_CAST(v AS DOUBLE)), count(v) FROM ({_rows(name, text=True)}) GROUP BY step ORDER BY step",
        {"run": run_id}).fetchall()


def text_values(con: duckdb.DuckDBPyConnection, run_id: str, name: str,
                ids: list[str] | None = None) -> list[tuple[int, str, str | None]]:
    """``(step, agent_id, value as text)`` for ``ids`` (every agent when ``None``), by step."""
    params: dict[str, Any] = {"run": run_id}
    where = ""
    if ids is not None:
        where, params["ids"] = "AND agent_id IN (SELECT unnest($ids))", ids
    return con.execute(f"SELECT * FROM ({_rows(name, text=True, where=where)}) ORDER BY step", params).fetchall()


def values(con: duckdb.DuckDBPyConnection, run_id: str, name: str, ids: list[str]) -> list[tuple[int, str, Any]]:
    """``(step, agent_id, typed value)`` for ``ids``, by step."""
    return con.execute(f"SELECT step, agent_id, v FROM ({_rows(name)}) WHERE agent_id IN (SELECT unnest($ids)) "
                       "ORDER BY step", {"run": run_id, "ids": ids}).fetchall()


def frames(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> list[tuple[int, list, list]]:
    """Per step: ``(step, values as text by agent id, agent ids)``; a field the run lacks reads as null."""
    if has_field(con, name):
        inner = _rows(name, text=True)
    else:
        inner = "SELECT step, agent_id, NULL AS v FROM states WHERE run_id = $run"
    return con.execute(f"SELECT step, list(v ORDER BY agent_id), list(agent_id ORDER BY agent_id) FROM ({inner}) "
                       "GROUP BY step ORDER BY step", {"run": run_id}).fetchall()


def stored_type(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> str | None:
    """The DuckDB type of the field's first non-null value in the run's panel (None: no such field)."""
    try:
        row = con.execute(f"SELECT typeof({field('state', name)}) FROM panel WHERE run_id = ? "
                          f"AND {field('state', name)} IS NOT NULL LIMIT 1", [run_id]).fetchone()
    except duckdb.BinderException:
        row = None
    return row[0] if row else None


def field_kind(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> str | None:
    """``numeric`` or ``categorical`` (text and booleans) from the field's stored type; None: no such field.
    How a field is paired: numbers by their difference, categories by who differs and the category shares."""
    typ = stored_type(con, run_id, name)
    if typ is None:
        return None
    return "numeric" if typ in NUMERIC_TYPES else "categorical"


FEW_VALUES = 8
"""An integer state taking at most this many values is a category (drawn as shares, not as a band)."""


def few_valued_integer(con: duckdb.DuckDBPyConnection, run_id: str, name: str, most: int = FEW_VALUES) -> bool:
    """Whether the field is an integer taking at most ``most`` values in the run (Schelling's ``type``, a 0/1
    flag): drawn over time as the share of agents per value, since a 0-1 quantile band says nothing."""
    typ, distinct = type_and_distinct(con, run_id, name)
    return typ in INTEGER_TYPES and distinct <= most


def type_and_distinct(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> tuple[str, int]:
    """The field's stored type and how many distinct values it takes in the run's panel."""
    return con.execute(f"SELECT any_value(typeof({field('state', name)})), "
                       f"count(DISTINCT {field('state', name)}) FROM panel WHERE run_id = ?", [run_id]).fetchone()


def quantile_bands(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> dict[str, list]:
    """Per step: the 5/25/50/75/95 % quantiles and the mean of a numeric field."""
    rows = con.execute(
        f"SELECT step, quantile_cont(TRY_CAST(v AS DOUBLE), {list(QUANTILES)}), avg(TRY_CAST(v AS DOUBLE)) "
        f"FROM ({_rows(name)}) GROUP BY step ORDER BY step", {"run": run_id}).fetchall()
    return {"steps": [r[0] for r in rows], "quantiles": [r[1] for r in rows], "mean": [r[2] for r in rows]}


def category_counts(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> dict[str, Any]:
    """Per step, how many agents are in each category of a categorical field."""
    rows = con.execute(f"SELECT step, coalesce(CAST(v AS VARCHAR), 'null') AS c, count(*) FROM ({_rows(name)}) "
                       "GROUP BY step, c ORDER BY step, c", {"run": run_id}).fetchall()
    steps = sorted({r[0] for r in rows})
    cats = sorted({r[1] for r in rows})
    counts = {c: [0] * len(steps) for c in cats}
    pos = {s: i for i, s in enumerate(steps)}
    for step, c, n in rows:
        counts[c][pos[step]] = n
    return {"steps": steps, "categories": cats, "counts": counts}


# --- two runs, agent by agent -----------------------------------------------------------------------
def _numbers(name: str) -> tuple[str, str]:
    """Treatment and control values of a field of ``paired_panel`` rows, as numbers."""
    return (f"TRY_CAST({field('treatment_state', name)} AS DOUBLE)",
            f"TRY_CAST({field('control_state', name)} AS DOUBLE)")


def paired_quantiles(con: duckdb.DuckDBPyConnection, treatment: str, control: str, name: str) -> dict[str, list]:
    """Per step: quantiles and mean of treatment minus control over agents, and the number of pairs."""
    t, c = _numbers(name)
    d = f"{t} - {c}"
    rows = con.execute(f"SELECT step, quantile_cont({d}, {list(QUANTILES)}), avg({d}), count(*) "
                       "FROM paired_panel($t, $c) GROUP BY step ORDER BY step",
                       {"t": treatment, "c": control}).fetchall()
    return {"steps": [r[0] for r in rows], "quantiles": [r[1] for r in rows],
            "mean": [r[2] for r in rows], "pairs": [r[3] for r in rows]}


def paired_changed_share(con: duckdb.DuckDBPyConnection, treatment: str, control: str, name: str) -> dict[str, list]:
    """Per step: the share of agents whose value differs between the runs, and the number of pairs."""
    tv, cv = field("treatment_state", name), field("control_state", name)
    rows = con.execute(f"SELECT step, avg(CASE WHEN {tv} IS DISTINCT FROM {cv} THEN 1.0 ELSE 0.0 END), count(*) "
                       "FROM paired_panel($t, $c) GROUP BY step ORDER BY step",
                       {"t": treatment, "c": control}).fetchall()
    return {"steps": [r[0] for r in rows], "changed_share": [r[1] for r in rows], "pairs": [r[2] for r in rows]}


def paired_summary(con: duckdb.DuckDBPyConnection, treatment: str, control: str, name: str) -> list[tuple]:
    """Per step: ``(step, n, mean, sd, min, max)`` of treatment minus control over agents with both values."""
    t, c = _numbers(name)
    return con.execute(f"""
        SELECT step, count(*), avg(d), stddev_pop(d), min(d), max(d)
        FROM (SELECT step, {t} - {c} AS d FROM paired_panel(?, ?)) WHERE d IS NOT NULL
        GROUP BY step ORDER BY step""", [treatment, control]).fetchall()


def paired_values(con: duckdb.DuckDBPyConnection, treatment: str, control: str, name: str) -> list[tuple]:
    """``(step, agent_id, control, treatment, treatment - control)`` for every agent and step."""
    t, c = _numbers(name)
    return con.execute(f"SELECT step, agent_id, {c}, {t}, {t} - {c} FROM paired_panel(?, ?) "
                       "ORDER BY step, agent_id", [treatment, control]).fetchall()


def paired_category_shares(con: duckdb.DuckDBPyConnection, treatment: str, control: str,
                           name: str) -> list[tuple]:
    """Per step and category of a categorical field (as text): ``(step, category, share of agents in it under
    treatment, the same under control)`` over the pairs of ``paired_panel``."""
    t, c = field("treatment_state", name), field("control_state", name)
    return con.execute(f"""
        WITH q AS (SELECT step, CAST({t} AS VARCHAR) AS t, CAST({c} AS VARCHAR) AS c FROM paired_panel($t, $c)),
        categories AS (SELECT t AS category FROM q WHERE t IS NOT NULL UNION SELECT c FROM q WHERE c IS NOT NULL)
        SELECT q.step, k.category, avg(CASE WHEN q.t = k.category THEN 1.0 ELSE 0.0 END),
               avg(CASE WHEN q.c = k.category THEN 1.0 ELSE 0.0 END)
        FROM q, categories k GROUP BY q.step, k.category ORDER BY q.step, k.category""",
                       {"t": treatment, "c": control}).fetchall()


def effect_agent_summaries(con: duckdb.DuckDBPyConnection, effect_id: str, name: str) -> list[tuple]:
    """Per completed pair of an effect and step: ``(replicate, step, mean of treatment - control over agents,
    its mean absolute value, the share of agents that differ, agents with both values)``."""
    t, c = _numbers(name)
    d = f"{t} - {c}"
    return con.execute(f"""
        SELECT p.replicate, q.step, avg({d}) AS mean_diff, avg(abs({d})) AS mean_abs,
               avg(CASE WHEN {d} <> 0 THEN 1.0 ELSE 0.0 END) AS share_changed, count({d}) AS n_agents
        FROM effect_pairs p
        JOIN runs r ON r.run_id = p.treatment_run_id AND r.status = 'completed',
        LATERAL (SELECT * FROM paired_panel(p.treatment_run_id, p.control_run_id,
                                            until := ({EFFECT_LAST_STEP}))) q
        WHERE p.effect_id = $effect GROUP BY p.replicate, q.step ORDER BY q.step, p.replicate""",
        {"effect": effect_id}).fetchall()


def effect_category_shares(con: duckdb.DuckDBPyConnection, effect_id: str, name: str) -> list[tuple]:
    """Per completed pair of an effect, step and category of a categorical state field: ``(replicate, step,
    category, share of agents in it under treatment - the same under control)``; categories as text."""
    t, c = field("treatment_state", name), field("control_state", name)
    return con.execute(f"""
        WITH q AS (
            SELECT p.replicate, q.step, CAST({t} AS VARCHAR) AS t, CAST({c} AS VARCHAR) AS c
            FROM effect_pairs p
            JOIN runs r ON r.run_id = p.treatment_run_id AND r.status = 'completed',
            LATERAL (SELECT * FROM paired_panel(p.treatment_run_id, p.control_run_id,
                                                until := ({EFFECT_LAST_STEP}))) q
            WHERE p.effect_id = $effect),
        categories AS (SELECT t AS category FROM q WHERE t IS NOT NULL UNION SELECT c FROM q WHERE c IS NOT NULL)
        SELECT q.replicate, q.step, k.category,
               avg(CASE WHEN q.t = k.category THEN 1.0 ELSE 0.0 END)
               - avg(CASE WHEN q.c = k.category THEN 1.0 ELSE 0.0 END)
        FROM q, categories k GROUP BY q.replicate, q.step, k.category
        ORDER BY q.step, k.category, q.replicate""", {"effect": effect_id}).fetchall()
