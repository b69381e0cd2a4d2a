"""``latest_run()`` in SQL: the run a command means when given none (the newest made by hand, not one of a
sweep's or an effect's runs), so the README's first query reads the run its reader made, whatever came after."""
from __future__ import annotations

import subprocess
import sys

from desim import load_study, run_study
from desim.experiments.effects import run_effect
from desim.experiments.sweep import run_sweep
from desim.store.catalogue import Catalogue
from desim.store.connection import open_store
from storeq import sql, sql_desim
from walk_study import write_walk_study
from waits import HANG_S


def test_latest_run_is_the_newest_run_made_by_hand(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=6)
    first = run_study(load_study(root, seed=1)).run_id
    assert sql(root, "SELECT latest_run()") == [(first,)]
    mine = run_study(load_study(root, seed=2)).run_id
    run_sweep(root, {"pause": [0.0]}, replicates=2, workers=1)
    run_effect(root, 3, {"lockdown_drift": 0.0}, replicates=2, workers=1)
    newest = sql(root, "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")[0][0]
    assert newest != mine                          # the effect's last branch came after it
    for read in (sql, sql_desim):                  # the stored macro, and a reader's own
        assert read(root, "SELECT latest_run()") == [(mine,)]
    with open_store(root) as con:                  # the same rule as the commands' default run
        assert Catalogue(con).latest_run(prefer_plain=True)["run_id"] == mine
    count = sql(root, "SELECT count(*) FROM panel WHERE run_id = latest_run()")[0][0]
    assert count == 6 * 6


def test_latest_run_with_only_a_sweeps_runs_is_the_newest_of_those(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    run_sweep(root, {"pause": [0.0]}, replicates=2, workers=1)
    newest = sql(root, "SELECT run_id FROM runs ORDER BY started_at DESC, run_id DESC LIMIT 1")[0][0]
    assert sql(root, "SELECT latest_run()") == [(newest,)]


def test_reading_a_study_that_is_not_there_says_so(tmp_path):
    def desim(*args):
        return subprocess.run([sys.executable, "-m", "desim.cli", *args], capture_output=True, text=True,
                              timeout=HANG_S)
    typo = desim("sql", str(tmp_path / "nope"), "SELECT 1")
    assert typo.returncode != 0 and f"{tmp_path / 'nope'} is not a folder: no study there" in typo.stderr
    (tmp_path / "never_run").mkdir()
    never = desim("report", str(tmp_path / "never_run"))
    assert never.returncode != 0 and "does not exist: run the study first (desim run" in never.stderr


def test_the_python_reads_mean_the_same_run_as_latest_run(tmp_path):
    import desim
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    mine = run_study(load_study(root, seed=2)).run_id
    run_effect(root, 2, {"lockdown_drift": 0.0}, replicates=2, workers=1)
    data = desim.open(root)
    assert data.run_ids(None) == [mine] == [sql(root, "SELECT latest_run()")[0][0]]
    assert set(data.panel().column("run_id").to_pylist()) == {mine}
