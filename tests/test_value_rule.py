"""One rule for stored values (``desim.store.fields.stored_kind``), on every way into the store.

The property: a value gives the same stored value, or the same error naming agent, step and field,
whether it comes from ``agent_state`` (a dict per agent), ``state_columns`` (a list or a numpy array
per field), an initial state, a per-agent action's payload or an ``ActionColumns`` payload (every
agent acting, or some idle). It is checked over a catalogue of value types, each one alone and each
pair of them (the first value fixing the field's type, the second following it in the same column
and at the next step), then end to end through real runs of both paths into DuckDB.
"""
from __future__ import annotations

import datetime
import decimal
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import desim
from desim import RunFailed
from desim.errors import FieldError
from desim.records import Action, ActionColumns
from desim.store.fields import Unstorable, stored_kind
from desim.store.tables import PanelTypes, agent_rows, columnar_initial_rows, columnar_rows, initial_rows
from storeq import query, store_path


class Thing:
    def __repr__(self):
        return "Thing()"


# name -> value, expected: (Arrow type, stored Python value) or ("error", what the message says)
CATALOGUE = {
    "int": (3, ("int64", 3)),
    "int64 min": (-2**63, ("int64", -2**63)),
    "float": (0.5, ("double", 0.5)),
    "nan": (math.nan, ("error", "state.f is nan; NaN and infinity are refused")),
    "inf": (math.inf, ("error", "state.f is inf; NaN and infinity are refused")),
    "-inf": (-math.inf, ("error", "state.f is -inf; NaN and infinity are refused")),
    "2**63": (2**63, ("error", "(int) has no faithful stored form: an integer beyond 64 bits")),
    "huge int": (2**70, ("error", "state.f = 1180591620717411303424 (int) has no faithful stored form: an integer beyond 64 bits")),
    "bool": (True, ("bool", True)),
    "str": ("x", ("string", "x")),
    "empty str": ("", ("string", "")),
    "bytes": (b"raw", ("error", "state.f = b'raw' (bytes) has no faithful stored form: bytes are not text")),
    "bytearray": (bytearray(b"raw"), ("error", "(bytearray) has no faithful stored form: bytes are not text")),
    "None": (None, ("null", None)),
    "list": ([1, 2.5], ("extension<arrow.json>", "[1,2.5]")),
    "empty list": ([], ("extension<arrow.json>", "[]")),
    "tuple": ((1, "a"), ("extension<arrow.json>", '[1,"a"]')),
    "dict": ({"b": [True], "a": 1}, ("extension<arrow.json>", '{"a":1,"b":[true]}')),
    "dict, int key": ({1: "a"}, ("error", "has no faithful stored form: dict key 1 is not text")),
    "list with nan": ([1.0, math.nan], ("error", "has no faithful stored form: NaN or infinity inside a list or dict")),
    "list with set": ([{1}], ("error", "has no faithful stored form: inside a list or dict: a set has no order")),
    "set": ({1, 2}, ("error", "state.f = {1, 2} (set) has no faithful stored form: a set has no order")),
    "frozenset": (frozenset({1}), ("error", "(frozenset) has no faithful stored form: a set has no order")),
    "complex": (1j, ("error", "state.f = 1j (complex) has no faithful stored form: a complex number")),
    "decimal": (decimal.Decimal("1.5"), ("error", "(Decimal) has no faithful stored form: an object of type Decimal")),
    "object": (Thing(), ("error", "state.f = Thing() (Thing) has no faithful stored form: an object of type Thing")),
    "datetime": (datetime.datetime(2020, 1, 2, 3, 4), ("error", "(datetime) has no faithful stored form: dates and times are not stored")),
    "date": (datetime.date(2020, 1, 2), ("error", "(date) has no faithful stored form: dates and times are not stored")),
    "timedelta": (datetime.timedelta(days=1), ("error", "(timedelta) has no faithful stored form: dates and times")),
    "datetime64": (np.datetime64("2020-01-02"), ("error", "(datetime64) has no faithful stored form: dates and times")),
    "np.int32": (np.int32(4), ("int64", 4)),
    "np.uint64 big": (np.uint64(2**63 + 1), ("error", "(uint64) has no faithful stored form: an integer beyond 64 bits")),
    "np.float32": (np.float32(0.25), ("double", 0.25)),
    "np.float64 nan": (np.float64("nan"), ("error", "state.f is nan; NaN and infinity are refused")),
    "np.bool_": (np.bool_(False), ("bool", False)),
    "np.str_": (np.str_("y"), ("string", "y")),
    "array float": (np.array([1.0, 2.0]), ("extension<arrow.json>", "[1.0,2.0]")),
    "array int": (np.array([1, 2], np.int16), ("extension<arrow.json>", "[1,2]")),
    "array bool": (np.array([True, False]), ("extension<arrow.json>", "[true,false]")),
    "array text": (np.array(["a", "b"]), ("extension<arrow.json>", '["a","b"]')),
    "array 2-D": (np.array([[1, 2], [3, 4]]), ("extension<arrow.json>", "[[1,2],[3,4]]")),
    "array 0-D": (np.array(2.5), ("double", 2.5)),
    "array with nan": (np.array([1.0, np.nan]), ("error", "NaN or infinity inside an array")),
    "array complex": (np.array([1j]), ("error", "a numpy array of complex128")),
    "array datetime64": (np.array(["2020-01-02"], "datetime64[D]"), ("error", "a numpy array of datetime64[D]")),
    "array in a dict": ({"a": np.array([1, 2])}, ("extension<arrow.json>", '{"a":[1,2]}')),
    "numpy scalar in a list": ([np.float64(1.5), np.int8(2)], ("extension<arrow.json>", "[1.5,2]")),
}
AGENTS = ["a0", "a1"]
IDS = pa.array(AGENTS)


def outcome(build):
    """What the store makes of it: ``("ok", type, values)`` per table, or ``("error", message)``
    with the record kind (state/payload) written as ``FIELD``."""
    try:
        tables = build()
    except FieldError as e:
        return ("error", str(e).replace("state.", "FIELD.").replace("payload.", "FIELD."))
    out = []
    for table, column in tables:
        col = table.column(column).combine_chunks().field("f")
        out.append((str(col.type), col.to_pylist()))
    return ("ok", out)


def _state_types():
    types = PanelTypes()
    return types


# --- the ways into the store: each takes the per-agent values of step 0 and of step 1 -----------------
def by_agent_state(first, then):
    def build():
        types = PanelTypes()
        t0 = initial_rows(types, IDS, AGENTS, [{"f": v} for v in first])
        t1 = agent_rows(types, 1, IDS, AGENTS, [{"f": v} for v in then], [], None)
        return [(t0, "state"), (t1, "state")]
    return outcome(build)


def by_state_columns(first, then, form=list):
    def build():
        types = PanelTypes()
        t0 = columnar_initial_rows(types, IDS, {"f": form(first)})
        t1 = agent_rows(types, 1, IDS, AGENTS, {"f": form(then)}, [], None)
        return [(t0, "state"), (t1, "state")]
    return outcome(build)


def by_columnar_state(first, then, form=list):
    """The columnar path's panel (``state_columns`` of a columnar study)."""
    def build():
        types = PanelTypes()
        t0 = columnar_initial_rows(types, IDS, {"f": form(first)})
        acts = ActionColumns(kind="k", idx=np.arange(len(AGENTS)), payload={})
        t1 = columnar_rows(types, 1, IDS, {"f": form(then)}, acts, None)
        return [(t0, "state"), (t1, "state")]
    return outcome(build)


def _no_state(types):
    types.state.start([])


def by_payload(first, then):
    def build():
        types = PanelTypes()
        _no_state(types)
        out = []
        for step, values in enumerate((first, then)):
            acts = [Action(agent_id=a, step=step, kind="k", payload={"f": v}) for a, v in zip(AGENTS, values)]
            out.append((agent_rows(types, step, IDS, AGENTS, [{}, {}], acts, None), "payload"))
        return out
    return outcome(build)


def by_payload_columns(first, then, form=list, idle=False):
    """``ActionColumns`` payloads; with ``idle`` a third agent takes part but does not act (its entry,
    a placeholder, is never read)."""
    def build():
        types = PanelTypes()
        _no_state(types)
        ids = pa.array(AGENTS + ["a2"]) if idle else IDS
        out = []
        for step, values in enumerate((first, then)):
            column = form(list(values) + [values[0]]) if idle else form(values)
            acts = ActionColumns(kind="k", idx=np.arange(len(ids)),
                                 acted=np.array([True, True, False]) if idle else None, payload={"f": column})
            table = columnar_rows(types, step, ids, {}, acts, None)
            out.append((table.slice(0, len(AGENTS)), "payload"))
        return out
    return outcome(build)


PYTHON_WAYS = {
    "agent_state": by_agent_state,
    "state_columns (list)": by_state_columns,
    "columnar state (list)": by_columnar_state,
    "payload": by_payload,
    "ActionColumns payload (list)": by_payload_columns,
    "ActionColumns payload (list), an idle agent": lambda f, t: by_payload_columns(f, t, idle=True),
}


def as_array(values):
    """``values`` as the numpy array a study would build from them, or None when numpy refuses."""
    try:
        with np.errstate(all="ignore"):
            arr = np.array(values)
    except (ValueError, TypeError, OverflowError):
        return None
    return arr if arr.shape[:1] == (len(values),) else None


def ways_agree(first, then):
    """Every way into the store gives one outcome for the same values; returns it."""
    got = {name: way(first, then) for name, way in PYTHON_WAYS.items()}
    reference = got["agent_state"]
    assert all(o == reference for o in got.values()), json.dumps(
        {k: repr(v) for k, v in got.items()}, indent=1)
    # a numpy column: the same as the per-agent path given that column's own elements
    a0, a1 = as_array(first), as_array(then)
    if a0 is not None and a1 is not None:
        elements = by_agent_state(list(a0), list(a1))
        for name, way in (("state_columns (array)", lambda: by_state_columns(a0, a1, form=lambda v: v)),
                          ("columnar state (array)", lambda: by_columnar_state(a0, a1, form=lambda v: v)),
                          ("ActionColumns payload (array)", lambda: by_payload_columns(a0, a1, form=lambda v: v)),
                          ("ActionColumns payload (array), an idle agent",
                           lambda: by_payload_columns(list(a0), list(a1), form=np.array, idle=True))):
            if name.endswith("idle agent") and as_array(list(a0) + [a0[0]]) is None:
                continue
            assert way() == elements, f"{name}: {way()!r} != agent_state of its elements {elements!r}"
    return reference


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_each_value_is_stored_or_refused_the_same_way_everywhere(name):
    value, (kind, expected) = CATALOGUE[name]
    got = ways_agree([value, value], [value, value])
    if kind == "error":
        assert got[0] == "error", got
        message = got[1]
        assert message.startswith("step 0: agent 'a0': FIELD.f"), message
        assert expected.replace("state.", "FIELD.") in message, message
    else:
        assert got == ("ok", [(kind, [expected] * 2)] * 2), got
    # the rule itself says the same
    if kind == "error" and "NaN and infinity" not in expected:
        with pytest.raises(Unstorable):
            stored_kind(value)
    elif kind != "error":
        assert stored_kind(value) == {"int64": "int", "double": "float", "bool": "bool", "string": "str",
                                      "null": "null"}.get(kind, "json")


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_any_two_values_in_one_field_give_one_outcome_on_every_path(name):
    """The first value fixes the field's type; the second follows it in the same column (another agent)
    and at the next step."""
    first = CATALOGUE[name][0]
    for other, (second, _) in CATALOGUE.items():
        got = ways_agree([first, second], [second, first])
        assert got[0] in ("ok", "error"), (name, other, got)


def test_a_boolean_is_not_a_number_whatever_the_order():
    for values in ([0.5, True], [True, 0.5], [1.0, False], [1, True]):
        got = ways_agree(values, values)
        assert got[0] == "error" and "but this run stores FIELD.f as" in got[1], (values, got)
    assert ways_agree([1, 0.5], [0.5, 1]) == ("ok", [("double", [1.0, 0.5]), ("double", [0.5, 1.0])])


def test_mixed_lists_are_not_converted_by_numpy_on_the_columns_path():
    """``np.asarray`` would make text of numbers and numbers of booleans; a list is read value by value."""
    for values, culprit in ((["x", b"raw"], "b'raw' (bytes)"), (["a", 1], "= 1 is int"), ([True, 2], "= 2 is int")):
        got = by_state_columns(values, values)
        assert got[0] == "error" and culprit in got[1], got
        assert got == by_agent_state(values, values)


# --- end to end: real runs of both paths, read back from DuckDB -------------------------------------------
MODEL = '''
import numpy as np
from desim import Action, DecisionModel, EnvironmentProvider, MetricCollector, Observation

SHAPE = {shape!r}
BAD_STEP = {bad_step}


class Science(EnvironmentProvider):
    """What a scientist returns: numpy scalars and 1-D arrays, from numpy state."""

    def reset(self, seed):
        n = len(self.ctx.agent_ids)
        self.x = np.linspace(0.0, 1.0, n)
        self.count = np.arange(n, dtype=np.int32)
        self.hist = np.zeros((n, 3))

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t) for a in ids]

    def apply(self, actions):
        for a in actions:
            i = self.ctx.index[a.agent_id]
            self.x[i] = self.x[i] * 0.5 + a.payload["dx"]
            self.count[i] += 1
            self.hist[i] = np.roll(self.hist[i], 1)
            self.hist[i][0] = self.x[i]

    def _when(self, value, i):
        if BAD_STEP and self.ctx.step == BAD_STEP and i == 1:
            import datetime
            return datetime.datetime(2024, 5, 1)
        return value

    def agent_state(self, agent_id):
        i = self.ctx.index[agent_id]
        return {{"x": self.x[i], "count": self.count[i], "up": self.x[i] > 0.5, "hist": self.hist[i].copy(),
                 "when": self._when(None, i)}}

    def state_columns(self):
        n = len(self.ctx.agent_ids)
        when = [self._when(None, i) for i in range(n)]
        return {{"x": self.x.copy(), "count": self.count.copy(), "up": self.x > 0.5,
                 "hist": self.hist.copy(), "when": when}}


class PerAgent(Science):
    state_columns = None            # declared: agent_state gives the panel


class Step(DecisionModel):
    def decide_batch(self, observations, memories):
        rng = self.ctx.rng("step")
        return [Action(agent_id=o.agent_id, step=o.step, kind="move",
                       payload={{"dx": rng.random() * np.float32(0.1), "seen": np.array([o.step, 1])}})
                for o in observations]


class Metrics(MetricCollector):
    def collect(self, t, environment, actions):
        return {{"mean_x": float(environment.x.mean())}}
'''


def write_science(root: Path, provider: str, bad_step: int = 0) -> Path:
    for rel, data in {
        "study.json": {"id": root.name, "title": "science"},
        "simulation/simulation.json": {"n_steps": 4, "seed": 2, "decision": {"ref": "model:Step"},
                                       "collector": {"ref": "model:Metrics"}, "memory_window": 0},
        "population/population.json": {"personas": [{"agent_id": f"s{i}"} for i in range(5)]},
        "environment/environment.json": {"provider": {"ref": f"model:{provider}"}},
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(data))
    (root / "model.py").write_text(MODEL.format(shape=None, bad_step=bad_step))
    return root


PANEL = ("SELECT step, agent_id, state::VARCHAR, payload::VARCHAR, typeof(state.x), typeof(state.count), "
         "typeof(state.up), typeof(state.hist), typeof(payload.dx), typeof(payload.seen) "
         "FROM panel WHERE run_id = ? ORDER BY step, agent_id")


def test_numpy_scalars_and_arrays_reach_the_panel_as_numbers_and_lists_on_both_paths(tmp_path):
    by_columns = write_science(tmp_path / "columns", "Science")
    by_dicts = write_science(tmp_path / "dicts", "PerAgent")
    runs = [desim.run_study(desim.load_study(root)) for root in (by_columns, by_dicts)]
    assert desim.run.assemble.assemble(desim.load_study(by_columns)).path == "state_columns"
    assert desim.run.assemble.assemble(desim.load_study(by_dicts)).path == "agents"
    rows = [query(store_path(root), PANEL, [run.run_id]) for root, run in zip((by_columns, by_dicts), runs)]
    assert len(rows[0]) == 20 and rows[0] == rows[1]
    assert {r[4:] for r in rows[0]} == {("DOUBLE", "BIGINT", "BOOLEAN", "JSON", "DOUBLE", "JSON")}
    (hist, seen), = query(store_path(by_dicts), "SELECT state.hist, payload.seen FROM panel WHERE run_id = ? "
                                                "AND step = 2 AND agent_id = 's3'", [runs[1].run_id])
    assert json.loads(hist)[1] > 0 and isinstance(json.loads(hist)[2], float) and json.loads(seen) == [2, 1]
    for root, run in zip((by_columns, by_dicts), runs):      # the same initial states, typed
        assert query(store_path(root), "SELECT typeof(state.count), state.hist::VARCHAR FROM initial_states "
                                       "WHERE run_id = ? AND agent_id = 's0'", [run.run_id]) == \
            [("BIGINT", "[0.0,0.0,0.0]")]


@pytest.mark.parametrize("provider", ["Science", "PerAgent"])
def test_a_datetime_stops_either_path_naming_agent_step_and_field(tmp_path, provider):
    root = write_science(tmp_path / provider, provider, bad_step=3)
    with pytest.raises(RunFailed) as err:
        desim.run_study(desim.load_study(root))
    assert "step 3: agent 's1': state.when = datetime.datetime(2024, 5, 1, 0, 0) (datetime) has no faithful " \
           "stored form: dates and times are not stored as such; store text (value.isoformat())" in err.value.error
    assert query(store_path(root), "SELECT max(step) FROM panel") == [(2,)]


def test_a_round_action_refused_names_its_round_as_well_as_step_and_agent():
    """``record_rounds``: a payload of round 2 whose type differs from round 1's is refused, and the
    error says which round (three rounds a step make "step 1" alone ambiguous), on both paths."""
    from desim.store.tables import columnar_round_rows, round_rows
    types = PanelTypes()
    round_rows(types, 1, [Action(agent_id="a0", step=1, kind="k", payload={"f": 0.5})], 1)
    with pytest.raises(FieldError, match=r"step 1 round 2: agent 'a1': payload\.f"):
        round_rows(types, 1, [Action(agent_id="a1", step=1, kind="k", payload={"f": "high"})], 2)
    types = PanelTypes()
    columnar_round_rows(types, 3, IDS, ActionColumns(kind="k", idx=np.arange(2), payload={"f": [0.5, 1.0]}), 0)
    with pytest.raises(FieldError, match=r"step 3 round 1: agent 'a0': payload\.f"):
        columnar_round_rows(types, 3, IDS, ActionColumns(kind="k", idx=np.arange(2), payload={"f": ["x", "y"]}), 1)
