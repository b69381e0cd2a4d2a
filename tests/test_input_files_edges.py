"""Edge attributes of network files as a user's own tools write them (``desim.study.edges``): a GraphML
key's ``<default>``, networkx's two keys for one weight that holds both ints and floats, text attributes
refused naming the key (node data is not read), and an empty CSV cell a documented missing value."""
from __future__ import annotations

import math
from pathlib import Path

import networkx as nx
import pytest

from desim.cli import main
from desim.study import edges
from desim.study.network import Network
from diffusion_studies import run, write_study
from storeq import sql

IDS = ["a1", "a2", "a3", "a4"]
INDEX = {a: i for i, a in enumerate(IDS)}


def read(tmp_path: Path, name: str, text: str):
    """``read_edges`` of a file holding ``text``: (source ids, target ids, {attribute: list}, lines)."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    src, dst, attrs, lines = edges.read_edges(path, edges.format_of(path, None), IDS, INDEX, directed=False)
    return ([IDS[i] for i in src], [IDS[i] for i in dst], {k: v.tolist() for k, v in attrs.items()},
            lines.tolist())


def refused(tmp_path: Path, name: str, text: str) -> str:
    with pytest.raises(Exception) as info:
        read(tmp_path, name, text)
    return str(info.value)


def graphml(edges_xml: str, keys: str = "", nodes: str = "") -> str:
    node_xml = nodes or "".join(f'<node id="{a}"/>' for a in IDS)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
            f'{keys}<graph edgedefault="undirected">{node_xml}\n{edges_xml}\n</graph>\n</graphml>\n')


W_DEFAULT = '<key id="w" for="edge" attr.name="weight" attr.type="double"><default>1.0</default></key>'


# --- a key's <default> --------------------------------------------------------------------------------
def test_an_edge_without_data_takes_its_keys_default(tmp_path):
    text = graphml('<edge source="a1" target="a2"><data key="w">0.5</data></edge>'
                   '<edge source="a2" target="a3"/>'
                   '<edge source="a3" target="a4"><data key="w">0.75</data></edge>', W_DEFAULT)
    assert read(tmp_path, "net.graphml", text)[2] == {"weight": [0.5, 1.0, 0.75]}


def test_a_default_reaches_the_edges_table(tmp_path):
    text = graphml('<edge source="a1" target="a2"><data key="w">0.5</data></edge><edge source="a2" target="a3"/>',
                   W_DEFAULT)
    root = study(tmp_path, "net.graphml", text)
    result = run(root)
    assert sql(root, "SELECT source, target, weight FROM edges WHERE run_id = ? ORDER BY source",
               [result.run_id]) == [("a1", "a2", 0.5), ("a2", "a3", 1.0)]


def test_a_default_applies_to_every_edge_even_when_no_edge_has_data(tmp_path):
    text = graphml('<edge source="a1" target="a2"/><edge source="a2" target="a3"><data key="w"></data></edge>',
                   '<key id="w" attr.name="weight" attr.type="int"><default>2</default></key>')   # for: "all"
    assert read(tmp_path, "net.graphml", text)[2] == {"weight": [2.0, 2.0]}


def test_a_node_keys_default_is_not_an_edge_attribute(tmp_path):
    text = graphml('<edge source="a1" target="a2"/>',
                   '<key id="s" for="node" attr.name="size" attr.type="double"><default>3</default></key>')
    assert read(tmp_path, "net.graphml", text)[2] == {}


def test_keys_of_one_name_with_different_defaults_are_refused(tmp_path):
    keys = ('<key id="d0" for="edge" attr.name="weight" attr.type="long"><default>1</default></key>'
            '<key id="d1" for="edge" attr.name="weight" attr.type="double"><default>0.5</default></key>')
    assert ("net.graphml: key d1: keys 'd0' and 'd1' both name the edge attribute 'weight', with different "
            "defaults (1 and 0.5); give one default") in refused(tmp_path, "net.graphml",
                                                                  graphml('<edge source="a1" target="a2"/>', keys))


def test_a_text_default_for_edges_is_refused_naming_the_key(tmp_path):
    keys = '<key id="c" for="edge" attr.name="colour" attr.type="string"><default>black</default></key>'
    err = refused(tmp_path, "net.graphml", graphml('<edge source="a1" target="a2"/>', keys))
    assert ("net.graphml: key c, <default>: 'black' is not a number: key 'c' declares attr.type=\"string\"") in err


# --- networkx's keys of one name ----------------------------------------------------------------------
def test_networkx_graphml_with_int_and_float_weights_reads_as_one_float_attribute(tmp_path):
    g = nx.Graph()
    g.add_edge("a1", "a2", weight=1)
    g.add_edge("a2", "a3", weight=0.25)
    g.add_edge("a3", "a4", weight=0.75)
    path = tmp_path / "net.graphml"
    nx.write_graphml(g, path)
    text = path.read_text()
    assert text.count('attr.name="weight"') == 2        # the case: a long key and a double key
    assert read(tmp_path, "net.graphml", text)[2] == {"weight": [1.0, 0.25, 0.75]}


def test_one_edge_with_a_value_for_two_keys_of_one_name_is_refused(tmp_path):
    keys = ('<key id="d0" for="edge" attr.name="weight" attr.type="long"/>'
            '<key id="d1" for="edge" attr.name="weight" attr.type="double"/>')
    text = graphml('<edge source="a1" target="a2"><data key="d0">1</data></edge>'
                   '<edge source="a2" target="a3"><data key="d0">2</data><data key="d1">0.5</data></edge>', keys)
    assert ("net.graphml: key d1: keys 'd0' and 'd1' both name the edge attribute 'weight', and edge 2 "
            "(a2 -> a3) has a value of each (2 and 0.5); give each edge one") in refused(tmp_path, "net.graphml", text)


def test_one_key_given_twice_on_an_edge_is_refused(tmp_path):
    text = graphml('<edge source="a1" target="a2"><data key="w">1</data><data key="w">2</data></edge>', W_DEFAULT)
    assert ("net.graphml: edge 1 (a1 -> a2), attribute weight: key 'w' is given twice; give it once"
            in refused(tmp_path, "net.graphml", text))


# --- text attributes ----------------------------------------------------------------------------------
def test_a_text_edge_attribute_is_refused_naming_the_key_and_what_is_kept(tmp_path):
    g = nx.Graph()
    g.add_edge("a1", "a2", weight=0.5, tie="school")
    g.add_edge("a2", "a3", weight=0.25, tie="work")
    path = tmp_path / "net.graphml"
    nx.write_graphml(g, path)
    err = refused(tmp_path, "net.graphml", path.read_text())
    tie_key = next(k for k in ("d0", "d1") if f'id="{k}" for="edge" attr.name="tie"' in path.read_text())
    assert (f"net.graphml: edge 1 (a1 -> a2), attribute tie: 'school' is not a number: key '{tie_key}' declares "
            "attr.type=\"string\", and edge attributes are numbers (attr.type int, long, float or double; the "
            "edges table keeps no text); recode 'tie' as numbers, or remove the key's <data> from the edges") in err


def test_a_boolean_edge_attribute_is_refused(tmp_path):
    keys = '<key id="s" for="edge" attr.name="strong" attr.type="boolean"/>'
    err = refused(tmp_path, "net.graphml", graphml('<edge source="a1" target="a2"><data key="s">true</data></edge>',
                                                   keys))
    assert "attribute strong: 'true' is not a number: key 's' declares attr.type=\"boolean\"" in err


def test_node_data_is_not_read(tmp_path):
    keys = ('<key id="n" for="node" attr.name="label" attr.type="string"/>'
            '<key id="x" for="node" attr.name="x" attr.type="double"/>')
    nodes = "".join(f'<node id="{a}"><data key="n">Person {a}</data><data key="x">1.5</data></node>' for a in IDS)
    assert read(tmp_path, "net.graphml", graphml('<edge source="a1" target="a2"/>', keys, nodes)) == (
        ["a1"], ["a2"], {}, [1])


@pytest.mark.parametrize("value, message", [
    ("1_000", "'1_000' cannot be read as double (key 'w' declares attr.type=\"double\")"),
    ("INF", "'INF' is not a finite number"),
    ("0x10", "'0x10' cannot be read as double"),
])
def test_graphml_numbers_are_plain_decimal_notation(tmp_path, value, message):
    text = graphml(f'<edge source="a1" target="a2"><data key="w">{value}</data></edge>', W_DEFAULT)
    assert f"net.graphml: edge 1 (a1 -> a2), attribute weight: {message}" in refused(tmp_path, "net.graphml", text)


def test_an_int_key_refuses_a_fraction(tmp_path):
    keys = '<key id="k" for="edge" attr.name="n" attr.type="long"/>'
    text = graphml('<edge source="a1" target="a2"><data key="k">1.5</data></edge>', keys)
    assert "attribute n: '1.5' cannot be read as long" in refused(tmp_path, "net.graphml", text)


# --- CSV edge lists -----------------------------------------------------------------------------------
def test_an_empty_csv_cell_is_a_missing_value(tmp_path):
    src, dst, attrs, _ = read(tmp_path, "net.csv", "source,target,weight,note\na1,a2,0.5,\na2,a3,,\na3,a4,0.75,\n")
    assert list(attrs) == ["weight", "note"]        # a column that is all empty is still a column
    assert attrs["weight"][0] == 0.5 and math.isnan(attrs["weight"][1]) and attrs["weight"][2] == 0.75
    assert all(math.isnan(x) for x in attrs["note"])
    s, t, a, lines = edges.read_edges(tmp_path / "net.csv", "csv", IDS, INDEX, directed=False)
    graph = Network(IDS, False, s, t, a).graph
    assert graph.edges["a1", "a2"] == {"weight": 0.5}
    assert graph.edges["a2", "a3"] == {}            # no value: no key, so .get("weight", x) is the model's choice


def test_an_empty_csv_cell_is_null_in_the_edges_table(tmp_path):
    root = study(tmp_path, "net.csv", "source,target,weight\na1,a2,0.5\na2,a3,\na3,a4,0.75\n")
    result = run(root)
    assert sql(root, "SELECT source, target, weight FROM edges WHERE run_id = ? ORDER BY source",
               [result.run_id]) == [("a1", "a2", 0.5), ("a2", "a3", None), ("a3", "a4", 0.75)]


@pytest.mark.parametrize("cell, message", [
    ("1_000", "line 3, column weight: '1_000' is not a number (edge attributes are numbers)"),
    ("nan", "line 3, column weight: 'nan' is not a finite number"),
    ("1e999", "line 3, column weight: '1e999' is not a finite number"),
])
def test_csv_edge_numbers_are_plain_decimal_notation(tmp_path, cell, message):
    assert f"net.csv: {message}" in refused(tmp_path, "net.csv", f"source,target,weight\na1,a2,1\na2,a3,{cell}\n")


def test_an_edge_list_weight_is_plain_decimal_notation(tmp_path):
    assert ("net.txt: line 2, column 3 (weight): '1_000' is not a number"
            in refused(tmp_path, "net.txt", "a1 a2 1\na2 a3 1_000\n"))
    assert read(tmp_path, "net.txt", "a1 a2 007\na2 a3 .5\na3 a4 2E-1\n")[2] == {"weight": [7.0, 0.5, 0.2]}


def study(tmp_path: Path, name: str, text: str) -> Path:
    """A study over the agents ``IDS`` whose network is the file ``population/<name>`` holding ``text``."""
    population = {"personas": [{"agent_id": a} for a in IDS], "propagation": "network",
                  "interaction": {"kind": "file", "path": name}}
    root = write_study(tmp_path / "study", "SIR", {"beta": 0.3, "gamma": 0.1}, population=population,
                       env={"seed_nodes": ["a1"]}, n_steps=2)
    (root / "population" / name).write_text(text, encoding="utf-8")
    return root


def test_the_cli_names_the_text_key(tmp_path, capsys):
    keys = '<key id="t" for="edge" attr.name="tie" attr.type="string"/>'
    root = study(tmp_path, "net.graphml", graphml('<edge source="a1" target="a2"><data key="t">kin</data></edge>',
                                                  keys))
    assert main(["run", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"desim: error: {root}/population/net.graphml: edge 1 (a1 -> a2), attribute tie: 'kin' "
                          "is not a number: key 't' declares attr.type=\"string\"")
    assert not (root / "runs").exists()
