"""``desim sql --csv`` tells the empty text from NULL as ``desim export --format csv`` does: ``""`` and an empty
field (it wrote both as an empty field)."""
from __future__ import annotations

import csv
import io

import pyarrow as pa
import pyarrow.csv as pcsv

from desim.cli import main
from desim.commands.csv_text import write_csv
from desim.store.export import csv_options
from walk_study import write_walk_study


def written(table: pa.Table) -> str:
    out = io.BytesIO()
    write_csv(table, out)
    return out.getvalue().decode("utf-8")


def test_the_empty_text_and_null_are_written_apart_as_the_export_writes_them():
    table = pa.table({"note": pa.array(["", None, "x"], pa.string()), "n": pa.array([1, 2, 3], pa.int64())})
    assert written(table) == 'note,n\n"",1\n,2\nx,3\n'
    exported = io.BytesIO()
    pcsv.write_csv(table, exported, csv_options(table))     # the export's writer: the same two spellings
    assert exported.getvalue().decode().splitlines()[1:3] == ['"",1', ",2"]
    rows = list(csv.reader(io.StringIO(written(table), newline="")))
    assert rows[1:3] == [["", "1"], ["", "2"]]               # csv.reader reads both as ''; Arrow does not:
    back = pcsv.read_csv(io.BytesIO(written(table).encode()),
                         convert_options=pcsv.ConvertOptions(strings_can_be_null=True, quoted_strings_can_be_null=False))
    assert back.column("note").to_pylist() == ["", None, "x"]


def test_desim_sql_csv_keeps_them_apart(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk", n_steps=1)
    assert main(["run", str(root), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["sql", str(root), "SELECT '' AS empty, NULL AS nothing, 'a' AS a", "--csv"]) == 0
    assert capsys.readouterr().out == 'empty,nothing,a\n"",,a\n'
