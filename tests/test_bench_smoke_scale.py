"""The scale, messaging, sweep and SocioVerse2 benchmarks keep running: each in its smoke configuration
(documented in its docstring), in a subprocess, as a user would run it. The figures each writes with
``--json`` are checked for what they mean, not the layout of what it prints."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pytest import approx

from waits import HANG_S

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
OUT = BENCH / "out"


def run(tmp_path: Path, script: str, *args: str) -> dict:
    """Run a benchmark with ``--json``; its figures."""
    figures = tmp_path / "figures.json"
    figures.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, str(BENCH / script), *args, "--json", str(figures)],
                          capture_output=True, text=True, timeout=HANG_S, cwd=BENCH)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip()                       # the figures for people are still printed
    return json.loads(figures.read_text())


def stamp(*paths: Path) -> dict:
    """Existence and modification time of each path: a smoke run must leave them as they were."""
    return {p: (p.stat().st_mtime_ns if p.exists() else None) for p in paths}


def check_messaging_run(r: dict, n: int, path: str) -> None:
    """One bench_messaging run: N agents x 12 steps x 3 rounds, everyone posting every round
    (its seconds are rounded to 0.01, its microseconds to 0.001)."""
    assert "error" not in r, r
    assert (r["n"], r["path"], r["status"]) == (n, path, "completed")
    assert r["agent_rounds"] == n * 12 * 3
    assert r["panel_rows"] == n * 12
    assert (r["messages_stored"], r["message_steps"], r["message_rounds"]) == (n * 12 * 3, 12, 3)
    assert r["edges"] == n * 10 // 2                  # Watts-Strogatz k = 10 keeps n k / 2 edges
    assert r["run_s"] > 0 and r["engine_build_s"] > 0
    assert r["observe_us_per_agent_round"] > 0
    assert 0 < r["feed_us_per_agent_round"] <= r["observe_us_per_agent_round"]   # the read is part of observe
    assert r["observe_us_per_agent_round"] * r["agent_rounds"] / 1e6 == approx(r["observe_s"], abs=0.006)
    assert r["observe_s"] <= r["run_s"] + 0.01        # observing is part of the run
    assert r["drain_s"] >= 0
    assert 0 < r["vm_hwm_gib"] < 8 and 0 < r["peak_rss_gib"] < 8


def test_bench_messaging_smoke_both_paths(tmp_path):
    f = run(tmp_path, "bench_messaging.py", "--path", "objects", "--n", "200")
    assert (f["path"], f["messages"], f["n"]) == ("objects", "objects", [200])
    (r,) = f["runs"]
    check_messaging_run(r, 200, "objects")
    assert r["messages_mode"] == "objects"
    assert r["wall_s"] >= r["engine_build_s"] + r["run_s"] - 0.015   # wall = imports + build + run

    f = run(tmp_path, "bench_messaging.py", "--path", "columnar", "--messages", "arrow", "--n", "200", "400")
    assert (f["path"], f["messages"]) == ("columnar", "arrow")
    assert [r["n"] for r in f["runs"]] == [200, 400]  # one run per N, in order
    for r in f["runs"]:
        check_messaging_run(r, r["n"], "columnar")
        assert r["messages_mode"] == "arrow"
        assert r["wall_s"] >= r["engine_build_s"] + r["run_s"] - 0.015


def test_bench_schelling_scale_smoke(tmp_path):
    before = stamp(OUT / "scale_procs", OUT / "scale_noprocs")
    f = run(tmp_path, "bench_schelling_scale.py", "--size", "20", "--steps", "2", "--workdir", str(tmp_path))
    assert stamp(*before) == before                  # nothing written under benchmarks/out
    assert (tmp_path / "scale_procs" / "schelling" / "study.json").exists()
    assert (f["size"], f["steps"]) == (20, 2)
    assert [(v["variant"], v["agent_processes"]) for v in f["variants"]] == [("procs", True), ("noprocs", False)]
    for v in f["variants"]:
        assert v["agents"] == 320                     # 20 x 20 cells at density 0.8
        assert v["panel_rows"] == v["agents"] * 2
        assert v["setup_s"] > 0 and v["run_s"] > 0 and v["wall_s"] == approx(v["setup_s"] + v["run_s"])
        assert v["cpu_s"] > 0 and 0 < v["peak_rss_gib"] < 8 and v["db_mb"] > 0
        assert 0 < v["moves_step1"] <= v["agents"]
        assert 0 < v["final"]["mean_same_share"] <= 1 and 0 < v["final"]["share_happy"] <= 1
    # the two engines (a SimPy process per agent or none) run the same model: the same figures
    procs, noprocs = f["variants"]
    assert procs["moves_step1"] == noprocs["moves_step1"] and procs["final"] == noprocs["final"]
    assert f["load_average"] >= 0 and f["cores"] >= 1


def test_bench_sweep_smoke_local_pool(tmp_path):
    f = run(tmp_path, "bench_sweep.py", "--set", "homophily=0.3,0.6", "--replicates", "2", "--steps", "3",
            "--baseline-runs", "1", "--configs", "local1,local2")
    assert (f["study"], f["parameter"], f["values"]) == ("schelling", "homophily", ["0.3", "0.6"])
    assert (f["replicates"], f["runs"], f["steps"], f["baseline_runs"]) == (2, 4, 3, 1)
    assert f["baseline_s"] > 0 and f["baseline_after_s"] > 0
    assert [c["config"] for c in f["configs"]] == ["local1", "local2"]
    for c in f["configs"]:
        assert (c["backend"], c["workers"]) == ("local", int(c["config"][5:]))
        assert (c["completed"], c["failed"], c["runs_timed_in_worker"]) == (4, 0, 4)
        assert c["wall_s"] > 0 and 0 < c["in_worker_s"] <= c["wall_s"]   # a run is part of its sweep
        assert c["runs_per_s"] == approx(4 / c["wall_s"])
        assert c["s_per_run_per_core"] == approx(c["wall_s"] * c["workers"] / 4)
        assert c["overhead_per_run_s"] == approx(c["s_per_run_per_core"] - f["baseline_s"])
        assert c["ray_init_s"] is None
    assert f["metric"] == "mean_same_share"
    assert [m["value"] for m in f["means"]] == [0.3, 0.6]
    for m in f["means"]:
        assert m["n"] == 2                            # both replicates completed
        assert m["ci_low"] <= m["mean"] <= m["ci_high"] and 0 < m["mean"] <= 1


def test_bench_socioverse_smoke_desim_side_only(tmp_path):
    before = stamp(OUT / "socioverse.json", BENCH / ".venv-socioverse")
    f = run(tmp_path, "bench_socioverse.py", "--n", "200", "--no-socioverse")
    assert stamp(*before) == before                  # no venv built, no figures file written
    assert (f["n"], f["socioverse2"]) == (200, False)
    assert [(row["n"], row["k"]) for row in f["ring"]] == [(200, 1), (200, 3)]
    ring_systems = {"desim columnar (ring_bc)", "desim per-agent (opinion_diffusion, bus)"}
    for row in f["ring"]:
        assert set(row) == {"n", "k"} | ring_systems  # desim's two rows only, no SocioVerse2 row
        for name in ring_systems:
            r = row[name]
            assert r["status"] == "completed"
            assert r["panel_rows"] == 200 * 12
            assert r["wall_s"] > 0 and r["cpu_s"] > 0 and 0 < r["peak_mib"] < 8192
            assert 0 < r["final_mean"] < 1 and 0 < r["final_sd"] < 0.5   # opinions in [0, 1]
    (msg,) = f["messaging"]
    assert set(msg) == {"n", "desim InMemoryMessageBus + NeighborFeed", "desim ColumnarFeed"}
    assert msg["n"] == 200
    check_messaging_run(msg["desim InMemoryMessageBus + NeighborFeed"], 200, "objects")
    check_messaging_run(msg["desim ColumnarFeed"], 200, "columnar")
    for r in (msg["desim InMemoryMessageBus + NeighborFeed"], msg["desim ColumnarFeed"]):
        assert r["cpu_s"] > 0
        assert r["peak_mib"] == approx(r["peak_rss_gib"] * 1024)
        assert abs(r["wall_s"] - (r["engine_build_s"] + r["run_s"])) < 1e-9   # build + run, imports excluded
