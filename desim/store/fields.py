"""A run's state and payload fields, each with one type, checked every step.

The panel stores every state field and every action payload field with its
own type, so that ``state.opinion`` is a DOUBLE in SQL, not text. The types
of a run's state are fixed by its first rows (the initial states); a payload
field's type is fixed the first time the field appears (payloads of different
action kinds carry different fields). After that, a value of another type, a
new or missing state field, NaN or infinity where the study did not allow it,
or a value with no faithful stored form stops the run with a
:class:`FieldError` naming the agent, the step (and the round, for a round's
actions: the methods' ``step`` is where the values are, as the error prints it)
and the field. Nothing is ever
silently converted, except that an integer is accepted in a float field
(``0`` where ``0.5`` was); a boolean is not a number here.

**The one rule** is :func:`stored_kind`: per Python value, its stored kind or
why it has none. Every way a value reaches the store goes through it: a state
from ``agent_state`` (dicts) or ``state_columns`` (a list or array per field),
a payload of the per-agent path or of ``ActionColumns``, initial states and
``round_actions``; the same value gives the same stored value or the same error.

========================================  =====================================
value                                     stored as
========================================  =====================================
``None``                                  null (any field)
``bool``, ``numpy.bool_``                 ``bool``
``int``, numpy integers (within 64 bits)  ``int`` (int64)
``float``, numpy floats                   ``float`` (float64; NaN/inf per field)
``str``, ``numpy.str_``                   ``str``
list, tuple, dict (string keys), numpy    ``json``: JSON text, numbers keeping
arrays of numbers, booleans or text       their type (``[1, 2]``, ``[0.5, 1.0]``)
========================================  =====================================

Refused, each with its own reason: integers beyond 64 bits, bytes, sets,
complex numbers, dates and times (``datetime``, ``date``, ``time``,
``timedelta``, ``numpy.datetime64``: store ``isoformat()`` text or a number),
NaN or infinity inside a list or dict (JSON has neither), dict keys that are
not text, numpy arrays of other element types, and any other object.

A field's name is non-empty text, and no two of a run's state (or payload)
fields differ only by case: SQL reads struct fields ignoring case, so
``state.Support`` would read ``support``'s values.

A column of the columnar path may be a numpy array (its dtype decides at once:
a 2-D array is one 1-D row per agent), an Arrow array, or a list, which is
read value by value exactly like the per-agent path's dicts.

The fast path hands a whole column to Arrow's C converter and checks the type
it infers; only when that fails is the column walked in Python, to name the
first agent at fault.
"""
from __future__ import annotations

import datetime as _dt
import math
from operator import itemgetter
from typing import Any, Callable, Iterable

import numpy as np
import pyarrow as pa

from desim.errors import FieldError
from desim.jsontext import json_array

ARROW = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.string(),
         "json": pa.json_(), "null": pa.null()}
_INFERRED = {pa.bool_(): "bool", pa.int64(): "int", pa.float64(): "float", pa.string(): "str",
             pa.null(): "null"}
_INT64 = (-2**63, 2**63)
_TIMES = (_dt.date, _dt.time, _dt.timedelta, np.datetime64, np.timedelta64)   # datetime is a date
_ARRAY_KINDS = "biufU"          # numpy element kinds a JSON list holds faithfully
MAX_DEPTH = 64
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")    # DuckDB's folding


class Unstorable(ValueError):
    """A value with no faithful stored form; ``str()`` says why and what to store instead."""


def stored_kind(value: Any, _depth: int = 0) -> str:
    """The stored kind of one Python value (``null``, ``bool``, ``int``, ``float``, ``str``, ``json``),
    or :class:`Unstorable` saying why it has none. The one rule of the module docstring's table."""
    if value is None:
        return "null"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        if _INT64[0] <= int(value) < _INT64[1]:
            return "int"
        raise Unstorable("an integer beyond 64 bits (int64 holds -2**63 to 2**63-1); store it as text "
                         "or a float")
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple, dict, np.ndarray)):
        if isinstance(value, np.ndarray) and value.ndim == 0:
            return stored_kind(value[()], _depth)
        _check_json(value, _depth)
        return "json"
    raise Unstorable(_why_not(value))


def _why_not(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytes are not text; decode them (value.decode()) or store a number"
    if isinstance(value, (set, frozenset)):
        return "a set has no order to store; store a sorted list"
    if isinstance(value, _TIMES):
        return "dates and times are not stored as such; store text (value.isoformat()) or a number " \
               "(value.timestamp(), days since a start)"
    if isinstance(value, (complex, np.complexfloating)):
        return "a complex number; store its real and imaginary parts as two fields"
    return (f"an object of type {type(value).__name__}; use a number, text, a boolean, or a list/dict (or "
            "numpy array) of those")


def _check_json(value: Any, depth: int) -> None:
    """Refuse what a JSON value cannot hold as it is (the reason names what inside is wrong)."""
    if depth > MAX_DEPTH:
        raise Unstorable(f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, np.ndarray):
        kind = value.dtype.kind
        if kind == "O":
            for v in value.ravel().tolist():
                _check_inner(v, depth)
            return
        if kind not in _ARRAY_KINDS:
            raise Unstorable(f"a numpy array of {value.dtype} (numbers, booleans and text are stored, as "
                             f"JSON lists); {_why_not(value.ravel()[0]) if value.size else 'convert it'}")
        if kind == "f" and not np.isfinite(value).all():
            raise Unstorable("NaN or infinity inside an array (JSON has neither)")
        if kind == "u" and value.size and value.max() >= _INT64[1]:
            raise Unstorable("an integer beyond 64 bits inside an array")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise Unstorable(f"dict key {k!r:.40} is not text (JSON keys are text)")
            _check_inner(v, depth)
        return
    for v in value:
        _check_inner(v, depth)


def _check_inner(value: Any, depth: int) -> None:
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        raise Unstorable("NaN or infinity inside a list or dict (JSON has neither)")
    try:
        stored_kind(value, depth + 1)
    except Unstorable as e:
        raise Unstorable(f"inside a list or dict: {e}" if not str(e).startswith("inside ") else str(e)) from None


def kind_of(value: Any) -> str | None:
    """The stored kind of one Python value, or None when it has none (:func:`stored_kind`)."""
    try:
        return stored_kind(value)
    except Unstorable:
        return None


def plain(value: Any, kind: str) -> Any:
    """A value of kind ``kind`` as the Python value Arrow stores (numpy scalars as numbers)."""
    if value is None:
        return None
    if kind == "json":
        return value
    return _PLAIN[kind](value)


def describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        text = f"array({value.tolist()!r})" if value.dtype.kind in _ARRAY_KINDS else repr(value)
    else:
        text = repr(value.item() if isinstance(value, np.generic) and not isinstance(value, np.datetime64)
                    else value)
    text = " ".join(text.split())
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

    # --- values one by one (the per-agent path, and any column given as a list) -------------
    def column(self, name: str, values: list, agents, step: int | str) -> pa.Array:
        """One field's values as an Arrow array of the field's type (fixing it if new).

        ``agents`` names the values' agents (a list, or anything indexable by position)."""
        kind = self.types.get(name, "null")
        if kind == "json":
            for i, v in enumerate(values):
                if v is not None and kind_of(v) != "json":
                    self._refuse(step, agents[i], name, v, kind)
            return json_array(list(values), none_is_null=True)
        if not _NUMPY_TIMES.isdisjoint(map(type, values)):
            return self._walk(name, values, agents, step)      # Arrow's inference crashes on some (below)
        try:
            arr = pa.array(values, from_pandas=False)
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            arr = None
        got = _INFERRED.get(arr.type) if arr is not None else None
        if got is None or (got == "float" and _hides_booleans(arr, values)):
            return self._walk(name, values, agents, step)      # mixed, nested or refused: value by value
        return self._accept(name, arr, got, agents, step, values)

    def _walk(self, name: str, values: list, agents, step: int) -> pa.Array:
        """The field's values one at a time, by :func:`stored_kind`: the first that does not fit names
        its agent."""
        kind = self.types.get(name, "null")
        for i, v in enumerate(values):
            try:
                k = stored_kind(v)
            except Unstorable as e:
                self._unstorable(step, agents[i], name, v, str(e))
            if k == "null":
                continue
            if kind == "null":
                kind = k
                if k == "json":
                    self._fix(name, "json")
                    return self.column(name, values, agents, step)
            elif k != kind and not (kind == "float" and k == "int"):
                self._refuse(step, agents[i], name, v, kind)
        self._fix(name, kind)           # numpy scalars, or a new field's first values
        converted = [None if v is None else _PLAIN[kind](v) for v in values]
        return self._accept(name, pa.array(converted, ARROW[kind]), kind, agents, step, values)

    def _accept(self, name: str, arr: pa.Array, got: str, agents, step: int, values) -> pa.Array:
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
            i = _first_nonfinite(arr)
            if i is not None:
                raise FieldError(f"step {step}: agent '{agents[i]}': {self.what}.{name} is {float(values[i])}; "
                                 f"NaN and infinity are refused unless simulation.json lists '{name}' "
                                 "in panel.allow_nonfinite")
        return arr

    def _fix(self, name: str, kind: str) -> str:
        if self.types.get(name, "null") == "null":
            self.types[name] = kind
        return self.types[name]

    def _refuse(self, step: int, agent: str, name: str, value: Any, kind: str):
        try:
            got = stored_kind(value)
        except Unstorable as e:
            self._unstorable(step, agent, name, value, str(e))
        widen = ("; whole numbers that become fractions (an average of integer starting values) are "
                 "floats from the start: float(x) where the first values are made, or 1.0 rather than 1 in a "
                 "roster" if kind == "int" and got == "float" else "")
        raise FieldError(f"step {step}: agent '{agent}': {self.what}.{name} = {describe(value)} is {got}, but "
                         f"this run stores {self.what}.{name} as {kind} (fixed by its first values); keep one "
                         f"type per field{widen}")

    def _unstorable(self, step: int, agent: str, name: str, value: Any, why: str):
        raise FieldError(f"step {step}: agent '{agent}': {self.what}.{name} = {describe(value)} "
                         f"({type(value).__name__}) has no faithful stored form: {why}")

    def check_names(self, record_names: Iterable[str], agent: str, step: int) -> None:
        """A state record must carry exactly the run's fields."""
        names = set(record_names)
        if not self.fixed:
            return
        extra = [k for k in names if k not in self._keys]
        bad = [k for k in extra if not isinstance(k, str) or not k]     # sorted with text, 3 would raise
        if bad:
            raise FieldError(f"step {step}: agent '{agent}': {self.what} key {bad[0]!r:.60} is not a non-empty "
                             "string")
        extra, missing = sorted(extra), sorted(self._keys - names)
        if extra:
            raise FieldError(f"step {step}: agent '{agent}': {self.what} field '{extra[0]}' is new; a run's "
                             f"{self.what} fields are fixed by its initial states ({', '.join(self.names)})")
        if missing:
            raise FieldError(f"step {step}: agent '{agent}': {self.what} lacks field '{missing[0]}' that its "
                             "initial states had")

    def start(self, names: Iterable[str], step: int | str = 0, agent: str | Callable[[str], str] | None = None
              ) -> None:
        """Add the fields ``names`` (state: the initial states' fields, which fix the field set; payload: the
        fields new at ``step``), refusing a name that is not non-empty text or that differs only by case
        from another field's. ``agent`` is who brought them (or a function of the name that says who),
        None when they came as columns of everyone's values."""
        new = [name for name in names if name not in self.types]
        if new:
            self._check_new(new, step, agent)
        for name in new:
            self.types[name] = "null"
        self.names = tuple(self.types)
        self._keys = frozenset(self.names)

    def _check_new(self, new: list, step: int | str, agent: str | Callable[[str], str] | None) -> None:
        """Field names become struct field names, which SQL reads ignoring case (DuckDB folds ASCII letters
        only): two names that differ only so would read as one, ``state.Support`` giving ``support``'s
        values. So each must be text, and unlike every other name of these fields once case is folded."""
        def who(name) -> str:
            found = agent(name) if callable(agent) else agent
            return f"step {step}: " + (f"agent '{found}': " if found is not None else "")

        for name in new:
            if not isinstance(name, str) or not name:
                raise FieldError(f"{who(name)}{self.what} key {name!r:.60} is not a non-empty string")
        folded: dict[str, str] = {}
        for name in [*self.types, *new]:
            first = folded.setdefault(name.translate(_ASCII_LOWER), name)
            if first != name:
                raise FieldError(f"{who(name)}{self.what} fields '{first}' and '{name}' differ only by case (SQL "
                                 f"ignores the case of names: {self.what}.{name} would read {self.what}.{first}); "
                                 "rename one")

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
            new = [k for k in seen if k not in self._keys]
            if new:
                def agent_of(name) -> str:      # the first agent whose record has the field ``name``
                    return next(a for r, a in zip(records, agents) if r is not None and name in r)

                bad = [k for k in new if not isinstance(k, str) or not k]    # before sorting: 1 and "x" cannot be
                if bad:
                    raise FieldError(f"step {step}: agent '{agent_of(bad[0])}': {self.what} key {bad[0]!r:.60} is "
                                     "not a non-empty string")
                self.start(sorted(new), step, agent_of)
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
        """One column (a numpy array, an Arrow array or a list, one value per agent) as an Arrow array of
        the field's type. A list is read value by value, as :meth:`column` reads the per-agent path's;
        a numpy array by its dtype at once, giving what its values would give one by one."""
        if isinstance(values, (pa.Array, pa.ChunkedArray)):     # already Arrow: text categories, say
            return self._arrow(name, values, ids, step)
        agents = _Lazy(ids)
        if not isinstance(values, np.ndarray):
            return self.column(name, values if isinstance(values, list) else list(values), agents, step)
        k = values.dtype.kind
        if values.ndim != 1 or k not in "biufU" or self.types.get(name) == "json" or \
                (k == "u" and values.dtype.itemsize == 8 and len(values) and values.max() >= 2**63):
            # rows of a 2-D array (a list per agent), objects, bytes, dates, 64-bit overflow, or numbers
            # where the field holds JSON: the values one by one, by the one rule
            return self.column(name, list(values), agents, step)
        # copies, never views: a study mutates its arrays in place, and the step's table is kept
        # (for the merge at the end of the run) after the study has moved on
        if k == "b":
            arr, got = pa.array(values, pa.bool_()), "bool"
        elif k in "iu":
            arr, got = pa.array(values.astype(np.int64)), "int"
        elif k == "f":
            arr, got = pa.array(values.astype(np.float64)), "float"
        else:                       # text: Arrow converts the whole array in C
            arr, got = pa.array(values, pa.string()), "str"
        return self._accept(name, arr, got, agents, step, values)

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
                self.start(new, step)
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


_ZERO_ONE = pa.array([0.0, 1.0])
_BOOLEANS = {bool, np.bool_}
# pyarrow 26's type inference segfaults on a numpy datetime64 (or an array of them) followed by a numpy
# scalar or array ([np.datetime64('2020-01-02'), np.int32(3)]), so a list holding one never reaches it;
# arrays are JSON values, walked one by one anyway
_NUMPY_TIMES = {np.datetime64, np.timedelta64, np.ndarray}


def _first_nonfinite(arr: pa.Array) -> int | None:
    """Where a float column first holds NaN or an infinity (nulls are missing values, not NaN), or None.
    Read through numpy, which every run has loaded already; Arrow's compute module, 50 ms to import, is
    left to the runs that need it."""
    values = arr.to_numpy(zero_copy_only=False)
    bad = ~np.isfinite(values)
    if arr.null_count:                 # a null reads as NaN here: only valid slots count (Arrow's bitmap)
        bits = np.frombuffer(arr.buffers()[0], np.uint8)
        bad &= np.unpackbits(bits, bitorder="little")[arr.offset:arr.offset + len(arr)].astype(bool)
    hits = np.flatnonzero(bad)
    return int(hits[0]) if len(hits) else None


def _hides_booleans(arr: pa.Array, values: list) -> bool:
    """Arrow reads ``True`` as 1.0 in a list of floats; a boolean is not a number in the store, so a list
    whose floats include 0.0 or 1.0 is checked for booleans (one pass over the types, in C)."""
    import pyarrow.compute as pc
    if not pc.any(pc.is_in(arr, value_set=_ZERO_ONE)).as_py():
        return False
    return not _BOOLEANS.isdisjoint(map(type, values))


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
        return self.ids[int(i)].as_py()
