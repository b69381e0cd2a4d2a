"""A study's network file is part of its version, as its code and roster are: editing who meets whom
makes a new version, and a branch or an effect never replays one network and continues on another."""
from __future__ import annotations

import json

import pytest

import desim
from desim.cli import main
from desim.experiments.branches import BranchRefused, branch
from storeq import sql


def sir_on_a_file(tmp_path, capsys):
    """The SIR template on 60 nodes whose contacts come from a CSV with a per-edge probability."""
    assert main(["new", "sir", "--template", "sir", "--dir", str(tmp_path)]) == 0
    capsys.readouterr()
    root = tmp_path / "sir"
    sim = json.loads((root / "simulation" / "simulation.json").read_text())
    sim["parameters"].update(n_nodes=60, seeds=3)
    sim["decision"]["args"]["beta"] = {"edge": "p"}
    sim["n_steps"], sim["stop_when"] = 8, []
    (root / "simulation" / "simulation.json").write_text(json.dumps(sim))
    pop = json.loads((root / "population" / "population.json").read_text())
    pop["interaction"] = {"kind": "file", "path": "contacts.csv"}
    (root / "population" / "population.json").write_text(json.dumps(pop))
    return root


def write_contacts(root, ids, p):
    lines = ["source,target,p"] + [f"{ids[i]},{ids[(i + 1) % len(ids)]},{p}" for i in range(len(ids))]
    (root / "population" / "contacts.csv").write_text("\n".join(lines) + "\n")


def node_ids(root):
    """The template's node ids, as its population provider names them."""
    assert main(["new", "probe", "--template", "sir", "--dir", str(root.parent / "probe")]) == 0
    probe = root.parent / "probe" / "probe"
    sim = json.loads((probe / "simulation" / "simulation.json").read_text())
    sim["parameters"].update(n_nodes=60, seeds=3)
    sim["n_steps"] = 1
    (probe / "simulation" / "simulation.json").write_text(json.dumps(sim))
    run = desim.run_study(desim.load_study(probe))
    return run.data().initial_states(run.run_id).column("agent_id").to_pylist()


def test_an_edited_network_file_is_a_new_version_and_a_branch_across_it_is_refused(tmp_path, capsys):
    root = sir_on_a_file(tmp_path, capsys)
    ids = node_ids(root)
    capsys.readouterr()
    write_contacts(root, ids, 0.2)
    first = desim.run_study(desim.load_study(root))
    again = desim.run_study(desim.load_study(root))
    write_contacts(root, ids, 0.9)                      # the same study files, another network
    edited = desim.run_study(desim.load_study(root))
    version = dict(sql(root, "SELECT run_id, version_id FROM runs"))
    assert version[first.run_id] == version[again.run_id]       # an unchanged file joins its version
    assert version[edited.run_id] != version[first.run_id]
    (diff,) = sql(root, "SELECT diff FROM versions WHERE version_id = ?", [version[edited.run_id]])[0]
    assert [d["path"] for d in json.loads(diff)] == ["code.population/contacts.csv"]
    # the stored edges are each run's own network
    for run, p in ((first, 0.2), (edited, 0.9)):
        (got,) = sql(root, "SELECT DISTINCT p FROM edges WHERE run_id = ?", [run.run_id])
        assert got[0] == pytest.approx(p)
    # a branch of the first run would replay its steps on one network and go on on the other
    with pytest.raises(BranchRefused, match=r"population/contacts\.csv \(edited\)"):
        branch(root, first.run_id, 4)
    assert main(["branch", str(root), "--from-run", first.run_id, "--at-step", "4"]) != 0
    assert "population/contacts.csv (edited)" in capsys.readouterr().err
    # with the file as it was, the branch goes ahead
    write_contacts(root, ids, 0.2)
    assert branch(root, first.run_id, 4).status == "completed"
