"""How a study's version names its files: absolute data paths, names that are not UTF-8, a ``.desimignore`` saved
with a byte-order mark, and the walk that finds the refs whose code a version records.

An absolute roster or network-file path made ``desim run`` and ``desim validate`` end in a ``ValueError``
traceback (``... is not in the subpath of ...``); a Latin-1 file name ended in DuckDB's "Malformed JSON"
traceback when the version was stored, and a Latin-1 study folder in a ``UnicodeEncodeError``; a BOM silently
disabled the first pattern of ``.desimignore``.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import desim
import desim.study.refs as refs
from desim.cli import main
from desim.versions import code_files
from storeq import sql
from tiny_study import write_tiny_study

MODEL = '''
from desim import Action, DecisionModel, EnvironmentProvider, Observation


class Env(EnvironmentProvider):
    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        pass

    def agent_state(self, agent_id):
        return {}


class Decide(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="wait") for o in observations]
'''


def sha(data: bytes) -> str:
    """A version's hash of a file, as the docs define it: the first 16 hex digits of the SHA-256 of its bytes."""
    return hashlib.sha256(data).hexdigest()[:16]


def study(root: Path) -> Path:
    return write_tiny_study(root, MODEL, {"n_steps": 2, "decision": {"ref": "model:Decide"}}, study={"id": "s"})


ROSTER = b"agent_id,x\na0,1\na1,2\na2,3\n"
EDGES = b"source,target\na0,a1\na1,a2\n"


def test_absolute_roster_and_network_paths_run_and_are_named_like_relative_ones(tmp_path, monkeypatch, capsys):
    """The study given as a relative path (as typed in a shell), its roster outside its folder and its network
    file inside it, both written as absolute paths."""
    monkeypatch.chdir(tmp_path)
    root = study(tmp_path / "studies" / "s")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "people.csv").write_bytes(ROSTER)
    (root / "population" / "edges.csv").write_bytes(EDGES)
    (root / "population" / "population.json").write_text(json.dumps({
        "roster": str(tmp_path / "data" / "people.csv"),
        "interaction": {"kind": "file", "path": str(root / "population" / "edges.csv")}}))
    want = {"model.py": sha((root / "model.py").read_bytes()), "population/../../../data/people.csv": sha(ROSTER),
            "population/edges.csv": sha(EDGES)}

    assert main(["validate", "studies/s"]) == 0, capsys.readouterr().err
    assert main(["run", "studies/s"]) == 0, capsys.readouterr().err
    [(code,)] = sql(root, "SELECT code FROM runs")
    assert json.loads(code) == want
    # written relative, the same files have the same names: the outside one as a '..' path names it
    assert code_files("studies/s", ["../../../data/people.csv", "edges.csv"]) == want
    assert code_files(root.absolute(), [str(tmp_path / "data" / "people.csv"),
                                        str(root / "population" / "edges.csv")]) == want


def test_a_study_moved_with_its_data_keeps_its_file_names(tmp_path, monkeypatch):
    """An absolute path to a file inside the study folder is named from the folder, wherever the folder is
    (and however the folder is given)."""
    monkeypatch.chdir(tmp_path)
    for place in ("here", "there/deeper"):
        root = study(Path(place) / "s")
        (root / "population" / "edges.csv").write_bytes(EDGES)
        got = code_files(root, [str(tmp_path / root / "population" / "edges.csv")])
        assert got == {"model.py": sha((root / "model.py").read_bytes()), "population/edges.csv": sha(EDGES)}


def test_a_file_name_that_is_not_utf8_is_refused_with_its_name(tmp_path, capsys):
    root = study(tmp_path / "s")
    open(os.fsencode(root) + b"/caf\xe9.txt", "wb").write(b"x")

    assert main(["run", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"desim: error: {root}/caf\\xe9.txt: file name is not UTF-8" in err
    assert "rename it, or list it in the study's .desimignore" in err and "Traceback" not in err
    assert main(["validate", str(root)]) == 2
    assert f"{root}/caf\\xe9.txt: file name is not UTF-8" in capsys.readouterr().err

    (root / ".desimignore").write_text("caf?.txt\n")        # as the error says: the run goes on without it
    assert main(["run", str(root)]) == 0, capsys.readouterr().err
    [(code,)] = sql(root, "SELECT code FROM runs")
    assert json.loads(code) == {"model.py": sha((root / "model.py").read_bytes())}


def test_a_folder_name_that_is_not_utf8_is_refused_with_its_name(tmp_path, capsys):
    root = study(tmp_path / "s")
    os.mkdir(os.fsencode(root) + b"/d\xe9")
    open(os.fsencode(root) + b"/d\xe9/map.txt", "wb").write(b"x")

    assert main(["run", str(root)]) == 2
    assert f"desim: error: {root}/d\\xe9/map.txt: folder name is not UTF-8" in capsys.readouterr().err


def test_a_study_folder_whose_name_is_not_utf8_imports_its_model(tmp_path):
    """Before: UnicodeEncodeError ('surrogates not allowed') as the study's model.py was imported."""
    root = study(Path(os.fsdecode(os.fsencode(tmp_path) + b"/stud\xe9")))
    spec = desim.load_study(root)
    assert refs.resolve("model:Decide", root).__name__ == "Decide"
    assert refs.study_code(spec) == {"model.py": sha((root / "model.py").read_bytes())}


def test_a_byte_order_mark_does_not_disable_the_first_desimignore_pattern(tmp_path):
    root = study(tmp_path / "s")
    for name in ("scratch.txt", "draft.txt", "map.txt"):
        (root / name).write_text(name)
    (root / ".desimignore").write_text("scratch.txt\r\ndraft.txt\r\n", encoding="utf-8-sig")
    assert sorted(code_files(root)) == ["map.txt", "model.py"]


def test_the_refs_are_found_wherever_they_are():
    """Refs in dicts, in lists, in lists of lists beside plain pairs; a dict with a non-text ``ref`` is no
    ref; lists of plain values (edges) hold none."""
    config = {
        "simulation": {"decision": {"ref": "a:A", "args": {"inner": {"ref": "b:B"}}}, "ref": 3},
        "population": {"interaction": {"edges": [["x", "y"], ["y", "z"]] * 50},
                       "mixed": [["x", "y"], [{"ref": "c:C"}], [1, [2, {"deep": {"ref": "d:D"}}]]],
                       "many": [{"ref": "e:E"}, "text", 1.5, None, True]},
        "environment": [[[{"ref": "f:F"}]]],
    }
    assert refs.refs_in(config) == {"a:A", "b:B", "c:C", "d:D", "e:E", "f:F"}
    assert refs.refs_in([["x", "y"]] * 10) == set() and refs.refs_in("a:A") == set()


def test_refs_deeper_than_python_recursion_are_found():
    """The walk keeps its own list of what is left to look at, not Python's stack (which also made it slow)."""
    nested = {"ref": "deep:Found"}
    for _ in range(5000):
        nested = [nested]
    assert refs.refs_in({"x": nested}) == {"deep:Found"}


def test_a_study_s_refs_are_walked_once_for_its_code(tmp_path, monkeypatch):
    """``study_code`` runs for every replicate: the configuration (a population's thousands of edges with it)
    is walked once for the refs outside the folder and those of the study's own modules."""
    root = study(tmp_path / "s")
    spec = desim.load_study(root)
    walked = []
    walk = refs.refs_in
    monkeypatch.setattr(refs, "refs_in", lambda config: walked.append(1) or walk(config))
    assert refs.study_code(spec) == {"model.py": sha((root / "model.py").read_bytes())}
    assert len(walked) == 1


def test_a_sibling_study_whose_folder_name_is_not_utf8_is_refused_with_its_name(tmp_path, capsys):
    """The code a study imports from a sibling study's model.py is named in its version by the sibling's
    folder: a Latin-1 folder name there is refused naming it, as one inside the study is."""
    from walk_study import write_walk_study
    sibling = Path(os.fsdecode(os.fsencode(tmp_path) + b"/w\xe9lk"))
    write_walk_study(tmp_path / "plain", n_steps=2).rename(sibling)
    derived = write_walk_study(tmp_path / "derived", n_steps=2)
    (derived / "model.py").write_text((derived / "model.py").read_text() + (
        "\nimport os\nfrom pathlib import Path\nfrom desim.study.refs import study_module\n"
        "base = study_module(Path(os.fsdecode(os.fsencode(Path(__file__).parent.parent) + b'/w\\xe9lk')))\n"
        "Line, Walk, Mean = base.Line, base.Walk, base.Mean\n"))
    assert main(["run", str(derived)]) == 2
    err = capsys.readouterr().err
    assert "w\\xe9lk/model.py: folder name is not UTF-8" in err and "Traceback" not in err, err
