"""The code a run is recorded with is the code it ran, when the study's files are edited while it waits or
while a sweep runs (a lab edits model.py while its runs go):
* a run that waited for a store another process held was recorded with the code on disk when the wait ended;
* a sweep's runs that ran edited code were filed under the sweep's first version, and its summary pooled
  two models as one;
* a sweep run stored failed (its worker died) was recorded with no code, so resuming it said "model.py
  (added)" of a study nobody had edited."""
from __future__ import annotations

import json

import pytest

from desim import load_study
from desim.experiments.branches import resume
from desim.experiments.recording import record, sink_for
from desim.experiments.runs import run_once
from desim.experiments.sweep.merge import merge_run, record_failure, study_version
from desim.experiments.sweep.plan import make_plan
from desim.run.assemble import assemble
from desim.store import StudyLayout
from desim.study.refs import study_code
from desim.versions import code_hash
from storeq import sql
from walk_study import write_walk_study


def edit(root):
    model = root / "model.py"
    model.write_text(model.read_text() + "\n# edited while the run went\n")


def test_a_run_is_recorded_with_the_code_it_was_built_from(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    spec = load_study(root)
    run = assemble(spec)
    built = study_code(spec)
    edit(root)                      # as during a wait for the store, after the study was imported
    result = record(run, sink_for(spec))
    assert result.status == "completed"
    [(code, hashed)] = sql(root, "SELECT code, code_hash FROM runs")
    assert json.loads(code) == built and hashed == code_hash(built)


def test_a_sweep_run_that_ran_edited_code_is_not_filed_under_the_sweep_s_version(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    version = study_version(root, load_study(root))
    worker = tmp_path / "worker" / "w1.duckdb"
    worker.parent.mkdir()
    assert run_once(load_study(root), db_path=worker, run_id="w1").status == "completed"
    merge_run(root, worker, "w1", version)              # the same code: kept with its version
    edit(root)
    other = tmp_path / "worker" / "w2.duckdb"
    assert run_once(load_study(root), db_path=other, run_id="w2").status == "completed"
    with pytest.raises(ValueError, match=r"the study's code changed while it ran \(model\.py \(edited\)\): run w2 "
                                         rf"ran other code than version {version}"):
        merge_run(root, other, "w2", version)
    assert sql(root, "SELECT run_id FROM runs ORDER BY run_id") == [("w1",)]


def test_a_sweep_run_stored_failed_keeps_its_version_s_code_and_resumes(tmp_path):
    root = write_walk_study(tmp_path / "walk", n_steps=3)
    spec = load_study(root)
    version = study_version(root, spec)
    plan = make_plan(root, {}, 2, seed=5)
    planned = plan.runs[0]
    record_failure(StudyLayout(root), spec, plan, planned, "the worker process died", version)
    [(code,)] = sql(root, "SELECT code FROM runs")
    assert json.loads(code) == study_code(spec)
    assert resume(root, planned.run_id).status == "completed"
