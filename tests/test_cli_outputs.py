"""What the data commands print and write: SQL columns of one name, bad --out paths, unknown and failed
runs, comparisons of two populations, and the figures' labels and categorical axes."""
from __future__ import annotations

import io
import json

import matplotlib.image as mpimg
import numpy as np
import pytest

from desim import load_study, run_study
from desim.cli import main
from desim.experiments.branches import branch
from desim.experiments.comparisons import compare
from desim.experiments.sweep import run_sweep
from desim.report import figures, sweep, write_report, write_sweep_report
from failing_study import write_study


@pytest.fixture(scope="module")
def sir(tmp_path_factory):
    """The sir template (60 agents, 6 steps): a run, a run of 90 agents with another seed, and a branch
    of the first."""
    base = tmp_path_factory.mktemp("outputs")
    assert main(["new", "sir", "--template", "sir", "--dir", str(base)]) == 0
    root = base / "sir"
    path = root / "simulation" / "simulation.json"
    sim = json.loads(path.read_text())
    sim["parameters"]["n_nodes"] = 60
    sim["n_steps"] = 6
    path.write_text(json.dumps(sim))
    small = run_study(load_study(root)).run_id
    large = run_study(load_study(root, seed=2, params={"n_nodes": "90"})).run_id
    child = branch(root, small, 3).run_id
    return {"root": root, "small": small, "large": large, "branch": child}


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    """A study whose collector fails at step 0, swept over 11 replicates: 11 runs that failed before their
    first step (``last_step`` -1), in a sweep whose runs all failed."""
    root = write_study(tmp_path_factory.mktemp("broken") / "broken", collector={"fail": "collect"},
                       study={"title": "Broken on purpose", "question": "Does the report say why?",
                              "display_metrics": ["mean_x"], "display_states": ["x"]})
    model = root / "model.py"
    model.write_text(model.read_text().replace("AT = 2 ", "AT = 0 "))      # fail at step 0, not 2
    # the sweep's own set-up check would refuse this grid before recording it (it runs step 0 with the
    # study's seed); switched off, the runs stand for a failure at step 0 that only some seeds meet
    import desim.experiments.sweep.plan as plan
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan, "refuse_unrunnable", lambda *a, **k: None)
        swept = run_sweep(root, {"n_agents": [4]}, replicates=11, workers=1)
    assert swept.completed == 0
    return {"root": root, "sweep": swept.sweep_id}


def err_line(capsys) -> str:
    """The one stderr line of a refused command."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("desim: error: "), err
    return err[0]


def test_sql_keeps_every_column_of_a_repeated_name(sir, capsys):
    root = str(sir["root"])
    capsys.readouterr()
    assert main(["sql", root, "SELECT 1 AS a, 2 AS a", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == [{"a": 1, "a_2": 2}]
    assert "'a_2'" in out.err
    assert main(["sql", root, "SELECT 1 AS a, 2 AS a", "--csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["a,a_2", "1,2"]
    # a self-join in table form: no IndexError, both columns shown
    query = ("SELECT c.value, t.value FROM metrics c JOIN metrics t ON t.step = c.step AND t.name = c.name "
             f"WHERE c.run_id = '{sir['small']}' AND t.run_id = '{sir['large']}' AND c.step = 0 "
             "AND c.name = 'count_S'")
    assert main(["sql", root, query]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["value", "value_2"]
    assert lines[2].split() == ["50", "80"]                  # 60 and 90 agents less 10 seeded


def strict_json(text: str):
    """``text`` read as standard JSON: ``NaN`` and ``Infinity`` (Python's own extension) refused."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def test_sql_json_is_standard_json_with_values_not_strings(sir, capsys):
    root = str(sir["root"])
    capsys.readouterr()
    query = ("SELECT 'nan'::DOUBLE AS x, ['inf'::DOUBLE, 2.5] AS l, 1.5::DECIMAL(5, 2) AS d, "
             "170141183460469231731687303715884105727::HUGEINT AS h, DATE '2026-01-02' AS day, "
             f"config, parameters FROM runs WHERE run_id = '{sir['small']}'")
    assert main(["sql", root, query, "--json"]) == 0
    out = capsys.readouterr()
    [row] = strict_json(out.out)
    assert row["x"] is None and row["l"] == [None, 2.5]
    assert "2 NaN or infinite values written as null" in out.err
    assert row["d"] == 1.5 and row["h"] == 2 ** 127 - 1 and row["day"] == "2026-01-02"
    # a JSON column is its value, the same as the store's text of it parsed
    assert main(["sql", root, f"SELECT config::VARCHAR AS c FROM runs WHERE run_id = '{sir['small']}'",
                 "--json"]) == 0
    [text] = strict_json(capsys.readouterr().out)
    assert isinstance(row["config"], dict) and row["config"] == json.loads(text["c"])
    assert isinstance(row["parameters"], dict)


def test_sql_table_marks_a_cut_cell(sir, capsys):
    root = str(sir["root"])
    capsys.readouterr()
    assert main(["sql", root, "SELECT repeat('x', 100) AS long, 'short' AS s"]) == 0
    row = capsys.readouterr().out.splitlines()[2]
    assert "x" * 59 + "…" in row and "x" * 60 not in row and row.rstrip().endswith("short")


def test_bad_out_paths_are_one_line_errors_before_any_work(sir, tmp_path, capsys):
    root = str(sir["root"])
    a_file = tmp_path / "panel.csv"
    a_file.write_text("x\n")
    a_dir = tmp_path / "folder"
    a_dir.mkdir()
    capsys.readouterr()
    assert main(["export", root, "--out", str(a_file)]) == 2
    assert f"--out {a_file} is a file" in err_line(capsys)
    assert main(["export", root, "--out", str(a_file / "sub")]) == 2
    assert f"{a_file} is a file" in err_line(capsys)
    assert main(["report", root, "--out", str(a_file)]) == 2
    assert "expects a folder" in err_line(capsys)
    assert main(["compare", root, sir["small"], sir["large"], "--out", str(a_dir)]) == 2
    line = err_line(capsys)
    assert f"--out {a_dir} is a folder" in line and "file name" in line
    assert capsys.readouterr().out == ""            # refused before the comparison was printed
    assert a_file.read_text() == "x\n" and list(a_dir.iterdir()) == []


def test_an_unknown_run_lists_the_latest_ten(broken, capsys):
    capsys.readouterr()
    assert main(["report", str(broken["root"]), "--run", "rnope"]) == 2
    line = err_line(capsys)
    sweep_id = broken["sweep"]
    assert "no run 'rnope'" in line and f"latest runs: {sweep_id}-0-10, {sweep_id}-0-9" in line
    assert f"(and 1 more; desim runs {broken['root']} lists them all)" in line     # 11 runs in the store
    assert f"{sweep_id}-0-0" not in line


def test_a_run_that_failed_at_set_up_is_reported_as_failed(broken, capsys):
    run_id = f"{broken['sweep']}-0-0"
    capsys.readouterr()
    assert main(["report", str(broken["root"]), "--run", run_id]) == 2
    line = err_line(capsys)
    assert f"run {run_id} failed before its first step" in line and "Metrics.collect failed" in line
    assert "no field" not in line
    assert main(["compare", str(broken["root"]), f"{broken['sweep']}-0-1", run_id]) == 2
    assert "failed before its first step" in err_line(capsys)


def test_compare_says_when_the_populations_differ(sir, tmp_path, capsys):
    root, small, large = sir["root"], sir["small"], sir["large"]
    data = compare(root, small, large)
    assert data["population"] == {"both": 60, "control_only": 0, "treatment_only": 30}
    assert {c["n"] for c in data["categorical"]} == {60}           # only the agents in both are paired
    assert any("60 agents are in both" in n for n in data["notes"])
    assert any("different seeds" in n for n in data["notes"])
    capsys.readouterr()
    assert main(["compare", str(root), small, large]) == 0
    assert "note: the runs' agents differ: 60 agents are in both, 0 only in control" in capsys.readouterr().out
    md = write_report(root, run_id=large, compare=small, out_dir=tmp_path / "r")["markdown"].read_text()
    assert "Note: The runs' agents differ: 60 agents are in both" in md
    assert "(60 agents in both runs; agents in one run only are left out)" in md
    # a branch and its parent share their population: nothing to say
    assert compare(root, small, sir["branch"])["notes"] == []


def test_a_sweep_whose_runs_all_failed_keeps_its_title_and_question(broken, tmp_path):
    md = write_sweep_report(broken["root"], broken["sweep"], out_dir=tmp_path / "s")["markdown"].read_text()
    assert md.startswith("# Broken on purpose\n")
    assert "| question | Does the report say why? |" in md


def image(png: bytes) -> np.ndarray:
    return mpimg.imread(io.BytesIO(png), format="png")[:, :, :3]


def columns_of(img: np.ndarray, color: str) -> dict[int, int]:
    """Per pixel column holding ``color``: the topmost row of it."""
    rgb = np.array([int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    hit = np.abs(img - rgb).max(axis=2) < 0.02
    return {int(x): int(np.argmax(hit[:, x])) for x in np.flatnonzero(hit.any(axis=0))}


def test_event_labels_do_not_cover_the_bars_of_the_difference_figure():
    diffs = {"m": [(s, 1.0) for s in range(12)]}              # bars of one height
    png = figures.metric_differences(diffs, {7: ["campaign_starts, tv_campaign"]}, None, "week", "t")
    tops = columns_of(image(png), "#2ca02c")                  # tab:green
    assert len(tops) > 100
    assert max(tops.values()) - min(tops.values()) <= 1       # no bar is cut by a label box


def test_a_text_valued_sweep_parameter_is_not_joined_by_a_line():
    rows = [{"rule": r, "mean": 0.5, "ci_low": None, "ci_high": None} for r in ("hegselmann_krause", "deffuant")]
    png = sweep.metric_figure("m", rows, "rule", ["hegselmann_krause", "deffuant"], [])
    xs = sorted(columns_of(image(png), figures.PALETTE[0]))
    gaps = [b - a for a, b in zip(xs, xs[1:])]
    assert max(gaps) > 200                                    # two separate points, nothing between them


def test_compare_out_writes_standard_json_of_what_it_printed(sir, tmp_path, capsys):
    """The comparison's data file parses with a strict reader (no NaN, no Infinity) and holds both runs."""
    root = str(sir["root"])
    out = tmp_path / "cmp" / "data.json"
    assert main(["compare", root, sir["small"], sir["branch"], "--out", str(out)]) == 0
    assert f"data written to {out}" in capsys.readouterr().out
    data = strict_json(out.read_text())
    assert sir["small"] in json.dumps(data) and sir["branch"] in json.dumps(data)
