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

import functools
import json
import numbers
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from desim.errors import StudyError
from desim.experiments.recording import RunResult, record, sink_for
from desim.records import Action, ActionColumns
from desim.run.assemble import assemble
from desim.run.execute import gc_paused
from desim.store import Catalogue, StoreError, StudyData, StudyLayout, open_store, queries
from desim.store.files import RunFiles
from desim.store.health import last_step
from desim.store.reader import check_db_path, check_new_run_id
from desim.study.files import (
    FILES,
    StudyConfigError,
    StudySpec,
    load_study,
    rounds_run,
    spec_from_config,
)
from desim.study.contract import model_hook
from desim.study.params import mentioned_in_code, parameter_uses, python_texts
from desim.study.refs import outside_code, refs_in
from desim.versions import OUTSIDE, code_changes, code_files, diff_configs, population_files


class BranchRefused(StudyError, ValueError):
    """A branch or resume that cannot be exact; nothing was decided or written."""


class WarmStartRefused(StudyConfigError, BranchRefused):
    """A warm start that cannot be exact: what ``BranchRefused`` says, as the mistake of the ``warm_start``
    of ``simulation.json`` (it is still a ``BranchRefused`` to a caller that catches those)."""


def _parent_row(con, run_id: str) -> dict[str, Any]:
    row = Catalogue(con).run(run_id)
    if row is None:
        raise BranchRefused(f"no run '{run_id}' in this study's store")
    return row


SIBLING_MODULES_KEPT = (0, 3)
"""The desim version from which a version's code holds the study modules its code imports from outside its
folder (``<outside>/<folder>/<module>.py``): a run recorded before did not, so their absence is no edit."""


RULES_CHANGED = {
    (0, 4): {
        "desim.diffusion:HegselmannKrause": "its confidence set now includes its bound (|x_j - x_i| <= epsilon), "
                                            "and a move of at most its tolerance is not made",
        "desim.diffusion:Deffuant": "a move of at most its tolerance is not made",
    },
}
"""desim's own models whose update rule changed, by the desim version that changed it: a run of one recorded by
an older desim would go on (branched, resumed, or reused as an effect's control) under another rule than its
first steps, with no file of the study changed to say so."""


def code_changed_since(run: dict, root: Path) -> list[str]:
    """The study's code and data files that differ now from those ``run`` (its ``runs`` row) ran with, and
    desim's own models it uses whose rule changed since the desim that recorded it (:data:`RULES_CHANGED`)."""
    config = json.loads(run["config"])
    population = config.get("population") or {}
    now = {**code_files(root, population_files(population)), **outside_code(root, config)}
    then = json.loads(run["code"])
    if _made_before(run, SIBLING_MODULES_KEPT):
        now = {k: v for k, v in now.items() if k in then or not (k.startswith(OUTSIDE) and "/" in k[len(OUTSIDE):])}
    refs = refs_in(config)
    changed_rules = [f"{ref} (desim {'.'.join(map(str, version))} changed its rule: {why})"
                     for version, models in RULES_CHANGED.items() if _made_before(run, version)
                     for ref, why in models.items() if ref in refs]
    return code_changes(then, now) + changed_rules


def _made_before(run: dict, version: tuple[int, int]) -> bool:
    """Whether ``run`` was recorded by a desim older than ``version`` (an unreadable version counts as older)."""
    try:
        return tuple(int(p) for p in str(run.get("desim_version") or "0").split(".")[:2]) < version
    except ValueError:
        return True


def refuse_resume_after_edit(root: Path, run_id: str, error: type[Exception], what: str) -> None:
    """Raise ``error`` when the study's code changed since ``run_id`` (a completed run of the sweep or effect
    ``what`` names) ran: resumed, the rest of its runs would come from other code than the first, and
    every attempt would say to resume again."""
    with open_store(StudyLayout(root)) as con:
        row = Catalogue(con).run(run_id)
    if row is None or not row.get("code"):
        return
    changed = code_changed_since(row, root)
    if changed:
        raise error(f"cannot resume {what}: the study's code changed since its runs ran ({', '.join(changed)}), so "
                    f"the rest would come from other code. Restore it to resume (`desim diff {root} {run_id}` "
                    "with the new version's id shows the change), or start a new one")


def check_code(parent: dict, root: Path) -> list[str]:
    """The study's code files that differ from those the parent ran with (as problems)."""
    if not parent.get("code"):
        return [f"run {parent['run_id']} recorded no code fingerprint (made by an older desim), so its code "
                "cannot be checked against the study's"]
    population = json.loads(parent["config"]).get("population") or {}
    problems = _roster_rule(parent, population)
    changed = code_changed_since(parent, root)
    if changed:
        problems.append(f"the study's code changed since run {parent['run_id']}: {', '.join(changed)}; the "
                        "replayed steps would come from one model and the rest from another")
    return problems


CSV_COLUMNS_TYPED = (0, 2)
"""The desim version from which a CSV roster's columns are typed as a whole (before: cell by cell)."""


def _roster_rule(parent: dict, population: dict) -> list[str]:
    """A run whose CSV roster an older desim read by another rule: its agents' attributes may differ now, in
    the same version of the study (same files), so it is neither branched nor resumed."""
    roster = population.get("roster") or ""
    made_by = str(parent.get("desim_version") or "0")
    try:
        older = tuple(int(p) for p in made_by.split(".")[:2]) < CSV_COLUMNS_TYPED
    except ValueError:
        older = False
    if not (roster.lower().endswith(".csv") and older):
        return []
    return [f"run {parent['run_id']} was recorded by desim {made_by}, which typed its CSV roster ({roster}) cell "
            "by cell; this desim types each column as a whole (docs/network.md), so its agents' attributes may "
            "differ: run the study again"]


def _value_names(environment: dict) -> set[str]:
    """The names study code reads through the interventions: the layers and the events' targets."""
    layers = environment.get("layers") or {}
    names = set(layers) if isinstance(layers, dict) else {x.get("name") for x in layers if isinstance(x, dict)}
    return names | {e.get("target") for e in environment.get("scheduled_events") or []}


def check_parameters(parent_config: dict, spec: StudySpec, at_step: int) -> list[str]:
    """Parameters that differ from the parent's: allowed only when no more than the
    interventions use them (the resolved comparison then checks their timing)."""
    old = parent_config["simulation"].get("parameters") or {}
    new = spec.simulation.parameters
    uses = parameter_uses(spec.files) if spec.files else {}
    values = _value_names(spec.resolved()["environment"])
    texts = functools.cache(lambda: python_texts(spec.root))     # read when a parameter first needs them
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
        elif spec.files and (code := mentioned_in_code(texts(), name, name in values)):
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
    # interaction_rounds 0 and 1 run alike (the engine clamps to max(1, ...)): compared as run
    sim_old, sim_new = ({**{k: v for k, v in sim.items() if k not in skip},
                         "interaction_rounds": rounds_run(sim.get("interaction_rounds", 1))}
                        for sim in (parent_config["simulation"], new["simulation"]))
    for d in diff_configs(sim_old, sim_new):
        problems.append(f"simulation.{d['path']} changed ({d['old']!r} -> {d['new']!r})")
    problems += check_parameters(parent_config, spec, at_step)
    if new["simulation"]["n_steps"] < at_step:
        problems.append(f"n_steps {new['simulation']['n_steps']} ends before the fork step {at_step}")
    # propagation is a label the engine never reads (the seed): correcting it changes no agent
    for d in diff_configs({k: v for k, v in parent_config["population"].items() if k != "propagation"},
                          {k: v for k, v in new["population"].items() if k != "propagation"}):
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
            names = list(dict.fromkeys(json.loads(x)["name"] for x in removed + added))   # a changed one once
            problems.append(f"environment.{key} before step {at_step} changed ({', '.join(names)}): "
                            f"a branch may only add or change interventions at steps >= {at_step}"
                            + ("; a broadcast that starts before the fork keeps its ttl and content, which its "
                               "replayed events row records" if key == "broadcasts" else ""))
    return problems


def check_fork_step(parent: dict, at_step: int, n_steps: int) -> None:
    """Refuse a fork step the parent cannot replay up to, in words that say which steps can be forked:
    a branch replays the parent's steps ``1..at_step - 1`` and decides from ``at_step`` to ``n_steps``
    (the parent's, or ``--steps``). ``parent["last_step"]`` is the parent's last step on disk."""
    run, done = parent["run_id"], max(parent["last_step"] if parent["last_step"] is not None else -1, 0)
    if parent["status"] == "completed" and parent.get("end_reason"):
        if at_step > done:      # it ended with its process: forking after its end would replay it, decide nothing
            raise BranchRefused(f"run {run} ended at step {done} ({parent['end_reason']}), so it is complete only "
                                f"up to step {done}: a branch of it forks at a step inside it, 1..{done}, not "
                                f"{at_step} (after its end the branch would replay it and decide nothing)")
        return
    if at_step - 1 > done:
        if parent["status"] == "completed":
            raise BranchRefused(f"--at-step {at_step} is after run {run}'s last step {done}: a branch replays the "
                                f"parent's steps before the fork, so it forks at 1..{done + 1} (at {done + 1} "
                                "with --steps beyond it, to run the branch longer)")
        raise BranchRefused(f"parent run {run} is {parent['status']} and complete only up to step {done}; "
                            f"a branch at step {at_step} needs steps 1..{at_step - 1}")
    if at_step > n_steps:
        raise BranchRefused(f"--at-step {at_step} is after the branch's last step {n_steps}: nothing would be "
                            f"decided (give --steps N, N >= {at_step}, to run the branch longer than its parent)")


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
    return load_study(root, seed=sim["seed"], steps=sim["n_steps"] if steps is None else steps,
                      rounds=sim["interaction_rounds"],
                      params={**recorded, **(params or {})})


def _payload_types(root: Path, run_id: str, rounds: int = 1) -> dict[str, str]:
    """The stored payload fields' kinds of the actions a replay reads: the panel's (one round a step), or with
    several rounds ``round_actions``' (``round_payload``: every round's kinds, a post's ``content`` too, which
    the panel's final-round actions may not have)."""
    types = RunFiles(StudyLayout(root).data, run_id).load_types() or {}
    return types.get("round_payload" if rounds > 1 else "payload", {})


def _payload(value: dict | None, json_fields: set[str], own: frozenset[str] = frozenset()) -> dict:
    """A stored payload struct as the dict the study returned. The struct holds every kind's fields, so a
    null one is absent, unless it is one of the kind's ``own`` fields (filled in some action of that kind
    in the run): then the study returned it as None, and ``apply`` reading ``payload["wait"]`` finds it."""
    if not value:
        return {}
    return {k: (orjson.loads(v) if k in json_fields and v is not None else v) for k, v in value.items()
            if v is not None or k in own}


def round_sources(con, parent: dict, until: int) -> list[tuple[dict, int, int]]:
    """``[(run row, first step, last step)]``, latest first, whose stored rounds give the parent's actions of
    steps ``1..until``: a branch stores every round of its steps (a branch of desim 0.2.0 or earlier only those
    of the steps it decided, from its fork on), and those of
    the steps it replayed are its own parent's, and so on up the branches."""
    segments, run, hi = [], parent, until
    while hi >= 1:
        fork = run.get("fork_step") if run.get("kind") == "branch" and run.get("parent_run_id") else None
        if fork is not None and fork > 1 and not _rounds_cover(con, run["run_id"], 1, min(hi, fork - 1)):
            if fork <= hi:
                segments.append((run, fork, hi))
                hi = fork - 1
            run = _parent_row(con, run["parent_run_id"])
            continue
        segments.append((run, 1, hi))
        break
    return segments


def _unrecorded_rounds(con, run: dict, until: int) -> tuple[dict, int, int] | None:
    """The first ``(run, first step, last step)`` of :func:`round_sources` whose rounds were not all stored
    (``record_rounds`` off): steps 1..``until`` of ``run`` cannot be replayed round by round. None if they can."""
    return next(((r, lo, hi) for r, lo, hi in round_sources(con, run, until)
                 if not _rounds_cover(con, r["run_id"], lo, hi)), None)


def _rounds_cover(con, run_id: str, lo: int, hi: int) -> bool:
    """Whether ``run_id`` stored every round of steps ``lo..hi`` (``record_rounds``)."""
    return queries.recorded_round_steps(con, run_id, hi + 1) - queries.recorded_round_steps(con, run_id, lo) \
        == hi - lo + 1


def _replay_actions(con, parent: dict, until: int, rounds: int, columnar_ids: list[str] | None,
                    root: Path | None = None) -> dict[int, list]:
    """The parent's actions for steps 1..until, one entry per round, tagged ``replay`` (with several rounds
    a step, from the runs :func:`round_sources` names)."""
    if until < 1:           # a branch at step 1 replays nothing
        return {}
    segments = round_sources(con, parent, until) if rounds > 1 else [(parent, 1, until)]
    if columnar_ids is not None:
        return _columnar_replay(con, segments, until, rounds, columnar_ids)
    replay = {step: [[] for _ in range(rounds)] for step in range(1, until + 1)}
    for run, lo, hi in segments:
        types = _payload_types(root, run["run_id"], rounds) if root is not None else {}
        json_fields = {k for k, t in types.items() if t == "json"}
        own = {kind: frozenset(names) for kind, names in queries.payload_fields_by_kind(
            con, run["run_id"], list(types), "panel" if rounds == 1 else "round_actions").items()}
        for step, r, agent_id, kind, payload, rationale in queries.stored_actions(con, run["run_id"], hi, rounds):
            if step >= lo:
                replay[step][r].append(Action(agent_id=agent_id, step=step, kind=kind,
                                              payload=_payload(payload, json_fields, own.get(kind, frozenset())),
                                              rationale=rationale or "", source="replay"))
    return replay


def _columnar_replay(con, segments: list[tuple[dict, int, int]], until: int, rounds: int,
                     ids: list[str]) -> dict[int, list]:
    """Columnar replay: the stored typed payloads come back as columns in one query per run."""
    parts = []
    for run, lo, hi in segments:
        part = queries.stored_action_columns(con, run["run_id"], hi, rounds, ids)
        parts.append(part if lo == 1 else part.filter(pa.array(part.column("step").to_numpy() >= lo)))
    table = parts[0] if len(parts) == 1 else pa.concat_tables(parts[::-1], promote_options="default")
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


def _whole_number(name: str, value: Any) -> int:
    """A step argument from Python as an int: an int or a numpy integer, not text, a float or a bool (whose
    comparisons with steps would fail later with a bare TypeError, or count ``True`` as step 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise BranchRefused(f"{name} must be an int (a step), got {value!r} ({type(value).__name__})")
    return int(value)


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
    at_step = _whole_number("at_step", at_step)
    steps = None if steps is None else _whole_number("steps", steps)
    if at_step < 1:
        raise BranchRefused(f"--at-step must be 1 or more, got {at_step} (a branch at step 1 replays nothing: it runs "
                            "the parent's configuration from step 0 with the study's current interventions)")
    if steps is not None and steps < 1:
        raise BranchRefused(f"--steps must be 1 or more, got {steps}")
    check_db_path(db_path)
    if run_id is not None:
        check_new_run_id(run_id, root, db_path)
    if spec is not None and (params or steps):
        raise ValueError("give either spec or params/steps, not both")
    layout = StudyLayout.at(parent_db) if parent_db else StudyLayout(root)
    if not layout.db.exists():
        raise BranchRefused(f"{layout.db} does not exist: run the study before branching it")
    with open_store(layout) as con:
        parent = _parent_row(con, from_run)
        spec = spec or inherit_spec(root, parent, params, steps)
        check_branchable(con, layout, parent, spec, at_step, root)
        rounds = rounds_run(parent["interaction_rounds"])
        with gc_paused(manage_gc):
            run = assemble(spec, run_id)
        replay = _replay_actions(con, parent, at_step - 1, rounds, run.ids if run.columnar else None, root)
    sink = sink_for(spec, db_path, kind="branch", parent_run_id=from_run, fork_step=at_step, note=note,
                    sweep_id=sweep_id)
    result = record(run, sink, replay, on_step=on_step, manage_gc=manage_gc, handle_signals=handle_signals)
    if at_step > 1 and db_path is None and parent_db is None and result.steps_done >= at_step - 1:
        differs = replay_mismatch(root, from_run, result.run_id, at_step - 1)
        if differs:
            result.warnings.append(differs)
    return result


def check_branchable(con, layout: StudyLayout, parent: dict[str, Any], spec: StudySpec, at_step: int,
                     root: Path) -> None:
    """Refuse (``BranchRefused``) a branch of the run ``parent`` (its ``runs`` row; its ``last_step`` is
    brought up to date) at ``at_step`` as ``spec``: the parent not complete up to ``at_step - 1``, a
    multi-round parent whose rounds were not all stored, or a change other than interventions at steps >=
    ``at_step``. What ``desim branch``, a warm start and ``desim validate`` of a warm start check alike."""
    from_run = parent["run_id"]
    parent_config = json.loads(parent["config"])
    parent["last_step"] = last_step(layout, from_run, parent["last_step"], parent["status"])
    check_fork_step(parent, at_step, spec.simulation.n_steps)
    rounds = rounds_run(parent["interaction_rounds"])
    if at_step > 1 and (rounds != 1 or spec.rounds != 1):       # a branch at step 1 replays nothing
        if not parent_config["simulation"].get("record_rounds"):
            raise BranchRefused(
                f"interaction_rounds is {max(rounds, spec.rounds)}: a branch replays stored actions, but the "
                "panel keeps only each step's final-round actions, so a multi-round step cannot be "
                "reproduced from it. Re-run the study from step 0, or run the parent with "
                "record_rounds: true so that every round is stored and can be replayed.")
        missing = _unrecorded_rounds(con, parent, at_step - 1)
        if missing:
            run, lo, hi = missing
            raise BranchRefused(f"run {run['run_id']} did not store every round of steps {lo}..{hi}, "
                                f"which a branch of {from_run} at step {at_step} replays")
    problems = check_code(parent, root) + check_branch_changes(parent_config, spec, at_step)
    if problems:
        raise BranchRefused(f"a branch at step {at_step} may only add or change interventions at steps >= "
                            f"{at_step}; this one changes:\n  - " + "\n  - ".join(problems))


def replay_mismatch(study_root: str | Path, parent_id: str, branch_id: str, step: int) -> str | None:
    """What differs between a branch's replayed ``step`` and its parent's (None when the rows are the same).

    A replayed step runs ``advance_to``, ``apply`` and ``end_step`` with the parent's stored actions, but
    neither ``observe_batch`` nor ``decide_batch``: state a study sets there (what an agent saw), or
    randomness drawn outside ``ctx.rng``, is not reproduced, and then the steps before the fork are not the
    parent's rows, which the pairing of control and treatment assumes. One step is read from each run (the
    last replayed one, where a difference that grows has grown most)."""
    try:
        # both runs in one read: one set of columns (a payload field the parent fills only after the fork is a
        # column of both, null in the branch's replayed step as in the parent's)
        both = StudyData(study_root).panel([parent_id, branch_id], steps=step)
    except StoreError as e:
        return f"could not compare the branch's replayed step {step} with its parent's: {e}"
    run = both.column("run_id")
    parent, child = (both.filter(pc.equal(run, r)) for r in (parent_id, branch_id))
    # the branch's replayed actions are tagged 'replay'
    skip = {"run_id", "action_source"}
    names = [c for c in parent.column_names if c not in skip]
    problems: list[str] = []
    if parent.num_rows != child.num_rows or parent.column("agent_id") != child.column("agent_id"):
        problems.append(f"agents ({parent.num_rows} rows in the parent, {child.num_rows} in the branch)")
    else:
        ids = parent.column("agent_id").to_pylist()
        for c in names:
            if parent.column(c).equals(child.column(c)):
                continue
            old, new = parent.column(c).to_pylist(), child.column(c).to_pylist()
            rows = [i for i, (x, y) in enumerate(zip(old, new)) if not _same(x, y)]
            if rows:
                i = rows[0]
                problems.append(f"{c} in {len(rows)} of {len(old)} rows (agent {ids[i]}: {old[i]!r} -> {new[i]!r})")
    try:        # messages too: a study that posts from observe_batch posts nothing in a replayed step
        with open_store(StudyLayout(study_root)) as con:
            counts = queries.step_message_counts(con, [parent_id, branch_id], step)
    except StoreError:
        counts = {}
    if counts and counts[parent_id] != counts[branch_id]:
        problems.append(f"messages ({counts[parent_id]} in the parent, {counts[branch_id]} in the branch)")
    if not problems:
        return None
    return (f"the branch's replayed step {step} is not its parent's: {'; '.join(problems)}. A replayed step runs "
            "advance_to, apply and end_step with the parent's actions, not observe_batch or decide_batch, so "
            "state the study keeps there, messages it posts there, or randomness drawn outside ctx.rng, is not "
            "replayed; the steps before the fork then do not pair with the parent's (keep such state, and the "
            "posts, in apply or end_step)")


def _same(x: Any, y: Any) -> bool:
    return x == y or (isinstance(x, float) and isinstance(y, float) and x != x and y != y)


def _own_replay(con, row: dict, run, stored: int, root: Path) -> dict[int, list] | None:
    """The run's own stored actions of steps 1..``stored``, when a resumed run must replay them rather than
    re-execute them: an LLM decision without a reply cache would ask again, pay twice, and get other replies.
    None otherwise (re-executing reproduces the steps: rules from the seed, LLM replies from the cache), or when
    a multi-round run did not record its rounds (the resume then refuses at the first prompt it would ask)."""
    replays = model_hook(run.decision, "resume_replays")     # a decision that cannot ask again says so
    if stored < 1 or replays is None or not replays():
        return None
    rounds = rounds_run(row["interaction_rounds"])
    if rounds > 1 and _unrecorded_rounds(con, row, stored):
        return None
    return _replay_actions(con, row, stored, rounds, run.ids if run.columnar else None, root)


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
            replay = _replay_actions(con, parent, row["fork_step"] - 1, rounds_run(parent["interaction_rounds"]),
                                     run.ids if run.columnar else None, root)
        # what is on disk: a killed run's row still says running, its steps are in its step files
        stored = max(last_step(layout, run_id, row["last_step"], row["status"]), 0)
        own = _own_replay(con, row, run, stored, root)
        if own:
            replay = {**(replay or {}), **own}
        run.ctx.stored_until = stored       # re-executed ones: an LLM decision reuses its replies or refuses
        if stored >= 1 and model_hook(run.decision, "resume_replays"):  # and leaves to the rule what it did then
            run.ctx.stored_unanswered = queries.unanswered_prompts(con, run_id, stored)
    sink = sink_for(spec, None, kind=row["kind"], parent_run_id=row["parent_run_id"], fork_step=row["fork_step"],
                    resume=True)
    return record(run, sink, replay, on_step=on_step, manage_gc=manage_gc, handle_signals=handle_signals)
