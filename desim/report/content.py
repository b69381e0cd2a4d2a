"""The report as plain sections (text, tables, figures), before any format.

``build`` decides what a reader sees; ``html`` and ``markdown`` only lay it
out, so the two files always say the same thing.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from desim.experiments import comparisons
from desim.jsontext import parsed
from desim.report import data, figures
from desim.report.data import RunData
from desim.report.figures import file_stem
from desim.store import states
from desim.study.params import described

MAX_TABLE_ROWS = 100


@dataclass
class Figure:
    name: str      # file stem, e.g. "metrics"
    title: str
    png: bytes
    caption: str = ""


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    align_numbers: bool = True  # right-align numeric cells (not in key/value cards)


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)


@dataclass
class Report:
    title: str
    subtitle: str
    sections: list[Section]

    def figures(self) -> list[Figure]:
        return [f for s in self.sections for f in s.figures]


def fmt(v: Any) -> str:
    """Numbers to 6 significant digits, the rest as text."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def steps_shown(steps: list[int]) -> list[int]:
    """All steps, or about ``MAX_TABLE_ROWS`` evenly spaced ones (always the first and last): the one rule for
    the steps a report's table shows (a run's, a comparison's, an effect's)."""
    if len(steps) <= MAX_TABLE_ROWS:
        return steps
    every = -(-len(steps) // MAX_TABLE_ROWS)
    shown = steps[::every]
    return shown if shown[-1] == steps[-1] else shown + [steps[-1]]


_steps_shown = steps_shown


def _when(value: Any) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}" if hasattr(value, "strftime") else fmt(value)


def study_card(rd: RunData, control: RunData | None = None) -> Section:
    run, cfg = rd.run, rd.config
    interaction = cfg.get("population", {}).get("interaction", {})
    rows = [
        ["study", f"{rd.study.get('id', run['study_id'])}: {rd.study.get('title', '')}".rstrip(": ")],
        ["question", rd.study.get("question", "")],
        ["population size", fmt(run.get("n_agents"))],
        ["network", _network_text(interaction, rd.n_edges)],
        ["behaviour model", _ref_text(cfg.get("simulation", {}).get("decision"))],
        ["environment", _ref_text(cfg.get("environment", {}).get("provider"))],
        ["collector", _ref_text(cfg.get("simulation", {}).get("collector")) or "none"],
        ["propagation", cfg.get("population", {}).get("propagation", "")],
        ["steps", f"{max(run['last_step'], 0)} of {run['n_steps']} ({run['time_unit']})"],
        ["time unit", run["time_unit"]],
        ["interaction rounds", fmt(run["interaction_rounds"])],
        ["seed", fmt(run["seed"])],
        ["parameters", _compact(run.get("parameters"))],
        ["run", f"{run['run_id']} ({run['kind']})"],
        ["status", run["status"] + (f": {run['error']}" if run.get("error") else "")
         + (" (its process is gone before the run ended: desim run --resume continues it from its last stored "
            "step)" if run["status"] == "stale" else ", still going: this report shows the steps stored so far"
            if run["status"] == "running" else "")
         + (f", ended with its process ({run['end_reason']})" if run.get("end_reason") else "")],
        ["duration", f"{run['wall_seconds']:.2f} s" if run.get("wall_seconds") is not None else ""],
        ["started / finished", f"{_when(run['started_at'])} / {_when(run.get('finished_at'))}"],
    ]
    if run.get("parent_run_id"):
        fork = f" (fork at step {run['fork_step']})" if run.get("fork_step") is not None else ""
        rows.append(["parent run", f"{run['parent_run_id']}{fork}"])
    if rd.llm:
        llm = rd.llm
        outcomes = ", ".join(f"{k} {v}" for k, v in llm["outcomes"].items())
        # paid is what a server charged for; cache hits and scripted replies are free, their tokens for the record
        rows.append(["LLM calls", f"{llm['paid']:,} paid (tokens in {llm['tokens_in']:,}, out {llm['tokens_out']:,}); "
                                  f"{llm['cached']:,} from the cache, {llm['scripted']:,} scripted; "
                                  f"{llm['rows']:,} rows in all ({outcomes})"])
        unusable = llm["outcomes"].get("fallback", 0) + llm["outcomes"].get("unavailable", 0)
        rows.append(["fallbacks", f"{unusable:,} replies unusable or unanswered in all rounds; "
                                  f"{llm['fallback_actions']:,} final-round panel actions decided by the rule"])
    if control is not None:
        c = control.run
        rows.append(["control run", f"{c['run_id']} ({c['kind']}, {c['status']}), seed {c['seed']}, "
                                    f"parameters {_compact(c.get('parameters'))}"])
    paragraphs = [described(rd.study["description"], parsed(run.get("parameters"), {}))] \
        if rd.study.get("description") else []
    return Section("Study card", paragraphs, [Table(["", "value"], rows, align_numbers=False)])


def _ref_text(ref: dict[str, Any] | None) -> str:
    """A component as the run built it: ``desim.diffusion:SIR {"beta": {"edge": "p"}, "gamma": 0.2}``, its
    arguments resolved (a ``"$name"`` parameter as its value): what was simulated, which ``parameters`` alone
    do not say (a parameter may be read by nothing, a rate may come from a roster column or an edge)."""
    if not ref:
        return ""
    return ref.get("ref", "") + (f" {_compact(ref['args'])}" if ref.get("args") else "")


def _network_text(interaction: dict[str, Any], n_edges: int) -> str:
    """``file contacts.graphml (2,990 edges)``, ``barabasi_albert graph_seed=1, m=3 (2,991 edges)``: the
    settings its kind reads (``desim.study.files.NETWORKS``), not the defaults of other kinds'."""
    from desim.study.files import NETWORKS
    _, needs, reads = NETWORKS.get(interaction.get("kind", "none"), ("", (), ()))
    settings = {k: interaction[k] for k in (*needs, *reads)
                if k != "edges" and interaction.get(k) is not None}
    words = ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))
    if interaction.get("kind") == "file" and "path" in settings:
        words = ", ".join([str(settings["path"])] + [f"{k}={v}" for k, v in sorted(settings.items()) if k != "path"])
    return f"{interaction.get('kind', 'none')}{' ' + words if words else ''} ({n_edges:,} edges)"


def _compact(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, sort_keys=True, default=str)


def metrics_section(rd: RunData, control: RunData | None = None, fork: int | None = None) -> Section:
    names = rd.metric_names()
    time_unit = rd.run["time_unit"]
    events = data.marked_events(rd, control)
    marks = "; ".join(f"step {s}: {', '.join(n)}" for s, n in sorted(events.items())) or "none"
    if not names:
        return Section("Metrics over time", [f"Intervention steps: {marks}.",
                                             "The run recorded no metrics (the study has no collector)."])
    bounds = {n: tuple(b) for n, b in (rd.study.get("metric_bounds") or {}).items() if n in names}
    titles, units = metric_words(rd, names)
    png = figures.metric_trajectories(rd.metrics, names, events, time_unit,
                                      control.metrics if control else None,
                                      (f"{rd.run_id} (treatment)" if control else rd.run_id,
                                       f"{control.run_id} (control)" if control else ""), fork,
                                      bounds, titles, units)
    both = [n for n in names if None not in bounds.get(n, (None, None))]
    fig = Figure("metrics", "Metric trajectories", png,
                 f"Dotted lines mark interventions ({marks}). "
                 + figures.scale_rule(both, [n for n in names if n not in both]))
    values = {n: dict(rd.metrics.get(n, [])) for n in names}
    steps = sorted({s for n in names for s, _ in rd.metrics.get(n, [])})
    shown = _steps_shown(steps)
    rows = [[str(s)] + [fmt(values[n].get(s)) for n in names] for s in shown]
    note = "" if len(shown) == len(steps) else f"{len(shown)} of {len(steps)} steps shown."
    return Section("Metrics over time", [f"Intervention steps: {marks}."],
                   [Table(["step"] + names, rows, note)], [fig])


def states_section(con, rd: RunData) -> Section | None:
    names = rd.study.get("display_states", [])
    if not names:
        return None
    section = Section("State distributions over time")
    for name in names:
        kind = data.display_kind(con, rd.run_id, name)
        if kind == "numeric":
            bands = data.quantile_bands(con, rd.run_id, name)
            density = value_density(con, rd.run_id, name)
            png = figures.numeric_distribution(name, bands, rd.event_steps(), rd.run["time_unit"], density,
                                               _whom(bands))
            caption = (_density_caption(name, density, _whom(bands)) + " Bottom: " if density else "") + \
                (f"'{name}': median, mean and quantile bands across {_whom(bands)} at each step." + _left_out(bands))
        else:
            counts = data.category_counts(con, rd.run_id, name)
            declared = (rd.study.get("state_colors") or {}).get(name)
            # the study's order (S, I, R), in the figure and the sentence alike, not the store's sorted one
            counts["categories"] = figures.ordered_categories(counts["categories"], declared)
            last = counts["steps"][-1] if counts["steps"] else None
            if last is not None:
                section.paragraphs.append(f"'{name}' at step {last}: " + ", ".join(
                    f"{c} {counts['counts'][c][-1]}" for c in counts["categories"]) + f" {_whom(counts)}.")
            if last is not None and shares_never_change(counts):
                # a chart of shares that never move (Schelling's type, 50/50 throughout) carries no information
                section.paragraphs.append(
                    f"'{name}': share of {_whom(counts)} in each category at each step. It is the same at every "
                    "step of the run (" + ", ".join(
                        f"{c} {_percent(counts['counts'][c][-1], counts, -1)}" for c in counts["categories"])
                    + "), so no figure is drawn." + _left_out(counts))
                continue
            png = figures.categorical_shares(name, counts, rd.event_steps(), rd.run["time_unit"], declared)
            caption = f"'{name}': share of {_whom(counts)} in each category at each step." + _left_out(counts)
        section.figures.append(Figure(f"state_{file_stem(name)}", f"Distribution of {name}", png, caption))
    return section


def shares_never_change(counts: dict) -> bool:
    """Whether every category's share of the agents counted is the same at every step (compared exactly, as
    whole numbers: ``a / n == b / m`` as ``a * m == b * n``)."""
    totals = [sum(counts["counts"][c][i] for c in counts["categories"]) for i in range(len(counts["steps"]))]
    return all(counts["counts"][c][i] * totals[0] == counts["counts"][c][0] * totals[i]
               for c in counts["categories"] for i in range(len(totals)))


def _percent(n: int, counts: dict, i: int) -> str:
    total = sum(counts["counts"][c][i] for c in counts["categories"]) or 1
    return f"{100 * n / total:.1f} %"


DENSITY_BINS = 60
"""The most bins of a numeric state's values in its density heat map: fine enough to part opinion clusters
0.05 apart (bins of 1/60 on [0, 1])."""
AGENTS_PER_BIN = 5
"""Fewer bins for few agents: about this many agents per bin were they spread evenly (at least 10 bins), so
that 60 agents are not scattered one per bin over 60 bins, a picture of noise."""


def value_density(con, run_id: str, name: str) -> dict[str, Any] | None:
    """Per step, the share of the agents (the living ones, by the store's rule) whose value of numeric field
    ``name`` lies in each bin: ``{"steps", "edges", "shares": [step][bin], "integer"}``, or None when the
    field holds no number. The bins are equal ones over the run's range (``DENSITY_BINS`` at most, fewer for
    few agents: ``AGENTS_PER_BIN``), or one per whole number when the values are whole numbers spanning fewer
    than ``DENSITY_BINS``."""
    step, x = states.numbers_by_step(con, run_id, name)          # dead agents' values are NaN
    steps, starts = np.unique(step, return_index=True)
    per_step = [v[np.isfinite(v)] for v in np.split(x, starts[1:])] if len(step) else []
    steps = [int(s) for s in steps]
    finite = np.concatenate(per_step) if per_step else np.array([])
    if not finite.size:
        return None
    lo, hi = float(finite.min()), float(finite.max())
    integer = bool(np.all(finite == np.round(finite))) and hi - lo < DENSITY_BINS
    if integer:
        edges = np.arange(lo - 0.5, hi + 1.5)
    elif lo == hi:
        edges = np.array([lo - 0.5, hi + 0.5])
    else:
        most = max(len(v) for v in per_step)
        edges = np.linspace(lo, hi, min(DENSITY_BINS, max(10, most // AGENTS_PER_BIN)) + 1)
    shares = [np.histogram(v, edges)[0] / max(1, len(v)) for v in per_step]
    return {"steps": steps, "edges": edges.tolist(), "shares": np.array(shares).tolist(), "integer": integer}


def _density_caption(name: str, density: dict[str, Any], whom: str) -> str:
    edges = density["edges"]
    bins = (f"one bin per whole number from {edges[0] + 0.5:g} to {edges[-1] - 0.5:g}" if density["integer"]
            else f"{len(edges) - 1} bins of width {edges[1] - edges[0]:.3g} from {edges[0]:.3g} to {edges[-1]:.3g}")
    return (f"Top: the share of {whom} whose '{name}' lies in each bin ({bins}) at each step, on a log colour "
            "scale, white where no agent is: clusters show as dark bands, the gaps between them as white.")


PREVALENCE = "desim.diffusion:Prevalence"


def metric_words(rd: RunData, names: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """A title and a y-axis label (its unit) per metric panel: for the metrics of desim's own collector
    (``desim.diffusion:Prevalence``, whose docstring defines them) what each one counts, in the run's time
    unit (``new_I``: "nodes that entered I during the day", in "nodes per day"); for a study's own metrics,
    which declare no description, the name alone."""
    collector = (rd.config.get("simulation", {}).get("collector") or {}).get("ref")
    if collector != PREVALENCE:
        return {}, {}
    unit = rd.run["time_unit"] or "step"
    titles, units = {}, {}
    model = ((rd.config.get("simulation", {}).get("decision") or {}).get("ref") or "").rpartition(":")[2]
    for name in names:
        words = _prevalence_words(name, unit, model)
        if words:
            titles[name] = f"{name}: {words[0]}"
            units[name] = words[1]
    return titles, units


def _prevalence_words(name: str, unit: str, model: str = "") -> tuple[str, str] | None:
    """What a ``desim.diffusion:Prevalence`` metric is, and its unit (see that module's docstring); ``model``,
    the decision's class name, where a metric's meaning is the model's (Deffuant's ``unsettled``)."""
    if name == "unsettled" and model == "Deffuant":
        return ("nodes some encounter could still move (0: no opinion can change again)", "nodes")
    fixed = {
        "cumulative_incidence": ("share of nodes ever out of the first state, seeds included (attack rate so "
                                 "far)", "share of nodes"),
        "changed": (f"nodes whose state changed during the {unit}", f"nodes per {unit}"),
        "unsettled": ("nodes in another state than two steps before (0 at a fixed point or a two-step cycle)",
                      "nodes"),
        "mean_opinion": ("mean opinion of the nodes", "opinion"),
        "opinion_sd": ("standard deviation of the nodes' opinions", "opinion"),
    }
    if name in fixed:
        return fixed[name]
    kind, _, state = name.partition("_")
    if not state:
        return None
    return {"share": (f"share of nodes in state {state}", "share of nodes"),
            "count": (f"nodes in state {state}", "nodes"),
            "new": (f"nodes that entered {state} during the {unit}", f"nodes per {unit}")}.get(kind)


def _whom(read: dict) -> str:
    """Who a state's distribution is over: the living agents when the store left the dead out (its rule for
    a run whose state has ``alive``), else the agents."""
    return "living agents" if any(read.get("left_out") or ()) else "agents"


def _left_out(read: dict) -> str:
    n = read.get("left_out") or []
    return f" Dead agents (alive = false) are left out: {n[-1]:,} at the last step." if any(n) else ""


def events_section(rd: RunData) -> Section:
    rows = [[str(e["step"]), e["kind"], e["name"], _compact(e["detail"])[:160]] for e in rd.events]
    text = [] if rows else ["No interventions fired in this run."]
    return Section("Events", text, [Table(["step", "kind", "name", "detail"], rows)] if rows else [])


def held_spans(held: list[dict]) -> list[tuple[int, int, str]]:
    """``comparisons.held_runs`` as the figures' shaded spans: (last step, held to, role)."""
    return [(h["last_step"], h["held_to"], h.get("role") or h["run_id"]) for h in held]


def add_metric_differences(section: Section, pairs: dict, treat: RunData, control: RunData,
                           fork: int | None, held: list[dict] = ()) -> None:
    """The treatment-minus-control figure and table of every metric both runs have (``pairs``:
    ``data.metric_pairs``, an ended run holding its last values, its held steps shaded)."""
    time_unit = treat.run["time_unit"]
    diffs = data.metric_differences(pairs)
    png = figures.metric_differences(diffs, data.marked_events(treat, control), fork, time_unit,
                                     f"Treatment minus control per step ({treat.run_id} - {control.run_id})",
                                     held_spans(held))
    section.figures.append(Figure("difference_metrics", "Treatment minus control", png,
                                  "Bars: treatment minus control per step"
                                  + (f"; the red line is the fork step {fork}" if fork is not None else "")
                                  + ("; shaded: a run that ended is held at its last step" if held else "") + "."))
    # one narrow table per metric: a single table of 1 + 3 x metrics columns overflows the page
    for n, rows_of in pairs.items():
        values = {s: (t, c) for s, t, c in rows_of}
        rows = [[str(s), fmt(values[s][0]), fmt(values[s][1]), fmt(values[s][0] - values[s][1])]
                for s in _steps_shown(sorted(values))]
        section.tables.append(Table(["step", f"{n} treatment", f"{n} control", f"{n} diff"], rows))


def comparison_section(con, treat: RunData, control: RunData,
                       fork: int | None) -> Section:
    time_unit = treat.run["time_unit"]
    metric_pairs = data.metric_pairs(con, treat, control)
    how = f"{treat.run_id} (treatment) compared with {control.run_id} (control)"
    if fork is not None:      # either run may be the branch: --run names the treatment, whichever it is
        child, parent = ((treat, control) if treat.run.get("parent_run_id") == control.run_id
                         else (control, treat))
        how += f"; {child.run_id} is a branch of {parent.run_id} forked at step {fork}"
    section = Section("Treatment minus control", [how + "."])
    # one rule for the tables, the figures and the per-agent differences: an ended run holds its last step
    held = data.held_runs(con, treat, control)
    population, notes = data.population(con, treat, control)
    section.paragraphs += [f"Note: {n[0].upper()}{n[1:]}" for n in notes] + comparisons.held_notes(held)
    joined = "Panel rows of both runs joined on step and agent_id."
    if population["control_only"] or population["treatment_only"]:
        joined = joined[:-1] + f" ({population['both']} agents in both runs; agents in one run only are left out)."
    if any(metric_pairs.values()):
        add_metric_differences(section, metric_pairs, treat, control, fork, held)
    for name in treat.study.get("display_states", []):
        kind = data.field_kind(con, treat.run_id, name)
        pairs = data.paired_differences(con, treat.run_id, control.run_id, name, kind)
        png = figures.paired_differences(name, kind, pairs, fork, time_unit, held_spans(held))
        dead = any(pairs.get("left_out") or ())     # the store's rule for runs whose agents die
        caption = joined + (f" Agents dead (alive = false) in either run are left out: {pairs['left_out'][-1]:,} "
                            "at the last step." if dead else "")
        section.figures.append(Figure(f"paired_{file_stem(name)}", f"Per-agent differences in {name}", png,
                                      caption))
        if pairs["steps"]:
            last = len(pairs["steps"]) - 1
            summary = (f"mean per-agent difference {fmt(pairs['mean'][last])}" if kind == "numeric"
                       else f"{100 * pairs['changed_share'][last]:.1f} % of agents differ")
            section.paragraphs.append(f"'{name}' at step {pairs['steps'][last]}: {summary} "
                                      f"({pairs['pairs'][last]} agent pairs"
                                      + (f" alive in both runs; {pairs['left_out'][last]:,} dead in either left out"
                                         if dead else "") + ").")
    return section


def grid_section(con, rd: RunData, study_root) -> Section | None:
    """For a positioned study (state fields ``x``, ``y``): the grid at the first and the last step,
    coloured by the first display state, with the study's layer (Sugarscape: sugar left) when it has one.
    Not by ``alive`` while another is displayed: the grid draws the living, all of them alive."""
    from desim.report import grid
    if study_root is None or not grid.is_positioned(con, rd.run_id):
        return None
    shown = [n for n in rd.study.get("display_states", []) if n not in ("x", "y")]
    state = next((n for n in shown if n != "alive"), shown[0] if shown else None)
    if state is None:
        return None
    payload = grid.grid_payload(study_root, state, rd.run_id)
    last = len(payload["frames"]) - 1
    png = grid.frames_figure(payload, [0, last])
    first_f, last_f = payload["frames"][0], payload["frames"][last]
    scale = " (one colour scale over the whole run, so the frames compare)" if payload["kind"] == "numeric" else ""
    caption = (f"Who lives where: each cell of the {payload['width']}x{payload['height']} grid holds at most one "
               f"agent, coloured by '{state}' (a state field of the agents){scale}; left the initial state, right step "
               f"{last_f['step']}.")
    paragraphs = [f"The agents on the grid, coloured by their '{state}': {first_f['agents']} at the start, "
                  f"{last_f['agents']} at step {last_f['step']}; desim viz grid <study> --state {state} plays every "
                  "step."]
    if payload["layer"]:
        lay = payload["layer"]
        totals = [f["total"] for f in (lay["frames"][0], lay["frames"][last]) if f]
        caption = ("Top row: " + caption[0].lower() + caption[1:]
                   + f" Bottom row: not the agents but the study's layer '{lay['name']}', per cell (white "
                     f"{lay['range'][0]:g}, orange {lay['range'][1]:g}), replayed from the panel; the top row draws "
                     "the agents over it.")
        if len(totals) == 2:
            paragraphs.append(f"{lay['name']} (the layer, summed over the cells): {totals[0]:,.0f} at the start, "
                              f"{totals[1]:,.0f} at step {last_f['step']}.")
    if payload["note"]:
        paragraphs.append(payload["note"])
    return Section("The grid", paragraphs, figures=[Figure("grid", f"{state} on the grid", png, caption)])


def build(con, rd: RunData, control: RunData | None, fork: int | None,
          study_root=None) -> Report:
    sections = [study_card(rd, control), metrics_section(rd, control, fork)]
    grid = grid_section(con, rd, study_root)
    if grid:
        sections.append(grid)
    states = states_section(con, rd)
    if states:
        sections.append(states)
    sections.append(events_section(rd))
    if control is not None:
        sections.append(comparison_section(con, rd, control, fork))
    title = rd.study.get("title") or rd.run["study_id"]
    subtitle = f"run {rd.run_id}" + (f" compared with {control.run_id}" if control else "")
    return Report(title, subtitle, sections)
