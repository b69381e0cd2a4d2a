"""A ``desim.Study`` made from classes a notebook defined names them ``__main__:Env``, which no worker process
can import; ``desim.effect`` and ``run_sweep`` run such a study's runs in this process (saying so with a
``RunsInProcessWarning`` when workers were asked for), and refuse it up front on Ray, before anything is
recorded. A program Python read from standard input (``python - < file``) has no file a worker could start
from: its sweeps run in this process too, instead of every run ending "the worker process died".

The notebook is played in this process by a ``__main__`` module with no file (what a Jupyter kernel, the REPL
and ``python -c`` have); the standard input and the script cases run a real ``python`` child."""
from __future__ import annotations

import json
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest

import desim
from desim.experiments.effects import EffectError
from desim.experiments.sweep import run_sweep
from desim.experiments.sweep.executors import (
    InProcessExecutor,
    LocalExecutor,
    RunsInProcessWarning,
    make_executor,
)
from tiny_models import BIAS_COPY
from tiny_study import write_tiny_study

CLASSES = BIAS_COPY

SETTINGS = dict(population=3, steps=3, seed=1, parameters={"week": 2}, layers={"bias": 0.0},
                scheduled_events=[{"at_step": "$week", "name": "e", "target": "bias", "op": "set", "value": 1.0}])


@pytest.fixture
def notebook(monkeypatch):
    """A ``__main__`` as a Jupyter kernel has it: the cell's classes, no file a worker could run again."""
    main = types.ModuleType("__main__")
    exec(compile(CLASSES, "<cell>", "exec"), main.__dict__)
    monkeypatch.setitem(sys.modules, "__main__", main)
    return main


@pytest.fixture
def study(notebook, tmp_path):
    folder = tmp_path / "nb_study"
    desim.Study(environment=notebook.Env, decision=notebook.Copy, folder=folder, **SETTINGS).save()
    return folder


def _in_process_warnings(caught) -> list[warnings.WarningMessage]:
    return [w for w in caught if issubclass(w.category, RunsInProcessWarning)]


def test_the_study_names_notebook_classes(study):
    provider = json.loads((study / "environment" / "environment.json").read_text())["provider"]
    assert provider["ref"] == "__main__:Env"


def test_an_effect_of_a_notebook_study_runs_in_this_process_and_says_so(study):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eff = desim.effect(study, 2, {"week": 3}, replicates=2)
    said = _in_process_warnings(caught)
    assert [str(w.message) for w in said] == [
        "desim.effect: simulation/simulation.json: decision.ref is __main__:Copy and environment/environment.json: "
        "provider.ref is __main__:Env, classes defined in this notebook (or interactive session), which a worker "
        "process cannot import; so its runs run one at a time in this process. To run them on several workers, "
        "move the classes into a module file beside the notebook or script (e.g. my_classes.py, then from "
        "my_classes import Copy, Env) and make the study from there; pass workers=1 to run them here without this "
        "warning"]
    assert said[0].filename == __file__                 # the user's line, not desim's
    assert eff.errors == {} and eff.completed == 2
    # bias is set to 1 at the week: step 2 for the controls, step 3 for the branches; every agent copies it
    x = {r["step"]: r["mean"] for r in desim.effect_rows(study, eff.effect_id, states=["x"]) if r["what"] == "state"}
    assert x == {1: 0.0, 2: -1.0, 3: 0.0}


def test_workers_1_runs_in_this_process_without_a_warning(study):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eff = desim.effect(study, 2, {"week": 3}, replicates=2, workers=1)
    assert _in_process_warnings(caught) == []
    assert eff.errors == {} and eff.completed == 2


def test_a_sweep_of_a_notebook_study_runs_in_this_process(study):
    with pytest.warns(RunsInProcessWarning, match=r"^run_sweep: simulation/simulation.json: decision.ref is "
                                                   r"__main__:Copy and .* classes defined in this notebook"):
        result = run_sweep(study, {"week": [2, 3]}, replicates=1, workers=2)
    assert result.failed == [] and result.completed == 2
    data = desim.open(study)
    weeks = {r.run_id: r.combo["week"] for r in result.plan.runs}
    x_at_2 = {weeks[run]: sorted(data.panel(run, "x", steps=2).to_pandas()["x"]) for run in weeks}
    assert x_at_2 == {2: [1.0, 1.0, 1.0], 3: [0.0, 0.0, 0.0]}     # bias 1 from the week on


def test_ray_refuses_a_notebook_study_before_anything_is_recorded(study):
    with pytest.raises(EffectError) as e:
        desim.effect(study, 2, {"week": 3}, replicates=2, backend="ray")
    assert str(e.value) == (
        "simulation/simulation.json: decision.ref is __main__:Copy and environment/environment.json: provider.ref "
        "is __main__:Env, which a ray worker cannot import (its __main__ is another program): move the classes "
        "into the study folder's model.py (the study refers to them as model:Copy, model:Env), whose files travel "
        "with the runs, or use backend='local', which runs such a study in this process")
    assert not (study / "runs").exists()


def test_an_unknown_backend_is_refused_before_the_sweep_is_recorded(study):
    with pytest.raises(desim.experiments.sweep.SweepError, match=r"^unknown backend 'nope' \(choose from local, ray\)"):
        run_sweep(study, {"week": [2, 3]}, replicates=1, backend="nope")
    assert not (study / "runs" / "desim.duckdb").exists()


def test_the_local_backend_picks_this_process_only_when_workers_cannot_run_the_study(study, tmp_path, monkeypatch):
    assert isinstance(make_executor("local", study, 2), InProcessExecutor)
    files = write_tiny_study(tmp_path / "files", CLASSES.replace("Copy", "Rule"), {
        "n_steps": 1, "decision": {"ref": "model:Rule"}})
    with make_executor("local", files, 2) as executor:
        assert isinstance(executor, LocalExecutor)


def test_the_fix_the_warning_gives_runs_on_workers(notebook, tmp_path, monkeypatch):
    """The classes moved into my_classes.py beside the notebook: the study names them my_classes:Env, which
    a worker imports (it has the notebook's sys.path), so the runs go to the workers, without a warning."""
    beside = tmp_path / "notebook_folder"
    beside.mkdir()
    (beside / "my_classes.py").write_text(CLASSES)
    monkeypatch.syspath_prepend(str(beside))
    folder = tmp_path / "moved"
    try:
        import my_classes
        desim.Study(environment=my_classes.Env, decision=my_classes.Copy, folder=folder, **SETTINGS).save()
        with make_executor("local", folder, 2) as executor:
            assert isinstance(executor, LocalExecutor)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run_sweep(folder, {"week": [2, 3]}, workers=2)
    finally:
        sys.modules.pop("my_classes", None)     # no other test sees this one's module
    assert _in_process_warnings(caught) == []
    assert result.failed == [] and result.completed == 2


RANDOM = CLASSES + '''

class Noisy(DecisionModel):
    """The layer's value plus noise from the run's seeded stream: a panel that only the same seed repeats."""

    def decide_batch(self, obs, mem):
        rng = self.ctx.rng("noise")
        return [Action(agent_id=o.agent_id, step=o.step, kind="set",
                       payload={"x": o.local_physical["b"] + float(rng.normal())}) for o in obs]
'''


def test_runs_in_this_process_give_the_panels_workers_give(notebook, tmp_path, monkeypatch):
    """The same classes, once a notebook's (in this process) and once a module's (on workers): the same seeds
    and the same panels, bit for bit."""
    exec(compile(RANDOM, "<cell 3>", "exec"), notebook.__dict__)
    beside = tmp_path / "notebook_folder"
    beside.mkdir()
    (beside / "noisy_classes.py").write_text(RANDOM)
    monkeypatch.syspath_prepend(str(beside))
    panels = {}
    try:
        import noisy_classes
        for name, module in (("here", notebook), ("workers", noisy_classes)):
            folder = tmp_path / name
            desim.Study(environment=module.Env, decision=module.Noisy, folder=folder, **SETTINGS).save()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RunsInProcessWarning)
                result = run_sweep(folder, {"week": [2, 3]}, replicates=2, workers=2)
            assert result.failed == []
            slot = {r.run_id: (r.combo["week"], r.replicate, r.seed) for r in result.plan.runs}
            table = desim.open(folder).panel(list(slot), "x").to_pandas()
            panels[name] = sorted((*slot[row.run_id], row.step, row.agent_id, row.x) for row in table.itertuples())
    finally:
        sys.modules.pop("noisy_classes", None)
    assert len(panels["here"]) == 2 * 2 * 3 * 3        # combinations x replicates x agents x steps 1..3
    assert panels["here"] == panels["workers"]


INTERRUPTING = '''
STOP = [True]


class Interrupted(Copy):
    """A Ctrl-C (a notebook's "interrupt kernel") that lands in step 2 of the first run, once."""

    def decide_batch(self, obs, mem):
        if obs[0].step == 2 and STOP:
            STOP.clear()
            raise KeyboardInterrupt
        return super().decide_batch(obs, mem)
'''


def test_ctrl_c_in_a_run_in_this_process_stops_the_sweep_and_resume_finishes_it(notebook, tmp_path):
    exec(compile(INTERRUPTING, "<cell 2>", "exec"), notebook.__dict__)
    folder = tmp_path / "interrupted"
    desim.Study(environment=notebook.Env, decision=notebook.Interrupted, folder=folder, **SETTINGS).save()
    planned = []
    with pytest.raises(KeyboardInterrupt):
        run_sweep(folder, {"week": [2, 3]}, workers=1, on_start=lambda plan, n: planned.append(plan.sweep_id))
    [sweep_id] = planned
    left = folder / "runs" / "sweeps" / sweep_id
    # nothing of the interrupted run is left in the sweep's folder: no partial file, no progress file
    assert sorted(p.name for p in left.rglob("*") if p.is_file() and p.name != "owner.json") == []
    result = run_sweep(folder, resume=sweep_id, workers=1)
    assert result.failed == [] and result.completed == 2
    weeks = {r.run_id: r.combo["week"] for r in result.plan.runs}
    data = desim.open(folder)
    assert {weeks[run]: sorted(data.panel(run, "x", steps=2).to_pandas()["x"]) for run in weeks} == {
        2: [1.0, 1.0, 1.0], 3: [0.0, 0.0, 0.0]}


# --- a real python child: standard input, and a script ---------------------------------------------------

SWEEP = '''
import json, sys, warnings
from desim.experiments.sweep import run_sweep
{classes}
def main():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_sweep(sys.argv[1] if len(sys.argv) > 1 else {root!r}, {{"week": [2, 3]}}, workers=2)
    print(json.dumps({{"completed": result.completed, "errors": result.errors,
                      "warnings": [f"{{w.category.__name__}}: {{w.message}}" for w in caught]}}))
{call}
'''


def _child(tmp_path: Path, args: list[str], stdin: str | None = None) -> dict:
    done = subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def file_study(tmp_path):
    """A study whose classes are in its model.py: workers can run it from a script."""
    return write_tiny_study(tmp_path / "files", CLASSES, {
        "n_steps": 3, "seed": 1, "parameters": {"week": 2}, "decision": {"ref": "model:Copy"}},
        environment={"layers": {"bias": 0.0}, "scheduled_events": [
            {"at_step": "$week", "name": "e", "target": "bias", "op": "set", "value": 1.0}]})


def test_a_program_read_from_standard_input_runs_its_sweep_in_this_process(tmp_path, file_study):
    got = _child(tmp_path, ["-"], SWEEP.format(classes="", root=str(file_study), call="main()"))
    assert got["completed"] == 2 and got["errors"] == {}
    assert [w for w in got["warnings"] if w.startswith("RunsInProcessWarning")] == [
        "RunsInProcessWarning: run_sweep: Python read this program from standard input (<stdin>), and a worker "
        "process starts by running the program's file again: there is none, so no worker could start; so its "
        "runs run one at a time in this process. To run them on several workers, run the program from a file "
        "(python script.py); pass workers=1 to run them here without this warning"]


MAKE_STUDY = '''
    import desim
    desim.Study(environment=Env, decision=Copy, folder={folder!r}, **{settings!r}).save()
'''


def test_a_script_whose_classes_are_inside_its_main_guard_runs_in_this_process(tmp_path):
    folder = tmp_path / "guarded"
    inside = "\n".join("    " + line for line in CLASSES.splitlines())
    script = SWEEP.format(classes="", root=str(folder), call="if __name__ == '__main__':\n" + inside
                          + MAKE_STUDY.format(folder=str(folder), settings=SETTINGS) + "    main()\n")
    (tmp_path / "guarded.py").write_text(script)
    got = _child(tmp_path, ["guarded.py"])
    assert got["completed"] == 2 and got["errors"] == {}
    assert [w for w in got["warnings"] if w.startswith("RunsInProcessWarning")] == [
        "RunsInProcessWarning: run_sweep: simulation/simulation.json: decision.ref is __main__:Copy and "
        "environment/environment.json: provider.ref is __main__:Env, defined in "
        f"{tmp_path / 'guarded.py'} inside if __name__ == \"__main__\": (or not at its top level), which a worker "
        "process does not run; so its runs run one at a time in this process. To run them on several workers, "
        "move the classes into a module file beside the notebook or script (e.g. my_classes.py, then from "
        "my_classes import Copy, Env) and make the study from there; pass workers=1 to run them here without this "
        "warning"]


def test_a_script_whose_classes_are_at_its_top_level_uses_the_workers(tmp_path):
    folder = tmp_path / "top"
    script = SWEEP.format(classes=CLASSES, root=str(folder), call="if __name__ == '__main__':\n"
                          + MAKE_STUDY.format(folder=str(folder), settings=SETTINGS) + "    main()\n")
    (tmp_path / "top.py").write_text(script)
    got = _child(tmp_path, ["top.py"])
    assert got["completed"] == 2 and got["errors"] == {}
    assert [w for w in got["warnings"] if w.startswith("RunsInProcessWarning")] == []
