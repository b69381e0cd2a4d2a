"""The code a run runs is the code its version records, in one Python process (a notebook).

A study's ``model.py`` used to be imported once per process: after an edit, ``desim.run_study(desim.load_study(S))``
ran the old code but recorded the run under a new version whose ``code_texts`` held the edited code, which never
ran. Each test runs a tiny study, edits one of its files, runs it again in the same process, and reads what the
second run stored (the agents' ``level``, which the code sets from the constant the edit changed) beside the text
its version kept for ``model.py`` (or the helper module edited).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

import desim
from desim.study.refs import RefError, study_module
from tiny_models import stay_model
from tiny_study import write_tiny_study

ENV = stay_model('{"level": LEVEL}')


def study(tmp_path: Path, model: str) -> Path:
    return write_tiny_study(tmp_path / "levels", model, {"n_steps": 2, "decision": {"ref": "model:Decide"}}, agents=3)


def run(root: Path):
    """Run the study as a notebook does; the run's stored levels (every agent, every step) and its row."""
    result = desim.run_study(desim.load_study(root))
    data = desim.open(root)
    levels = sorted(set(data.panel(run=result.run_id).column("level").to_pylist()))
    row = [r for r in data.runs().to_pylist() if r["run_id"] == result.run_id][0]
    return levels, row


def kept_text(root: Path, row: dict, rel: str) -> str:
    """The text the store kept for ``rel`` as the run recorded it (by its hash)."""
    digest = json.loads(row["code"])[rel]
    texts = desim.open(root).sql(f"SELECT text FROM code_texts WHERE hash = '{digest}'").column("text").to_pylist()
    assert texts, f"no text kept for {rel}"
    return texts[0]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_an_edited_model_runs_as_edited_and_its_version_records_what_ran(tmp_path):
    root = study(tmp_path, "LEVEL = 1.0\n" + ENV)
    first, row1 = run(root)
    edit(root / "model.py", "LEVEL = 1.0", "LEVEL = 2.5")
    second, row2 = run(root)
    assert (first, second) == ([1.0], [2.5])          # before the fix the second run stored 1.0 again
    assert row1["version_id"] != row2["version_id"]
    assert "LEVEL = 2.5" in kept_text(root, row2, "model.py")
    # and the hash recorded is the file's as it is now (the rule of desim.versions, worked out here by hand)
    assert json.loads(row2["code"])["model.py"] == hashlib.sha256((root / "model.py").read_bytes()).hexdigest()[:16]


def test_an_edit_that_keeps_size_and_modification_time_runs_too(tmp_path):
    """``cp -p`` or ``rsync -t`` of another version: same size, same mtime; Python's own bytecode cache would
    trust those, the content hash does not."""
    root = study(tmp_path, "LEVEL = 1.0\n" + ENV)
    model = root / "model.py"
    first, _ = run(root)
    before = os.stat(model)
    edit(model, "LEVEL = 1.0", "LEVEL = 7.0")
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(model).st_size == before.st_size and os.stat(model).st_mtime_ns == before.st_mtime_ns
    second, row = run(root)
    assert (first, second) == ([1.0], [7.0])
    assert "LEVEL = 7.0" in kept_text(root, row, "model.py")


def test_a_sibling_study_module_edited_alone_is_imported_again(tmp_path):
    """model.py unchanged, the helper it imports with ``study_module`` edited: both are imported again."""
    model = ("from pathlib import Path\nfrom desim.study.refs import study_module\n"
             "LEVEL = study_module(Path(__file__).parent, 'helpers').LEVEL\n" + ENV)
    root = study(tmp_path, model)
    (root / "helpers.py").write_text("LEVEL = 1.0\n")
    first, _ = run(root)
    edit(root / "helpers.py", "LEVEL = 1.0", "LEVEL = 4.0")
    second, row = run(root)
    assert (first, second) == ([1.0], [4.0])
    assert kept_text(root, row, "helpers.py") == "LEVEL = 4.0\n"


def test_a_module_of_the_study_folder_imported_the_plain_way_is_imported_again(tmp_path, monkeypatch):
    """A notebook beside the study puts the folder on ``sys.path``; ``model.py`` says ``import helpers``."""
    name = "vi_plain_levels"
    root = study(tmp_path, f"from {name} import LEVEL\n" + ENV)
    (root / f"{name}.py").write_text("LEVEL = 1.0\n")
    monkeypatch.syspath_prepend(str(root))
    try:
        first, _ = run(root)
        edit(root / f"{name}.py", "LEVEL = 1.0", "LEVEL = 5.0")
        second, row = run(root)
    finally:
        sys.modules.pop(name, None)
    assert (first, second) == ([1.0], [5.0])
    assert kept_text(root, row, f"{name}.py") == "LEVEL = 5.0\n"


def test_a_broken_edit_is_refused_naming_its_line_and_the_fixed_code_runs(tmp_path):
    root = study(tmp_path, "LEVEL = 1.0\n" + ENV)
    run(root)
    edit(root / "model.py", "LEVEL = 1.0", "LEVEL = = 3.0")
    with pytest.raises(RefError) as caught:
        run(root)
    assert "model.py:1: SyntaxError" in str(caught.value)
    edit(root / "model.py", "LEVEL = = 3.0", "LEVEL = 3.0")
    assert run(root)[0] == [3.0]


def test_an_unchanged_module_is_not_imported_again(tmp_path):
    """The same module object while no file changed: classes made from it stay the same classes."""
    root = study(tmp_path, "LEVEL = 1.0\n" + ENV)
    first = study_module(root)
    assert study_module(root) is first and study_module(root).Env is first.Env
    edit(root / "model.py", "LEVEL = 1.0", "LEVEL = 2.0")
    again = study_module(root)
    assert again is not first and (first.LEVEL, again.LEVEL) == (1.0, 2.0)
    assert study_module(root) is again
