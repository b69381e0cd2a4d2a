"""One damaged data file (a disk that filled, a copy cut short) stops every query of its table, since a view
reads every run's files: the commands say which file and which run it is, and how to read the others, not a
traceback."""
from __future__ import annotations

import shutil
import subprocess
import sys

from desim import load_study, run_study
from walk_study import write_walk_study
from waits import HANG_S


def desim(*args):
    return subprocess.run([sys.executable, "-m", "desim.cli", *args], capture_output=True, text=True, timeout=HANG_S)


def test_a_damaged_parquet_file_is_named_with_its_run_and_moving_it_aside_reads_the_rest(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    kept = run_study(load_study(root, seed=1)).run_id
    damaged = run_study(load_study(root, seed=2)).run_id
    folder = root / "runs" / "data" / f"run_id={damaged}"
    (folder / "metrics.parquet").write_bytes(b"junk")
    assert desim("runs", str(root)).returncode == 0        # what does not read the damaged table still works
    for args in (("sql", str(root), "SELECT count(*) FROM metrics"), ("report", str(root))):
        done = desim(*args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert (f"{folder / 'metrics.parquet'} cannot be read (damaged or truncated?), and every view reads it: it "
                f"is the metrics table of run {damaged}. Restore it from a copy, or move {folder} out of the store "
                "to read the other runs") in done.stderr
    shutil.move(folder, tmp_path / "aside")
    done = desim("sql", str(root), "SELECT DISTINCT run_id FROM panel", "--csv")
    assert done.returncode == 0 and done.stdout.split() == ["run_id", kept]


def test_a_damaged_file_of_the_users_own_is_not_blamed_on_the_store(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=2)
    run_study(load_study(root))
    mine = tmp_path / "mine.parquet"
    mine.write_bytes(b"junk")
    done = desim("sql", str(root), f"SELECT * FROM '{mine}'")
    assert done.returncode == 2 and "too small to be a Parquet file" in done.stderr
    assert "every view reads it" not in done.stderr
