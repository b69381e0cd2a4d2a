"""The report of a paired effect (``desim effect``): the intervention's effect over time.

Per metric (default: the study's ``display_metrics``) one figure: the mean
paired difference treatment - control at every step, its 95 % interval as a
band, zero as a reference and the fork step as a red line; before the fork
the pairs are identical, so the curve sits on zero there (a visible check
that the branches replayed their controls exactly). Per state field, the
same for the per-agent mean difference, with the share of agents that
differ; per category of a text or true/false state field (``S``, ``I``,
``R``), the same for the share of agents in it. The step axis says the
study's time unit; the fork and each arm's own interventions (what the
treatment adds, what it takes away) are marked. Each figure's table starts at the fork step, as
``desim effect`` prints it, and shows every step or, past ``MAX_TABLE_ROWS``, evenly spaced ones with the
last (``content.steps_shown``, the run report's rule). An interval clipped at the bounds the difference can
take (``effect_table``'s ``ci_clipped``) is marked in the tables and said under them, as is what a mean left
out (NaN differences, pairs without the metric). The numbers come from
:func:`desim.experiments.effects.effect_table`, so the report and ``desim effect`` agree; the "Over time"
curves from the same pairs' rows (``bands.effect_series``), ended runs held as the pairs hold them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.ticker import MaxNLocator

from desim.errors import shell_arg
from desim.experiments.effects import EffectError, effect_table, ended_note, held_pairs
from desim.jsontext import parsed
from desim.report import figures
from desim.report.content import Figure, Report, Section, Table, fmt, steps_shown
from desim.report.data import ReportError
from desim.report.figures import file_stem
from desim.versions import SIMULATION_FILE
from desim.report.numbers import clipped_note, left_out_note, row_cells
from desim.store import Catalogue, StudyLayout, open_store
from desim.study.files import StudyFile, read_json, read_study_file

FIGURE_HEIGHT = 3.6   # inches: 900 x 360 px per figure


ARM_STYLE = {"treatment": {"color": "tab:orange", "linestyle": ":"},     # what the treatment adds or moves
             "control": {"color": "0.35", "linestyle": "-."}}           # what it takes away


def arm_events(root: Path, data: dict[str, Any]) -> dict[str, dict[int, list[str]]]:
    """Each arm's own interventions from the fork on: ``{"treatment": {step: ["treatment: name", ...]},
    "control": {step: ["control: name", ...]}}``, the scheduled events and broadcasts one arm's runs resolved
    (their parameters in) at a step where the other arm has none of that name. The treatment's are what it
    adds or moves; the control's what it moves or takes away (a campaign set past the last step): what a
    reader looks for on an effect's figure besides the fork."""
    out: dict[str, dict[int, list[str]]] = {"treatment": {}, "control": {}}
    pairs = [p for p in data["pairs"] if p.get("treatment_run_id") and p.get("control_run_id")]
    if not pairs:
        return out
    with open_store(StudyLayout(root)) as con:
        resolved = Catalogue(con).run_interventions([pairs[0]["treatment_run_id"], pairs[0]["control_run_id"]])
    treated, control = (resolved.get(pairs[0][k]) or {} for k in ("treatment_run_id", "control_run_id"))

    def planned(iv: dict) -> set[tuple[int, str]]:
        return {(int(x["at_step"]), x["name"]) for key in ("scheduled_events", "broadcasts") for x in iv.get(key, [])
                if isinstance(x.get("at_step"), int)}

    for arm, mine, other in (("treatment", planned(treated), planned(control)),
                             ("control", planned(control), planned(treated))):
        for step, name in sorted(mine - other):
            if step >= data["effect"]["at_step"]:
                out[arm].setdefault(step, []).append(f"{arm}: {name}")
    return out


def treatment_events(root: Path, data: dict[str, Any]) -> dict[int, list[str]]:
    """The treatment's own interventions (:func:`arm_events`)."""
    return arm_events(root, data)["treatment"]


def time_unit(root: Path, data: dict[str, Any]) -> str:
    """What a step is (``week``, ``day``) as the effect's runs recorded it, for the step axis (a sweep's
    figures say it too); the study's simulation.json before any run is stored."""
    ids = [p["control_run_id"] for p in data["pairs"]][:1]
    with open_store(StudyLayout(root)) as con:
        runs = Catalogue(con).runs(with_config=False, run_ids=ids) if ids else []
    unit = runs[0].get("time_unit") if runs else None
    return unit or read_json(root / SIMULATION_FILE).get("time_unit") or "step"


def mark_arms(ax, events: dict[str, dict[int, list[str]]], fork: int) -> None:
    """The fork (red) and each arm's own interventions, the treatment's orange dotted and the control's grey
    dash-dot, their names in staggered rows. ``figures.mark_events`` draws every intervention alike; an
    effect's reader must tell one the treatment adds from one it takes away."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    labels: list[tuple[float, str, str]] = []
    for arm, by_step in events.items():
        for step, names in sorted(by_step.items()):
            ax.axvline(step, linewidth=1.3, zorder=0, **ARM_STYLE[arm])
            labels.append((step, ", ".join(names), ARM_STYLE[arm]["color"]))
    ax.axvline(fork, color="tab:red", linewidth=1.4, zorder=0)
    labels.append((fork, f"fork at step {fork}", "tab:red"))
    figures.draw_labels(ax, labels)


def effect_figure(title: str, rows: list[dict[str, Any]], fork: int, ylabel: str,
                  events: dict[str, dict[int, list[str]]] | None = None, unit: str = "step") -> bytes:
    """Mean difference per step with its 95 % band, a zero line, the fork line and each arm's own
    interventions (:func:`arm_events`)."""
    fig = figures.new_figure(figsize=(figures.WIDTH / figures.DPI, FIGURE_HEIGHT))
    ax = fig.subplots()
    rows = sorted(rows, key=lambda r: r["step"])
    steps = [r["step"] for r in rows]
    band = [r for r in rows if r["ci_low"] is not None]
    if band:
        ax.fill_between([r["step"] for r in band], [r["ci_low"] for r in band], [r["ci_high"] for r in band],
                        color="tab:blue", alpha=0.18, linewidth=0, label="95 % interval")
    means = [np.nan if r["mean"] is None else r["mean"] for r in rows]     # no number at a step: a gap
    ax.plot(steps, means, color="tab:blue", linewidth=1.8, marker="o", markersize=3.5, label="mean difference")
    ax.axhline(0.0, color="0.4", linewidth=0.9, linestyle="--", zorder=0)
    last = max(steps, default=fork)     # one past the last step never fires: named in the caption, not drawn
    mark_arms(ax, {arm: {s: n for s, n in by.items() if s <= last} for arm, by in (events or {}).items()}, fork)
    ax.set_xlabel(figures.step_axis(unit))
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")     # away from the curve; the marks are labelled at the top
    fig.suptitle(title, fontsize=11)
    fig.subplots_adjust(left=0.1, right=0.97, top=0.88, bottom=0.15)
    return figures.png(fig)


def events_caption(events: dict[str, dict[int, list[str]]], n_steps: int) -> str:
    """The end of a figure's caption: which marks are whose interventions (one after the last step is named,
    not drawn)."""
    said = ""
    for arm, how in (("treatment", "dotted orange"), ("control", "dash-dot grey")):
        marked = "; ".join(f"step {s}: {', '.join(n)}" + (" (after the last step: it never fires)" if s > n_steps
                                                          else "") for s, n in (events.get(arm) or {}).items())
        if marked:
            said += f"; {how}: the {arm}'s own interventions ({marked})"
    return said + "."


def _table(rows: list[dict[str, Any]], extra: list[str], fork: int) -> Table:
    """The rows from the fork step on, as ``desim effect`` prints them (before it each pair's runs coincide, which
    the figure shows), every step or about ``MAX_TABLE_ROWS`` evenly spaced ones with the fork and the last
    step (``content.steps_shown``, the run report's rule); under it what a mean left out, and why an end is
    marked clipped."""
    after = {r["step"]: r for r in rows if r["step"] >= fork}
    steps = sorted(after)
    chosen = steps_shown(steps)
    shown = [after[s] for s in chosen]
    cells = []
    for r in shown:             # each estimate to the digits its interval supports (effect_table keeps all)
        mean, sd, low, high = row_cells(r)
        cells.append([str(r["step"]), mean, low, high, sd, str(r["n"])] + [fmt(r[k]) for k in extra])
    span = f"steps {steps[0]}-{steps[-1]}" if len(steps) > 1 else f"step {steps[0]}" if steps else "no step"
    notes = [f"From the fork (step {fork}) on, as desim effect prints it: {span}"
             + (f", {len(chosen)} of those {len(steps)} steps shown (evenly spaced, the last included)."
                if len(chosen) < len(steps) else "."),
             clipped_note(shown), left_out_note(list(after.values()))]
    return Table(["step", "mean diff", "95 % low", "95 % high", "sd", "pairs"] + [k.replace("_", " ") for k in extra],
                 cells, " ".join(n for n in notes if n))


def band_caption(rows: list[dict[str, Any]]) -> str:
    """What the caption adds when the band was clipped at the quantity's bounds."""
    return (" The band is clipped at the bounds the difference can take (a t interval from few pairs can reach "
            "past them)." if any(r.get("ci_clipped") for r in rows) else "")


def card(study_root: Path, study: StudyFile, data: dict[str, Any]) -> Section:
    e, pairs = data["effect"], data["pairs"]
    treatment = parsed(e["treatment"])
    control = parsed(e["control"])
    done = sum(1 for p in pairs if p["treatment_status"] == "completed")
    reused = sum(1 for p in pairs if p["reused"])
    rows = [
        ["study", f"{e['study_id']}: {study.title}".rstrip(": ")],
        ["question", study.question],
        ["effect", f"{e['effect_id']} (created {fmt(e['created_at'])[:19]})"],
        ["treatment", ", ".join(f"{k}={fmt(v)}" for k, v in sorted(treatment.items()))
         or "the study's interventions at steps >= the fork"],
        ["fork step", str(e["at_step"])],
        ["control parameters", ", ".join(f"{k}={fmt(v)}" for k, v in sorted(control.items()))],
        ["pairs", f"{done} of {e['replicates']} completed ({reused} control runs reused from the store)"],
        ["steps", str(e["n_steps"])],
        ["seeds", f"derived from study seed {e['base_seed']}, the control's parameters and the replicate; "
                  "each branch keeps its control's seed"],
    ]
    section = Section("Effect card", ["Each pair is a control run and a branch of it at the fork step with the "
                                      "treatment: the same seed, population and steps before the fork. "
                                      "Differences are treatment minus control; intervals are 95 % confidence "
                                      "intervals of the mean over pairs (Student t, pairs - 1 degrees of freedom)."],
                      [Table(["", "value"], rows, align_numbers=False)])
    missing = e["replicates"] - done
    if missing:     # an interrupted or failed effect: said, with how to finish it
        section.paragraphs.append(f"Incomplete: {missing} of {e['replicates']} pairs have not completed (the "
                                  f"effect was interrupted or a run failed); the numbers below count the {done} "
                                  f"completed. desim effect {shell_arg(study_root)} --resume {e['effect_id']} runs the rest.")
    ended = ended_note(pairs, e["n_steps"])
    if ended:
        section.paragraphs.append("Ended early: " + ended)
    held = held_pairs(pairs)
    if held:
        section.paragraphs.append(
            f"Held: {len(held)} of the pairs ({', '.join(p['control_run_id'] for p in held)}) are their control run "
            f"twice. The control's process ended before step {e['at_step']} (stop_when or end_run), so nothing is "
            "decided after it and a branch would end where it did, row for row: their difference is 0 at every step.")
    for p in pairs:
        if p["treatment_status"] != "completed" and p.get("treatment_error"):
            section.paragraphs.append(f"{p['treatment_run_id']} {p['treatment_status']}: {p['treatment_error']}")
    return section


def curves_section(root: Path, data: dict[str, Any], metrics: list[str], fork: int, unit: str) -> Section:
    """Control and treatment over time: the mean over pairs with a band holding the middle 90 % of them,
    and the analytic final size of the control where the model has one (``desim.report.bands``); the
    treatment changes the run from the fork on, so no such relation holds for it."""
    from desim.report import bands
    done = [p for p in data["pairs"] if p["treatment_status"] == "completed" and p["control_status"] == "completed"]
    groups = {"control": [p["control_run_id"] for p in done], "treatment": [p["treatment_run_id"] for p in done]}
    curves = bands.effect_series(root, data["effect"]["effect_id"], metrics)    # held as the pairs are
    refs = bands.references(root, {"control": groups["control"]}) if bands.REFERENCE_METRIC in curves else {}
    colors = {"control": "#555555", "treatment": "#1f77b4"}
    text = (f"Each metric step by step in the {len(done)} completed pairs: the controls and their branches with "
            "the treatment from the fork step. A run that ended with its process holds its last values out to the "
            "effect's last step, as the pairs do, so the curves reach every step the differences do.")
    if bands.REFERENCE_METRIC in curves:      # an epidemic's final size: only then is there a reference to explain
        text += (" An analytic reference line, where the model has one, is the control's: the treatment changes "
                 "the run from the fork on, which no final-size relation covers.")
    section = Section("Over time", [text])
    declared = read_study_file(root).metric_bounds
    for metric in metrics:
        if metric not in curves:
            continue
        bounds = tuple(declared.get(metric, (None, None)))
        png = bands.figure(metric, curves[metric], refs, unit,
                           f"'{metric}': control and treatment (mean and middle 90 % of pairs)", fork=fork,
                           colors=colors, bounds=bounds)
        section.figures.append(Figure(f"effect_curves_{file_stem(metric)}", f"{metric} over time", png,
                                      bands.caption(metric, curves[metric], refs, bounds=bounds)))
    return section


def category_sections(categories: list[dict[str, Any]], fork: int, events: dict[str, dict[int, list[str]]],
                      unit: str, declared: dict[str, dict[str, str]], marks: str) -> list[Section]:
    """Per category of a text or true/false state field (``S``, ``I``, ``R``, in the order of the study's
    ``state_colors``), the share of agents in it, treatment - control, over time with its band and its
    table: how a categorical state moved, which a mean over agents cannot say."""
    sections = []
    fields = dict.fromkeys(c["field"] for c in categories)
    for f, category in [(f, k) for f in fields for k in figures.ordered_categories(
            {c["category"] for c in categories if c["field"] == f}, declared.get(f))]:
        rows = sorted((c for c in categories if c["field"] == f and c["category"] == category),
                      key=lambda c: c["step"])
        png = effect_figure(f"Effect on the share of agents with {f} = {category}: treatment - control "
                            "(mean over pairs, 95 % interval)", rows, fork, f"share {f} = {category} difference",
                            events, unit)
        sections.append(Section(f"share with {f} = {category}", [
            f"Per pair and step, the share of agents whose '{f}' is {category} in the treatment minus the same "
            "share in the control, then the mean over pairs with its 95 % interval."], [_table(rows, [], fork)],
            [Figure(f"effect_category_{file_stem(f)}_{file_stem(category)}", f"effect on the share {f} = {category}",
                    png, "Line: mean over pairs of the share's difference; band: 95 % interval of that mean; red "
                    "line: the fork step" + marks + band_caption(rows))]))
    return sections


def build(study_root: str | Path, effect_id: str, metrics: list[str] | None = None) -> Report:
    root = Path(study_root)
    try:
        data = effect_table(root, effect_id)
    except EffectError as e:
        raise ReportError(str(e)) from None
    study = read_study_file(root)
    fork = data["effect"]["at_step"]
    recorded = sorted({m["name"] for m in data["metrics"]})
    if metrics:
        unknown = [m for m in metrics if m not in recorded]
        if unknown:
            raise ReportError(f"unknown metric(s) {', '.join(unknown)}; the effect's runs recorded: "
                              f"{', '.join(recorded)}")
        chosen = metrics
    else:
        shown = [m for m in study.display_metrics if m in recorded]
        chosen = shown or recorded
    sections = [card(root, study, data)]
    events, unit = arm_events(root, data), time_unit(root, data)
    marks = events_caption(events, data["effect"]["n_steps"])
    if not data["metrics"]:
        sections[0].paragraphs.append("No pair has completed yet, so there is nothing to plot.")
    for metric in chosen:
        rows = [m for m in data["metrics"] if m["name"] == metric]
        png = effect_figure(f"Effect on '{metric}': treatment - control (mean over pairs, 95 % interval)",
                            rows, fork, f"{metric} difference", events, unit)
        sections.append(Section(metric, [], [_table(rows, [], fork)], [Figure(
            f"effect_{file_stem(metric)}", f"effect on {metric}", png,
            "Line: mean over pairs of treatment - control; band: 95 % interval of that mean; "
            "red line: the fork step (before it the pairs coincide)" + marks
            + band_caption(rows))]))
    if data["metrics"]:
        sections.append(curves_section(root, data, chosen, fork, unit))
    fields = list(dict.fromkeys(s["field"] for s in data["states"]))
    for f in fields:
        rows = [s for s in data["states"] if s["field"] == f]
        png = effect_figure(f"Effect on state '{f}', agent by agent (mean over agents, then over pairs)",
                            rows, fork, f"{f} difference per agent", events, unit)
        sections.append(Section(f"state {f}", ["Per pair and step, the mean over agents of the agent's "
                                               "treatment - control difference; 'mean |diff|' and 'share changed' "
                                               "say how many agents moved and how far."],
                                [_table(rows, ["mean_abs", "share_changed"], fork)],
                                [Figure(f"effect_state_{file_stem(f)}", f"effect on {f} per agent", png,
                                        "Red line: the fork step" + marks + band_caption(rows))]))
    sections += category_sections(data["categories"], fork, events, unit, study.state_colors, marks)
    return Report(study.title or data["effect"]["study_id"],
                  f"effect {effect_id}: treatment - control from step {fork}", sections)


def write_effect_report(study_root: str | Path, effect_id: str, metrics: list[str] | None = None,
                        out_dir: str | Path | None = None) -> dict[str, Path]:
    """Write the effect's report (``report.html``, ``report.md``, the figures) under
    ``<study>/runs/reports/effect-<id>/`` unless ``out_dir`` says otherwise; returns the paths."""
    from desim.report import reports_dir, save
    report = build(study_root, effect_id, metrics)
    return save(report, Path(out_dir) if out_dir else reports_dir(study_root, f"effect-{effect_id}"))
