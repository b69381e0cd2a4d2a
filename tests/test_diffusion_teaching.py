"""What a course using desim's diffusion templates relies on (an instructor's review, items about
``desim.diffusion`` and its templates):

* each template answers its question at its defaults: its run ends on its own before ``n_steps`` (the
  ``hk``, ``deffuant`` and ``voter`` templates ran out of steps long before their process ended), and the
  opinion templates end with clusters that can no longer move;
* ``changed`` does not count floating-point round-off: the bounded-confidence models have a ``tolerance``
  below which a move is not made, so ``changed`` reaches 0 and stays there;
* Deffuant's ``unsettled`` says when no encounter can move anyone again (checked against its definition);
* HK's confidence set includes its bound (``<=``, Hegselmann & Krause 2002); Deffuant's is strict (``<``);
* every public class of ``desim.diffusion`` has a docstring naming its parameters, and each template points
  to one that ships with desim (``python -m pydoc desim.diffusion.X``);
* a run with no seed runs (a control) but says so when nothing changed in it;
* a number docs/diffusion.md states is the one computed here.
"""
from __future__ import annotations

import inspect
import json
import math
import pydoc
import re
from pathlib import Path

import numpy as np
import pytest

import desim
import desim.diffusion as diffusion
from desim.cli import main
from desim.commands.core import TEMPLATES
from desim.diffusion import state as state_module
from diffusion_studies import edges_population, run, write_study

DOCS = Path(__file__).resolve().parent.parent / "docs" / "diffusion.md"
TOL = 1e-9          # the documented default tolerance


def template(tmp_path, monkeypatch, name: str) -> Path:
    """A study made from the packaged template ``name`` by ``desim new``, as a student makes it."""
    monkeypatch.chdir(tmp_path)
    assert main(["new", name, "--template", name]) == 0
    return tmp_path / "studies" / name


def last_opinions(result) -> np.ndarray:
    panel = result.panel(columns=["opinion"]).to_pydict()
    last = max(panel["step"])
    return np.array([x for s, x in zip(panel["step"], panel["opinion"]) if s == last])


def groups(x: np.ndarray, gap: float = 1e-6) -> list[np.ndarray]:
    """The opinions split where two neighbours in sorted order are more than ``gap`` apart."""
    xs = np.sort(x)
    return np.split(xs, np.flatnonzero(np.diff(xs) > gap) + 1)


def opinions_by_step(result, n: int) -> np.ndarray:
    """Row t - 1: every node's opinion after step t (the panel in population order)."""
    panel = result.panel(columns=["opinion"]).to_pydict()
    return np.array(panel["opinion"], dtype=np.float64).reshape(-1, n)


# --- the templates answer their questions at their defaults ----------------------------------------

DIFFUSION = sorted(p.name for p in TEMPLATES.iterdir() if (p / "simulation" / "simulation.json").exists()
                   and json.loads((p / "simulation" / "simulation.json").read_text())["decision"]["ref"]
                   .startswith("desim.diffusion:"))
# sis is left out on purpose: an endemic SIS does not end; its n_steps is the window watched (docs/diffusion.md)
ENDING = [name for name in DIFFUSION if name != "sis"]


def test_the_list_of_diffusion_templates_is_the_one_expected():
    assert set(ENDING) == {"si", "sir", "seir", "cascade", "threshold", "voter", "majority", "hk", "deffuant"}


@pytest.mark.parametrize("name", ENDING)
def test_a_template_s_run_ends_on_its_own_before_its_cap_at_its_defaults(tmp_path, monkeypatch, name):
    """docs/diffusion.md: a template's n_steps is a cap, long enough for its process to end on its own."""
    root = template(tmp_path, monkeypatch, name)
    result = run(root)
    n_steps = desim.load_study(root).simulation.n_steps
    assert result.status == "completed" and result.end_reason, (name, result.end_reason)
    assert result.metrics().to_pydict()["step"][-1] < n_steps


def test_the_hk_template_ends_with_clusters_more_than_epsilon_apart(tmp_path, monkeypatch):
    """At HK's end every agent sits on one of a few opinions, any two of them more than epsilon apart
    (closer ones would still pull each other): the answer to "how many clusters" is read off the last step."""
    root = template(tmp_path, monkeypatch, "hk")
    spec = desim.load_study(root)
    eps = spec.simulation.parameters["epsilon"]
    result = run(root)
    assert result.end_reason.startswith("stop_when: changed <= 0")
    found = groups(last_opinions(result))
    assert 1 <= len(found) < 10
    assert all(np.ptp(g) < 1e-6 for g in found)
    means = [g.mean() for g in found]
    assert all(b - a > eps for a, b in zip(means, means[1:]))


def test_the_deffuant_template_ends_when_no_encounter_can_move_anyone(tmp_path, monkeypatch):
    root = template(tmp_path, monkeypatch, "deffuant")
    spec = desim.load_study(root)
    eps, mu = spec.simulation.parameters["epsilon"], spec.simulation.decision.args["mu"]
    result = run(root)
    assert result.end_reason.startswith("stop_when: unsettled <= 0")
    found = groups(last_opinions(result))
    assert len(found) >= 2
    assert all(np.ptp(g) <= 1.001 * TOL / mu for g in found)       # anyone meets anyone: no pair left to move
    means = [g.mean() for g in found]
    assert all(b - a >= eps for a, b in zip(means, means[1:]))


def test_the_voter_template_ends_with_one_opinion_everywhere(tmp_path, monkeypatch):
    root = template(tmp_path, monkeypatch, "voter")
    result = run(root)
    share = result.metrics().to_pydict()["share_1"]
    assert share[-1] in (0.0, 1.0) and 0 < share[0] < 1
    # ended by its own stop rule at consensus, before its cap, not by running out of steps
    assert result.end_reason == ("stop_when: share_1 <= 0" if share[-1] == 0 else "stop_when: share_1 >= 1") + \
        f" at step {result.steps_done}"
    assert result.steps_done < desim.load_study(root).simulation.n_steps


# --- changed does not count round-off ------------------------------------------------------------

def sparse_hk(tmp_path, name: str, args: dict, n_steps: int = 150):
    """HK with full confidence on a sparse 30-node small world: plain averaging, each node over itself and
    its own neighbours, whose last digits keep changing once it has converged (found by trying graphs)."""
    pop = {"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": 30}},
           "interaction": {"kind": "watts_strogatz", "k": 6, "p": 0.3, "graph_seed": 1}}
    return run(write_study(tmp_path / name, "HegselmannKrause", {"epsilon": 1.0, **args}, n_steps=n_steps,
                           population=pop))


def test_with_tolerance_zero_round_off_changes_go_on_for_ever(tmp_path):
    """The premise: with no tolerance, converged opinions still move in their last digits every step."""
    result = sparse_hk(tmp_path, "zero", {"tolerance": 0.0})
    changed = result.metrics().to_pydict()["changed"]
    x = opinions_by_step(result, 30)
    assert all(c > 0 for c in changed[-20:])
    assert np.ptp(x[-1]) < 1e-12 and np.abs(np.diff(x[-20:], axis=0)).max() < 1e-12   # round-off only


def test_by_default_changed_reaches_zero_and_the_opinions_then_stay_exactly_as_they_are(tmp_path):
    result = sparse_hk(tmp_path, "default", {})
    m = result.metrics().to_pydict()
    x = opinions_by_step(result, 30)
    first = next(i for i, (s, c) in enumerate(zip(m["step"], m["changed"])) if s > 0 and c == 0)
    assert first < len(m["step"]) - 10
    assert all(c == 0 for c in m["changed"][first:])
    assert (x[first - 1:] == x[first - 1]).all()        # row first - 1: after step m["step"][first]
    assert np.ptp(x[-1]) < 1e-6                          # and they have converged, to within the tolerance's reach
    actions = result.panel(columns=["action_kind"]).to_pydict()
    assert not any(k for s, k in zip(actions["step"], actions["action_kind"]) if s >= m["step"][first])


def test_hk_a_move_within_the_tolerance_is_not_made(tmp_path):
    """Two nodes 3e-9 apart, tolerance 1e-8: HK would move each by 1.5e-9; neither moves, neither acts."""
    pop = edges_population(2, [(0, 1)], attributes={"opinion": [0.4, 0.4 + 3e-9]})
    root = write_study(tmp_path / "tiny", "HegselmannKrause", {"epsilon": 0.5, "tolerance": 1e-8},
                       env={"initial": {"attribute": "opinion"}}, population=pop, n_steps=2)
    result = run(root)
    assert opinions_by_step(result, 2).tolist() == [[0.4, 0.4 + 3e-9]] * 2
    assert result.metrics().to_pydict()["changed"] == [0, 0, 0]
    moved = run(write_study(tmp_path / "tiny0", "HegselmannKrause", {"epsilon": 0.5, "tolerance": 1e-9},
                            env={"initial": {"attribute": "opinion"}}, population=pop, n_steps=1))
    assert np.allclose(opinions_by_step(moved, 2)[0], 0.4 + 1.5e-9, rtol=0, atol=1e-15)


@pytest.mark.parametrize("model", ["HegselmannKrause", "Deffuant"])
@pytest.mark.parametrize("value", [-1e-9, 1.0, "small"])
def test_the_tolerance_is_checked(tmp_path, capsys, model, value):
    root = write_study(tmp_path / "bad", model, {"tolerance": value})
    assert main(["run", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("desim: error: ") and "decision.args.tolerance: must be" in err and "[0, 1)" in err, err


# --- Deffuant's unsettled ------------------------------------------------------------------------

def test_deffuant_unsettled_is_its_definition_and_zero_is_the_end(tmp_path):
    """unsettled at each step = nodes with a neighbour within epsilon and more than tolerance / mu away,
    counted here over every pair of a complete network; once it is 0 nothing moves again."""
    n, eps, mu = 40, 0.3, 0.5
    pop = {"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": n}}, "interaction": {"kind": "complete"}}
    result = run(write_study(tmp_path / "d", "Deffuant", {"epsilon": eps, "mu": mu, "encounters": 10},
                             population=pop, n_steps=120))
    m = result.metrics().to_pydict()
    x = opinions_by_step(result, n)
    for t in range(len(x)):
        gap = np.abs(x[t][:, None] - x[t][None, :])
        live = (gap < eps) & (mu * gap > TOL)
        assert m["unsettled"][t + 1] == int(np.count_nonzero(live.any(axis=1))), t + 1
    end = m["unsettled"].index(0)
    assert 0 < end < len(m["step"]) - 10                 # it ends, and the run goes on past it
    assert all(c == 0 for c in m["changed"][end + 1:])
    assert (x[end - 1:] == x[end - 1]).all()
    assert abs(x[-1].mean() - x[0].mean()) < 1e-12        # the mean is conserved, as ever


# --- the bounds as the papers define them -------------------------------------------------------

def two_nodes(tmp_path, name: str, model: str, eps: float):
    pop = edges_population(2, [(0, 1)], attributes={"opinion": [0.25, 0.75]})      # exactly 0.5 apart
    root = write_study(tmp_path / name, model, {"epsilon": eps}, env={"initial": {"attribute": "opinion"}},
                       population=pop, n_steps=1)
    return opinions_by_step(run(root), 2)[0].tolist()


def test_hk_confidence_set_includes_the_bound_and_deffuant_s_excludes_it(tmp_path):
    assert two_nodes(tmp_path, "hk", "HegselmannKrause", 0.5) == [0.5, 0.5]        # |x_j - x_i| <= epsilon
    assert two_nodes(tmp_path, "d", "Deffuant", 0.5) == [0.25, 0.75]                # |x - y| < epsilon
    assert two_nodes(tmp_path, "d2", "Deffuant", 0.5000001) == [0.5, 0.5]          # they do meet


# --- docstrings that ship with desim ---------------------------------------------------------------

PUBLIC = {**{name: cls for name, cls in diffusion.MODELS.items()},
          "NetworkState": diffusion.NetworkState, "Nodes": diffusion.Nodes, "Prevalence": diffusion.Prevalence}


def declared_parameters(cls) -> list[str]:
    if hasattr(cls, "PARAMS"):
        return list(cls.PARAMS)
    if cls is diffusion.NetworkState:
        return list(state_module.PARAMS)
    return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args")]


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_public_class_has_a_docstring_naming_its_parameters(name):
    cls = PUBLIC[name]
    doc = cls.__dict__.get("__doc__")
    assert doc and doc.strip(), name
    for param in declared_parameters(cls):
        assert f"``{param}``" in doc, (name, param)
    if name in diffusion.MODELS:                # "each class's docstring gives ... its NDlib/EoN counterpart"
        assert "NDlib" in doc or "EoN" in doc, name
    if not declared_parameters(cls):
        assert "Parameters: none" in doc, name


@pytest.mark.parametrize("name", DIFFUSION)
def test_a_template_points_to_its_model_s_rule_in_what_ships(name):
    study = json.loads((TEMPLATES / name / "study.json").read_text())
    sim = json.loads((TEMPLATES / name / "simulation" / "simulation.json").read_text())
    cls = sim["decision"]["ref"].split(":")[1]
    assert f"python -m pydoc desim.diffusion.{cls}" in study["description"]
    assert "docs/diffusion.md states" not in study["description"]
    assert pydoc.locate(f"desim.diffusion.{cls}").__doc__


# --- a run with no seed -----------------------------------------------------------------------------

@pytest.mark.parametrize("env, said", [
    ({"seeds": 0}, "environment/environment.json: provider.args.seeds: 0 seeds: every node started in 'S'"),
    ({"seed_fraction": 0.001}, "provider.args.seed_fraction: round(0.001 * 200 nodes) is 0 seeds"),
    ({}, "provider.args: no seeds given (seeds, seed_fraction, seed_nodes or initial)"),
])
def test_a_run_with_no_seed_runs_and_says_so(tmp_path, env, said):
    result = run(write_study(tmp_path / "none", "SIR", {"beta": 0.3, "gamma": 0.2}, env=env, n_steps=3))
    assert result.status == "completed"
    assert len(result.warnings) == 1 and said in result.warnings[0], result.warnings
    assert "fine for a control run" in result.warnings[0]


def test_no_warning_when_a_seed_is_given_or_something_changed_without_one(tmp_path):
    seeded = run(write_study(tmp_path / "seeded", "SIR", {"beta": 0.3, "gamma": 0.2}, env={"seeds": 2}, n_steps=3))
    assert seeded.warnings == []
    # a threshold of 0 activates nodes with no active neighbour: no seed needed, so nothing to say
    free = run(write_study(tmp_path / "free", "LinearThreshold", {"threshold": 0.0}, n_steps=2))
    assert free.metrics().to_pydict()["count_active"][-1] > 0 and free.warnings == []


def test_desim_run_prints_the_no_seed_warning(tmp_path, capsys):
    root = write_study(tmp_path / "cli", "SIR", {"beta": 0.3, "gamma": 0.2}, env={"seeds": 0}, n_steps=3)
    assert main(["run", str(root), "-q"]) == 0
    assert "warning: environment/environment.json: provider.args.seeds: 0 seeds" in capsys.readouterr().err


def test_desim_validate_says_it_before_the_run(tmp_path, capsys):
    """validate's probe step runs the study: what the run would say, validate says first."""
    root = write_study(tmp_path / "check", "SIR", {"beta": 0.3, "gamma": 0.2}, env={"seeds": 0}, n_steps=3)
    assert main(["validate", str(root)]) == 0
    assert "warning: environment/environment.json: provider.args.seeds: 0 seeds" in capsys.readouterr().out


# --- a number of docs/diffusion.md ------------------------------------------------------------------

def test_the_final_size_root_docs_diffusion_states_is_the_root():
    """z = 1 - exp(-2.5 z), by bisection here: 0.89264..."""
    lo, hi = 0.5, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mid < 1 - math.exp(-2.5 * mid) else (lo, mid)
    text = DOCS.read_text(encoding="utf-8")
    stated = re.search(r"`z = 1 - exp\(-c beta z\)` \((0\.\d+)\)", text).group(1)
    assert float(stated) == round(lo, len(stated) - 2), (stated, lo)


# --- runs recorded under the old rule -----------------------------------------------------------------------

@pytest.mark.parametrize("model", ["HegselmannKrause", "Deffuant", "SIR"])
def test_a_run_recorded_before_the_rule_changed_is_not_branched_or_reused(tmp_path, model):
    """A bounded-confidence run of desim 0.3 followed the old rule: a branch (or resume) would replay its steps
    and go on under the new one, with no file of the study changed; nor is it an effect's control, nor 'the
    same run' as a new one. A model whose rule did not change (SIR) still branches."""
    import duckdb
    from desim.experiments.branches import BranchRefused
    from desim.store import Catalogue, StudyLayout, open_store
    args = {"beta": 0.2, "gamma": 0.1} if model == "SIR" else {"epsilon": 0.3}
    root = write_study(tmp_path / model, model, args, n_steps=4)
    first = run(root)
    with open_store(StudyLayout(root)) as con:
        row = Catalogue(con).run(first.run_id)
        assert Catalogue(con).reusable_control(json.loads(row["config"]), row["code_hash"]) == first.run_id
    con = duckdb.connect(str(StudyLayout(root).db))
    con.execute("UPDATE runs SET desim_version = '0.3.0' WHERE run_id = ?", [first.run_id])
    con.close()
    if model == "SIR":
        assert desim.branch(root, first.run_id, 2).status == "completed"
        return
    with pytest.raises(BranchRefused, match=rf"desim\.diffusion:{model} \(desim 0\.4 changed its rule"):
        desim.branch(root, first.run_id, 2)
    with open_store(StudyLayout(root)) as con:
        assert Catalogue(con).reusable_control(json.loads(row["config"]), row["code_hash"]) is None
    again = run(root)
    with open_store(StudyLayout(root)) as con:
        assert Catalogue(con).twin_before(again.run_id) is None
