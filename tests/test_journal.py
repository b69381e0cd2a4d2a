"""A run's journal: what a crash leaves readable, what a resume keeps, and what a reader sees of a
run in progress (every committed step, never half of one, never a row twice)."""
from __future__ import annotations

import os
import subprocess
import sys

import duckdb
import pyarrow as pa
import pytest

import desim
from desim.store import StudyLayout, journal
from desim.store.connection import define_views
from desim.store.files import RunFiles
from desim.store.schema import MIGRATIONS
from storeq import sql, sql_desim
from test_run_status import live_step, state_panel, wait_for
from walk_study import write_walk_study
from waits import HANG_S


def step_tables(step: int, n: int = 3, extra: bool = False) -> dict[str, pa.Table]:
    state = {"x": pa.array([float(step * 10 + i) for i in range(n)])}
    if extra:
        state["y"] = pa.array([f"s{step}"] * n)
    panel = pa.table({"step": pa.array([step] * n, pa.int32()), "agent_id": [f"a{i}" for i in range(n)],
                      "state": pa.StructArray.from_arrays(list(state.values()), names=list(state))})
    metrics = pa.table({"step": pa.array([step], pa.int32()), "name": ["m"], "value": [float(step)]})
    return {"panel": panel, "metrics": metrics}


def catalogue_connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for statement in MIGRATIONS:
        con.execute(statement)
    return con


def test_what_a_crash_leaves_is_every_committed_step_and_nothing_of_the_next(tmp_path):
    folder = tmp_path / "journal"
    j = journal.Journal(folder)
    j.start()
    for step in (1, 2, 3):
        j.append(step, step_tables(step))
    committed = {k: os.path.getsize(folder / k) for k in j.sizes}
    # step 4 in flight when the process dies: half its panel batch, and its commit line cut short
    with open(folder / "panel.0.arrows", "ab") as f:
        f.write(b"\xff\xff\xff\xff" + b"\x00" * 37)
    with open(folder / journal.LOG, "ab") as f:
        f.write(b'{"step": 4, "sizes": {"panel.0.arr')
    last, tables = journal.read(folder)
    assert last == 3
    panel = pa.Table.from_batches(tables["panel"])
    assert panel.column("step").to_pylist() == [1] * 3 + [2] * 3 + [3] * 3
    # a resume cuts the torn bytes off and appends after them, in a new segment
    j2 = journal.Journal(folder)
    j2.start()
    assert {k: os.path.getsize(folder / k) for k in committed} == committed
    j2.append(4, step_tables(4))
    j2.close()
    last, tables = journal.read(folder)
    assert last == 4 and "panel.1.arrows" in journal.last_commit(folder)["sizes"]
    assert pa.Table.from_batches(tables["panel"]).column("step").to_pylist()[-3:] == [4, 4, 4]
    journal.cut_after(folder, 2)
    last, tables = journal.read(folder)
    assert last == 2 and pa.Table.from_batches(tables["metrics"]).column("value").to_pylist() == [1.0, 2.0]


@pytest.mark.parametrize("fill", [b"\xff", b"\x00"])
@pytest.mark.parametrize("garbled_from", [1, 4, 9])
def test_the_last_step_a_garbled_journal_reads_whole_is_found(tmp_path, garbled_from, fill):
    """A power loss can leave a segment its full length with blocks never written: the log names the bytes,
    they do not read. A resume goes on from the last commit whose bytes all read (found by bisection)."""
    folder = tmp_path / "journal"
    j = journal.Journal(folder)
    j.start()
    for step in range(1, 10):
        j.append(step, step_tables(step))
    j.close()
    logged = journal.commits(folder)
    start = logged[garbled_from - 2]["sizes"]["panel.0.arrows"] if garbled_from > 1 else 0
    with open(folder / "panel.0.arrows", "r+b") as f:         # step ``garbled_from``'s panel bytes onwards
        f.seek(start + 8)
        f.write(fill * (os.path.getsize(folder / "panel.0.arrows") - start - 8))     # zeros: blocks never written
    with pytest.raises(desim.errors.StoreError, match=r"panel\.0\.arrows is damaged .* steps up to 9"):
        journal.read(folder)
    readable = journal.readable_commit(folder)
    expected = garbled_from - 1 if garbled_from > 1 else None   # step 1 garbled: nothing reads
    assert (readable["step"] if readable else None) == expected
    files = RunFiles(tmp_path, "r")
    files.dir = tmp_path                                       # the journal folder above is this run's
    assert files.damaged_past()[0] == (-1 if expected is None else expected)


def test_a_field_that_appears_later_is_a_new_segment_and_null_before(tmp_path):
    data = tmp_path / "data"
    files = RunFiles(data, "r1")
    files.start()
    files.write_step(1, step_tables(1))
    files.write_step(2, step_tables(2, extra=True))
    assert sorted(journal.last_commit(data / "run_id=r1" / "journal")["sizes"]) == [
        "metrics.0.arrows", "panel.0.arrows", "panel.1.arrows"]
    con = catalogue_connection()
    define_views(con, data, temp=True)
    live = con.execute("SELECT step, state.x, state.y FROM panel ORDER BY step, agent_id").fetchall()
    assert live[0] == (1, 10.0, None) and live[-1] == (2, 22.0, "s2")
    files.merge()
    assert not (data / "run_id=r1" / "journal").exists()
    con2 = catalogue_connection()
    define_views(con2, data, temp=True)
    assert con2.execute("SELECT step, state.x, state.y FROM panel ORDER BY step, agent_id").fetchall() == live
    # a connection that read the journal before the merge does not count the run twice after it
    assert con.execute("SELECT count(*) FROM panel").fetchone()[0] == 6


def test_a_reader_sees_a_running_run_next_to_finished_ones(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=4)
    done = desim.run_study(desim.load_study(root))
    layout = StudyLayout(root)
    live = RunFiles(layout.data, "rlive")
    live.start()
    live.write_step(1, step_tables(1))
    agents = sql(root, "SELECT count(*) FROM initial_states WHERE run_id = ?", [done.run_id])[0][0]
    rows = dict(sql_desim(root, "SELECT run_id, count(*) FROM panel GROUP BY run_id"))
    assert agents > 0 and rows == {done.run_id: 4 * agents, "rlive": 3}
    assert sql_desim(root, "SELECT count(*) FROM states WHERE run_id = 'rlive'") == [(3,)]
    # a plain DuckDB connection sees the ended runs only
    assert dict(sql(root, "SELECT run_id, count(*) FROM panel GROUP BY run_id")) == {done.run_id: 4 * agents}


@pytest.mark.slow
def test_a_killed_run_keeps_its_committed_steps_and_resumes_to_the_same_panel(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=20, pause=0.1)
    proc = subprocess.Popen([sys.executable, "-m", "desim.cli", "run", str(root)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for(lambda: live_step(root) >= 3, what="step 3")
    proc.kill()
    proc.wait(timeout=HANG_S)
    (run_id, status), = sql(root, "SELECT run_id, status FROM runs")
    assert status == "running"              # killed: nothing recorded its end
    steps = sql_desim(root, "SELECT step, count(*) FROM panel WHERE run_id = ? GROUP BY step ORDER BY step",
                      [run_id])
    last = steps[-1][0]
    assert last >= 3 and [s for s, _ in steps] == list(range(1, last + 1))
    assert len({n for _, n in steps}) == 1  # every step whole
    # its report says what the run is: stale (its process gone), with the steps it stored, not "running, 0"
    from desim.report import write_report
    card = (write_report(root, run_id, out_dir=tmp_path / "report")["markdown"]).read_text()
    assert f"| steps | {last} of 20 (step) |" in card
    assert "| status | stale (its process is gone before the run ended: desim run --resume" in card
    res = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root), "--resume", run_id],
                         capture_output=True, text=True, timeout=HANG_S)
    assert res.returncode == 0, res.stderr
    assert sql(root, "SELECT status, last_step FROM runs WHERE run_id = ?", [run_id]) == [("completed", 20)]
    fresh = desim.run_study(desim.load_study(root, params={"pause": "0"}))
    assert state_panel(root, run_id) == state_panel(root, fresh.run_id)
