"""A diffusion model's per-node parameter read from the agents' attributes follows the scheduled
events that change those attributes: a treatment that raises the treated agents' recovery rate at
step T changes who recovers from step T on, and nothing before."""
from __future__ import annotations

import json

import pytest

import desim
from diffusion_studies import edges_population, run, states, write_study

N = 20


def treated_study(tmp_path, at_step: int, value: float = 1.0, op: str = "set"):
    """Everyone infectious from the start, nobody infects anyone (beta 0), nobody recovers (each
    agent's recovery_rate 0) until the event sets the treated half's rate at ``at_step``."""
    arm = ["treated" if i % 2 else "control" for i in range(N)]
    pop = edges_population(N, [(i, i + 1) for i in range(N - 1)],
                           attributes={"recovery_rate": [0.0] * N, "arm": arm})
    root = write_study(tmp_path / f"treat_{at_step}_{op}", "SIR", {"beta": 0.0, "gamma": {"attribute": "recovery_rate"}},
                       env={"seed_nodes": [f"n{i:02d}" for i in range(N)]}, n_steps=6, population=pop)
    env_file = root / "environment" / "environment.json"
    env = json.loads(env_file.read_text())
    env["scheduled_events"] = [{"at_step": at_step, "name": "treatment", "target": "recovery_rate",
                                "op": op, "value": value, "selector": {"arm": "treated"}}]
    env_file.write_text(json.dumps(env))
    return root, arm


def test_an_event_on_the_attribute_changes_who_recovers_from_its_step_on(tmp_path):
    root, arm = treated_study(tmp_path, at_step=3)
    by_step = states(run(root))
    for t in range(0, 3):                      # before the treatment nobody recovers
        assert by_step[t] == ["I"] * N
    for t in range(3, 7):                      # from its step, every treated agent has recovered, no control
        assert by_step[t] == ["R" if a == "treated" else "I" for a in arm]
    # the same study with the treatment after the last step: nobody ever recovers
    late, _ = treated_study(tmp_path, at_step=50)
    assert all(row == ["I"] * N for row in states(run(late)).values())


def test_an_event_that_adds_to_the_rate_is_read_as_the_sum(tmp_path):
    """op add on the attribute: 0 + 1.0 for the treated at step 2, so they recover at step 2."""
    root, arm = treated_study(tmp_path, at_step=2, value=1.0, op="add")
    by_step = states(run(root))
    assert by_step[1] == ["I"] * N
    assert by_step[2] == ["R" if a == "treated" else "I" for a in arm]


def test_an_event_that_leaves_the_rate_out_of_range_fails_the_run_naming_agent_and_attribute(tmp_path):
    root, _ = treated_study(tmp_path, at_step=2, value=1.5)
    with pytest.raises(desim.RunFailed) as failed:
        run(root)
    message = str(failed.value)
    # the study's files were right: the message points at the event's step, then names agent and value
    assert "environment/environment.json: scheduled_events (step 2): after this step's events" in message
    assert "agent 'n01'" in message and "'recovery_rate' = 1.5" in message and "must be in [0, 1]" in message
    # the steps before the event were stored
    steps = desim.open(root).sql("SELECT max(step) AS last FROM panel").to_pydict()["last"][0]
    assert steps == 1


def test_an_agent_whose_attribute_is_missing_gets_the_declared_default(tmp_path):
    """A null attribute (an empty roster cell) is missing: the parameter's "default" stands in, as it does
    for an agent without the attribute. Everyone infectious, nobody infects; the agents with a rate of 0
    never recover, the one whose rate is null recovers at step 1 by the default of 1."""
    rates = [0.0] * N
    rates[5] = None
    pop = edges_population(N, [(i, i + 1) for i in range(N - 1)], attributes={"recovery_rate": rates})
    root = write_study(tmp_path / "null_rate", "SIR",
                       {"beta": 0.0, "gamma": {"attribute": "recovery_rate", "default": 1.0}},
                       env={"seed_nodes": [f"n{i:02d}" for i in range(N)]}, n_steps=3, population=pop)
    by_step = states(run(root))
    assert by_step[1] == ["R" if i == 5 else "I" for i in range(N)]
