"""Paired effects: what an intervention does, with an interval.

One branch against its parent is n = 1: it says what happened in one world,
not how sure we are. :func:`run_effect` takes R control runs of the study (the
replicates a sweep of the same parameters would run, with the same derived
seeds, reused when the store already holds them), branches each at step ``T``
with the treatment (``--set`` values of parameters the interventions use), and
pairs every branch with its control. Each pair shares its seed, population and steps ``1..T-1``
exactly, so the difference treatment - control isolates the intervention; the
R differences give a mean and a 95 % interval (Student t, R - 1 degrees of
freedom) per step and metric (:func:`effect_table`), and per step and state
field a per-agent paired summary (the mean over agents of the difference, its
mean absolute value, the share of agents that differ).

Effects are recorded in the ``effects`` and ``effect_pairs`` tables, so
``desim report S --effect ID`` and the dashboard can show them later. They
are recorded once every check has passed and before any run, so an
interrupted effect keeps its completed runs and ``resume=`` finishes it.
"""
from __future__ import annotations

import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from desim.jsontext import parsed
from desim.errors import StudyError, shell_arg
from desim.experiments.branches import check_branch_changes, refuse_resume_after_edit
from desim.experiments.recording import as_root
from desim.experiments.sweep.checks import ctrl_c_stays_ctrl_c, refuse_unrunnable, unknown_names
from desim.experiments.sweep.executors import RunsInProcessWarning  # noqa: F401 (what desim.effect may warn with)
from desim.experiments.sweep.executors import check_executor, check_workers, make_executor
from desim.experiments.sweep.merge import WaitFn, keep_unmerged_calls, merge_run, writing
from desim.experiments.sweep.plan import plain, seed_for
from desim.experiments.sweep.summary import RunsFailedWarning  # noqa: F401 (what desim.effect warns with)
from desim.experiments.sweep.summary import describe, left_out_note, metric_bounds, warn_runs_failed
from desim.experiments.sweep.worker import RunOutcome, RunTask
from desim.store.files import remove_db
from desim.store.health import claim_folder as claim
from desim.store.health import release_folder
from desim.store import Catalogue, StoreError, StudyLayout, open_store, queries
from desim.store import states as state_reads
from desim.study.files import StudySpec, load_study, read_study_file
from desim.study.params import typed_value
from desim.study.refs import study_code
from desim.versions import SIMULATION_FILE, code_hash


SHARE_DIFFERENCE = (-1.0, 1.0)   # treatment share - control share: where every share difference lies


class EffectError(StudyError, ValueError):
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

    @property
    def completed(self) -> int:
        """Pairs whose control and branch both completed: what the summaries count."""
        return sum(1 for p in self.pairs if p["control_status"] == p["treatment_status"] == "completed")


ProgressFn = Callable[[str, RunOutcome, int, int], None]
StartFn = Callable[[str, int, int], None]


# --- planning --------------------------------------------------------------------------

def _typed(spec, values: dict[str, Any], what: str) -> dict[str, Any]:
    """The treatment's or the controls' values as the study's parameters take them: a numpy scalar as the
    Python value of its kind, then :func:`desim.study.params.typed_value` (the one rule for a parameter's
    type), so what the runs record and derive their seeds from is what the model runs with."""
    declared = spec.simulation.parameters
    out = {}
    for name, value in (values or {}).items():
        if name not in declared:
            raise EffectError(f"{what} {name}: {spec.root / SIMULATION_FILE} declares no "
                              f"parameter '{name}' (declared: {', '.join(sorted(declared)) or 'none'})")
        try:
            out[name] = typed_value(plain(value), declared[name])
        except ValueError as e:
            raise EffectError(f"{what} {name}: {e}") from None
    return out


def _refuse_zero_by_construction(treat_p: dict[str, Any], control_p: dict[str, Any], control_given: dict) -> None:
    """A treatment that equals the control makes every branch replay its control: the effect is zero by
    construction, an interval of nothing at the cost of 2R runs."""
    if not treat_p:
        raise EffectError("give the treatment with --set NAME=VALUE (a parameter the interventions from the fork "
                          "on use): without it the branches run their controls' own interventions and the effect "
                          "would be zero by construction")
    if all(control_p[k] == v for k, v in treat_p.items()):
        whose = ("--control-set gives the controls the same" if set(treat_p) & set(control_given or {})
                 else "the study's value, which the controls run with")
        raise EffectError(f"--set {', '.join(f'{k}={v}' for k, v in treat_p.items())} is the controls' value too "
                          f"({whose}): the branches would replay their controls and the effect would be zero by "
                          "construction")


@dataclass
class _Effect:
    """What running (or resuming) an effect needs: its settings as recorded, and the study to run."""

    effect_id: str
    spec: StudySpec         # the study with the controls' parameters
    at_step: int
    treatment: dict[str, Any]
    control: dict[str, Any]
    steps: int | None
    label: str              # the branches' version note


def _new(root: Path, at_step: int | None, treatment: dict[str, Any] | None, replicates: int,
         control: dict[str, Any] | None, steps: int | None, seed: int | None, note: str | None,
         metrics: list[str] | None, states: list[str] | None, on_wait: WaitFn | None,
         executor: tuple[str, int | None, str | None]) -> _Effect:
    """Check everything (``executor``: the backend, workers and address the runs will use), then record the
    effect and its pairs (controls already in the store reused), so an interrupted effect can be resumed by
    its id."""
    if replicates < 2:
        raise EffectError(f"replicates must be at least 2 for an interval, got {replicates}")
    if at_step is None or at_step < 1:
        raise EffectError("--at-step must be 1 or more")
    base = load_study(root, steps=steps, seed=seed)
    if at_step > base.simulation.n_steps:
        raise EffectError(f"--at-step {at_step} is after the last step ({base.simulation.n_steps}): the branches "
                          "would replay their controls and the effect would be zero by construction")
    control_p = {**base.simulation.parameters, **_typed(base, control or {}, "--control-set")}
    treat_p = _typed(base, treatment or {}, "--set")
    _refuse_zero_by_construction(treat_p, control_p, control or {})
    if at_step > 1 and base.rounds > 1 and not base.simulation.record_rounds:     # at step 1 nothing is replayed
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
    refuse_unrunnable(specs[0], EffectError, "the controls")        # as desim run would, before anything is kept
    refuse_unrunnable(probe, EffectError, "the treatment")
    wrong = unknown_names(root, control_p, metrics, states, seed=seeds[0])
    if wrong:
        raise EffectError(wrong)
    backend, workers, address = executor
    check_executor(backend, root, workers, address, "desim.effect", EffectError, stacklevel=3)
    code = study_code(base)
    effect_id = f"ef{uuid.uuid4().hex[:8]}"
    label = ", ".join(f"{k}={v}" for k, v in sorted(treat_p.items()))
    with writing(StudyLayout(root), on_wait) as con:
        catalogue = Catalogue(con)
        controls = [catalogue.reusable_control(s.resolved(), code_hash(code)) for s in specs]
        pairs = [{"replicate": rep, "seed": s, "control_run_id": c or f"{effect_id}-c{rep}",
                  "treatment_run_id": f"{effect_id}-t{rep}", "reused": c is not None}
                 for rep, (s, c) in enumerate(zip(seeds, controls))]
        con.begin()         # the effect and all its pairs, or nothing
        try:
            catalogue.record_effect({"effect_id": effect_id, "study_id": base.id, "at_step": at_step,
                                     "treatment": treat_p, "control": control_p, "replicates": replicates,
                                     "base_seed": base.simulation.seed, "n_steps": n_steps, "note": note}, pairs)
            con.commit()
        except BaseException:
            con.rollback()
            raise
    return _Effect(effect_id, specs[0], at_step, treat_p, control_p, steps,
                   note or f"effect {effect_id}: {label} from step {at_step}")


def _effect_row(catalogue: Catalogue, effect_id: str, layout: StudyLayout, why: str = "") -> dict[str, Any]:
    """The recorded effect ``effect_id``, or an error listing the effects the store has."""
    row = catalogue.effect(effect_id)
    if row is None:
        known = [e["effect_id"] for e in catalogue.effects()]
        raise EffectError(f"{why}no effect '{effect_id}' in {layout.db} (effects: {', '.join(known) or 'none'})")
    return row


def _recorded(root: Path, effect_id: str) -> _Effect:
    """A recorded effect, to run what it lacks with its own settings."""
    layout = StudyLayout(root)
    if not layout.db.exists():
        raise EffectError(f"cannot resume '{effect_id}': {layout.db} does not exist")
    with open_store(layout) as con:
        row = _effect_row(Catalogue(con), effect_id, layout, "cannot resume: ")
    treat_p, control_p = (parsed(row[k]) for k in ("treatment", "control"))
    spec = load_study(root, steps=row["n_steps"], seed=row["base_seed"], params=control_p)
    label = ", ".join(f"{k}={v}" for k, v in sorted(treat_p.items()))
    return _Effect(effect_id, spec, row["at_step"], treat_p, control_p, row["n_steps"],
                   row["note"] or f"effect {effect_id}: {label} from step {row['at_step']}")


def _run_tasks(root: Path, db: StudyLayout, tasks: list[RunTask], version_id: str, backend: str, workers: int | None,
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
                    except (StoreError, ValueError) as e:
                        outcome.status, outcome.error = "failed", "; ".join(
                            x for x in (outcome.error, f"could not merge the worker's file: {e}") if x)
            finally:
                if outcome.worker_file:
                    remove_db(outcome.worker_file, outcome.run_id)
            if outcome.status != "completed":
                errors[outcome.run_id] = outcome.error or outcome.status
            if on_run:
                on_run(phase, outcome, done, len(tasks))


def _hold_ended(pairs: list[dict[str, Any]], effect: _Effect, db: StudyLayout,
                on_wait: WaitFn | None) -> list[dict[str, Any]]:
    """The pairs to branch: those whose control run ended with its process (``stop_when``, ``ctx.end_run``)
    before the fork step are held instead. Nothing is decided after such a run's end, and its steps up to the
    end are what a branch would replay, so the treatment would end where the control did, row for row: the
    pair's treatment is its control, a zero difference at every step (and its last values held, as for any run
    that ended early). A branch of it would be refused, and the effect could never complete."""
    left = []
    with writing(db, on_wait) as con:
        catalogue = Catalogue(con)
        for p in pairs:
            control = catalogue.run(p["control_run_id"])
            if (control and control["status"] == "completed" and control.get("end_reason")
                    and control["last_step"] < effect.at_step):
                catalogue.hold_pair(effect.effect_id, p["replicate"])
            else:
                left.append(p)
    return left


def ended_note(pairs: list[dict[str, Any]], n_steps: int) -> str | None:
    """In words, the completed runs of an effect that ended with their process before ``n_steps``
    (``stop_when``, ``ctx.end_run``): how many, why, and the last step any run reached. After its end a run's last
    values are held, the rule ``compare`` uses, so a per-step count or rate reads as if it went on."""
    ended: dict[str, tuple[int, str]] = {}
    for p in pairs:
        for arm in ("control", "treatment"):
            run, last, why = p[f"{arm}_run_id"], p.get(f"{arm}_last_step"), p.get(f"{arm}_end_reason")
            if p.get(f"{arm}_status") == "completed" and why and last is not None and last < n_steps:
                ended[run] = (last, why)
    if not ended:
        return None
    lasts = [last for last, _ in ended.values()]
    reasons = sorted({why for _, why in ended.values()})
    reached = max((p.get(f"{arm}_last_step") or 0) for p in pairs for arm in ("control", "treatment"))
    runs = {p[f"{arm}_run_id"] for p in pairs for arm in ("control", "treatment")}
    at = f"step {lasts[0]}" if min(lasts) == max(lasts) else f"steps {min(lasts)}-{max(lasts)}"
    return (f"{len(ended)} of the {len(runs)} runs ended with their process before step {n_steps}, at {at} "
            f"({'; '.join(reasons)}); the last step any run reached is {reached}. After its end a run's last "
            "values are held (as desim compare does), so a per-step count or rate of an ended run reads as if it "
            "went on.")


def held_pairs(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pairs whose treatment is their control (:func:`_hold_ended`)."""
    return [p for p in pairs if p["treatment_run_id"] == p["control_run_id"]]


def _complete(root: Path, effect: _Effect, workers: int | None, backend: str, address: str | None,
              on_start: StartFn | None, on_run: ProgressFn | None, on_wait: WaitFn | None) -> dict[str, str]:
    """Run the effect's controls and branches that have not completed (all of them for a new effect, but
    the reused controls); returns the errors of the runs that failed now."""
    db = StudyLayout(root)
    spec, effect_id = effect.spec, effect.effect_id
    code = study_code(spec)
    with writing(db, on_wait) as con:
        catalogue = Catalogue(con)
        version_id = catalogue.ensure_version(spec.id, spec.version_config(), kind="run", code=code, root=root)[0]
        pairs = catalogue.effect_pairs(effect_id)
        # a pair already branched (not a held one, whose treatment is its control) gives the branches' version
        branched = next((catalogue.run(p["treatment_run_id"]) for p in pairs
                         if p["treatment_status"] and p["treatment_run_id"] != p["control_run_id"]), None)
    for p in pairs:
        if p["control_status"] != "completed" and not p["control_run_id"].startswith(f"{effect_id}-c"):
            raise EffectError(f"control {p['control_run_id']} of effect {effect_id}, a run it reused, is "
                              f"{p['control_status'] or 'no longer in the store'}: run the effect anew")
    root_text = str(root.resolve())
    folder = db.effect_dir(effect_id)
    try:
        claim(folder, f"effect {effect_id}")
    except RuntimeError as e:
        raise EffectError(str(e)) from None
    errors: dict[str, str] = {}
    try:
        controls = [RunTask(root_text, None, p["control_run_id"], p["seed"], effect.control, effect.steps,
                            str(StudyLayout.worker_store(folder, p["control_run_id"]).resolve()),
                            f"effect {effect_id}: control {p['replicate']}")
                    for p in pairs if p["control_status"] != "completed"]
        todo = [p for p in pairs if p["treatment_status"] != "completed"]
        if on_start:
            on_start(effect_id, len(controls), len(todo))
        _run_tasks(root, db, controls, version_id, backend, workers, address, "control", on_run, on_wait, errors)
        todo = _hold_ended([p for p in todo if p["control_run_id"] not in errors], effect, db, on_wait)
        if not todo:
            return errors
        with writing(db, on_wait) as con:
            catalogue = Catalogue(con)
            branch_version = branched["version_id"] if branched else catalogue.ensure_version(
                spec.id, spec.version_config(), kind="branch", code=code, parent_run_id=todo[0]["control_run_id"],
                fork_step=effect.at_step, note=effect.label, root=root)[0]
        branches = []
        for p in todo:
            extract = StudyLayout.parent_extract(folder, p["control_run_id"])
            remove_db(extract)
            with writing(db, on_wait) as con:
                Catalogue(con).copy_for_branch(p["control_run_id"], effect.at_step - 1, extract)
            branches.append(RunTask(root_text, None, p["treatment_run_id"], p["seed"], effect.treatment, effect.steps,
                                    str(StudyLayout.worker_store(folder, p["treatment_run_id"]).resolve()),
                                    f"effect {effect_id}: treatment {p['replicate']}",
                                    from_run=p["control_run_id"], at_step=effect.at_step, parent_file=str(extract)))
        _run_tasks(root, db, branches, branch_version, backend, workers, address, "treatment", on_run, on_wait,
                   errors)
    finally:
        keep_unmerged_calls(db, folder, on_wait)    # a worker that died (its run never merged): what it paid
        shutil.rmtree(folder, ignore_errors=True)
        release_folder(folder)
        try:
            folder.parent.rmdir()       # runs/effects, once no effect is running
        except OSError:
            pass
    return errors


def run_effect(study_root: str | Path, at_step: int | None = None, treatment: dict[str, Any] | None = None, *,
               replicates: int = 10, control: dict[str, Any] | None = None, steps: int | None = None,
               seed: int | None = None, workers: int | None = None, backend: str = "local",
               address: str | None = None, note: str | None = None, resume: str | None = None,
               metrics: list[str] | None = None, states: list[str] | None = None,
               on_start: StartFn | None = None, on_run: ProgressFn | None = None,
               on_wait: WaitFn | None = None) -> EffectResult:
    """Run (or reuse) ``replicates`` control runs and branch each at ``at_step`` with ``treatment``.

    ``control`` sets parameters of the control runs (default: the study's
    values); ``treatment`` sets parameters of the branches on top of them, and
    may only touch parameters that interventions at steps >= ``at_step`` use.
    Control seeds are :func:`desim.experiments.sweep.seed_for` of the study seed, the
    control's parameters and the replicate, so a sweep's runs are reused.

    ``treatment`` and ``control`` values are of their parameters' types (text is
    read as ``--set`` reads it; a numpy scalar is the Python value of its kind).

    Everything is checked before anything is recorded: the settings, that
    ``desim run`` would take the controls and the treatment, that the effect
    is not zero by construction, the ``metrics`` and ``states`` the caller
    will read (learnt from step 1 of the study run in memory), and the
    ``backend`` (a study whose classes a notebook defined, ``__main__:Env``, is
    refused on Ray, whose workers cannot import them). On the local backend
    such a study, or a program read from standard input, has its runs run one
    at a time in this process, the same code and the same panels; with
    ``workers`` other than 1 a :class:`RunsInProcessWarning` says so and why. The effect and
    its pairs are then recorded before any run, so an interrupted or failed
    effect is finished by ``resume=effect_id``: it runs, with the recorded
    settings, only the controls and branches that have not completed.
    ``on_start(effect_id, n_controls, n_branches)`` hears how many runs are to
    go; a Ctrl-C leaves as ``KeyboardInterrupt``, the completed runs kept.

    A run that fails does not stop the others, and the call returns once
    every run has ended and what completed is stored. If a pair did not
    complete it also warns, with a :class:`RunsFailedWarning` naming how many
    runs failed, the first error and the ``resume=`` call, because
    ``effect_table`` would otherwise summarise fewer pairs without a word. A
    warning, not an exception: the partial effect is stored and worth reading
    (which pairs failed, and why), a failed replicate is often one to rerun
    rather than a reason to lose the result in hand, and ``run_sweep`` does
    the same. A caller that must not go on with fewer pairs makes it an error
    (``warnings.simplefilter("error", RunsFailedWarning)``): it is then raised
    at the end of the call, everything completed kept, with the result as
    its ``result``. The ``desim effect`` command reports the failed runs
    itself and exits 2.
    """
    with ctrl_c_stays_ctrl_c():
        started = time.perf_counter()
        root = as_root(study_root)
        check_workers(workers)
        if resume:
            given = [n for n, v in (("at_step", at_step), ("treatment", treatment), ("control", control),
                                    ("steps", steps), ("seed", seed)) if v is not None]
            if given:
                raise EffectError(f"resume runs a recorded effect with its own settings; do not give "
                                  f"{', '.join(given)} too")
            effect = _recorded(root, resume)
            with open_store(StudyLayout(root)) as con:
                pairs = Catalogue(con).effect_pairs(resume)
            ran = [p[f"{arm}_run_id"] for p in pairs for arm in ("control", "treatment")
                   if p.get(f"{arm}_status") == "completed"]
            if ran and len(ran) < 2 * len(pairs):
                refuse_resume_after_edit(root, ran[0], EffectError, f"effect {resume}")
            wrong = unknown_names(root, effect.control, metrics, states)
            if wrong:
                raise EffectError(wrong)
            check_executor(backend, root, workers, address, "desim.effect", EffectError, stacklevel=2)
        else:
            effect = _new(root, at_step, treatment, replicates, control, steps, seed, note, metrics, states, on_wait,
                          (backend, workers, address))
        errors = _complete(root, effect, workers, backend, address, on_start, on_run, on_wait)
        with open_store(StudyLayout(root)) as con:
            pairs = Catalogue(con).effect_pairs(effect.effect_id)
    result = EffectResult(effect.effect_id, root, effect.at_step, pairs, sum(1 for p in pairs if p["reused"]),
                          errors, time.perf_counter() - started)
    if result.completed < len(pairs):       # everything that completed is stored by now
        summaries = "effect_table and effect_rows"
        counted = (f"only {result.completed} of {len(pairs)} pairs completed, and {summaries} summarise those alone"
                   if result.completed else f"none of its {len(pairs)} pairs completed: {summaries} have nothing "
                   "to summarise")
        warn_runs_failed(f"effect {result.effect_id}", len(errors) or len(pairs) - result.completed, counted, errors,
                         f"desim.effect({str(root)!r}, resume={result.effect_id!r}) "
                         f"(desim effect {shell_arg(root)} --resume {result.effect_id})", result)
    return result


# --- reading an effect ---------------------------------------------------------------------

def effect_table(study_root: str | Path, effect_id: str, states: list[str] | None = None) -> dict[str, Any]:
    """The effect's summaries over its completed pairs.

    ``{"effect": row, "pairs": [...], "metrics": [{name, step, mean, sd, ci_low, ci_high, n, ci_clipped...}],
    "states": [{field, step, mean, sd, ci_low, ci_high, n, ci_clipped..., mean_abs, share_changed}],
    "categories": [{field, step, category, mean, sd, ci_low, ci_high, n, ci_clipped...}]}``:
    ``mean`` is the mean over pairs of treatment - control (for a state field, of
    each pair's mean over agents; for a category of a text or boolean field, of
    the share of agents in it), with its 95 % interval. ``states`` defaults to
    the study's ``display_states``. :func:`effect_rows` gives the same as one tidy table.

    ``n`` counts the pairs with a number: a NaN difference (NaN in either run, a collector's mean over nobody)
    is left out of mean, sd and interval and counted in ``n_nan``; a metric row's ``n_missing`` counts the
    completed pairs with no difference at that step (a run of the pair without the metric there). ``"notes"``
    says what was left out, per metric or field (:func:`desim.experiments.sweep.summary.left_out_note`).

    Intervals are clipped to what the difference can take (``ci_clipped``, ``ci_low_clipped`` and
    ``ci_high_clipped`` say so, as :func:`desim.experiments.sweep.summary.describe` does): [-1, 1] for a
    category's share and a boolean field's mean; [low - high, high - low] for a metric with
    ``metric_bounds`` [low, high] in study.json.

    Runs whose agents die (a boolean state field ``alive``, Sugarscape) are read over living agents, the store's
    rule (``desim.store.states``), for every field but ``alive`` (paired over everyone): a ``states`` row is over
    the agents alive in both runs of a pair, and also has ``agents`` (those agents) and ``dead_treatment_only``,
    ``dead_control_only``, ``dead_both`` (the agents left out), each the mean over the pairs; a category's share is
    each arm's share of its own living agents. ``"living"`` then has, per numeric (or true/false) field and step,
    the mean over pairs of (treatment mean over its living agents - control mean over its living agents) with its
    interval, ``treatment_mean``, ``control_mean``, ``treatment_living`` and ``control_living`` (means over those
    pairs); ``"notes"`` says all this in words, one sentence per field. Both are empty for runs whose agents do
    not die. ``"notes"`` also says, first, which runs ended with their process before the last step
    (:func:`ended_note`), then what a summary left out.
    """
    layout = StudyLayout(study_root)
    if not layout.db.exists():
        raise EffectError(f"{layout.db} does not exist: no effect has run in {study_root}")
    with open_store(layout) as con:
        catalogue = Catalogue(con)
        row = _effect_row(catalogue, effect_id, layout)
        pairs = catalogue.effect_pairs(effect_id)
        diffs = queries.effect_metric_differences(con, effect_id)
        if states is None:
            states = list(read_study_file(study_root).display_states)
        kinds = _state_kinds(layout, pairs)
        unknown = [f for f in states if kinds and f not in kinds]
        if unknown:         # said in words, not as DuckDB's "could not find key" from deep in a query
            raise EffectError(f"unknown state field(s) {', '.join(unknown)}; the effect's runs have: "
                              f"{', '.join(sorted(kinds))}")
        per_agent = {f: state_reads.effect_agent_summaries(con, effect_id, f) for f in states}
        per_category = {f: state_reads.effect_category_shares(con, effect_id, f) for f in states
                        if kinds.get(f) in ("str", "bool")}
    by_metric: dict[tuple[str, int], list[float]] = {}
    for name, step, d in diffs:
        if d is not None:
            by_metric.setdefault((name, step), []).append(d)
    # a difference of two values in [low, high] lies in [low - high, high - low]
    declared = metric_bounds(study_root)
    bounds = {name: (low - high, high - low) for name, (low, high) in declared.items()}
    completed = sum(1 for p in pairs if p["control_status"] == p["treatment_status"] == "completed")
    metrics = []
    for (n, s), v in by_metric.items():
        try:    # n_missing: completed pairs with no difference here (a run without the metric at this step)
            metrics.append({"name": n, "step": s, **describe(v, bounds.get(n)),
                            "n_missing": max(0, completed - len(v))})
        except ValueError as e:
            low, high = declared[n]
            raise EffectError(f"metric '{n}' at step {s}: a pair's difference {e}, which values within its "
                              f"metric_bounds [{low:g}, {high:g}] in study.json cannot give; correct the "
                              "bounds") from None
    state_rows, living_rows, notes = _state_summaries(per_agent, kinds)
    shares: dict[tuple[str, int, str], list[float]] = {}
    for f, got in per_category.items():
        for _, step, category, diff in got:
            shares.setdefault((f, step, category), []).append(diff)
    category_rows = [{"field": f, "step": step, "category": category, **describe(v, SHARE_DIFFERENCE)}
                     for (f, step, category), v in shares.items()]
    # what a mean left out (NaN, a pair without the metric), said and not only seen as a smaller n
    left_out = [note for note in (left_out_note(rows) for rows in (metrics, state_rows, category_rows)) if note]
    ended = ended_note(pairs, row["n_steps"])
    notes[:0] = ([ended] if ended else []) + left_out
    return {"effect": row, "pairs": pairs, "metrics": metrics, "states": state_rows, "categories": category_rows,
            "living": living_rows, "notes": notes}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _state_summaries(per_agent: dict[str, list[dict[str, Any]]],
                     kinds: dict[str, str]) -> tuple[list[dict], list[dict], list[str]]:
    """``effect_table``'s ``states``, ``living`` and ``notes`` from each field's per-pair rows
    (``desim.store.states.effect_agent_summaries``)."""
    state_rows, living_rows, notes = [], [], []
    for f, got in per_agent.items():
        by_step: dict[int, list[dict]] = {}
        for r in got:
            by_step.setdefault(r["step"], []).append(r)
        within = SHARE_DIFFERENCE if kinds.get(f) == "bool" else None     # true is 1, false 0: a share's
        dead = any(r["leaves_out_dead"] for r in got)
        for step, every in sorted(by_step.items()):
            vals = [r for r in every if r["agents"]]
            if vals:
                row = {"field": f, "step": step, **describe([v["mean"] for v in vals], within),
                       "mean_abs": _mean([v["mean_abs"] for v in vals]),
                       "share_changed": _mean([v["share_changed"] for v in vals])}
                if dead:        # the agents each pair's mean is over, and those it leaves out, over every pair
                    row.update({k: _mean([r[k] for r in every]) for k in
                                ("agents",) + state_reads.DEAD_KEYS})
                state_rows.append(row)
            arms = [r for r in every if r["treatment_mean"] is not None and r["control_mean"] is not None]
            if dead and arms and kinds.get(f) != "str":
                living_rows.append({"field": f, "step": step,
                                    **describe([r["treatment_mean"] - r["control_mean"] for r in arms], within),
                                    **{k: _mean([r[k] for r in arms]) for k in
                                       ("treatment_mean", "control_mean", "treatment_living", "control_living")}})
        if dead and by_step:
            step, every = max(by_step.items())
            counts = {k: _mean([r[k] for r in every]) for k in ("alive_both",) + state_reads.DEAD_KEYS}
            arms = {"str": "category shares over its own living agents",
                    "bool": "mean (its share true) and category shares over its own living agents ('living' rows)"}.get(
                kinds.get(f), "mean over its own living agents ('living' rows: treatment mean - control mean)")
            differences = ("" if kinds.get(f) == "str" else
                           ", the per-agent differences only over the agents alive in both runs of a pair")
            notes.append(f"'{f}' is read over living agents (alive = false left out, as in the report's "
                         f"distributions): each arm's {arms}{differences}. "
                         f"At step {step}, per pair on average: "
                         f"{counts['alive_both']:g} alive in both, {counts['dead_treatment_only']:g} dead in the "
                         f"treatment only, {counts['dead_control_only']:g} in the control only, "
                         f"{counts['dead_both']:g} in both. Survival itself is 'alive', paired over every agent.")
    return state_rows, living_rows, notes


def _state_kinds(layout: StudyLayout, pairs: list[dict]) -> dict[str, str]:
    """The stored kind of each state field (``str``, ``float`` ...), from the first pair's control run."""
    from desim.store.files import RunFiles
    for p in pairs:
        saved = RunFiles(layout.data, p["control_run_id"]).load_types()
        if saved:
            return dict(saved.get("state", {}))
    return {}


def effect_rows(study_root: str | Path, effect_id: str, states: list[str] | None = None) -> list[dict[str, Any]]:
    """The effect as one tidy table, for ``pandas.DataFrame(rows)`` or ``polars.DataFrame(rows)`` as it is:
    one row per metric, state field or category of a categorical state field, and step, with ``effect_id``,
    ``what`` (``metric``, ``state`` or ``share``: a category's share), ``name`` (the metric or field),
    ``category`` (for ``share`` rows), ``step``, and the mean over pairs of treatment - control with ``sd``,
    ``ci_low``, ``ci_high`` (95 %, clipped to what the difference can take), ``n`` (pairs with a number),
    ``n_nan`` (pairs whose difference was NaN, left out), ``n_missing`` (a metric row's completed pairs without
    the metric at that step; None for other rows) and the ``ci_clipped``, ``ci_low_clipped`` and
    ``ci_high_clipped`` flags; a state row also has ``mean_abs`` and ``share_changed``. For runs whose agents
    die, ``living`` rows: ``effect_table``'s ``living`` (the difference of each arm's mean over its own living
    agents). Every value a number or text: no nested JSON."""
    table = effect_table(study_root, effect_id, states)
    keys = ("mean", "sd", "ci_low", "ci_high", "n", "n_nan", "ci_clipped", "ci_low_clipped", "ci_high_clipped")
    empty = {"category": None, "mean_abs": None, "share_changed": None, "n_missing": None}
    rows = [{"effect_id": effect_id, "what": "metric", "name": m["name"], **empty, "step": m["step"],
             **{k: m[k] for k in keys}, "n_missing": m["n_missing"]} for m in table["metrics"]]
    rows += [{"effect_id": effect_id, "what": "state", "name": r["field"], **empty, "step": r["step"],
              **{k: r[k] for k in keys}, "mean_abs": r["mean_abs"], "share_changed": r["share_changed"]}
             for r in table["states"]]
    rows += [{"effect_id": effect_id, "what": "living", "name": r["field"], **empty, "step": r["step"],
              **{k: r[k] for k in keys}} for r in table["living"]]
    rows += [{"effect_id": effect_id, "what": "share", "name": r["field"], **empty, "category": r["category"],
              "step": r["step"], **{k: r[k] for k in keys}} for r in table["categories"]]
    order = {"metric": 0, "state": 1, "living": 2, "share": 3}
    rows.sort(key=lambda r: (order[r["what"]], r["name"], r["category"] or "", r["step"]))
    return rows
