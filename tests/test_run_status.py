"""Run status that tells the truth, with real processes and real signals: SIGTERM,
SIGHUP and Ctrl-C end a run ``interrupted`` at a step boundary (and resume gives
the uninterrupted panel), a SIGKILLed run shows as ``stale``, a killed sweep
parent leaves no process behind, and a sweep waits for a run that holds the store."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import desim
from desim.cli import main
from desim.store import StudyLayout
from desim.store.health import health_of, run_health
from desim.experiments.sweep import run_sweep
from storeq import sql
from walk_study import write_walk_study
from waits import HANG_S


def start(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "desim.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def live_step(root: Path) -> int:
    """The step the single run in progress has committed, from its live file (-1 if none yet)."""
    for path in (root / "runs" / "live").glob("*.json"):
        try:
            return json.loads(path.read_text())["step"]
        except (OSError, ValueError):
            pass
    return -1


def wait_for(cond, timeout=HANG_S, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def state_panel(root, run_id):
    return sql(root, "SELECT step, agent_id, state::VARCHAR, payload::VARCHAR FROM panel WHERE run_id = ? "
                     "ORDER BY step, agent_id", [run_id])


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_ends_the_run_interrupted_at_a_step_boundary(tmp_path, sig):
    root = write_walk_study(tmp_path / "walk", n_steps=30, pause=0.15)
    proc = start("run", root)
    wait_for(lambda: live_step(root) >= 2, what="step 2")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 128 + sig, err           # 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP: as shells do
    (run_id, status, last, error, pid), = sql(root, "SELECT run_id, status, last_step, error, pid FROM runs")
    assert status == "interrupted" and pid == proc.pid
    assert f"stopped by {sig.name} after step {last}" in error and f"--resume {run_id}" in error
    assert 2 <= last < 30
    assert sql(root, "SELECT max(step), count(DISTINCT step) FROM panel") == [(last, last)]
    assert f"resume with: desim run {root} --resume {run_id}" in out
    if sig != signal.SIGTERM:
        return
    done = start("run", root, "--resume", run_id)
    out, err = done.communicate(timeout=HANG_S)
    assert done.returncode == 0, err
    assert sql(root, "SELECT status, last_step FROM runs WHERE run_id = ?", [run_id]) == [("completed", 30)]
    fresh = desim.run_study(desim.load_study(root, params={"pause": "0"}))  # the pause changes no value
    assert state_panel(root, run_id) == state_panel(root, fresh.run_id)


@pytest.mark.slow
def test_a_sigkilled_run_shows_as_stale(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk", n_steps=30, pause=0.15)
    proc = start("run", root)
    wait_for(lambda: live_step(root) >= 1, what="step 1")
    proc.kill()
    proc.wait(timeout=HANG_S)
    rows = [dict(zip(("run_id", "status", "pid", "host", "heartbeat_at", "started_at"), r)) for r in sql(
        root, "SELECT run_id, status, pid, host, heartbeat_at, started_at FROM runs")]
    (row,) = rows
    assert row["status"] == "running" and row["pid"] == proc.pid
    assert health_of(StudyLayout(root), row) == "stale"
    assert main(["runs", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"{row['run_id']}  run  stale (was running as pid {proc.pid}" in out
    assert f"--resume {row['run_id']}" in out
    # the rule without a pid on this host: the freshest heartbeat older than the threshold
    elsewhere = {**row, "host": "elsewhere", "heartbeat_at": None, "started_at": None}
    assert run_health(elsewhere, {"updated_at": "2000-01-01T00:00:00+00:00"}, stale_after=60) == "stale"
    assert run_health(elsewhere, {"updated_at": "2999-01-01T00:00:00+00:00"}) == "running"
    assert run_health({**row, "host": "elsewhere"}, {"updated_at": "2000-01-01T00:00:00+00:00"}) == "running"
    assert run_health({**row, "status": "completed"}) == "completed"


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(ppid, []).append(int(entry.name))
    return out


def _descendants(pid: int) -> set[int]:
    tree, found, todo = _children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_a_killed_sweep_parent_leaves_no_process_behind(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=200, pause=0.1)
    proc = start("sweep", root, "--set", "lockdown_day=3,4", "--workers", "2")
    wait_for(lambda: len(list((root / "runs" / "sweeps").glob("*/live/*.json"))) >= 2, what="two workers running")
    family = _descendants(proc.pid)
    assert len(family) >= 3        # the forkserver and two workers at least
    proc.kill()
    proc.wait(timeout=HANG_S)
    wait_for(lambda: not any(_alive(p) for p in family), timeout=HANG_S, what="the sweep's processes to end")
    # the next sweep removes the dead sweep's worker files
    leftover = list((root / "runs" / "sweeps").iterdir())
    assert leftover
    write_walk_study(root, n_steps=3)
    result = run_sweep(root, {"lockdown_day": ["2"]}, replicates=1, workers=1)
    assert result.completed == 1 and not (root / "runs" / "sweeps").exists()


@pytest.mark.slow
def test_a_sweep_and_a_run_of_one_study_go_side_by_side(tmp_path):
    """A run holds the study's database only at its start and end, so a sweep merging meanwhile
    neither aborts nor waits long."""
    root = write_walk_study(tmp_path / "walk", n_steps=60, pause=0.1)
    proc = start("run", root)
    wait_for(lambda: live_step(root) >= 1, what="the run to start")
    notes = []
    result = run_sweep(root, {"lockdown_day": ["2", "3"]}, replicates=1, workers=2, steps=3, on_wait=notes.append)
    out, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 0, err
    assert result.completed == 2
    assert all("Another process holds it" in n for n in notes)   # at most a short wait at the run's ends
    statuses = dict(sql(root, "SELECT coalesce(sweep_id, 'run'), status FROM runs WHERE sweep_id IS NULL"))
    assert statuses == {"run": "completed"}


def test_a_run_stopped_by_the_study_exits_3_and_its_resume_exits_0(tmp_path, capsys):
    """An interruption that is no signal (StopRun: a spent LLM budget, or study code) has its own exit
    status, so `desim run ... && next` does not go on as if the run were complete."""
    from probe_study import write_probe_study
    root = write_probe_study(tmp_path / "probe", n_steps=6, decision_args={"mode": "stop_once", "fail_step": 4})
    assert main(["run", str(root)]) == 3
    out = capsys.readouterr().out
    (run_id, status), = sql(root, "SELECT run_id, status FROM runs")
    assert status == "interrupted" and f"--resume {run_id}" in out
    assert main(["run", str(root), "--resume", run_id]) == 0
    assert sql(root, "SELECT status, last_step FROM runs") == [("completed", 6)]


def _holder(db: Path) -> subprocess.Popen:
    """Another process holding the study's database open read-only (a notebook's ``duckdb.connect``) until
    its stdin is closed; returned once it holds it."""
    code = ("import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True); print('held', flush=True); "
            "sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", code, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def _stderr_until(proc: subprocess.Popen, text: str) -> list[str]:
    """The run's stderr lines up to the first holding ``text`` (a failure if the run ends first)."""
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"the run ended ({proc.wait()}) without saying {text!r}: {''.join(lines)}")


def test_a_run_waits_for_a_store_another_process_holds_and_says_so(tmp_path):
    """A notebook's read-only connection held the database: the run said nothing while it waited at its
    start, and at its end, all its steps done, it failed after 30 s (left 'stale'). It now says once
    that it waits, and goes on when the store is free."""
    from dashboard_helpers import held_study, wait_for_file
    study = held_study(tmp_path, (2,), name="held")
    db = StudyLayout(study).db
    argv = [sys.executable, "-m", "desim.cli", "run", str(study), "--steps", "3", "--set", "n_agents=30"]
    # at its end: the store is taken while the run is held in step 2
    began = time.monotonic()
    run = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_file(study / "held-2", run)
        holder = _holder(db)
        (study / "release-2").touch()
        said = _stderr_until(run, "waits for the study's store")
        assert said[-1].startswith("desim: note: run ") and "its steps all done" in said[-1]
        assert "it gives up, its steps kept, and desim run --resume" in said[-1]     # signals cannot stop it
        holder.stdin.close()
        holder.wait(timeout=HANG_S)
        out, err = run.communicate(timeout=HANG_S)
        elapsed = time.monotonic() - began
    finally:
        (study / "release-2").touch()
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    run_id = out.split()[1].rstrip(":")
    assert sql(study, "SELECT status, last_step FROM runs WHERE run_id = ?", [run_id]) == [("completed", 3)]
    (wall,), = sql(study, "SELECT wall_seconds FROM runs WHERE run_id = ?", [run_id])
    assert wall <= elapsed
    # at its start
    holder = _holder(db)
    began = time.monotonic()
    run = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        said = _stderr_until(run, "waits for the study's store")
        assert "lock" in said[-1].lower() and "Ctrl-C stops the run, nothing recorded" in said[-1]
        holder.stdin.close()
        out, err = run.communicate(timeout=HANG_S)
        elapsed = time.monotonic() - began
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    # the 5 s or more it waited (the note comes after 100 tries 50 ms apart) are not the run's own time
    run_id = out.split()[1].rstrip(":")
    (wall,), = sql(study, "SELECT wall_seconds FROM runs WHERE run_id = ?", [run_id])
    assert wall <= elapsed - 4.5, (wall, elapsed)
