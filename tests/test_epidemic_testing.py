"""The epidemic_testing reference study: without testing it is desim.diffusion's SIR; with testing,
a lab of larger capacity isolates more cases in time and spares more people, and a small one queues."""
from __future__ import annotations

import json

import desim


def finals(result):
    wide = result.metrics().to_pydict()
    return {name: (max(v for v in wide[name] if v is not None)) for name in
            ("cumulative_incidence", "isolated", "waiting_for_a_test", "tests_done")}


def test_a_bigger_lab_spares_more_people_and_a_small_one_queues(study_copy):
    root = study_copy("epidemic_testing")
    runs = {label: finals(desim.run_study(desim.load_study(root, params={"n_people": 600, **p})))
            for label, p in (("none", {"testing_starts": 1000}), ("small", {"capacity": 1}),
                             ("large", {"capacity": 60}))}
    assert runs["none"]["isolated"] == runs["none"]["tests_done"] == 0
    assert runs["large"]["isolated"] > runs["small"]["isolated"] > 0
    assert runs["small"]["waiting_for_a_test"] > runs["large"]["waiting_for_a_test"]
    assert runs["large"]["cumulative_incidence"] < runs["small"]["cumulative_incidence"] <= runs["none"]["cumulative_incidence"]


def test_without_testing_it_is_the_plain_sir(study_copy):
    root = study_copy("epidemic_testing")
    tested = desim.run_study(desim.load_study(root, seed=3, params={"n_people": 400, "testing_starts": 1000}))
    # the same study with the library's own environment and collector: the same epidemic, step by step
    env = json.loads((root / "environment" / "environment.json").read_text())
    env["provider"] = {"ref": "desim.diffusion:NetworkState", "args": {"seeds": 5}}
    (root / "environment" / "environment.json").write_text(json.dumps(env))
    sim = json.loads((root / "simulation" / "simulation.json").read_text())
    sim["collector"] = {"ref": "desim.diffusion:Prevalence"}
    (root / "simulation" / "simulation.json").write_text(json.dumps(sim))
    plain = desim.run_study(desim.load_study(root, seed=3, params={"n_people": 400, "testing_starts": 1000}))
    a, b = tested.panel().to_pydict(), plain.panel().to_pydict()
    assert a["state"] == b["state"] and a["infected_by"] == b["infected_by"] and set(a["isolated"]) == {False}
    assert tested.steps_done == plain.steps_done


def test_the_study_is_reproducible_and_branches_exactly(study_copy):
    root = study_copy("epidemic_testing")
    params = {"n_people": 300, "testing_starts": 30}
    a, b = desim.run_study(desim.load_study(root, params=params)), desim.run_study(desim.load_study(root, params=params))
    assert a.panel().drop(["run_id"]).equals(b.panel().drop(["run_id"]))
    child = desim.branch(root, a.run_id, 15, params={"testing_starts": 16})     # the lab opens earlier
    rows = [r for r in child.panel().to_pylist() if r["step"] < 15]
    assert [(r["agent_id"], r["state"]) for r in rows] == [(r["agent_id"], r["state"]) for r in a.panel().to_pylist()
                                                           if r["step"] < 15]
    assert finals(child)["tests_done"] > finals(a)["tests_done"]
