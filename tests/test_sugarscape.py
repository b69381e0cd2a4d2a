"""The sugarscape study reproduces Epstein & Axtell's G1 + M through the real engine and DuckDB, on
their sugar map (``studies/sugarscape/sugar-map.txt``, the grid NetLogo's and Mesa's models read).

Epstein & Axtell report that under G1 + M the 400 agents die back to a
carrying capacity of about 224-230, the survivors having better vision and
lower metabolism than the founders; Mesa's replication on this map gives
227.6 +- 11.3 (mean +- sd over runs) at step 500. Six seeds run 200 steps
here; the population then slides by only a few agents more (the 500-step,
10-seed reproduction is in benchmarks/bench_sugarscape.py and the study README).
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import desim
from desim.study.refs import study_module
from storeq import store_path
from storeq import query
from waits import HANG_S

STEPS = 200
SEEDS = (1, 2, 3, 4, 5, 6)
MESA_MEAN, MESA_SD = 227.6, 11.3


def run(root, seed, steps, **params):
    result = desim.run_study(desim.load_study(root, seed=seed, steps=steps, params=params))
    assert result.status == "completed"
    return store_path(root), result.run_id


def series(db, run_id, name):
    return dict(query(db, "SELECT step, value FROM metrics WHERE run_id=? AND name=? ORDER BY step", [run_id, name]))


def test_the_canonical_sugar_map_is_the_published_one(study_copy):
    model = study_module(study_copy("sugarscape"))
    capacity = model.load_map("sugar-map.txt")
    assert capacity.shape == (50, 50)
    levels, cells = np.unique(capacity, return_counts=True)
    assert dict(zip(levels.tolist(), cells.tolist())) == {0: 431, 1: 522, 2: 765, 3: 558, 4: 224}
    assert capacity.sum() == 4622
    # the two plateaus of 4 sit off the diagonal's centre, one in each half of the map
    ys, xs = np.nonzero(capacity == 4)
    upper = ys < 25
    assert upper.any() and (~upper).any()
    assert xs[upper].mean() > 25 > xs[~upper].mean()
    assert capacity.mean() == pytest.approx(4622 / 2500)


@pytest.mark.slow
def test_population_plateaus_at_the_carrying_capacity_and_selects_traits(study_copy):
    root = study_copy("sugarscape")
    finals, gains = [], []
    for seed in SEEDS:
        db, run_id = run(root, seed, STEPS)
        pop = series(db, run_id, "population")
        vision, metabolism = series(db, run_id, "mean_vision"), series(db, run_id, "mean_metabolism")
        assert pop[0] == 400
        finals.append(pop[STEPS])
        # a plateau, not a slide: the last 50 steps lose only a few agents
        assert pop[STEPS - 50] - pop[STEPS] <= 8
        # selection: survivors see further and burn less than the founders
        gains.append(vision[STEPS] - vision[0])
        assert vision[STEPS] > vision[0]
        assert metabolism[STEPS] < metabolism[0] - 0.5
        # uniform draws: founders average about 3.5 and 2.5 (within 4 standard errors)
        assert vision[0] == pytest.approx(3.5, abs=0.35) and metabolism[0] == pytest.approx(2.5, abs=0.25)
    mean, se = np.mean(finals), np.std(finals, ddof=1) / np.sqrt(len(finals))
    half = stats.t.ppf(0.975, len(finals) - 1) * se
    # the seeds' mean lies within one run-to-run sd of Mesa's replication, and its 95 % interval
    # reaches Epstein & Axtell's 224-230
    assert abs(mean - MESA_MEAN) < MESA_SD
    assert mean - half <= 230 and mean + half >= 224
    # vision is selected more weakly than metabolism; its gain's 95 % interval over the seeds excludes 0
    assert np.mean(gains) - stats.t.ppf(0.975, len(gains) - 1) * np.std(gains, ddof=1) / np.sqrt(len(gains)) > 0


def test_sugar_left_replayed_from_the_panel_matches_the_landscape(study_copy):
    root = study_copy("sugarscape")
    db, run_id = run(root, 7, 30)
    model = study_module(root)

    def read(field):
        rows = query(db, f"""SELECT step, list(CAST(state.{field} AS VARCHAR) ORDER BY agent_id) FROM (
                               SELECT 0 AS step, agent_id, state FROM initial_states WHERE run_id=$1
                               UNION ALL SELECT step, agent_id, state FROM panel WHERE run_id=$1)
                             GROUP BY step ORDER BY step""", [run_id])
        cast = (lambda v: v == "true") if field == "alive" else int
        return [s for s, _ in rows], np.array([[cast(v) for v in vs] for _, vs in rows])

    name, steps, sugar = model.Landscape.grid_layer(read, {"map": "sugar-map.txt", "growback": 1})
    assert name == "sugar left" and steps == list(range(31)) and sugar.shape == (31, 50, 50)
    assert np.array_equal(sugar[0], model.load_map("sugar-map.txt"))
    left = series(db, run_id, "sugar_left")
    assert [float(sugar[s].sum()) for s in range(1, 31)] == [left[s] for s in range(1, 31)]
    assert left[30] < 4622


def test_vision_and_metabolism_ranges_are_parameters(study_copy):
    root = study_copy("sugarscape")
    db, run_id = run(root, 8, 1, min_vision=5, max_vision=6, min_metabolism=3, max_metabolism=4)
    traits = query(db, "SELECT min(CAST(state.vision AS INT)), max(CAST(state.vision AS INT)), "
                       "min(CAST(state.metabolism AS INT)), max(CAST(state.metabolism AS INT)) "
                       "FROM initial_states WHERE run_id=?", [run_id])[0]
    assert traits == (5, 6, 3, 4)
    with pytest.raises(desim.StudyConfigError, match="parameters.min_vision"):
        desim.run_study(desim.load_study(root, steps=1, params={"min_vision": 7}))
    with pytest.raises(desim.StudyConfigError, match="parameters.map: sugarscape: no map file"):
        desim.run_study(desim.load_study(root, steps=1, params={"map": "no-such-map.txt"}))


def test_dead_agents_keep_their_rows_marked_not_alive(study_copy):
    root = study_copy("sugarscape")
    db, run_id = run(root, 4, 40)
    # exactly one row per agent per step, dead or alive
    assert query(db, "SELECT count(*), count(DISTINCT agent_id) FROM panel WHERE run_id=?", [run_id])[0] == (
        400 * 40, 400)
    # the population metric counts the living rows of the panel
    alive = query(db, "SELECT step, count(*) FILTER (WHERE CAST(state.alive AS BOOLEAN)) FROM panel "
                      "WHERE run_id=? GROUP BY step ORDER BY step", [run_id])
    pop = series(db, run_id, "population")
    assert [(s, float(n)) for s, n in alive] == [(s, pop[s]) for s, _ in alive]
    assert pop[40] < 400
    # death is final, a dead agent's sugar is zero or below, and its last action is the one it died after
    assert query(db, """
        SELECT count(*) FROM panel a JOIN panel b ON a.agent_id = b.agent_id AND b.step = a.step + 1
        WHERE a.run_id=$1 AND b.run_id=$1 AND NOT CAST(a.state.alive AS BOOLEAN)
          AND CAST(b.state.alive AS BOOLEAN)""", [run_id])[0][0] == 0
    dead = query(db, "SELECT count(*), max(CAST(state.sugar AS INT)), count(action_kind) FROM panel "
                     "WHERE run_id=? AND NOT CAST(state.alive AS BOOLEAN)", [run_id])[0]
    assert dead[0] > 0 and dead[1] <= 0 and dead[2] == 400 - pop[40]
    # the living act every step: they move or stay
    assert query(db, "SELECT DISTINCT action_kind FROM panel WHERE run_id=? AND "
                     "CAST(state.alive AS BOOLEAN) ORDER BY 1", [run_id]) == [("move",), ("stay",)]
    # at most one living agent per cell
    assert query(db, "SELECT max(c) FROM (SELECT count(*) c FROM panel WHERE run_id=? AND "
                     "CAST(state.alive AS BOOLEAN) GROUP BY step, CAST(state.x AS VARCHAR), CAST(state.y AS VARCHAR))", [run_id])[0][0] == 1


def test_moves_stay_on_the_lattice_lines_within_vision(study_copy):
    root = study_copy("sugarscape")
    db, run_id = run(root, 5, 10)
    rows = query(db, """
        SELECT CAST(a.state.x AS INT), CAST(a.state.y AS INT), CAST(b.state.x AS INT),
               CAST(b.state.y AS INT), CAST(a.state.vision AS INT)
        FROM panel b JOIN (SELECT agent_id, step, state FROM panel WHERE run_id=$1
                           UNION ALL SELECT agent_id, 0, state FROM initial_states WHERE run_id=$1) a
          ON a.agent_id = b.agent_id AND a.step = b.step - 1
        WHERE b.run_id=$1 AND b.action_kind = 'move'""", [run_id])
    assert len(rows) > 100
    for x0, y0, x1, y1, vision in rows:
        dx, dy = min(abs(x1 - x0), 50 - abs(x1 - x0)), min(abs(y1 - y0), 50 - abs(y1 - y0))
        assert (dx == 0) != (dy == 0) and max(dx, dy) <= vision


def test_generated_map_is_only_an_explicit_option(study_copy):
    root = study_copy("sugarscape")
    model = study_module(root)
    capacity = model.load_map("two_peaks")
    assert capacity.shape == (50, 50) and set(np.unique(capacity)) == {0, 1, 2, 3, 4}
    assert capacity[15, 35] == 4 and capacity[35, 15] == 4 and capacity[0, 0] == 0
    assert np.array_equal(capacity, capacity.T)  # the peaks mirror each other
    db, run_id = run(root, 9, 2, map="two_peaks")
    (cfg,), = query(db, "SELECT parameters FROM runs WHERE run_id=?", [run_id])
    assert '"map": "two_peaks"' in cfg.replace('":"', '": "')
    # a map file of another size sets the grid
    (root / "small.txt").write_text("\n".join(" ".join("2" for _ in range(12)) for _ in range(8)) + "\n")
    db, run_id = run(root, 9, 3, map="small.txt", n_agents=20)
    xs, ys = query(db, "SELECT max(CAST(state.x AS INT)), max(CAST(state.y AS INT)) FROM panel "
                       "WHERE run_id=?", [run_id])[0]
    assert xs <= 11 and ys <= 7


@pytest.mark.slow
def test_benchmark_smoke_run(tmp_path):
    """The benchmark's smoke configuration, checked on the figures it writes with ``--json``."""
    import json
    import statistics
    import subprocess
    import sys
    from pathlib import Path
    bench = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_sugarscape.py"
    figures = tmp_path / "figures.json"
    out = subprocess.run([sys.executable, str(bench), "--seeds", "2", "--steps", "3", "--no-breakdown",
                          "--json", str(figures)], capture_output=True, text=True, timeout=HANG_S, check=True).stdout
    assert out.strip()                           # the summary for people is still printed
    f = json.loads(figures.read_text())
    assert (f["seeds"], f["steps"], f["map"], f["breakdown"]) == (2, 3, "sugar-map.txt", None)
    seeds = f["per_seed"]
    assert [s["seed"] for s in seeds] == [1, 2]
    for s in seeds:
        assert s["rows"] == 400 * 3              # the full panel: 400 rows a step, dead agents included
        assert s["wall_s"] > 0 and s["cpu_s"] > 0
        assert 0 < s["pop_end"] <= 400
        assert s["pop_end"] * 3 <= s["living_steps"] <= s["rows"]   # the population never grows back
        assert s["plateau"] == s["pop_end"]      # under 200 steps the plateau is the last step
        assert all(x > 0 for x in s["vision"] + s["metabolism"]) and 0 <= s["gini_end"] < 1
    total = lambda key: sum(s[key] for s in seeds)  # noqa: E731
    assert f["agent_steps_per_s_wall"] == pytest.approx(total("rows") / total("wall_s"))
    assert f["agent_steps_per_s_cpu"] == pytest.approx(total("rows") / total("cpu_s"))
    assert f["living_agent_steps_per_s_wall"] == pytest.approx(total("living_steps") / total("wall_s"))
    assert f["living_agent_steps_per_s_cpu"] == pytest.approx(total("living_steps") / total("cpu_s"))
    assert f["wall_per_run_s"] == pytest.approx(total("wall_s") / 2)
    pop = f["population_end"]
    assert pop["per_seed"] == [s["pop_end"] for s in seeds]
    assert pop["mean"] == pytest.approx(statistics.fmean(pop["per_seed"]))
    assert pop["sd"] == pytest.approx(statistics.stdev(pop["per_seed"]))
    assert pop["ci_low"] <= pop["mean"] <= pop["ci_high"]
    assert (f["plateau_from_step"], f["mean_plateau"]) == (3, pytest.approx(pop["mean"]))
    for trait in ("vision", "metabolism"):
        assert f[trait]["founders"] == pytest.approx(statistics.fmean(s[trait][0] for s in seeds))
        assert f[trait]["end"] == pytest.approx(statistics.fmean(s[trait][1] for s in seeds))


def test_the_report_says_its_sugar_band_is_over_the_living(study_copy, tmp_path):
    """The report's state figures follow the store's rule for dead agents (left out of every field but
    ``alive``) and say so, with the number left out at the last step, from the panel."""
    from desim.cli import main
    root = study_copy("sugarscape")
    db, run_id = run(root, 4, 40)
    out = tmp_path / "report"
    assert main(["report", str(root), "--run", run_id, "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    [(dead,)] = query(db, "SELECT count(*) FROM panel WHERE run_id=? AND step=40 AND NOT CAST(state.alive AS BOOLEAN)",
                      [run_id])
    assert dead > 0
    assert (f"'sugar': median, mean and quantile bands across living agents at each step. Dead agents "
            f"(alive = false) are left out: {dead:,} at the last step.") in text
    assert "'alive': share of agents in each category" in text          # alive itself counts everyone
