"""A population's roster: the personas of a JSON or CSV file beside ``population.json``.

A JSON roster is a list of personas, each validated like the ``personas`` of ``population.json``. A CSV
roster has an ``agent_id`` column and one column per attribute; each column is typed as a whole (numbers,
booleans or text), because one agent's ``"0.5"`` beside another's ``0.5`` would split a model's arithmetic
mid-run. Every problem names the file, the line (as an editor counts them) and the column.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from desim.errors import StudyConfigError
from desim.records import Persona
from desim.study.files import INT64, check_unique_ids, describe_error, field_path, read_json, read_text
from desim.versions import POPULATION_DIR


def read_roster(root: Path, roster: str) -> list[Persona]:
    """Personas from a roster file beside population.json: JSON (a list) or CSV (an ``agent_id`` column)."""
    path = root / POPULATION_DIR / roster
    if path.suffix.lower() == ".csv":
        return _read_csv_roster(path)
    data = read_json(path)
    if not isinstance(data, list):
        raise StudyConfigError(path, [("", "expected a list of personas")])
    if not data:
        raise StudyConfigError(path, [("", "the roster is empty: a study needs at least one agent")])
    personas = []
    for i, item in enumerate(data):
        try:
            personas.append(Persona.model_validate(item))
        except ValidationError as e:
            raise StudyConfigError(path, [(field_path((i, *err["loc"])), describe_error(err)) for err in e.errors()]) from None
    check_unique_ids(path, personas, "")
    return personas


def _read_csv_roster(path: Path) -> list[Persona]:
    """A CSV roster; every problem names the line (as an editor counts them) and the column.

    Each attribute column is typed as a whole (:func:`_csv_column`), so that every agent's attribute has
    one type and a stray word in a column of numbers is caught here rather than in a model, mid-run."""
    rows = csv.reader(read_text(path, "roster file").splitlines(keepends=True))
    header = next(rows, None)
    if not header or not any(h.strip() for h in header):
        raise StudyConfigError(path, [("", "the roster is empty: expected a header line with an agent_id column")])
    header = [h.strip() for h in header]
    if "agent_id" not in header:
        raise StudyConfigError(path, [("line 1", f"no agent_id column (columns: {', '.join(header)})")])
    check_named(path, header)
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise StudyConfigError(path, [("line 1", f"column {twice[0]!r} appears twice")])
    key = header.index("agent_id")
    ids: list[str] = []
    lines: list[int] = []
    cells: list[list[str]] = [[] for _ in header]
    first: dict[str, int] = {}
    for row in rows:
        line = rows.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue                    # a blank line
        if len(row) != len(header):
            raise StudyConfigError(path, [(f"line {line}", f"{len(row)} field{'s' * (len(row) != 1)}, but the "
                                           f"header has {len(header)} ({', '.join(header)})")])
        agent_id = row[key].strip()
        if not agent_id:
            raise StudyConfigError(path, [(f"line {line}, column agent_id", "empty agent_id")])
        if agent_id in first:
            raise StudyConfigError(path, [(f"line {line}, column agent_id", f"duplicate agent_id "
                                           f"'{agent_id}' (first at line {first[agent_id]})")])
        first[agent_id] = line
        ids.append(agent_id)
        lines.append(line)
        for column, cell in zip(cells, row):
            column.append(cell)
    if not ids:
        raise StudyConfigError(path, [("", "the roster has a header but no rows: a study needs at least one agent")])
    names = [name for name in header if name != "agent_id"]
    columns = [_csv_column(path, name, cells[header.index(name)], lines) for name in names]
    return [Persona.model_construct(agent_id=agent_id, attributes=dict(zip(names, values)), description="")
            for agent_id, values in zip(ids, zip(*columns) if columns else ([] for _ in ids))]


def check_named(path: Path, header: list[str]) -> None:
    """Refuse a CSV header (stripped) with a column of no name, for a roster and a network file alike: pandas'
    ``to_csv`` writes its index so (``,agent_id,age``), and a line ending in a comma gives one too. Read, it
    became an attribute named ``''`` (the index's numbers, or nothing), which no model meant to have."""
    for i, name in enumerate(header):
        if not name:
            why = ("a pandas index? write the file with to_csv(..., index=False)" if i == 0 else
                   "a comma at the end of the line? remove it" if i == len(header) - 1 else "an extra comma?")
            raise StudyConfigError(path, [("line 1", f"column {i + 1} has no name; {why}, or name the column")])


# a number in plain decimal notation, with an optional exponent: 3, -0.25, .5, 1e-05 (what spreadsheets,
# pandas and R write); not 1_000, 0x1f, nan or inf, which Python's int and float also take
NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
INTEGER = re.compile(r"[+-]?[0-9]+")
_CODE = re.compile(r"[+-]?0[0-9]")       # a leading zero: 02139 is a zip code, 007 an identifier, not numbers
_NONFINITE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)


def _csv_column(path: Path, name: str, cells: list[str], lines: list[int]) -> list[Any]:
    """One roster column's values, typed as a whole.

    * an empty cell (or one of blanks) is a missing value: ``None``;
    * if every other cell is a number in plain decimal notation (:data:`NUMBER`), the column is numbers:
      ``int`` if every one is an integer written without a point or an exponent, else ``float``
      (so ``1`` in a column that also holds ``0.5`` is ``1.0``); but if one of them starts with a
      zero followed by a digit (``02139``), the column is codes (zip codes, identifiers) and stays text;
    * if every other cell is ``true`` or ``false`` (in any case), the column is booleans;
    * if none is a number, the column is text, each cell kept as written (``Nan`` is a name);
    * numbers mixed with words is refused, naming the line of the odd one out: a word in a column of
      numbers (``high``, ``NA``, ``nan``) is nearly always a data error, and reading the column as text
      would silently turn all its numbers into text.
    """
    present = [i for i, c in enumerate(cells) if c.strip()]
    numbers = [i for i in present if NUMBER.fullmatch(cells[i].strip())]
    if not present:
        return [None] * len(cells)
    if len(numbers) == len(present) and not any(_CODE.match(cells[i].strip()) for i in numbers):
        integers = all(INTEGER.fullmatch(cells[i].strip()) for i in numbers)
        out: list[Any] = [None] * len(cells)
        for i in numbers:
            text = cells[i].strip()
            value = int(text) if integers else float(text)
            if integers and not -INT64 - 1 <= value <= INT64:
                raise StudyConfigError(path, [(f"line {lines[i]}, column {name}", f"'{text}' is outside the "
                                               "64-bit integers the store can hold")])
            if not integers and value - value != 0:
                raise StudyConfigError(path, [(f"line {lines[i]}, column {name}", f"'{text}' is not a finite "
                                               "number (too large for a float)")])
            out[i] = value
        return out
    if numbers and len(numbers) < len(present):
        words = [i for i in present if not NUMBER.fullmatch(cells[i].strip())]
        numeric = len(numbers) >= len(words)
        odd, other = (words[0], numbers[0]) if numeric else (numbers[0], words[0])
        text, shown = cells[odd].strip(), cells[other].strip()
        if numeric:
            what = "is not a finite number" if _NONFINITE.fullmatch(text) else "is not a number"
            among = f"a column of numbers ({len(numbers)} of its {len(present)} values, as line {lines[other]}: {shown})"
            fix = "leave the cell empty for a missing value"
        else:
            what, fix = "is a number", "correct the cell"
            among = f"a column of text ({len(words)} of its {len(present)} values, as line {lines[other]}: '{shown}')"
        raise StudyConfigError(path, [(f"line {lines[odd]}, column {name}", (
            f"'{text}' {what}, in {among}; {fix}, or, to keep numbers and text in one column, give the roster "
            "as JSON (each value has its own type there)"))])
    if all(cells[i].strip().lower() in ("true", "false") for i in present):
        return [cells[i].strip().lower() == "true" if cells[i].strip() else None for i in range(len(cells))]
    return [c if c.strip() else None for c in cells]
