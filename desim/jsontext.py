"""Many values as canonical JSON text, one Arrow string per value, in one serialiser call.

Message contents, JSON-typed state fields and event details are stored as
JSON text, one per row. Serialising them one call at a time costs a fixed
price per call that dwarfs the work (orjson 3.13 takes about 3 µs per call on
the benchmark machine, 0.15 µs per value inside one list). So the values are
serialised at once, as one JSON array with a raw newline (an
``orjson.Fragment``, copied verbatim) between every two of them. orjson
escapes every newline inside strings, so the raw newlines are exactly the
separators: one numpy pass finds them, and the text between them becomes one
Arrow string array without a Python object per value.

The text of each value is exactly what ``orjson.dumps(value, option=SORT_KEYS
| NON_STR_KEYS)`` gives for it alone (tested): compact, keys sorted.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
_TEXT_KEYS = orjson.OPT_SORT_KEYS       # the common case, tried first: every dict key is already text
_NEWLINE = orjson.Fragment(b"\n")


def nonfinite(value: Any) -> float | None:
    """The first NaN or infinity inside ``value`` (dicts, lists, tuples, numpy values), or None. orjson
    writes them as ``null``, which would store a different value without a word: JSON has no such numbers."""
    if isinstance(value, (float, np.floating)):
        return None if np.isfinite(value) else float(value)
    if isinstance(value, dict):
        value = value.values()
    elif isinstance(value, np.ndarray):
        value = value.ravel().tolist() if value.dtype.kind in "fc" else ()
    elif not isinstance(value, (list, tuple)):
        return None
    for item in value:
        found = nonfinite(item)
        if found is not None:
            return found
    return None


def _refuse_nonfinite(values: list) -> None:
    """Raise ``TypeError`` when a value holds NaN or infinity (checked only where the text has a ``null``:
    such a number or a None)."""
    for value in values:
        found = nonfinite(value)
        if found is not None:
            raise TypeError(f"{found} is not a JSON number (JSON has no NaN or infinity)")


def _key_text(key: Any) -> str:
    """The text a non-text dict key becomes in JSON (1 -> "1", None -> "null"), as orjson writes it."""
    if type(key) is int:                # the common one, spelled here: asking orjson costs 1 us a key
        return str(key)
    return next(iter(orjson.loads(orjson.dumps({key: 0}, option=OPTIONS))))


def _refuse_key_clash(value: Any) -> None:
    """Raise ``TypeError`` when a dict inside ``value`` has two keys that JSON writes as one text (``1`` and
    ``"1"``): the stored object would hold the key twice and a reader would keep one of the two values."""
    if isinstance(value, dict):
        if len({k if type(k) is str else _key_text(k) for k in value}) < len(value):
            seen: dict[str, Any] = {}
            for key in value:
                text = key if type(key) is str else _key_text(key)
                if text in seen:
                    raise TypeError(f"keys {seen[text]!r} and {key!r} are both written {text!r} in JSON, "
                                    "so one of their values would be lost; use one kind of key")
                seen[text] = key
        value = value.values()
    elif not isinstance(value, (list, tuple)):
        return
    for item in value:
        if isinstance(item, (dict, list, tuple)):
            _refuse_key_clash(item)


def _encoded(value: Any) -> bytes:
    """``orjson.dumps`` with desim's options; a dict with keys that are not text (allowed: ``{1: "a"}`` is
    stored as ``{"1": "a"}``) is first checked for two keys that would become one."""
    try:
        return orjson.dumps(value, default=_plain, option=_TEXT_KEYS)
    except TypeError:
        _refuse_key_clash(value)
        return orjson.dumps(value, default=_plain, option=OPTIONS)


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):          # numpy scalars and arrays
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


def parsed(value: Any, empty: Any = None) -> Any:
    """A JSON column's value as Python: DuckDB hands a JSON column over as its text, a reader of Arrow or a
    caller may already have the value; ``None`` (SQL NULL) is ``empty``."""
    if isinstance(value, str):
        return json.loads(value)
    return empty if value is None else value


def dumps(value: Any) -> str:
    """One value as canonical JSON text (sorted keys); ``TypeError`` for what JSON cannot hold, NaN included."""
    data = _encoded(value)
    if b"null" in data:
        _refuse_nonfinite([value])
    return data.decode()


def json_array(values: list, none_is_null: bool = False) -> pa.Array:
    """``values`` as an Arrow array of JSON text (``pa.json_()``), one entry per value.

    With ``none_is_null`` a ``None`` is a SQL NULL; otherwise it is the JSON
    text ``null``. Raises ``TypeError`` (from orjson, or for NaN and infinity, which
    orjson would write as ``null``) for a value JSON cannot hold.
    """
    n = len(values)
    if n == 0:
        return pa.array([], pa.json_())
    items = [_NEWLINE] * (2 * n - 1)
    items[::2] = values
    data = _encoded(items)          # [v0,\n,v1,\n,...]
    if b"null" in data:
        _refuse_nonfinite(values)
    buf = np.frombuffer(data, np.uint8)
    breaks = np.flatnonzero(buf == 10)
    if len(breaks) != n - 1:
        raise ValueError(f"json_array: found {len(breaks) + 1} values in the text of {n}")
    keep = np.ones(len(buf), bool)      # drop '[' and ']', and ',\n,' between values
    keep[[0, len(buf) - 1]] = False
    keep[breaks - 1] = keep[breaks] = keep[breaks + 1] = False
    text = buf[keep]
    starts = np.empty(n + 1, np.int64)
    starts[0], starts[1:n], starts[n] = 0, breaks + 2 - 1 - 3 * np.arange(1, n), len(text)
    kind = pa.string() if len(text) < 2**31 else pa.large_string()
    offsets = pa.py_buffer(starts.astype(np.int32 if kind == pa.string() else np.int64))
    validity = None
    if none_is_null and any(v is None for v in values):
        validity = pa.array(np.fromiter((v is not None for v in values), bool, count=n)).buffers()[1]
    strings = pa.Array.from_buffers(kind, n, [validity, offsets, pa.py_buffer(text)])
    return pa.ExtensionArray.from_storage(pa.json_(), strings)
