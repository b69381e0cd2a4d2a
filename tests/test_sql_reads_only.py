"""``desim sql`` and ``StudyData.sql`` read the store: a read-only DuckDB connection still lets COPY ... TO,
EXPORT DATABASE and ATTACH write files anywhere (the study's model.py, a run's own Parquet files)."""
from __future__ import annotations

import pytest

import desim
from desim import load_study, run_study
from desim.cli import main
from desim.store.reader import QueryError
from walk_study import write_walk_study


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    root = write_walk_study(tmp_path_factory.mktemp("sql") / "walk", n_steps=3)
    run_study(load_study(root))
    return root


def test_statements_that_write_are_refused_and_nothing_is_written(walk, capsys):
    model = (walk / "model.py").read_text()
    panel = sorted(walk.rglob("panel.parquet"))
    sizes = [p.stat().st_size for p in panel]
    for text in (f"COPY (SELECT 'pwned' AS x) TO '{walk / 'model.py'}' (FORMAT csv, HEADER false)",
                 f"COPY (SELECT 1 AS x) TO '{panel[0]}' (FORMAT parquet)",
                 f"EXPORT DATABASE '{walk / 'out'}'",
                 f"ATTACH '{walk / 'other.duckdb'}' AS other",
                 "SELECT 1; CREATE TEMP TABLE t AS SELECT 1", "install httpfs",
                 f"EXPLAIN ANALYZE COPY (SELECT 'pwned') TO '{walk / 'model.py'}' (HEADER false)",
                 f"/* a note */ COPY (SELECT 1) TO '{walk / 'model.py'}'"):
        assert main(["sql", str(walk), text]) == 2
        kind = ("CREATE" if text.startswith("SELECT 1;") else "COPY" if text.startswith(("EXPLAIN", "/*"))
                else text.split()[0].upper())            # as typed; EXPLAIN ANALYZE runs what it explains
        assert f"desim sql reads the store; {kind} statements are refused" in capsys.readouterr().err
        with pytest.raises(QueryError):
            desim.open(walk).sql(text)
    assert (walk / "model.py").read_text() == model
    assert [p.stat().st_size for p in panel] == sizes
    assert not (walk / "out").exists() and not (walk / "other.duckdb").exists()


def test_queries_of_every_reading_kind_still_answer(walk, capsys):
    for text in ("SELECT count(*) FROM panel", "SHOW TABLES", "DESCRIBE panel", "EXPLAIN SELECT 1",
                 "EXPLAIN ANALYZE SELECT count(*) FROM metrics", "-- a note\nSELECT 1",
                 "PRAGMA version", "FROM metrics LIMIT 1", "WITH a AS (SELECT 1 AS x) SELECT x FROM a"):
        assert main(["sql", str(walk), text]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert desim.open(walk).sql("SELECT count(*) AS n FROM panel").column("n").to_pylist() == [18]
