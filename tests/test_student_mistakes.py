"""Mistakes students of a one-week course made, each now said where the student can act on it.

* a ``$parameter`` out of range was named where it is used (``decision.args.gamma``, or another file's
  ``provider.args.seed_fraction``), not where the student set it (``parameters.seed_share``);
* text in a numeric parameter of the schelling study ran as a number;
* a misspelt ``decide_batch`` failed inside desim, at run time, after recording a failed run;
* "completed steps are kept" was said of a run that completed none;
* the usual SQL mistake on the diffusion templates (``WHERE state = 'I'``; the field is ``state.state``) got no hint;
* a study given by the wrong path (``mystudy`` for ``studies/mystudy``, a file or a sub-folder of the study)
  or a misspelt template got no hint;
* the commands printed for pasting (``try:``, ``resume with:``, ``next:``) broke on a path with a space or a
  leading dash.
"""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

import desim.errors
from desim.cli import main
from storeq import sql
from desim.errors import RunFailed, StudyConfigError
from desim.study.contract import DecisionModel, EnvironmentProvider, missing_methods

ROOT = Path(__file__).resolve().parent.parent


def new_study(tmp_path, template: str, name: str | None = None, capsys=None) -> Path:
    """A study made as a student makes one: ``desim new <name> --template <template>`` under ``studies/``."""
    name = name or template
    assert main(["new", name, "--template", template, "--dir", str(tmp_path / "studies")]) == 0
    if capsys is not None:
        capsys.readouterr()
    return tmp_path / "studies" / name


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def error_lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


# --- 1. a $parameter's error names the parameter, in simulation.json ----------------------------------------

def test_a_parameter_out_of_range_is_named_where_it_is_set_not_where_it_is_used(tmp_path, capsys):
    root = new_study(tmp_path, "sir", capsys=capsys)
    edit_json(root / "simulation" / "simulation.json", lambda d: d["parameters"].update(gamma=1.5))
    assert main(["run", str(root)]) == 2
    assert error_lines(capsys) == [f"desim: error: {root}/simulation/simulation.json: parameters.gamma "
                                   "(used as decision.args.gamma): must be in [0, 1] (got 1.5)"]
    assert not (root / "runs").exists()


def test_a_parameter_used_under_another_name_in_another_file_is_named_as_the_student_set_it(tmp_path, capsys):
    root = new_study(tmp_path, "voter", capsys=capsys)
    edit_json(root / "simulation" / "simulation.json", lambda d: d["parameters"].update(seed_share=1.3))
    assert main(["validate", str(root)]) == 2
    assert error_lines(capsys) == [f"desim: error: {root}/simulation/simulation.json: parameters.seed_share "
                                   "(used as provider.args.seed_fraction): must be in [0, 1] (got 1.3)"]


def test_a_parameter_given_by_set_says_so(tmp_path, capsys):
    root = new_study(tmp_path, "sir", capsys=capsys)
    assert main(["run", str(root), "--set", "gamma=1.5"]) == 2
    assert error_lines(capsys) == [f"desim: error: {root}/simulation/simulation.json: parameters.gamma "
                                   "(--set, used as decision.args.gamma): must be in [0, 1] (got 1.5)"]


def test_a_problem_beside_one_of_a_parameter_keeps_its_file_and_the_parameter_is_named():
    error = StudyConfigError("environment/environment.json", [
        ("provider.args.seed_fraction", "must be in [0, 1] (got 1.3)"), ("provider.args.other", "unknown")])
    moved = error.from_parameters({"provider.args.seed_fraction": "seed_share"}, "simulation/simulation.json")
    assert str(moved).splitlines() == [
        "environment/environment.json: provider.args.seed_fraction: must be in [0, 1] (got 1.3) (the value of "
        "parameters.seed_share in simulation/simulation.json)",
        "environment/environment.json: provider.args.other: unknown"]


def test_an_unknown_argument_holding_a_parameter_is_the_files_problem_not_the_parameters():
    """``"betta": "$beta"``: the name is wrong, not the value; naming parameters.beta would send the student
    to a value that is fine."""
    error = StudyConfigError("simulation/simulation.json", [
        ("decision.args.betta", "unknown parameter of desim.diffusion:SIR (it takes beta, gamma)"),
        ("decision.args.beta", "required by desim.diffusion:SIR")])
    moved = error.from_parameters({"decision.args.betta": "beta"}, "simulation/simulation.json")
    assert str(moved) == str(error)


# --- 2. text in a numeric parameter of schelling -------------------------------------------------------------

def test_schelling_refuses_text_for_a_number_and_for_a_flag_before_anything_runs(tmp_path, capsys, study_copy):
    root = study_copy("schelling")
    edit_json(root / "simulation" / "simulation.json",
              lambda d: d["parameters"].update(homophily="0.3", torus="false"))
    assert main(["run", str(root), "--steps", "1"]) == 2
    assert error_lines(capsys) == [
        f"desim: error: {root}/simulation/simulation.json: parameters.homophily: schelling: must be a number "
        "(got str '0.3')",
        f"{root}/simulation/simulation.json: parameters.torus: schelling: must be true or false (got str 'false')"]
    assert not (root / "runs").exists()


def test_schelling_takes_its_numbers_as_before(study_copy):
    import sys
    root = study_copy("schelling")
    sys.path.insert(0, str(root))
    try:
        import model
        relocation = model.Relocation(homophily=1, max_jump=3)
        assert (relocation.homophily, relocation.max_jump) == (1.0, 3.0)
        assert model.Residents(width=10.0, height=12).width == 10
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("model", None)


# --- 3. a misspelt decide_batch is refused when the study loads ---------------------------------------------

def test_a_misspelt_decide_batch_is_refused_at_load_and_nothing_is_recorded(tmp_path, capsys):
    root = new_study(tmp_path, "starter", capsys=capsys)
    model = root / "model.py"
    model.write_text(model.read_text().replace("def decide_batch(", "def decide("))
    assert main(["run", str(root)]) == 2
    [line] = error_lines(capsys)
    assert line.startswith(f"desim: error: {root}/simulation/simulation.json: decision.ref: model:Listen is a "
                           "DecisionModel subclass without decide_batch()"), line
    assert not (root / "runs").exists()


def test_the_method_a_misspelt_one_stands_for_is_named():
    from desim.study.contract import misnamed

    class Listen(DecisionModel):
        def decide(self, observations, memories):
            return []

    assert missing_methods(Listen, "decision") == ["decide_batch"]
    assert misnamed(Listen, ["decide_batch"]) == "it has decide: rename it?"

    class Columns(DecisionModel):           # the columnar way is complete: nothing is missing
        def decide_columns(self, obs, idx, t, round_idx):
            return None

    assert missing_methods(Columns, "decision") == []


# --- 4. "completed steps are kept" only when there are some ------------------------------------------------

def test_a_run_that_failed_in_its_first_step_does_not_say_steps_are_kept(tmp_path, capsys):
    root = new_study(tmp_path, "starter", capsys=capsys)
    model = root / "model.py"
    text = model.read_text()
    body = text[text.index("    def decide_batch("):]
    model.write_text(text.replace(body, body.replace("        return actions\n", "        actions\n", 1)))
    assert main(["run", str(root)]) == 2
    err = error_lines(capsys)
    assert err[0].startswith("desim: error: run r") and "decide_batch" in err[0] and "returned NoneType" in err[0], err
    assert err[1:] == ["desim: --traceback (or DESIM_TRACEBACK=1) shows the traceback"]


def test_what_a_failed_run_keeps_counts_its_steps():
    def failed(steps_done):
        return RunFailed("r1", "boom", Path("s/runs/desim.duckdb"), steps_done=steps_done)
    assert failed(0).kept_text() == ""
    assert failed(1).kept_text() == "its 1 completed step is kept in s/runs/desim.duckdb"
    assert failed(3).kept_text() == "its 3 completed steps are kept in s/runs/desim.duckdb"
    assert failed(None).kept_text() == "completed steps are kept in s/runs/desim.duckdb"


# --- 5. the SQL hint for the whole state struct compared with a value ---------------------------------------

def test_comparing_the_state_struct_with_a_value_says_to_compare_state_state(tmp_path, capsys):
    root = new_study(tmp_path, "sir", capsys=capsys)
    assert main(["run", str(root), "--steps", "2", "--set", "n_nodes=50", "--set", "seeds=2"]) == 0
    capsys.readouterr()
    assert main(["sql", str(root), "SELECT state FROM panel WHERE state = 'I' LIMIT 2"]) == 2
    err = capsys.readouterr().err
    assert ("state is the struct of every state field (state, since, infected_by), not one value: compare a "
            "field, state.<name> (state.state = 'I')") in err, err


# --- 6. a study given by the wrong path, a misspelt template -------------------------------------------------

def test_a_study_named_without_studies_says_where_it_is(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["new", "mystudy"]) == 0
    capsys.readouterr()
    assert main(["run", "mystudy"]) == 2
    assert error_lines(capsys) == ["desim: error: mystudy: study folder not found; did you mean studies/mystudy? "
                                   "(desim new makes a study under studies/)"]
    assert main(["run", "studies/mystudi"]) == 2
    assert error_lines(capsys) == ["desim: error: studies/mystudi: study folder not found; did you mean "
                                   "studies/mystudy?"]


def test_a_file_or_sub_folder_of_a_study_says_to_give_the_study_folder(tmp_path, capsys, monkeypatch):
    root = new_study(tmp_path, "sir", capsys=capsys)
    monkeypatch.chdir(root / "simulation")
    assert main(["run", "."]) == 2
    assert error_lines(capsys) == ["desim: error: study.json: file not found; . is a folder inside the study "
                                   "folder ..: give the folder, .."]
    monkeypatch.chdir(tmp_path)
    assert main(["run", "studies/sir/simulation/simulation.json"]) == 2
    assert error_lines(capsys) == ["desim: error: studies/sir/simulation/simulation.json: study folder not found; "
                                   "it is a file inside the study folder studies/sir: give the folder, studies/sir"]


def test_a_misspelt_template_is_named(tmp_path, capsys):
    assert main(["new", "x", "--template", "sirr", "--dir", str(tmp_path)]) == 2
    [line] = error_lines(capsys)
    assert line.startswith("desim: error: unknown template 'sirr' (did you mean 'sir'? templates: "), line


# --- 7. commands printed to paste are quoted ----------------------------------------------------------------

@pytest.mark.parametrize("name", ["-dash", "my study", "it's"])
def test_the_printed_query_works_when_pasted_for_a_folder_a_shell_would_misread(tmp_path, capsys, monkeypatch, name):
    study = new_study(tmp_path, "starter", capsys=capsys).rename(tmp_path / name)    # no id desim new takes
    monkeypatch.chdir(tmp_path)
    assert main(["run", f"./{name}"]) == 0
    [try_line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  try:")]
    words = shlex.split(try_line.removeprefix("  try:"))
    assert words[:2] == ["desim", "sql"] and (tmp_path / words[2]).resolve() == study.resolve()
    assert main(words[1:]) == 0                 # pasted, it runs: the shell's words are the command's arguments


def test_shell_arg_keeps_plain_words_and_quotes_the_rest():
    shell_arg = desim.errors.shell_arg
    assert shell_arg("studies/sir") == "studies/sir"
    assert shell_arg("-dash") == "./-dash"
    assert shell_arg("my study") == "'my study'"
    assert shell_arg("SELECT 1 WHERE r = 'x'") == "\"SELECT 1 WHERE r = 'x'\""
    assert shlex.split(shell_arg("it's $HOME")) == ["it's $HOME"]


# --- with the changes outside the CLI (files.py, refs.py, study.py, checks.py, engine.py, execute.py,
# --- assemble.py, params.py) ------------------------------------------------------------------------------------

def test_a_null_parameter_is_one_line_not_one_per_type_it_might_have_been(tmp_path, capsys):
    root = new_study(tmp_path, "sir", capsys=capsys)
    edit_json(root / "simulation" / "simulation.json", lambda d: d["parameters"].update(gamma=None))
    assert main(["run", str(root)]) == 2
    assert error_lines(capsys) == [f"desim: error: {root}/simulation/simulation.json: parameters.gamma: null is not "
                                   "allowed (a number, text or true/false)"]


def test_an_empty_study_file_is_said_to_be_empty(tmp_path, capsys):
    root = new_study(tmp_path, "sir", capsys=capsys)
    (root / "population" / "population.json").write_text("\n")
    assert main(["run", str(root)]) == 2
    assert error_lines(capsys) == [f"desim: error: {root}/population/population.json: the file is empty; it must "
                                   "hold JSON (a study file: an object, {...})"]


def test_a_misspelt_decide_batch_is_named_with_the_method_it_likely_is(tmp_path, capsys):
    root = new_study(tmp_path, "starter", capsys=capsys)
    model = root / "model.py"
    model.write_text(model.read_text().replace("def decide_batch(", "def decide("))
    assert main(["run", str(root)]) == 2
    [line] = error_lines(capsys)
    assert "model:Listen is a DecisionModel subclass without decide_batch() (it has decide: rename it?)" in line


def test_a_decide_batch_that_returns_nothing_is_named_with_its_file(tmp_path, capsys, monkeypatch):
    root = new_study(tmp_path, "starter", capsys=capsys)
    model = root / "model.py"
    text = model.read_text()
    body = text[text.index("    def decide_batch("):]
    model.write_text(text.replace(body, body.replace("        return actions\n", "        actions\n", 1)))
    monkeypatch.chdir(tmp_path)
    assert main(["run", "studies/starter"]) == 2
    assert error_lines(capsys)[0].endswith(
        "step 1 round 0: Listen.decide_batch (studies/starter/model.py) returned NoneType, not a list: it must "
        "return a list of Action (one per agent that acts; [] when none does)")


def test_a_failed_run_says_its_steps_without_reading_the_store(tmp_path, capsys):
    import desim
    root = new_study(tmp_path, "starter", capsys=capsys)
    model = root / "model.py"
    text = model.read_text()
    body = text[text.index("    def decide_batch("):]
    model.write_text(text.replace(body, body.replace("        return actions\n",
                                                     "        return actions if self.ctx.step < 3 else None\n", 1)))
    with pytest.raises(RunFailed) as failed:
        desim.run_study(desim.load_study(root))
    assert failed.value.steps_done == 2


def test_a_parameter_out_of_range_from_python_is_named_where_it_is_set(tmp_path, capsys):
    import desim
    root = new_study(tmp_path, "voter", capsys=capsys)
    with pytest.raises(StudyConfigError) as refused:
        desim.run_study(desim.load_study(root, params={"seed_share": 1.3}))
    assert str(refused.value) == ("simulation/simulation.json: parameters.seed_share (--set, used as "
                                  "provider.args.seed_fraction): must be in [0, 1] (got 1.3)")



class Room(EnvironmentProvider):
    """An environment complete on the per-agent path (desim.Study names classes defined at module level)."""

    def observe_batch(self, ids, t, round_idx):
        return []

    def apply(self, actions):
        pass

    def agent_state(self, agent_id):
        return {}


class Misspelt(DecisionModel):
    def decide(self, observations, memories):
        return []


def test_desim_study_names_the_method_a_subclass_misspelt():
    import desim
    from desim.errors import StudyArgumentError

    with pytest.raises(StudyArgumentError, match=r"decision= is the class Misspelt, which is a DecisionModel without "
                                                  r"decide_batch \(it has decide: rename it\?\); expected"):
        desim.Study(population=3, environment=Room, decision=Misspelt)


def test_running_the_same_study_twice_says_it_is_no_replicate(tmp_path, capsys):
    """Two `desim run`s of one seed are one panel twice: the second says so and how to replicate; another
    seed, or other settings, is not called the same."""
    root = new_study(tmp_path, "sir", capsys=capsys)
    assert main(["run", str(root), "--steps", "3", "-q"]) == 0
    first = re.search(r"run (r[0-9a-f]{10}): completed", capsys.readouterr().out).group(1)
    assert main(["run", str(root), "--steps", "3", "-q"]) == 0
    out = capsys.readouterr().out
    assert f"same settings, seed and code as {first}" in out and "--replicates N" in out
    second = re.search(r"run (r[0-9a-f]{10}): completed", out).group(1)
    a, b = (sql(root, "SELECT agent_id, step, state FROM panel WHERE run_id = ? ORDER BY ALL", [r]) for r in (first, second))
    assert a == b and len(a) > 0                       # what the note claims, checked
    for other in (["--steps", "3", "--seed", "2"], ["--steps", "4"], ["--steps", "3", "--set", "beta=0.06"]):
        assert main(["run", str(root), "-q", *other]) == 0
        assert "same settings" not in capsys.readouterr().out, other


def test_desim_new_typed_inside_studies_puts_the_study_beside_the_others(tmp_path, monkeypatch, capsys):
    """Not into a new studies/studies/; from the project folder it still goes under studies/."""
    (tmp_path / "studies").mkdir()
    monkeypatch.chdir(tmp_path / "studies")
    assert main(["new", "inside", "--template", "sir"]) == 0
    assert (tmp_path / "studies" / "inside" / "study.json").is_file()
    assert not (tmp_path / "studies" / "studies").exists()
    monkeypatch.chdir(tmp_path)
    assert main(["new", "outside", "--template", "sir"]) == 0
    assert (tmp_path / "studies" / "outside" / "study.json").is_file()
    assert "next: desim validate inside" in capsys.readouterr().out
