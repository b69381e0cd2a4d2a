"""Live progress files: how a run in progress is seen without touching its database.

After each step is stored, the run rewrites a small JSON file ``runs/live/<run_id>.json`` (status,
step, metrics so far), atomically (write a temporary file, then ``os.replace``), so a reader never
sees a half-written file, and never one that claims more than the store holds. The dashboard shows
runs in progress from these files, which cost no database write per step.

The file is also the run's heartbeat: it carries the pid and host of the process, and a
:class:`Heartbeat` thread rewrites it every few seconds even while a long step (an LLM round) is in
flight, so "running" can be told apart from "the process is gone" (``desim.store.health``).

When the run's steps are over, before it merges its journal into the store (the study's database is then held
for writing, for seconds on a run of millions of rows), the file says so: ``"phase": "finishing"`` with the
last step, until ``finish`` writes how the run ended. A reader can then say "storing its data" rather than
show a run that seems stuck, or nothing.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from datetime import datetime, timezone
from pathlib import Path


class LiveFile:
    """Progress of one run, mirrored to ``<runs dir>/live/<run_id>.json``."""

    def __init__(self, path: Path, run_id: str, study_id: str, n_steps: int, kind: str, *,
                 seed: int | None = None, overrides_text: str = ""):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # the seed as text (19 digits do not survive a JavaScript number); overrides_text says what the
        # run changed from the study's files (--set ...), shown beside a live run as beside a stored one
        self.data = {"run_id": run_id, "study_id": study_id, "kind": kind, "status": "running",
                     "step": -1, "n_steps": n_steps, "metrics": {}, "error": None,
                     "seed": None if seed is None else str(seed), "overrides_text": overrides_text,
                     "pid": os.getpid(), "host": socket.gethostname()}
        self.every, self._written = 0.2, float("-inf")
        self.dirty = False      # a step not yet in the file (skipped because the last write was recent)
        self._lock = threading.Lock()

    def step(self, step: int, metrics: dict[str, float]) -> None:
        for name, value in metrics.items():
            series = self.data["metrics"].setdefault(name, [])
            series.extend([None] * (step - len(series)))   # a metric first reported late
            if len(series) > step:
                series[step] = value
            else:
                series.append(value)
        self.data["step"] = step
        if time.monotonic() - self._written >= self.every:   # a fast run rewrites it a few times a second
            self._write()
        else:           # the heartbeat writes it within ``every`` s, even if the next step is long in coming
            self.dirty = True

    def finishing(self) -> None:
        """The steps are over and the run is storing its data (still ``running`` until :meth:`finish`)."""
        self.data["phase"] = "finishing"
        self._write()

    def finish(self, status: str, error: str | None) -> None:
        self.data["status"], self.data["error"] = status, error
        self.data.pop("phase", None)
        self._write()

    def beat(self) -> None:
        """Rewrite the file unchanged but for its time: the process is alive."""
        self._write()

    def _write(self) -> None:
        with self._lock:    # the heartbeat thread and the run's thread both write
            self.dirty = False
            self._written = time.monotonic()
            self.data["updated_at"] = datetime.now(timezone.utc).isoformat()
            tmp = self.path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(self.data), encoding="utf-8")
            os.replace(tmp, self.path)


class Heartbeat:
    """A daemon thread calling ``live.beat()`` every ``every`` seconds until stopped, and writing a step the
    run skipped (``live.dirty``) within ``live.every`` seconds: a run that then waits (on an LLM, a long
    step) shows its latest step at once, not at the next beat."""

    def __init__(self, live: LiveFile, every: float):
        self.live, self.every = live, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="desim-heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        live = self.live
        while not self._stop.wait(min(self.every, live.every)):
            try:
                if live.dirty or time.monotonic() - live._written >= self.every:
                    live.beat()
            except OSError:     # the runs folder went away: the run will notice on its own
                pass

    def stop(self) -> None:
        """No more beats: the run has stored its data (the recorder stops the heartbeat only after its
        end-of-run merge, so a merge of minutes is not taken for a process that is gone)."""
        self._stop.set()
        self._thread.join(timeout=5)


def read_live(path: Path) -> dict | None:
    """One live file's contents, or None when it is missing or unreadable."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def live_runs(folder: Path) -> list[dict]:
    """The progress files in ``folder`` (``StudyLayout.live``), oldest update first.

    Each file is replaced atomically, so it is either the old or the new version; one that still
    fails to parse (written by hand, or by a crashed tool) is skipped."""
    if not folder.is_dir():
        return []
    out = [d for d in map(read_live, folder.glob("*.json")) if d and isinstance(d.get("run_id"), str)]
    return sorted(out, key=lambda d: str(d.get("updated_at", "")))
