"""A study in a notebook: HTML summaries Jupyter shows, and one-line plots returned as matplotlib figures."""
from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np

import desim
from desim.report import plot_metrics, plot_shares


def test_a_run_and_a_store_show_a_summary_and_plot_in_one_line(study_copy, tmp_path):
    root = study_copy("rumor_network")
    result = desim.run_study(desim.load_study(root, steps=6, params={"n_agents": 200}))
    page = result._repr_html_()
    assert result.run_id in page and "completed" in page and "metrics at step 6" in page and "reach" in page
    data = desim.open(root)
    assert result.run_id in data._repr_html_() and "param_" not in data._repr_html_()
    assert "n_agents" in data._repr_html_()                 # a column per parameter, named plainly

    fig = plot_metrics(result)
    metrics = [n for n in data.metrics(result.run_id).column_names if n not in ("run_id", "step")]
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == metrics
    line = fig.axes[metrics.index("reach")].lines[0]
    assert list(line.get_ydata()) == data.metrics(result.run_id).column("reach").to_pylist()

    fig = plot_shares(root, "rumor_state", run=result.run_id)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["ignorant", "spreader", "stifler"]   # declared
    stacks = ax.collections
    tops = np.vstack([p.get_paths()[0].vertices for p in stacks[-1:]])
    assert np.isclose(tops[:, 1].max(), 1.0)                # the stack of shares reaches 1 at every step
    declared = {"ignorant": "#4c78a8", "spreader": "#d62728", "stifler": "#9e9e9e"}
    for poly, name in zip(stacks, ["ignorant", "spreader", "stifler"]):
        assert mcolors.to_hex(poly.get_facecolor()[0]) == declared[name]
    fig.savefig(tmp_path / "shares.png")
    assert (tmp_path / "shares.png").stat().st_size > 5000
