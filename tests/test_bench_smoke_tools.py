"""The branch, dashboard and report benchmarks keep running: each in its smoke configuration (the one its
docstring names), in a subprocess, as a user would run it, with the figures it prints checked."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"


def run(tmp_path: Path, script: str, *args: str) -> str:
    """Run a benchmark from a folder of its own, its temporary files under ``tmp_path``; they must be gone after."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not list(tmp.iterdir()), f"{script} left temporary files: {list(tmp.iterdir())}"
    return proc.stdout


def test_bench_branch_smoke(tmp_path):
    out = run(tmp_path, "bench_branch.py", "--n", "200")
    assert "## Branch at step 10 against the full 12-step run (issue 5)" in out
    rows = re.findall(r"^\| (\w+) \(([\w-]+)\) \| ([\d,]+) \| ([\d.]+) s \| ([\d.]+) s \| ([\d.]+) \|$", out, re.M)
    assert [(r[0], r[1], r[2]) for r in rows] == [("opinion_diffusion", "per-agent", "200"),
                                                   ("ring_bc", "columnar", "200")]
    for _, _, _, full, fork, ratio in rows:
        full, fork, ratio = float(full), float(fork), float(ratio)
        assert full >= 0 and fork >= 0 and ratio > 0
        # the ratio is the branch over the full run (both shown to 0.1 s, the ratio to 0.01)
        low = (fork - 0.05) / (full + 0.05) - 0.005
        high = (fork + 0.05) / (full - 0.05) + 0.005 if full > 0.05 else float("inf")
        assert low <= ratio <= high, (full, fork, ratio)
    # without --write the section is printed only, never appended to RESULTS.md
    table = "\n".join(ln for ln in out.splitlines() if ln.startswith("| opinion_diffusion"))
    assert table not in (BENCH / "RESULTS.md").read_text(encoding="utf-8")


DASHBOARD_REQUESTS = ("study list", "study page", "live files", "metrics (1 run)", "panel page 0", "panel last page",
                      "panel step+kind filter", "agent trajectory", "messages of a step", "network (200 nodes)",
                      "display state (bands)")


def test_bench_dashboard_smoke(tmp_path):
    out = run(tmp_path, "bench_dashboard.py", "--agents", "200", "--steps", "3", "--repeat", "1")
    m = re.search(r"^run: 200 agents x 3 steps in ([\d.]+) s$", out, re.M)
    assert m and float(m.group(1)) > 0
    assert re.search(r"^request\s+median ms\s+bytes$", out, re.M)
    sizes = {}
    for name in DASHBOARD_REQUESTS:
        m = re.search(rf"^{re.escape(name)}\s+([\d.]+)\s+(\d+)$", out, re.M)
        assert m, f"no timing for {name!r} in:\n{out}"
        assert float(m.group(1)) > 0                 # median ms
        sizes[name] = int(m.group(2))
        assert sizes[name] > 0                       # bytes of the answer
    # a panel page holds 50 rows (page 0, the last full page, step 1's posts): far more than an empty answer
    for name in ("panel page 0", "panel last page", "panel step+kind filter"):
        assert sizes[name] > 50 * 40, (name, sizes[name])
    # while another process holds the store's write lock, the study page still answers and says so
    m = re.search(r"^study page, store locked\s+([\d.]+)\s+\(busy=(\w+)\)$", out, re.M)
    assert m and float(m.group(1)) > 0 and m.group(2) == "True"
    m = re.search(r"^live files, store locked\s+([\d.]+)$", out, re.M)
    assert m and float(m.group(1)) > 0


def test_bench_report_smoke(tmp_path):
    out = run(tmp_path, "bench_report.py", "--agents", "200")
    m = re.search(r"^opinion_diffusion, 200 agents, 12 steps \(2,600 panel \+ initial rows per run\); "
                  r"one run took ([\d.]+) s$", out, re.M)
    assert m and float(m.group(1)) > 0
    labels = ("report, one run", "report, run vs control (paired per agent)", "diffusion player, sampled view")
    figures = {}
    for label in labels:
        m = re.search(rf"^{re.escape(label)}\s+([\d.]+) s   peak RSS\s+([\d.]+) MB "
                      rf"\(baseline after import ([\d.]+) MB\)   html (\d+) kB$", out, re.M)
        assert m, f"no figures for {label!r} in:\n{out}"
        seconds, peak, base, html = float(m.group(1)), float(m.group(2)), float(m.group(3)), int(m.group(4))
        assert seconds > 0 and html > 0
        assert 0 < base <= peak < 4096                 # MB; a fresh process that imported desim and rendered
        figures[label] = html
    # the paired comparison carries the control run's figures as well as the run's
    assert figures["report, run vs control (paired per agent)"] > figures["report, one run"]
