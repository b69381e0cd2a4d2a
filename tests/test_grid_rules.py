"""The grid's rules are the report's, written once (``desim.report.grid``), and the dashboard's grid follows them:
the same size and the same layer for the same run, and the same answer for a run whose recorded configuration
names no environment ref (``null`` on the way to it): a grid without a layer, not a failure.

The study is 'walkers' (``grid_walkers``): four agents on an 8 x 6 grid, a layer read from ``weights.txt``; its
run is a ``desim run`` subprocess, so this process never imports its ``model.py`` as a module of its own.
"""
from __future__ import annotations

import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest

from desim.dashboard import grid as dashboard_grid
from desim.dashboard.data import reading
from desim.jsontext import parsed
from desim.report import data as report_data
from desim.report import grid_payload
from desim.report.grid import CODES, study_layer
from desim.store import Catalogue
from desim.study.files import study_file_or_none
from grid_walkers import ACROSS, HEIGHT, WIDTH, walkers_model, write_walkers, write_weights
from storeq import sql
from waits import HANG_S

STEPS = 3


@pytest.fixture(scope="module")
def walkers(tmp_path_factory):
    """The walkers study and its one run's id."""
    study = write_walkers(tmp_path_factory.mktemp("rules") / "walkers", walkers_model('LAYER = ("weight", False, 1.0)'),
                          STEPS, study={"display_states": ["kind"]})
    write_weights(study, ACROSS)
    done = subprocess.run([sys.executable, "-m", "desim.cli", "run", str(study), "-q"], capture_output=True,
                          text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr
    return study, sql(study, "SELECT run_id FROM runs")[0][0]


def dashboard_step(study, run_id: str, step: int) -> dict:
    return dashboard_grid.grid_step(study, study_file_or_none(study), run_id, "kind", step, reading)


def test_the_report_and_the_dashboard_draw_one_grid_with_one_layer(walkers):
    study, run_id = walkers
    report = grid_payload(study, "kind", run_id)
    assert (report["width"], report["height"]) == (WIDTH, HEIGHT)      # the layer's shape
    lay = report["layer"]
    for k, frame in enumerate(report["frames"]):
        dash = dashboard_step(study, run_id, frame["step"])
        assert (dash["width"], dash["height"]) == (WIDTH, HEIGHT)
        assert dash["layer"]["name"] == lay["name"] == "weight" and dash["layer"]["range"] == lay["range"]
        # the report codes whole values below len(CODES) as themselves: x + step on this layer
        assert lay["whole"] and [float(CODES.index(c)) for c in lay["frames"][k]["cells"]] == dash["layer"]["values"]
        assert dash["layer"]["values"] == [float(x + frame["step"]) for row in ACROSS for x in row]


@pytest.mark.parametrize("environment", [None, {"provider": None}, {"provider": {"ref": None}}, {}],
                         ids=["environment null", "provider null", "ref null", "no provider"])
def test_a_run_recorded_without_an_environment_ref_has_a_grid_without_a_layer(walkers, monkeypatch, environment):
    """The dashboard read ``null`` on the way to the ref as no layer; the report failed on it (``None.get``).
    Both now draw the agents on the grid sized by their largest coordinates, with no layer and no note."""
    study, run_id = walkers

    def without_ref(run: dict) -> dict:
        config = parsed(run["config"], {})
        return {**run, "config": {**config, "environment": environment}}

    recorded, catalogued = report_data.recorded_run, Catalogue.run
    monkeypatch.setattr(report_data, "recorded_run", lambda *a, **k: without_ref(recorded(*a, **k)))
    monkeypatch.setattr(Catalogue, "run", lambda self, rid: without_ref(catalogued(self, rid)))
    monkeypatch.setattr(dashboard_grid, "_layers", OrderedDict())      # not the layer the other test kept
    assert study_layer(study, None, without_ref({"config": None}), read=None) == (None, "")

    report = grid_payload(study, "kind", run_id)
    # agent i starts on (i, i) and walks right: x reaches 3 + STEPS, y stays below the number of agents
    size = (3 + STEPS + 1, 4)
    assert report["layer"] is None and report["note"] == "" and (report["width"], report["height"]) == size
    last = report["frames"][-1]
    dash = dashboard_step(study, run_id, last["step"])
    assert dash["layer"] is None and dash["layer_note"] == "" and (dash["width"], dash["height"]) == size
    cells = np.array([c != "." for c in last["cells"]]).reshape(size[1], size[0])
    assert sorted(zip(dash["agents"]["x"], dash["agents"]["y"])) == sorted(
        (int(x), int(y)) for y, x in zip(*np.nonzero(cells)))
