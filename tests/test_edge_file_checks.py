"""The checks a network file gets before anything is written (``desim.study.edges``): a CSV header the
``edges`` table cannot hold, GraphML problems named at the edge (its place among the file's edges), a
GraphML direction that contradicts the study's, nodes outside the population, a file without edges; and a
per-edge parameter read from a file, whose bad value is reported at its line of the file."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from desim.cli import main
from desim.study import edges
from diffusion_studies import run, write_study
from storeq import sql

IDS = [f"n{i}" for i in range(6)]


def study(tmp_path: Path, name: str, text: str, args: dict | None = None, **interaction) -> Path:
    """An SIR study over the agents ``IDS`` whose network is the file ``population/<name>`` holding ``text``."""
    population = {"personas": [{"agent_id": a} for a in IDS], "propagation": "network",
                  "interaction": {"kind": "file", "path": name, **interaction}}
    root = write_study(tmp_path / "study", "SIR", args or {"beta": 0.3, "gamma": 0.1}, population=population,
                       env={"seed_nodes": ["n0"]}, n_steps=3)
    (root / "population" / name).write_text(text, encoding="utf-8")
    return root


def refused(capsys, root: Path) -> str:
    """The CLI's error for ``desim run``; nothing may have been written."""
    code = main(["run", str(root)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("desim: error: "), err
    assert not (root / "runs").exists(), "a refused study wrote something"
    return err


def graphml(edges_xml: str, *, nodes=IDS, edgedefault: str = "undirected", keys: str = "", extra: str = "") -> str:
    node_xml = "".join(f'<node id="{n}"/>' for n in nodes)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
            f'{keys}<graph edgedefault="{edgedefault}">{node_xml}\n{edges_xml}\n</graph>{extra}\n</graphml>\n')


W = '<key id="d0" for="edge" attr.name="w" attr.type="double"/>'


# --- 1. CSV headers ---------------------------------------------------------------------------------
@pytest.mark.parametrize("header, where", [
    ("source,target,p,p", "line 1: column 'p' is given twice: columns 3 and 4"),
    ("source,target,Weight,weight", "line 1: columns 'Weight' and 'weight' differ only by case"),
    ("source,target,Source", "line 1: columns 'source' and 'Source' differ only by case"),
    ("source,target,RUN_ID", "line 1: column 'RUN_ID' cannot be an edge attribute"),
    ("source,target,Target_x,RUN_id", "line 1: column 'RUN_id' cannot be an edge attribute"),
    (",source,target,p", "line 1: column 1 has no name; a pandas index? write the file with to_csv(..., "
                         "index=False)"),
])
def test_a_csv_header_the_edges_table_cannot_hold_is_refused_on_line_1(tmp_path, capsys, header, where):
    n = header.count(",") - 1
    root = study(tmp_path, "contacts.csv", f"{header}\nn0,n1{',1' * n}\nn1,n2{',2' * n}\n")
    assert f"population/contacts.csv: {where}" in refused(capsys, root)


def test_a_renamed_source_column_leaves_source_reserved_in_any_case(tmp_path, capsys):
    root = study(tmp_path, "contacts.csv", "from,to,SOURCE\nn0,n1,1\n", source_column="from", target_column="to")
    assert "population/contacts.csv: line 1: column 'SOURCE' cannot be an edge attribute" in refused(capsys, root)


# --- 2. GraphML ---------------------------------------------------------------------------------------
def test_a_graphml_value_that_is_not_its_declared_type_names_the_edge_and_the_key(tmp_path, capsys):
    text = graphml('<edge source="n0" target="n1"><data key="d0">0.5</data></edge>'
                   '<edge source="n1" target="n2"><data key="d0">abc</data></edge>', keys=W)
    err = refused(capsys, study(tmp_path, "net.graphml", text))
    assert ("population/net.graphml: edge 2 (n1 -> n2), attribute w: 'abc' cannot be read as double "
            "(key 'd0' declares attr.type=\"double\")") in err, err


def test_a_graphml_edge_given_twice_is_told_apart_by_its_place(tmp_path, capsys):
    text = graphml('<edge source="n0" target="n1"/><edge source="n2" target="n3"/><edge source="n1" target="n0"/>')
    err = refused(capsys, study(tmp_path, "net.graphml", text))
    assert ("population/net.graphml: edge 3 (n1 -> n0): edge 'n1' - 'n0' appears twice "
            "(first at edge 1 (n0 -> n1))") in err, err


def test_a_directed_graphml_file_needs_a_directed_study(tmp_path, capsys):
    text = graphml('<edge source="n0" target="n1"/><edge source="n1" target="n0"/>', edgedefault="directed")
    err = refused(capsys, study(tmp_path / "a", "net.graphml", text))
    assert ('population/net.graphml: graph: the file declares edgedefault="directed", but population.json\'s '
            'interaction.directed is false (the default); set "directed": true') in err, err
    result = run(study(tmp_path / "b", "net.graphml", text, directed=True))     # agreeing: read as directed
    assert sql(result.store_path.parent.parent, "SELECT source, target FROM edges WHERE run_id = ? ORDER BY 1",
               [result.run_id]) == [("n0", "n1"), ("n1", "n0")]


def test_an_undirected_graphml_file_in_a_directed_study_is_refused(tmp_path, capsys):
    text = graphml('<edge source="n0" target="n1"/>')
    err = refused(capsys, study(tmp_path, "net.graphml", text, directed=True))
    assert 'graph: the file declares edgedefault="undirected", but population.json\'s interaction.directed is true' \
        in err, err


def test_a_graphml_edge_directed_against_the_study_is_refused(tmp_path, capsys):
    text = graphml('<edge source="n0" target="n1"/><edge source="n1" target="n2" directed="true"/>')
    err = refused(capsys, study(tmp_path, "net.graphml", text))
    assert "population/net.graphml: edge 2 (n1 -> n2): the file has an edge with directed=\"true\"" in err, err


@pytest.mark.parametrize("text, where", [
    (graphml('<edge source="n0" target="n1"/>', extra='<graph edgedefault="undirected"><node id="n2"/></graph>'),
     "population/net.graphml: holds 2 <graph> elements"),
    (graphml('<edge source="n0" target="n1"/>', nodes=IDS[:3] + ["zed"] + IDS[3:]),
     "population/net.graphml: node 4: unknown agent id 'zed'"),
    (graphml('<edge source="n0" target="n1"><data key="d0">1</data></edge>'
             '<edge source="n1" target="n2"><data key="d1">1</data></edge>',
             keys=W + '<key id="d1" for="edge" attr.name="W" attr.type="double"/>'),
     "population/net.graphml: key d1: keys 'd0' ('w') and 'd1' ('W') name edge attributes that differ only by case"),
    (graphml('<edge source="n0" target="n1"><data key="d0">1</data><data key="d1">2</data></edge>',
             keys=W + '<key id="d1" for="edge" attr.name="w" attr.type="double"/>'),
     "population/net.graphml: key d1: keys 'd0' and 'd1' both name the edge attribute 'w'"),
    (graphml('<edge source="n0" target="n1"><data key="d1">1</data></edge>',
             keys='<key id="d1" for="edge" attr.name="Run_Id" attr.type="int"/>'),
     "population/net.graphml: key d1: 'Run_Id' cannot be an edge attribute"),
    (graphml('<edge source="n0" target="n1"><data key="d9">1</data></edge>'),
     "population/net.graphml: edge 1 (n0 -> n1): <data key=\"d9\"> names no <key> of the file"),
], ids=["second graph", "unknown node", "keys by case", "key twice", "reserved key", "undeclared key"])
def test_graphml_problems_are_refused_naming_the_element(tmp_path, capsys, text, where):
    assert where in refused(capsys, study(tmp_path, "net.graphml", text))


# --- 3. no edges --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, text", [
    ("net.txt", ""),
    ("net.txt", "# just a comment\n\n   \n"),
    ("contacts.csv", ""),
    ("contacts.csv", "source,target,p\n\n"),
    ("net.graphml", ""),
    ("net.graphml", graphml("")),
], ids=["empty edge list", "comments only", "empty csv", "csv header only", "empty graphml", "graphml no edges"])
def test_a_network_file_without_edges_is_refused(tmp_path, capsys, name, text):
    err = refused(capsys, study(tmp_path, name, text))
    assert f"population/{name}: has no edges" in err, err


# --- 4. per-edge parameters named at their line -------------------------------------------------------
def test_a_per_edge_value_out_of_range_names_the_csv_line_and_column(tmp_path, capsys):
    root = study(tmp_path, "contacts.csv", "source,target,p\nn0,n1,0.2\nn2,n3,1.7\nn4,n5,0.1\n",
                 {"beta": {"edge": "p"}, "gamma": 0.1})
    err = refused(capsys, root)
    assert ("population/contacts.csv: line 3, column p: p = 1.7 (edge 'n2' - 'n3'), but desim.diffusion:SIR's "
            "beta must be in [0, 1] (decision.args.beta in simulation/simulation.json)") in err, err


def test_a_per_edge_value_out_of_range_names_the_graphml_edge(tmp_path, capsys):
    text = graphml('<edge source="n0" target="n1"><data key="d0">0.5</data></edge>'
                   '<edge source="n3" target="n2"><data key="d0">-2</data></edge>', keys=W)
    err = refused(capsys, study(tmp_path, "net.graphml", text, args={"beta": {"edge": "w"}, "gamma": 0.1}))
    assert "population/net.graphml: edge 2 (n3 -> n2), attribute w: w = -2 (edge 'n2' - 'n3'" in err, err


def test_a_per_edge_value_missing_from_a_directed_file_names_its_line(tmp_path, capsys):
    root = study(tmp_path, "contacts.csv", "source,target,p\nn0,n1,0.2\nn2,n1,\n", {"beta": {"edge": "p"},
                 "gamma": 0.1}, directed=True)
    err = refused(capsys, root)
    assert "population/contacts.csv: line 3, column p: edge 'n2' - 'n1' has no value" in err, err


@pytest.mark.parametrize("name, text", [("contacts.csv", "source,target,weight\nn0,n1,0.2\nn2,n3,0.4\n"),
                                        ("net.txt", "n0 n1 0.2\nn2 n3 0.4\n")], ids=["csv", "edge list"])
def test_an_edge_attribute_the_file_does_not_have_is_named_with_those_it_has(tmp_path, capsys, name, text):
    """A parameter reading 'p' of a file whose attribute is 'weight': the error named line 2 and a column 'p'
    the file does not have ("has no value"), as if one cell were empty."""
    err = refused(capsys, study(tmp_path, name, text, {"beta": {"edge": "p"}, "gamma": 0.1}))
    assert (f"population/{name}: no edge attribute 'p' (its numeric attributes: weight); desim.diffusion:SIR's "
            "beta reads it (decision.args.beta in simulation/simulation.json; or give a \"default\")") in err, err
    assert "line" not in err


def test_a_node_attribute_no_agent_has_is_named_with_those_they_have(tmp_path, capsys):
    root = write_study(tmp_path / "roster", "SIR", {"beta": 0.1, "gamma": {"attribute": "recovery"}},
                       population={"personas": [{"agent_id": "a", "attributes": {"recover": 0.2}},
                                                {"agent_id": "b", "attributes": {"recover": 0.3}}],
                                   "interaction": {"kind": "edges", "edges": [["a", "b"]]},
                                   "propagation": "network"})
    assert main(["run", str(root), "-q"]) == 2
    err = capsys.readouterr().err
    assert ("population/population.json: personas: no agent has attribute 'recovery' (their attributes: "
            "recover), which desim.diffusion:SIR's gamma reads") in err, err


def test_a_per_edge_value_in_range_runs(tmp_path):
    root = study(tmp_path, "contacts.csv", "source,target,p\nn0,n1,1\nn1,n2,1\n", {"beta": {"edge": "p"},
                 "gamma": 0.0})
    assert run(root).metrics().to_pydict()["count_I"][-1] == 3


def test_the_fast_edge_list_reader_keeps_each_edges_line(tmp_path):
    """The plain 'source target' file is read in C; the line of each edge (empty lines skipped) is the one
    the line-by-line reader gives."""
    path = tmp_path / "net.txt"
    path.write_text("n0 n1\n\nn1 n2\nn3 n4\n\n\nn4 n5\n")
    fast = edges._plain_edgelist(path.read_text(), IDS, False)
    assert fast is not None and fast[3].tolist() == [1, 3, 4, 7] and fast[3].dtype == np.int32
    slow = edges._edgelist(path.read_text(), path)
    assert [r[0] for r in slow] == [1, 3, 4, 7]


def test_a_node_attribute_one_agent_lacks_names_that_agent(tmp_path, capsys):
    root = write_study(tmp_path / "roster", "SIR", {"beta": 0.1, "gamma": {"attribute": "recovery"}},
                       population={"personas": [{"agent_id": "a", "attributes": {"recovery": 0.2}},
                                                {"agent_id": "b", "attributes": {"recover": 0.3}}],
                                   "interaction": {"kind": "edges", "edges": [["a", "b"]]},
                                   "propagation": "network"})
    assert main(["run", str(root), "-q"]) == 2
    assert ("population/population.json: agent 'b': has no attribute 'recovery', which desim.diffusion:SIR's gamma "
            "reads") in capsys.readouterr().err
