"""Every packaged template (``desim new --template NAME``) gives a study that validates without a warning
and runs; the diffusion templates need no model.py."""
from __future__ import annotations

import pytest

import desim
from desim.cli import main
from desim.commands.core import TEMPLATES, templates

DIFFUSION = ["si", "sir", "sis", "seir", "cascade", "threshold", "voter", "majority", "hk", "deffuant"]


def test_the_classic_models_are_packaged():
    assert set(DIFFUSION) | {"starter"} <= set(templates())


@pytest.mark.parametrize("name", sorted(templates()))
def test_a_template_validates_strictly_and_runs(tmp_path, monkeypatch, capsys, name):
    monkeypatch.chdir(tmp_path)
    assert main(["new", "mine", "--template", name]) == 0
    assert main(["validate", "studies/mine", "--strict"]) == 0, capsys.readouterr()
    small = {"n_nodes": 150} if "n_nodes" in desim.load_study("studies/mine").simulation.parameters else {}
    result = desim.run_study(desim.load_study("studies/mine", steps=5, params=small))
    assert result.status == "completed" and result.panel().num_rows > 0
    if name in DIFFUSION:
        assert not (TEMPLATES / name / "model.py").exists()
        assert "state" in result.panel().column_names or "opinion" in result.panel().column_names


def test_a_template_s_runs_end_with_their_process_and_a_sweep_of_capped_runs_says_so(tmp_path, monkeypatch, capsys):
    """The threshold template's 50 steps cut its cascade short (every run still adding nodes, share_active
    0.59-0.99 where the cascade reaches 1.0), and the sweep's table of final values gave no sign of it. Its
    runs now end on their own (stop_when) before n_steps; a sweep capped by --steps says how many were cut."""
    monkeypatch.chdir(tmp_path)
    assert main(["new", "cascading", "--template", "threshold"]) == 0
    capsys.readouterr()
    assert main(["sweep", "studies/cascading", "--replicates", "2", "--workers", "1", "-q"]) == 0
    out = capsys.readouterr().out
    assert "note:" not in out
    runs = desim.load_study("studies/cascading")
    from storeq import read_only
    con = read_only(tmp_path / "studies" / "cascading" / "runs" / "desim.duckdb")
    try:
        ended = con.execute("SELECT last_step, end_reason FROM runs").fetchall()
    finally:
        con.close()
    assert len(ended) == 2 and all(last < runs.simulation.n_steps and why for last, why in ended)
    assert main(["sweep", "studies/cascading", "--replicates", "2", "--workers", "1", "--steps", "5", "-q"]) == 0
    assert ("note: 2 of 2 completed runs stopped at their last step (step 5) before any stop_when condition held"
            in capsys.readouterr().out)
