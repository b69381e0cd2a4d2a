"""A sweep's or an effect's worker folder belongs to one live process: its owner file is locked while that
process works there. Two `desim sweep --resume` of a killed sweep both read a dead owner, both wrote their own
and both went ahead (about 1 try in 25): each removed the other's worker stores, and every run failed."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from desim.store.health import claim_folder, folder_owner, release_folder, remove_abandoned

HOLDER = textwrap.dedent('''
    import sys
    from pathlib import Path
    from desim.store.health import claim_folder
    claim_folder(Path(sys.argv[1]), "sweep sw1")
    print("claimed", flush=True)
    sys.stdin.read()
''')


@pytest.fixture
def holder(tmp_path):
    folder = tmp_path / "runs" / "sweeps" / "sw1"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "claimed"        # the readiness signal
    yield folder, proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_a_folder_a_live_process_holds_is_refused_and_taken_once_it_is_killed(holder):
    folder, proc = holder
    with pytest.raises(RuntimeError, match=rf"sweep sw1 is running \(pid {proc.pid} on "):
        claim_folder(folder, "sweep sw1")
    assert folder_owner(folder)["pid"] == proc.pid
    assert remove_abandoned(folder) is False and folder.is_dir()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert folder_owner(folder) is None                   # its lock went with it, whatever its pid now names
    claim_folder(folder, "sweep sw1")
    assert folder_owner(folder)["pid"] == os.getpid()
    release_folder(folder)


def test_an_abandoned_folder_is_removed_under_its_lock(holder):
    folder, proc = holder
    (folder / "w1.duckdb").write_bytes(b"x")
    kept = []
    proc.kill()
    proc.wait()
    assert remove_abandoned(folder, before=lambda f: kept.append(sorted(p.name for p in f.iterdir())))
    assert not folder.exists() and kept == [["owner.json", "w1.duckdb"]]


RACER = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from desim.store.health import claim_folder
    folder, go = Path(sys.argv[1]), Path(sys.argv[2])
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    try:
        claim_folder(folder, "sweep sw1")
        print("claimed", flush=True)
    except RuntimeError:
        print("refused", flush=True)
    sys.stdin.read()
''')


def test_of_processes_claiming_a_dead_sweep_s_folder_at_once_exactly_one_gets_it(tmp_path):
    for trial in range(4):
        folder = tmp_path / f"t{trial}" / "sw1"
        folder.mkdir(parents=True)
        (folder / "owner.json").write_text('{"pid": 999999999, "host": "%s"}' % __import__("socket").gethostname())
        go = tmp_path / f"go{trial}"
        racers = [subprocess.Popen([sys.executable, "-c", RACER, str(folder), str(go)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True) for _ in range(3)]
        try:
            assert [r.stdout.readline().strip() for r in racers] == ["ready"] * 3
            go.touch()
            said = sorted(r.stdout.readline().strip() for r in racers)
        finally:
            for r in racers:
                r.kill()
                r.wait()
        assert said == ["claimed", "refused", "refused"]
