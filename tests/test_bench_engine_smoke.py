"""The smoke configuration of ``benchmarks/bench_engine.py`` (issue 13's 100,000-agent benchmark; its numbers
are in benchmarks/RESULTS.md): the machine check and every row of the table, at N = 200."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_engine.py"


def test_bench_engine_smoke():
    results = BENCH.parent / "RESULTS.md"
    before = results.read_bytes()
    proc = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    check = re.search(r"Machine check .*: ([\d.]+) us per agent-round", out)
    assert check and 0 < float(check.group(1)) < 100
    table = out[out.index("| path | N |"):]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| columnar") or
            line.startswith("| per-agent")]
    assert [(r[0].strip(), r[2].strip(), r[3].strip(), r[4].strip()) for r in rows] == [
        ("columnar", "1", "yes", "yes"), ("columnar", "3", "yes", "yes"), ("columnar", "3", "no", "yes"),
        ("columnar", "3", "yes", "no"), ("per-agent", "1", "yes", "yes"), ("per-agent", "3", "yes", "yes"),
        ("per-agent", "1", "yes", "no")]
    for r in rows:
        n, wall, rate, panel_rows = int(r[1].replace(",", "")), float(r[5]), float(r[6].replace(",", "")), r[7]
        assert n == 200 and wall > 0 and float(r[8]) > 0
        assert panel_rows.strip() == f"{200 * 12:,}"             # one row per agent per step, 12 steps
        assert abs(rate - 200 * 12 * int(r[2]) / wall) <= 0.01 * rate + 1
    assert results.read_bytes() == before                       # a smoke run writes no results
