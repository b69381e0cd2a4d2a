"""Is a run that says ``running`` really running?

A process that is killed (SIGKILL, a node lost, a power cut) cannot update its
runs row, so the row says ``running`` for ever. The row also records the pid
and host of the process, and the run's live file (``desim.store.live``) is its
heartbeat, rewritten every few seconds. A ``running`` run is **stale** when its
process is gone from this host, or when its heartbeat is older than
``STALE_AFTER`` seconds (a run on another host, or a row written before pids
were recorded). A stale run can be resumed (``desim run S --resume RUN``).
"""
from __future__ import annotations

import os
import socket
from datetime import datetime, timezone
from typing import Any

from desim.store.files import RunFiles
from desim.store.layout import StudyLayout
from desim.store.live import read_live

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


_CLAIMS: dict[str, int] = {}      # folder -> the open owner file this process holds locked while it works there


def _lockable(path) -> int | None:
    """The owner file ``path`` opened and locked by this process (an exclusive ``flock``, which the system
    drops when the process ends, however it ends), or None when another process holds it."""
    import fcntl
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def folder_owner(folder) -> dict[str, Any] | None:
    """The process working in a sweep's or an effect's worker folder (``{"pid", "host"}``, its owner file), or
    None when there is none or it is gone. A process of this host holds its owner file locked while it works
    (:func:`claim_folder`); one of another host is taken as alive: whether it runs cannot be told from here."""
    import json
    path = StudyLayout.owner_file(folder)
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(owner, dict):
        return None
    if owner.get("host") == socket.gethostname() and str(folder.resolve()) not in _CLAIMS:
        fd = _lockable(path)
        if fd is not None:          # nobody holds it: gone, unless its pid still runs (a desim before the lock)
            os.close(fd)
            if not pid_alive(int(owner.get("pid") or 0)) or int(owner.get("pid") or 0) == os.getpid():
                return None
    return owner


def claim_folder(folder, what: str) -> None:
    """Mark ``folder`` (a sweep's or an effect's worker folder) as this process's, refusing when another live
    process works in it: two processes running the same sweep or effect would each take the other's worker
    stores for leftovers of a killed attempt. The owner file is locked for as long as this process works
    there (:func:`release_folder`), so of two processes claiming at once exactly one gets it. ``what`` names
    it in the error (``sweep sw1a2b``)."""
    import json
    key = str(folder.resolve())
    if key in _CLAIMS:
        return
    folder.mkdir(parents=True, exist_ok=True)
    path = StudyLayout.owner_file(folder)
    owner = folder_owner(folder)
    mine = (os.getpid(), socket.gethostname())
    fd = _lockable(path) if owner is None else None      # of two processes here, one gets the lock
    if fd is None:
        owner = owner or {}
        raise RuntimeError(f"{what} is running (pid {owner.get('pid')} on {owner.get('host')}): wait for it to "
                           "end, or stop it, before running it again")
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": mine[0], "host": mine[1]}).encode(), 0)
    _CLAIMS[key] = fd


def release_folder(folder) -> None:
    """This process no longer works in ``folder`` (removed, or left for a resume): its owner file's lock goes."""
    fd = _CLAIMS.pop(str(folder.resolve()), None)
    if fd is not None:
        os.close(fd)


def remove_abandoned(folder, before=None) -> bool:
    """Remove ``folder`` when the process that worked in it is gone, holding its owner file's lock meanwhile so
    that no process claims it as it goes (``before(folder)`` runs first: keep what it holds). Whether it went."""
    import shutil
    path = StudyLayout.owner_file(folder)
    if not path.exists() or folder_owner(folder) is not None:     # ours, a live one's, or another host's
        return False
    fd = _lockable(path)
    if fd is None:
        return False
    try:
        if before is not None:
            before(folder)
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.close(fd)
    return True


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


MISSING_DATA = "missing data"
"""The status a run is shown with when its data folder is gone (:func:`data_missing`)."""


def health_of(layout: StudyLayout, row: dict[str, Any]) -> str:
    """:func:`run_health` with the run's live file read from the study's live folder; ``missing data`` for a
    run whose data folder is gone (:func:`data_missing`), whatever its row says."""
    if data_missing(layout, row):
        return MISSING_DATA
    if row.get("status") != "running":
        return row.get("status")
    return run_health(row, read_live(layout.live_file(row["run_id"])))


def data_missing(layout: StudyLayout, row: dict[str, Any]) -> bool:
    """Whether a run that ended having stored steps has no data folder (``rm -rf runs/data/run_id=R``, a copy
    of the study without it): its row still says ``completed 10/10`` while every view has lost its rows. A
    run going keeps its steps in that folder's journal, and one that failed at set-up (``last_step`` -1) has
    none to lose."""
    return _ended_with_steps(row.get("status"), row.get("last_step")) and not layout.run_dir(row["run_id"]).is_dir()


def _ended_with_steps(status: Any, last: Any) -> bool:
    return status != "running" and last is not None and last >= 0


def runs_without_data(layout: StudyLayout, rows) -> set[str]:
    """Of ``rows`` (``(run_id, status, last_step)``), the runs :func:`data_missing` holds of, told from one
    listing of the data folder rather than a look per run (every reader opening asks)."""
    ended = [run_id for run_id, status, last in rows if _ended_with_steps(status, last)]
    if not ended:
        return set()
    try:
        present = set(os.listdir(layout.data))
    except OSError:
        present = set()
    return {run_id for run_id in ended if layout.run_dir(run_id).name not in present}


def note_missing_data(layout: StudyLayout, rows) -> None:
    """Say (a :class:`~desim.errors.DesimNotice`) which of the runs ``rows`` (``(run_id, status, last_step)``,
    oldest first) have lost their data folder: a query of ``panel`` otherwise just has no rows of them, without a
    word."""
    lost = runs_without_data(layout, rows)
    gone = [run_id for run_id, _, _ in rows if run_id in lost]
    if not gone:
        return
    import warnings

    from desim.errors import DesimNotice
    shown = ", ".join(gone[:5]) + (f" and {len(gone) - 5} more" if len(gone) > 5 else "")
    one = len(gone) == 1
    warnings.warn(DesimNotice(
        f"run{'' if one else 's'} {shown} {'is' if one else 'are'} in the runs table, but {'its' if one else 'their'} "
        f"data folder{'' if one else 's'} ({layout.run_dir(gone[0])}{'' if one else ', ...'}) "
        f"{'is' if one else 'are'} missing (deleted or moved?): the panel, metrics and every other table have no "
        f"rows of {'it' if one else 'them'}, and desim runs shows {'it' if one else 'them'} as '{MISSING_DATA}'; "
        f"restore {'the folder' if one else 'them'} from a copy"), stacklevel=3)


def last_step(layout: StudyLayout, run_id: str, recorded: int | None = -1, status: str = "running") -> int:
    """The last step a run has on disk. ``runs.last_step`` is written when a run ends, so it is
    exact for every status but ``running``; a run in progress, or one that was killed, has more
    steps in its step folders than it says, and only then are they looked at."""
    recorded = recorded if recorded is not None else -1
    if status != "running":
        return recorded
    return max(recorded, RunFiles(layout.data, run_id).last_step())
