"""The smoke configuration of ``benchmarks/bench_engine.py`` (issue 13's 100,000-agent benchmark; its numbers
are in benchmarks/RESULTS.md): the machine check and every row of the table, at N = 200, checked on the
figures it writes with ``--json``."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pytest import approx

from waits import HANG_S

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_engine.py"

# (path, K, agent processes, GC managed) of each row, in order
CONFIGS = [("columnar", 1, True, True), ("columnar", 3, True, True), ("columnar", 3, False, True),
           ("columnar", 3, True, False), ("per-agent", 1, True, True), ("per-agent", 3, True, True),
           ("per-agent", 1, True, False)]


@pytest.mark.slow
def test_bench_engine_smoke(tmp_path):
    results = BENCH.parent / "RESULTS.md"
    before = results.read_bytes()
    figures = tmp_path / "figures.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--smoke", "--json", str(figures)], capture_output=True,
                          text=True, timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip()                       # the table for people is still printed
    f = json.loads(figures.read_text())
    assert (f["smoke"], f["steps"]) == (True, 12)
    check = f["machine_check"]
    assert check["agent_processes"] == 200 and 0 < check["us_per_agent_round"] < 100
    assert [(r["path"], r["k"], r["agent_processes"], r["gc_managed"]) for r in f["rows"]] == CONFIGS
    for r in f["rows"]:
        assert r["n"] == 200 and r["wall_s"] > 0 and r["peak_mib"] > 0
        assert r["panel_rows"] == 200 * 12                    # one row per agent per step, 12 steps
        assert r["decisions_per_s"] == approx(200 * 12 * r["k"] / r["wall_s"])   # agents x steps x rounds / wall
    assert f["written"] is False and results.read_bytes() == before   # a smoke run writes no results
