"""``desim.Study(folder=...)`` does not replace the files of another study already in that folder (its
question, parameters and interventions would be lost, and its store would take runs of another
study as a new version); writing the same files again, as a notebook cell run twice does, still works,
and ``overwrite=True`` replaces them when that is what is meant."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import desim
from desim import Action, DecisionModel
from line_env import Line

ROOT = Path(__file__).resolve().parents[1]
FILES = ["study.json", "simulation/simulation.json", "population/population.json", "environment/environment.json"]


class Still(Line):
    """Every agent starts at 1 (so doubling gives 2, 4, ...)."""

    def reset(self, seed):
        self.x = {a: 1.0 for a in self.ctx.agent_ids}


class Double(DecisionModel):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="move", payload={"x": 2 * o.local_physical["x"]})
                for o in observations]


def make(folder, **extra):
    return desim.Study(**{"environment": Still, "decision": Double, "population": 3, "steps": 2,
                          "title": "doubling", "folder": folder, **extra})


def contents(folder: Path) -> dict[str, str]:
    return {rel: (folder / rel).read_text() for rel in FILES}


def test_a_hand_written_study_folder_is_not_overwritten(tmp_path):
    folder = tmp_path / "schelling"
    shutil.copytree(ROOT / "studies" / "schelling", folder, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    before = contents(folder)
    with pytest.raises(desim.DesimError) as info:
        make(folder)
    message = str(info.value)
    assert str(folder) in message and "overwrite=True" in message and "another folder=" in message
    for rel in FILES:
        assert rel in message
    assert "study.json (" in message and "title" in message.split("study.json (")[1].split(")")[0]
    assert contents(folder) == before and not (folder / "runs").exists()


def test_the_same_study_written_again_runs_again(tmp_path):
    first = desim.run_study(make(tmp_path / "s"))
    second = desim.run_study(make(tmp_path / "s"))       # the notebook cell run again
    assert first.status == second.status == "completed" and first.run_id != second.run_id
    # x doubles every step from 1: 2 after step 1, 4 after step 2
    assert [r["x"] for r in second.panel().to_pylist() if r["agent_id"] == "a0"] == [2.0, 4.0]


def test_another_study_in_a_folder_a_study_wrote_is_refused_then_overwritten_on_request(tmp_path):
    make(tmp_path / "s").save()
    with pytest.raises(desim.DesimError, match=r"simulation/simulation.json \(n_steps\)") as info:
        desim.Study(environment=Still, decision=Double, population=3, steps=5, title="doubling",
                    folder=tmp_path / "s")
    assert "study.json" not in str(info.value) and "population.json" not in str(info.value)   # only what changes
    assert json.loads((tmp_path / "s" / "simulation" / "simulation.json").read_text())["n_steps"] == 2
    longer = desim.Study(environment=Still, decision=Double, population=3, steps=5, title="doubling",
                         folder=tmp_path / "s", overwrite=True)
    assert desim.run_study(longer).steps_done == 5
    assert json.loads((tmp_path / "s" / "simulation" / "simulation.json").read_text())["n_steps"] == 5


def test_a_study_may_rewrite_its_own_folder_after_a_change(tmp_path):
    s = make(tmp_path / "s")
    desim.run_study(s)
    s.simulation["n_steps"] = 3
    assert desim.run_study(s).steps_done == 3


def test_a_folder_written_by_another_study_after_this_one_was_made_is_refused_at_run(tmp_path):
    mine = make(tmp_path / "s")
    make(tmp_path / "s", id="other").save()
    with pytest.raises(desim.DesimError, match=r"study.json \(id\)"):
        desim.run_study(mine)
    assert json.loads((tmp_path / "s" / "study.json").read_text())["id"] == "other"


def test_save_into_another_study_folder_is_refused_unless_asked(tmp_path):
    make(tmp_path / "a", title="first").save()
    s = make(tmp_path / "b", title="second")
    with pytest.raises(desim.DesimError, match=r"study.json \(title\)"):
        s.save(tmp_path / "a")
    s.save(tmp_path / "a", overwrite=True)
    assert json.loads((tmp_path / "a" / "study.json").read_text())["title"] == "second"
