"""How a CSV roster's cells become persona attributes: each column typed as a whole, an empty cell a
missing value (None), codes with a leading zero and names such as 'Nan' kept as text, and a word in a
column of numbers refused naming the file, the line and the column (``desim.study.files``)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from desim.cli import main
from desim.errors import StudyConfigError
from desim.study.rosters import read_roster
from storeq import sql


def roster(tmp_path: Path, text: str) -> dict[str, dict]:
    """The personas of a roster holding ``text``, as {agent_id: attributes}."""
    (tmp_path / "population").mkdir(exist_ok=True)
    (tmp_path / "population" / "people.csv").write_text(text, encoding="utf-8")
    return {p.agent_id: p.attributes for p in read_roster(tmp_path, "people.csv")}


def refusal(tmp_path: Path, text: str) -> str:
    with pytest.raises(StudyConfigError) as info:
        roster(tmp_path, text)
    return str(info.value)


def test_each_column_is_typed_as_a_whole(tmp_path):
    people = roster(tmp_path, "agent_id,age,region,trust,opinion,zip,name,member\n"
                              "a1,34,North,0.5,0.1,02139,Ann,TRUE\n"
                              "a2,,South,1,0.2,10001,Nan,false\n"
                              "a3,1000,East,0.25,-3e-1,00501,Cy,\n")
    assert people == {
        "a1": {"age": 34, "region": "North", "trust": 0.5, "opinion": 0.1, "zip": "02139", "name": "Ann",
               "member": True},
        "a2": {"age": None, "region": "South", "trust": 1.0, "opinion": 0.2, "zip": "10001", "name": "Nan",
               "member": False},
        "a3": {"age": 1000, "region": "East", "trust": 0.25, "opinion": -0.3, "zip": "00501", "name": "Cy",
               "member": None},
    }
    # one type per column: the ints stay ints, and the 1 among fractions is a float like its column
    assert [type(people[a]["age"]) for a in ("a1", "a3")] == [int, int]
    assert type(people["a2"]["trust"]) is float


def test_text_is_kept_as_written_and_blank_cells_are_missing(tmp_path):
    people = roster(tmp_path, "agent_id,name,note\na1,Inf,  \na2,Infinity,x \na3, NA,\n")
    assert people == {"a1": {"name": "Inf", "note": None}, "a2": {"name": "Infinity", "note": "x "},
                      "a3": {"name": " NA", "note": None}}


def test_true_false_mixed_with_other_words_is_text(tmp_path):
    assert roster(tmp_path, "agent_id,answer\na1,true\na2,maybe\n") == {"a1": {"answer": "true"},
                                                                        "a2": {"answer": "maybe"}}


@pytest.mark.parametrize("column, cells, expected", [
    ("trust", ["0.5", "high", "1"],
     "line 3, column trust: 'high' is not a number, in a column of numbers (2 of its 3 values, as line 2: 0.5); "
     "leave the cell empty for a missing value"),
    ("age", ["34", "1_000", "50"],
     "line 3, column age: '1_000' is not a number, in a column of numbers (2 of its 3 values, as line 2: 34)"),
    ("score", ["1", "2", "NaN"],
     "line 4, column score: 'NaN' is not a finite number, in a column of numbers (2 of its 3 values, as line 2: 1)"),
    ("score", ["NA", "2", "3"],
     "line 2, column score: 'NA' is not a number, in a column of numbers (2 of its 3 values, as line 3: 2)"),
    ("name", ["Ann", "3", "Bob"],
     "line 3, column name: '3' is a number, in a column of text (2 of its 3 values, as line 2: 'Ann'); correct "
     "the cell, or, to keep numbers and text in one column, give the roster as JSON"),
], ids=["word", "underscore", "nan", "NA", "number-among-names"])
def test_numbers_mixed_with_words_name_the_line_and_column(tmp_path, column, cells, expected):
    text = f"agent_id,{column}\n" + "".join(f"a{i},{c}\n" for i, c in enumerate(cells))
    assert f"population/people.csv: {expected}" in refusal(tmp_path, text)


def test_numbers_the_store_cannot_hold_are_refused(tmp_path):
    assert ("line 3, column n: '9223372036854775808' is outside the 64-bit integers the store can hold"
            in refusal(tmp_path, "agent_id,n\na1,9223372036854775807\na2,9223372036854775808\n"))
    assert "line 2, column x: '1e999' is not a finite number" in refusal(tmp_path, "agent_id,x\na1,1e999\n")


def test_a_refused_roster_is_a_cli_error_naming_file_line_and_column(tmp_path, capsys, monkeypatch):
    root = study(tmp_path, "agent_id,trust\na1,0.5\na2,high\n")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "st"]) == 2
    assert capsys.readouterr().err == (
        "desim: error: st/population/people.csv: line 3, column trust: 'high' is not a number, in a column of "
        "numbers (1 of its 2 values, as line 2: 0.5); leave the cell empty for a missing value, or, to keep numbers "
        "and text in one column, give the roster as JSON (each value has its own type there)\n")
    assert not (root / "runs").exists()


MODEL = '''
from desim import Action, DecisionModel, EnvironmentProvider, Observation


class Env(EnvironmentProvider):
    """Each agent's state is its persona's attributes, as the roster gave them."""

    def reset(self, seed):
        self.attributes = {p.agent_id: dict(p.attributes) for p in self.ctx.personas}

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        pass

    def agent_state(self, agent_id):
        return self.attributes[agent_id]


class Stay(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="stay") for o in observations]
'''


def study(tmp_path: Path, people: str) -> Path:
    root = tmp_path / "st"
    for sub in ("simulation", "population", "environment"):
        (root / sub).mkdir(parents=True)
    files = {"study.json": {"id": "st"},
             "simulation/simulation.json": {"n_steps": 1, "decision": {"ref": "model:Stay"}},
             "population/population.json": {"roster": "people.csv"},
             "environment/environment.json": {"provider": {"ref": "model:Env"}}}
    for name, data in files.items():
        (root / name).write_text(json.dumps(data))
    (root / "model.py").write_text(MODEL)
    (root / "population" / "people.csv").write_text(people)
    return root


def test_a_missing_value_reaches_the_store_as_null(tmp_path, capsys):
    root = study(tmp_path, "agent_id,age,region\na1,30,North\na2,,South\na3,50,\n")
    assert main(["run", str(root)]) == 0
    rows = sql(root, "SELECT agent_id, state.age, state.region FROM panel WHERE step = 1 ORDER BY agent_id")
    assert rows == [("a1", 30, "North"), ("a2", None, "South"), ("a3", 50, None)]


def test_a_run_whose_csv_roster_an_older_desim_typed_is_not_resumed_or_branched(tmp_path, capsys):
    """desim before 0.2 typed a CSV roster cell by cell: the same files (the same version of the study) gave
    other attributes, so its runs are neither resumed nor branched, each refusal saying why."""
    import duckdb

    import desim
    from desim.experiments.branches import BranchRefused
    from storeq import store_path
    root = study(tmp_path, "agent_id,zip\na1,02139\na2,10001\n")
    sim = root / "simulation" / "simulation.json"
    sim.write_text(json.dumps({"n_steps": 3, "decision": {"ref": "model:Stay"}}))
    old = desim.run_study(desim.load_study(root)).run_id
    new = desim.run_study(desim.load_study(root)).run_id
    with duckdb.connect(str(store_path(root))) as con:    # as desim 0.1.0 recorded it, interrupted at step 2
        con.execute("UPDATE runs SET desim_version = '0.1.0', status = 'interrupted', last_step = 2 "
                    "WHERE run_id = ?", [old])
    for attempt in (lambda: desim.branch(root, old, 2), lambda: desim.resume(root, old)):
        with pytest.raises(BranchRefused) as refused:
            attempt()
        assert (f"run {old} was recorded by desim 0.1.0, which typed its CSV roster (people.csv) cell by cell"
                in str(refused.value))
    assert desim.branch(root, new, 2).status == "completed"         # a run of this desim branches as before
