"""The store benchmarks keep running: each in a tiny configuration, in a subprocess, as a user would run it."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def run(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True,
                          timeout=600, cwd=BENCH)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_bench_panel_store_smoke():
    out = run("bench_panel_store.py", "--size", "12", "--steps", "3", "--repeat", "1")
    assert re.search(r"Schelling 12x12: 3 steps, [\d,]+ panel rows", out)
    for label in ("parquet step folders (the store)", "DuckDB JSON text (before)", "DuckDB typed insert"):
        line = next(l for l in out.splitlines() if l.startswith(label))
        assert float(line.split()[-1]) > 0           # ms per step
    assert re.search(r"fixed cost per step .*: [\d.]+ ms", out)
    assert re.search(r"merge at the end of the run: [\d.]+ s CPU", out)


def test_bench_schelling_mesa_smoke_without_mesa():
    out = run("bench_schelling_mesa.py", "--seeds", "1", "--steps", "3", "--size", "10", "--no-mesa")
    assert "| desim, whole run, full typed panel (Parquet, durable per step) |" in out
    assert "same panel: True" in out                 # agent processes on and off give one panel
    assert re.search(r"store per panel row: [\d.]+ us writing steps", out)
