"""``desim viz grid`` draws a run's layer with its own version's code and data, as the dashboard does.

A tiny positioned study whose environment draws a layer (``grid_layer``) from a data file beside ``model.py``,
run three times, each run a new version: as written, after ``model.py`` was edited (the layer renamed, mirrored
left to right and doubled), after the data file was edited. ``desim viz grid`` is then run for each run, in its
own process, with the third version's files on disk. Before the fix the report's grid fetched the hook with the
study's current code, so the first two runs were drawn as the third version draws them.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import duckdb

from desim.report.grid import CODES
from grid_walkers import ACROSS, DOWN, HEIGHT, WIDTH, walkers_model, write_walkers, write_weights
from storeq import sql, store_path
from waits import HANG_S

STEPS = 3
FIRST = 'LAYER = ("weight v1", False, 1)'
SECOND = 'LAYER = ("weight v2", True, 2)'
MODEL = walkers_model(FIRST)
VERSIONS = [("weight v1", False, 1, ACROSS), ("weight v2", True, 2, ACROSS), ("weight v2", True, 2, DOWN)]


def expected_cells(mirrored: bool, scale: int, rows: list[list[int]], step: int) -> str:
    """The report's encoding of a whole-numbered layer below 62: each cell's value as one of CODES, row by row."""
    base = [r[::-1] if mirrored else r for r in rows]
    return "".join(CODES[scale * v + step] for r in base for v in r)


def desim(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "desim.cli", *args], capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr
    return done.stdout


def viz_grid(study, run: str, out) -> dict:
    """``desim viz grid`` of ``run`` in its own process: the payload embedded in the player it writes."""
    printed = desim("viz", "grid", str(study), "--state", "kind", "--run", run, "--out", str(out))
    html = open(re.search(r"player: (\S+)", printed).group(1), encoding="utf-8").read()
    return json.loads(re.search(r'<script type="application/json" id="desim-grid-data">(.*?)</script>', html,
                                re.S).group(1))


def history(tmp_path):
    study = write_walkers(tmp_path / "walkers", MODEL, STEPS)
    write_weights(study, ACROSS)
    runs = []
    desim("run", str(study), "-q")
    runs.append(sql(study, "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")[0][0])
    model = study / "model.py"
    model.write_text(model.read_text().replace(FIRST, SECOND))
    desim("run", str(study), "-q")
    runs.append(sql(study, "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")[0][0])
    write_weights(study, DOWN)
    desim("run", str(study), "-q")
    runs.append(sql(study, "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")[0][0])
    versions = [sql(study, "SELECT version_id FROM runs WHERE run_id = ?", [r])[0][0] for r in runs]
    assert len(set(versions)) == 3
    return study, runs, versions


def test_viz_grid_draws_each_run_with_its_own_versions_code_and_data(tmp_path):
    study, runs, versions = history(tmp_path)
    for k, (run, version, (name, mirrored, scale, rows)) in enumerate(zip(runs, versions, VERSIONS)):
        payload = viz_grid(study, run, tmp_path / f"out{k}")
        layer = payload["layer"]
        assert payload["note"] == "" and (payload["width"], payload["height"]) == (WIDTH, HEIGHT)
        assert layer["name"] == name
        assert [f["cells"] for f in layer["frames"]] == [expected_cells(mirrored, scale, rows, s)
                                                         for s in range(STEPS + 1)]
        assert layer.get("version") == version              # and the payload says whose code drew it

    # a version whose model.py the store did not keep, changed on disk since: no layer, and a note saying why
    # (never drawn with the code on disk)
    copy = tmp_path / "copy" / "walkers"
    shutil.copytree(study, copy, ignore=shutil.ignore_patterns("__pycache__"))
    con = duckdb.connect(str(store_path(copy)))
    try:
        code = con.execute("SELECT code->>'$.\"model.py\"' FROM runs WHERE run_id = ?", [runs[0]]).fetchone()[0]
        con.execute("DELETE FROM code_texts WHERE hash = ?", [code])
    finally:
        con.close()
    payload = viz_grid(copy, runs[0], tmp_path / "out_missing")
    assert payload["layer"] is None and "model.py" in payload["note"] and "not kept" in payload["note"]
    assert len(payload["frames"]) == STEPS + 1          # the agents are drawn all the same


def test_a_layer_reads_the_files_no_version_records_as_they_are(tmp_path):
    """A file a version does not record (an image: docs and figures are not inputs) is there for the layer's
    code to read, as it is now: the run's version folder links it in."""
    model = MODEL.replace('np.loadtxt(Path(__file__).with_name("weights.txt"))',
                          'np.full((6, 8), float(len(Path(__file__).with_name("terrain.png").read_bytes())))')
    study = write_walkers(tmp_path / "walkers", model, STEPS)
    (study / "terrain.png").write_bytes(b"\x89PNG twelve!")           # 12 bytes
    desim("run", str(study), "-q")
    run, = sql(study, "SELECT run_id FROM runs")[0]
    assert "terrain.png" not in json.loads(sql(study, "SELECT code FROM runs")[0][0])
    layer = viz_grid(study, run, tmp_path / "out")["layer"]
    assert layer is not None and layer["name"] == "weight v1"
    assert layer["range"] == [12.0, 12.0 + STEPS]
