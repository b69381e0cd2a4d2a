"""Comparing two runs: treatment minus control, per step and, for paired runs,
per agent.

Metrics are compared step by step. State fields are compared agent by agent
(the same ``agent_id`` at the same step), which is meaningful when both runs
share a population: a branch and its parent, or two versions of one study.

Only agents present in both runs are paired; :func:`population_notes` says
when the runs' agents differ, or the runs come from different versions or
seeds, because pairing agents of one id across two populations compares
strangers.

Both read the store's paired macros (``paired_metrics``, ``paired_panel``), so a
run that ended with its process (``stop_when``, ``ctx.end_run``) holds its last
state against the other run's later steps, as in ``desim effect``;
:func:`held_notes` says so in words.

Runs whose agents die (a boolean state field ``alive``, Sugarscape) are compared
over living agents, the store's rule (``desim.store.states``): each run's mean
and category shares over its own living agents, per-agent differences over the
agents alive in both runs; :func:`dead_notes` says so, with the counts.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from desim.jsontext import parsed
from desim.store import Catalogue, StudyLayout, open_store, queries
from desim.store import states as state_reads
from desim.versions import diff_configs, file_changes


def compare(study_root: str | Path, control: str, treatment: str,
            states: list[str] | None = None) -> dict[str, Any]:
    """Differences of ``treatment`` minus ``control``.

    Returns ``{"metrics": [{step, name, control, treatment, diff}],
    "paired": [{step, field, n, mean_diff, sd_diff, min_diff, max_diff}],
    "categorical": [{step, field, n, differ, shares: {category: {treatment, control, diff}}}],
    "held": [{run_id, role, last_step, end_reason, held_to}], "skipped": [{field, reason}],
    "fork_step": int | None, "population": {both, control_only, treatment_only}, "notes": [str]}``
    (``notes``: :func:`population_notes`, then :func:`dead_notes`). ``states`` defaults to the study's
    ``display_states``; numeric fields are paired by their difference, categorical ones (text, booleans) by the
    share of agents that differ and the share of agents in each category under treatment and control. A run in
    ``held`` ended with its process: its last values stand for it at the other run's later steps.

    When the runs' agents die (a boolean ``alive``), every field but ``alive`` is compared over living agents
    (``desim.store.states``): ``n``, the differences and ``differ`` over the agents alive in both runs, each
    category's ``treatment`` and ``control`` share over that run's own living agents (None when it has none);
    such a field's rows (every step, ``n`` may be 0) also carry ``treatment_living``, ``control_living`` (living
    agents), ``dead_treatment_only``, ``dead_control_only``, ``dead_both`` (the agents left out of the
    differences), and a numeric field's ``treatment_mean`` and ``control_mean``, each over its run's living agents.
    """
    layout = StudyLayout(study_root)
    with open_store(layout) as con:
        runs = {r["run_id"]: r for r in Catalogue(con).runs(run_ids=[control, treatment])}
        for run_id in (control, treatment):
            if run_id not in runs:
                raise ValueError(f"no run '{run_id}' in {layout.db}")
            if why := unrecorded(runs[run_id]):
                raise ValueError(why)
        population, notes = population_notes(con, runs[control], runs[treatment])
        if states is None:
            states = json.loads(runs[treatment]["config"])["study"].get("display_states", [])
        metrics = queries.metric_comparison(con, control, treatment)
        held = held_runs(con, treatment, control)
        paired, categorical, skipped = [], [], []
        for name in states:
            kind = (state_reads.field_kind(con, treatment, name)
                    or state_reads.field_kind(con, control, name))
            if kind is None:
                skipped.append({"field": name, "reason": f"neither run's panel has a state field '{name}'"
                                                         f"{_known_fields(con, treatment, control)}"})
            elif "JSON" in (state_reads.stored_type(con, treatment, name), state_reads.stored_type(con, control, name)):
                skipped.append({"field": name, "reason": f"'{name}' holds JSON (lists or dicts): it has no difference "
                                                         "and its values are not categories; compare it in SQL"})
            elif kind == "numeric":
                paired += [{"step": r["step"], "field": name, **{k: v for k, v in r.items() if k != "step"}}
                           for r in state_reads.paired_summary(con, treatment, control, name)]
            else:
                categorical += _categories(con, treatment, control, name)
        notes += dead_notes(paired, categorical)
    fork = runs[treatment]["fork_step"] if runs[treatment]["parent_run_id"] == control else None
    return {"control": control, "treatment": treatment, "fork_step": fork, "metrics": metrics, "paired": paired,
            "categorical": categorical, "held": held, "skipped": skipped, "population": population,
            "notes": notes}


def _known_fields(con, treatment: str, control: str) -> str:
    """`` (their state fields: a, b)``, the fields either run stored: a misspelt ``--state`` is skipped (the
    other fields are still compared) and named, with what it may have meant."""
    names = list(dict.fromkeys(state_reads.field_names(con, treatment) + state_reads.field_names(con, control)))
    return f" (their state fields: {', '.join(names)})" if names else " (neither run stored a state field)"


def unrecorded(run: dict[str, Any]) -> str | None:
    """Why a run has nothing to compare or report, or None: it failed before its first step (at set-up),
    said with its error from the runs table, since any other message (a missing state field) misleads."""
    if run["status"] != "failed" or (run.get("last_step") if run.get("last_step") is not None else -1) >= 0:
        return None
    error = (run.get("error") or "no error was recorded").strip().splitlines()[0]
    return f"run {run['run_id']} failed before its first step, so it recorded nothing: {error}"


def population_notes(con, control: dict[str, Any], treatment: dict[str, Any]) -> tuple[dict[str, int], list[str]]:
    """How many agents are in both runs and in one only (``runs`` rows of the control and the treatment),
    and a sentence for each reason the pairs may not be the same agents: the agent sets differ, or (for
    runs that are not a branch and its parent) the study's version or the seed differ."""
    c_ids = set(queries.agent_ids(con, control["run_id"]))
    t_ids = set(queries.agent_ids(con, treatment["run_id"]))
    population = {"both": len(c_ids & t_ids), "control_only": len(c_ids - t_ids),
                  "treatment_only": len(t_ids - c_ids)}
    notes = []
    if c_ids != t_ids:
        notes.append(f"the runs' agents differ: {population['both']} agents are in both, "
                     f"{population['control_only']} only in control {control['run_id']}, "
                     f"{population['treatment_only']} only in treatment {treatment['run_id']}; "
                     f"per-agent differences pair only the {population['both']} agents in both.")
    # the same agents for sure: one run is a branch of the other, or both branch from one run (a branch has
    # its parent's seed and code; its interventions, which make it a version of its own, are the question).
    # A new version's first run names the run before it as its parent too, with other code and seed: that
    # is no reason to trust the pairs.
    related = _branch_root(con, control) == _branch_root(con, treatment)
    if not related and control.get("version_id") != treatment.get("version_id"):
        notes.append(f"the runs come from different versions of the study (control {control.get('version_id')}, "
                     f"treatment {treatment.get('version_id')}; desim runs shows what changed): agents of "
                     f"one id may not be alike in both.")
    if not related and control.get("seed") != treatment.get("seed"):
        seeds = f"the runs have different seeds (control {control.get('seed')}, treatment {treatment.get('seed')})"
        differs = [] if queries.same_network(con, control["run_id"], treatment["run_id"]) else [
            "their networks differ (drawn at random from the seed)"]
        starts = queries.initial_states_differing(con, control["run_id"], treatment["run_id"])
        if starts:
            differs.append(f"{starts} of the {population['both']} agents in both start in another state")
        if differs:
            notes.append(f"{seeds}: {' and '.join(differs)}, so agents of one id may not be alike in both.")
        else:       # what the store holds of them is the same; attributes a population draws are not stored
            notes.append(f"{seeds}, with the same network and initial states: agents of one id start alike, "
                         "unless the population draws attributes at random that the panel does not hold.")
    return population, notes


def _branch_root(con, run: dict[str, Any]) -> str:
    """The run ``run`` branches from, through branches of branches: itself when it is no branch."""
    seen = set()
    while run.get("kind") == "branch" and run.get("parent_run_id") and run["run_id"] not in seen:
        seen.add(run["run_id"])
        parent = Catalogue(con).run(run["parent_run_id"])
        if parent is None:
            break
        run = parent
    return run["run_id"]


def held_runs(con, treatment: str, control: str) -> list[dict[str, Any]]:
    """``queries.held_runs`` with each run's role (``treatment`` or ``control``)."""
    return [{**h, "role": "treatment" if h["run_id"] == treatment else "control"}
            for h in queries.held_runs(con, treatment, control)]


def _categories(con, treatment: str, control: str, name: str) -> list[dict[str, Any]]:
    """Per step of a categorical field: the pairs, the share of agents that differ, each category's shares
    (and, for runs whose agents die, the living and dead counts: :func:`compare`)."""
    differ = state_reads.paired_changed_share(con, treatment, control, name)
    shares: dict[int, dict[str, dict[str, float]]] = {}
    for step, category, t, c in state_reads.paired_category_shares(con, treatment, control, name):
        shares.setdefault(step, {})[category] = {"treatment": t, "control": c,
                                                 "diff": None if t is None or c is None else t - c}
    rows = [{"step": step, "field": name, "n": n, "differ": share, "shares": shares.get(step, {})}
            for step, share, n in zip(differ["steps"], differ["changed_share"], differ["pairs"])]
    if differ["leaves_out_dead"]:
        counts = state_reads.DEAD_KEYS
        for i, row in enumerate(rows):
            both = row["n"]
            row["treatment_living"] = both + differ["dead_control_only"][i]
            row["control_living"] = both + differ["dead_treatment_only"][i]
            row.update({k: differ[k][i] for k in counts})
    return rows


def dead_notes(paired: list[dict[str, Any]], categorical: list[dict[str, Any]]) -> list[str]:
    """One sentence per field compared over living agents (rows of :func:`compare` that carry the dead counts):
    the rule, and at the last step how many agents each part counts and each run's mean over its living."""
    notes = []
    for rows in (paired, categorical):
        for name in dict.fromkeys(r["field"] for r in rows if "dead_both" in r):
            last = [r for r in rows if r["field"] == name][-1]
            means = ""
            if "treatment_mean" in last:
                means = (f"; mean over the living: treatment {_num(last['treatment_mean'])} "
                         f"({last['treatment_living']} agents), control {_num(last['control_mean'])} "
                         f"({last['control_living']})")
            notes.append(
                f"'{name}' is compared over living agents (alive = false left out, as in the report's "
                f"distributions): each run's {'mean' if 'treatment_mean' in last else 'category shares'} over its "
                f"own living agents, the per-agent differences ({'n, mean_diff' if means else 'n, differ'}) only "
                f"over the agents alive in both runs. At step {last['step']}: {last['n']} alive in both, "
                f"{last['dead_treatment_only']} dead in the treatment only, {last['dead_control_only']} in the "
                f"control only, {last['dead_both']} in both{means}. Survival itself is 'alive', paired over "
                "every agent.")
    return notes


def _num(x: float | None) -> str:
    return "none (no living agent)" if x is None else f"{x:.6g}"


def held_notes(held: list[dict[str, Any]]) -> list[str]:
    """One sentence per run of ``held`` (``compare``'s rows): it ended at step s (why) and its last step is
    held for the other run's later steps."""
    notes = []
    for h in held:
        who = f"{h['role']} {h['run_id']}" if h.get("role") else h["run_id"]
        why = f" ({h['end_reason']})" if h.get("end_reason") else ""
        span = (f"step {h['held_to']}" if h["held_to"] == h["last_step"] + 1
                else f"steps {h['last_step'] + 1}-{h['held_to']}")
        notes.append(f"{who} ended at step {h['last_step']}{why}; its last step is held for {span}: "
                     f"a run that ended with its process is paired as it ended.")
    return notes


def agent_differences(study_root: str | Path, control: str, treatment: str, name: str) -> list[dict[str, Any]]:
    """Per agent and step: the state field in both runs and the difference (for plots); for runs whose agents
    die, None in a run where the agent is dead (``desim.store.states.paired_values``)."""
    with open_store(StudyLayout(study_root)) as con:
        return [{"step": step, "agent_id": agent, "control": c, "treatment": t, "diff": d}
                for step, agent, c, t, d in state_reads.paired_values(con, treatment, control, name)]


# --- two versions: what changed in the files and the code ---------------------------------------------------
def version_changes(study_root: str | Path, newer: str, older: str | None = None) -> dict[str, Any]:
    """What changed from version ``older`` to version ``newer`` (each a version id or a run id, meaning its
    run's version; ``older`` defaults to ``newer``'s parent version): the configuration's leaf differences
    (``config``: ``[{path, old, new}]``) and each file added, removed or edited (``files``: ``[{path, change,
    diff}]``, ``diff`` a unified diff of the texts when both were kept, else None, with ``why``).

    When the two are runs (or ``newer`` is a branch, compared with its parent run), ``parameters`` holds the
    differences of the values the runs used (``[{path, old, new}]``): a branch's or a run's ``--set`` changes
    no file, so the versions alone would say "no change" of a branch that moved its campaign a week."""
    layout = StudyLayout(study_root)
    with open_store(layout) as con:
        catalogue = Catalogue(con)

        def version_of(key: str, role: str) -> dict[str, Any]:
            run = catalogue.run(key)
            version = catalogue.version(run["version_id"] if run and run.get("version_id") else key)
            if version is None:
                raise ValueError(f"{role} '{key}' is neither a run nor a version in {layout.db}")
            return version

        new = version_of(newer, "version")
        new_run = catalogue.run(newer)
        old_run = catalogue.run(older) if older is not None else \
            catalogue.run(new_run["parent_run_id"]) if new_run and new_run.get("parent_run_id") else None
        if older is None:
            if not new["parent_version_id"]:
                raise ValueError(f"version {new['version_id']} is the study's first: give the version or run to "
                                 "compare it with")
            older = new["parent_version_id"]
        old = version_of(older, "version")
        old_code, new_code = (json.loads(v["code"]) if v.get("code") else {} for v in (old, new))
        texts = catalogue.code_texts(sorted(set(old_code.values()) | set(new_code.values())))
    config = diff_configs(json.loads(old["config"]), json.loads(new["config"]))
    parameters = []
    if new_run and old_run:
        parameters = diff_configs(*(parsed(r["parameters"], {}) for r in (old_run, new_run)))
    return {"older": old["version_id"], "newer": new["version_id"], "config": config, "parameters": parameters,
            "files": file_changes(old_code, new_code, texts, old["version_id"], new["version_id"])}
