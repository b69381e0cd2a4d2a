"""`desim viz diffusion` and the report's state figure tell the truth about what they draw.

* a run still going (or stopped without ending) is drawn with a warning on stderr and says so in its
  figures and player, not as a run that ended at the last step drawn;
* the shares under the small multiples never print a category with agents in it as 0.0 %;
* a state with more categories than colours can tell apart (a field of agent ids) is refused, naming the
  count and the limit;
* a view the run does not allow is named with why, and the option that allows it;
* SIS (a seed infected again) has a transmission tree;
* the two-level layout is said where it is used (a connected piece of MULTILEVEL_FROM agents or more), and
  the docs say the same threshold;
* the report stacks a state's categories in the study's declared order;
* the diffusion templates' display_metrics are figures that move, each its own;
* the docs' example of a networkx graph of one's own runs.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import desim
from desim import layout as lay
from desim.report import network_picture
from desim.cli import main
from desim.commands.core import TEMPLATES, templates
from desim.report import ReportError, write_report
from desim.report import diffusion as drawing
from desim.report import figures
from diffusion_studies import write_study
from storeq import sql
from walk_study import write_walk_study
from waits import HANG_S

ROOT = Path(__file__).resolve().parent.parent
SIR_COLORS = {"S": "#4c78a8", "I": "#d62728", "R": "#9e9e9e"}


def sir_study(root: Path, n: int = 300, steps: int = 25, model: str = "SIR", args=None, env=None,
              interaction=None) -> tuple[Path, str]:
    population = {"provider": {"ref": "desim.diffusion:Nodes", "args": {"n": n}},
                  "interaction": interaction or {"kind": "barabasi_albert", "m": 2}, "propagation": "network"}
    write_study(root, model, args or {"beta": 0.15, "gamma": 0.2}, env=env or {"seeds": 4}, population=population,
                n_steps=steps)
    study = json.loads((root / "study.json").read_text())
    study.update(display_states=["state"], state_colors={"state": SIR_COLORS})
    (root / "study.json").write_text(json.dumps(study))
    return root, desim.run_study(desim.load_study(root)).run_id


@pytest.fixture(scope="module")
def sir(tmp_path_factory):
    return sir_study(tmp_path_factory.mktemp("s46") / "sir")


def texts(fig) -> str:
    """Every text a Sheet-drawn figure holds, one string (the head, the keys, the shares, the note)."""
    import matplotlib.pyplot as plt
    out = " ".join(t.get_text() for t in fig.texts)
    plt.close(fig)
    return out


# --- 1. a run not ended -------------------------------------------------------------------------------

def _live_run(root: Path) -> tuple[str, int]:
    for path in (root / "runs" / "live").glob("*.json"):
        try:
            d = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        return d["run_id"], d["step"]
    return "", -1


def test_a_run_still_going_is_drawn_with_a_warning_and_says_where_it_was(tmp_path, capsys):
    root = write_walk_study(tmp_path / "walk", n_agents=12, n_steps=400, pause=0.1)
    proc = subprocess.Popen([sys.executable, "-m", "desim.cli", "run", str(root), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        import time
        deadline = time.monotonic() + HANG_S
        while _live_run(root)[1] < 3:
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the run never reached step 3"
            time.sleep(0.05)
        run_id = _live_run(root)[0]
        out_dir = tmp_path / "going"
        assert main(["viz", "diffusion", str(root), "--state", "x", "--run", run_id, "--out", str(out_dir)]) == 0
        err = capsys.readouterr().err
        assert f"desim: warning: Run {run_id} was still going when this was drawn: shown up to step" in err
        assert "of 400" in err
        html = (out_dir / "diffusion_x.html").read_text()
        assert "was still going when this was drawn" in html
        pic = network_picture.picture(root, "x", run_id)
        assert pic["meta"]["run"]["status"] == "running"
        last = pic["meta"]["steps"][-1]
        drawn = texts(drawing.view_figure(pic, "network"))
        assert f"shown up to step {last:,} of 400" in drawn          # under the title
        assert "stored so far" in drawn and "the run was still going;" in drawn      # and in the frame note
    finally:
        proc.kill()
        proc.wait(HANG_S)
    # killed: its process is gone, and the picture says it stopped without ending
    assert main(["viz", "diffusion", str(root), "--state", "x", "--run", run_id, "--out", str(tmp_path / "k")]) == 0
    err = capsys.readouterr().err
    assert "stale" in err and f"--resume {run_id}" in err


def test_a_completed_run_is_drawn_without_a_warning(sir, capsys, tmp_path):
    root, run_id = sir
    assert main(["viz", "diffusion", str(root), "--state", "state", "--out", str(tmp_path)]) == 0
    assert "warning" not in capsys.readouterr().err
    pic = network_picture.picture(root, "state", run_id)
    assert drawing.run_note(pic["meta"]) == ""
    assert "stored so far" not in texts(drawing.view_figure(pic, "network"))


# --- 2. shares under the panels --------------------------------------------------------------------

def test_a_category_with_agents_never_reads_as_0_0_percent():
    for total in (7, 1000, 5000, 123_457):
        for count in range(0, total + 1, max(1, total // 997)):
            text = drawing.share_text(count, total)
            if count:
                assert not text.startswith("0.0") and not text.startswith("0 %"), (count, total, text)
            if count < total:
                assert not text.startswith("100"), (count, total, text)
    assert drawing.share_text(2, 5000) == "<0.1 % (2)"
    assert drawing.share_text(4998, 5000) == ">99.9 % (4,998)"
    assert drawing.share_text(0, 5000) == "0 %" and drawing.share_text(5000, 5000) == "100 %"
    meta = {"kind": "categorical", "counts": [[4996, 2, 2, 0]], "palette": ["#1", "#2", "#3", "#4"]}
    assert [t for _, _, t in drawing._share_items(meta, 0)] == ["99.9 %", "<0.1 % (2)", "<0.1 % (2)", "0 %"]


# --- 3. too many categories ----------------------------------------------------------------------------

def test_a_state_of_agent_ids_is_refused_naming_the_count_and_the_limit(sir, capsys, tmp_path):
    root, run_id = sir
    infected = sql(root, "SELECT count(DISTINCT CAST(state.infected_by AS VARCHAR)) FROM states "
                         "WHERE run_id = ? AND state.infected_by IS NOT NULL", [run_id])[0][0]
    assert infected > network_picture.MAX_CATEGORIES
    assert main(["viz", "diffusion", str(root), "--state", "infected_by", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"state field 'infected_by' has {infected:,} distinct values (most are agent ids)" in err
    assert f"at most {network_picture.MAX_CATEGORIES} categories" in err and "--view tree" in err
    assert not list(tmp_path.glob("*.png"))
    with pytest.raises(ReportError, match="distinct values"):
        network_picture.picture(root, "infected_by", run_id)


# --- 7. views left out ---------------------------------------------------------------------------------

def test_a_view_left_out_names_the_option_that_draws_it(sir, capsys, tmp_path):
    root, _ = sir
    assert main(["viz", "diffusion", str(root), "--state", "state", "--view", "network", "--max-nodes", "100",
                 "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no 'network' view" in err and "300 agents, more than --max-nodes (100)" in err
    assert "--max-nodes 300" in err
    assert main(["viz", "diffusion", str(root), "--state", "state", "--view", "all", "--max-nodes", "100",
                 "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "not drawn: the network, adoption and tree views: 300 agents, more than --max-nodes (100); " \
           "give --max-nodes 300" in err
    assert main(["viz", "diffusion", str(root), "--state", "state", "--view", "all", "--out", str(tmp_path)]) == 0
    assert "not drawn" not in capsys.readouterr().err


def test_view_all_says_a_run_without_infectors_has_no_tree(tmp_path, capsys):
    root, _ = sir_study(tmp_path / "noinf", n=120, steps=10, env={"seeds": 4, "record_infector": False})
    assert main(["viz", "diffusion", str(root), "--state", "state", "--view", "all"]) == 0
    assert "not drawn: the tree view: the run records no 'infected_by'" in capsys.readouterr().err


# --- SIS: a seed infected again ------------------------------------------------------------------------

def test_sis_has_a_transmission_tree_whose_seeds_are_its_roots(tmp_path):
    root, run_id = sir_study(tmp_path / "sis", n=200, steps=40, model="SIS", args={"beta": 0.3, "gamma": 0.3})
    seeds = [a for (a,) in sql(root, "SELECT agent_id FROM initial_states WHERE run_id = ? AND state.state = 'I'",
                               [run_id])]
    again = sql(root, "SELECT count(DISTINCT agent_id) FROM panel WHERE run_id = ? AND action_kind = 'infect' "
                      "AND agent_id IN (SELECT unnest(?))", [run_id, seeds])[0][0]
    assert again > 0                    # a seed was infected again: its state names an infector
    pic = network_picture.picture(root, "state", run_id, views=["tree"])
    t = pic["tree"]
    ids = pic["node"]["ids"]
    where = {ids[p]: i for i, p in enumerate(t["nodes"])}
    for s in seeds:
        assert t["parent"][where[s]] == -1 and t["x"][where[s]] == 0
    assert t["roots"] == len(seeds)


# --- 6. the two-level layout -------------------------------------------------------------------------

def test_the_two_level_layout_is_said_from_its_threshold_on_a_connected_piece(tmp_path, monkeypatch):
    monkeypatch.setattr(lay, "MULTILEVEL_FROM", 150)
    root, run_id = sir_study(tmp_path / "one", n=150, steps=3)            # one piece of exactly 150
    pic = network_picture.picture(root, "state", run_id, views=["network"])
    assert pic["network"]["layout"]["two_levels"] is True
    assert "in two levels" in drawing.captions(pic)["network"]
    assert "not communities" in texts(drawing.view_figure(pic, "network"))
    # 200 agents in rings of 20: above the threshold in all, but no piece reaches it
    ring = [[f"p{i:03d}", f"p{(i // 20) * 20 + (i + 1) % 20:03d}"] for i in range(200)]
    personas = [{"agent_id": f"p{i:03d}"} for i in range(200)]
    root2 = tmp_path / "rings"
    write_study(root2, "SIR", {"beta": 0.15, "gamma": 0.2}, env={"seeds": 4}, n_steps=3,
                population={"personas": personas, "interaction": {"kind": "edges", "edges": ring},
                            "propagation": "network"})
    pic = network_picture.picture(root2, "state", desim.run_study(desim.load_study(root2)).run_id, views=["network"])
    assert pic["network"]["layout"]["two_levels"] is False
    assert "two levels" not in drawing.captions(pic)["network"]


def test_the_docs_give_the_code_s_threshold():
    threshold = f"{lay.MULTILEVEL_FROM:,}"
    network = (ROOT / "docs" / "network.md").read_text()
    dashboard = (ROOT / "docs" / "dashboard.md").read_text()
    assert f"{threshold} agents or more" in network and "not communities" in network
    assert f"{threshold}\n    agents or more" in dashboard or f"{threshold} agents or more" in dashboard
    for text in (network, dashboard):
        assert f"above {threshold}" not in text


# --- 5. the report's stacked states --------------------------------------------------------------------

def test_the_report_stacks_states_in_the_declared_order(sir, monkeypatch):
    drawn = []
    monkeypatch.setattr(figures, "png", lambda fig: drawn.append(fig) or b"")
    counts = {"steps": [0, 1, 2], "categories": ["I", "R", "S"], "left_out": [0, 0, 0],
              "counts": {"I": [4, 10, 3], "R": [0, 5, 20], "S": [296, 285, 277]}}
    figures.categorical_shares("state", counts, {}, "day", {"S": SIR_COLORS["S"], "I": SIR_COLORS["I"],
                                                            "R": SIR_COLORS["R"]})
    ax = drawn[0].axes[0]
    assert ax.get_legend_handles_labels()[1] == ["S", "I", "R"]
    bottom = ax.collections[0]             # stackplot draws the first category at the bottom
    import matplotlib.colors as mc
    assert mc.to_hex(bottom.get_facecolor()[0]) == SIR_COLORS["S"]
    monkeypatch.undo()
    root, run_id = sir
    paths = write_report(root, run_id=run_id)
    md = Path(paths["markdown"]).read_text()
    assert re.search(r"'state' at step \d+: S \d+, I \d+, R \d+ agents", md), md


# --- 9. the templates' display metrics -------------------------------------------------------------------

DIFFUSION = sorted(n for n in templates()
                   if json.loads((TEMPLATES / n / "simulation" / "simulation.json").read_text())["decision"]["ref"]
                   .startswith("desim.diffusion:"))


@pytest.mark.parametrize("name", DIFFUSION)
def test_a_diffusion_template_displays_metrics_that_move_each_its_own(tmp_path, monkeypatch, capsys, name):
    monkeypatch.chdir(tmp_path)
    assert main(["new", "mine", "--template", name]) == 0
    spec = desim.load_study("studies/mine")
    shown = spec.study.display_metrics
    run = desim.run_study(spec)
    series = {m: [v for _, v in sql("studies/mine", "SELECT step, value FROM metrics WHERE run_id = ? AND name = ? "
                                                    "ORDER BY step", [run.run_id, m])] for m in shown}
    for m, values in series.items():
        assert values, f"{name}: display metric {m} is not recorded"
        assert np.ptp(values[1:]) > 0, f"{name}: {m} does not move after the first step: {values[:5]}..."
    for a, b in zip(shown, shown[1:]):
        assert not np.allclose(series[a], series[b]), f"{name}: {a} and {b} draw the same curve"


# --- 8. a networkx graph of one's own ----------------------------------------------------------------------

def test_the_docs_networkx_example_runs(tmp_path, monkeypatch, capsys):
    text = (ROOT / "docs" / "network.md").read_text()
    section = text[text.index("## A networkx graph of your own"):text.index("## Values in roster")]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    population = re.search(r"```json\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    assert main(["new", "ba_fixed", "--template", "sir"]) == 0
    exec(compile(code, "docs/network.md", "exec"), {})
    Path("studies/ba_fixed/population/population.json").write_text(population)
    assert main(["run", "studies/ba_fixed", "-q"]) == 0, capsys.readouterr().err
    n_agents, n_edges = sql("studies/ba_fixed", "SELECT (SELECT count(*) FROM initial_states), "
                                               "(SELECT count(*) FROM edges)")[0]
    assert (n_agents, n_edges) == (5000, 14_991)
    assert "5,000 agents `0` ... `4999` and its 14,991 edges" in section


def test_a_step_axis_names_the_unit_once():
    """A study whose time unit is the step itself labelled its axes "step (step)"."""
    from desim.report.figures import step_axis
    assert [step_axis("day"), step_axis("step"), step_axis(None), step_axis("step", "0 = initial state"),
            step_axis("week", "0 = initial state")] == \
        ["step (day)", "step", "step", "step (0 = initial state)", "step (week; 0 = initial state)"]
