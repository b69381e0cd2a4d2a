"""Named reads of a run's network and of one state field as arrays, for the network pictures.

Every agent is named by its *position*: its rank in the run's agent ids sorted as the store sorts
them (``ORDER BY agent_id``), the order :func:`network` returns the ids in. The edges, the frames of
a state field, who posted and who infected whom all come back as numpy arrays of positions, so a
100,000-agent run is read without a Python tuple per row.

Each function takes an open connection (``with open_store(layout) as con:``); values reach SQL only
as bound parameters and state field names only through :func:`~desim.store.connection.field`.
"""
from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from desim.store.connection import field
from desim.store.states import has_field

# every agent of run $run and its position (0-based, in agent id order)
_IDS = ("SELECT agent_id, (row_number() OVER (ORDER BY agent_id) - 1)::BIGINT AS pos "
        "FROM initial_states WHERE run_id = $run")


def _ints(column) -> np.ndarray:
    arr = np.asarray(column)
    return arr.astype(np.int64) if arr.size else np.zeros(0, np.int64)


def network(con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[list[str], np.ndarray]:
    """The run's agents (by id) and its stored edges as positions into them: an int64 array (m, 2), as
    stored (one row per edge row of the ``edges`` table; duplicates and direction are the caller's)."""
    ids = con.sql("SELECT agent_id FROM initial_states WHERE run_id = $run ORDER BY agent_id",
                  params={"run": run_id}).to_arrow_table().column(0).to_pylist()
    got = con.execute(f"WITH ids AS ({_IDS}) SELECT a.pos AS u, b.pos AS v FROM edges e "
                      "JOIN ids a ON a.agent_id = e.source JOIN ids b ON b.agent_id = e.target "
                      "WHERE e.run_id = $run ORDER BY u, v", {"run": run_id}).fetchnumpy()
    edges = np.column_stack([_ints(got["u"]), _ints(got["v"])]) if len(got["u"]) else np.zeros((0, 2), np.int64)
    return ids, edges


def field_frames(con: duckdb.DuckDBPyConnection, run_id: str, name: str, *,
                 numeric: bool) -> dict[str, Any] | None:
    """One state field of every agent at every step (the initial states as step 0), as arrays.

    ``{"steps": [...], "step": int64 (rows,), "pos": int64 (rows,), ...}`` with, when ``numeric``,
    ``"value"``: float64 (NaN for no value), else ``"code"``: int64 codes into ``"labels"`` (the
    distinct values as text, in order of first appearance; -1 for no value). ``None`` when no stored
    state has the field.
    """
    if not has_field(con, name):
        return None
    v = field("state", name)
    value = f"TRY_CAST({v} AS DOUBLE)" if numeric else f"CAST({v} AS VARCHAR)"
    table = con.sql(f"WITH ids AS ({_IDS}) SELECT s.step, i.pos, {value} AS v FROM states s "
                    "JOIN ids i USING (agent_id) WHERE s.run_id = $run",
                    params={"run": run_id}).to_arrow_table()
    step = _ints(table.column("step").to_numpy())
    out: dict[str, Any] = {"steps": sorted(set(np.unique(step).tolist())), "step": step,
                           "pos": _ints(table.column("pos").to_numpy())}
    col = table.column("v")
    if numeric:
        out["value"] = np.asarray(pc.fill_null(col.cast(pa.float64()), float("nan")).to_numpy(), dtype=float) \
            if len(col) else np.zeros(0)
        return out
    encoded = pc.dictionary_encode(col.combine_chunks()) if len(col) else pa.array([], pa.dictionary(pa.int32(), pa.string()))
    out["labels"] = encoded.dictionary.to_pylist()
    out["code"] = np.asarray(pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False), dtype=np.int64) \
        if len(col) else np.zeros(0, np.int64)
    return out


def message_count(con: duckdb.DuckDBPyConnection, run_id: str) -> int:
    """How many messages the run stored."""
    return con.execute("SELECT count(*) FROM messages WHERE run_id = $run", {"run": run_id}).fetchone()[0]


def posters(con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[np.ndarray, np.ndarray]:
    """``(step, pos)`` arrays: every agent who posted a message in a step, by step and position."""
    got = con.execute(f"WITH ids AS ({_IDS}) SELECT DISTINCT m.step, i.pos FROM messages m "
                      "JOIN ids i ON i.agent_id = m.author_id WHERE m.run_id = $run ORDER BY m.step, i.pos",
                      {"run": run_id}).fetchnumpy()
    return _ints(got["step"]), _ints(got["pos"])


def first_transmissions(con: duckdb.DuckDBPyConnection, run_id: str, name: str = "infected_by") \
        -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Who passed the state to whom, from the state field ``name`` (the infector's agent id):
    ``(pos, step, by)`` arrays, one row per agent that ever had a value, with the first step it had
    one and the position of that value's agent (-1 when it names no agent of the run). ``None``
    when no stored state has the field."""
    if not has_field(con, name):
        return None
    v = field("state", name)
    got = con.execute(
        f"WITH ids AS ({_IDS}), firsts AS (SELECT agent_id, min(step) AS step, "
        f"arg_min(CAST({v} AS VARCHAR), step) AS by FROM states WHERE run_id = $run AND {v} IS NOT NULL "
        "GROUP BY agent_id) "
        "SELECT a.pos, f.step, coalesce(b.pos, -1) AS by FROM firsts f JOIN ids a USING (agent_id) "
        "LEFT JOIN ids b ON b.agent_id = f.by ORDER BY a.pos", {"run": run_id}).fetchnumpy()
    return _ints(got["pos"]), _ints(got["step"]), _ints(got["by"])
