"""A reader uses the stored views when they read the study's folder with this desim's text: defining its own
bound every run's file footers on every connection (a third of a second at 200 runs), and SHOW TABLES listed
each view twice. DuckDB plans a view anew at each query, so runs stored after the views were defined, with
fields of new types, are read all the same."""
from __future__ import annotations

import shutil

from desim import load_study, run_study
from desim.store.connection import definitions_mark, open_store
from walk_study import write_walk_study


def temp_views(con) -> list[str]:
    return [r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE temporary AND NOT internal").fetchall()]


def test_a_reader_of_a_current_store_defines_nothing_and_sees_later_runs(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    first = run_study(load_study(root, seed=1)).run_id
    with open_store(root) as con:
        assert temp_views(con) == []
        names = [r[0] for r in con.execute("SHOW TABLES").fetchall()]
        assert names.count("panel") == 1 and names.count("states") == 1
        assert con.execute("SELECT latest_run()").fetchone() == (first,)
    # a later run whose state has a field more (a new version of the study's code)
    model = root / "model.py"
    model.write_text(model.read_text().replace('return {"x": self.x[agent_id]}',
                                               'return {"x": self.x[agent_id], "far": abs(self.x[agent_id]) > 1}'))
    second = run_study(load_study(root, seed=2)).run_id
    with open_store(root) as con:
        assert temp_views(con) == []
        rows = con.execute("SELECT run_id, count(*), count(state.far) FROM panel GROUP BY run_id ORDER BY run_id")
        assert sorted(rows.fetchall()) == sorted([(first, 18, 0), (second, 18, 18)])


def test_a_store_from_elsewhere_is_read_through_views_of_its_own(tmp_path):
    """A study moved to another folder (its stored views read the old one), or last written by another desim:
    a reader, which may not change the store, defines views for its connection's life."""
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    run = run_study(load_study(root)).run_id
    moved = shutil.move(root, tmp_path / "moved")
    with open_store(moved) as con:
        assert "panel" in temp_views(con)
        assert con.execute("SELECT DISTINCT run_id FROM panel").fetchall() == [(run,)]
    with open_store(moved, read_only=False) as con:       # a writer brings the stored ones up to date
        comment = con.execute("SELECT comment FROM duckdb_views() WHERE view_name = 'states' "
                              "AND NOT temporary").fetchone()[0]
        assert comment == definitions_mark()
    with open_store(moved) as con:
        assert temp_views(con) == []
        assert con.execute("SELECT count(*) FROM states").fetchone()[0] == 6 * 4      # step 0 and 3 steps


def test_a_state_field_named_like_a_panel_column_in_another_case_keeps_its_own_column(tmp_path):
    """SQL names ignore case: a state field 'Step' beside the panel's step is read as state_Step."""
    root = write_walk_study(tmp_path / "walk", n_steps=2)
    model = root / "model.py"
    model.write_text(model.read_text().replace('return {"x": self.x[agent_id]}',
                                               'return {"x": self.x[agent_id], "Step": 7}'))
    run = run_study(load_study(root))
    panel = run.panel()
    assert "state_Step" in panel.column_names and "Step" not in panel.column_names
    assert set(panel.column("state_Step").to_pylist()) == {7} and set(panel.column("step").to_pylist()) == {1, 2}


def test_a_deleted_database_leaves_no_ghost_runs_in_the_new_one(tmp_path, capsys):
    """The views read every run folder of ``runs/data``: after ``rm runs/desim.duckdb`` and a new run, the
    deleted store's run came back in ``panel`` (counted twice over all runs, shown by the dashboard as a run
    it could not open). Its folder is now set aside, not deleted, and the command says where."""
    from desim.cli import main
    from desim.store import StudyLayout
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    old = run_study(load_study(root, seed=1)).run_id
    layout = StudyLayout(root)
    layout.db.unlink()
    assert main(["run", str(root), "-q"]) == 0
    err = capsys.readouterr().err
    assert "desim: note:" in err and "1 run folder of an earlier store was beside it" in err
    with open_store(root) as con:
        runs = [r[0] for r in con.execute("SELECT DISTINCT run_id FROM panel").fetchall()]
        listed = [r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()]
    assert runs == listed and old not in runs and len(runs) == 1
    (aside,) = list(layout.runs.glob("orphaned-*"))
    assert any((aside / f"run_id={old}").rglob("*.parquet"))       # its data kept
    assert not layout.live_file(old).exists()       # nor is its progress file read (the dashboard listed it)


def test_a_database_file_with_a_damaged_block_is_one_error_line(tmp_path, capsys):
    """Bytes overwritten inside ``desim.duckdb`` (a checksum that fails) gave DuckDB's traceback and exit
    status 1 from every command; a truncated file was already said as damaged."""
    from desim.cli import main
    from desim.store import StudyLayout
    root = write_walk_study(tmp_path / "walk", n_steps=8)
    run_study(load_study(root, seed=1))
    db = StudyLayout(root).db
    data = bytearray(db.read_bytes())
    data[40960:40960 + 81920] = b"\xa5" * 81920
    db.write_bytes(bytes(data))
    capsys.readouterr()
    for argv in (["runs", str(root)], ["sql", str(root), "SELECT count(*) FROM runs"], ["run", str(root), "-q"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("desim: error: "), err
        assert "damaged" in err[0] or "store" in err[0]


def test_output_piped_into_a_reader_that_stops_early_ends_quietly(tmp_path):
    """`desim sql ... | head -2`: the reader stops, the pipe breaks; exit 0 with no traceback (a catch-all
    for DuckDB's errors, placed first, once turned this into a BrokenPipeError traceback and exit 1)."""
    import subprocess
    import sys
    root = write_walk_study(tmp_path / "walk", n_steps=2)
    run_study(load_study(root, seed=1))
    desim_cmd = f"{sys.executable} -m desim.cli"
    done = subprocess.run(f'{desim_cmd} sql {root} "SELECT * FROM range(200000)" --csv | head -2; '
                          'exit ${PIPESTATUS[0]}', shell=True, executable="/bin/bash", capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.split() == ["range", "0"], done.stderr
    assert "Traceback" not in done.stderr


def test_a_store_created_by_another_command_a_moment_ago_is_not_taken_for_a_deleted_ones(tmp_path, monkeypatch):
    """Two commands on a study with no store: B saw no database, A created it and its run folder, then B
    got the lock and, taking the database for new, moved A's folder aside (A completed with no rows).
    Whether the database is new is now told while holding its lock."""
    import subprocess
    import sys

    import desim.store.connection as connection
    from desim.store import StudyLayout
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    real, first = connection.duckdb.connect, [True]

    def other_command_first(*args, **kwargs):
        if first[0]:        # between B's look and B's lock, A runs the study whole
            first[0] = False
            done = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root), "-q"], capture_output=True,
                                  text=True)
            assert done.returncode == 0, done.stderr
        return real(*args, **kwargs)

    monkeypatch.setattr(connection.duckdb, "connect", other_command_first)
    b = run_study(load_study(root, seed=2)).run_id
    monkeypatch.undo()
    layout = StudyLayout(root)
    assert not list(layout.runs.glob("orphaned-*"))
    with open_store(root) as con:
        counts = dict(con.execute("SELECT run_id, count(*) FROM panel GROUP BY run_id").fetchall())
    assert len(counts) == 2 and b in counts and all(n > 0 for n in counts.values())
