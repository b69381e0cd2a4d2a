"""The live progress file: every step reaches it soon after it closes, even when the next step is long
in coming (a run waiting on an LLM, a slow step): the dashboard shows where a run really is."""
from __future__ import annotations

import json
import time

from desim.store.live import Heartbeat, LiveFile
from waits import HANG_S


def read_step(live: LiveFile) -> int:
    return json.loads(live.path.read_text())["step"]


def test_a_step_written_soon_after_another_reaches_the_file_without_waiting_for_the_next(tmp_path):
    live = LiveFile(tmp_path / "live" / "r1.json", "r1", "s", 5, "run")
    beat = Heartbeat(live, every=3600)          # no periodic beat to hide behind
    try:
        live.step(0, {"m": 1.0})
        assert read_step(live) == 0
        live.step(1, {"m": 2.0})                # within the 0.2 s of the last write: skipped for now
        assert live.dirty and read_step(live) == 0
        deadline = time.monotonic() + HANG_S
        while read_step(live) != 1:             # the heartbeat thread writes it; the run does nothing more
            assert time.monotonic() < deadline, "step 1 never reached the live file"
            time.sleep(0.01)
        data = json.loads(live.path.read_text())
        assert data["metrics"] == {"m": [1.0, 2.0]} and not live.dirty
    finally:
        beat.stop()
