"""Paired effects: what an intervention does, with an interval.

One branch against its parent is n = 1: it says what happened in one world,
not how sure we are. :func:`run_effect` takes R control runs of the study (the
replicates a sweep of the same parameters would run, with the same derived
seeds, reused when the store already holds them), branches each at step ``T``
with the treatment (``--set`` values of parameters the interventions use, or
the study's current interventions at steps >= T), and pairs every branch with
its control. Each pair shares its seed, population and steps ``1..T-1``
exactly, so the difference treatment - control isolates the intervention; the
R differences give a mean and a 95 % interval (Student t, R - 1 degrees of
freedom) per step and metric (:func:`effect_table`), and per step and state
field a per-agent paired summary (the mean over agents of the difference, its
mean absolute value, the share of agents that differ).

Effects are recorded in the ``effects`` and ``effect_pairs`` tables, so
``desim report S --effect ID`` and the dashboard can show them later.
"""
from __future__ import annotations

import json
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import duckdb

from .branch import check_branch_changes
from .config import coerce_like, load_study, read_json
from .store import fetch_dicts, field, now, read_only, store_path
from .sweep.executors import make_executor
from .sweep.merge import WaitFn, merge_run, open_store
from .sweep.plan import seed_for
from .sweep.summary import describe
from .sweep.worker import RunOutcome, RunTask, remove_db
from .versions import code_files, code_hash, ensure_version

EFFECTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS effects (
    effect_id VARCHAR PRIMARY KEY, study_id VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
    at_step INTEGER NOT NULL, treatment JSON NOT NULL, control JSON NOT NULL, replicates INTEGER NOT NULL,
    base_seed BIGINT NOT NULL, n_steps INTEGER NOT NULL, note VARCHAR
);
CREATE TABLE IF NOT EXISTS effect_pairs (
    effect_id VARCHAR NOT NULL, replicate INTEGER NOT NULL, seed BIGINT NOT NULL,
    control_run_id VARCHAR NOT NULL, treatment_run_id VARCHAR NOT NULL, reused BOOLEAN NOT NULL
);
"""


class EffectError(ValueError):
    """An effect that cannot be planned; the message says which argument or file is wrong."""


@dataclass
class EffectResult:
    effect_id: str
    study_root: Path
    at_step: int
    pairs: list[dict[str, Any]]
    reused: int
    errors: dict[str, str]
    wall_seconds: float

    @property
    def failed(self) -> list[str]:
        return sorted(self.errors)


ProgressFn = Callable[[str, RunOutcome, int, int], None]


# --- the panel's state fields: the one place that reads them ---------------------------

def state_value(alias: str, name: str) -> str:
    """SQL for a numeric state field of panel row ``alias``: ``TRY_CAST(alias.state."x" AS DOUBLE)``."""
    return f"TRY_CAST({field(alias + '.state', name)} AS DOUBLE)"


def _agent_pair_sql(field: str) -> str:
    """Per pair and step: mean over agents of treatment - control, its mean |.|, the share that differ."""
    d = f"{state_value('t', field)} - {state_value('c', field)}"
    return f"""
        SELECT p.replicate, t.step, avg({d}) AS mean_diff, avg(abs({d})) AS mean_abs,
               avg(CASE WHEN {d} <> 0 THEN 1.0 ELSE 0.0 END) AS share_changed, count({d}) AS n_agents
        FROM effect_pairs p
        JOIN runs r ON r.run_id = p.treatment_run_id AND r.status = 'completed'
        JOIN panel c ON c.run_id = p.control_run_id
        JOIN panel t ON t.run_id = p.treatment_run_id AND t.step = c.step AND t.agent_id = c.agent_id
        WHERE p.effect_id = ? GROUP BY p.replicate, t.step"""


# --- planning --------------------------------------------------------------------------

def _typed(spec, values: dict[str, Any], what: str) -> dict[str, Any]:
    declared = spec.simulation.parameters
    out = {}
    for name, value in (values or {}).items():
        if name not in declared:
            raise EffectError(f"{what} {name}: {spec.root / 'simulation' / 'simulation.json'} declares no "
                              f"parameter '{name}' (declared: {', '.join(sorted(declared)) or 'none'})")
        try:
            out[name] = coerce_like(value, declared[name])
        except ValueError as e:
            raise EffectError(f"{what} {name}: {e}") from None
    return out


def _reusable(con, config: dict[str, Any], code: str) -> str | None:
    """A completed, non-branch run of exactly this configuration and code."""
    for run_id, stored in con.execute(
            "SELECT run_id, config FROM runs WHERE status = 'completed' AND kind <> 'branch' AND code_hash = ? "
            "ORDER BY started_at", [code]).fetchall():
        if json.loads(stored) == config:
            return run_id
    return None


def _extract(study_db: Path, run_id: str, until: int, dest: Path) -> None:
    """Copy what a branch of ``run_id`` at ``until + 1`` reads (its runs row, its actions for steps
    ``1..until``) into a small DuckDB file a worker can read while the parent keeps the study's."""
    remove_db(dest)
    with open_store(study_db) as store:
        con = store.con
        quoted = str(dest.resolve()).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS x")
        try:
            con.execute("CREATE TABLE x.runs AS SELECT * FROM main.runs WHERE run_id = ?", [run_id])
            for table in ("panel", "round_actions"):
                con.execute(f"CREATE TABLE x.{table} AS SELECT * FROM main.{table} WHERE run_id = ? AND step <= ?",
                            [run_id, until])
        finally:
            con.execute("DETACH x")


def _run_tasks(root: Path, db: Path, tasks: list[RunTask], version_id: str, backend: str, workers: int | None,
               address: str | None, phase: str, on_run: ProgressFn | None, on_wait: WaitFn | None,
               errors: dict[str, str]) -> None:
    """Execute ``tasks`` on the executor and merge each finished run into the study's store."""
    if not tasks:
        return
    with make_executor(backend, root, workers, address) as executor:
        for done, outcome in enumerate(executor.run(tasks), 1):
            try:
                if outcome.worker_file and Path(outcome.worker_file).exists():
                    try:
                        merge_run(db, outcome.worker_file, outcome.run_id, version_id, on_wait)
                    except (duckdb.Error, ValueError) as e:
                        outcome.status, outcome.error = "failed", "; ".join(
                            x for x in (outcome.error, f"could not merge the worker's file: {e}") if x)
            finally:
                if outcome.worker_file:
                    remove_db(outcome.worker_file, outcome.run_id)
            if outcome.status != "completed":
                errors[outcome.run_id] = outcome.error or outcome.status
            if on_run:
                on_run(phase, outcome, done, len(tasks))


def run_effect(study_root: str | Path, at_step: int, treatment: dict[str, Any] | None = None, *,
               replicates: int = 10, control: dict[str, Any] | None = None, steps: int | None = None,
               seed: int | None = None, workers: int | None = None, backend: str = "local",
               address: str | None = None, note: str | None = None, on_start: Callable[[str, int, int], None] | None = None,
               on_run: ProgressFn | None = None, on_wait: WaitFn | None = None) -> EffectResult:
    """Run (or reuse) ``replicates`` control runs and branch each at ``at_step`` with ``treatment``.

    ``control`` sets parameters of the control runs (default: the study's
    values); ``treatment`` sets parameters of the branches on top of them, and
    may only touch parameters that interventions at steps >= ``at_step`` use.
    Control seeds are :func:`desim.sweep.seed_for` of the study seed, the
    control's parameters and the replicate, so a sweep's runs are reused.
    Everything is checked before anything runs.
    """
    started = time.perf_counter()
    root = Path(study_root)
    if replicates < 2:
        raise EffectError(f"replicates must be at least 2 for an interval, got {replicates}")
    if at_step < 1:
        raise EffectError("--at-step must be 1 or more")
    base = load_study(root, steps=steps, seed=seed)
    control_p = {**base.simulation.parameters, **_typed(base, control or {}, "--control-set")}
    treat_p = _typed(base, treatment or {}, "--set")
    if base.rounds > 1 and not base.simulation.record_rounds:
        raise EffectError(f"interaction_rounds is {base.rounds}: the treatments are branches, which replay "
                          "stored rounds; set record_rounds: true in simulation.json")
    seeds = [seed_for(base.simulation.seed, control_p, rep) for rep in range(replicates)]
    specs = [load_study(root, steps=steps, seed=s, params=control_p) for s in seeds]
    n_steps = specs[0].simulation.n_steps
    if at_step > n_steps:
        raise EffectError(f"--at-step {at_step} is after the last step ({n_steps})")
    probe = load_study(root, steps=steps, seed=seeds[0], params={**control_p, **treat_p})
    problems = check_branch_changes(specs[0].resolved(), probe, at_step)
    if problems:
        raise EffectError(f"the treatment may only change interventions at steps >= {at_step}; it changes:\n  - "
                          + "\n  - ".join(problems))
    code = code_files(root, base.population.roster)
    db = store_path(root)
    effect_id = f"ef{uuid.uuid4().hex[:8]}"
    folder = root / "runs" / "effects" / effect_id
    folder.mkdir(parents=True, exist_ok=True)
    errors: dict[str, str] = {}
    try:
        with open_store(db, on_wait=on_wait) as store:
            store.con.execute(EFFECTS_SCHEMA)
            version_id = ensure_version(store.con, base.id, base.version_config(), kind="run", code=code)[0]
            controls = [_reusable(store.con, s.resolved(), code_hash(code)) for s in specs]
        found = {c for c in controls if c}
        reused = len(found)
        tasks = []
        for rep, (s, c) in enumerate(zip(seeds, controls)):
            if c is None:
                controls[rep] = f"{effect_id}-c{rep}"
                tasks.append(RunTask(str(root.resolve()), None, controls[rep], s, control_p, steps,
                                     str((folder / f"{controls[rep]}.duckdb").resolve()),
                                     f"effect {effect_id}: control {rep}"))
        if on_start:
            on_start(effect_id, len(tasks), replicates)
        _run_tasks(root, db, tasks, version_id, backend, workers, address, "control", on_run, on_wait, errors)
        with open_store(db, on_wait=on_wait) as store:
            store.con.execute(EFFECTS_SCHEMA)
            label = ", ".join(f"{k}={v}" for k, v in sorted(treat_p.items())) or "the study's interventions"
            branch_version = ensure_version(store.con, base.id, base.version_config(), kind="branch", code=code,
                                            parent_run_id=controls[0], fork_step=at_step,
                                            note=note or f"effect {effect_id}: {label} from step {at_step}")[0]
            store.con.execute("INSERT INTO effects VALUES (?,?,?,?,?,?,?,?,?,?)",
                              [effect_id, base.id, now(), at_step, json.dumps(treat_p, sort_keys=True),
                               json.dumps(control_p, sort_keys=True), replicates, base.simulation.seed,
                               n_steps, note])
            pairs = [{"replicate": rep, "seed": s, "control_run_id": c, "treatment_run_id": f"{effect_id}-t{rep}",
                      "reused": c in found}
                     for rep, (s, c) in enumerate(zip(seeds, controls))]
            for p in pairs:
                store.con.execute("INSERT INTO effect_pairs VALUES (?,?,?,?,?,?)",
                                  [effect_id, p["replicate"], p["seed"], p["control_run_id"],
                                   p["treatment_run_id"], p["reused"]])
        branches = []
        for p in pairs:
            if p["control_run_id"] in errors:
                continue
            extract = folder / f"{p['control_run_id']}.parent.duckdb"
            _extract(db, p["control_run_id"], at_step - 1, extract)
            branches.append(RunTask(str(root.resolve()), None, p["treatment_run_id"], p["seed"], treat_p, steps,
                                    str((folder / f"{p['treatment_run_id']}.duckdb").resolve()),
                                    f"effect {effect_id}: treatment {p['replicate']}",
                                    from_run=p["control_run_id"], at_step=at_step, parent_file=str(extract)))
        _run_tasks(root, db, branches, branch_version, backend, workers, address, "treatment", on_run, on_wait,
                   errors)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        for empty in (folder.parent,):
            try:
                empty.rmdir()
            except OSError:
                pass
    return EffectResult(effect_id, root, at_step, pairs, reused, errors, time.perf_counter() - started)


# --- reading an effect ---------------------------------------------------------------------

def _has_effects(con) -> bool:
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                            "AND table_name = 'effects'").fetchone()[0])


def list_effects(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every recorded effect with its completed pairs (for the dashboard and the CLI)."""
    if not _has_effects(con):
        return []
    return fetch_dicts(con, """
        SELECT e.effect_id, e.at_step, e.treatment, e.control, e.replicates, e.n_steps, e.created_at, e.note,
               count(r.run_id) FILTER (WHERE r.status = 'completed') AS completed_pairs
        FROM effects e LEFT JOIN effect_pairs p USING (effect_id)
        LEFT JOIN runs r ON r.run_id = p.treatment_run_id
        GROUP BY ALL ORDER BY e.created_at""")


def effect_table(study_root: str | Path, effect_id: str, states: list[str] | None = None) -> dict[str, Any]:
    """The effect's summaries over its completed pairs.

    ``{"effect": row, "pairs": [...], "metrics": [{name, step, mean, sd, ci_low, ci_high, n}],
    "states": [{field, step, mean, sd, ci_low, ci_high, n, mean_abs, share_changed}]}``:
    ``mean`` is the mean over pairs of treatment - control (for a state field, of
    each pair's mean over agents), with its 95 % interval. ``states`` defaults to
    the study's ``display_states``.
    """
    db = store_path(study_root)
    if not db.exists():
        raise EffectError(f"{db} does not exist: no effect has run in {study_root}")
    con = read_only(db)
    try:
        rows = fetch_dicts(con, "SELECT * FROM effects WHERE effect_id = ?", [effect_id]) if _has_effects(con) else []
        if not rows:
            known = [e["effect_id"] for e in list_effects(con)]
            raise EffectError(f"no effect '{effect_id}' in {db} (effects: {', '.join(known) or 'none'})")
        pairs = fetch_dicts(con, """
            SELECT p.*, c.status AS control_status, t.status AS treatment_status, t.error AS treatment_error
            FROM effect_pairs p LEFT JOIN runs c ON c.run_id = p.control_run_id
            LEFT JOIN runs t ON t.run_id = p.treatment_run_id WHERE p.effect_id = ? ORDER BY p.replicate""",
                            [effect_id])
        diffs = con.execute("""
            SELECT c.name, c.step, t.value - c.value FROM effect_pairs p
            JOIN runs r ON r.run_id = p.treatment_run_id AND r.status = 'completed'
            JOIN metrics c ON c.run_id = p.control_run_id
            JOIN metrics t ON t.run_id = p.treatment_run_id AND t.step = c.step AND t.name = c.name
            WHERE p.effect_id = ? ORDER BY c.name, c.step, p.replicate""", [effect_id]).fetchall()
        if states is None:
            states = list(read_json(Path(study_root) / "study.json").get("display_states") or [])
        per_agent = {f: con.execute(_agent_pair_sql(f) + " ORDER BY t.step, p.replicate", [effect_id]).fetchall()
                     for f in states}
    finally:
        con.close()
    by_metric: dict[tuple[str, int], list[float]] = {}
    for name, step, d in diffs:
        if d is not None:
            by_metric.setdefault((name, step), []).append(d)
    metrics = [{"name": n, "step": s, **describe(v)} for (n, s), v in by_metric.items()]
    state_rows = []
    for f, got in per_agent.items():
        by_step: dict[int, list[tuple]] = {}
        for _, step, mean_diff, mean_abs, share, n_agents in got:
            if n_agents:
                by_step.setdefault(step, []).append((mean_diff, mean_abs, share))
        for step, vals in sorted(by_step.items()):
            state_rows.append({"field": f, "step": step, **describe([v[0] for v in vals]),
                               "mean_abs": sum(v[1] for v in vals) / len(vals),
                               "share_changed": sum(v[2] for v in vals) / len(vals)})
    return {"effect": rows[0], "pairs": pairs, "metrics": metrics, "states": state_rows}
