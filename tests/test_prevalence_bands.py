"""Curves over replicates with bands in the sweep and effect reports, and the analytic final-size line:
right where it is valid (it meets the simulations), absent where it is not, and saying why."""
from __future__ import annotations

import json
import re

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import brentq

from desim.experiments.effects import run_effect
from desim.experiments.sweep import run_sweep
from desim.report import write_sweep_report
from desim.report.effect import write_effect_report
from desim.report.final_size import final_size, reference, transmissibility
from diffusion_studies import write_study
from storeq import sql
from walk_study import write_walk_study

SIR = {"simulation": {"decision": {"ref": "desim.diffusion:SIR", "args": {"beta": 0.1, "gamma": 0.2}}},
       "population": {"interaction": {"kind": "erdos_renyi"}}, "environment": {}}


def test_final_size_on_poisson_degrees_is_the_homogeneous_mixing_relation():
    k = np.random.default_rng(0).poisson(5, 400_000)
    for T in (0.25, 0.4, 0.7):
        homogeneous = brentq(lambda r: r - (1 - np.exp(-T * 5 * r)), 1e-9, 1)
        assert final_size(k, T, 0.0) == pytest.approx(homogeneous, abs=3e-3)
    assert final_size(k, 0.1, 0.0) < 1e-6                      # below the threshold T <k> = 0.5 < 1: no outbreak
    assert final_size(k, 0.0, 0.01) == pytest.approx(0.01)      # nobody is infected but the seeds


def test_transmissibility_of_the_discrete_time_sir():
    beta, gamma = 0.05, 0.2
    rng = np.random.default_rng(1)
    k = rng.geometric(gamma, 200_000)                            # steps infectious, each one try
    assert transmissibility("SIR", {"beta": beta, "gamma": gamma}) == pytest.approx(
        1 - np.mean((1 - beta) ** k), abs=2e-3)
    assert transmissibility("SIR", {"beta": {"attribute": "b"}, "gamma": 0.2}) is None


def test_no_reference_where_it_does_not_hold():
    ws = nx.watts_strogatz_graph(400, 6, 0.05, seed=1)
    er = nx.gnp_random_graph(400, 0.015, seed=1)
    e_ws, e_er = np.array(ws.edges()), np.array(er.edges())
    assert "clustered" in reference(SIR, 400, e_ws, 0.01)["why"]
    ok = reference(SIR, 400, e_er, 0.01)
    assert 0 < ok["value"] < 1 and "configuration" in ok["label"] and "tree-like" not in ok["label"]
    per_node = json.loads(json.dumps(SIR))
    per_node["simulation"]["decision"]["args"]["beta"] = {"attribute": "b"}
    assert "varies" in reference(per_node, 400, e_er, 0.01)["why"]
    directed = json.loads(json.dumps(SIR))
    directed["population"]["interaction"]["directed"] = True
    assert "directed" in reference(directed, 400, e_er, 0.01)["why"]
    events = {**SIR, "environment": {"scheduled_events": [{"at_step": 3, "name": "x"}]}}
    assert "interventions" in reference(events, 400, e_er, 0.01)["why"]
    voter = {**SIR, "simulation": {"decision": {"ref": "desim.diffusion:Voter", "args": {}}}}
    assert "no analytic reference" in reference(voter, 400, e_er, 0.01)["why"]


def sweep_study(root, kind, steps, n):
    write_study(root, "SIR", {"beta": "$beta", "gamma": 0.2}, env={"seeds": "$seeds"}, n_steps=steps,
                parameters={"beta": 0.1, "seeds": 10},
                population={"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": n}}, "interaction": kind})
    study = json.loads((root / "study.json").read_text())
    study["display_metrics"] = ["share_I", "cumulative_incidence"]
    (root / "study.json").write_text(json.dumps(study))
    return root


@pytest.mark.slow
def test_sweep_curves_with_bands_and_a_reference_that_meets_the_simulations(tmp_path):
    root = sweep_study(tmp_path / "er", {"kind": "erdos_renyi", "p": 0.006}, 60, 1000)
    result = run_sweep(root, {"beta": [0.1, 0.15]}, replicates=4, workers=2)
    paths = write_sweep_report(root, result.plan.sweep_id)
    assert paths["sweep_curves_cumulative_incidence"].is_file() and paths["sweep_curves_share_I"].is_file()
    md = paths["markdown"].read_text()
    caption = md[md.index("sweep_curves_cumulative_incidence"):]
    assert "middle 90 %" in md and "configuration-model final size" in caption
    # two groups, two T's: the caption gives neither group's figures as everyone's (the legend has each)
    sentence = caption[caption.index("Dashed:"):].split("\n")[0]
    assert "for each group" in sentence and "T = beta / (beta + gamma - beta gamma) =" not in sentence
    from desim.report import bands
    groups: dict[str, list[str]] = {}
    for r in result.plan.runs:
        groups.setdefault(f"beta={r.combo['beta']}", []).append(r.run_id)
    refs = bands.references(root, groups)
    for label, members in groups.items():
        finals = [v for (v,) in sql(root, "SELECT value FROM metrics WHERE name = 'cumulative_incidence' AND step = 60 "
                                          "AND list_contains(?::VARCHAR[], run_id)", [members])]
        # the runs have ended (nobody left infectious long before step 60): the mean meets the line
        assert np.mean(finals) == pytest.approx(refs[label]["value"], abs=0.04), label
    # a ring lattice: the same curves, and no line, with the reason in the caption
    ws = sweep_study(tmp_path / "ws", {"kind": "watts_strogatz", "k": 6, "p": 0.05}, 20, 300)
    result = run_sweep(ws, {"beta": [0.2]}, replicates=3, workers=2)
    md = write_sweep_report(ws, result.plan.sweep_id)["markdown"].read_text()
    assert re.search(r"No analytic reference line: the network is clustered \(transitivity 0\.\d+", md)


@pytest.mark.slow
def test_effect_curves_of_controls_and_treatments(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_agents=5, n_steps=8, lockdown_day=6)
    card = json.loads((root / "study.json").read_text())
    card["metric_bounds"] = {"mean_x": [-1000, 1000]}       # the curves' axes follow it, as a run report's do
    (root / "study.json").write_text(json.dumps(card))
    result = run_effect(root, 3, {"lockdown_day": "3"}, replicates=3, workers=2)
    paths = write_effect_report(root, result.effect_id)
    curves = [k for k in paths if str(k).startswith("effect_curves_")]
    assert curves and all(paths[k].is_file() for k in curves)
    md = paths["markdown"].read_text()
    assert "Over time" in md and "middle 90 % of its runs" in md
    assert "at least 10 % of the range declared" in md
    assert "Dashed" not in md                                     # a random walk has no final size


def test_a_run_that_ended_early_holds_its_final_value_in_the_curves(tmp_path):
    """An SIR whose epidemics die out at different steps (stop_when): the curve of the share ever infected is the
    mean of each run's final size after they end, and never falls, where a mean over the runs still going did."""
    from desim.report import bands
    root = sweep_study(tmp_path / "ends", {"kind": "erdos_renyi", "p": 0.01}, 60, 300)
    sim = json.loads((root / "simulation" / "simulation.json").read_text())
    sim["stop_when"] = [{"metric": "count_I", "op": "<=", "value": 0}]
    (root / "simulation" / "simulation.json").write_text(json.dumps(sim))
    result = run_sweep(root, {"beta": [0.15]}, replicates=6, workers=1)
    members = [r.run_id for r in result.plan.runs]
    ends = dict(sql(root, "SELECT run_id, last_step FROM runs WHERE list_contains(?::VARCHAR[], run_id)", [members]))
    assert len(set(ends.values())) > 1 and max(ends.values()) < 60       # they end, at different steps
    curve = bands.series(root, {"beta=0.15": members}, ["cumulative_incidence"])["cumulative_incidence"]["beta=0.15"]
    finals = dict(sql(root, "SELECT m.run_id, m.value FROM metrics m JOIN runs r USING (run_id) WHERE "
                            "m.name = 'cumulative_incidence' AND m.step = r.last_step AND "
                            "list_contains(?::VARCHAR[], m.run_id)", [members]))
    assert curve["steps"][-1] == max(ends.values()) and curve["held"] == sum(e < max(ends.values()) for e in ends.values())
    mean = np.nanmean(curve["values"], axis=0)
    assert mean[-1] == pytest.approx(np.mean(list(finals.values())), rel=1e-6)
    assert not np.isnan(curve["values"]).any()
    assert all(b >= a - 1e-12 for a, b in zip(mean, mean[1:]))          # a share ever infected never falls
    assert "hold their last value" in bands.caption("cumulative_incidence", {"beta=0.15": curve}, {})
