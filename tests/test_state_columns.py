"""A per-agent environment may give its agents' states as columns (``state_columns``) instead of one
``agent_state`` dict per agent per step: the same panel and initial states, and a clear error when the
columns are malformed."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import desim
from desim import RunFailed
from desim.experiments.recording import record, sink_for
from desim.run.assemble import assemble
from desim.study.contract import has_state_columns
from storeq import store_path
from probe_study import write_probe_study
from storeq import query as rows

STUDY = Path(__file__).resolve().parent.parent / "studies" / "opinion_diffusion"
PANEL = ("SELECT step, agent_id, CAST(state AS VARCHAR), typeof(state), action_kind, CAST(payload AS VARCHAR) "
         "FROM panel WHERE run_id=? ORDER BY step, agent_id")
INITIAL = "SELECT agent_id, CAST(state AS VARCHAR), typeof(state) FROM initial_states WHERE run_id=? ORDER BY agent_id"


def test_state_columns_give_the_panel_agent_state_gives(tmp_path):
    root = tmp_path / "opinion_diffusion"
    shutil.copytree(STUDY, root, ignore=shutil.ignore_patterns("runs", "__pycache__"))
    spec = desim.load_study(root, params={"n_agents": 300}, rounds=2)
    per_agent = assemble(spec)
    assert not has_state_columns(per_agent.environment) and not per_agent.states_as_columns
    by_dicts = record(per_agent, sink_for(spec))    # the study's agent_state, one dict per agent
    with_columns = assemble(desim.load_study(root, params={"n_agents": 300}, rounds=2))
    env = with_columns.environment                  # the same states, every agent's at once
    env.state_columns = lambda: {"opinion": [env.opinion[a] for a in env.ctx.agent_ids]}
    with_columns.path = "state_columns"
    assert with_columns.states_as_columns
    by_columns = record(with_columns, sink_for(spec))
    db = store_path(root)
    got, want = rows(db, PANEL, [by_columns.run_id]), rows(db, PANEL, [by_dicts.run_id])
    assert len(got) == 300 * spec.simulation.n_steps and got == want
    assert rows(db, INITIAL, [by_columns.run_id]) == rows(db, INITIAL, [by_dicts.run_id])
    assert by_columns.metrics().drop(["run_id"]).equals(by_dicts.metrics().drop(["run_id"]))


@pytest.mark.parametrize("columns, expected", [
    (lambda env: {"value": list(env.value.values())[:-1]}, "state_columns field 'value' has 4 values for 5 agents"),
    (lambda env: {"value": 1.0}, "state_columns field 'value' has no values for 5 agents"),
    (lambda env: [list(env.value.values())], "state_columns returned list, not a dict"),
])
def test_malformed_state_columns_stop_the_run_naming_the_field(tmp_path, columns, expected):
    root = write_probe_study(tmp_path / "probe", n_agents=5, n_steps=4)
    spec = desim.load_study(root)
    run = assemble(spec)
    env = run.environment
    good = lambda: {"value": [env.value[a] for a in env.ctx.agent_ids]}       # noqa: E731
    env.state_columns = lambda: columns(env) if run.ctx.step == 3 else good()
    run.path = "state_columns"
    with pytest.raises(RunFailed) as err:
        record(run, sink_for(spec))
    assert f"step 3: {expected}" in err.value.error, err.value.error
    assert rows(store_path(root), "SELECT DISTINCT step FROM panel ORDER BY step") == [(1,), (2,)]
