"""What a report shows, read from a study's store through the store's named reads.

Everything a figure or a table needs comes through here, so the writers never
touch the store. State fields come from ``desim.store.states`` (step 0 is the
initial states, so distributions start before the first step).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desim.jsontext import parsed
from desim.errors import StudyError, shell_arg
from desim.experiments import comparisons
from desim.store import Catalogue, StudyLayout, open_store, queries, states
from desim.store.health import health_of, last_step
from desim.study.interventions import INTERVENTION_KINDS


class ReportError(StudyError, ValueError):
    """The report cannot be made (no store, unknown run, unknown state field); says why."""


@dataclass
class RunData:
    """One run as the report sees it."""

    run: dict[str, Any]
    config: dict[str, Any]
    metrics: dict[str, list[tuple[int, float]]]
    events: list[dict[str, Any]]
    llm: dict[str, Any] | None
    n_edges: int

    @property
    def run_id(self) -> str:
        return self.run["run_id"]

    @property
    def study(self) -> dict[str, Any]:
        return self.config.get("study", {})

    def metric_names(self) -> list[str]:
        """The study's ``display_metrics`` that exist, else every metric."""
        wanted = [m for m in self.study.get("display_metrics", []) if m in self.metrics]
        return wanted or sorted(self.metrics)

    def event_steps(self) -> dict[int, list[str]]:
        """Intervention names by step (sorted), for the markers on trajectories: the scheduled events and
        broadcasts, not the rows a study records itself in ``advance_to`` (a headline every step would hide
        them; the effect report's marks are the arms' interventions too)."""
        out: dict[int, list[str]] = {}
        for e in self.events:
            if e["kind"] in INTERVENTION_KINDS:
                out.setdefault(e["step"], []).append(e["name"])
        return {step: sorted(names) for step, names in out.items()}


def marked_events(run: RunData, control: RunData | None = None) -> dict[int, list[str]]:
    """The run's intervention names by step; in a comparison, one run's own ones are marked
    "(treatment only)" or "(control only)".

    In a comparison both runs' interventions explain the curves, e.g. a branch that moves a correction
    the parent had: each arm's marks say whose it is, as the effect report's do.
    """
    mine = run.event_steps()
    if control is None:
        return {step: list(names) for step, names in mine.items()}
    theirs = control.event_steps()
    out: dict[int, list[str]] = {}
    for step in sorted(set(mine) | set(theirs)):
        ours, others = mine.get(step, []), theirs.get(step, [])
        out[step] = ([n if n in others else f"{n} (treatment only)" for n in ours]
                     + [f"{n} (control only)" for n in others if n not in ours])
    return out


def connect(study_root: str | Path):
    """The study's store, read-only (a context manager: ``with connect(root) as con:``)."""
    layout = StudyLayout(study_root)
    if not layout.db.exists():
        raise ReportError(layout.missing_store())
    return open_store(layout)


def latest_ids(ids: list[str], study_root: str | Path | None, shown: int = 10) -> str:
    """``latest runs: c, b, a (and 190 more; desim runs S lists them all)`` of run ids oldest first: a
    store holds hundreds of runs after a sweep, and a line of every id buries the message it was for."""
    if not ids:
        return "the store has no runs yet"
    latest = ", ".join(reversed(ids[-shown:]))
    if len(ids) <= shown:
        return f"runs: {latest}"
    return f"latest runs: {latest} (and {len(ids) - shown} more; desim runs {shell_arg(study_root) if study_root else '<study>'} lists them all)"


def resolve_run(con, run_id: str | None, study_root: str | Path | None = None) -> dict[str, Any]:
    """The named run, or the latest completed one made by hand (not by a sweep or an effect; the latest
    completed of any kind when there is none)."""
    catalogue = Catalogue(con)
    if run_id is None:
        row = catalogue.latest_run(status="completed", prefer_plain=True)
        if row is None:
            raise ReportError("the store has no completed run; name one with --run")
        return row
    row = catalogue.run(run_id)
    if row is None:
        raise ReportError(f"no run '{run_id}' in the store "
                          f"({latest_ids(catalogue.run_ids(), study_root)})")
    return row


def recorded_run(con, run_id: str | None, study_root: str | Path | None = None) -> dict[str, Any]:
    """:func:`resolve_run`, refused when the run recorded no step (it failed at set-up): its report
    would only say that a state field is missing, when what the reader needs is the run's error."""
    row = resolve_run(con, run_id, study_root)
    if row["status"] == "running" and study_root is not None:
        # runs.last_step is written when a run ends: a run going, or killed, has its steps on disk only, and a
        # killed one's status is still "running" in the catalogue
        layout = StudyLayout(study_root)
        row = {**row, "status": health_of(layout, row),
               "last_step": last_step(layout, row["run_id"], row["last_step"], "running")}
    why = comparisons.unrecorded(row)
    if why:
        raise ReportError(why)
    return row


def load_run(con, run: dict[str, Any]) -> RunData:
    run_id = run["run_id"]
    events = queries.events(con, run_id)
    for e in events:
        e["detail"] = parsed(e["detail"])
    config = parsed(run["config"], {})
    return RunData(run=run, config=config, metrics=queries.metric_series(con, run_id), events=events,
                   llm=queries.llm_summary(con, run_id), n_edges=queries.edge_count(con, run_id))


def no_field(con, run_id: str, name: str) -> str:
    """The message for a state field the run does not have, naming the ones it has (and the nearest)."""
    import difflib
    names = states.field_names(con, run_id)
    near = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean '{near[0]}'?" if near else ""
    have = f" (its fields: {', '.join(names)})" if names else ""
    return f"run {run_id}: the panel state has no field '{name}'{have}{hint}"


def field_kind(con, run_id: str, name: str) -> str:
    """``numeric`` or ``categorical`` (text and booleans), from the field's stored type."""
    kind = states.field_kind(con, run_id, name)
    if kind is None:
        raise ReportError(no_field(con, run_id, name))
    return kind


def display_kind(con, run_id: str, name: str) -> str:
    """How a state is drawn over time: ``categorical`` (shares per category) for text, booleans and
    integers taking few values (``states.few_valued_integer``: Schelling's ``type``), else ``numeric``
    (quantile bands). A binary state as a 0-1 band says nothing; its share says everything."""
    kind = states.display_kind(con, run_id, name)
    if kind is None:
        raise ReportError(no_field(con, run_id, name))
    return "categorical" if kind == "boolean" else kind


QUANTILES = states.QUANTILES
quantile_bands = states.quantile_bands
category_counts = states.category_counts


def paired_differences(con, treatment: str, control: str, name: str, kind: str) -> dict[str, list]:
    """Per step, per-agent treatment minus control (the same agent at the same step).

    Numeric fields give quantiles and the mean of the differences; categorical
    fields give the share of agents whose value differs.
    """
    if kind == "numeric":
        return states.paired_quantiles(con, treatment, control, name)
    return states.paired_changed_share(con, treatment, control, name)


def metric_pairs(con, treatment: RunData, control: RunData) -> dict[str, list[tuple[int, float, float]]]:
    """``(step, treatment, control)`` per step the runs pair, for every metric both runs have (the
    treatment's shown metrics): a run that ended with its process holds its last values
    (``comparisons.compare``, the store's ``paired_metrics``)."""
    names = [n for n in treatment.metric_names() if n in control.metrics]
    out: dict[str, list[tuple[int, float, float]]] = {n: [] for n in names}
    for m in queries.metric_comparison(con, control.run_id, treatment.run_id):
        if m["name"] in out and m["treatment"] is not None and m["control"] is not None:
            out[m["name"]].append((m["step"], m["treatment"], m["control"]))
    return out


def metric_differences(pairs: dict[str, list[tuple[int, float, float]]]) -> dict[str, list[tuple[int, float]]]:
    """Treatment minus control per step, of :func:`metric_pairs`."""
    return {name: [(s, t - c) for s, t, c in rows] for name, rows in pairs.items()}


def held_runs(con, treatment: RunData, control: RunData) -> list[dict[str, Any]]:
    """The runs of the comparison that ended with their process and are held (``comparisons.held_runs``)."""
    return comparisons.held_runs(con, treatment.run_id, control.run_id)


def population(con, treatment: RunData, control: RunData) -> tuple[dict[str, int], list[str]]:
    """Agents in both runs and in one only, and the notes on pairs of strangers
    (``comparisons.population_notes``)."""
    return comparisons.population_notes(con, control.run, treatment.run)


def fork_step(a: dict[str, Any], b: dict[str, Any]) -> int | None:
    """The fork step when one run is a branch of the other."""
    if a.get("parent_run_id") == b["run_id"]:
        return a.get("fork_step")
    if b.get("parent_run_id") == a["run_id"]:
        return b.get("fork_step")
    return None
