"""The smoke configuration of ``benchmarks/bench_peragent_mesa.py`` (issue 13's benchmark; its numbers
are in benchmarks/RESULTS.md), checked on the figures it writes with ``--json``. Mesa is left out
(``--no-mesa``): it lives in a venv of its own."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pytest import approx

from waits import HANG_S

ROOT = Path(__file__).resolve().parent.parent
METRICS = {"mean_opinion", "opinion_sd", "support_share", "extreme_share"}


@pytest.mark.slow
def test_peragent_benchmark_smoke(tmp_path):
    figures = tmp_path / "figures.json"
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_peragent_mesa.py"), "--agents", "200",
                          "--steps", "2", "--repeat", "1", "--no-mesa", "--no-processes-too", "--work", str(tmp_path),
                          "--json", str(figures)], capture_output=True, text=True, cwd=ROOT, timeout=HANG_S)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip()                        # the table for people is still printed
    f = json.loads(figures.read_text())
    agents, steps = 200, 2
    assert (f["agents"], f["steps"], f["rounds"], f["repeat"], f["mesa"]) == (agents, steps, 1, 1, False)
    runs = f["runs"]
    assert runs["mesa_network"] == [] and runs["mesa_lists"] == []
    (desim,), (lean,) = runs["desim"], runs["desim_no_processes"]
    assert (desim["side"], lean["side"]) == ("desim", "desim-no-processes")
    agent_rounds = agents * steps * 1
    for r in (desim, lean):
        # every agent posts its opinion at reset (stored at step 0) and once a step
        assert (r["agents"], r["steps"], r["rows"], r["messages"]) == (agents, steps, 400, 600)
        assert r["wall_s"] > 0 and r["cpu_s"] > 0 and r["steps_wall_s"] > 0 and r["steps_cpu_s"] > 0
        assert r["peak_mib"] > 0
        spent = r["study_s"]
        assert set(spent) == {"observe_batch", "decide_batch", "apply", "collect", "set-up", "agent_state"}
        assert all(seconds >= 0 for seconds in spent.values())
        # the engine's share is the run's CPU less the study's methods; the study's share leaves out its set-up
        assert r["engine_us_per_agent_round"] * agent_rounds / 1e6 + sum(spent.values()) == approx(r["cpu_s"])
        assert r["study_us_per_agent_round"] * agent_rounds / 1e6 == approx(sum(spent.values()) - spent["set-up"])
    # the table: desim's whole run and step loop, with and without agent processes, and no Mesa row
    table = {t["model"]: t for t in f["table"]}
    assert list(table) == ["desim", "desim_steps", "no_processes", "no_processes_steps"]
    for model, r, wall, cpu in (("desim", desim, "wall_s", "cpu_s"), ("desim_steps", desim, "steps_wall_s",
                                "steps_cpu_s"), ("no_processes", lean, "wall_s", "cpu_s"),
                                ("no_processes_steps", lean, "steps_wall_s", "steps_cpu_s")):
        t = table[model]
        assert t["runs"] == 1
        assert t["agent_steps_per_s_wall"] == approx(agents * steps / r[wall])
        assert t["agent_steps_per_s_cpu"] == approx(agents * steps / r[cpu])
        assert t["us_per_agent_step_cpu"] == approx(1e6 / t["agent_steps_per_s_cpu"])
    assert f["ratios"] == {} and f["desim_vs_mesa"] == {}
    assert f["budgets"] is None                     # the bars as time need Mesa's side
    assert f["engine_us_per_agent_round"] == approx(desim["engine_us_per_agent_round"])
    assert f["study_us_per_agent_round"] == approx(desim["study_us_per_agent_round"])
    assert f["study_us_per_agent_round"] > 0
    assert f["loop_engine_us_per_agent_round"] == approx(desim["loop_engine_us_per_agent_round"])
    assert f["same_metrics_repeats"] is True
    assert f["same_metrics_no_processes"] is True     # agent_processes false runs the same model
    metrics = f["final_metrics"]["desim"]
    assert set(metrics) == METRICS and set(f["final_metrics"]) == {"desim"}
    assert all(0.0 <= x <= 1.0 for x in metrics.values())
    assert metrics == desim["metrics"] == lean["metrics"]
    # the population handed to the Mesa side is the run's: 200 agents, each with its opinion and trust
    assert f["population_file"] == str(tmp_path / "population.json")
    population = json.loads((tmp_path / "population.json").read_text())
    assert len(population["opinion"]) == len(population["media_trust"]) == 200
    assert population["edges"] and all(0 <= i < 200 and 0 <= j < 200 for i, j in population["edges"])
    # each agent's neighbours, in the feed's order, are exactly its stored edges
    ties = {frozenset(e) for e in population["edges"]}
    assert {frozenset((i, j)) for i, nbrs in enumerate(population["neighbours"]) for j in nbrs} == ties
