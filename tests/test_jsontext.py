"""``desim.jsontext.json_array``: many values serialised in one orjson call and split at
the raw newlines between them must give, value by value, exactly the text orjson gives
for each value alone (the reference here), whatever the strings hold; NULLs, the storage
type, the errors and a round trip through Parquet and a real DuckDB are checked too."""
from __future__ import annotations

import json
import math
import random
import re

import duckdb
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import desim
from desim import Action, DecisionModel, EnvironmentProvider, Observation
from desim.jsontext import dumps, json_array

OPTS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS

# pieces strings are built from: the characters that could confuse a split at newlines or a
# scan for separators (quotes after 1-3 backslashes, commas, brackets, braces, raw newlines)
PIECES = ['"', "\\", '\\"', '\\\\"', '\\\\\\"', ",", "[", "]", "{", "}", "\n", "\r\n", "\t", "\x00",
          "\x01", "\x1f", "\x7f", "\x0b", "\x0c", "\u2028", "\u2029", "é", "ß", "中文", "😀", "👩‍👩‍👧",
          "a", "Z", " ", ":", "null", "\\n", ",\n,", "[\n]", "0", "-"]
INTS = [0, 1, -1, 2**31 - 1, -2**31, 2**53 + 1, 2**63 - 1, -2**63 + 1, -2**63]
FLOATS = [0.0, -0.0, 0.1, 1 / 3, 5e-324, 2.2250738585072014e-308, 1e-300, 1e300, 1.7976931348623157e308,
          -1.7976931348623157e308, 123456789.123456789, 1e16, -2.5]


def reference(value) -> str:
    """The text for one value, computed independently: numpy objects made plain by hand,
    then one orjson call for this value alone."""
    return orjson.dumps(plain(value), option=OPTS).decode()


def plain(value):
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def rand_string(rnd: random.Random) -> str:
    return "".join(rnd.choice(PIECES) for _ in range(rnd.randint(0, 8)))


def rand_scalar(rnd: random.Random):
    pick = rnd.randrange(10)
    if pick == 0:
        return rnd.choice(INTS)
    if pick == 1:
        return rnd.randint(-2**63, 2**63 - 1)
    if pick == 2:
        return rnd.choice(FLOATS)
    if pick == 3:
        return rnd.uniform(-1e6, 1e6) * 10 ** rnd.randint(-30, 30)
    if pick == 4:
        return rnd.choice([True, False, None])
    if pick == 5:
        return np.float64(rnd.choice(FLOATS + [rnd.random()]))
    if pick == 6:
        return np.int64(rnd.choice(INTS))
    return rand_string(rnd)


def rand_value(rnd: random.Random, depth: int = 0):
    pick = rnd.randrange(10)
    if depth >= 3 or pick < 5:
        return rand_scalar(rnd)
    if pick < 7:
        return [rand_value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]
    if pick == 7:
        return np.array([rnd.randint(-1000, 1000) for _ in range(rnd.randint(0, 3))], dtype=np.int64)
    return {rand_string(rnd) + rnd.choice(["", ",", '"', "\\", "\n", "}"]): rand_value(rnd, depth + 1)
            for _ in range(rnd.randint(0, 4))}


def texts(arr: pa.Array) -> list:
    return arr.storage.to_pylist()


@pytest.mark.parametrize("seed", range(12))
def test_each_value_is_its_own_orjson_text(seed):
    rnd = random.Random(seed)
    values = [rand_value(rnd) for _ in range(rnd.choice([1, 2, 5, 50, 300]))]
    arr = json_array(values)
    assert arr.type == pa.json_()
    assert arr.storage.type == pa.string()
    assert len(arr) == len(values)
    assert arr.null_count == 0
    assert texts(arr) == [reference(v) for v in values]
    # and each text reads back as its value (NaN and infinities are not drawn, so equality holds)
    for v, t in zip(values, texts(arr)):
        assert json.loads(t) == json.loads(json.dumps(plain(v)))


def test_strings_made_only_of_separators_and_escapes():
    values = ["\n", "\n\n", ",\n,", "[", "]", '"', "\\", '\\"', '\\\\"', '\\\\\\"', "", " ", "\x00",
              "\r", "\t", "".join(chr(c) for c in range(32)), "😀\n😀", ["\n", ",", "\n"], {"\n": "\n"},
              {'a,"b': '"]}', 'a,\\"b': [r"\\", "\\\\\\"]}]
    arr = json_array(values)
    assert texts(arr) == [reference(v) for v in values]
    assert [json.loads(t) for t in texts(arr)] == values


def test_keys_sorted_and_non_string_keys():
    values = [{"b": 1, "a": 2, "c": {"z": 0, "y": [{"q": 1, "p": 2}]}}, {3: "x", 1: "y", 2: "z"},
              {True: 1}, {None: 0}, {1.5: "f"}]
    arr = json_array(values)
    assert texts(arr) == [reference(v) for v in values]
    assert texts(arr)[0] == '{"a":2,"b":1,"c":{"y":[{"p":2,"q":1}],"z":0}}'    # compact, keys sorted
    assert json.loads(texts(arr)[1]) == {"1": "y", "2": "z", "3": "x"}


def test_numbers_at_the_edges():
    values = INTS + FLOATS + [np.float64(5e-324), np.float64(1e308), np.int64(2**63 - 1), np.int64(-2**63),
                              np.array([1.5, -0.0]), np.array([[1, 2], [3, 4]]), np.bool_(True),
                              np.float32(0.5), 2**64 - 1]
    arr = json_array(values)
    assert texts(arr) == [reference(v) for v in values]
    for v, t in zip(values, texts(arr)):
        assert json.loads(t) == plain(v)
    # NaN and the infinities have no JSON spelling: orjson writes null, a different value, so they are refused
    for bad in (math.nan, math.inf, -math.inf, np.float64("nan")):
        with pytest.raises(TypeError, match="is not a JSON number"):
            json_array([1.5, bad])


def test_empty_containers_empty_input_and_one_value():
    assert texts(json_array([[], {}, "", [[]], {"": {}}])) == ["[]", "{}", '""', "[[]]", '{"":{}}']
    empty = json_array([])
    assert len(empty) == 0 and empty.type == pa.json_() and empty.storage.type == pa.string()
    for v in ({"a": [1, "\n"]}, None, "x", 0, np.float64(2.5)):
        one = json_array([v])
        assert texts(one) == [reference(v)]
        assert one.storage.type == pa.string()


def test_dumps_matches_the_reference():
    rnd = random.Random(99)
    for _ in range(300):
        v = rand_value(rnd)
        assert dumps(v) == reference(v)


@pytest.mark.parametrize("seed", range(4))
def test_none_is_null(seed):
    rnd = random.Random(100 + seed)
    values = [None if rnd.random() < 0.3 else rand_value(rnd) for _ in range(rnd.randint(1, 80))]
    if seed == 0:
        values[0] = values[-1] = None
    if seed == 1:
        values = [None] * 7
    nulls = json_array(values, none_is_null=True)
    assert nulls.storage.type == pa.string()
    assert nulls.is_null().to_pylist() == [v is None for v in values]
    assert nulls.null_count == sum(v is None for v in values)
    assert texts(nulls) == [None if v is None else reference(v) for v in values]
    # without the flag a None is the JSON text null, never a SQL NULL
    text_null = json_array(values)
    assert text_null.null_count == 0
    assert texts(text_null) == [reference(v) for v in values]
    # a nested None stays JSON null either way
    nested = json_array([[None], {"a": None}, None], none_is_null=True)
    assert texts(nested) == ["[null]", '{"a":null}', None]


@pytest.mark.parametrize("bad", [{1, 2}, object(), b"bytes", {"a": [1, {2}]}, [object()], 2**64, -2**63 - 1,
                                 {"k": complex(1, 2)}])
def test_a_value_json_cannot_hold_raises_type_error(bad):
    with pytest.raises(TypeError):
        orjson.dumps(plain(bad), option=OPTS)       # the reference refuses it too
    with pytest.raises(TypeError):
        json_array([1, "two", bad, {"three": 3}])
    with pytest.raises(TypeError):
        json_array([bad], none_is_null=True)


@pytest.mark.parametrize("seed", range(3))
def test_round_trip_through_parquet_and_duckdb(tmp_path, seed):
    rnd = random.Random(200 + seed)
    odd_key = 'we,ird "key"\\'
    rows = []
    for i in range(120):
        if rnd.random() < 0.15:
            rows.append(None)
        else:
            rows.append({"name": rand_value(rnd), odd_key: rand_string(rnd), "i": i,
                         "nested": {"list": [rand_scalar(rnd) for _ in range(3)]}})
    table = pa.table({"row": pa.array(range(len(rows)), pa.int64()), "v": json_array(rows, none_is_null=True)})
    path = tmp_path / "values.parquet"
    pq.write_table(table, path)
    con = duckdb.connect(str(tmp_path / "check.duckdb"))
    try:
        got = con.execute(
            "SELECT row, v IS NULL, json_extract(v, '$.name'), json_extract(v, ?), "
            "json_extract(v, '$.nested.list[1]'), json_extract(v, '$.i') FROM read_parquet(?) ORDER BY row",
            [[odd_key], str(path)]).fetchall()
        kinds = con.execute("SELECT DISTINCT typeof(v) FROM read_parquet(?)", [str(path)]).fetchall()
    finally:
        con.close()
    assert kinds == [("JSON",)]
    assert len(got) == len(rows)
    for (row, is_null, name, odd, second, i), want in zip(got, rows):
        if want is None:
            assert is_null and name is None
            continue
        assert not is_null
        assert json.loads(name) == json.loads(json.dumps(plain(want["name"]))), row
        assert json.loads(odd[0]) == want[odd_key], row
        assert json.loads(second) == plain(want["nested"]["list"][1]), row
        assert json.loads(i) == row


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), np.float32("nan")])
def test_nan_and_infinity_are_refused_not_written_as_null(bad):
    """orjson writes them as null: a different value, stored without a word. JSON has no such numbers."""
    for value in ({"x": bad}, [1, [2, bad]], {"deep": {"list": (bad,)}}):
        with pytest.raises(TypeError, match="is not a JSON number"):
            json_array([{"fine": None}, value])
        with pytest.raises(TypeError, match="is not a JSON number"):
            dumps(value)
    # None stays null, as before
    assert json_array([None, {"a": None}]).storage.to_pylist() == ["null", '{"a":null}']


def test_a_message_whose_content_holds_nan_is_refused_naming_its_author():
    from desim import Message
    from desim.study.failures import FieldError
    from desim.store.tables import message_rows
    with pytest.raises(FieldError, match=r"step 3 round 1: agent 'b': message content .* is not JSON "
                                         r"\(nan is not a JSON number"):
        message_rows([Message("a", 3, 1, {"x": 1.0}), Message("b", 3, 1, {"x": float("nan")})], 3)


class NanEnv(EnvironmentProvider):
    """Agent a2's JSON state field holds a NaN at step 2."""

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        pass

    def agent_state(self, agent_id):
        return {"info": {"score": float("nan") if agent_id == "a2" and self.ctx.step == 2 else 1.0}}


class Idle(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="wait") for o in observations]


def test_a_json_state_field_holding_nan_fails_the_run_naming_the_agent():
    """(As a message's content now is: the two used to differ, the content's NaN stored as null.)"""
    with pytest.raises(desim.RunFailed, match=r"step 2: agent 'a2': state\.info = .* has no faithful stored form: "
                                              r"NaN or infinity inside a list or dict"):
        desim.run_study(desim.Study(environment=NanEnv, decision=Idle, population=4, steps=3))


@pytest.mark.parametrize("value, keys", [
    ({1: "a", "1": "b"}, "1 and '1'"),
    ([{"x": {None: 0, "null": 1}}], "None and 'null'"),
    ({"deep": ({2.5: 0, "2.5": 1},)}, "2.5 and '2.5'"),
])
def test_two_keys_json_writes_as_one_are_refused_not_stored_twice(value, keys):
    """orjson writes ``{1: "a", "1": "b"}`` as ``{"1":"a","1":"b"}``: a reader keeps one of the two values."""
    with pytest.raises(TypeError, match=f"keys {re.escape(keys)} are both written"):
        dumps(value)
    with pytest.raises(TypeError, match=f"keys {re.escape(keys)} are both written"):
        json_array([{"fine": 1}, value])
    assert json_array([{1: "a", 2: "b"}]).storage.to_pylist() == ['{"1":"a","2":"b"}']    # one kind: fine


def test_a_message_with_clashing_keys_is_refused_naming_its_author():
    from desim import Message
    from desim.study.failures import FieldError
    from desim.store.tables import message_rows
    with pytest.raises(FieldError, match=r"step 2 round 0: agent 'b': message content .* is not JSON \(keys 7 and '7'"):
        message_rows([Message("a", 2, 0, {"x": 1}), Message("b", 2, 0, {7: "seven", "7": "7"})], 2)
