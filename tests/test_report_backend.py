"""desim never chooses matplotlib's backend for the process that imports it.

The report's figures are drawn on their own Agg canvases (``desim.report.figures.new_figure``), not through
``pyplot``: importing ``desim.report`` and drawing every kind of report figure leaves a backend the user chose
(here ``svg``) as it was. (``pyplot`` may still be imported, by igraph when a layout is computed: importing it
switches nothing.) The notebook helpers go through ``pyplot`` on the user's
backend, so in Jupyter (the inline backend, as ``ipykernel`` sets it) a returned Figure is shown as a picture.
Each case runs in a fresh interpreter: a backend, once set, stays set for the process.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import desim
from waits import HANG_S


def python(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    """``code`` run by a fresh interpreter with ``args`` as ``sys.argv[1:]``; its stdout."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=HANG_S, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    """A small Schelling run (a grid in its report) and a small rumour run (a network to draw), in fresh copies."""
    import shutil
    from pathlib import Path
    base = tmp_path_factory.mktemp("backend")
    source = Path(__file__).resolve().parent.parent / "studies"
    out = {}
    for name, params in (("schelling", {"width": 20, "height": 20}), ("rumor_network", {"n_agents": 200})):
        shutil.copytree(source / name, base / name, ignore=shutil.ignore_patterns("runs", "__pycache__"))
        desim.run_study(desim.load_study(base / name, seed=3, steps=6, params=params))
        out[name] = base / name
    return out


def test_importing_desim_and_drawing_every_report_figure_leaves_the_chosen_backend(studies, tmp_path):
    said = python("""
        import sys
        import matplotlib
        matplotlib.use("svg")
        import numpy as np
        import desim
        import desim.report
        from desim.report.network_picture import diffusion_player
        from desim.report import bands, effect, sweep, write_report
        assert matplotlib.get_backend() == "svg", matplotlib.get_backend()
        paths = write_report(sys.argv[1], out_dir=sys.argv[3])           # metrics, shares and the grid
        drawn = [paths[name].read_bytes() for name in ("metrics", "grid")]
        drawn.append(diffusion_player(sys.argv[2], "rumor_state", out_dir=sys.argv[3])["png"].read_bytes())
        groups = {"a": {"steps": [0, 1, 2], "values": np.array([[0.1, 0.2, 0.3]] * 3)}}
        drawn.append(bands.figure("reach", groups, {}, "day", "bands"))
        rows = [{"step": s, "mean": 0.1 * s, "ci_low": 0.0, "ci_high": 0.2 * s} for s in range(4)]
        drawn.append(effect.effect_figure("effect", rows, 1, "difference"))
        drawn.append(sweep.metric_figure("reach", [{"p": 1, "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}],
                                         "p", [1], []))
        assert all(png[:8] == b"\\x89PNG\\r\\n\\x1a\\n" for png in drawn)
        print(matplotlib.get_backend(), matplotlib.rcParams["backend"])
        """, str(studies["schelling"]), str(studies["rumor_network"]), str(tmp_path))
    assert said.split() == ["svg", "svg"]


def test_a_notebook_plot_is_shown_as_a_picture_in_jupyter(studies):
    """A Jupyter kernel's shell (IPython, in the dev install as in any notebook) formats the figure as a PNG."""
    said = python("""
        import sys
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()         # a kernel's shell, its backend from MPLBACKEND as ipykernel sets it
        import matplotlib
        from desim.report import plot_metrics, plot_shares
        for fig in (plot_metrics(sys.argv[1]), plot_shares(sys.argv[1], "type")):
            shown, _ = shell.display_formatter.format(fig)
            print(sorted(shown))
        print(matplotlib.get_backend())
        """, str(studies["schelling"]), env={"MPLBACKEND": "module://matplotlib_inline.backend_inline"})
    assert said.splitlines() == ["['image/png', 'text/plain']"] * 2 + ["module://matplotlib_inline.backend_inline"]
