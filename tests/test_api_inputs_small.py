"""Small API rough edges: ``panel(columns="x")`` is one column, not its letters; ``branch``'s step
arguments are checked at the call; the experiments' docstrings name what is reachable as they say."""
from __future__ import annotations

import re

import numpy as np
import pytest

import desim
import desim.experiments
from desim.experiments.branches import BranchRefused, branch
from walk_study import write_walk_study


@pytest.fixture
def walk(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=3, lockdown_day=2)
    desim.run_study(desim.load_study(root), run_id="parent")
    return root


def test_a_single_column_name_is_one_column(walk):
    data = desim.open(walk)
    one = data.panel(columns="x")
    assert one.column_names == ["run_id", "step", "agent_id", "x"]
    assert one.equals(data.panel(columns=["x"]))
    assert data.panel(columns="action_kind").column_names == ["run_id", "step", "agent_id", "action_kind"]
    with pytest.raises(KeyError, match="no panel column 'nope'"):       # the name, not its first letter
        data.panel(columns="nope")


@pytest.mark.parametrize("at_step, shown", [("2", "'2' (str)"), (2.0, "2.0 (float)"), (True, "True (bool)"),
                                            (None, "None (NoneType)")])
def test_a_fork_step_that_is_no_int_is_refused_naming_at_step(walk, at_step, shown):
    with pytest.raises(BranchRefused) as caught:
        branch(walk, "parent", at_step)
    assert str(caught.value) == f"at_step must be an int (a step), got {shown}"


def test_branch_steps_that_is_no_int_is_refused_naming_steps(walk):
    with pytest.raises(BranchRefused) as caught:
        desim.branch(walk, "parent", 2, steps="5")
    assert str(caught.value) == "steps must be an int (a step), got '5' (str)"


def test_a_numpy_fork_step_is_taken_as_its_int(walk):
    result = branch(walk, "parent", np.int64(2))
    assert result.status == "completed"
    row = desim.open(walk).run_rows([result.run_id])[0]
    assert row["fork_step"] == 2 and row["parent_run_id"] == "parent"


def test_the_experiments_docstring_names_what_is_reachable():
    """Each name the first paragraph gives in brackets is an attribute of ``desim.experiments``; each import
    line the docstrings of ``desim`` and ``desim.experiments`` show works."""
    doc = desim.experiments.__doc__
    first = doc.split("\n\n")[0]
    named = [n for group in re.findall(r"\(([^()]*)\)", first) for n in re.findall(r"``(\w+)``", group)]
    assert named == ["run_study", "branch", "resume", "effect", "effect_table", "compare"]
    assert all(hasattr(desim.experiments, n) for n in named)
    lines = re.findall(r"``(from [\w.]+ import \w+)``", doc + desim.__doc__)
    assert lines == ["from desim.experiments.sweep import run_sweep", "from desim.sweep import run_sweep",
                     "from desim.sweep import run_sweep"]
    for line in lines:
        scope: dict = {}
        exec(line, scope)
        assert callable(scope["run_sweep"])
