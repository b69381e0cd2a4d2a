"""A study whose model builds on a sibling study's ``model.py`` (``study_module(.../"base")``, as the two LLM
reference studies build on their rule studies) runs that code in every run: an edit of the sibling is an edit
of the study. It was left out of the version (same version and code hash, other panels; a sweep said "same
panels"; a resume across the edit spliced two models), and the Ray bundle left the sibling behind (every run
of the LLM reference studies failed on Ray)."""
from __future__ import annotations

import json

import pytest

import desim
from desim.experiments.branches import BranchRefused
from desim.experiments.sweep.worker import StudyBundle
from walk_study import write_walk_study

ON_THE_BASE = '''
from pathlib import Path
from desim.study.refs import study_module

base = study_module(Path(__file__).parent.parent / "walk")
Line, Walk, Mean = base.Line, base.Walk, base.Mean
'''


def sibling_pair(tmp_path):
    base = write_walk_study(tmp_path / "walk", n_steps=4)
    derived = write_walk_study(tmp_path / "derived", n_steps=4)
    (derived / "model.py").write_text((derived / "model.py").read_text() + ON_THE_BASE)
    return base, derived


def test_an_edit_of_the_sibling_makes_a_new_version_and_a_resume_across_it_is_refused(tmp_path):
    base, derived = sibling_pair(tmp_path)
    first = desim.run_study(desim.load_study(derived, seed=2))
    again = desim.run_study(desim.load_study(derived, seed=2))
    model = base / "model.py"
    model.write_text(model.read_text() + "\n# an edit\nSCALE_NOTE = 'the base changed'\n")
    edited = desim.run_study(desim.load_study(derived, seed=2))
    rows = {r["run_id"]: r for r in desim.open(derived).runs().to_pylist()}
    assert rows[first.run_id]["version_id"] == rows[again.run_id]["version_id"]
    assert rows[edited.run_id]["version_id"] != rows[first.run_id]["version_id"]
    code = json.loads(rows[edited.run_id]["code"])
    assert "<outside>/walk/model.py" in code
    with pytest.raises(BranchRefused, match=r"<outside>/walk/model\.py"):
        desim.branch(derived, first.run_id, 2)


def test_the_ray_bundle_carries_the_sibling_and_runs_the_same(tmp_path):
    base, derived = sibling_pair(tmp_path)
    here = desim.run_study(desim.load_study(derived, seed=4))
    bundle = StudyBundle.from_folder(derived)
    assert sorted(bundle.outside) == ["../walk/model.py"]
    unpacked = bundle.unpack()
    assert (unpacked.parent / "walk" / "model.py").read_bytes() == (base / "model.py").read_bytes()
    there = desim.run_study(desim.load_study(unpacked, seed=4))
    assert there.panel().drop(["run_id"]).equals(here.panel().drop(["run_id"]))


@pytest.mark.parametrize("made_by,refused", [("0.2.1", False), ("0.3.0", True)])
def test_a_run_recorded_before_siblings_were_kept_still_branches(tmp_path, made_by, refused):
    """A run of desim 0.2 recorded no sibling module: that is no edit, or its killed and paid LLM runs could
    never be resumed after the upgrade. A run of this desim without it did not run that code as recorded."""
    import duckdb
    from storeq import store_path
    base, derived = sibling_pair(tmp_path)
    first = desim.run_study(desim.load_study(derived, seed=2))
    con = duckdb.connect(str(store_path(derived)))
    code = json.loads(con.execute("SELECT code FROM runs WHERE run_id = ?", [first.run_id]).fetchone()[0])
    del code["<outside>/walk/model.py"]
    con.execute("UPDATE runs SET code = ?, desim_version = ? WHERE run_id = ?", [json.dumps(code), made_by, first.run_id])
    con.close()
    if refused:
        with pytest.raises(BranchRefused, match=r"<outside>/walk/model\.py \(added\)"):
            desim.branch(derived, first.run_id, 2)
    else:
        assert desim.branch(derived, first.run_id, 2).status == "completed"
