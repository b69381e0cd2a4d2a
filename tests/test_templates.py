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
