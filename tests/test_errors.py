"""Study code that fails: one line naming when, who, what and where, exit status 2,
the traceback stored with the run and printed on request; set-up failures leave no
trace in the store."""
from __future__ import annotations

import pytest

from desim.cli import main
from failing_study import edit, line_of, write_study
from storeq import sql

MODEL = "studies/probe/model.py"
HINT = "desim: --traceback (or DESIM_TRACEBACK=1) shows the traceback"


@pytest.fixture
def study(tmp_path, monkeypatch):
    """``study(**files)`` -> the failing study at ``studies/probe`` under a fresh working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DESIM_TRACEBACK", raising=False)
    return lambda **kw: write_study(tmp_path / "studies" / "probe", **kw)


def run(capsys, *argv):
    code = main(["run", "studies/probe", *argv])
    out, err = capsys.readouterr()
    return code, err.splitlines()


def untouched(root) -> bool:
    """No DuckDB file, no live progress file: the run left nothing behind."""
    return not (root / "runs").exists()


# --- failures while the run goes: the run is marked failed with the summary and traceback ------

RUNNING = [
    ("apply", {"env": {"fail": "apply"}}, "step 2 round 1: Env.apply"),
    ("observe_batch", {"env": {"fail": "observe_batch"}}, "step 2 round 1: Env.observe_batch"),
    ("decide_batch", {"decision": {"fail": "decide_batch"}}, "step 2 round 1: Decide.decide_batch"),
    ("advance_to", {"env": {"fail": "advance_to"}}, "step 2: Env.advance_to"),
    ("end_step", {"env": {"fail": "end_step"}}, "step 2: Env.end_step"),
    ("agent_state", {"env": {"fail": "agent_state"}}, "step 2, agent 'p2': Env.agent_state"),
    ("collect", {"collector": {"fail": "collect"}}, "step 2: Metrics.collect"),
    ("process", {"env": {"fail": "process"}}, "t=1.5 (step 1): study process Env.ticker"),
    ("errand", {"env": {"fail": "errand"}}, "t=1.6 (step 1), agent 'p1': study process Env.errand"),
]


@pytest.mark.parametrize("point,files,where", RUNNING, ids=[r[0] for r in RUNNING])
def test_a_failure_in_study_code_names_step_round_agent_component_and_line(study, capsys, point, files, where):
    root = study(**files)
    code, err = run(capsys)
    [(run_id, status, last_step, error, trace)] = sql(root, "SELECT run_id, status, last_step, error, traceback FROM runs")
    summary = f"{where} failed at {MODEL}:{line_of(root, point)}: KeyError: 'topik'"
    assert code == 2
    assert err == [f"desim: error: run {run_id} failed: {summary}",
                   "desim: its 1 completed step is kept in studies/probe/runs/desim.duckdb; "
                   "--traceback (or DESIM_TRACEBACK=1) shows the traceback"]
    assert (status, error) == ("failed", summary)
    assert last_step == 1                       # step 1 is kept, step 2 never half-written
    assert f'model.py", line {line_of(root, point)}' in trace and trace.rstrip().endswith("KeyError: 'topik'")
    assert sql(root, "SELECT DISTINCT step FROM panel ORDER BY step") == [(1,)]


def test_a_message_json_cannot_hold_fails_at_the_line_that_posted_it_not_on_its_author(study, capsys):
    """A process posts in agent p1's name; the error names the process and its line, not p1 at the
    step's close (which is all the store could say)."""
    root = study(env={"fail": "post"})
    code, err = run(capsys)
    [(error,)] = sql(root, "SELECT error FROM runs")
    assert code == 2
    assert error == (f"t=1.5 (step 1): study process Env.newsroom failed at {MODEL}:{line_of(root, 'post')}: "
                     "TypeError: message by 'p1': content {'tags': {'a'}} is not JSON "
                     "(Type is not JSON serializable: set)")
    assert sql(root, "SELECT DISTINCT step FROM panel ORDER BY step") == [(1,)]      # step 1 is kept


def test_an_event_detail_json_cannot_hold_names_the_step_and_the_row_and_nothing_is_stored_as_its_repr(study, capsys):
    """A detail with NaN was stored as null and an object as its repr (its address: a different panel for the
    same seed); now the step stops with the row named, as a message content JSON cannot hold does."""
    root = study(env={"fail": "event_detail"})
    code, err = run(capsys)
    [(status, error, last_step)] = sql(root, "SELECT status, error, last_step FROM runs")
    assert code == 2 and status == "failed" and last_step == 1
    assert error == ("RunError: step 2: Env.advance_to row 0 (news 'headline'): detail {'at': nan} is not JSON "
                     "(nan is not a JSON number (JSON has no NaN or infinity))")
    assert sql(root, "SELECT count(*) FROM events WHERE name = 'headline'") == [(0,)]


def test_event_details_are_stored_as_json_numpy_values_as_their_numbers():
    import numpy as np

    from desim.store.tables import event_rows
    rows = event_rows(3, [{"kind": "news", "name": "n", "detail": {"b": np.arange(3), "a": np.float64(0.5)}},
                          {"kind": "news", "name": "m"}])
    assert [str(d) for d in rows.column("detail").to_pylist()] == ['{"a":0.5,"b":[0,1,2]}', "null"]


def test_an_event_row_without_a_kind_names_the_step_and_the_row(study, capsys):
    """An advance_to override adding an event row of its own without 'kind': the run stops at that step with
    the row named (it ended in a bare KeyError: 'kind' from the store), and the steps before are kept."""
    root = study(env={"fail": "event_row"})
    code, err = run(capsys)
    [(status, error, last_step)] = sql(root, "SELECT status, error, last_step FROM runs")
    assert code == 2 and status == "failed" and last_step == 1
    assert error == ("RunError: step 2: Env.advance_to row 0 {'name': 'headline', 'detail': {'at': 1.5}}: 'kind' is missing; "
                     "an event row needs a non-empty text 'kind'")


def test_traceback_flag_and_environment_variable_print_the_study_traceback(study, capsys, monkeypatch):
    root = study(env={"fail": "apply"})
    code, err = run(capsys, "--traceback")
    line = f'  File "{root / "model.py"}", line {line_of(root, "apply")}, in apply'
    assert code == 2 and err[0].startswith("desim: error: run ") and line in err and err[-1] == "KeyError: 'topik'"
    monkeypatch.setenv("DESIM_TRACEBACK", "1")
    code, err = run(capsys)
    assert code == 2 and line in err and HINT not in err


# --- failures while setting up: refused before anything is written ------------------------------

SETUP = [
    ("reset", {"env": {"fail": "reset"}}, "reset: Env.reset failed at {model}:{line}: KeyError: 'topik'"),
    ("decision_reset", {"decision": {"fail": "reset"}},
     "reset: Decide.reset failed at {model}:{line}: KeyError: 'topik'"),
    ("personas", {"population": {"provider": {"ref": "model:Pop", "args": {"fail": "personas"}}}},
     "population: Pop.personas failed at {model}:{line}: KeyError: 'topik'"),
    ("__init__", {"env": {"fail": "__init__"}},
     "studies/probe/environment/environment.json: provider: building model:Env failed at {model}:{line}: "
     "KeyError: 'topik'"),
]


@pytest.mark.parametrize("point,files,message", SETUP, ids=[s[0] for s in SETUP])
def test_a_failure_while_setting_up_leaves_the_store_untouched(study, capsys, point, files, message):
    root = study(**files)
    code, err = run(capsys)
    assert code == 2
    assert err == [f"desim: error: {message.format(model=MODEL, line=line_of(root, point))}", HINT]
    assert untouched(root)


# --- model.py that does not load ---------------------------------------------------------------

@pytest.mark.parametrize("bad,line,error", [
    ("def broken(:\n", 2, None),
    ("import nonexistent_module_xyz\n", 2, "ModuleNotFoundError: No module named 'nonexistent_module_xyz'"),
    ("RATE = 1 / 0\n", 2, "ZeroDivisionError: division by zero"),
], ids=["syntax", "import", "exception"])
def test_model_py_that_does_not_load_names_its_line(study, capsys, bad, line, error):
    root = study()
    text = (root / "model.py").read_text()
    (root / "model.py").write_text("\n" + bad + text)
    if error is None:           # the wording of a syntax error is Python's own
        with pytest.raises(SyntaxError) as info:
            compile("\n" + bad, "model.py", "exec")
        error = f"SyntaxError: {info.value.msg}"
    code, err = run(capsys)
    assert code == 2
    assert err == [f"desim: error: {MODEL}:{line}: {error}", HINT]
    assert untouched(root)


def test_a_ref_to_a_missing_class_names_the_file_and_field(study, capsys):
    root = study()
    edit(root / "simulation" / "simulation.json", lambda d: d["decision"].update(ref="model:Nope"))
    code, err = run(capsys)
    assert code == 2
    assert err == ["desim: error: studies/probe/simulation/simulation.json: decision.ref: cannot resolve "
                   f"'model:Nope': {MODEL} has no 'Nope' (it defines Decide, Env, Metrics, Pop)"]
    assert untouched(root)


def test_an_unknown_argument_of_a_ref_names_the_argument_and_what_it_takes(study, capsys):
    root = study()
    edit(root / "population" / "population.json", lambda d: d["provider"]["args"].update(size=3))
    code, err = run(capsys)
    assert code == 2
    assert err == ["desim: error: studies/probe/population/population.json: provider.args.size: unknown argument "
                   "of model:Pop (it takes n, fail)"]
    assert untouched(root)


# --- what study code returns -------------------------------------------------------------------

@pytest.mark.parametrize("value", ["0.5", True, None])
def test_a_metric_that_is_not_a_number_at_step_0_is_refused_before_anything_is_written(study, capsys, value):
    """Step 0 (the initial states and metrics) is part of the set-up: what goes wrong there is refused
    like a bad file, with nothing recorded."""
    root = study(collector={"metric": [value]})
    code, err = run(capsys)
    assert code == 2 and err[0] == f"desim: error: step 0: Metrics.collect: metric 'm' is {value!r}, not a number"
    assert untouched(root)


@pytest.mark.parametrize("value", ["0.5", True, None])
def test_a_metric_that_is_not_a_number_later_fails_the_run_by_name(study, capsys, value):
    root = study(collector={"metric": [1.0, value]})
    code, err = run(capsys)
    [(run_id, status, error, last)] = sql(root, "SELECT run_id, status, error, last_step FROM runs")
    summary = f"RunError: step 1: Metrics.collect: metric 'm' is {value!r}, not a number"
    assert code == 2 and err[0] == f"desim: error: run {run_id} failed: {summary}"
    assert (status, error, last) == ("failed", summary, 0)


def test_a_failing_probe_in_validate_names_the_point_and_writes_nothing(study, capsys):
    root = study(env={"fail": "apply"}, simulation={"n_steps": 4})
    (root / "model.py").write_text((root / "model.py").read_text().replace("AT = 2 ", "AT = 1 "))
    code = main(["validate", "studies/probe"])
    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert err == [f"desim: error: probe step 1 failed: step 1 round 1: Env.apply failed at "
                   f"{MODEL}:{line_of(root, 'apply')}: KeyError: 'topik'", HINT]
    assert untouched(root)


def test_desims_own_errors_are_not_blamed_on_a_line_of_desim():
    """An LLM endpoint that is down is not a bug at desim/llm/decision.py:203: the error says what happened."""
    from desim.llm.errors import LLMUnavailable
    from desim.study.failures import failure
    down = failure(LLMUnavailable("http://127.0.0.1:9/v1 did not answer after 3 attempts"), "LLMOpinion.decide_batch",
                   None, 3, 0)
    assert str(down) == ("step 3 round 0: LLMOpinion.decide_batch: LLMUnavailable: http://127.0.0.1:9/v1 did not "
                         "answer after 3 attempts")
    try:
        {}["topik"]
    except KeyError as e:
        bug = failure(e, "Env.apply", None, 3, 0)
    assert str(bug).startswith("step 3 round 0: Env.apply failed at ") and "KeyError: 'topik'" in str(bug)


@pytest.mark.parametrize("point", ["process", "errand"])
def test_study_code_kept_outside_the_study_folder_fails_with_when_who_and_where(study, capsys, tmp_path, point):
    """Classes in a module beside a notebook (the README's advice for notebooks) failing in a study
    process: the failure was taken for the engine's own ("KeyError: 'x'", no time, agent or line)
    because only frames in the study folder counted as the study's."""
    import sys
    root = study(env={"fail": point})
    outside = tmp_path / "notebook_code"
    outside.mkdir()
    (outside / "probe_code.py").write_text((root / "model.py").read_text())
    line = line_of(root, point)         # the same line in the module outside
    (root / "model.py").write_text(f"import sys\nsys.path.insert(0, {str(outside)!r})\nfrom probe_code import *\n")
    try:
        code, err = run(capsys)
    finally:
        sys.path.remove(str(outside))
        sys.modules.pop("probe_code", None)
    [(error,)] = sql(root, "SELECT error FROM runs")
    assert code == 2
    expected = {"process": "t=1.5 (step 1): study process Env.ticker failed at ",
                "errand": "t=1.6 (step 1), agent 'p1': study process Env.errand failed at "}[point]
    assert error.startswith(expected), error
    assert f"probe_code.py:{line}: KeyError: 'topik'" in error
