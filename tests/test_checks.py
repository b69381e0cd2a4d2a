"""The engine's checks of study output, as the plain functions they are, and which path a study takes."""
from __future__ import annotations

import numpy as np
import pytest

from desim import Action, ActionColumns, DecisionModel, EnvironmentProvider
from desim.run.checks import (RunError, checked_action_columns, checked_actions, checked_metrics,
                              checked_state_columns)
from desim.study.contract import study_path

IDS = ["a", "b", "c"]
KNOWN = {a: i for i, a in enumerate(IDS)}


def acts(*agents, step=2, **over):
    return [Action(agent_id=a, step=step, kind=over.get("kind", "move"), payload=over.get("payload", {}),
                   source=over.get("source", "rule")) for a in agents]


def test_good_actions_pass_in_any_order_and_for_some_agents():
    for actions in (acts("a", "b", "c"), acts("c", "a"), []):
        assert checked_actions(actions, IDS, 2, 0, KNOWN, frozenset(IDS)) is actions


@pytest.mark.parametrize("actions, message", [
    ("not a list", "decide_batch returned str, not a list"),
    ([{"agent_id": "a"}], "decide_batch returned {'agent_id': 'a'}, not an Action"),
    (acts("zed"), "action for unknown agent 'zed'"),
    (acts("a", "a", "b"), "two actions for agent 'a' in one round"),
    (acts("a", step=3), "action for agent 'a' says step 3"),
    (acts("a", source="oracle"), r"action for agent 'a': source is 'oracle'; it must be one of rule, llm, "),
    (acts("a", source=["llm"]), r"action for agent 'a': source is \['llm'\]; it must be one of rule"),
    (acts("a", kind=""), "action for agent 'a': kind is ''; it must be a non-empty string"),
    (acts("a", kind=7), "action for agent 'a': kind is 7; it must be a non-empty string"),
    (acts("a", payload=[1]), r"action for agent 'a': payload is list \[1\]; it must be a dict"),
    (acts("b", "c") + [Action(agent_id=["a", "b"], step=2, kind="move")],
     r"action for unknown agent \['a', 'b'\]"),                  # an id that cannot be hashed: named, no crash
])
def test_garbage_actions_are_refused_naming_the_agent(actions, message):
    with pytest.raises(RunError, match=f"step 2 round 1: {message}"):
        checked_actions(actions, IDS, 2, 1, KNOWN, frozenset(IDS))


def test_an_action_for_an_agent_away_this_round_is_refused():
    with pytest.raises(RunError, match="action for agent 'c', which did not take part"):
        checked_actions(acts("a", "c"), ["a", "b"], 2, 0, KNOWN)


def test_metrics_must_be_numbers():
    assert checked_metrics({"m": np.float32(1.5), "n": 2}, 4, "C") == {"m": 1.5, "n": 2.0}
    assert checked_metrics(None, 4, "C") == {}
    for bad, message in ((["m"], "C.collect returned list"), ({"m": "high"}, "C.collect: metric 'm' is 'high'"),
                         ({"m": True}, "C.collect: metric 'm' is True"), ({"m": None}, "C.collect: metric 'm' is None"),
                         ({"m": object()}, "C.collect: metric 'm' is <object")):
        with pytest.raises(RunError, match=f"step 4: {message}"):
            checked_metrics(bad, 4, "C")


def test_metric_names_that_clash_in_the_store_are_refused():
    """A metric ``step`` made the wide metrics table hold two ``step`` columns (its export unreadable by
    pyarrow); ``Share`` beside ``share``, or ``1`` beside ``"1"``, are one name to SQL."""
    for bad, message in (({"step": 1.0}, "a metric named 'step', a column the metrics table has already"),
                         ({"x": 1, "RUN_ID": 2}, "a metric named 'RUN_ID'"),
                         ({"Share": 0.1, "share": 0.2}, "metrics 'Share' and 'share', one name to SQL"),
                         ({1: 0.1, "1": 0.2}, "metrics 1 and '1', one name")):
        with pytest.raises(RunError, match=f"step 4: C.collect returned {message}"):
            checked_metrics(bad, 4, "C")
    assert checked_metrics({"steps": 1, "share_S": 0.5, "share_s_": 0.5}, 4, "C") == {
        "steps": 1.0, "share_S": 0.5, "share_s_": 0.5}


def test_state_columns_need_one_value_per_agent_per_field():
    good = {"x": np.zeros(3), "y": ["p", "q", "r"]}
    assert checked_state_columns(good, 3, 1) is good
    with pytest.raises(RunError, match="field 'x' has 2 values for 3 agents"):
        checked_state_columns({"x": [1, 2]}, 3, 1)
    with pytest.raises(RunError, match="field 'x' has no values"):
        checked_state_columns({"x": 5}, 3, 1)
    with pytest.raises(RunError, match="returned list, not a dict"):
        checked_state_columns([[1, 2, 3]], 3, 1)


def test_action_columns_need_one_entry_per_participant():
    good = ActionColumns(kind="move", payload={"to": np.arange(3)})
    assert checked_action_columns(good, 3, 5, 0) is good
    with pytest.raises(RunError, match="step 5 round 0: decide_columns must return ActionColumns with 4 entries"):
        checked_action_columns(good, 4, 5, 0)
    with pytest.raises(RunError, match="got dict"):
        checked_action_columns({"kind": "move"}, 3, 5, 0)


# --- the path a study takes ---------------------------------------------------------------------
class Columns(EnvironmentProvider):
    def state_columns(self):
        return {}


class Both(Columns):
    def agent_state(self, agent_id):
        return {}


class Same(EnvironmentProvider):
    def agent_state(self, agent_id):
        return {}

    def state_columns(self):
        return {}


class Grid(Same):
    def observe_columns(self, idx, t, r):
        return {}


class Rule(DecisionModel):
    pass


class ColumnRule(DecisionModel):
    def decide_columns(self, obs, idx, t, r):
        return None


def test_the_most_derived_definition_decides_the_path():
    assert study_path(Columns(), Rule()) == "state_columns"
    assert study_path(Both(), Rule()) == "agents"          # a subclass's agent_state is what it wrote last
    assert study_path(Same(), Rule()) == "state_columns"   # both in one class: the columns, the same panel
    assert study_path(Grid(), ColumnRule()) == "columnar"
    assert study_path(Grid(), Rule()) == "agents"          # written for both paths: agent_state per agent
    assert study_path(EnvironmentProvider(), Rule()) == "agents"
