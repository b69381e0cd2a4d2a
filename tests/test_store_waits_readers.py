"""A reader waits for a store another process holds for writing, as a writer waits for one a reader holds.

A resumed run merges its whole panel while it holds the store for writing (4 s at 12,000 agents); ``desim sql``
and ``desim runs`` then gave up after one second with DuckDB's lock text as the whole message. They now wait,
say after a few seconds which process holds the store, and answer once it is free; a reader that must not wait
(the dashboard's few tries) gives up in words: who holds the file and what to do."""
from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading

import pytest

from desim.cli import main
from desim.store import StoreBusyError, StudyLayout
from desim.store.connection import _reader
from walk_study import write_walk_study
from waits import HANG_S, holding


@pytest.fixture
def walk(tmp_path):
    """A small study with one completed run, so that it has a store."""
    root = write_walk_study(tmp_path / "walk", n_steps=2)
    assert main(["run", str(root), "--quiet"]) == 0
    return root




class Stderr:
    """A process's stderr, read line by line by a thread, so that a process that says nothing is seen to say
    nothing (within the hang guard) instead of blocking the test on a read."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines, self.said = proc, queue.Queue(), []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def until(self, text: str) -> str:
        """The first line that holds ``text``; a failure if the process ends first or nothing says it."""
        while True:
            try:
                line = self.lines.get(timeout=HANG_S)
            except queue.Empty:
                raise AssertionError(f"nothing said {text!r} in {HANG_S:g} s: {''.join(self.said)}") from None
            if line is None:
                raise AssertionError(f"the process ended ({self.proc.wait()}) without saying {text!r}: "
                                     f"{''.join(self.said)}")
            self.said.append(line)
            if text in line:
                return line

    def rest(self) -> str:
        """What the process said after the lines read so far, once it has ended."""
        out = []
        while (line := self.lines.get(timeout=HANG_S)) is not None:
            out.append(line)
        return "".join(out)


@pytest.mark.slow
@pytest.mark.parametrize("command", [["sql", "SELECT count(*) AS n FROM runs", "--csv"], ["runs"]])
def test_a_command_reading_a_store_held_for_writing_waits_says_who_holds_it_and_answers(walk, command):
    argv = [sys.executable, "-m", "desim.cli", command[0], str(walk), *command[1:]]
    with holding(StudyLayout(walk).db, write=True) as holder:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stderr = Stderr(proc)
        try:
            note = stderr.until("waits for it")
        except BaseException:
            proc.kill()
            raise
        assert note.startswith("desim: note: ") and f"process {holder.pid} (" in note, note
        assert "IO Error" not in note and "Conflicting lock" not in note     # in words, not DuckDB's text
        assert proc.poll() is None      # still waiting while the holder keeps the file
    out = proc.stdout.read()
    after = stderr.rest()
    assert proc.wait(HANG_S) == 0, after
    assert "error" not in after
    if command[0] == "sql":
        assert out.split() == ["n", "1"]
    else:
        assert "completed" in out


def test_a_reader_that_gives_up_says_who_holds_the_store_and_what_to_do(walk):
    """The dashboard's reader tries a few times and gives up (it must never hang): the error names the
    process, and the run whose progress file names that process, instead of DuckDB's text alone."""
    layout = StudyLayout(walk)
    with holding(layout.db, write=True) as holder:
        with pytest.raises(StoreBusyError) as refused:
            _reader(layout, 2, 0.01)
        said = str(refused.value)
        assert f"locked for writing by process {holder.pid} (" in said and "Try again when it is done" in said
        assert "IO Error" not in said and "Conflicting lock" not in said
        # a run of the study merging its data: its progress file carries the pid that holds the file
        live = layout.live_file("rmerging")
        live.parent.mkdir(parents=True, exist_ok=True)
        live.write_text(json.dumps({"run_id": "rmerging", "status": "running", "phase": "finishing",
                                    "pid": holder.pid, "host": socket.gethostname()}))
        with pytest.raises(StoreBusyError) as refused:
            _reader(layout, 2, 0.01)
        assert f"locked for writing by run rmerging (process {holder.pid}), which is storing its data" in \
            str(refused.value)
        os.remove(live)


def test_a_reader_in_the_process_holding_the_store_is_told_at_once(walk):
    """No wait frees a file this process holds: the same-process refusal is said at once, not waited on."""
    import duckdb
    con = duckdb.connect(str(StudyLayout(walk).db))
    try:
        with pytest.raises(StoreBusyError, match="this Python process holds a writing connection"):
            _reader(StudyLayout(walk), 10**9, 0.05)
    finally:
        con.close()


def test_a_reader_in_another_thread_gives_up_after_its_tries(walk):
    """A server's request (the dashboard's, in a worker thread) must answer: it says the store is busy, in
    words, rather than wait as a command does for as long as a notebook keeps a writing connection."""
    from desim.store import open_store
    failed = []

    def read():
        try:
            with open_store(walk):
                pass
        except StoreBusyError as e:
            failed.append(str(e))

    with holding(StudyLayout(walk).db, write=True) as holder:
        thread = threading.Thread(target=read)
        thread.start()
        thread.join(HANG_S)
    assert not thread.is_alive()
    assert len(failed) == 1 and f"locked for writing by process {holder.pid} (" in failed[0]
