"""The LLM benchmark's smoke configuration runs end to end and reports every figure it promises, checked
on the figures it writes with ``--json``."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from pytest import approx

from waits import HANG_S

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_llm.py"


@pytest.mark.slow
def test_bench_llm_smoke_reports_the_barrier_ratio_and_cpu_per_call(tmp_path):
    figures = tmp_path / "figures.json"
    run = subprocess.run([sys.executable, str(BENCH), "--smoke", "--json", str(figures)], capture_output=True,
                         text=True, timeout=HANG_S)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()                        # the tables for people are still printed
    f = json.loads(figures.read_text())
    # the smoke configuration: 20 students x 1 step x 3 rounds at 20 ms, concurrency 4 then 8
    students, steps, rounds, latency = f["students"], f["steps"], f["rounds"], f["latency_ms"] / 1000
    assert (students, steps, rounds, f["latency_ms"], f["concurrency"]) == (20, 1, 3, 20.0, [4, 8])
    calls = students * steps * rounds
    assert f["calls"] == calls
    assert [r["concurrency"] for r in f["study"]] == [4, 8]
    for r in f["study"]:
        c = r["concurrency"]
        assert r["calls"] == calls
        assert r["floor_s"] == approx(calls * latency / c)
        assert r["barrier_floor_s"] == approx(steps * rounds * math.ceil(students / c) * latency)
        assert r["wall_s"] >= r["barrier_floor_s"] > 0       # no run beats the round barriers
        assert r["x_barrier_floor"] == approx(r["wall_s"] / r["barrier_floor_s"]) and r["x_barrier_floor"] >= 1
        assert r["calls_per_s"] == approx(calls / r["wall_s"])
        assert r["desim_cpu_ms_per_call"] > 0 and r["stub_cpu_ms_per_call"] > 0
        assert 0 < r["max_in_flight"] <= c                   # the client keeps to its concurrency
    # the cached re-run of the last copy asks the stub nothing
    cached = f["cached_rerun"]
    assert (cached["concurrency"], cached["calls"], cached["cache_hits"], cached["stub_requests"]) == (8, 0, calls, 0)
    assert cached["wall_s"] > 0
    assert f["scripted"]["calls"] == calls and f["scripted"]["wall_s"] > 0 and f["scripted"]["cpu_ms_per_call"] > 0
    http = f["http"]
    assert (http["requests"], http["concurrency"]) == (40, 8)
    clients = {c["client"]: c for c in http["clients"]}
    assert list(clients) == ["desim ChatClient (aiohttp)", "bare asyncio HTTP/1.1",
                             "httpx, one client per slot (before)"]
    for c in clients.values():
        assert c["cpu_ms_per_request"] > 0 if c["installed"] else c["cpu_ms_per_request"] is None
    assert clients["desim ChatClient (aiohttp)"]["installed"] and clients["bare asyncio HTTP/1.1"]["installed"]
    # HTTP rounds alone: 2 rounds of 20 requests at concurrency 8, 3 waves of 20 ms each at least
    r = http["rounds"]
    assert (r["rounds"], r["requests_per_round"], r["concurrency"], r["waves"]) == (2, 20, 8, 3)
    assert r["barrier_floor_ms"] == approx(3 * f["latency_ms"])
    assert [c["client"] for c in r["clients"]] == ["desim ChatClient (aiohttp)", "bare asyncio HTTP/1.1"]
    for c in r["clients"]:
        assert c["rounds_timed"] == 2
        assert c["mean_ms_per_round"] >= c["best_ms_per_round"] >= r["barrier_floor_ms"]
        assert c["x_barrier_floor"] == approx(c["mean_ms_per_round"] / r["barrier_floor_ms"])
