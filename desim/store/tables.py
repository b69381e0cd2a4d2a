"""Turning a closed step into typed Arrow tables for the store.

One row per agent per step: the agent's state after the final round, its
final-round action or none, and whether it was away (on an errand) in the
final round. ``state`` and ``payload`` are struct columns whose fields keep
their own types (see ``desim.fields``); both paths, per-agent dicts and
columnar arrays, build the same tables for the same study.

Every table carries its ``step`` (a constant column costs almost nothing in
Parquet); ``run_id`` comes from the folder the files live in.
"""
from __future__ import annotations

import numbers
from operator import attrgetter, itemgetter
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from desim.jsontext import dumps, json_array
from desim.records import ActionColumns, Message
from desim.store.fields import FieldError, Fields


class PanelTypes:
    """A run's state and payload fields with their types; saved with the run."""

    def __init__(self, allow_nonfinite: Iterable[str] = (), saved: dict[str, Any] | None = None):
        saved = saved or {}
        self.state = Fields("state", fixed=True, allow_nonfinite=allow_nonfinite, types=saved.get("state"))
        self.payload = Fields("payload", fixed=False, allow_nonfinite=allow_nonfinite,
                              types=saved.get("payload"))
        # round_actions keep their own payload fields, so that the panel's do not depend on record_rounds
        self.round_payload = Fields("payload", fixed=False, allow_nonfinite=allow_nonfinite,
                                    types=saved.get("round_payload"))

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state.to_json(), "payload": self.payload.to_json(),
                "round_payload": self.round_payload.to_json()}

    def unknown_nonfinite(self) -> list[str]:
        """The names ``panel.allow_nonfinite`` lists that no state or payload field of the run has (a
        misspelling leaves the field it meant refusing NaN; said when the run ends, once every field is known)."""
        known = set(self.state.types) | set(self.payload.types) | set(self.round_payload.types)
        return sorted(set(self.state.allow_nonfinite) - known)


def _steps(step: int, n: int) -> pa.Array:
    return pa.array(np.full(n, step, np.int32))


def _texts(values: list) -> pa.Array:
    return pa.array(values, pa.string())


def _rationales(values: list) -> pa.Array:
    """The actions' rationales, null where none was given: an ``Action``'s rationale defaults to ``""`` and the
    columnar path has none, and one panel must say "no rationale" one way on both paths."""
    column = pa.array(values, pa.string())
    empty = pc.equal(column, "")
    return pc.if_else(empty, pa.scalar(None, pa.string()), column) if pc.any(empty).as_py() else column


def _labels(values) -> pa.Array:
    """A text column that is mostly one value (an action kind, a source, a channel): when it is
    exactly one, repeated in C rather than converted string by string."""
    if _one_value(values):
        first = values[0]
        if first is None:
            return pa.nulls(len(values), pa.string())
        if type(first) is str:
            return pa.repeat(pa.scalar(first, pa.string()), len(values))
    return pa.array(values, pa.string())


def _one_value(values) -> bool:
    """Every entry of a list (or tuple) equal to the first: ``count`` compares in C, identity first,
    a tenth of the time of a set of them."""
    try:
        return bool(values) and values.count(values[0]) == len(values)
    except (AttributeError, TypeError, ValueError):     # not a list, or entries == cannot compare:
        return False                                    # Arrow's conversion says what is wrong


def _dicts(states: list, agents: list[str], step: int) -> None:
    for s, a in zip(states, agents):
        if not isinstance(s, dict):
            raise FieldError(f"step {step}: agent '{a}': agent_state returned {type(s).__name__}, not a dict")


# --- initial states ------------------------------------------------------------------
def initial_rows(types: PanelTypes, ids: pa.Array, agents: list[str], states: list[dict]) -> pa.Table:
    """The per-agent path's agents before step 1; fixes the run's state fields."""
    if not types.state.names:
        _dicts(states, agents, 0)
        types.state.start(states[0] if states else {}, 0, agents[0] if agents else None)
    return pa.table({"agent_id": ids, "state": types.state.struct(states, agents, 0)})


def columnar_initial_rows(types: PanelTypes, ids: pa.Array, columns: dict[str, np.ndarray]) -> pa.Table:
    if not types.state.names:
        types.state.start(columns)
    return pa.table({"agent_id": ids, "state": types.state.struct_columns(columns, ids, 0)})


# --- the panel -------------------------------------------------------------------------
def agent_rows(types: PanelTypes, step: int, ids: pa.Array, agents: list[str], states: list[dict] | dict,
               actions: list, away: np.ndarray | None) -> pa.Table:
    """The per-agent path's panel rows, in population order; ``states`` one dict per agent (what
    ``agent_state`` returned) or every agent's state as columns (``state_columns``)."""
    n = len(agents)
    if isinstance(states, dict):
        state = types.state.struct_columns(states, ids, step)
    else:
        state = _state_struct(types.state, states, agents, step)
    if len(actions) == n and list(map(_agent_id, actions)) == agents:
        acts = actions                      # everyone acted, in population order: the common case
        kinds, payloads = list(map(_kind, acts)), list(map(_payload, acts))
        sources, rationales = list(map(_source, acts)), list(map(_rationale, acts))
    else:
        by_agent = {a.agent_id: a for a in actions}
        acts = [by_agent.get(a) for a in agents]
        kinds = [a.kind if a else None for a in acts]
        payloads = [a.payload if a else None for a in acts]
        sources = [a.source if a else None for a in acts]
        rationales = [a.rationale if a else None for a in acts]
    return pa.table({
        "step": _steps(step, n), "agent_id": ids, "state": state,
        "action_kind": _labels(kinds), "payload": types.payload.struct(payloads, agents, step),
        "action_source": _labels(sources), "action_rationale": _rationales(rationales),
        "away": _away(away, n)})


def _state_struct(fields: Fields, states: list, agents: list[str], step: int) -> pa.StructArray:
    """``agent_state``'s dicts as the state column. In the usual step every state is a dict of exactly
    the run's fields: each field's values are then taken in one C pass over the list (a pass per field
    beats a tuple per agent taken apart again), with no Python per agent, and typed as a
    ``state_columns`` column would be. Any other step goes the long way, which names the agent at fault."""
    names = fields.names
    if names and set(map(type, states)) == _DICT and set(map(len, states)) == {len(names)}:
        try:
            columns = [list(map(itemgetter(name), states)) for name in names]
        except KeyError:            # a dict of the right size with another field: the long way says which
            columns = None
        if columns is not None:
            return pa.StructArray.from_arrays([fields.column(name, values, agents, step)
                                               for name, values in zip(names, columns)], names=list(names))
    _dicts(states, agents, step)
    return fields.struct(states, agents, step)


_DICT = {dict}
_agent_id, _kind, _payload, _source, _rationale = (attrgetter(name) for name in
                                                   ("agent_id", "kind", "payload", "source", "rationale"))


def _away(away: np.ndarray | None, n: int) -> pa.Array:
    return pa.array(np.zeros(n, bool) if away is None else away)


def _in_round(step: int, r: int) -> str:
    """Where a round's value is, as its errors print it ("step 3 round 1"): a payload refused in round 1
    of 3 is found faster when the error says which."""
    return f"{step} round {r}"


def round_rows(types: PanelTypes, step: int, actions: list, r: int) -> pa.Table:
    """One round's actions (``record_rounds``)."""
    n = len(actions)
    agents = [a.agent_id for a in actions]
    return pa.table({
        "step": _steps(step, n), "round": pa.array(np.full(n, r, np.int32)),
        "agent_id": _texts(agents), "action_kind": _texts([a.kind for a in actions]),
        "payload": types.round_payload.struct([a.payload for a in actions], agents, _in_round(step, r)),
        "action_source": _texts([a.source for a in actions]),
        "action_rationale": _rationales([a.rationale for a in actions])})


def _acted(acts: ActionColumns) -> tuple[np.ndarray, np.ndarray | None]:
    """The participants' positions, and which entries of the round's arrays acted (None: all of them)."""
    idx = np.asarray(acts.idx)
    if acts.acted is None:
        return idx, None
    acted = np.asarray(acts.acted, bool)
    return idx, (None if acted.all() else np.flatnonzero(acted))


def _action_columns(payload_fields: Fields, step: int | str, ids: pa.Array, acts: ActionColumns,
                    sel: np.ndarray | None):
    """The actions of the entries ``sel`` of the round's arrays (all when None): the agents that acted,
    in the round's order. Only they are converted, so a round where few agents act costs little."""
    idx = np.asarray(acts.idx)
    if sel is not None:
        idx = idx[sel]
    n = len(idx)
    if isinstance(acts.kind, str):
        kind = pa.repeat(pa.scalar(acts.kind, pa.string()), n)
    else:
        kinds = np.asarray(acts.kind, dtype=object)
        kinds = kinds if sel is None else kinds[sel]
        try:
            kind = pa.array(kinds, pa.string())
        except (pa.ArrowException, TypeError, ValueError):      # Arrow's C pass found a kind that is not text
            bad = next((i for i, k in enumerate(kinds.tolist()) if not (k is None or isinstance(k, str))), None)
            if bad is None:
                raise
            raise FieldError(f"step {step}: agent '{ids[int(idx[bad])].as_py()}': action kind "
                             f"{kinds[bad]!r:.60} ({type(kinds[bad]).__name__}) is not text; ActionColumns' kind is "
                             "one string for everyone or one string per participant") from None
    source = pa.repeat(pa.scalar(acts.source, pa.string()), n)
    # everyone, in population order (the common round): the ids as they are, no gather
    everyone = n == len(ids) and (n == 0 or (idx[0] == 0 and idx[-1] == n - 1 and np.array_equal(idx, np.arange(n))))
    actor_ids = ids if everyone else ids.take(pa.array(idx))
    payload = {k: (v if sel is None else _select(v, sel)) for k, v in (acts.payload or {}).items()}
    return idx, actor_ids, kind, payload_fields.struct_columns(payload, actor_ids, step), source


def _select(values, sel: np.ndarray):
    """The entries ``sel`` of a payload column, kept in its own form (a list stays a list of the values
    themselves, to be read by the one value rule like any other list)."""
    if isinstance(values, np.ndarray):
        return values[sel]
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.take(pa.array(sel))
    return [values[i] for i in sel.tolist()]


def columnar_round_rows(types: PanelTypes, step: int, ids: pa.Array, acts: ActionColumns, r: int) -> pa.Table:
    """One columnar round's actions (``record_rounds``), agents that acted only."""
    _, sel = _acted(acts)
    idx, actor_ids, kind, payload, source = _action_columns(types.round_payload, _in_round(step, r), ids,
                                                            acts, sel)
    n = len(idx)
    return pa.table({"step": _steps(step, n), "round": pa.array(np.full(n, r, np.int32)),
                     "agent_id": actor_ids, "action_kind": kind, "payload": payload,
                     "action_source": source, "action_rationale": pa.nulls(n, pa.string())})


def columnar_rows(types: PanelTypes, step: int, ids: pa.Array, states: dict[str, np.ndarray],
                  acts: ActionColumns, away: np.ndarray | None) -> pa.Table:
    """The columnar path's panel rows: states as a struct, the acting agents' actions placed in
    population order (null for the others)."""
    n = len(ids)
    state = types.state.struct_columns(states, ids, step)
    _, sel = _acted(acts)
    idx, _, kind, payload, source = _action_columns(types.payload, step, ids, acts, sel)
    if len(idx) == n and np.array_equal(idx, np.arange(n)):
        place = None                            # everyone acted, in order: nothing to move
    else:
        pos = np.full(n, -1, np.int64)          # where each agent's action sits among the acting ones
        pos[idx] = np.arange(len(idx))
        place = pa.array(pos, mask=pos < 0)

    def placed(col: pa.Array) -> pa.Array:
        if place is None:
            return col
        if len(col) == 0:
            return pa.nulls(n, col.type)
        return col.take(place)

    return pa.table({"step": _steps(step, n), "agent_id": ids, "state": state,
                     "action_kind": placed(kind), "payload": placed(payload),
                     "action_source": placed(source), "action_rationale": pa.nulls(n, pa.string()),
                     "away": _away(away, n)})


# --- messages, events, metrics ----------------------------------------------------------


def message_rows(messages, step: int) -> pa.Table:
    """Drained messages as the ``messages`` table's columns (content as canonical JSON),
    each with the step it was posted in (``step`` for a message with none).

    ``messages`` is a list of ``Message`` (a named tuple: the columns are one transposition
    of the list) or already columns, a dict of lists by field (``InMemoryMessageBus.drain_columns``)."""
    if isinstance(messages, dict):
        author, steps, rounds, content = (messages[k] for k in ("author_id", "step", "round", "content"))
        channel, kind, audience, reply_to = (messages[k] for k in ("channel", "kind", "audience", "reply_to"))
    else:
        rows = messages
        if set(map(type, rows)) - {Message}:      # a study's own message objects: read by attribute
            rows = [(m.author_id, m.step, m.round, m.content, m.channel, m.kind, m.audience, m.reply_to)
                    for m in messages]
        author, steps, rounds, content, channel, kind, audience, reply_to = zip(*rows) if rows else [()] * 8
    if not author:
        return pa.table({name: pa.array([], kind) for name, kind in _MESSAGE_TYPES.items()})
    if None in steps:
        steps = [step if s is None else s for s in steps]
    try:
        texts = json_array(content)
    except TypeError:               # name the first message JSON cannot hold
        for who, s, r, c in zip(author, steps, rounds, content):
            try:
                dumps(c)
            except TypeError as e:
                raise FieldError(f"step {s} round {r}: agent '{who}': message content "
                                 f"{c!r:.60} is not JSON ({e})") from None
        raise
    try:
        return pa.table({
            "step": pa.array(steps, pa.int32()), "round": pa.array(rounds, pa.int32()),
            "author_id": _texts(author), "channel": _labels(channel), "kind": _labels(kind),
            "content": texts, "audience": _labels(audience), "reply_to": _labels(reply_to)})
    except (pa.ArrowException, TypeError, ValueError, OverflowError):     # name the first message at fault
        _refuse_message(author, steps, rounds, content, channel, kind, audience, reply_to)
        raise


def _refuse_message(author, steps, rounds, content, channel, kind, audience, reply_to) -> None:
    """Raise the :class:`FieldError` naming the first drained message Arrow could not store (one a bus of
    the study's own made, or ``drain_columns`` columns of different lengths); return when none is found
    (the caller then raises Arrow's own error)."""
    columns = {"author_id": author, "step": steps, "round": rounds, "content": content, "channel": channel,
               "kind": kind, "audience": audience, "reply_to": reply_to}
    lengths = {name: len(values) for name, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise FieldError("drained messages: columns of different lengths ("
                         f"{', '.join(f'{k} {v}' for k, v in lengths.items())}); every column has one entry per "
                         "message")
    for who, s, r, *texts in zip(author, steps, rounds, channel, kind, audience, reply_to):
        place = f"step {s} round {r}: message by {who!r:.60}"
        for name, number in (("step", s), ("round", r)):
            if number is not None and (isinstance(number, bool) or not isinstance(number, numbers.Integral)):
                raise FieldError(f"{place}: {name} {number!r:.60} ({type(number).__name__}) is not a whole number")
        for name, value in zip(("author_id", "channel", "kind", "audience", "reply_to"), (who, *texts)):
            if not (value is None or isinstance(value, str)):
                raise FieldError(f"{place}: {name} {value!r:.60} ({type(value).__name__}) is not text")


_MESSAGE_TYPES = {"step": pa.int32(), "round": pa.int32(), "author_id": pa.string(), "channel": pa.string(),
                  "kind": pa.string(), "content": pa.json_(), "audience": pa.string(), "reply_to": pa.string()}


def message_table(table: pa.Table, step: int) -> pa.Table:
    """A study's own Arrow table of messages, given a step column when it has none."""
    if "step" not in table.column_names:
        table = table.add_column(0, "step", _steps(step, table.num_rows))
    if "content" in table.column_names and not isinstance(table.schema.field("content").type, pa.JsonType):
        content = table.column("content")
        if pa.types.is_string(content.type) or pa.types.is_large_string(content.type):
            table = table.set_column(table.column_names.index("content"), "content", content.cast(pa.json_()))
        else:   # a slice at a time: a step's million structs are never a million Python dicts at once
            texts = [json_array(content.slice(i, _JSON_SLICE).to_pylist(), none_is_null=True)
                     for i in range(0, len(content), _JSON_SLICE)] or [pa.array([], pa.json_())]
            table = table.set_column(table.column_names.index("content"), "content",
                                     pa.chunked_array(texts, pa.json_()))
    return table


_JSON_SLICE = 65_536


def metric_rows(step: int, metrics: dict[str, float]) -> pa.Table:
    return pa.table({"step": _steps(step, len(metrics)), "name": _texts(list(metrics)),
                     "value": pa.array(list(metrics.values()), pa.float64())})


def event_rows(step: int, events: list[dict]) -> pa.Table:
    return pa.table({"step": _steps(step, len(events)), "kind": _texts([e["kind"] for e in events]),
                     "name": _texts([e["name"] for e in events]),
                     "detail": json_array([e.get("detail") for e in events])})


def edge_rows(network) -> pa.Table:
    """The run's network (``desim.study.network.Network``): one row per edge, its ends and its numeric
    attributes (null where an edge has none)."""
    ids = pa.array(network.ids, pa.string())
    source, target, attributes = network.edges()
    if len(source):
        columns = {"source": ids.take(pa.array(source)), "target": ids.take(pa.array(target))}
    else:                           # no graph (a grid, a room): no gather, nor Arrow's compute module for one
        columns = {"source": pa.array([], pa.string()), "target": pa.array([], pa.string())}
    for name, values in attributes.items():
        columns[name] = pa.array(values, pa.float64(), from_pandas=True)
    return pa.table(columns)
