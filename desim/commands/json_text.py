"""The JSON ``desim sql --json`` prints, and other commands write: standard JSON any reader takes.

Python's ``json`` writes NaN and infinity as ``NaN`` and ``Infinity``, which are not JSON (``jq``, a
browser's ``JSON.parse`` and most other readers refuse the whole document), and, with ``default=str``, a
DECIMAL or HUGEINT as a string (``"1.50"``) and a JSON column as a string of its text. :func:`json_ready`
gives each value the JSON form a reader expects, once, here.
"""
from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import pyarrow as pa

JSON_BATCH_ROWS = 10_000   # rows turned into Python at a time, so a large result is never all objects at once


class Nonfinite:
    """How many NaN or infinite numbers were written as ``null``: said on stderr, since ``null`` also
    stands for SQL NULL and the difference should not pass without a word."""

    def __init__(self) -> None:
        self.count = 0

    def note(self) -> str | None:
        if not self.count:
            return None
        return (f"{self.count} NaN or infinite value{'s' if self.count != 1 else ''} written as null "
                "(JSON has no such numbers; --csv writes them as nan, inf)")


def json_ready(value: Any, nonfinite: Nonfinite) -> Any:
    """``value`` as plain JSON data: a NaN or infinity is ``None`` (counted in ``nonfinite``); a DECIMAL
    a number (an int at scale 0, as a HUGEINT or a SUM of integers comes; else a float); a date or time
    its ISO text; an INTERVAL its months, days and nanoseconds; a BLOB its hex; lists and dicts inside
    each, with any key as text."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        nonfinite.count += 1
        return None
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, Decimal):
        return int(value) if value.as_tuple().exponent >= 0 else float(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): json_ready(v, nonfinite) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):      # Arrow's MonthDayNano (an INTERVAL)
        return {k: json_ready(v, nonfinite) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v, nonfinite) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)                   # a UUID, a timedelta: their text


def write_json(table: "pa.Table", out: TextIO) -> Nonfinite:
    """``table`` as one JSON array of row objects on ``out``. A JSON column (of Arrow's JSON type, or marked
    so by :func:`desim.store.reader.user_query`) is written as its value, not a string of its text."""
    import pyarrow as pa
    from desim.store.reader import JSON_FIELD
    nonfinite = Nonfinite()
    names = table.column_names
    is_json = [isinstance(f.type, pa.JsonType) or (f.metadata or {}) == JSON_FIELD for f in table.schema]
    out.write("[")
    first = True
    for batch in table.to_batches(max_chunksize=JSON_BATCH_ROWS):
        columns = [column.storage.to_pylist() if isinstance(column.type, pa.ExtensionType) else column.to_pylist()
                   for column in batch.columns]
        columns = [[None if v is None else json.loads(v) for v in values] if parse else values
                   for values, parse in zip(columns, is_json)]
        for row in zip(*columns):
            out.write(("" if first else ",\n") + json.dumps(
                {name: json_ready(v, nonfinite) for name, v in zip(names, row)}, ensure_ascii=False,
                allow_nan=False))
            first = False
    out.write("]\n")
    return nonfinite
