"""Reports, the players and notebook plots, from a study's store.

For the command line and for notebooks alike:

* :func:`write_report` writes ``report.html`` (self-contained) and
  ``report.md`` (with the PNG figures beside it) for one run, or for a run
  compared with another (treatment minus control); a branch is compared
  with its parent run by default;
* :func:`write_sweep_report` writes the same files for a sweep: each
  metric's final-step mean against the swept parameter with 95 % intervals
  (``desim.report.effect.write_effect_report`` does so for a paired effect);
* :func:`diffusion_player` draws a run's network coloured by a state field,
  one frame per step: ``diffusion_<state>.html`` (slider and play button,
  offline) and ``diffusion_<state>.png`` (small multiples), of a picture it
  is given: ``desim.report.network_picture.diffusion_player`` (what ``desim viz
  diffusion`` calls) computes the picture, laying the network out, and passes it;
* :func:`grid_player` does the same on the grid for positioned studies
  (state fields ``x`` and ``y``): ``grid_<state>.html`` and ``grid_<state>.png``;
  :func:`grid_payload` gives its frames as plain data;
* :func:`plot_metrics` and :func:`plot_shares` return a run's metrics and a
  state's shares over the steps as matplotlib Figures, which Jupyter shows.

All read the store read-only. Those that write return the paths they wrote;
outputs go under ``<study>/runs/reports/<run_id>/`` (``sweep-<sweep_id>/`` for
a sweep, ``effect-<effect_id>/`` for an effect) unless ``out_dir`` says otherwise.
"""
from __future__ import annotations

from pathlib import Path

from desim.report import content, data, html, markdown, sweep
from desim.report.content import Report
from desim.report.data import ReportError
from desim.report.diffusion import diffusion_player
from desim.report.grid import grid_payload, grid_player
from desim.report.notebook import plot_metrics, plot_shares
from desim.store import StudyLayout

__all__ = ["ReportError", "diffusion_player", "grid_payload", "grid_player", "plot_metrics", "plot_shares",
           "reports_dir", "write_report", "write_sweep_report"]


def reports_dir(study_root: str | Path, name: str) -> Path:
    return StudyLayout(study_root).report_dir(name)


def write_report(study_root: str | Path, run_id: str | None = None, compare: str | None = None,
                 out_dir: str | Path | None = None) -> dict[str, Path]:
    """Write the report of ``run_id`` (default: the latest completed run not made by a sweep or an effect).

    ``compare`` names a control run: the report then shows treatment (``run_id``)
    minus control per step and per agent. A branch run is compared with its
    parent unless ``compare`` is given. Returns ``{"html", "markdown", "dir"}``
    plus one entry per figure (its PNG file).
    """
    with data.connect(study_root) as con:
        run = data.recorded_run(con, run_id, study_root)
        control_row = None
        if compare is not None:
            control_row = data.recorded_run(con, compare, study_root)
            if control_row["run_id"] == run["run_id"]:
                raise ReportError(f"--compare names the report's own run {run['run_id']}")
        elif run["kind"] == "branch" and run.get("parent_run_id"):
            control_row = data.recorded_run(con, run["parent_run_id"], study_root)
        rd = data.load_run(con, run)
        _current_colors(rd, study_root)
        control = data.load_run(con, control_row) if control_row else None
        fork = data.fork_step(run, control_row) if control_row else None
        report = content.build(con, rd, control, fork, study_root=study_root)
    name = rd.run_id if compare is None else f"{rd.run_id}-vs-{control.run_id}"
    return save(report, Path(out_dir) if out_dir else reports_dir(study_root, name))


def _current_colors(rd: data.RunData, study_root: str | Path) -> None:
    """Category colours from the study's ``study.json`` as it is now (colours are presentation, not part
    of the experiment), over those stored with the run: the dashboard and the players use the same."""
    from desim.report.diffusion import study_colors
    stored = rd.config.setdefault("study", {}).setdefault("state_colors", {})
    for name in rd.study.get("display_states", []):
        stored.update({name: {**stored.get(name, {}), **study_colors(study_root, name)}})


def write_sweep_report(study_root: str | Path, sweep_id: str, metrics: list[str] | None = None,
                       out_dir: str | Path | None = None) -> dict[str, Path]:
    """Write the report of sweep ``sweep_id``: its card, and per metric (default: the study's
    ``display_metrics``) the final-step mean against the first varied parameter with 95 %
    intervals, and the summary table. Returns the same keys as :func:`write_report`."""
    report = sweep.build(study_root, sweep_id, metrics)
    return save(report, Path(out_dir) if out_dir else reports_dir(study_root, f"sweep-{sweep_id}"))


def save(report: Report, out: Path) -> dict[str, Path]:
    """``report.html``, ``report.md`` and the figures' PNGs in ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {"dir": out}
    files: dict[str, str] = {}
    for fig in report.figures():
        files[fig.name] = f"{fig.name}.png"
        paths[fig.name] = out / files[fig.name]
        paths[fig.name].write_bytes(fig.png)
    paths["html"] = out / "report.html"
    paths["html"].write_text(html.render(report), encoding="utf-8")
    paths["markdown"] = out / "report.md"
    paths["markdown"].write_text(markdown.render(report, files), encoding="utf-8")
    return paths
