"""The component-kind rule (``desim.study.contract.ROLES``) applies to a study made from files as it does
to ``desim.Study``: a component in the wrong field is refused when the run is built, naming the file and
field, instead of an AttributeError inside the run; duck-typed components (no desim base class) with
the methods of either path, per agent or columnar, run."""
from __future__ import annotations

import json

import pytest

import desim
from desim.cli import main
from desim.run.assemble import assemble
from walk_study import write_walk_study

DUCKS = '''
import numpy as np

from desim import Action, ActionColumns, Observation, Persona


class NoEvents:
    """The calls the engine makes on every environment, whichever path: no events, nothing to end or send.
    A plain class, so the environments below are still duck-typed (no desim base class)."""

    def advance_to(self, t):
        return []

    def end_step(self, t):
        pass

    def drain_messages(self):
        return []


class NoSetup:
    """The calls the engine makes on every behaviour model: nothing to set up or close. A plain class too."""

    def reset(self, seed):
        pass

    def close(self):
        pass


class Counter(NoEvents):
    """An environment on the per-agent path, without observe_columns or state_columns."""

    def reset(self, seed):
        self.n = {a: 0 for a in self.ctx.agent_ids}

    def observe_batch(self, ids, t, round_idx):
        return [Observation(agent_id=a, step=t, round_idx=round_idx) for a in ids]

    def apply(self, actions):
        for a in actions:
            self.n[a.agent_id] += a.payload["by"]

    def agent_state(self, agent_id):
        return {"n": self.n[agent_id]}


class Add(NoSetup):
    def decide_batch(self, observations, memories):
        return [Action(agent_id=o.agent_id, step=o.step, kind="add", payload={"by": 2}) for o in observations]


class Tally(NoEvents):
    """An environment on the columnar path only: no observe_batch, apply or agent_state."""

    def reset(self, seed):
        self.n = np.zeros(len(self.ctx.agent_ids), np.int64)

    def observe_columns(self, idx, t, round_idx):
        return {"n": self.n}

    def apply_columns(self, idx, actions):
        self.n[idx] += np.asarray(actions.payload["by"], np.int64)

    def state_columns(self):
        return {"n": self.n}


class AddColumns(NoSetup):
    def decide_columns(self, obs, idx, t, round_idx):
        return ActionColumns(kind="add", payload={"by": np.full(len(idx), 3, np.int64)})


class Total:
    def collect(self, t, environment, actions):
        return {"total": int(sum(environment.n.values()) if isinstance(environment.n, dict) else environment.n.sum())}


class People:
    def personas(self, rng):
        return [Persona(agent_id=f"p{i}") for i in range(3)]


class Quiet:
    """Looks like a collector but has no collect."""

    def summary(self, t):
        return {}


def make_add():
    """A factory function as a ref: what it returns is checked."""
    return Add()
'''


def duck_study(root, environment, decision, collector="model:Total", population="model:People"):
    files = {
        "study.json": {"id": root.name, "title": "ducks"},
        "simulation/simulation.json": {"n_steps": 4, "seed": 1, "decision": {"ref": decision},
                                       "collector": {"ref": collector}},
        "population/population.json": {"provider": {"ref": population}},
        "environment/environment.json": {"provider": {"ref": environment}},
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(data))
    (root / "model.py").write_text(DUCKS)
    return root


@pytest.mark.parametrize("environment, decision, per_step, path", [
    ("model:Counter", "model:Add", 2, "agents"),
    ("model:Tally", "model:AddColumns", 3, "columnar"),
])
def test_duck_typed_components_from_files_run_on_either_path(tmp_path, environment, decision, per_step, path):
    root = duck_study(tmp_path / "ducks", environment, decision)
    spec = desim.load_study(root)
    assert assemble(spec).path == path
    result = desim.run_study(spec)
    assert result.status == "completed"
    # three agents, each adding per_step a step, from 0
    assert result.metrics().to_pydict()["total"] == [3 * per_step * t for t in range(5)]
    last = {r["agent_id"]: r["n"] for r in result.panel().to_pylist() if r["step"] == 4}
    assert last == {"p0": 4 * per_step, "p1": 4 * per_step, "p2": 4 * per_step}


def test_a_duck_typed_columnar_environment_is_accepted_by_desim_study(tmp_path, monkeypatch):
    """desim.Study applies the same rule: a columnar environment needs no observe_batch."""
    import importlib.util
    import sys
    root = duck_study(tmp_path / "ducks", "model:Tally", "model:AddColumns")
    loaded = importlib.util.spec_from_file_location("ducks_for_study", root / "model.py")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "ducks_for_study", module)
    study = desim.Study(environment=module.Tally, decision=module.AddColumns, collector=module.Total,
                        population=module.People(), steps=2, folder=tmp_path / "study")
    assert study.files()["environment/environment.json"]["provider"] == {"ref": "ducks_for_study:Tally", "args": {}}
    assert desim.run_study(study).metrics().to_pydict()["total"] == [0, 9, 18]     # 3 agents, +3 each a step


WRONG = [
    # (file, field, ref, the message after "<file>: <field>.ref: ")
    ("simulation/simulation.json", "collector", "model:Walk",
     "model:Walk is a DecisionModel-like class without collect(); a collector implements MetricCollector (collect)"),
    ("simulation/simulation.json", "decision", "model:Line",
     "model:Line is an EnvironmentProvider-like class without decide_batch(), close(); a behaviour model "
     "implements DecisionModel (decide_batch, or decide_columns on the columnar path)"),
    ("environment/environment.json", "provider", "model:Mean",
     "model:Mean is a MetricCollector-like class without agent_state(), apply(), observe_batch(), advance_to(), "
     "drain_messages(), end_step(), reset(); an environment provider implements EnvironmentProvider "
     "(observe_batch, apply, agent_state, or observe_columns, apply_columns, state_columns on the columnar path)"),
]


@pytest.mark.parametrize("rel, field, ref, says", WRONG)
def test_a_component_in_the_wrong_field_is_named_when_the_run_is_built(tmp_path, capsys, rel, field, ref, says):
    root = write_walk_study(tmp_path / "walk", n_steps=2)
    data = json.loads((root / rel).read_text())
    data[field] = {"ref": ref}
    (root / rel).write_text(json.dumps(data))
    with pytest.raises(desim.DesimError) as info:
        desim.run_study(desim.load_study(root))
    assert str(info.value) == f"{root / rel}: {field}.ref: {says}"
    assert not (root / "runs").exists()         # refused before the store was opened
    capsys.readouterr()
    assert main(["run", str(root)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"desim: error: {root / rel}: {field}.ref: {says}"


def refusal(root) -> str:
    """What running the study at ``root`` is refused with."""
    with pytest.raises(desim.DesimError) as info:
        desim.run_study(desim.load_study(root))
    return str(info.value)


def test_a_population_provider_and_a_factory_of_the_wrong_kind_are_named(tmp_path):
    root = duck_study(tmp_path / "ducks", "model:Counter", "model:Add", population="model:Add")
    assert refusal(root) == (f"{root / 'population/population.json'}: provider.ref: model:Add is a "
                             "DecisionModel-like class without personas(); a population provider implements "
                             "PopulationProvider (personas)")
    root = duck_study(tmp_path / "quiet", "model:Counter", "model:Add", collector="model:Quiet")
    with pytest.raises(desim.DesimError, match=r"collector.ref: model:Quiet is a class without collect\(\);"):
        desim.run_study(desim.load_study(root))
    root = duck_study(tmp_path / "factory", "model:Counter", "model:Add", collector="model:make_add")
    assert refusal(root) == (f"{root / 'simulation/simulation.json'}: collector.ref: model:make_add returns an "
                             "instance of Add, a DecisionModel-like class without collect(); a collector "
                             "implements MetricCollector (collect)")
