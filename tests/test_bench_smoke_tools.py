"""The branch, dashboard and report benchmarks keep running: each in its smoke configuration (the one its
docstring names), in a subprocess, as a user would run it. The figures each writes with ``--json`` are
checked for what they mean, not the layout of what it prints."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pytest import approx

from waits import HANG_S

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"


def run(tmp_path: Path, script: str, *args: str) -> dict:
    """Run a benchmark from a folder of its own, its temporary files under ``tmp_path``; they must be gone after.
    Returns the figures it wrote with ``--json``."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    figures = tmp_path / "figures.json"
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.run([sys.executable, str(BENCH / script), *args, "--json", str(figures)], capture_output=True,
                          text=True, timeout=HANG_S, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not list(tmp.iterdir()), f"{script} left temporary files: {list(tmp.iterdir())}"
    assert proc.stdout.strip()                       # the figures for people are still printed
    return json.loads(figures.read_text())


def test_bench_branch_smoke(tmp_path):
    results = BENCH / "RESULTS.md"
    before = results.read_bytes()
    f = run(tmp_path, "bench_branch.py", "--n", "200")
    assert (f["n"], f["steps"], f["branch_step"]) == (200, 12, 10)
    assert [(r["study"], r["path"], r["n"]) for r in f["rows"]] == [("opinion_diffusion", "per-agent", 200),
                                                                     ("ring_bc", "columnar", 200)]
    for r in f["rows"]:
        assert r["full_s"] > 0 and r["branch_s"] > 0
        assert r["ratio"] == approx(r["branch_s"] / r["full_s"])   # the branch over the full run
    # without --write the section is printed only, never appended to RESULTS.md
    assert f["written"] is False and results.read_bytes() == before


DASHBOARD_REQUESTS = ("study list", "study page", "live files", "metrics (1 run)", "panel page 0", "panel last page",
                      "panel step+kind filter", "agent trajectory", "messages of a step", "network (200 nodes)",
                      "display state (bands)")


def test_bench_dashboard_smoke(tmp_path):
    f = run(tmp_path, "bench_dashboard.py", "--agents", "200", "--steps", "3", "--repeat", "1")
    assert (f["agents"], f["steps"], f["repeat"]) == (200, 3, 1)
    assert f["run_s"] > 0
    assert [r["request"] for r in f["requests"]] == list(DASHBOARD_REQUESTS)
    sizes = {}
    for r in f["requests"]:
        assert r["median_ms"] > 0 and r["bytes"] > 0, r   # timed, and an answer with a body
        sizes[r["request"]] = r["bytes"]
    # a panel page holds 50 rows (page 0, the last full page, step 1's posts): far more than an empty answer
    for name in ("panel page 0", "panel last page", "panel step+kind filter"):
        assert sizes[name] > 50 * 40, (name, sizes[name])
    # while another process holds the store's write lock, the study page still answers and says so
    locked = f["store_locked"]
    assert locked["busy"] is True
    assert locked["study_page_median_ms"] > 0 and locked["live_files_median_ms"] > 0


def test_bench_report_smoke(tmp_path):
    f = run(tmp_path, "bench_report.py", "--agents", "200")
    assert (f["agents"], f["steps"]) == (200, 12)
    assert f["rows_per_run"] == (12 + 1) * 200       # panel + initial rows
    assert f["run_s"] > 0
    renders = {r["render"]: r for r in f["renders"]}
    assert list(renders) == ["report, one run", "report, run vs control (paired per agent)",
                             "diffusion player, sampled view"]
    assert [r["compared"] for r in f["renders"]] == [False, True, False]
    for r in f["renders"]:
        assert r["seconds"] > 0 and r["html_kb"] > 0
        assert 0 < r["baseline_rss_mb"] <= r["peak_rss_mb"] < 4096   # MB; a fresh process that imported desim
    # the paired comparison carries the control run's figures as well as the run's
    assert renders["report, run vs control (paired per agent)"]["html_kb"] > renders["report, one run"]["html_kb"]


def test_soak_kill_resume_smoke(tmp_path):
    """Runs and branches SIGKILLed at a committed step and resumed: every table equal to the undisturbed run's."""
    data = run(tmp_path, "soak_kill_resume.py", "--jobs", "2", "--agents", "500", "--kill", "1.0")
    jobs = data["jobs"]
    assert [j["kind"] for j in jobs] == ["run", "branch"]
    assert all(j["equal"] and j["differ"] == [] for j in jobs)
    assert sum(j["kills"] for j in jobs) >= 2 and all(j["resumes"] >= j["kills"] for j in jobs)


def test_dashboard_load_smoke(tmp_path):
    """Clients polling the dashboard during a run: every request answered, latencies and timings positive."""
    data = run(tmp_path, "bench_dashboard_load.py", "--agents", "500", "--steps", "3", "--clients", "4")
    assert data["failed"] == 0 and data["requests"] >= 4
    assert all(r["n"] > 0 and 0 < r["median_ms"] <= r["p95_ms"] <= r["max_ms"] for r in data["latency"])
    assert len(data["alone"]) == 2 and all(a["wall"] > 0 and a["cpu"] > 0 for a in data["alone"] + [data["loaded"]])


def test_bench_study_constructs_smoke(tmp_path):
    f = run(tmp_path, "bench_study_constructs.py", "--agents", "200", "--repeat", "1")
    assert f["agents"] == 200 and len(f["rows"]) == 5
    assert all(r["plain_us"] > 0 and r["fast_us"] > 0 for r in f["rows"])
    assert {r["what"] for r in f["rows"]} >= {"Observation", "Action"}


def test_bench_store_open_smoke(tmp_path):
    """A reader's open of a store: three runs made by one sweep, every figure positive and ordered."""
    data = run(tmp_path, "bench_store_open.py", "--runs", "3", "--repeat", "3")
    assert (data["runs"], data["repeat"], data["metric_rows"]) == (3, 3, 3 * 4 * 2)   # steps 0-3, two metrics
    assert 0 < data["open_min"] <= data["open_median"] and 0 < data["min"] <= data["median"]
    assert data["open_min"] <= data["min"]
