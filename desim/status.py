"""Is a run that says ``running`` really running?

A process that is killed (SIGKILL, a node lost, a power cut) cannot update its
runs row, so the row says ``running`` for ever. The row also records the pid
and host of the process, and the run's live file (``desim.live``) is its
heartbeat, rewritten every few seconds. A ``running`` run is **stale** when its
process is gone from this host, or when its heartbeat is older than
``STALE_AFTER`` seconds (a run on another host, or a row written before pids
were recorded). A stale run can be resumed (``desim run S --resume RUN``).
"""
from __future__ import annotations

import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HEARTBEAT_SECONDS = 10.0
STALE_AFTER = 120.0


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this host (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def live_file(db_path: str | Path, run_id: str) -> dict[str, Any] | None:
    path = Path(db_path).parent / "live" / f"{run_id}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _age(stamp: Any, now: datetime) -> float | None:
    if stamp is None:
        return None
    if isinstance(stamp, str):
        try:
            stamp = datetime.fromisoformat(stamp)
        except ValueError:
            return None
    if stamp.tzinfo is None:        # the store keeps naive UTC
        stamp = stamp.replace(tzinfo=timezone.utc)
    return (now - stamp).total_seconds()


def run_health(row: dict[str, Any], live: dict[str, Any] | None = None, *,
               stale_after: float = STALE_AFTER) -> str:
    """The run's status as stored, or ``stale`` for a ``running`` run whose process is gone."""
    if row.get("status") != "running":
        return row.get("status")
    now = datetime.now(timezone.utc)
    pid, host = row.get("pid"), row.get("host")
    if live and live.get("pid") == pid:
        host = live.get("host", host)
    if pid and host == socket.gethostname() and not pid_alive(int(pid)):
        return "stale"
    ages = [a for a in (_age((live or {}).get("updated_at"), now), _age(row.get("heartbeat_at"), now),
                        _age(row.get("started_at"), now)) if a is not None]
    if ages and min(ages) > stale_after:
        return "stale"
    return "running"


def health_of(db_path: str | Path, row: dict[str, Any]) -> str:
    """:func:`run_health` with the run's live file read from beside its database."""
    if row.get("status") != "running":
        return row.get("status")
    return run_health(row, live_file(db_path, row["run_id"]))
