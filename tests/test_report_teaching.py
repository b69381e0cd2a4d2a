"""The run report's figures read right in a class: metric axes that do not zoom in on noise and say what each
metric is, a continuous state's clusters visible, Sugarscape's grid rows and colour bars named, dead agents
said on the figure that leaves them out, and no chart of shares that never move."""
from __future__ import annotations

import re

import numpy as np
import pytest

import desim
from desim.cli import main
from desim.report import content, data, figures, grid, write_report
from desim.report.data import RunData
from storeq import sql


def run(root, steps, **params):
    result = desim.run_study(desim.load_study(root, steps=steps, params=params))
    assert result.status == "completed"
    return result.run_id


@pytest.fixture
def hk(tmp_path):
    """The hk template (HK on a complete graph), 100 nodes at epsilon 0.1: a few clean clusters."""
    assert main(["new", "hk", "--template", "hk", "--dir", str(tmp_path)]) == 0
    root = tmp_path / "hk"
    return root, run(root, 30, n_nodes=100, epsilon=0.1)


def captured(monkeypatch, module=figures):
    """Every matplotlib figure ``module`` turns into a PNG, kept for a test to measure."""
    drawn = []
    monkeypatch.setattr(module, "png", lambda fig: drawn.append(fig) or b"png")
    return drawn


# --- 1. metric axes ------------------------------------------------------------------------------------
def test_a_nearly_constant_metric_with_declared_bounds_is_drawn_flat():
    """hkc's mean_opinion fell from 0.4842 to 0.4833 and filled its panel; declared [0, 1], its axis now spans at
    least a tenth of that range, inside it but for a thin margin, so the 0.0009 change is under 1 % of it."""
    values = [0.4842, 0.4841, 0.4838, 0.4836, 0.4833, 0.4833]
    fig = figures.draw_metric_trajectories({"mean_opinion": list(enumerate(values))}, ["mean_opinion"], {},
                                           "week", bounds={"mean_opinion": (0.0, 1.0)})
    lo, hi = fig.axes[0].get_ylim()
    assert hi - lo >= 0.1
    assert lo <= min(values) and hi >= max(values)
    assert lo >= -0.01 and hi <= 1.01                    # a 5 % margin of the span, no more past a bound
    assert (max(values) - min(values)) / (hi - lo) < 0.01


def test_without_bounds_an_axis_spans_a_tenth_of_the_values_magnitude():
    """A population of about 400 moving by 2 is drawn on at least 40 units, not on 2."""
    values = [400, 401, 399, 400, 398]
    fig = figures.draw_metric_trajectories({"population": list(enumerate(values))}, ["population"], {}, "step")
    lo, hi = fig.axes[0].get_ylim()
    assert hi - lo >= 40 and lo <= 398 and hi >= 401


def test_a_real_change_inside_wide_bounds_still_fills_the_panel():
    """An epidemic whose share infected peaks at 0.08 of [0, 1] is not squashed at the bottom of [0, 1]: its axis
    spans a tenth of the range (the rule's floor), starts at the bound 0 and the peak fills most of it."""
    values = [0.005, 0.02, 0.05, 0.08, 0.06, 0.02, 0.0]
    fig = figures.draw_metric_trajectories({"share_I": list(enumerate(values))}, ["share_I"], {}, "day",
                                           bounds={"share_I": (0.0, 1.0)})
    lo, hi = fig.axes[0].get_ylim()
    assert lo == pytest.approx(-0.005) and hi == pytest.approx(0.105)   # [0, 0.1] and a 5 % margin
    assert 0.08 / (hi - lo) > 0.7


def test_a_control_run_counts_in_the_axis_range():
    """With a control run overlaid, the axis holds both runs' values."""
    run_, control = [(0, 10.0), (1, 12.0)], [(0, 10.0), (1, 30.0)]
    fig = figures.draw_metric_trajectories({"m": run_}, ["m"], {}, "step", control={"m": control})
    lo, hi = fig.axes[0].get_ylim()
    assert lo <= 10 and hi >= 30


def test_sweep_and_effect_curves_follow_the_same_axis_rule():
    """Three replicates of a mean opinion that barely moves (0.4842 to 0.4833) over a sweep: the curves' axis spans
    a tenth of the declared range, as the run report's does, and the caption says so."""
    from desim.report import bands
    path = np.linspace(0.4842, 0.4833, 11)
    groups = {"epsilon=0.05": {"steps": list(range(11)), "values": np.array([path, path + 1e-4, path - 1e-4])}}
    lo, hi = bands.draw("mean_opinion", groups, {}, "week", "t", bounds=(0.0, 1.0)).axes[0].get_ylim()
    assert hi - lo >= 0.1 and -0.01 <= lo <= 0.4832 and 0.4843 <= hi <= 1.01
    lo, hi = bands.draw("mean_opinion", groups, {}, "week", "t").axes[0].get_ylim()
    assert hi - lo >= 0.04842                                       # no bounds: a tenth of the values' magnitude
    assert "at least 10 % of the range declared" in bands.caption("mean_opinion", groups, {}, (0.0, 1.0))


def test_each_metric_panel_has_a_title_a_unit_and_a_time_axis():
    rd = RunData(run={"time_unit": "day"}, config={"simulation": {"collector": {"ref": "desim.diffusion:Prevalence"}}},
                 metrics={}, events=[], llm=None, n_edges=0)
    names = ["share_I", "new_I", "cumulative_incidence", "something_else"]
    titles, units = content.metric_words(rd, names)
    assert titles["new_I"] == "new_I: nodes that entered I during the day" and units["new_I"] == "nodes per day"
    assert titles["share_I"] == "share_I: share of nodes in state I" and units["share_I"] == "share of nodes"
    assert "something_else" not in titles          # a name desim's collector does not make is shown as it is
    fig = figures.draw_metric_trajectories({n: [(0, 0.1), (1, 0.2)] for n in names}, names, {}, "day",
                                           titles=titles, units=units)
    assert [ax.get_title(loc="left") for ax in fig.axes] == [titles.get(n, n) for n in names]
    assert [ax.get_ylabel() for ax in fig.axes] == ["share of nodes", "nodes per day", "share of nodes",
                                                    "something_else"]
    assert all(ax.get_xlabel() == "step (day)" for ax in fig.axes)
    # a study's own collector: no words are made up for its metrics
    rd.config["simulation"]["collector"]["ref"] = "model:Counts"
    assert content.metric_words(rd, names) == ({}, {})


def test_the_report_ranges_metrics_by_the_run_s_declared_bounds_and_says_how(hk, monkeypatch):
    root, run_id = hk
    drawn = captured(monkeypatch)
    write_report(root, run_id=run_id, out_dir=root / "out")
    metrics_fig = drawn[0]
    (mean,) = [ax for ax in metrics_fig.axes if ax.get_title(loc="left").startswith("mean_opinion")]
    lo, hi = mean.get_ylim()
    assert hi - lo >= 0.1 and lo >= -0.01       # metric_bounds [0, 1] in the template's study.json
    md = (root / "out" / "report.md").read_text()
    assert ("mean_opinion, opinion_sd: at least 10 % of the range declared in study.json's metric_bounds" in md)


# --- 2. a continuous state's clusters --------------------------------------------------------------------
def test_the_opinion_density_shows_each_hk_cluster_as_its_own_band(hk):
    """At the last step, the share of agents per bin equals the histogram of the panel's opinions (read with
    SQL) on the bins the caption states, and each opinion cluster (sorted opinions parted by gaps over 0.02)
    is its own run of filled bins between empty ones, which the quantile bands could not show."""
    root, run_id = hk
    with data.connect(root) as con:
        density = content.value_density(con, run_id, "opinion")
    last = max(s for (s,) in sql(root, "SELECT DISTINCT step FROM panel WHERE run_id = ?", [run_id]))
    opinions = np.array(sorted(v for (v,) in sql(root, "SELECT state.opinion FROM panel WHERE run_id = ? AND "
                                                       "step = ?", [run_id, last])))
    everything = [v for (v,) in sql(root, "SELECT state.opinion FROM panel WHERE run_id = ? UNION ALL "
                                          "SELECT state.opinion FROM initial_states WHERE run_id = ?",
                                    [run_id, run_id])]
    edges = np.linspace(min(everything), max(everything), 100 // 5 + 1)      # 100 agents, 5 a bin: 20 bins
    assert density["steps"][-1] == last
    assert density["edges"] == pytest.approx(edges.tolist())
    assert density["shares"][-1] == pytest.approx((np.histogram(opinions, edges)[0] / len(opinions)).tolist())
    clusters = 1 + int(np.sum(np.diff(opinions) > 0.02))
    assert clusters >= 3
    filled = np.asarray(density["shares"][-1]) > 0
    runs_of_filled = int(filled[0]) + int(np.sum(filled[1:] & ~filled[:-1]))
    assert runs_of_filled == clusters


def test_the_state_figure_puts_a_labelled_density_above_the_bands(hk, monkeypatch):
    root, run_id = hk
    drawn = captured(monkeypatch)
    write_report(root, run_id=run_id, out_dir=root / "out")
    state_fig = drawn[1]
    heat, bands, bar = state_fig.axes
    assert heat.get_title(loc="left") == "share of agents in each bin of 'opinion'" and heat.collections
    assert bar.get_ylabel() == "share of agents in the bin\n(log scale; white: none)"
    assert [t.get_text() for t in bands.get_legend().get_texts()] == ["5-95 %", "25-75 %", "median", "mean"]
    assert bands.get_xlabel() == "step (week; 0 = initial state)"
    assert state_fig.get_size_inches()[1] == pytest.approx(figures.figure_size(2)[1])
    md = (root / "out" / "report.md").read_text()
    assert "Top: the share of agents whose 'opinion' lies in each bin (20 bins of width" in md
    assert "![Distribution of opinion](state_opinion.png)" in md


# --- 3. Sugarscape: the grid's rows and keys, dead agents said ---------------------------------------------
@pytest.fixture
def sugarscape(study_copy):
    root = study_copy("sugarscape")
    return root, run(root, 25)


def test_the_grid_names_its_rows_and_labels_both_colour_bars(sugarscape, monkeypatch):
    """Top row: the agents coloured by their sugar (their wealth), with a labelled colour bar; bottom row: the
    sugar left on the landscape, with its own bar of levels 0 to 4 (no more "sugar left 4 (white: 0)")."""
    root, run_id = sugarscape
    payload = grid.grid_payload(root, "sugar", run_id)
    drawn = captured(monkeypatch, grid)
    grid.frames_figure(payload, [0, len(payload["frames"]) - 1])
    (fig,) = drawn
    maps = [ax for ax in fig.axes if ax.images]
    assert len(maps) == 4
    assert maps[0].get_ylabel() == "agents, coloured by\ntheir 'sugar'"
    assert maps[2].get_ylabel() == "sugar left per cell\nof the landscape"
    bars = {ax.get_ylabel(): ax for ax in fig.axes if not ax.images}
    assert set(bars) == {"agent's 'sugar'\n(one scale for all frames)", "sugar left per cell"}
    levels = bars["sugar left per cell"].get_yticks()
    assert list(levels) == [0, 1, 2, 3, 4]        # sugar-map.txt's capacities
    assert "bottom: the sugar left per cell" in fig._suptitle.get_text()
    assert not fig.legends                       # no legend of one colour for a layer of five levels


def test_the_sugar_figure_says_it_leaves_the_dead_out(sugarscape, monkeypatch):
    root, run_id = sugarscape
    drawn = captured(monkeypatch)
    write_report(root, run_id=run_id, out_dir=root / "out")
    last = max(s for (s,) in sql(root, "SELECT DISTINCT step FROM panel WHERE run_id = ?", [run_id]))
    [(dead,)] = sql(root, "SELECT count(*) FROM panel WHERE run_id = ? AND step = ? AND NOT state.alive",
                    [run_id, last])
    assert dead > 0
    (sugar,) = [f for f in drawn if "'sugar'" in (f._suptitle.get_text() if f._suptitle else "")
                and "Distribution" in f._suptitle.get_text()]
    assert sugar._suptitle.get_text() == ("Distribution of 'sugar' over time, living agents only\n"
                                          f"(dead agents, alive = false, are left out: {dead:,} at the last step)")
    # and the density is over the living: each step's shares sum to one over the living agents' bins
    living = [v for (v,) in sql(root, "SELECT state.sugar FROM panel WHERE run_id = ? AND step = ? AND state.alive",
                                [run_id, last])]
    with data.connect(root) as con:
        density = content.value_density(con, run_id, "sugar")
    counts = np.asarray(density["shares"][-1]) * len(living)
    assert counts == pytest.approx(np.histogram(living, density["edges"])[0])


# --- 4. shares that never change ---------------------------------------------------------------------------
def test_a_category_whose_shares_never_change_is_one_line_not_a_chart(study_copy):
    """Schelling's type is 50/50 from the first step to the last: no state_type.png, no broken link to one, and
    a sentence with the shares (from SQL) instead; happy, which changes, is still drawn."""
    root = study_copy("schelling")
    run_id = run(root, 3, width=12, height=12)
    paths = write_report(root, run_id=run_id)
    assert not (paths["dir"] / "state_type.png").exists() and (paths["dir"] / "state_happy.png").exists()
    md = paths["markdown"].read_text()
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert "state_type.png" not in linked and "state_happy.png" in linked
    assert all((paths["dir"] / f).exists() for f in linked)
    assert "state_type.png" not in paths["html"].read_text()
    (zeros, ones), = sql(root, "SELECT count(*) FILTER (WHERE state.type = 0), count(*) FILTER (WHERE state.type = 1) "
                               "FROM panel WHERE run_id = ? AND step = 3", [run_id])
    share = lambda n: f"{100 * n / (zeros + ones):.1f} %"  # noqa: E731
    assert (f"'type': share of agents in each category at each step. It is the same at every step of the run "
            f"(0 {share(zeros)}, 1 {share(ones)}), so no figure is drawn.") in md


def test_shares_that_move_are_not_called_constant():
    counts = {"steps": [0, 1], "categories": ["a", "b"], "counts": {"a": [5, 5], "b": [5, 5]}}
    assert content.shares_never_change(counts)
    assert content.shares_never_change({**counts, "counts": {"a": [5, 10], "b": [5, 10]}})   # same shares, more agents
    assert not content.shares_never_change({**counts, "counts": {"a": [5, 6], "b": [5, 4]}})


@pytest.mark.parametrize("model, words", [("Deffuant", "nodes some encounter could still move"),
                                          ("MajorityRule", "nodes in another state than two steps before")])
def test_unsettled_is_titled_by_what_the_model_means(model, words):
    """Two models report 'unsettled' with two meanings: the title follows the run's decision model."""
    rd = RunData(run={"time_unit": "step"},
                 config={"simulation": {"collector": {"ref": "desim.diffusion:Prevalence"},
                                        "decision": {"ref": f"desim.diffusion:{model}"}}},
                 metrics={}, events=[], llm=None, n_edges=0)
    titles, _ = content.metric_words(rd, ["unsettled"])
    assert titles["unsettled"].startswith(f"unsettled: {words}")
