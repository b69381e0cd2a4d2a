"""The LLM benchmark's smoke configuration runs end to end and reports every figure it promises."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_llm.py"


def test_bench_llm_smoke_reports_the_barrier_ratio_and_cpu_per_call():
    run = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    rows = [line.split("|")[1:-1] for line in run.stdout.splitlines() if line.startswith("| ") and
            line.split("|")[1].strip().isdigit()]
    assert [int(r[0]) for r in rows] == [4, 8]
    for concurrency, wall, _, _, barrier, ratio, desim_cpu, stub_cpu, in_flight in rows:
        assert float(wall) >= float(barrier) > 0 and float(ratio) >= 1    # no run beats the round barriers
        assert float(desim_cpu) > 0 and float(stub_cpu) > 0
        assert 0 < int(in_flight) <= 8
    assert "cached re-run (c=8):" in run.stdout and "0 calls, 60 cache hits" in run.stdout
    clients = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in run.stdout.splitlines()
               if line.startswith("| ") and "ms/request" not in line and not line.split("|")[1].strip().isdigit()}
    assert float(clients["desim ChatClient (aiohttp)"]) > 0 and float(clients["bare asyncio HTTP/1.1"]) > 0
    assert "HTTP rounds alone: 2 rounds of 20 requests at concurrency 8" in run.stdout
