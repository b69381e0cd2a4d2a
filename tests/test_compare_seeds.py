"""What ``desim compare`` says of two runs with different seeds is read from the store: whether their networks
and their initial states differ. It said "a population or network drawn at random differs" of every such pair,
also of two runs of one fixed graph (``graph_seed``), whose edges are the same row for row."""
from __future__ import annotations

import json

import desim
from desim.cli import main
from desim.experiments.comparisons import compare


def two_runs(tmp_path, monkeypatch, graph_seed: bool):
    monkeypatch.chdir(tmp_path)
    assert main(["new", "epi", "--template", "sir"]) == 0
    path = tmp_path / "studies" / "epi" / "population" / "population.json"
    population = json.loads(path.read_text())
    if not graph_seed:
        del population["interaction"]["graph_seed"]
    path.write_text(json.dumps(population))
    runs = [desim.run_study(desim.load_study("studies/epi", steps=3, seed=seed, params={"n_nodes": 150})).run_id
            for seed in (1, 5)]
    return tmp_path / "studies" / "epi", runs


def seed_note(notes):
    [note] = [n for n in notes if n.startswith("the runs have different seeds")]
    return note


def test_one_fixed_graph_is_not_said_to_differ_but_the_seeded_cases_are(tmp_path, monkeypatch):
    root, (a, b) = two_runs(tmp_path, monkeypatch, graph_seed=True)
    note = seed_note(compare(root, a, b)["notes"])
    assert "networks differ" not in note and "network drawn" not in note
    assert note.startswith("the runs have different seeds (control 1, treatment 5): ")
    assert "of the 150 agents in both start in another state" in note        # the seeded cases are drawn


def test_graphs_drawn_from_the_seed_are_said_to_differ(tmp_path, monkeypatch):
    root, (a, b) = two_runs(tmp_path, monkeypatch, graph_seed=False)
    assert "their networks differ (drawn at random from the seed)" in seed_note(compare(root, a, b)["notes"])
