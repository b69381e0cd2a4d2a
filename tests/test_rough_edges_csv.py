"""``desim sql --csv`` writes CSV quoted only where a field needs it (RFC 4180, Python's ``csv.QUOTE_MINIMAL``),
NULL as an empty field: a run id read back with the shell's ``$(... --csv | tail -1)`` is the bare id, and
another desim command takes it."""
from __future__ import annotations

import csv
import io

import pyarrow as pa

from desim.cli import main
from desim.commands.csv_text import csv_field, write_csv
from desim.store import StudyLayout
from desim.store.reader import user_query
from walk_study import write_walk_study


def written(table: pa.Table) -> str:
    out = io.BytesIO()
    write_csv(table, out)
    return out.getvalue().decode("utf-8")


def test_text_is_quoted_only_where_a_field_needs_it():
    table = pa.table({"run_id": ["r7d10262c41", "a,b", 'say "hi"', "two\nlines", "cr\rhere", "", None],
                      "n": pa.array([1, 2, None, 4, 5, 6, 7], pa.int64())})
    assert written(table) == ('run_id,n\n'
                              'r7d10262c41,1\n'
                              '"a,b",2\n'
                              '"say ""hi""",\n'
                              '"two\nlines",4\n'
                              '"cr\rhere",5\n'
                              '"",6\n'
                              ',7\n')
    # and any CSV reader reads the values back (the empty text quoted, NULL an empty field: Python's reader
    # reads both as '', DuckDB's and pandas' keep them apart)
    rows = list(csv.reader(io.StringIO(written(table), newline="")))
    assert rows[1:] == [["r7d10262c41", "1"], ["a,b", "2"], ['say "hi"', ""], ["two\nlines", "4"],
                        ["cr\rhere", "5"], ["", "6"], ["", "7"]]


def test_fields_one_at_a_time():
    assert [csv_field(v) for v in (None, "", "plain", "é ü", " padded ", "a,b", '"', "x\r\ny", "cr\rhere")] == \
        ["", '""', "plain", "é ü", " padded ", '"a,b"', '""""', '"x\r\ny"', '"cr\rhere"']


def test_numbers_booleans_and_nested_values():
    table = pa.table({"ok": [True, False, None], "x": [0.25, -1.5e-7, None],
                      "state": pa.array([{"opinion": 0.5, "region": "East"}, None, {"opinion": None, "region": "W"}]),
                      "tags": pa.array([[1, 2], [], None])})
    assert written(table).splitlines() == [
        "ok,x,state,tags",
        'true,0.25,"{""opinion"": 0.5, ""region"": ""East""}","[1, 2]"',
        "false,-1.5e-7,,[]",
        ',,"{""opinion"": null, ""region"": ""W""}",']


def test_a_row_of_one_empty_field_is_not_a_blank_line():
    """A blank line is skipped by CSV readers: a one-column result's NULL keeps its row as ``""``."""
    assert written(pa.table({"parent": pa.array([None, "r1"], pa.string())})) == 'parent\n""\nr1\n'
    assert written(pa.table({"n": pa.array([], pa.int64())})) == "n\n"


def test_a_run_id_from_the_csv_is_taken_by_the_next_command(tmp_path, capsys):
    """The walk's idiom: RUN=$(desim sql S "SELECT run_id FROM runs" --csv | tail -1), then a command given
    "$RUN" (here `desim export --run`, which names the run it cannot find)."""
    root = write_walk_study(tmp_path / "walk", n_steps=2)
    assert main(["run", str(root), "--quiet"]) == 0
    table = user_query(StudyLayout(root), "SELECT run_id, status FROM runs")
    text = written(table)
    run_id = text.splitlines()[-1].split(",")[0]
    assert run_id.startswith("r") and '"' not in text
    capsys.readouterr()
    assert main(["export", str(root), "--run", run_id, "--format", "csv", "--out", str(tmp_path / "out")]) == 0, \
        capsys.readouterr().err
    assert (tmp_path / "out" / "panel.csv").is_file()
