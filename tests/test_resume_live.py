"""Resuming a run whose process is still going is refused. It was accepted: the resume cut the journal the
running process still appended to, and the run ended ``completed`` with steps missing from its panel."""
from __future__ import annotations

import subprocess
import sys

import duckdb

from storeq import sql
from test_run_status import live_step, start, wait_for
from walk_study import write_walk_study
from waits import HANG_S

GATE = '''
        if t == 3:                                  # held here until the test lets it go on
            import pathlib
            gate = pathlib.Path(__file__).parent / "go"
            deadline = time.monotonic() + 300
            while not gate.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        if self.pause:'''


def test_a_run_still_going_is_not_resumed_beside_itself(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=6)
    model = root / "model.py"
    model.write_text(model.read_text().replace("\n        if self.pause:", GATE, 1))
    first = start("run", root)
    try:
        wait_for(lambda: live_step(root) >= 2, what="step 2 of the first run")
        (run_id,), = sql(root, "SELECT run_id FROM runs")
        # a run started long ago: its row's own stamps are old, its live file's heartbeat is what is fresh
        con = duckdb.connect(str(root / "runs" / "desim.duckdb"))
        con.execute("UPDATE runs SET started_at = started_at - INTERVAL 10 MINUTE, "
                    "heartbeat_at = heartbeat_at - INTERVAL 10 MINUTE")
        con.close()
        again = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(root), "--resume", run_id],
                               capture_output=True, text=True, timeout=HANG_S)
        assert again.returncode == 2, again.stderr
        assert f"run {run_id} is running (pid {first.pid}" in again.stderr
    finally:
        (root / "go").write_text("go")
        out, err = first.communicate(timeout=HANG_S)
    assert first.returncode == 0, err
    assert sql(root, "SELECT status, last_step FROM runs") == [("completed", 6)]
    assert sql(root, "SELECT count(DISTINCT step), count(*) FROM panel") == [(6, 6 * 6)]     # steps 1..6, 6 agents
