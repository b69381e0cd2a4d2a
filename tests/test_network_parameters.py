"""A generated network's settings may be study parameters (``"m": "$m"``), so a sweep or ``--set``
varies the network as it varies a model's arguments, and a bad value names the parameter."""
from __future__ import annotations

import json

from desim.cli import main
from storeq import sql


def sir_with_network_parameters(tmp_path, capsys):
    assert main(["new", "sir", "--template", "sir", "--dir", str(tmp_path)]) == 0
    capsys.readouterr()
    root = tmp_path / "sir"
    sim_file, pop_file = root / "simulation" / "simulation.json", root / "population" / "population.json"
    sim = json.loads(sim_file.read_text())
    sim["parameters"].update(n_nodes=100, seeds=2, m=2, network_seed=5)
    sim["n_steps"] = 2
    sim_file.write_text(json.dumps(sim))
    pop = json.loads(pop_file.read_text())
    pop["interaction"] = {"kind": "barabasi_albert", "m": "$m", "graph_seed": "$network_seed"}
    pop_file.write_text(json.dumps(pop))
    return root


def edges_of(root, run_id):
    return {tuple(sorted(e)) for e in sql(root, "SELECT source, target FROM edges WHERE run_id = ?", [run_id])}


def last_run(root):
    return sql(root, "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")[0][0]


def test_network_settings_from_parameters_set_and_refused_by_name(tmp_path, capsys):
    root = sir_with_network_parameters(tmp_path, capsys)
    assert main(["run", str(root), "--quiet"]) == 0
    two = edges_of(root, last_run(root))
    assert len(two) == (100 - 2) * 2                 # Barabasi-Albert: m edges for each node after the first m
    assert main(["run", str(root), "--quiet", "--set", "m=4"]) == 0
    four = edges_of(root, last_run(root))
    assert len(four) == (100 - 4) * 4
    # the graph's seed as a parameter: another value, another graph of the same size
    assert main(["run", str(root), "--quiet", "--set", "network_seed=6"]) == 0
    other = edges_of(root, last_run(root))
    assert len(other) == len(two) and other != two
    capsys.readouterr()
    # a value the network refuses names the field and the parameter it came from; nothing is run
    runs_before = len(sql(root, "SELECT run_id FROM runs"))
    assert main(["run", str(root), "--set", "m=0"]) == 2
    err = capsys.readouterr().err
    assert "population/population.json: interaction.m:" in err and "parameter 'm' = 0 (set by --set)" in err
    assert len(sql(root, "SELECT run_id FROM runs")) == runs_before


def test_an_unknown_parameter_in_the_network_settings_is_refused(tmp_path, capsys):
    root = sir_with_network_parameters(tmp_path, capsys)
    pop_file = root / "population" / "population.json"
    pop = json.loads(pop_file.read_text())
    pop["interaction"]["m"] = "$edges_per_node"
    pop_file.write_text(json.dumps(pop))
    assert main(["run", str(root)]) == 2
    err = capsys.readouterr().err
    assert "population/population.json: interaction.m: unknown parameter '$edges_per_node'" in err
    assert not (root / "runs").exists()
