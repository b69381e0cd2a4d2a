"""An effect's treatments read their control from an extract of it (its rows copied into a DuckDB file of their
own, no data folder): opening that extract said its run's data folder was missing ("restore the folder from a
copy") on every effect. A note of missing data is for a store whose runs keep their rows in data folders."""
from __future__ import annotations

import shutil
import subprocess
import sys
import warnings

from desim.errors import DesimNotice
from desim.store import StudyLayout, open_store
from walk_study import write_walk_study
from waits import HANG_S


def test_an_effect_says_nothing_of_missing_data_and_a_deleted_folder_still_does(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_agents=4, n_steps=5, lockdown_day=4)
    effect = subprocess.run([sys.executable, "-m", "desim.cli", "effect", str(root), "--at-step", "3", "--set",
                             "lockdown_day=3", "--replicates", "2", "--workers", "2", "-q"],
                            capture_output=True, text=True, timeout=HANG_S)
    assert effect.returncode == 0, effect.stderr
    assert "missing" not in effect.stderr, effect.stderr          # the workers' notes reach stderr too
    layout = StudyLayout(root)
    with open_store(layout) as con:
        (run_id,), = con.execute("SELECT run_id FROM runs WHERE kind = 'branch' LIMIT 1").fetchall()
    shutil.rmtree(layout.run_dir(run_id))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with open_store(layout):
            pass
    assert any(issubclass(w.category, DesimNotice) and run_id in str(w.message) and "missing" in str(w.message)
               for w in said)
