"""What a report shows, read from a study's store (read-only, parameterised SQL).

Everything a figure or a table needs comes through here, so the writers
never touch SQL. State fields are typed fields of the ``panel.state`` struct,
read as ``state."name"`` (the name quoted by ``desim.store.field``, never
spliced raw). Step 0 is the ``initial_states`` table, so distributions start
before the first step.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from ..store import fetch_dicts, field, read_only, store_path


class ReportError(ValueError):
    """The report cannot be made (no store, unknown run, unknown state field); says why."""


def field_rows(name: str) -> str:
    """One query shape for "a state field at every step, initial states as step 0"."""
    v = field("state", name)
    return (f"SELECT 0 AS step, agent_id, {v} AS v FROM initial_states WHERE run_id = $run "
            f"UNION ALL SELECT step, agent_id, {v} AS v FROM panel WHERE run_id = $run")


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
        """Intervention names by step (sorted), for the markers on trajectories."""
        out: dict[int, list[str]] = {}
        for e in self.events:
            out.setdefault(e["step"], []).append(e["name"])
        return {step: sorted(names) for step, names in out.items()}


def marked_events(run: RunData, control: RunData | None = None) -> dict[int, list[str]]:
    """The run's intervention names by step, plus the control's own ones marked "(control only)".

    In a comparison both runs' interventions explain the curves, e.g. a branch
    that removes a correction the parent had.
    """
    out = {step: list(names) for step, names in run.event_steps().items()}
    if control is not None:
        for step, names in control.event_steps().items():
            for name in names:
                if name not in out.get(step, []):
                    out.setdefault(step, []).append(f"{name} (control only)")
    return out


def connect(study_root: str | Path) -> duckdb.DuckDBPyConnection:
    db = store_path(study_root)
    if not db.exists():
        raise ReportError(f"{db} does not exist: run the study first (desim run {study_root})")
    return read_only(db)


def resolve_run(con: duckdb.DuckDBPyConnection, run_id: str | None) -> dict[str, Any]:
    """The named run, or the latest completed one."""
    if run_id is None:
        rows = fetch_dicts(con, "SELECT * FROM runs WHERE status = 'completed' "
                                "ORDER BY started_at DESC, run_id DESC LIMIT 1")
        if not rows:
            raise ReportError("the store has no completed run; name one with --run")
        return rows[0]
    rows = fetch_dicts(con, "SELECT * FROM runs WHERE run_id = ?", [run_id])
    if not rows:
        known = [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()]
        raise ReportError(f"no run '{run_id}' in the store (runs: {', '.join(known) or 'none'})")
    return rows[0]


def load_run(con: duckdb.DuckDBPyConnection, run: dict[str, Any]) -> RunData:
    run_id = run["run_id"]
    metrics: dict[str, list[tuple[int, float]]] = {}
    for step, name, value in con.execute(
            "SELECT step, name, value FROM metrics WHERE run_id = ? ORDER BY name, step", [run_id]).fetchall():
        metrics.setdefault(name, []).append((step, value))
    events = fetch_dicts(con, "SELECT step, kind, name, detail FROM events WHERE run_id = ? "
                              "ORDER BY step, kind, name", [run_id])
    for e in events:
        e["detail"] = json.loads(e["detail"]) if isinstance(e["detail"], str) else e["detail"]
    n_edges = con.execute("SELECT count(*) FROM edges WHERE run_id = ?", [run_id]).fetchone()[0]
    config = json.loads(run["config"]) if isinstance(run["config"], str) else (run["config"] or {})
    return RunData(run=run, config=config, metrics=metrics, events=events, llm=llm_summary(con, run_id),
                   n_edges=n_edges)


def llm_summary(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, Any] | None:
    """Calls by outcome, tokens and cache hits, plus fallback actions; ``None`` without LLM calls."""
    n, cached, tok_in, tok_out = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE cached), coalesce(sum(tokens_in), 0), "
        "coalesce(sum(tokens_out), 0) FROM llm_calls WHERE run_id = ?", [run_id]).fetchone()
    if not n:
        return None
    outcomes = dict(con.execute("SELECT coalesce(outcome, 'unknown'), count(*) FROM llm_calls "
                                "WHERE run_id = ? GROUP BY 1 ORDER BY 1", [run_id]).fetchall())
    fallbacks = con.execute("SELECT count(*) FROM panel WHERE run_id = ? AND action_source = 'fallback'",
                            [run_id]).fetchone()[0]
    return {"calls": n, "cached": cached, "tokens_in": tok_in, "tokens_out": tok_out,
            "outcomes": outcomes, "fallback_actions": fallbacks}


def field_kind(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> str:
    """``numeric`` or ``categorical`` (text and booleans), from the field's stored type."""
    try:
        row = con.execute(f"SELECT typeof({field('state', name)}) FROM panel WHERE run_id = ? "
                          f"AND {field('state', name)} IS NOT NULL LIMIT 1", [run_id]).fetchone()
    except duckdb.BinderException:
        row = None
    if not row:
        raise ReportError(f"run {run_id}: the panel state has no field '{name}'")
    return "numeric" if row[0] in {"DOUBLE", "BIGINT", "INTEGER", "FLOAT", "UBIGINT"} else "categorical"


def display_kind(con: duckdb.DuckDBPyConnection, run_id: str, name: str, most: int = 8) -> str:
    """How a state is drawn over time: ``categorical`` (shares per category) for text, booleans and
    integers taking at most ``most`` values (Schelling's ``type``, a 0/1 flag), else ``numeric``
    (quantile bands). A binary state as a 0-1 band says nothing; its share says everything."""
    kind = field_kind(con, run_id, name)
    if kind == "numeric":
        typ, distinct = con.execute(f"SELECT any_value(typeof({field('state', name)})), "
                                    f"count(DISTINCT {field('state', name)}) FROM panel WHERE run_id = ?",
                                    [run_id]).fetchone()
        if typ in {"BIGINT", "INTEGER", "UBIGINT"} and distinct <= most:
            return "categorical"
    return kind


QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def quantile_bands(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> dict[str, list]:
    """Per step: the 5/25/50/75/95 % quantiles and the mean of a numeric field."""
    rows = con.execute(
        f"SELECT step, quantile_cont(TRY_CAST(v AS DOUBLE), {list(QUANTILES)}), avg(TRY_CAST(v AS DOUBLE)) "
        f"FROM ({field_rows(name)}) GROUP BY step ORDER BY step", {"run": run_id}).fetchall()
    return {"steps": [r[0] for r in rows], "quantiles": [r[1] for r in rows], "mean": [r[2] for r in rows]}


def category_counts(con: duckdb.DuckDBPyConnection, run_id: str, name: str) -> dict[str, Any]:
    """Per step, how many agents are in each category of a categorical field."""
    rows = con.execute(f"SELECT step, coalesce(CAST(v AS VARCHAR), 'null') AS c, count(*) FROM ({field_rows(name)}) "
                       "GROUP BY step, c ORDER BY step, c", {"run": run_id}).fetchall()
    steps = sorted({r[0] for r in rows})
    cats = sorted({r[1] for r in rows})
    counts = {c: [0] * len(steps) for c in cats}
    pos = {s: i for i, s in enumerate(steps)}
    for step, c, n in rows:
        counts[c][pos[step]] = n
    return {"steps": steps, "categories": cats, "counts": counts}


def paired_differences(con: duckdb.DuckDBPyConnection, treatment: str, control: str,
                       name: str, kind: str) -> dict[str, list]:
    """Per step, per-agent treatment minus control (panel rows joined on step and agent_id).

    Numeric fields give quantiles and the mean of the differences; categorical
    fields give the share of agents whose value differs.
    """
    join = ("FROM panel t JOIN panel c ON t.step = c.step AND t.agent_id = c.agent_id "
            "WHERE t.run_id = $t AND c.run_id = $c")
    params = {"t": treatment, "c": control}
    tv, cv = field("t.state", name), field("c.state", name)
    if kind == "numeric":
        d = f"TRY_CAST({tv} AS DOUBLE) - TRY_CAST({cv} AS DOUBLE)"
        rows = con.execute(f"SELECT t.step, quantile_cont({d}, {list(QUANTILES)}), avg({d}), count(*) {join} "
                           "GROUP BY t.step ORDER BY t.step", params).fetchall()
        return {"steps": [r[0] for r in rows], "quantiles": [r[1] for r in rows],
                "mean": [r[2] for r in rows], "pairs": [r[3] for r in rows]}
    rows = con.execute(
        f"SELECT t.step, avg(CASE WHEN {tv} IS DISTINCT FROM {cv} THEN 1.0 ELSE 0.0 END), count(*) {join} "
        "GROUP BY t.step ORDER BY t.step", params).fetchall()
    return {"steps": [r[0] for r in rows], "changed_share": [r[1] for r in rows], "pairs": [r[2] for r in rows]}


def metric_differences(treatment: RunData, control: RunData) -> dict[str, list[tuple[int, float]]]:
    """Treatment minus control per step, for every metric both runs have."""
    out = {}
    for name in treatment.metric_names():
        if name not in control.metrics:
            continue
        base = dict(control.metrics[name])
        out[name] = [(s, v - base[s]) for s, v in treatment.metrics[name]
                     if s in base and v is not None and base[s] is not None]
    return out


def fork_step(a: dict[str, Any], b: dict[str, Any]) -> int | None:
    """The fork step when one run is a branch of the other."""
    if a.get("parent_run_id") == b["run_id"]:
        return a.get("fork_step")
    if b.get("parent_run_id") == a["run_id"]:
        return b.get("fork_step")
    return None
