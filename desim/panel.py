"""Turning a closed step into Arrow tables for the store.

One row per agent per step: the agent's state after the final round and its
final-round action, or none. The per-agent path serialises states and
payloads to canonical JSON text here; the columnar path hands DuckDB a
struct column, which it serialises itself (``to_json``) far faster than
Python could.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .interfaces import ActionColumns
from .schemas import Action, Message

PANEL_SCHEMA = pa.schema([
    ("agent_id", pa.string()), ("state", pa.string()), ("action_kind", pa.string()),
    ("action_payload", pa.string()), ("action_source", pa.string()), ("action_rationale", pa.string()),
])

_JSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as plain Python; anything else unknown as text."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def dumps(value: Any) -> str:
    """Canonical JSON (sorted keys): a panel row's state or payload."""
    return orjson.dumps(value, default=_plain, option=_JSON_OPTIONS).decode()


def struct(columns: dict[str, np.ndarray]) -> pa.StructArray:
    return pa.StructArray.from_arrays([pa.array(v) for v in columns.values()], names=list(columns))


def agent_rows(ids: list[str], agent_state: Callable[[str], dict], actions: list[Action]) -> pa.Table:
    """The per-agent path's panel rows, in population order."""
    by_agent = {a.agent_id: a for a in actions}
    cols: dict[str, list] = {k: [] for k in PANEL_SCHEMA.names}
    for agent_id in ids:
        a = by_agent.get(agent_id)
        cols["agent_id"].append(agent_id)
        cols["state"].append(dumps(agent_state(agent_id)))
        cols["action_kind"].append(a.kind if a else None)
        cols["action_payload"].append(dumps(a.payload) if a else None)
        cols["action_source"].append(a.source if a else None)
        cols["action_rationale"].append(a.rationale if a else None)
    return pa.table(cols, schema=PANEL_SCHEMA)


def initial_rows(ids: list[str], states: pa.Array) -> pa.Table:
    return pa.table({"agent_id": pa.array(ids, pa.string()), "state": states})


def round_rows(actions: list[Action], r: int) -> pa.Table:
    """One round's actions (``record_rounds``)."""
    return pa.table({
        "round": pa.array([r] * len(actions), pa.int32()),
        "agent_id": pa.array([a.agent_id for a in actions], pa.string()),
        "action_kind": pa.array([a.kind for a in actions], pa.string()),
        "action_payload": pa.array([dumps(a.payload) for a in actions], pa.string()),
        "action_source": pa.array([a.source for a in actions], pa.string()),
        "action_rationale": pa.array([a.rationale for a in actions], pa.string())})


def _action_columns(n: int, acts: ActionColumns):
    kind = (pa.array(np.full(n, acts.kind, dtype=object), pa.string()) if isinstance(acts.kind, str)
            else pa.array(acts.kind.astype(object), pa.string()))
    payload = struct(acts.payload) if acts.payload else pa.nulls(n, pa.string())
    source = pa.array(np.full(n, acts.source, dtype=object), pa.string())
    return kind, payload, source


def columnar_round_rows(ids: list[str], acts: ActionColumns, r: int) -> pa.Table:
    """One columnar round's actions (``record_rounds``), agents that acted only."""
    idx = acts.idx
    n = len(idx)
    kind, payload, source = _action_columns(n, acts)
    mask = np.ones(n, bool) if acts.acted is None else np.asarray(acts.acted, bool)
    return pa.table({"round": pa.array(np.full(n, r, np.int32)),
                     "agent_id": pa.array(ids, pa.string()).take(pa.array(idx)), "action_kind": kind,
                     "action_payload": payload, "action_source": source,
                     "action_rationale": pa.nulls(n, pa.string())}).filter(pa.array(mask))


def columnar_rows(ids: list[str], states: dict[str, np.ndarray], acts: ActionColumns) -> pa.Table:
    """The columnar path's panel rows: states as a struct, actions scattered to population order."""
    n, idx = len(ids), acts.idx
    kind, payload, source = _action_columns(len(idx), acts)
    acted = np.zeros(n, bool)
    acted[idx] = True if acts.acted is None else np.asarray(acts.acted, bool)
    pos = np.zeros(n, np.int64)          # where each agent's action sits in the round's arrays
    pos[idx] = np.arange(len(idx))
    take, null = pa.array(pos), pa.array(~acted)

    def scatter(col: pa.Array) -> pa.Array:
        if len(col) == 0:
            return pa.nulls(n, col.type)
        return pc.if_else(null, pa.scalar(None, col.type), col.take(take))

    return pa.table({"agent_id": pa.array(ids, pa.string()), "state": struct(states),
                     "action_kind": scatter(kind), "action_payload": scatter(payload),
                     "action_source": scatter(source), "action_rationale": pa.nulls(n, pa.string())})


def message_rows(messages: list[Message]) -> pa.Table:
    """Drained messages as the ``messages`` table's columns (content as canonical JSON)."""
    return pa.table({
        "round": pa.array([m.round for m in messages], pa.int32()),
        "author_id": pa.array([m.author_id for m in messages], pa.string()),
        "channel": pa.array([m.channel for m in messages], pa.string()),
        "kind": pa.array([m.kind for m in messages], pa.string()),
        "content": pa.array([dumps(m.content) for m in messages], pa.string()),
        "audience": pa.array([m.audience for m in messages], pa.string()),
        "reply_to": pa.array([m.reply_to for m in messages], pa.string())})
