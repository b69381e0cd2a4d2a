"""Sweeps on the local process pool: the plan, what lands in the study's store,
the summary against SQL, determinism across re-runs, and a worker killed
mid-sweep followed by ``--resume``."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import duckdb
import pytest

from desim.cli import main
from storeq import store_path
from desim.experiments.sweep import SweepError, make_plan, run_sweep, sweep_table
from desim.experiments.sweep.summary import metric_bounds
from sweep_study import panels_by_slot, write_crashy_study

ROOT = Path(__file__).resolve().parent.parent
T975_DF2 = 4.302652729911275   # Student t quantile 0.975 with 2 degrees of freedom (tables)
GRID = {"epsilon": ["0.2", "0.3", "0.45"], "mu": ["0.3", "0.6"]}
DEFAULTS = json.loads((ROOT / "studies" / "opinion_diffusion" / "simulation" / "simulation.json").read_text())[
    "parameters"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """opinion_diffusion swept once over a 3 x 2 grid with 3 replicates on two workers."""
    root = tmp_path_factory.mktemp("sweep") / "opinion_diffusion"
    shutil.copytree(ROOT / "studies" / "opinion_diffusion", root,
                    ignore=shutil.ignore_patterns("runs", "__pycache__"))
    result = run_sweep(root, GRID, replicates=3, workers=2)
    return root, result


def query(root: Path, sql: str, params: list | None = None) -> list[tuple]:
    con = duckdb.connect(str(store_path(root)), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def test_every_combination_and_replicate_is_a_run_with_its_parameters_and_seed(swept):
    root, result = swept
    rows = query(root, "SELECT run_id, status, parameters, seed, config FROM runs WHERE sweep_id = ?",
                 [result.sweep_id])
    assert len(rows) == 18 and {r[1] for r in rows} == {"completed"}
    combos: dict[tuple, int] = {}
    for run_id, _, parameters, seed, config in rows:
        p = json.loads(parameters)
        assert (p["n_agents"], p["campaign_weight"]) == (DEFAULTS["n_agents"], 0.4)   # the defaults stay
        combos[(p["epsilon"], p["mu"])] = combos.get((p["epsilon"], p["mu"]), 0) + 1
        args = json.loads(config)["simulation"]["decision"]["args"]
        assert (args["epsilon"], args["mu"]) == (p["epsilon"], p["mu"])  # the model got them
    assert combos == {(e, m): 3 for e in (0.2, 0.3, 0.45) for m in (0.3, 0.6)}
    assert len({r[3] for r in rows}) == 18
    planned = {r.run_id: r.seed for r in result.plan.runs}
    assert {r[0]: r[3] for r in rows} == planned
    per_run = query(root, "SELECT count(*), count(DISTINCT run_id) FROM panel WHERE run_id LIKE ?",
                    [f"{result.sweep_id}-%"])[0]
    assert per_run == (18 * DEFAULTS["n_agents"] * 12, 18)
    assert not (root / "runs" / "sweeps" / result.sweep_id).exists()   # worker files merged and gone
    plan_row = query(root, "SELECT replicates, grid FROM sweeps WHERE sweep_id = ?", [result.sweep_id])
    assert plan_row[0][0] == 3 and json.loads(plan_row[0][1]) == {"epsilon": [0.2, 0.3, 0.45], "mu": [0.3, 0.6]}


def test_summary_matches_sql_over_the_metrics_table(swept):
    root, result = swept
    expected = {}
    for eps, mu, name, mean, sd, n in query(root, """
            SELECT CAST(r.parameters->>'epsilon' AS DOUBLE), CAST(r.parameters->>'mu' AS DOUBLE), m.name,
                   avg(m.value), stddev_samp(m.value), count(*)
            FROM runs r JOIN metrics m USING (run_id)
            WHERE r.sweep_id = ? AND m.step = 12
            GROUP BY ALL""", [result.sweep_id]):
        expected[(eps, mu, name)] = (mean, sd, n)
    assert result.metrics == ["mean_opinion", "support_share", "opinion_sd"]   # study.json display_metrics
    assert len(result.table) == 6 * 3
    bounds = metric_bounds(root)          # the study's metric_bounds clip the interval (docs/sweep.md)
    for row in result.table:
        mean, sd, n = expected[(row["epsilon"], row["mu"], row["metric"])]
        assert row["n"] == n == 3
        assert row["mean"] == pytest.approx(mean, abs=1e-12)
        assert row["sd"] == pytest.approx(sd, abs=1e-12)
        half = T975_DF2 * sd / math.sqrt(3)
        low, high = bounds.get(row["metric"], (-math.inf, math.inf))
        assert row["ci_low"] == pytest.approx(max(mean - half, low), abs=1e-9)
        assert row["ci_high"] == pytest.approx(min(mean + half, high), abs=1e-9)
        assert (row["ci_low_clipped"], row["ci_high_clipped"]) == (mean - half < low, mean + half > high)
    # and mean_opinion's means agree with the panel itself (the collector averages the final opinions)
    from_panel = dict(((e, m), v) for e, m, v in query(root, """
            SELECT CAST(r.parameters->>'epsilon' AS DOUBLE) AS e, CAST(r.parameters->>'mu' AS DOUBLE) AS m,
                   avg(run_mean) FROM (SELECT run_id, avg(CAST(state.opinion AS DOUBLE)) AS run_mean
                                       FROM panel WHERE step = 12 GROUP BY run_id) p
            JOIN runs r USING (run_id) WHERE r.sweep_id = ? GROUP BY ALL""", [result.sweep_id]))
    for row in result.table:
        if row["metric"] == "mean_opinion":
            assert row["mean"] == pytest.approx(from_panel[(row["epsilon"], row["mu"])], abs=1e-9)
    chosen = sweep_table(root, result.sweep_id, ["extreme_share"])
    assert [r["metric"] for r in chosen] == ["extreme_share"] * 6
    with pytest.raises(SweepError, match="unknown metric.*nope.*recorded: extreme_share, mean_opinion"):
        sweep_table(root, result.sweep_id, ["nope"])


@pytest.mark.slow
def test_rerunning_the_sweep_from_the_cli_gives_identical_panels(swept, capsys, monkeypatch):
    monkeypatch.setenv("DESIM_PROGRESS", "lines")
    root, first = swept
    argv = ["sweep", str(root), "--replicates", "3", "--workers", "2", "--metrics", "mean_opinion"]
    for name, values in GRID.items():
        argv += ["--set", f"{name}={','.join(values)}"]
    assert main(argv) == 0
    out = capsys.readouterr()
    second = query(root, "SELECT DISTINCT sweep_id FROM runs WHERE sweep_id <> ?", [first.sweep_id])
    assert len(second) == 1
    second_id = second[0][0]
    assert f"sweep {second_id}: 18 of 18 runs completed" in out.out
    assert "run 18/18" in out.err                                         # progress over runs
    assert out.out.count("mean_opinion") == 6                             # one summary row per combination
    for table in ("panel", "metrics", "initial_states"):
        a, b = panels_by_slot(root, first.sweep_id, table), panels_by_slot(root, second_id, table)
        assert a == b and len(a) > 0
    seeds = query(root, "SELECT substr(run_id, 12) AS slot, count(DISTINCT seed), count(*) FROM runs "
                        "WHERE sweep_id IN (?, ?) GROUP BY slot", [first.sweep_id, second_id])
    assert len(seeds) == 18 and {s[1:] for s in seeds} == {(1, 2)}


def test_seeds_depend_only_on_study_seed_parameter_values_and_replicate():
    study = ROOT / "studies" / "opinion_diffusion"
    a = make_plan(study, {"epsilon": ["0.3", "0.2"]}, 2)
    b = make_plan(study, {"epsilon": ["0.2", "0.3"], "mu": ["0.5"]}, 2)   # mu=0.5 is the default
    seeds_a = {(r.parameters["epsilon"], r.replicate): r.seed for r in a.runs}
    seeds_b = {(r.parameters["epsilon"], r.replicate): r.seed for r in b.runs}
    assert seeds_a == seeds_b and a.sweep_id != b.sweep_id
    other = make_plan(study, {"epsilon": ["0.2", "0.3"]}, 2, seed=43)
    assert not set(other_seed.seed for other_seed in other.runs) & set(seeds_a.values())


def test_bad_grid_names_the_parameter_and_the_file(capsys):
    study = ROOT / "studies" / "opinion_diffusion"
    assert main(["sweep", str(study), "--set", "homophily=0.3,0.4"]) == 2
    err = capsys.readouterr().err
    assert "homophily" in err and "simulation.json" in err and "epsilon" in err
    assert main(["sweep", str(study), "--set", "epsilon=0.3,high"]) == 2
    assert "'high' is not a float" in capsys.readouterr().err


@pytest.mark.slow
def test_killed_worker_fails_its_run_only_and_resume_completes_it(tmp_path, capsys):
    root = write_crashy_study(tmp_path / "crashy")
    result = run_sweep(root, {"mood": ["1", "2", "3"]}, replicates=2, workers=2)
    by_mood = {}
    for run_id, status, parameters, error, last_step in query(
            root, "SELECT run_id, status, parameters, error, last_step FROM runs"):
        by_mood.setdefault(json.loads(parameters)["mood"], []).append((run_id, status, error, last_step))
    assert [s for _, s, _, _ in by_mood[1]] == ["completed"] * 2
    assert all(s == "failed" and "ValueError: mood 2" in e and last == 1 for _, s, e, last in by_mood[2])
    assert all(s == "failed" and "worker process died" in e and last == -1 for _, s, e, last in by_mood[3])
    assert sorted(result.failed) == sorted(r for r, *_ in by_mood[2] + by_mood[3])
    # a failed run keeps the steps it completed, as any run does; a killed one has none
    assert query(root, "SELECT count(*) FROM panel WHERE run_id = ?", [by_mood[2][0][0]]) == [(3,)]
    assert query(root, "SELECT count(*) FROM panel WHERE run_id = ?", [by_mood[3][0][0]]) == [(0,)]
    started = dict(query(root, "SELECT run_id, started_at FROM runs WHERE status = 'completed'"))

    (root / "healed").touch()
    assert main(["sweep", str(root), "--resume", result.sweep_id, "--workers", "2"]) == 0
    assert "(4 executed now), 0 failed" in capsys.readouterr().out
    runs = query(root, "SELECT run_id, status FROM runs ORDER BY run_id")
    assert len(runs) == 6 and {s for _, s in runs} == {"completed"}
    for table, per_run in (("panel", 9), ("initial_states", 3), ("metrics", 4), ("edges", 0)):
        counts = dict(query(root, f"SELECT run_id, count(*) FROM {table} GROUP BY run_id"))
        assert all(counts.get(r, 0) == per_run for r, _ in runs), (table, counts)
    assert dict(query(root, "SELECT run_id, started_at FROM runs WHERE run_id IN "
                            f"({','.join('?' * len(started))})", list(started))) == started
    # the marker is a file the study reads, so the resumed runs are of a new version (and one only)
    assert query(root, "SELECT count(*) FROM versions") == [(2,)]
    assert [r["n"] for r in sweep_table(root, result.sweep_id)] == [2, 2, 2]


def test_a_folder_named_desim_where_the_sweep_runs_does_not_shadow_the_package(tmp_path):
    """Run from a folder holding a clone of desim's repository (a ``desim/`` folder with no
    ``__init__.py``), every worker imported that folder as the package and each run failed with "cannot
    import name ... from 'desim' (unknown location)": the forkserver put the current folder first on its
    path. The command runs as users run it, the installed ``desim`` script, in a process of its own."""
    import subprocess
    import sys
    script = Path(sys.executable).with_name("desim")
    assert script.exists(), f"the desim command is installed beside {sys.executable}"
    (tmp_path / "desim" / "tests").mkdir(parents=True)          # what a clone of the repository looks like
    (tmp_path / "desim" / "pyproject.toml").write_text("")
    shutil.copytree(ROOT / "studies" / "schelling", tmp_path / "schelling",
                    ignore=shutil.ignore_patterns("runs", "__pycache__"))
    done = subprocess.run([str(script), "sweep", "schelling", "--set", "homophily=0.3", "--replicates", "2",
                           "--workers", "1", "--steps", "2", "-q"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 of 2 runs completed" in done.stdout
