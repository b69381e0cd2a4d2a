"""The one hang guard for waits in the tests.

Tests wait on readiness signals (a line printed, a file written, an element drawn); this is the
generous limit that only tells a hang from slowness on a loaded machine, never a speed goal
(speed goals live in benchmarks/).
"""
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

HANG_S = float(os.environ.get("DESIM_TEST_HANG_S", "600"))


@contextmanager
def holding(db: Path, write: bool = False):
    """Another process holding ``db`` open (read-only, as a notebook's ``duckdb.connect(..., read_only=True)``,
    or for writing) until the block ends; the block starts once it holds it."""
    code = ("import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == 'ro'); "
            "print('held', flush=True); sys.stdin.read(); con.close()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(db), "rw" if write else "ro"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.stdin.close()
        proc.wait(HANG_S)
