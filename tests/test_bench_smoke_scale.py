"""The scale, messaging, sweep and SocioVerse2 benchmarks keep running: each in its smoke configuration
(documented in its docstring), in a subprocess, as a user would run it; the figures it prints are checked."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
OUT = BENCH / "out"
NUM = r"(\d[\d,]*(?:\.\d+)?)"


def run(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True,
                          timeout=300, cwd=BENCH)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def stamp(*paths: Path) -> dict:
    """Existence and modification time of each path: a smoke run must leave them as they were."""
    return {p: (p.stat().st_mtime_ns if p.exists() else None) for p in paths}


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def check_messaging_run(r: dict, n: int, path: str) -> None:
    """One bench_messaging run: N agents x 12 steps x 3 rounds, everyone posting every round."""
    assert "error" not in r, r
    assert (r["n"], r["path"], r["status"]) == (n, path, "completed")
    assert r["agent_rounds"] == n * 12 * 3
    assert r["panel_rows"] == n * 12
    assert (r["messages_stored"], r["message_steps"], r["message_rounds"]) == (n * 12 * 3, 12, 3)
    assert r["edges"] == n * 10 // 2                  # Watts-Strogatz k = 10 keeps n k / 2 edges
    assert r["run_s"] > 0 and r["engine_build_s"] > 0
    assert r["observe_us_per_agent_round"] > 0
    assert 0 < r["feed_us_per_agent_round"] <= r["observe_us_per_agent_round"]   # the read is part of observe
    assert 0 < r["peak_rss_gib"] < 8


def test_bench_messaging_smoke_both_paths():
    out = run("bench_messaging.py", "--path", "objects", "--n", "200")
    (r,) = json_lines(out)
    check_messaging_run(r, 200, "objects")
    assert r["messages_mode"] == "objects"
    assert r["wall_s"] >= r["run_s"]

    out = run("bench_messaging.py", "--path", "columnar", "--messages", "arrow", "--n", "200", "400")
    rows = json_lines(out)
    assert [r["n"] for r in rows] == [200, 400]       # one line per N, in order
    for r in rows:
        check_messaging_run(r, r["n"], "columnar")
        assert r["messages_mode"] == "arrow"
        assert r["drain_s"] >= 0


def test_bench_schelling_scale_smoke(tmp_path):
    before = stamp(OUT / "scale_procs", OUT / "scale_noprocs")
    out = run("bench_schelling_scale.py", "--size", "20", "--steps", "2", "--workdir", str(tmp_path))
    assert stamp(*before) == before                  # nothing written under benchmarks/out
    assert (tmp_path / "scale_procs" / "schelling" / "study.json").exists()
    pattern = (rf"^(one SimPy process per agent|agent_processes: false): {NUM} agents x 2 steps = {NUM} panel rows; "
               rf"wall {NUM} s \(set-up {NUM} s, run {NUM} s\), CPU {NUM} s, peak RSS {NUM} GiB, store {NUM} MiB; "
               rf"moves at step 1 {NUM}; final mean same-type share {NUM}, share happy {NUM}$")
    found = {}
    for line in out.splitlines():
        m = re.match(pattern, line)
        if m:
            label, *figures = m.groups()
            found[label] = [float(x.replace(",", "")) for x in figures]
    assert set(found) == {"one SimPy process per agent", "agent_processes: false"}, out
    for agents, rows, wall, setup, run_s, cpu, rss, store, moves, same, happy in found.values():
        assert agents == 320                          # 20 x 20 cells at density 0.8
        assert rows == agents * 2
        assert setup > 0 and run_s > 0 and abs(wall - (setup + run_s)) <= 0.15   # printed to 0.1 s
        assert cpu > 0 and 0 < rss < 8 and store >= 0
        assert 0 < moves <= agents
        assert 0 < same <= 1 and 0 < happy <= 1
    # the two engines (a SimPy process per agent or none) run the same model: the same figures
    procs, noprocs = found["one SimPy process per agent"], found["agent_processes: false"]
    assert procs[8:] == noprocs[8:]
    assert re.search(r"^load average at the end: [\d.]+ on \d+ cores", out, re.M)


def test_bench_sweep_smoke_local_pool():
    out = run("bench_sweep.py", "--set", "homophily=0.3,0.6", "--replicates", "2", "--steps", "3",
              "--baseline-runs", "1", "--configs", "local1,local2")
    assert "study schelling: 4 runs (homophily x 2 values x 2 replicates), steps 3" in out
    base = re.search(r"^baseline: one run in-process ([\d.]+) s \(mean of 1\), load average [\d.]+$", out, re.M)
    assert base and float(base.group(1)) > 0
    after = re.search(r"^baseline after the sweeps: ([\d.]+) s, load average [\d.]+$", out, re.M)
    assert after and float(after.group(1)) > 0
    assert "FAILED" not in out
    table = {}
    for line in out.splitlines():
        m = re.match(r"^(local[12]) +([\d.]+) +([\d.]+) +([\d.]+) +(-?[\d.]+) +([\d.]+)   load [\d.]+$", line)
        if m:
            table[m.group(1)] = [float(x) for x in m.groups()[1:]]
    assert set(table) == {"local1", "local2"}, out
    for config, (wall, runs_per_s, per_core, overhead, in_worker) in table.items():
        workers = int(config[5:])
        assert wall > 0 and in_worker > 0
        assert abs(runs_per_s - 4 / wall) <= 0.2 / (wall * (wall - 0.05)) + 0.005   # wall printed to 0.1 s
        assert abs(per_core - wall * workers / 4) <= 0.05 * workers + 0.01
        assert abs(overhead - (per_core - float(base.group(1)))) <= 0.02
    means = re.search(r"^mean_same_share by homophily \(last sweep, mean \[95% CI\]\): (.*)$", out, re.M)
    assert means, out
    cells = re.findall(r"([\d.]+): (-?[\d.]+) \[(-?[\d.]+), (-?[\d.]+)\]", means.group(1))
    assert [c[0] for c in cells] == ["0.3", "0.6"]
    for _, mean, low, high in cells:
        assert float(low) <= float(mean) <= float(high) and 0 < float(mean) <= 1


def test_bench_socioverse_smoke_desim_side_only():
    before = stamp(OUT / "socioverse.json", BENCH / ".venv-socioverse")
    out = run("bench_socioverse.py", "--n", "200", "--no-socioverse")
    assert stamp(*before) == before                  # no venv built, no figures file written
    rows = json_lines(out)
    ring, messaging = rows[:2], rows[2:]
    assert [(r["n"], r["k"]) for r in ring] == [(200, 1), (200, 3)]
    for row in ring:
        assert set(row) == {"n", "k", "desim columnar (ring_bc)", "desim per-agent (opinion_diffusion, bus)"}
        for name in ("desim columnar (ring_bc)", "desim per-agent (opinion_diffusion, bus)"):
            r = row[name]
            assert r["status"] == "completed"
            assert r["panel_rows"] == 200 * 12
            assert r["wall_s"] > 0 and r["cpu_s"] > 0 and 0 < r["peak_mib"] < 8192
            assert 0 < r["final_mean"] < 1 and 0 < r["final_sd"] < 0.5   # opinions in [0, 1]
    (msg,) = messaging
    assert set(msg) == {"n", "desim InMemoryMessageBus + NeighborFeed", "desim ColumnarFeed"}
    check_messaging_run(msg["desim InMemoryMessageBus + NeighborFeed"], 200, "objects")
    check_messaging_run(msg["desim ColumnarFeed"], 200, "columnar")
    for r in (msg["desim InMemoryMessageBus + NeighborFeed"], msg["desim ColumnarFeed"]):
        assert r["cpu_s"] > 0
        assert abs(r["wall_s"] - (r["engine_build_s"] + r["run_s"])) < 1e-9   # build + run, imports excluded
    # the Markdown section: four ring rows, two messaging rows, no SocioVerse2 row
    assert "## desim's side only (--no-socioverse: SocioVerse2 not run)" in out
    table = [line for line in out.splitlines() if line.startswith("| 200 |")]
    assert len(table) == 6 and not any("socioverse2" in line for line in table)
    ring_line = r"^\| 200 \| [13] \| desim [^|]+ \| [\d.]+ \| [\d.]+ \| [\d,]+ \| \d+ \| 0\.\d{4} \| 0\.\d{4} \|"
    assert all(re.match(ring_line, line) for line in table[:4]), table
    assert all(re.search(r"\| 7,200 \| \d+ \|$", line) for line in table[4:]), table
