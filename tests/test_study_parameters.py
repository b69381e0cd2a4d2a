"""The reference studies refuse out-of-range parameters, naming simulation/simulation.json and the parameter.

A probability outside [0, 1] (``desim sweep studies/rumor_network --set p_believe=1.5``) used to run to the
end, and a count below 1 (``--set n_seeds=-3``) failed inside ``reset`` with numpy's "negative dimensions are
not allowed", which names no parameter. Each case here is refused before anything is written, by
``desim run`` (through ``load_study`` + ``run_study``) and by ``desim sweep``.
"""
from __future__ import annotations

import re

import pytest

import desim
from desim.cli import main

CASES = [
    # rumor_network: every probability, and the counts
    ("rumor_network", {"p_believe": 1.5}, "p_believe", "must be in [0, 1] (got 1.5)"),
    ("rumor_network", {"p_believe": -0.1}, "p_believe", "must be in [0, 1] (got -0.1)"),
    ("rumor_network", {"p_stop": -1.0}, "p_stop", "must be in [0, 1] (got -1)"),
    ("rumor_network", {"p_stop": 1.2}, "p_stop", "must be in [0, 1] (got 1.2)"),
    ("rumor_network", {"correction_stop": 1.01}, "correction_stop", "must be in [0, 1] (got 1.01)"),
    ("rumor_network", {"correction_stop": -0.5}, "correction_stop", "must be in [0, 1] (got -0.5)"),
    ("rumor_network", {"correction_doubt": 2.0}, "correction_doubt", "must be in [0, 1] (got 2)"),
    ("rumor_network", {"correction_doubt": -1.0}, "correction_doubt", "must be in [0, 1] (got -1)"),
    ("rumor_network", {"n_seeds": -3}, "n_seeds", "must be at least 1 (got -3)"),
    ("rumor_network", {"n_seeds": 0}, "n_seeds", "must be at least 1 (got 0)"),
    ("rumor_network", {"n_seeds": 1001}, "n_seeds", "must be at most the number of agents, 1000 (got 1001)"),
    ("rumor_network", {"n_agents": 0}, "n_agents", "must be at least 1 (got 0)"),
    ("rumor_network", {"transmission": "maki_thompson", "p_believe": 1.5}, "p_believe", "must be in [0, 1]"),
    # opinion_diffusion (and its LLM variant, which builds the same population)
    ("opinion_diffusion", {"n_agents": 0}, "n_agents", "must be at least 1 (got 0)"),
    ("opinion_diffusion_llm", {"n_agents": -2}, "n_agents", "must be at least 1 (got -2)"),
    # schelling: a jump is drawn from [0, max_jump)
    ("schelling", {"max_jump": 0.0}, "max_jump", "must be a number above 0 (got 0)"),
    ("schelling", {"max_jump": -1.0}, "max_jump", "must be a number above 0 (got -1)"),
    # dorm_deliberation: counts, the canteen's layers (from parameters of the same names) and the taste noise
    ("dorm_deliberation", {"n_students": 0}, "n_students", "must be at least 1 (got 0)"),
    ("dorm_deliberation", {"dorm_size": 0}, "dorm_size", "must be at least 1 (got 0)"),
    ("dorm_deliberation", {"lunch_days": 0}, "lunch_days", "must be in 1..28 (got 0)"),
    ("dorm_deliberation", {"canteen_servers": 0}, "canteen_servers", "must be at least 1 (got 0)"),
    ("dorm_deliberation", {"service_minutes": -1.0}, "service_minutes", "must be 0 or more (got -1)"),
    ("dorm_deliberation", {"noise": -1.0}, "noise", "must be 0 or more (got -1)"),
    # epidemic_testing: the lab
    ("epidemic_testing", {"seek": 2.0}, "seek", "must be in [0, 1] (got 2)"),
    ("epidemic_testing", {"capacity": 0}, "capacity", "must be at least 1 (got 0)"),
    ("epidemic_testing", {"turnaround_hours": -1.0}, "turnaround_hours", "must be 0 or more (got -1)"),
]


@pytest.mark.parametrize("study, params, name, words", CASES,
                         ids=[f"{s}-{'-'.join(f'{k}={v}' for k, v in p.items())}" for s, p, _, _ in CASES])
def test_out_of_range_parameter_is_refused_naming_file_and_parameter(study_copy, study, params, name, words):
    if study.endswith("_llm"):
        study_copy(study.removesuffix("_llm"))                    # the variant imports its sibling's model.py
    root = study_copy(study)
    with pytest.raises(desim.StudyConfigError) as err:
        desim.run_study(desim.load_study(root, steps=2, params=params))
    text = str(err.value)
    assert "simulation/simulation.json" in text and f"parameters.{name}: " in text, text
    assert words in text, text
    assert not (root / "runs" / "desim.duckdb").exists()          # refused before anything was written


def test_every_problem_is_named_at_once(study_copy):
    root = study_copy("rumor_network")
    with pytest.raises(desim.StudyConfigError) as err:
        desim.run_study(desim.load_study(root, steps=2, params={"p_believe": 1.5, "p_stop": -1.0,
                                                                "correction_doubt": 2.0}))
    text = str(err.value)
    assert all(f"parameters.{n}: rumor_network: a probability" in text
               for n in ("p_believe", "p_stop", "correction_doubt")), text


@pytest.mark.parametrize("setting, name", [("p_believe=1.5", "p_believe"), ("correction_doubt=2", "correction_doubt"),
                                           ("p_stop=-1", "p_stop"), ("n_seeds=-3", "n_seeds")])
def test_the_reviewers_sweeps_are_refused_before_anything_is_recorded(study_copy, capsys, setting, name):
    """`desim sweep studies/rumor_network --set p_believe=1.5` (and the others) completed; now exit 2 and no
    sweep, no run is recorded."""
    root = study_copy("rumor_network")
    assert main(["sweep", str(root), "--set", setting, "--replicates", "2", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"simulation/simulation\.json: parameters\.{name}: rumor_network: ", err), err
    assert "negative dimensions" not in err
    assert not (root / "runs" / "desim.duckdb").exists()


def test_the_defaults_and_the_edges_of_the_ranges_still_run(study_copy):
    """The checks refuse only what is out of range: the probabilities' ends 0 and 1 and one seed spreader
    per agent run."""
    root = study_copy("rumor_network")
    for params in ({"p_believe": 1.0, "p_stop": 0.0, "correction_stop": 1.0, "correction_doubt": 0.0},
                   {"p_believe": 0.0, "p_stop": 1.0, "correction_stop": 0.0, "correction_doubt": 1.0,
                    "n_agents": 10, "n_seeds": 10}):
        assert desim.run_study(desim.load_study(root, steps=2, params=params)).status == "completed"
