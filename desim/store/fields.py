"""A run's state and payload fields, each with one type, checked every step.

The panel stores every state field and every action payload field with its
own type, so that ``state.opinion`` is a DOUBLE in SQL, not text. The types
of a run's state are fixed by its first rows (the initial states); a payload
field's type is fixed the first time the field appears (payloads of different
action kinds carry different fields). After that, a value of another type, a
new or missing state field, NaN or infinity where the study did not allow it,
or a value with no faithful stored form (a set, an object, bytes, an integer
beyond 64 bits) stops the run with a :class:`FieldError` naming the agent,
the step and the field. Nothing is ever silently converted, except that an
integer is accepted in a float field (``0`` where ``0.5`` was).

Types, by the first non-null value: ``bool``, ``int`` (int64), ``float``
(float64), ``str``, and ``json`` for lists, tuples and dicts (stored as JSON
text, DuckDB's JSON type). A field that is null for every agent at the start
takes its type from its first non-null value.

Both paths give the same types: numpy integers of any width are int64,
numpy floats float64, numpy bools bool.

The fast path hands a whole column to Arrow's C converter and checks the type
it infers; only when that fails is the column walked in Python, to name the
first agent at fault.
"""
from __future__ import annotations

import math
from operator import itemgetter
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from desim.errors import FieldError
from desim.jsontext import json_array

ARROW = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.string(),
         "json": pa.json_(), "null": pa.null()}
_INFERRED = {pa.bool_(): "bool", pa.int64(): "int", pa.float64(): "float", pa.string(): "str",
             pa.null(): "null"}


def kind_of(value: Any) -> str | None:
    """The stored kind of one Python value, or None when it has no faithful form."""
    if value is None:
        return "null"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int" if -2**63 <= int(value) < 2**63 else None
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple, dict)):
        return "json" if _faithful_json(value) else None
    return None


def _faithful_json(value: Any, depth: int = 0) -> bool:
    """Lists, dicts with string keys, and scalars JSON keeps as they are (no NaN, no sets)."""
    if depth > 64:
        return False
    if value is None or isinstance(value, (bool, str)):
        return True
    if isinstance(value, (int, np.integer)):
        return -2**63 <= int(value) < 2**63
    if isinstance(value, (float, np.floating)):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_faithful_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _faithful_json(v, depth + 1) for k, v in value.items())
    return False


def describe(value: Any) -> str:
    text = repr(value.item() if isinstance(value, np.generic) else value)
    return f"{text[:60]}..." if len(text) > 60 else text


_DICT = {dict}
_PLAIN = {"bool": bool, "int": int, "float": float, "str": str, "null": lambda v: None}


class Fields:
    """The fields of one record kind (``state`` or ``payload``) and their types.

    ``fixed`` (state) means the field set itself is fixed: every record carries
    exactly these fields. A payload's fields may grow, and a record may omit some.
    """

    def __init__(self, what: str, fixed: bool, allow_nonfinite: Iterable[str] = (),
                 types: dict[str, str] | None = None):
        self.what, self.fixed = what, fixed
        self.allow_nonfinite = set(allow_nonfinite)
        self.types: dict[str, str] = dict(types or {})
        self.names: tuple[str, ...] = tuple(self.types)
        self._keys = frozenset(self.names)

    def to_json(self) -> dict[str, str]:
        return dict(self.types)

    # --- rows from dicts (the per-agent path) -------------------------------------
    def column(self, name: str, values: list, agents: list[str], step: int) -> pa.Array:
        """One field's values as an Arrow array of the field's type (fixing it if new)."""
        kind = self.types.get(name, "null")
        if kind == "json":
            for v, a in zip(values, agents):
                if v is not None and kind_of(v) != "json":
                    self._refuse(step, a, name, v, kind)
            return json_array(list(values), none_is_null=True)
        try:
            arr = pa.array(values, from_pandas=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
            arr = None
        got = _INFERRED.get(arr.type) if arr is not None else None
        if got is None:                 # mixed, nested or unsupported: find the first culprit
            return self._walk(name, values, agents, step)
        return self._accept(name, arr, got, agents, step, values)

    def _walk(self, name: str, values: list, agents: list[str], step: int) -> pa.Array:
        kind = self.types.get(name, "null")
        for v, a in zip(values, agents):
            k = kind_of(v)
            if k is None:
                raise FieldError(f"step {step}: agent '{a}': {self.what}.{name} = {describe(v)} "
                                 f"({type(v).__name__}) has no faithful stored form; use a number, text, "
                                 "a boolean, or a list/dict of those")
            if k == "null":
                continue
            if kind == "null":
                kind = k
                if k == "json":
                    self._fix(name, "json")
                    return self.column(name, values, agents, step)
            elif k != kind and not (kind == "float" and k == "int"):
                self._refuse(step, a, name, v, kind)
        self._fix(name, kind)           # numpy scalars of other widths, or a new field's first values
        plain = [None if v is None else _PLAIN[kind](v) for v in values]
        return self._accept(name, pa.array(plain, ARROW[kind]), kind, agents, step, values)

    def _accept(self, name: str, arr: pa.Array, got: str, agents: list[str], step: int,
                values: list | np.ndarray) -> pa.Array:
        kind = self.types.get(name, "null")
        if got == "null":
            return pa.nulls(len(arr), ARROW[kind])
        if kind == "null":
            kind = self._fix(name, got)
        if got != kind:
            if kind == "float" and got == "int":
                arr = arr.cast(pa.float64())
            else:
                i = next(i for i, v in enumerate(values) if v is not None and kind_of(v) != kind)
                self._refuse(step, agents[i], name, values[i], kind)
        if kind == "float" and name not in self.allow_nonfinite:
            bad = pc.invert(pc.is_finite(arr)).fill_null(False)
            if pc.any(bad).as_py():
                i = pc.index(bad, True).as_py()
                raise FieldError(f"step {step}: agent '{agents[i]}': {self.what}.{name} is {values[i]}; "
                                 f"NaN and infinity are refused unless simulation.json lists '{name}' "
                                 "in panel.allow_nonfinite")
        return arr

    def _fix(self, name: str, kind: str) -> str:
        if self.types.get(name, "null") == "null":
            self.types[name] = kind
        return self.types[name]

    def _refuse(self, step: int, agent: str, name: str, value: Any, kind: str):
        if kind_of(value) is None:
            raise FieldError(f"step {step}: agent '{agent}': {self.what}.{name} = {describe(value)} "
                             f"({type(value).__name__}) has no faithful stored form (sets, objects, bytes, "
                             "NaN inside lists and integers beyond 64 bits have none)")
        raise FieldError(f"step {step}: agent '{agent}': {self.what}.{name} = {describe(value)} is "
                         f"{kind_of(value) or type(value).__name__}, but this run stores {self.what}.{name} "
                         f"as {kind} (fixed by its first values); keep one type per field")

    def check_names(self, record_names: Iterable[str], agent: str, step: int) -> None:
        """A state record must carry exactly the run's fields."""
        names = set(record_names)
        if not self.fixed:
            return
        extra, missing = sorted(names - self._keys), sorted(self._keys - names)
        if extra:
            raise FieldError(f"step {step}: agent '{agent}': {self.what} field '{extra[0]}' is new; a run's "
                             f"{self.what} fields are fixed by its initial states ({', '.join(self.names)})")
        if missing:
            raise FieldError(f"step {step}: agent '{agent}': {self.what} lacks field '{missing[0]}' that its "
                             "initial states had")

    def start(self, names: Iterable[str]) -> None:
        """Fix the field set (state: from the initial states)."""
        for name in names:
            self.types.setdefault(name, "null")
        self.names = tuple(self.types)
        self._keys = frozenset(self.names)

    def struct(self, records: list[dict | None], agents: list[str], step: int) -> pa.StructArray:
        """Dicts (None for no record) as one struct column, in this object's field order."""
        names = self.names
        # the common case, checked in C: every record a dict of exactly the known fields
        if names and set(map(type, records)) == _DICT and set(map(len, records)) == {len(names)}:
            try:
                rows = list(map(itemgetter(*names), records))
            except KeyError:
                rows = None
            if rows is not None:
                columns = [rows] if len(names) == 1 else zip(*rows)
                return pa.StructArray.from_arrays([self.column(name, values, agents, step)
                                                   for name, values in zip(names, columns)], names=list(names))
        return self._struct(records, agents, step)

    def _struct(self, records: list[dict | None], agents: list[str], step: int) -> pa.StructArray:
        present = [r for r in records if r is not None]
        if self.fixed:
            for r, a in zip(records, agents):
                if r is not None and r.keys() != self._keys:
                    self.check_names(r, a, step)
        else:
            seen = set()
            for r in present:
                seen.update(r)
            new = [k for k in sorted(seen) if k not in self._keys]
            if new:
                bad = [k for k in new if not isinstance(k, str) or not k]
                if bad:
                    a = next(a for r, a in zip(records, agents) if r is not None and bad[0] in r)
                    raise FieldError(f"step {step}: agent '{a}': {self.what} key {bad[0]!r} is not a "
                                     "non-empty string")
                self.start(new)
        if not self.names:               # Parquet has no struct without fields
            return pa.nulls(len(records))
        mask = None
        if len(present) != len(records):
            mask = pa.array([r is None for r in records])
        cols = []
        for name in self.names:
            if mask is None and self.fixed:      # every record carries exactly these fields
                vals = [r[name] for r in records]
            else:
                vals = [None if r is None else r.get(name) for r in records]
            cols.append(self.column(name, vals, agents, step))
        return pa.StructArray.from_arrays(cols, names=list(self.names), mask=mask)

    # --- columns from numpy (the columnar path) --------------------------------------
    def array(self, name: str, values: Any, ids: pa.Array, step: int) -> pa.Array:
        """One numpy column as an Arrow array of the field's type."""
        if isinstance(values, (pa.Array, pa.ChunkedArray)):     # already Arrow: text categories, say
            return self._arrow(name, values, ids, step)
        # copies, never views: a study mutates its arrays in place, and the step's table is kept
        # (for the merge at the end of the run) after the study has moved on
        values = np.asarray(values)
        k = values.dtype.kind
        if k == "b":
            arr, got = pa.array(values, pa.bool_()), "bool"
        elif k in "iu":
            if k == "u" and values.dtype.itemsize == 8 and len(values) and values.max() >= 2**63:
                i = int(np.argmax(values >= 2**63))
                raise FieldError(f"step {step}: agent '{ids[i]}': {self.what}.{name} = {values[i]} is beyond "
                                 "64-bit integers")
            arr, got = pa.array(values.astype(np.int64)), "int"
        elif k == "f":
            arr, got = pa.array(values.astype(np.float64)), "float"
        else:       # text (or anything else): Arrow converts the whole array in C when it gives a kind we store
            try:
                arr = pa.array(values, from_pandas=False)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
                arr = None
            got = _INFERRED.get(arr.type) if arr is not None else None
            if got is None or self.types.get(name) == "json":   # mixed, nested, refused: the per-value rules
                return self.column(name, values.tolist(), ids.to_pylist(), step)
        return self._accept(name, arr, got, _Lazy(ids), step, values)

    def _arrow(self, name: str, values, ids: pa.Array, step: int) -> pa.Array:
        """An Arrow column, checked like any other. A dictionary-encoded one (text categories built from
        codes, no Python string per agent) is decoded in C, so every step of a field has one type."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if pa.types.is_dictionary(values.type):
            values = values.dictionary_decode()
        got = _INFERRED.get(values.type)
        if got is None:         # nested or unsupported: the per-value rules say what is wrong
            return self.column(name, values.to_pylist(), ids.to_pylist(), step)
        return self._accept(name, values, got, _Lazy(ids), step, _ArrowValues(values))

    def struct_columns(self, columns: dict[str, Any], ids: pa.Array, step: int,
                       mask: pa.Array | None = None) -> pa.StructArray:
        if self.fixed:
            names = set(columns)
            if names != self._keys:
                self.check_names(names, "(all agents)", step)
        else:
            new = [k for k in columns if k not in self._keys]
            if new:
                self.start(new)
        n = len(ids)
        cols = []
        for name in self.names:
            if name in columns:
                cols.append(self.array(name, columns[name], ids, step))
            else:
                cols.append(pa.nulls(n, ARROW[self.types[name]]))
        if not self.names:
            return pa.nulls(n)
        return pa.StructArray.from_arrays(cols, names=list(self.names), mask=mask)


class _ArrowValues:
    """An Arrow array's values as Python objects, converted only for an error message."""

    def __init__(self, arr: pa.Array):
        self.arr = arr

    def __getitem__(self, i: int):
        return self.arr[i].as_py()

    def __iter__(self):
        return iter(self.arr.to_pylist())


class _Lazy:
    """Agent ids by position, converted to Python only for an error message."""

    def __init__(self, ids: pa.Array):
        self.ids = ids

    def __getitem__(self, i: int) -> str:
        return self.ids[i].as_py()
