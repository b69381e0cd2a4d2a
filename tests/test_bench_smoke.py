"""The store benchmarks keep running: each in a tiny configuration, in a subprocess, as a user would run it.
The figures each writes with ``--json`` are checked for what they mean (positive, consistent with each
other, the same-panel flag true), not the layout of the tables it prints."""
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


def run(tmp_path: Path, script: str, *args: str) -> dict:
    """Run a benchmark with ``--json``; its figures."""
    figures = tmp_path / "figures.json"
    figures.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, str(BENCH / script), *args, "--json", str(figures)],
                          capture_output=True, text=True, timeout=HANG_S, cwd=BENCH)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip()                       # the tables for people are still printed
    return json.loads(figures.read_text())


def test_bench_panel_store_smoke(tmp_path):
    f = run(tmp_path, "bench_panel_store.py", "--size", "12", "--steps", "3", "--repeat", "1")
    rows, steps = f["panel_rows"], f["steps"]
    assert (f["size"], steps, f["repeat"]) == (12, 3, 1)
    assert f["rows_per_step"] == round(0.8 * 12 * 12)  # Schelling at density 0.8: one row per agent per step
    assert rows == f["rows_per_step"] * steps
    assert 0 < f["moves"] <= rows
    assert [layout["layout"] for layout in f["layouts"]] == ["parquet", "json", "typed"]
    for layout in f["layouts"]:
        cpu = layout["cpu_s"]
        assert cpu > 0
        assert layout["ms_per_step"] == approx(cpu / steps * 1e3)
        assert layout["us_per_row"] == approx(cpu / rows * 1e6)
        assert layout["us_per_row_less_fixed"] == approx((cpu - f["fixed_cpu_s"]) / rows * 1e6)
    assert f["fixed_cpu_s"] > 0 and f["fixed_ms_per_step"] == approx(f["fixed_cpu_s"] / steps * 1e3)
    assert f["merge_cpu_s"] > 0 and f["merge_us_per_row"] == approx(f["merge_cpu_s"] / rows * 1e6)
    cpu = {layout["layout"]: layout["cpu_s"] for layout in f["layouts"]}
    assert f["ratio_json_to_parquet"] == approx(cpu["json"] / cpu["parquet"])


def test_bench_schelling_mesa_smoke_without_mesa(tmp_path):
    f = run(tmp_path, "bench_schelling_mesa.py", "--seeds", "1", "--steps", "3", "--size", "10", "--no-mesa")
    agents, steps = round(0.8 * 10 * 10), 3
    assert (f["seeds"], f["steps"], f["size"], f["mesa"]) == (1, steps, 10, False)
    assert f["same_panel"] is True                   # agent processes on and off give one panel
    (seed,) = f["per_seed"]
    assert seed["seed"] == 1 and seed["desim_agents"] == agents and seed["identical_panel"] is True
    assert 0 < seed["desim_share"] <= 1 and 0 < seed["desim_happy"] <= 1
    table = {row["model"]: row for row in f["table"]}
    assert list(table) == ["mesa_process", "desim_process", "mesa", "mesa_panel", "desim", "desim_steps", "optout",
                           "optout_steps"]
    for model in ("mesa_process", "mesa", "mesa_panel"):             # not measured under --no-mesa
        assert table[model]["agent_steps_per_s_wall"] is None and table[model]["agent_steps_per_s_cpu"] is None
    # the whole `desim run` process: imports and all, so slower than the same run inside this process
    assert seed["desim_process_wall"] > seed["desim_wall"]
    for model in ("desim_process", "desim", "desim_steps", "optout", "optout_steps"):
        for clock in ("wall", "cpu"):
            seconds = seed[f"{model}_{clock}"]
            assert seconds > 0
            assert table[model][f"agent_steps_per_s_{clock}"] == approx(agents * steps / seconds)
    assert (table["desim"]["mean_same_share"], table["desim"]["share_happy"]) == (seed["desim_share"],
                                                                                    seed["desim_happy"])
    assert all(ratio is None for ratio in f["ratios"].values())   # against Mesa, which did not run
    b = f["breakdown"]
    assert b["rows"] == agents * steps and b["cpu_s"] > 0 and b["wall_s"] > 0
    parts = b["parts_cpu_s"]
    store, merge = parts["store: write step (Parquet folder)"], parts["store: merge step files at the end"]
    assert store > 0 and merge > 0 and all(seconds >= 0 for seconds in parts.values())
    # the parts are inside the run: what remains is the rest of its CPU time
    assert b["everything_else_cpu_s"] >= 0 and b["everything_else_cpu_s"] == approx(b["cpu_s"] - sum(parts.values()))
    assert b["store_us_per_row_writing"] == approx(store / b["rows"] * 1e6)
    assert b["store_us_per_row_merging"] == approx(merge / b["rows"] * 1e6)
    assert b["agent_steps_per_s_cpu_without_store"] == approx(b["rows"] / (b["cpu_s"] - store - merge))
