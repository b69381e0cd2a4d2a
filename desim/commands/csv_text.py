"""The CSV ``desim sql --csv`` prints: a field quoted only where it must be (:func:`write_csv`)."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import pyarrow as pa

CSV_BATCH_ROWS = 10_000   # rows turned into text at a time, so a large result is never all text at once
NEEDS_QUOTES = (",", '"', "\r", "\n")


def write_csv(table: "pa.Table", out: BinaryIO) -> None:
    """``table`` as UTF-8 CSV on ``out``, a field quoted only when it must be (RFC 4180; Python's
    ``csv.QUOTE_MINIMAL``): when it holds a comma, a double quote or a line break.

    Arrow's CSV writer quotes every text value, so ``$(desim sql S "SELECT run_id ..." --csv | tail -1)``
    gave ``"r..."`` with its quotes, which no command then recognised as a run. Values are written as Arrow
    writes them (``true``, ``1.5e-7``, ``2024-01-02 03:04:05``); NULL is an empty field and the empty text is
    ``""``, as ``desim export --format csv`` (Arrow's writer) writes them, so that a reader can tell them apart
    (but in a one-column result a NULL row is ``""`` too, see :func:`_line`); a value of nested
    type (``state``, a struct; a list) is written as JSON, since CSV has no type for it. Lines end with
    ``\\n``, as a shell's ``tail`` and ``$(...)`` expect; a line break inside a value stays inside its quotes.
    (Python's ``csv`` module, with lines ending in ``\\n``, would leave a lone ``\\r`` unquoted, which its own
    reader then takes for a line end: hence these few lines.)
    """
    out.write(_line(table.column_names))
    for batch in table.to_batches(max_chunksize=CSV_BATCH_ROWS):
        columns = [_texts(column) for column in batch.columns]
        out.writelines(_line(row) for row in zip(*columns))


def csv_field(value: str | None) -> str:
    """One CSV field: empty for NULL, ``""`` for the empty text (written bare, the two read back the same), in
    double quotes (its own doubled) when it holds a separator, a quote or a line break, as it is otherwise."""
    if value is None:
        return ""
    if value == "" or any(c in value for c in NEEDS_QUOTES):
        return '"' + value.replace('"', '""') + '"'
    return value


def _line(values) -> bytes:
    fields = [csv_field(v) for v in values]
    # a row of one NULL is written "" (as Python's csv module does), never a blank line, which most readers
    # skip (pandas, R, csv.DictReader): a one-column result keeps every row, and there alone NULL and the
    # empty text read back alike (a second column, or coalesce(x, 'NULL'), tells them apart)
    text = '""' if fields == [""] else ",".join(fields)
    return (text + "\n").encode("utf-8")


def _texts(column: "pa.Array") -> list[str | None]:
    """A column's values as text, None for NULL."""
    import pyarrow as pa
    import pyarrow.compute as pc
    if isinstance(column.type, pa.ExtensionType):       # DuckDB's JSON: its text
        column = column.storage
    if pa.types.is_nested(column.type):
        return [None if v is None else json.dumps(v, default=str, ensure_ascii=False) for v in column.to_pylist()]
    try:
        return pc.cast(column, pa.string()).to_pylist()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):   # a type Arrow cannot cast to text (bytes, intervals)
        return [None if v is None else str(v) for v in column.to_pylist()]
