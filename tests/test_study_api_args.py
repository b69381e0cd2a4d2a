"""``desim.Study`` records an instance's constructor arguments so a branch or resume rebuilds the same
model; an argument it cannot read back faithfully is refused when the study is made, naming the class,
the parameter and the fix, instead of being dropped (the branch would silently run the default)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import desim
from desim import Action, DecisionModel
from line_env import Line


class Pull(DecisionModel):
    """Moves each agent by ``openness`` towards 10 plus noise; keeps ``openness`` as ``self._k``."""

    def __init__(self, openness: float = 0.0):
        self._k = float(openness)

    def decide_batch(self, observations, memories):
        rng = self.ctx.rng("noise")
        return [Action(agent_id=o.agent_id, step=o.step, kind="move",
                       payload={"x": o.local_physical["x"] + self._k * (10 - o.local_physical["x"])
                                + 0.1 * float(rng.normal())})
                for o in observations]


class Needs(Pull):
    def __init__(self, openness: float):
        self._k = openness


class Options(Pull):
    def __init__(self, openness: float = 0.0, **options):
        self.openness, self.options = openness, options


class Spread(Pull):
    def __init__(self, *weights):
        self.weights = list(weights)


class Positional(Pull):
    def __init__(self, openness, /):
        self.openness = openness


class Kept(Pull):
    """Keeps its argument as ``self.openness``, but as the value given."""

    def __init__(self, openness=0.0):
        self.openness = openness
        self._k = 0.5


class WithBus(Line):
    """``bus`` is a class attribute of EnvironmentProvider (None); the argument is kept elsewhere."""

    def __init__(self, bus: str = "local"):
        self._bus_kind = bus


@dataclasses.dataclass
class Rule(DecisionModel):
    rate: float = 0.1
    targets: list = dataclasses.field(default_factory=lambda: [1, 2])
    label: str = "r"

    def decide_batch(self, observations, memories):
        return []


@dataclasses.dataclass
class Scaled(DecisionModel):
    rate: float = 0.1
    scale: dataclasses.InitVar[float] = 1.0

    def __post_init__(self, scale):
        self.rate = self.rate * scale

    def decide_batch(self, observations, memories):
        return []


class Slotted(DecisionModel):
    __slots__ = ("rate", "ctx")

    def __init__(self, rate: float = 0.1):
        self.rate = rate

    def decide_batch(self, observations, memories):
        return []


class Computed(DecisionModel):
    def __init__(self, percent: float = 10.0):
        self._fraction = percent / 100

    @property
    def percent(self):
        return self._fraction * 100

    def decide_batch(self, observations, memories):
        return []


def study(decision, environment=Line, **extra):
    return desim.Study(environment=environment, decision=decision, population=5, steps=5, seed=11, **extra)


def test_an_argument_kept_under_another_name_is_refused_with_the_fix():
    with pytest.raises(desim.DesimError) as info:
        study(Pull(openness=0.9))
    message = str(info.value)
    assert "decision=" in message and "Pull" in message
    assert "'openness'" in message and "openness=0.0 (its default)" in message
    assert "self.openness" in message and '{"ref": Pull, "args": {"openness": ...}}' in message
    assert isinstance(info.value, TypeError)      # what Python raises for a wrong argument, too


def test_a_required_argument_kept_under_another_name_is_refused():
    with pytest.raises(desim.DesimError, match="Needs.*'openness'.*has no default"):
        study(Needs(0.4))


@pytest.mark.parametrize("instance, says", [
    (Options(openness=0.2, extra=1), r"takes \*\*options"),
    (Spread(1.0, 2.0), r"takes \*weights"),
    (Positional(0.3), "takes 'openness' only by position"),
])
def test_arguments_that_cannot_be_read_back_are_refused(instance, says):
    with pytest.raises(desim.DesimError, match=says):
        study(instance)


@pytest.mark.parametrize("value, shown", [((1, 2), r"\(1, 2\) \(a tuple\)"),
                                          (np.array([1.0, 2.0]), r"array\(\[1., 2.\]\) \(a ndarray\)"),
                                          (float("nan"), r"nan \(a float\)"),
                                          ({1: "a"}, r"\{1: 'a'\} \(a dict\)")])
def test_an_argument_json_cannot_hold_as_it_is_is_refused(value, shown):
    with pytest.raises(desim.DesimError, match=f"argument 'openness' is kept as {shown}"):
        study(Kept(openness=value))


def test_a_class_attribute_of_the_same_name_is_not_the_argument():
    with pytest.raises(desim.DesimError, match="environment=.*WithBus.*'bus'.*bus='local' \\(its default\\)"):
        study(Pull, environment=WithBus(bus="remote"))


def test_dataclasses_slots_and_properties_are_recorded_from_their_attributes():
    files = study(Rule(rate=0.25, targets=[3], label="x")).files()
    assert files["simulation/simulation.json"]["decision"] == {
        "ref": f"{__name__}:Rule", "args": {"rate": 0.25, "targets": [3], "label": "x"}}
    assert study(Slotted(rate=0.7)).files()["simulation/simulation.json"]["decision"]["args"] == {"rate": 0.7}
    assert study(Computed(percent=25.0)).files()["simulation/simulation.json"]["decision"]["args"] == {"percent": 25.0}


def test_a_dataclass_init_var_is_refused():
    with pytest.raises(desim.DesimError, match="Scaled.*'scale'.*scale=1.0 \\(its default\\)"):
        study(Scaled(rate=0.1, scale=3.0))


def test_the_class_and_its_arguments_give_a_branch_that_replays_its_parent(tmp_path):
    """The fix the message gives: a branch with no treatment rebuilds Pull(openness=0.9) and so
    continues exactly as its parent did (the refused instance would have run openness=0.0 from the fork)."""
    s = study({"ref": Pull, "args": {"openness": 0.9}}, folder=tmp_path / "s")
    parent = desim.run_study(s)
    recorded = json.loads((tmp_path / "s" / "simulation" / "simulation.json").read_text())["decision"]
    assert recorded == {"ref": f"{__name__}:Pull", "args": {"openness": 0.9}}
    child = desim.branch(s.folder, parent.run_id, 3)
    assert child.status == "completed"
    rows = {(r["step"], r["agent_id"]): r["x"] for r in parent.panel().to_pylist()}
    again = {(r["step"], r["agent_id"]): r["x"] for r in child.panel().to_pylist()}
    assert again == rows and len(rows) == 5 * 5
    # openness 0.9 pulls everyone most of the way to 10 in one step: agent a4 (starts at 4) is at 9.4 +- noise
    assert abs(rows[(1, "a4")] - 9.4) < 0.5


def test_a_ref_dict_with_args_json_cannot_hold_is_refused():
    with pytest.raises(desim.DesimError, match=r"decision\['args'\]\['openness'\] is \(1, 2\)"):
        study({"ref": Pull, "args": {"openness": (1, 2)}})
