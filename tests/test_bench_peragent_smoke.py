"""The smoke configuration of ``benchmarks/bench_peragent_mesa.py`` (issue 13's benchmark; its numbers
are in benchmarks/RESULTS.md). Mesa is left out (``--no-mesa``): it lives in a venv of its own."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_peragent_benchmark_smoke(tmp_path):
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_peragent_mesa.py"), "--agents", "200",
                          "--steps", "2", "--repeat", "1", "--no-mesa", "--no-processes-too", "--work", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout
    run = json.loads(out.splitlines()[0])
    assert run["side"] == "desim" and run["agents"] == 200 and run["rows"] == 400 and run["messages"] == 400
    assert "| desim, whole run" in out and "| desim, step loop only" in out and "Mesa 3.3.1" not in out
    assert "| desim, `agent_processes: false`, whole run" in out
    assert "desim with agent_processes false gives the same metrics: True" in out
    assert re.search(r"engine share .*: whole run -?\d+\.\d+, step loop -?\d+\.\d+", out)
    metrics = re.search(r"final metrics, desim: (.*)", out).group(1)
    values = dict(part.split(" ") for part in metrics.split(", "))
    assert set(values) == {"mean_opinion", "opinion_sd", "support_share", "extreme_share"}
    numbers = {k: float(v) for k, v in values.items()}
    assert all(0.0 <= x <= 1.0 for x in numbers.values())
    # the population handed to the Mesa side is the run's: 200 agents, each with its opinion and trust
    population = json.loads((tmp_path / "population.json").read_text())
    assert len(population["opinion"]) == len(population["media_trust"]) == 200
    assert population["edges"] and all(0 <= i < 200 and 0 <= j < 200 for i, j in population["edges"])
    # each agent's neighbours, in the feed's order, are exactly its stored edges
    ties = {frozenset(e) for e in population["edges"]}
    assert {frozenset((i, j)) for i, nbrs in enumerate(population["neighbours"]) for j in nbrs} == ties
