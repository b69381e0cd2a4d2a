"""Named reads of the run data: metrics, events, messages, edges, panel pages, one agent, LLM calls,
a branch's stored actions. Each takes an open connection (``with open_store(layout) as con:``) and
returns plain Python data; every value from outside reaches SQL as a bound parameter.

State fields (a field at every step, its kind, its quantiles, paired differences) are read in
``desim.store.states``.
"""
from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from desim.store import schema
from desim.store.connection import fetch_dicts, field


# --- metrics and events --------------------------------------------------------------------------
def metric_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute("SELECT DISTINCT name FROM metrics ORDER BY name").fetchall()]


def metric_series(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, list[tuple[int, float]]]:
    """``{metric: [(step, value), ...]}`` of one run, steps in order."""
    out: dict[str, list[tuple[int, float]]] = {}
    for step, name, value in con.execute(
            "SELECT step, name, value FROM metrics WHERE run_id = ? ORDER BY name, step", [run_id]).fetchall():
        out.setdefault(name, []).append((step, value))
    return out


def metric_rows(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> list[tuple[str, str, int, float]]:
    """``(run_id, name, step, value)`` of several runs, by run, metric and step."""
    return con.execute("SELECT run_id, name, step, value FROM metrics "
                       "WHERE list_contains(?::VARCHAR[], run_id) ORDER BY run_id, name, step",
                       [list(run_ids)]).fetchall()


def step_message_counts(con: duckdb.DuckDBPyConnection, run_ids: list[str], step: int) -> dict[str, int]:
    """How many messages each of ``run_ids`` stored with step ``step`` (0 for none)."""
    got = dict(con.execute("SELECT run_id, count(*) FROM messages WHERE list_contains(?::VARCHAR[], run_id) "
                           "AND step = ? GROUP BY run_id", [list(run_ids), step]).fetchall())
    return {r: got.get(r, 0) for r in run_ids}


def held_from(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> dict[str, int]:
    """``{run_id: last step}`` of the runs among ``run_ids`` that ended with their process and so hold their
    last state after it (the ``held_from`` rule of the paired macros); the others are not in it."""
    return dict(con.execute("SELECT r.run_id, held_from(r.run_id) AS held FROM runs r "
                            "WHERE list_contains(?::VARCHAR[], r.run_id) AND held < ?",
                            [list(run_ids), schema.NEVER_HELD]).fetchall())


def metric_comparison(con: duckdb.DuckDBPyConnection, control: str, treatment: str) -> list[dict[str, Any]]:
    """Every metric of two runs side by side per step, with treatment minus control.

    The runs are paired by ``paired_metrics``: a run that ended with its process holds its last values
    against the other run's later steps. A step or metric only one run has, and that is not held (a run
    that merely has fewer steps), shows with the other side null."""
    return fetch_dicts(con, """
        WITH p AS (SELECT step, name, control_value AS control, treatment_value AS treatment
                   FROM paired_metrics($t, $c)),
        f AS (SELECT coalesce(c.step, t.step) AS step, coalesce(c.name, t.name) AS name,
                     c.value AS control, t.value AS treatment
              FROM (SELECT * FROM metrics WHERE run_id = $c) c
              FULL JOIN (SELECT * FROM metrics WHERE run_id = $t) t USING (step, name))
        SELECT step, name, control, treatment, treatment - control AS diff FROM p
        UNION ALL
        SELECT f.step, f.name, f.control, f.treatment, f.treatment - f.control FROM f ANTI JOIN p USING (step, name)
        ORDER BY name, step""", {"c": control, "t": treatment})


def held_runs(con: duckdb.DuckDBPyConnection, treatment: str, control: str) -> list[dict[str, Any]]:
    """The runs of a pair that hold their last state against the other's later steps (``held_from``, the
    rule of the paired macros): ``run_id``, ``last_step``, ``end_reason`` and ``held_to``, the other run's
    last step, by run id."""
    return fetch_dicts(con, """
        SELECT r.run_id, r.last_step, r.end_reason, o.last_step AS held_to
        FROM runs r JOIN runs o ON o.run_id = CASE WHEN r.run_id = $t THEN $c ELSE $t END
        WHERE r.run_id IN ($t, $c) AND held_from(r.run_id) < o.last_step ORDER BY r.run_id""",
                       {"t": treatment, "c": control})


def final_metrics_of_sweep(con: duckdb.DuckDBPyConnection, sweep_id: str) -> list[tuple[str, str, float]]:
    """``(run_id, metric, value)`` at each completed run's final step (its last, for a run the study
    ended early), for a sweep's runs."""
    return con.execute(
        "SELECT m.run_id, m.name, m.value FROM metrics m JOIN runs r USING (run_id) "
        "WHERE r.sweep_id = ? AND r.status = 'completed' AND m.step = r.last_step", [sweep_id]).fetchall()


def completed_effect_pairs(con: duckdb.DuckDBPyConnection, effect_id: str) -> tuple[int, list[tuple[int, str, str]]]:
    """An effect's last step compared, and its completed pairs ``(replicate, treatment, control)``.

    The effect's reads take the pairs one at a time, each through a paired macro with its own two run
    ids: a ``LATERAL`` join of the pairs with the macro made DuckDB pair every run's rows before filtering
    (the metrics of ten pairs of 2,000 agents: 3.3 s and 6.2 GiB; the agent summaries of three: 232 s)."""
    until = con.execute(schema.EFFECT_LAST_STEP, {"effect": effect_id}).fetchall()[0][0]
    pairs = con.execute("SELECT p.replicate, p.treatment_run_id, p.control_run_id FROM effect_pairs p "
                        "JOIN runs r ON r.run_id = p.treatment_run_id AND r.status = 'completed' "
                        "WHERE p.effect_id = $effect ORDER BY p.replicate", {"effect": effect_id}).fetchall()
    return until, pairs


def effect_metric_pairs(con: duckdb.DuckDBPyConnection,
                        effect_id: str) -> list[tuple[str, int, int, str, float, str, float]]:
    """``(metric, step, replicate, treatment run, treatment value, control run, control value)`` for each
    completed pair of an effect, by metric, step and pair: the rows its differences and its curves over time
    are both made of.

    Runs that ended with their process hold their last values (``paired_metrics``), up to the effect's
    longest run (``until``), so every pair counts at every step; a step where one run of a pair has the metric
    and the other not (and neither holds) is not a pair's row."""
    until, pairs = completed_effect_pairs(con, effect_id)
    rows: list[tuple] = []
    for replicate, treatment, control in pairs:
        rows += [(name, step, replicate, treatment, t, control, c) for name, step, t, c in con.execute(
            "SELECT name, step, treatment_value, control_value FROM paired_metrics($t, $c, until := $until)",
            {"t": treatment, "c": control, "until": until}).fetchall()]
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return rows


def effect_metric_differences(con: duckdb.DuckDBPyConnection, effect_id: str) -> list[tuple[str, int, float]]:
    """``(metric, step, treatment - control)`` for each completed pair of an effect, by metric, step, pair
    (:func:`effect_metric_pairs`: an ended run holds its last values up to the effect's longest run)."""
    return [(name, step, None if t is None or c is None else t - c)
            for name, step, _, _, t, _, c in effect_metric_pairs(con, effect_id)]


def events(con: duckdb.DuckDBPyConnection, run_id: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The interventions that fired in a run, by step (``detail`` as stored: JSON text)."""
    if limit is None:
        return fetch_dicts(con, "SELECT step, kind, name, detail FROM events WHERE run_id = ? "
                                "ORDER BY step, kind, name", [run_id])
    return fetch_dicts(con, "SELECT step, kind, name, detail FROM events WHERE run_id = ? "
                            "ORDER BY step, name LIMIT ?", [run_id, limit])


# --- the population and its network ------------------------------------------------------------
def agent_ids(con: duckdb.DuckDBPyConnection, run_id: str) -> list[str]:
    """A run's agents, by id."""
    return [r[0] for r in con.execute("SELECT agent_id FROM initial_states WHERE run_id = ? ORDER BY agent_id",
                                      [run_id]).fetchall()]


def population_size(con: duckdb.DuckDBPyConnection, run_id: str) -> int:
    return con.execute("SELECT count(*) FROM initial_states WHERE run_id = ?", [run_id]).fetchone()[0]


def initial_state_sample(con: duckdb.DuckDBPyConnection, run_id: str, limit: int) -> list[Any]:
    """The first ``limit`` initial states by agent id (structs as dicts)."""
    return [r[0] for r in con.execute("SELECT state FROM initial_states WHERE run_id = ? ORDER BY agent_id LIMIT ?",
                                      [run_id, limit]).fetchall()]


def edges(con: duckdb.DuckDBPyConnection, run_id: str) -> list[tuple[str, str]]:
    return con.execute("SELECT source, target FROM edges WHERE run_id = ?", [run_id]).fetchall()


def edge_count(con: duckdb.DuckDBPyConnection, run_id: str) -> int:
    return con.execute("SELECT count(*) FROM edges WHERE run_id = ?", [run_id]).fetchone()[0]


def same_network(con: duckdb.DuckDBPyConnection, a: str, b: str) -> bool:
    """Whether two runs have the same edges, row for row (a generated graph with the same ``graph_seed``, a
    network file, explicit edges)."""
    one_way = "SELECT source, target FROM edges WHERE run_id = ? EXCEPT ALL SELECT source, target FROM edges WHERE run_id = ?"
    return con.execute(f"SELECT count(*) FROM (({one_way}) UNION ALL ({one_way}))", [a, b, b, a]).fetchone()[0] == 0


def initial_states_differing(con: duckdb.DuckDBPyConnection, a: str, b: str) -> int:
    """How many agents of both runs start in another state in one than in the other."""
    return con.execute("SELECT count(*) FROM initial_states x JOIN initial_states y USING (agent_id) "
                       "WHERE x.run_id = ? AND y.run_id = ? AND x.state IS DISTINCT FROM y.state", [a, b]).fetchone()[0]


# --- the panel, one agent, messages --------------------------------------------------------------
def panel_page(con: duckdb.DuckDBPyConnection, run_id: str, *, step: int | None, agent_id: str | None,
               action_kind: str | None, page: int, page_size: int) -> tuple[int, list[dict[str, Any]], list[str]]:
    """One page of a run's panel filtered by step, agent and action kind: the total count, the rows and the
    run's action kinds."""
    where, params = ["run_id = ?"], [run_id]
    for column, value in (("step", step), ("agent_id", agent_id), ("action_kind", action_kind)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    clause = " AND ".join(where)
    total = con.execute(f"SELECT count(*) FROM panel WHERE {clause}", params).fetchone()[0]
    rows = fetch_dicts(con, f"SELECT step, agent_id, state, action_kind, payload AS action_payload, action_source, "
                            f"action_rationale FROM panel WHERE {clause} ORDER BY step, agent_id "
                            f"LIMIT ? OFFSET ?", params + [page_size, page * page_size])
    kinds = [r[0] for r in con.execute("SELECT DISTINCT action_kind FROM panel WHERE run_id = ? AND "
                                       "action_kind IS NOT NULL ORDER BY 1 LIMIT 50", [run_id]).fetchall()]
    return total, rows, kinds


def agent_history(con: duckdb.DuckDBPyConnection, run_id: str, agent_id: str,
                  message_limit: int = 2000) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
    """One agent in one run: its initial state (a 1-tuple, or None), its rows per step, its messages."""
    initial = con.execute("SELECT state FROM initial_states WHERE run_id = ? AND agent_id = ?",
                          [run_id, agent_id]).fetchone()
    steps = fetch_dicts(con, "SELECT step, state, action_kind, payload AS action_payload, action_source, "
                             "action_rationale FROM panel WHERE run_id = ? AND agent_id = ? ORDER BY step",
                        [run_id, agent_id])
    messages = fetch_dicts(con, "SELECT step, round, channel, kind, content, audience, reply_to FROM messages "
                                "WHERE run_id = ? AND author_id = ? ORDER BY step, round LIMIT ?",
                           [run_id, agent_id, message_limit])
    return initial, steps, messages


def step_messages(con: duckdb.DuckDBPyConnection, run_id: str, step: int,
                  per_round: int) -> tuple[dict[int, int], list[dict[str, Any]]]:
    """The messages of one step: exact counts per round, and the first ``per_round`` of each round by author."""
    counts = dict(con.execute("SELECT round, count(*) FROM messages WHERE run_id = ? AND step = ? "
                              "GROUP BY round ORDER BY round", [run_id, step]).fetchall())
    rows = fetch_dicts(con, "SELECT round, author_id, channel, kind, content, audience, reply_to FROM messages "
                            "WHERE run_id = ? AND step = ? "
                            "QUALIFY row_number() OVER (PARTITION BY round ORDER BY author_id) <= ? "
                            "ORDER BY round, author_id", [run_id, step, per_round])
    return counts, rows


def posters(con: duckdb.DuckDBPyConnection, run_id: str, ids: list[str] | None = None) -> list[tuple[int, str]]:
    """``(step, author_id)`` of every agent who posted in a step (of ``ids`` when given), by step."""
    if ids is None:
        return con.execute("SELECT DISTINCT step, author_id FROM messages WHERE run_id = ? ORDER BY step",
                           [run_id]).fetchall()
    return con.execute("SELECT DISTINCT step, author_id FROM messages WHERE run_id = $run "
                       "AND author_id IN (SELECT unnest($ids)) ORDER BY step, author_id",
                       {"run": run_id, "ids": ids}).fetchall()


# --- LLM calls -----------------------------------------------------------------------------------
PAID_CALL = "NOT cached AND model <> 'scripted' AND outcome <> 'unavailable'"
"""An ``llm_calls`` row a server was paid for: a reply not from the cache, not scripted, not left unanswered
(``docs/llm.md``, the invocations' ``calls`` counter)."""


def llm_summary(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any] | None:
    """The run's ``llm_calls`` rows: how many, the paid ones and their tokens (:data:`PAID_CALL`), cache hits,
    scripted rows, outcomes, and the final-round actions the rule decided; ``None`` without LLM calls."""
    rows, paid, tok_in, tok_out, cached, scripted = con.execute(
        f"SELECT count(*), count(*) FILTER (WHERE {PAID_CALL}), coalesce(sum(tokens_in) FILTER (WHERE {PAID_CALL}), 0), "
        f"coalesce(sum(tokens_out) FILTER (WHERE {PAID_CALL}), 0), count(*) FILTER (WHERE cached), "
        "count(*) FILTER (WHERE model = 'scripted') FROM llm_calls WHERE run_id = ?", [run_id]).fetchone()
    if not rows:
        return None
    outcomes = dict(con.execute("SELECT coalesce(outcome, 'unknown'), count(*) FROM llm_calls "
                                "WHERE run_id = ? GROUP BY 1 ORDER BY 1", [run_id]).fetchall())
    fallbacks = con.execute("SELECT count(*) FROM panel WHERE run_id = ? AND action_source = 'fallback'",
                            [run_id]).fetchone()[0]
    return {"rows": rows, "paid": paid, "tokens_in": tok_in, "tokens_out": tok_out, "cached": cached,
            "scripted": scripted, "outcomes": outcomes, "fallback_actions": fallbacks}


# --- a branch's stored actions -------------------------------------------------------------------
def recorded_round_steps(con: duckdb.DuckDBPyConnection, run_id: str, before: int) -> int:
    """How many steps before ``before`` have every round's actions stored (``record_rounds``)."""
    # fetchall, not fetchone: a result left unfinished makes the connection refuse a later register()
    # (a columnar replay's ids), on DuckDB 2
    return con.execute("SELECT count(DISTINCT step) FROM round_actions WHERE run_id = ? AND step < ?",
                       [run_id, before]).fetchall()[0][0]


def _actions_source(run_id: str, until: int, rounds: int) -> tuple[str, list]:
    """The stored actions of steps 1..until: the panel (one round) or round_actions."""
    if rounds == 1:
        return ("SELECT step, 0 AS round, agent_id, action_kind, payload, action_rationale FROM panel "
                "WHERE run_id = ? AND step <= ? AND action_kind IS NOT NULL"), [run_id, until]
    return ("SELECT step, round, agent_id, action_kind, payload, action_rationale FROM round_actions "
            "WHERE run_id = ? AND step <= ?"), [run_id, until]


def stored_actions(con: duckdb.DuckDBPyConnection, run_id: str, until: int,
                   rounds: int) -> list[tuple[int, int, str, str, Any, str | None]]:
    """``(step, round, agent_id, kind, payload, rationale)`` of every stored action of steps 1..until,
    by step, round and agent."""
    sql, params = _actions_source(run_id, until, rounds)
    return con.execute(f"{sql} ORDER BY step, round, agent_id", params).fetchall()


def stored_action_columns(con: duckdb.DuckDBPyConnection, run_id: str, until: int, rounds: int,
                          ids: list[str]) -> pa.Table:
    """The same actions as columns (step, round, pos, action_kind, p), ``pos`` each agent's position in
    ``ids``, ordered by step, round and position; ``p`` the typed payload struct."""
    sql, params = _actions_source(run_id, until, rounds)
    con.register("_replay_ids", pa.table({"agent_id": pa.array(ids, pa.string()),
                                          "pos": pa.array(np.arange(len(ids), dtype=np.int64))}))
    try:
        return con.sql(f"SELECT s.step, s.round, i.pos, s.action_kind, s.payload AS p FROM ({sql}) s "
                       "JOIN _replay_ids i USING (agent_id) ORDER BY s.step, s.round, i.pos",
                       params=params).to_arrow_table()
    finally:
        con.unregister("_replay_ids")


# --- queries to show users -----------------------------------------------------------------------
def payload_fields_by_kind(con: duckdb.DuckDBPyConnection, run_id: str, fields: list[str],
                           table: str = "panel") -> dict[str, list[str]]:
    """Which payload fields each action kind of a run fills: ``{kind: [field, ...]}`` in the fields' order.

    The panel's ``payload`` struct is the union of every kind's fields (a ``post`` has ``content``, a
    ``move`` has ``to_x``), each null in the rows of the kinds that lack it; this says which are whose.
    ``table`` is ``panel`` (final rounds) or ``round_actions`` (every round, with ``record_rounds``)."""
    if not fields:
        return {}
    if table not in ("panel", "round_actions"):
        raise ValueError(f"payload fields are in panel or round_actions, not {table!r}")
    counts = ", ".join(f"count({field('payload', f)})" for f in fields)
    rows = con.execute(f"SELECT action_kind, {counts} FROM {table} WHERE run_id = ? AND action_kind IS NOT NULL "
                       "GROUP BY action_kind ORDER BY action_kind", [run_id]).fetchall()
    return {kind: [f for f, n in zip(fields, counts) if n] for kind, *counts in rows}


def repeated_sweep_runs(con: duckdb.DuckDBPyConnection, version_id: str, seeds: list[int], n_steps: int,
                        sweep_id: str) -> list[tuple[str, int]]:
    """``[(sweep id, runs)]``: completed runs of other sweeps with the same version, seed and number of steps
    as the runs ``seeds`` of ``sweep_id`` will be (a sweep's seeds come from its values: the same runs)."""
    return con.execute("SELECT sweep_id, count(*) FROM runs WHERE version_id = ? AND n_steps = ? AND status = "
                       "'completed' AND sweep_id IS NOT NULL AND sweep_id <> ? AND seed IN (SELECT unnest(?)) "
                       "GROUP BY sweep_id ORDER BY sweep_id", [version_id, n_steps, sweep_id, seeds]).fetchall()


def example_for_run(run_id: str) -> str:
    """A first query of a run's metrics, for ``desim run`` to suggest."""
    return f"SELECT step, name, value FROM metrics WHERE run_id = '{run_id}' ORDER BY step, name"


def llm_by_run(con: duckdb.DuckDBPyConnection, unrecorded: pa.Table | None) -> dict[str, dict[str, int]]:
    """Each run's LLM decisions in short, by run id (runs with neither ``llm_calls`` rows nor kept rows left out):
    ``decisions`` (rows, ``abandoned`` ones not: they were paid in a step that never closed), paid ``calls`` and
    their tokens, ``cache_hits``, ``scripted`` and ``fallbacks`` (unusable or unanswered, decided by the rule),
    and ``unrecorded``: how many of the paid ``calls`` are in steps the run has not closed yet.

    ``unrecorded`` is what the runs keep in their ledgers (``desim.store.ledger.unrecorded_calls``): the paid
    calls of a step that never closed are in no table until a resume of the run closes that step and writes them
    as ``abandoned`` rows. Those of steps ``llm_calls`` does not hold yet are counted (those of a written step
    are in ``llm_calls`` already: a ledger is rewritten a round after its step closes). ``None``: none kept."""
    rows = con.execute(
        "SELECT run_id, count(*) FILTER (WHERE outcome <> 'abandoned'), "
        f"count(*) FILTER (WHERE {PAID_CALL}), coalesce(sum(tokens_in) FILTER (WHERE {PAID_CALL}), 0), "
        f"coalesce(sum(tokens_out) FILTER (WHERE {PAID_CALL}), 0), count(*) FILTER (WHERE cached), "
        "count(*) FILTER (WHERE model = 'scripted'), count(*) FILTER (WHERE outcome IN ('fallback', 'unavailable')) "
        "FROM llm_calls GROUP BY run_id").fetchall()
    keys = ("decisions", "calls", "tokens_in", "tokens_out", "cache_hits", "scripted", "fallbacks")
    out = {r[0]: {**dict(zip(keys, map(int, r[1:]))), "unrecorded": 0} for r in rows}
    for run_id, calls, tokens_in, tokens_out in _unrecorded_by_run(con, unrecorded):
        run = out.setdefault(run_id, {**dict.fromkeys(keys, 0), "unrecorded": 0})
        run["calls"] += int(calls)
        run["tokens_in"] += int(tokens_in)
        run["tokens_out"] += int(tokens_out)
        run["unrecorded"] = int(calls)
    return out


def _unrecorded_by_run(con: duckdb.DuckDBPyConnection, unrecorded: pa.Table | None) -> list[tuple[str, int, int, int]]:
    """``(run_id, paid calls, tokens_in, tokens_out)`` of the kept rows (:data:`PAID_CALL`) of steps that
    ``llm_calls`` does not hold for their run."""
    if unrecorded is None or not unrecorded.num_rows:
        return []
    con.register("_llm_unrecorded", unrecorded)
    try:
        return con.execute(
            "SELECT k.run_id, count(*), coalesce(sum(k.tokens_in), 0), coalesce(sum(k.tokens_out), 0) "
            f"FROM _llm_unrecorded k WHERE {PAID_CALL} AND NOT EXISTS "
            "(SELECT 1 FROM llm_calls c WHERE c.run_id = k.run_id AND c.step = k.step) "
            "GROUP BY k.run_id ORDER BY k.run_id").fetchall()
    finally:
        con.unregister("_llm_unrecorded")


def llm_spend(con: duckdb.DuckDBPyConnection, run_ids: list[str], unrecorded: pa.Table | None) -> dict[str, int] | None:
    """What an LLM server was paid for by ``run_ids``, over every invocation of each (:func:`llm_by_run` summed,
    the calls kept in the runs' ledgers included): ``{runs, calls, tokens_in, tokens_out, unrecorded,
    unrecorded_runs}`` (``unrecorded``: how many of the calls are in steps not closed yet, kept by
    ``unrecorded_runs`` runs), or None when none of the runs has ``llm_calls`` rows or kept rows."""
    by_run = llm_by_run(con, unrecorded)
    found = [by_run[r] for r in dict.fromkeys(run_ids) if r in by_run]
    if not found:
        return None
    return {"runs": len(found), **{k: sum(f[k] for f in found) for k in ("calls", "tokens_in", "tokens_out",
                                                                          "unrecorded")},
            "unrecorded_runs": sum(1 for f in found if f["unrecorded"])}


def example_for_sweep(sweep_id: str) -> str:
    """A first query of a sweep's runs, for ``desim sweep`` to suggest."""
    return f"SELECT parameters, seed, status FROM runs WHERE sweep_id = '{sweep_id}'"


def unanswered_prompts(con: duckdb.DuckDBPyConnection, run_id: str, until: int) -> frozenset[tuple[int, int, str]]:
    """``(step, round, prompt hash)`` of the run's requests left unanswered (``on_unavailable: fallback``) in
    steps 1..``until``: a resumed run re-executing those steps leaves them to the rule again, as they were,
    instead of asking (which would continue the run from another history than the stored one)."""
    rows = con.execute("SELECT step, round, prompt_hash FROM llm_calls WHERE run_id = ? AND step <= ? "
                       "AND outcome = 'unavailable'", [run_id, until]).fetchall()
    return frozenset((int(s), int(r), h) for s, r, h in rows)
