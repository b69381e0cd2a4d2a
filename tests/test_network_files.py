"""Networks from files (an edge list, a CSV with attribute columns, GraphML), a generator's own
``graph_seed``, edge attributes in the ``edges`` table and in study code, and the errors a bad file
gets: the file, the line and the field, before anything is written."""
from __future__ import annotations

import json

import networkx as nx
import pytest

import desim
from desim import Action, DecisionModel, EnvironmentProvider, Observation
from desim.cli import main
from storeq import sql

IDS = [f"n{i}" for i in range(6)]


class Weights(EnvironmentProvider):
    """Each agent's state is the summed weight of its edges, read from ``ctx.graph``."""

    def reset(self, seed):
        g = self.ctx.graph
        self.total = {a: sum(d.get("weight", 0.0) for _, _, d in g.edges(a, data=True)) for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t) for a in ids]

    def apply(self, actions):
        pass

    def agent_state(self, agent_id):
        return {"total": self.total[agent_id], "degree": self.ctx.graph.degree(agent_id)}


class Idle(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="wait") for o in observations]


def study(tmp_path, interaction: dict, network: str | None = None, name: str = "net.csv", **extra) -> desim.Study:
    s = desim.Study(environment=Weights, decision=Idle, population=[{"agent_id": a} for a in IDS], steps=1,
                    interaction=interaction, propagation="network", folder=tmp_path / "study", **extra)
    s.save()
    if network is not None:
        (s.folder / "population" / name).write_text(network)
    return s


def edges_of(result):
    return sql(result.store_path.parent.parent, "SELECT * EXCLUDE (run_id) FROM edges WHERE run_id = ? "
               "ORDER BY source, target", [result.run_id])


def test_a_csv_network_keeps_its_attributes_for_the_store_and_the_study(tmp_path):
    s = study(tmp_path, {"kind": "file", "path": "net.csv"},
              "source,target,weight,p\nn0,n1,2.5,0.1\nn1,n2,1,0.2\nn3,n4,0.5,\n")
    result = desim.run_study(s)
    assert edges_of(result) == [("n0", "n1", 2.5, 0.1), ("n1", "n2", 1.0, 0.2), ("n3", "n4", 0.5, None)]
    states = {r["agent_id"]: (r["total"], r["degree"]) for r in result.panel().to_pylist()}
    assert states == {"n0": (2.5, 1), "n1": (3.5, 2), "n2": (1.0, 1), "n3": (0.5, 1), "n4": (0.5, 1), "n5": (0.0, 0)}


def test_an_edge_list_and_graphml_give_the_same_network(tmp_path):
    a = desim.run_study(study(tmp_path / "a", {"kind": "file", "path": "net.txt"},
                              "# a comment\nn0 n1 2\nn1 n2\n\nn4 n5 1.5  # trailing\n", "net.txt"))
    g = nx.Graph()
    g.add_edge("n0", "n1", weight=2.0)
    g.add_edge("n1", "n2")
    g.add_edge("n4", "n5", weight=1.5)
    path = tmp_path / "net.graphml"
    nx.write_graphml(g, path)
    b = desim.run_study(study(tmp_path / "b", {"kind": "file", "path": "net.graphml"}, path.read_text(), "net.graphml"))
    assert edges_of(a) == edges_of(b) == [("n0", "n1", 2.0), ("n1", "n2", None), ("n4", "n5", 1.5)]


@pytest.mark.parametrize("text, where", [
    ("source,target\nn0,n1\nn0,zed\n", "line 3: unknown agent id 'zed'"),
    ("source,target\nn0,n1\nn1,n0\n", "line 3: edge 'n1' - 'n0' appears twice (first at line 2)"),
    ("source,target\nn2,n2\n", "line 2: self-loop 'n2' -> 'n2'"),
    ("source,target,weight\nn0,n1,heavy\n", "line 2, column weight: 'heavy' is not a number"),
    ("from,to\nn0,n1\n", "line 1: no 'source' column (columns: from, to)"),
    ("source,target,w\nn0,n1\n", "line 2: 2 fields, but the header has 3"),
])
def test_a_bad_network_file_is_refused_naming_the_line_before_anything_is_written(tmp_path, capsys, text, where):
    s = study(tmp_path, {"kind": "file", "path": "net.csv"}, text)
    assert main(["run", str(s.folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("desim: error: ") and f"population/net.csv: {where}" in err, err
    assert not (s.folder / "runs").exists()


def test_a_directed_file_keeps_both_directions_apart(tmp_path):
    s = study(tmp_path, {"kind": "file", "path": "net.csv", "directed": True}, "source,target\nn0,n1\nn1,n0\n")
    assert edges_of(desim.run_study(s)) == [("n0", "n1"), ("n1", "n0")]


def test_graph_seed_fixes_a_generated_network_across_run_seeds(tmp_path):
    ws = {"kind": "watts_strogatz", "k": 2, "p": 0.5}
    free = study(tmp_path / "free", ws)
    fixed = study(tmp_path / "fixed", {**ws, "graph_seed": 42})
    nets = {name: [edges_of(desim.run_study(s.spec(seed=seed))) for seed in (1, 2)]
            for name, s in (("free", free), ("fixed", fixed))}
    assert nets["fixed"][0] == nets["fixed"][1]
    assert nets["free"][0] != nets["free"][1]
    # graph_seed X draws the network a run of seed X draws
    same = edges_of(desim.run_study(free.spec(seed=42)))
    assert nets["fixed"][0] == same


def test_the_label_network_describes_a_study_reading_the_graph(tmp_path, capsys):
    s = study(tmp_path, {"kind": "ring", "k": 2})
    assert main(["validate", str(s.folder), "--strict"]) == 0     # no warning: it reads the graph, labelled so
    data = json.loads((s.folder / "population" / "population.json").read_text())
    data["propagation"] = "contagion"
    (s.folder / "population" / "population.json").write_text(json.dumps(data))
    assert main(["validate", str(s.folder)]) == 0
    assert "spreads states along the network directly; label it 'network'" in capsys.readouterr().out


@pytest.mark.parametrize("text, where", [
    ("n0 n1\nn0 zed\n", "line 2: unknown agent id 'zed'"),
    ("n0 n1\nn2 n3\nn1 n0\n", "line 3: edge 'n1' - 'n0' appears twice (first at line 1)"),
    ("n0 n1\nn2 n2\n", "line 2: self-loop 'n2' -> 'n2'"),
    ("n0 n1\nn1 n2 heavy\n", "line 2, column 3 (weight): 'heavy' is not a number"),
    ("n0 n1\nn1 n2 n3 n4\n", "line 2: expected 'source target' or 'source target weight', got 4 fields"),
    ("n0 n1 {'p': 0.5}\n", "line 1: expected 'source target' or 'source target weight', got 4 fields; networkx's "
                           "write_edgelist writes each edge's attributes as a {...} dict: write it with data=False"),
])
def test_a_plain_edge_list_with_a_problem_is_refused_naming_the_line(tmp_path, capsys, text, where):
    """A plain edge list is read in C; a file with a problem still gets the line-by-line reader's message."""
    s = study(tmp_path, {"kind": "file", "path": "net.txt"}, text, "net.txt")
    assert main(["run", str(s.folder)]) == 2
    err = capsys.readouterr().err
    assert f"population/net.txt: {where}" in err, err
    assert not (s.folder / "runs").exists()


def test_a_plain_edge_list_is_read_as_the_line_by_line_reader_reads_it(tmp_path, monkeypatch):
    """The fast reader of plain 'source target' files gives the same arrays, in file order, as the reader
    that goes line by line (here made to run by leaving the fast one out)."""
    from desim.study import edges
    ids = [f"v{i:04d}" for i in range(2000)]
    g = nx.gnm_random_graph(2000, 9000, seed=3)
    pairs = [(ids[u], ids[v]) if (u + v) % 2 else (ids[v], ids[u]) for u, v in g.edges()]
    path = tmp_path / "g.txt"
    path.write_text("".join(f"{a} {b}\n" for a, b in pairs))
    index = {a: i for i, a in enumerate(ids)}
    fast = edges._plain_edgelist(path.read_text(), ids, False)
    assert fast is not None                          # the plain file takes the fast way
    monkeypatch.setattr(edges, "_plain_edgelist", lambda *a: None)
    slow = edges.read_edges(path, "edgelist", ids, index, directed=False)
    assert fast[0].tolist() == slow[0].tolist() == [index[a] for a, _ in pairs]
    assert fast[1].tolist() == slow[1].tolist() == [index[b] for _, b in pairs]
    assert fast[2] == slow[2] == {}


def test_validate_names_agents_a_network_file_leaves_without_edges(tmp_path, capsys):
    """n5 is in the population but in no line of the file: a file cut short or a person the contact survey
    missed as often as a hermit, so validate says so; a generated network's isolates are its model's and are not listed."""
    s = study(tmp_path, {"kind": "file", "path": "net.csv"}, "source,target\nn0,n1\nn1,n2\nn3,n4\n")
    assert main(["validate", str(s.folder)]) == 0
    assert "1 of 6 agents have no edge in net.csv (n5): nothing reaches them" in capsys.readouterr().out
    (s.folder / "population" / "net.csv").write_text("source,target\nn0,n1\nn1,n2\nn3,n4\nn4,n5\n")
    assert main(["validate", str(s.folder)]) == 0
    assert "no edge" not in capsys.readouterr().out
