"""Counterfactual branches and resumed runs.

A branch answers "what if the campaign had started at step 4?" cheaply and
exactly: it replays its parent run's stored actions for steps ``1..T-1``
through ``advance_to`` and ``apply`` only (no observation, no decision, the
actions tagged ``replay``), then decides from step ``T`` on. Its rows for
steps before ``T`` therefore equal the parent's, and parent and branch pair
up agent by agent as control and treatment.

The seed page's rule is enforced before anything is decided or written: a
multi-round study cannot be replayed from its panel, which keeps only each
step's final-round actions. It can be replayed exactly only from recorded
rounds (``record_rounds: true`` in the parent run).

A branch starts from its parent's run: its configuration is the parent's
recorded one (seed, ``--set`` values, steps, rounds) with the study's current
interventions for steps >= ``T``; ``params`` may change parameters that only
those interventions use. The study's code must be the code the parent ran
with (``desim.versions.code_files``): a branch across a code edit would
credit the edit's effect to the intervention.

A resumed run re-executes its steps from the start without writing the ones
already stored, then writes the rest. Rule-based studies are deterministic,
so the result equals an uninterrupted run; LLM studies replay their cached
replies, so no paid call is repeated.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from desim.errors import StudyError
from desim.experiments.recording import RunResult, record, sink_for
from desim.records import Action, ActionColumns
from desim.run.assemble import assemble
from desim.run.execute import gc_paused
from desim.store import Catalogue, StudyLayout, open_store, queries
from desim.store.files import RunFiles
from desim.store.health import last_step
from desim.study.files import (
    FILES,
    StudyConfigError,
    StudySpec,
    load_study,
    spec_from_config,
)
from desim.study.params import parameter_uses
from desim.versions import code_changes, code_files, diff_configs, population_files


class BranchRefused(StudyError, ValueError):
    """A branch or resume that cannot be exact; nothing was decided or written."""


def _parent_row(con, run_id: str) -> dict[str, Any]:
    row = Catalogue(con).run(run_id)
    if row is None:
        raise BranchRefused(f"no run '{run_id}' in this study's store")
    return row


def check_code(parent: dict, root: Path) -> list[str]:
    """The study's code files that differ from those the parent ran with (as problems)."""
    if not parent.get("code"):
        return [f"run {parent['run_id']} recorded no code fingerprint (made by an older desim), so its code "
                "cannot be checked against the study's"]
    now = code_files(root, population_files(json.loads(parent["config"]).get("population")))
    changed = code_changes(json.loads(parent["code"]), now)
    if not changed:
        return []
    return [f"the study's code changed since run {parent['run_id']}: {', '.join(changed)}; the replayed steps "
            "would come from one model and the rest from another"]


def _mentioned_in_code(root: Path, name: str) -> list[str]:
    """Study Python files that spell ``name`` as a string literal (code may read ``ctx.params``)."""
    hits = []
    for rel in code_files(root):
        if rel.endswith(".py"):
            text = (root / rel).read_text(encoding="utf-8", errors="replace")
            if f'"{name}"' in text or f"'{name}'" in text:
                hits.append(rel)
    return hits


def check_parameters(parent_config: dict, spec: StudySpec, at_step: int) -> list[str]:
    """Parameters that differ from the parent's: allowed only when no more than the
    interventions use them (the resolved comparison then checks their timing)."""
    old = parent_config["simulation"].get("parameters") or {}
    new = spec.simulation.parameters
    uses = parameter_uses(spec.files) if spec.files else {}
    problems = []
    for name in sorted(set(old) | set(new), key=str):
        if name in old and name in new and old[name] == new[name]:
            continue
        if name not in new:
            problems.append(f"simulation.parameters.{name} removed")
            continue
        where = uses.get(name, [])
        elsewhere = [w for w in where if not w.startswith(("environment.scheduled_events",
                                                           "environment.broadcasts"))]
        shown = f"{old.get(name)!r} -> {new[name]!r}"
        if not where:
            problems.append(f"parameter {name} changed ({shown}) but no intervention uses it: a branch may "
                            "only change parameters used by interventions at steps >= "
                            f"{at_step} (study code could read any other one through ctx.params)")
        elif elsewhere:
            problems.append(f"parameter {name} changed ({shown}) and is used outside the interventions "
                            f"({', '.join(elsewhere)})")
        elif spec.files and (code := _mentioned_in_code(spec.root, name)):
            problems.append(f"parameter {name} changed ({shown}) and {', '.join(code)} mentions '{name}' "
                            "(code may read it through ctx.params at any step)")
    return problems


def check_branch_changes(parent_config: dict, spec: StudySpec, at_step: int) -> list[str]:
    """What a branch at ``at_step`` changes that it may not (empty when the branch is valid).

    Allowed: interventions (scheduled events and broadcasts) at steps >= ``at_step``,
    parameters only they use, ``n_steps`` (the branch may run longer), and the study
    card (title, description).
    """
    new = spec.resolved()
    problems: list[str] = []
    skip = ("n_steps", "warm_start", "parameters")
    sim_old = {k: v for k, v in parent_config["simulation"].items() if k not in skip}
    sim_new = {k: v for k, v in new["simulation"].items() if k not in skip}
    for d in diff_configs(sim_old, sim_new):
        problems.append(f"simulation.{d['path']} changed ({d['old']!r} -> {d['new']!r})")
    problems += check_parameters(parent_config, spec, at_step)
    if new["simulation"]["n_steps"] < at_step:
        problems.append(f"n_steps {new['simulation']['n_steps']} ends before the fork step {at_step}")
    for d in diff_configs(parent_config["population"], new["population"]):
        problems.append(f"population.{d['path']} changed: the population must stay the same")
    env_old, env_new = parent_config["environment"], new["environment"]
    for key in ("provider", "layers"):
        for d in diff_configs(env_old.get(key), env_new.get(key)):
            problems.append(f"environment.{key}{'.' + d['path'] if d['path'] else ''} changed")
    for key in ("scheduled_events", "broadcasts"):
        def early(items):
            return sorted((json.dumps(i, sort_keys=True) for i in items if i["at_step"] < at_step))
        before_old, before_new = early(env_old.get(key, [])), early(env_new.get(key, []))
        if before_old != before_new:
            removed = sorted(set(before_old) - set(before_new))
            added = sorted(set(before_new) - set(before_old))
            names = [json.loads(x)["name"] for x in removed + added]
            problems.append(f"environment.{key} before step {at_step} changed ({', '.join(names)}): "
                            f"a branch may only add or change interventions at steps >= {at_step}")
    return problems


def inherit_spec(root: Path, parent: dict, params: dict[str, Any] | None = None,
                 steps: int | None = None) -> StudySpec:
    """The study as it is now, run with the parent's seed, steps, rounds and parameter values,
    and ``params`` on top: the configuration a branch of ``parent`` starts from."""
    config = json.loads(parent["config"])
    sim = config["simulation"]
    declared = (load_study(root).simulation.parameters)
    recorded = {k: v for k, v in (sim.get("parameters") or {}).items() if k in declared}
    unknown = sorted(set(params or {}) - set(declared))
    if unknown:
        raise StudyConfigError(root / FILES["simulation"][0],
                               [("parameters", f"--set names undeclared parameter(s) {unknown}; "
                                               f"declared: {sorted(declared)}")])
    return load_study(root, seed=sim["seed"], steps=steps or sim["n_steps"], rounds=sim["interaction_rounds"],
                      params={**recorded, **(params or {})})


def _payload_types(root: Path, run_id: str) -> dict[str, str]:
    return (RunFiles(StudyLayout(root).data, run_id).load_types() or {}).get("payload", {})


def _payload(value: dict | None, json_fields: set[str]) -> dict:
    """A stored payload struct as the dict the study returned (a null field is an absent one)."""
    if not value:
        return {}
    return {k: (orjson.loads(v) if k in json_fields else v) for k, v in value.items() if v is not None}


def _replay_actions(con, parent: dict, until: int, rounds: int, columnar_ids: list[str] | None,
                    root: Path | None = None) -> dict[int, list]:
    """The parent's actions for steps 1..until, one entry per round, tagged ``replay``."""
    if columnar_ids is not None:
        return _columnar_replay(con, parent, until, rounds, columnar_ids)
    types = _payload_types(root, parent["run_id"]) if root is not None else {}
    json_fields = {k for k, t in types.items() if t == "json"}
    replay = {step: [[] for _ in range(rounds)] for step in range(1, until + 1)}
    for step, r, agent_id, kind, payload, rationale in queries.stored_actions(con, parent["run_id"], until, rounds):
        replay[step][r].append(Action(agent_id=agent_id, step=step, kind=kind,
                                      payload=_payload(payload, json_fields),
                                      rationale=rationale or "", source="replay"))
    return replay


def _columnar_replay(con, parent: dict, until: int, rounds: int, ids: list[str]) -> dict[int, list]:
    """Columnar replay: the stored typed payloads come back as columns in one query."""
    table = queries.stored_action_columns(con, parent["run_id"], until, rounds, ids)
    steps = table.column("step").to_numpy()
    rnds = table.column("round").to_numpy()
    replay: dict[int, list] = {}
    for step in range(1, until + 1):
        per_round = []
        for r in range(rounds):
            part = table.filter(pa.array((steps == step) & (rnds == r)))
            p = part.column("p").combine_chunks()
            fields = {} if not pa.types.is_struct(p.type) else {
                p.type.field(i).name: p.field(i).to_numpy(zero_copy_only=False) for i in range(p.type.num_fields)}
            acts = ActionColumns(kind=part.column("action_kind").to_numpy(zero_copy_only=False).astype(object),
                                 payload=fields, source="replay")
            acts.idx = part.column("pos").to_numpy()
            per_round.append(acts)
        replay[step] = per_round
    return replay


def branch(study_root: str | Path, from_run: str, at_step: int, *, params: dict[str, Any] | None = None,
           steps: int | None = None, note: str | None = None, spec: StudySpec | None = None,
           parent_db: str | Path | None = None, db_path: str | Path | None = None, run_id: str | None = None,
           sweep_id: str | None = None, on_step=None, manage_gc: bool = True,
           handle_signals: bool = True) -> RunResult:
    """Run a branch of ``from_run`` forking at ``at_step``.

    Without ``spec`` the branch inherits the parent's recorded configuration
    (:func:`inherit_spec`) with ``params`` (``--set``) and ``steps`` on top; with
    ``spec`` (a warm start) that spec is checked as it is. Refuses
    (``BranchRefused``, before anything is decided or written) when the study's
    code or anything but interventions at steps >= ``at_step`` (and parameters
    only they use) differs from the parent's, when the parent is not complete up
    to ``at_step - 1``, or when the study has more than one round per step and the
    parent did not record its rounds. ``parent_db`` reads the parent from another
    DuckDB file than the study's (a worker's extract); ``db_path`` keeps the branch in another.
    """
    root = Path(study_root)
    if at_step < 1:
        raise BranchRefused("--at-step must be 1 or more")
    if spec is not None and (params or steps):
        raise ValueError("give either spec or params/steps, not both")
    layout = StudyLayout.at(parent_db) if parent_db else StudyLayout(root)
    if not layout.db.exists():
        raise BranchRefused(f"{layout.db} does not exist: run the study before branching it")
    with open_store(layout) as con:
        parent = _parent_row(con, from_run)
        parent_config = json.loads(parent["config"])
        spec = spec or inherit_spec(root, parent, params, steps)
        rounds = max(1, parent["interaction_rounds"])
        if rounds != 1 or spec.rounds != 1:
            recorded = queries.recorded_round_steps(con, from_run, at_step)
            if not (parent_config["simulation"].get("record_rounds") and recorded == at_step - 1):
                raise BranchRefused(
                    f"interaction_rounds is {max(rounds, spec.rounds)}: a branch replays stored actions, but the "
                    "panel keeps only each step's final-round actions, so a multi-round step cannot be "
                    "reproduced from it. Re-run the study from step 0, or run the parent with "
                    "record_rounds: true so that every round is stored and can be replayed.")
        parent["last_step"] = last_step(layout, from_run, parent["last_step"], parent["status"])
        if parent["last_step"] < at_step - 1:
            raise BranchRefused(f"parent run {from_run} is {parent['status']} and complete only up to step "
                                f"{max(parent['last_step'], 0)}; a branch at step {at_step} needs steps 1..{at_step - 1}")
        problems = check_code(parent, root) + check_branch_changes(parent_config, spec, at_step)
        if problems:
            raise BranchRefused(f"a branch at step {at_step} may only add or change interventions at steps >= "
                                f"{at_step}; this one changes:\n  - " + "\n  - ".join(problems))
        with gc_paused(manage_gc):
            run = assemble(spec, run_id)
        replay = _replay_actions(con, parent, at_step - 1, rounds, run.ids if run.columnar else None, root)
    sink = sink_for(spec, db_path, kind="branch", parent_run_id=from_run, fork_step=at_step, note=note,
                    sweep_id=sweep_id)
    return record(run, sink, replay, on_step=on_step, manage_gc=manage_gc, handle_signals=handle_signals)


def resume(study_root: str | Path, run_id: str, *, on_step=None, manage_gc: bool = True,
           handle_signals: bool = True) -> RunResult:
    """Continue an interrupted, failed or killed run from its last complete step.

    The run is executed again from the start with its stored configuration; the steps already stored
    are not written again (``Recorder(resume=True)``), and a branch replays its parent up to its fork."""
    root = Path(study_root)
    layout = StudyLayout(root)
    if not layout.db.exists():
        raise BranchRefused(f"{layout.db} does not exist")
    with open_store(layout) as con:
        row = _parent_row(con, run_id)
        if row["status"] == "completed":
            raise BranchRefused(f"run {run_id} is already completed")
        changed = check_code(row, root)
        if changed:
            raise BranchRefused(f"cannot resume run {run_id}: {changed[0]}. Restore the code, or run the "
                                "study anew (desim run)")
        spec = spec_from_config(root, json.loads(row["config"]), where=f"runs.config of {run_id}")
        with gc_paused(manage_gc):
            run = assemble(spec, run_id)
        replay = None
        if row["kind"] == "branch":
            parent = _parent_row(con, row["parent_run_id"])
            replay = _replay_actions(con, parent, row["fork_step"] - 1, max(1, parent["interaction_rounds"]),
                                     run.ids if run.columnar else None, root)
    sink = sink_for(spec, None, kind=row["kind"], parent_run_id=row["parent_run_id"], fork_step=row["fork_step"],
                    resume=True)
    return record(run, sink, replay, on_step=on_step, manage_gc=manage_gc, handle_signals=handle_signals)
