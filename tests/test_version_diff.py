"""A version keeps the texts of its study's files, so `desim diff` shows what changed between two versions:
the files' settings and a unified diff of the code and data, not only their hashes."""
from __future__ import annotations

import duckdb
import pytest

import desim
from desim.cli import main
from storeq import store_path


@pytest.fixture
def edited(study_copy):
    """opinion_diffusion run, then its model.py edited and a data file added, and run again."""
    root = study_copy("opinion_diffusion")
    first = desim.run_study(desim.load_study(root, steps=1)).run_id
    model = root / "model.py"
    text = model.read_text()
    model.write_text(text.replace("class ", "# the confidence bound is read once\nclass ", 1))
    (root / "weights.txt").write_text("0.5\n0.25\n")
    second = desim.run_study(desim.load_study(root, steps=1, params={"n_agents": 40})).run_id
    return root, first, second


def test_diff_shows_the_code_and_data_that_changed_as_a_unified_diff(edited, capsys):
    root, first, second = edited
    assert main(["diff", str(root), second]) == 0
    out = capsys.readouterr().out.splitlines()
    con = duckdb.connect(str(store_path(root)), read_only=True)
    v1, v2 = (con.execute("SELECT version_id FROM runs WHERE run_id = ?", [r]).fetchone()[0] for r in (first, second))
    con.close()
    assert out[0] == f"version {v2} against {v1}"
    assert "model.py (edited)" in out and f"--- {v1}/model.py" in out and f"+++ {v2}/model.py" in out
    assert "+# the confidence bound is read once" in out
    assert "weights.txt (added)" in out and "+0.25" in out
    # the same by version ids, and the other way round
    assert main(["diff", str(root), v1, v2]) == 0
    back = capsys.readouterr().out
    assert "-# the confidence bound is read once" in back and "weights.txt (removed)" in back


def test_diff_says_why_it_cannot_show_a_text(edited, capsys):
    root, first, second = edited
    con = duckdb.connect(str(store_path(root)))
    con.execute("DELETE FROM code_texts")          # a store written before texts were kept
    con.close()
    assert main(["diff", str(root), second]) == 0
    out = capsys.readouterr().out
    assert "model.py (edited): its text was not kept" in out and "hashes " in out


def test_diff_refuses_what_it_cannot_compare(edited, capsys):
    root, first, second = edited
    assert main(["diff", str(root), "r404"]) == 2
    assert "'r404' is neither a run nor a version" in capsys.readouterr().err
    assert main(["diff", str(root), first]) == 2
    assert "is the study's first: give the version or run to compare it with" in capsys.readouterr().err
