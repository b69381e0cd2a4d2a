"""Input a study cannot run on is refused at load, naming the file, the line and the field, before anything is
written; the system's refusals (a folder where a file belongs, a file where the store keeps a folder, a path
too long) are one ``desim: error:`` line, not a traceback; and a run whose data folder was deleted is said to
be so, not shown as completed while every table has lost its rows."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import desim
from desim.cli import main
from desim.errors import DesimNotice, StudyConfigError
from desim.store.export import export
from desim.study.rosters import read_roster
from diffusion_studies import write_study
from storeq import sql
from walk_study import write_walk_study

SIM = "simulation/simulation.json"
ENV = "environment/environment.json"


def walk(tmp_path: Path) -> Path:
    """A small study of three steps whose event (a numeric layer set at step 2) fires."""
    return write_walk_study(tmp_path / "walk", n_steps=3, lockdown_day=2)


def refused(capsys, *argv: str) -> str:
    """stderr of a command that must stop with ``desim: error:`` (exit status 2) and no traceback."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2 and "desim: error: " in err and "Traceback" not in err, err
    return err


def edit(root: Path, rel: str, change) -> None:
    """Rewrite the JSON file ``rel`` of the study: ``change(data)`` edits it in place."""
    path = root / rel
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=1))


def text_at(path: Path, written: str) -> tuple[int, int]:
    """The line and column (from 1) where ``written`` starts in the file."""
    text = path.read_text()
    at = text.index(written)
    return text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)


# --- 1. a number too large for a float ----------------------------------------------------------------------
@pytest.mark.parametrize("rel, old, new", [
    (SIM, '"base_drift": 0.0', '"base_drift": 1e999'),
    (ENV, '"drift": "$base_drift"', '"drift": -1e999'),
    (ENV, '"value": "$lockdown_drift"', '"value": 1E999'),
], ids=["parameter", "layer", "event value"])
def test_a_number_too_large_for_a_float_is_refused_at_load_naming_its_line_and_column(tmp_path, capsys, rel, old, new):
    """Python reads 1e999 as infinity: it ran, and the store and the export held the non-standard Infinity."""
    root = walk(tmp_path)
    path = root / rel
    path.write_text(path.read_text().replace(old, new))
    number = new.split(": ")[1]
    line, column = text_at(path, number)
    err = refused(capsys, "run", str(root))
    assert (f"{path}: malformed JSON at line {line} column {column}: {number} is outside the range of a float "
            "(it would be read as infinity, and JSON has no Infinity); give a finite number") in err, err
    assert not (root / "runs").exists()


def test_a_json_roster_number_too_large_for_a_float_is_refused(tmp_path):
    (tmp_path / "population").mkdir()
    (tmp_path / "population" / "people.json").write_text('[{"agent_id": "a0", "attributes": {"x": 1e999}}]')
    with pytest.raises(StudyConfigError, match=r"people\.json: malformed JSON at line 1 column 41: 1e999 is outside "
                                               r"the range of a float"):
        read_roster(tmp_path, "people.json")


def test_an_integer_of_more_digits_than_python_reads_is_refused_not_a_traceback(tmp_path, capsys):
    root = walk(tmp_path)
    path = root / SIM
    path.write_text(path.read_text().replace('"seed": 5', '"seed": ' + "9" * 5000))
    err = refused(capsys, "validate", str(root))
    assert "malformed JSON at line 1 column" in err and "is an integer of 5000 digits" in err, err


def test_a_csv_roster_number_too_large_for_a_float_is_refused(tmp_path):
    (tmp_path / "population").mkdir()
    (tmp_path / "population" / "people.csv").write_text("agent_id,trust\na0,0.5\na1,1e999\n")
    with pytest.raises(StudyConfigError, match=r"line 3, column trust: '1e999' is not a finite number"):
        read_roster(tmp_path, "people.csv")


# --- 2. an event value of the wrong type for its layer -------------------------------------------------------
@pytest.mark.parametrize("value, shown", [("abc", '"abc"'), (None, "null"), (True, "true"), ([1], "[1]")])
def test_setting_a_numeric_layer_to_what_is_not_a_number_is_refused_at_load(tmp_path, capsys, value, shown):
    """It passed validate and run, then failed mid-run in the study's code at the event's step."""
    root = walk(tmp_path)
    edit(root, ENV, lambda d: d["scheduled_events"][0].update(value=value))
    for command in ("validate", "run"):
        err = refused(capsys, command, str(root))
        assert (f"{root / ENV}: scheduled_events[0].value: {shown} is not a number (layer drift is 0.0)") in err, err
    assert not (root / "runs").exists()


@pytest.mark.parametrize("layer, value", [("pre", 2), ("pre", None), (None, "on"), (False, "yes"), (1, 2.5),
                                          (0.5, 3)])
def test_a_layer_of_text_a_flag_or_null_may_be_set_to_anything_and_a_number_to_any_number(tmp_path, layer, value):
    root = walk(tmp_path)
    edit(root, ENV, lambda d: (d["layers"].update(phase=layer), d["scheduled_events"].append(
        {"at_step": 1, "name": "phase_change", "target": "phase", "op": "set", "value": value})))
    assert desim.load_study(root).environment.scheduled_events[1].value == value


# --- 3. what the system refuses: one line naming the file ----------------------------------------------------
def test_a_network_path_that_is_a_folder_is_refused_naming_it(tmp_path, capsys):
    root = walk(tmp_path)
    edit(root, "population/population.json", lambda d: d.update(interaction={"kind": "file", "path": "sub"}))
    (root / "population" / "sub").mkdir()
    err = refused(capsys, "run", str(root))
    assert f"desim: error: {root / 'population' / 'sub'}: is a directory, not a network file (interaction.path in " \
           "population.json)" in err, err
    assert not (root / "runs").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no folder can be made")
def test_an_export_folder_that_cannot_be_made_is_refused_naming_it(tmp_path, capsys):
    root = walk(tmp_path)
    assert main(["run", str(root)]) == 0
    err = refused(capsys, "export", str(root), "--out", "/proc/desim-nope")
    # as root the folder's making fails; as another user the command's own check of --out says so first
    assert err.startswith("desim: error:") and "/proc/desim-nope" in err and "Traceback" not in err, err
    assert "the folder cannot be made" in err or "is not writable" in err, err
    with pytest.raises(ValueError, match="cannot export into /proc/desim-nope"):
        export(root, "/proc/desim-nope")


@pytest.mark.parametrize("folder", ["runs", "runs/data", "runs/live"])
def test_a_file_where_the_store_keeps_a_folder_stops_the_run_before_it_is_recorded(tmp_path, capsys, folder):
    """runs/live a file left a run 'running' with no step (then stale), and AttributeError; the others, OSErrors."""
    root = walk(tmp_path)
    if folder != "runs":
        assert main(["run", str(root)]) == 0
        capsys.readouterr()
    before = sql(root, "SELECT run_id, status FROM runs") if folder != "runs" else None
    path = root / folder
    if path.is_dir():
        shutil.rmtree(path)
    path.write_text("x")
    err = refused(capsys, "run", str(root))
    assert f"desim: error: {path} is a file, but the study's store keeps a folder there; move the file aside " \
           "(or remove it) and run again" in err, err
    assert path.read_text() == "x"
    if before is not None:
        assert sql(root, "SELECT run_id, status FROM runs") == before     # no run recorded, the earlier kept


def test_a_study_path_too_long_for_the_system_is_refused_naming_it(tmp_path, capsys):
    long = tmp_path / ("x" * 300)
    err = refused(capsys, "run", str(long))
    assert f"desim: error: {long}: cannot be a study folder: File name too long" in err, err


def test_any_other_os_error_naming_a_file_is_one_line_and_the_traceback_on_request(tmp_path, capsys, monkeypatch):
    """A link to nothing where runs/live belongs: no check of desim's own names it, the command line still
    does."""
    root = walk(tmp_path)
    (root / "runs").mkdir()
    (root / "runs" / "live").symlink_to(tmp_path / "nowhere" / "live")
    live = root / "runs" / "live"
    monkeypatch.delenv("DESIM_TRACEBACK", raising=False)
    err = refused(capsys, "run", str(root))
    assert err.splitlines() == [f"desim: error: {live}: File exists",
                                "desim: --traceback (or DESIM_TRACEBACK=1) shows the traceback"]
    monkeypatch.setenv("DESIM_TRACEBACK", "1")
    assert main(["run", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"desim: error: {live}: File exists\nTraceback (most recent call last):"), err
    assert err.rstrip().endswith(f"FileExistsError: [Errno 17] File exists: '{live}'"), err


# --- 4. silently accepted: a column without a name, GraphML keys, an unknown --state -------------------------
@pytest.mark.parametrize("header, column, why", [
    ("{},", 3, "a comma at the end of the line? remove it"),
    (",{}", 1, "a pandas index? write the file with to_csv(..., index=False)"),
])
def test_a_csv_column_without_a_name_is_refused_in_a_roster_and_a_network_file_alike(tmp_path, header, column, why):
    """A roster took it as an attribute named '' (pandas' index, or nothing); one rule for both readers."""
    roster = tmp_path / "roster"
    (roster / "population").mkdir(parents=True)
    (roster / "population" / "people.csv").write_text(header.format("agent_id,age") + "\na0,20,1\na1,21,2\n")
    with pytest.raises(StudyConfigError) as info:
        read_roster(roster, "people.csv")
    expected = f"line 1: column {column} has no name; {why}, or name the column"
    assert str(info.value) == f"{roster / 'population' / 'people.csv'}: {expected}"
    net = network_study(tmp_path, "contacts.csv", header.format("source,target") + "\nn0,n1,1\nn1,n2,2\n")
    with pytest.raises(StudyConfigError) as info:
        desim.run_study(desim.load_study(net))
    assert str(info.value) == f"{net / 'population' / 'contacts.csv'}: {expected}"


IDS = [f"n{i}" for i in range(4)]


def network_study(tmp_path: Path, name: str, text: str) -> Path:
    """An SIR study over ``IDS`` whose network is ``population/<name>`` holding ``text``."""
    population = {"personas": [{"agent_id": a} for a in IDS], "propagation": "network",
                  "interaction": {"kind": "file", "path": name}}
    root = write_study(tmp_path / "net", "SIR", {"beta": 0.3, "gamma": 0.1}, population=population,
                       env={"seed_nodes": ["n0"]}, n_steps=2)
    (root / "population" / name).write_text(text, encoding="utf-8")
    return root


def graphml(keys: str, edges: str) -> str:
    nodes = "".join(f'<node id="{n}"/>' for n in IDS)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
            f'{keys}<graph edgedefault="undirected">{nodes}\n{edges}\n</graph>\n</graphml>\n')


def test_a_graphml_key_id_declared_twice_is_refused_naming_it_and_its_lines(tmp_path, capsys):
    """The last of the two was kept without a word: a double read by a string's declaration, or the reverse."""
    keys = ('<key id="d0" for="edge" attr.name="w" attr.type="double"/>\n'
            '<key id="d0" for="edge" attr.name="label" attr.type="string"/>\n')
    root = network_study(tmp_path, "net.graphml", graphml(keys, '<edge source="n0" target="n1"><data key="d0">2</data>'
                                                                '</edge>'))
    err = refused(capsys, "run", str(root))
    assert (f"{root / 'population' / 'net.graphml'}: key d0: key id 'd0' is declared twice (lines 3 and 4): a "
            '<data key="d0"> could mean either; give each <key> its own id') in err, err
    assert not (root / "runs").exists()


def test_graphml_edge_data_under_a_key_for_nodes_is_refused(tmp_path, capsys):
    keys = '<key id="d0" for="node" attr.name="w" attr.type="double"/>\n'
    root = network_study(tmp_path, "net.graphml", graphml(keys, '<edge source="n0" target="n1"><data key="d0">2</data>'
                                                                '</edge>'))
    err = refused(capsys, "run", str(root))
    assert (f"{root / 'population' / 'net.graphml'}: edge 1 (n0 -> n1): <data key=\"d0\"> is on an edge, but key 'd0' "
            'is declared for="node"') in err, err
    assert not (root / "runs").exists()


def test_compare_names_the_state_fields_a_misspelt_state_could_mean(tmp_path, capsys):
    """docs/counterfactuals.md: a field neither run has is named with the reason; the reason now says which
    fields the runs have."""
    root = walk(tmp_path)
    a, b = (desim.run_study(desim.load_study(root, seed=s)).run_id for s in (1, 2))
    capsys.readouterr()
    assert main(["compare", str(root), a, b, "--state", "x,nosuch"]) == 0
    out = capsys.readouterr().out
    assert "state field 'nosuch' not compared: neither run's panel has a state field 'nosuch' (their state " \
           "fields: x)" in out, out


# --- 5. a run whose data folder was deleted ------------------------------------------------------------------
@pytest.mark.filterwarnings("always::desim.errors.DesimNotice")       # each command's note, as in its own process
def test_a_run_whose_data_folder_was_deleted_is_shown_as_such_with_a_note(tmp_path, capsys):
    """It was listed 'completed 3/3' while the panel had no row of it, without a word."""
    root = walk(tmp_path)
    kept, gone = (desim.run_study(desim.load_study(root, seed=s)).run_id for s in (1, 2))
    folder = root / "runs" / "data" / f"run_id={gone}"
    shutil.rmtree(folder)
    capsys.readouterr()
    note = (f"desim: note: run {gone} is in the runs table, but its data folder ({folder}) is missing (deleted or "
            "moved?): the panel, metrics and every other table have no rows of it, and desim runs shows it as "
            "'missing data'; restore the folder from a copy")
    assert main(["runs", str(root)]) == 0
    out, err = capsys.readouterr()
    assert note in err, err
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  r")}
    assert "  missing data  steps 3/3" in lines[gone] and "  completed  steps 3/3" in lines[kept], out
    assert main(["sql", str(root), "SELECT DISTINCT run_id FROM panel", "--csv"]) == 0
    out, err = capsys.readouterr()
    assert out.split() == ["run_id", kept] and note in err, err
    with pytest.warns(DesimNotice, match=f"run {gone} is in the runs table"):
        runs = desim.open(root).runs()
    assert dict(zip(runs.column("run_id").to_pylist(), runs.column("status").to_pylist())) == {
        kept: "completed", gone: "missing data"}


def test_a_store_whose_runs_all_have_their_data_gives_no_note(tmp_path, capsys, recwarn):
    root = walk(tmp_path)
    desim.run_study(desim.load_study(root, seed=1))
    assert main(["runs", str(root)]) == 0
    assert "missing" not in capsys.readouterr().err
    assert not [w for w in recwarn if issubclass(w.category, DesimNotice)]
