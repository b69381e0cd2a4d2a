"""What the engine checks of study output, as plain functions: actions, metrics, state columns.

The records a study returns are light (plain dataclasses, not validating models), so this is where
they are validated, once, at the boundary: garbage from a behaviour model, a collector or an
environment stops the run with an error naming the step, the round and the agent. Each check is one
pass in C over the round's output (a set of types, of steps, ...); only when one fails are the
records walked in Python, to word the error.
"""
from __future__ import annotations

import inspect
from collections import Counter
from operator import attrgetter
from typing import Any

import numpy as np

from desim.errors import StudyConfigError, StudyError
from desim.jsontext import dumps
from desim.records import ACTION_SOURCES, Action, ActionColumns
from desim.study.failures import shown
from desim.versions import SIMULATION_FILE


class RunError(StudyError, RuntimeError):
    """A run stopped because study code returned something the engine refuses; the message names
    the step, the round and the agent."""


_agent_id, _kind, _step, _source, _payload, _rationale = (attrgetter(name) for name in (
    "agent_id", "kind", "step", "source", "payload", "rationale"))
_ACTION, _DICT, _STR, _SOURCES = {Action}, {dict}, {str}, frozenset(ACTION_SOURCES)
_TEXT_OR_NONE = frozenset({str, type(None)})       # a rationale: text, or None for none


def checked_actions(actions: Any, ids: list[str], t: int, r: int, known: dict[str, int],
                    everyone: frozenset[str] | None = None, observations: list | None = None,
                    model: Any = None) -> list[Action]:
    """``actions`` (what ``decide_batch`` returned for the agents ``ids`` of round ``r``), refused with an
    error naming the agent unless they are a list of :class:`Action`, at most one per agent of the
    round, each of step ``t``, with a known ``source``, a non-empty ``kind``, a dict ``payload`` and a
    text (or None) ``rationale``.

    Actions for ``ids`` in their order (the usual reply) are one list comparison; any other order is
    checked through a set. ``known`` maps every agent of the run to its position; ``everyone`` is the
    run's agents when ``ids`` are all of them (the set is then not built again). ``observations`` (what
    ``observe_batch`` returned) are looked at only to word an error: an action for an agent not in the
    round may come from an observation for that agent, and then ``observe_batch`` is to blame. ``model``
    (the behaviour model) names the class and file of a ``decide_batch`` that returned no list."""
    if not isinstance(actions, list):
        raise RunError(f"step {t} round {r}: {_decide_batch_of(model)} returned {type(actions).__name__}, not a list: "
                       "it must return a list of Action (one per agent that acts; [] when none does)")
    if not actions:
        return actions
    present = None
    try:        # every check as one pass in C over the round's actions
        kinds = set(map(_kind, actions))
        good = set(map(type, actions)) == _ACTION
        if good and list(map(_agent_id, actions)) != ids:
            present = everyone if everyone is not None else set(ids)
            agents = set(map(_agent_id, actions))
            good = len(agents) == len(actions) and present.issuperset(agents)
        good = (good and set(map(_step, actions)) == {t}
                and _SOURCES.issuperset(map(_source, actions))
                and set(map(type, map(_payload, actions))) == _DICT
                and set(map(type, kinds)) == _STR and "" not in kinds
                and _TEXT_OR_NONE.issuperset(map(type, map(_rationale, actions))))
    except (AttributeError, TypeError):     # not Actions, or an unhashable id or step
        good = False
    if not good:
        if present is None:
            present = everyone if everyone is not None else set(ids)
        seen: set[str] = set()
        for a in actions:
            try:
                bad = (type(a) is not Action or a.agent_id in seen or a.agent_id not in present or a.step != t
                       or a.source not in ACTION_SOURCES or type(a.payload) is not dict
                       or type(a.kind) is not str or not a.kind
                       or not (a.rationale is None or isinstance(a.rationale, str)))
            except TypeError:               # an id (or source) that cannot be looked up: a list, say
                bad = True
            if bad:
                refuse(a, seen, present, t, r, known, observations)
            seen.add(a.agent_id)
    return actions


def _among(value: Any, values) -> bool:
    """``value in values``, False for a value that cannot be looked up (a list as an id)."""
    try:
        return value in values
    except TypeError:
        return False


def refuse(a: Any, seen: set[str], present: set[str], t: int, r: int, known: dict[str, int],
           observations: list | None = None) -> None:
    """Raise the :class:`RunError` that says what is wrong with the action ``a``."""
    if not isinstance(a, Action):
        raise RunError(f"step {t} round {r}: decide_batch returned {a!r:.80}, not an Action")
    if observations is not None and (not _among(a.agent_id, present) or a.agent_id in seen):
        refuse_observations(observations, present, t, r, known)
    if not _among(a.agent_id, known):
        raise RunError(f"step {t} round {r}: action for unknown agent {a.agent_id!r:.60}")
    if a.agent_id not in present:
        raise RunError(f"step {t} round {r}: action for agent '{a.agent_id}', "
                       "which did not take part in this round")
    if a.agent_id in seen:
        raise RunError(f"step {t} round {r}: two actions for agent '{a.agent_id}' in one round")
    if a.step != t:
        raise RunError(f"step {t} round {r}: action for agent '{a.agent_id}' says step {a.step}")
    where = f"step {t} round {r}: action for agent '{a.agent_id}'"
    if type(a.kind) is not str or not a.kind:
        raise RunError(f"{where}: kind is {a.kind!r:.60}; it must be a non-empty string (post, move, ...)")
    if type(a.payload) is not dict:
        raise RunError(f"{where}: payload is {type(a.payload).__name__} {a.payload!r:.60}; it must be a dict")
    if not _among(a.source, ACTION_SOURCES):
        raise RunError(f"{where}: source is {a.source!r:.60}; it must be one of {', '.join(ACTION_SOURCES)}")
    if not (a.rationale is None or isinstance(a.rationale, str)):
        raise RunError(f"{where}: rationale is {type(a.rationale).__name__} {a.rationale!r:.60}; it must be text "
                       "(why the agent acted) or None")
    raise RunError(f"{where}: malformed action: {a!r:.200}")


def _decide_batch_of(model: Any) -> str:
    """``Listen.decide_batch (model.py)``: the method whose return is refused, and the file it is written in
    (a ``return`` forgotten there is the usual cause); ``decide_batch`` when the model is not known."""
    if model is None:
        return "decide_batch"
    method = getattr(type(model), "decide_batch", None)
    try:
        file = inspect.getsourcefile(method)
    except TypeError:           # not a Python function (a builtin, a callable object)
        file = None
    return f"{type(model).__qualname__}.decide_batch" + (f" ({shown(file)})" if file else "")


def checked_action_columns(actions: Any, n: int, t: int, r: int) -> ActionColumns:
    """What ``decide_columns`` returned for ``n`` participants: an ``ActionColumns`` of that length, whose
    ``kind`` is one non-empty string or one entry per participant, ``source`` a known source, ``payload``
    a dict of text field names to one value per participant, and ``acted`` (when given) one flag per
    participant. The shapes only, a check per column: the values of ``kind`` and of the payload are
    checked as they are stored, where the agent each belongs to is known (``desim.store``)."""
    where = f"step {t} round {r}: decide_columns' ActionColumns"
    if isinstance(actions, ActionColumns):
        kind, payload = actions.kind, actions.payload
        if isinstance(kind, str):
            if not kind:
                raise RunError(f"{where}: kind is ''; it must be a non-empty string (move, post, ...)")
        elif _count(kind) is None or getattr(kind, "ndim", 1) != 1:
            raise RunError(f"{where}: kind is {type(kind).__name__} {_short(kind)}; it must be one non-empty "
                           f"string for everyone or an array of {n} strings, one per participant")
        if payload is not None and not isinstance(payload, dict):
            raise RunError(f"{where}: payload is {type(payload).__name__} {_short(payload)}; it must be a dict "
                           "of field name to one value per participant")
        for name, values in (payload or {}).items():
            if not isinstance(name, str) or not name:
                raise RunError(f"{where}: payload key {name!r:.60} is not a non-empty string")
            if _count(values) is None:
                raise RunError(f"{where}: payload field '{name}' is {_short(values)}, not one value per "
                               "participant (a list or an array)")
    if not isinstance(actions, ActionColumns) or len(actions) != n:
        raise RunError(f"step {t} round {r}: decide_columns must return ActionColumns with {n} entries, got "
                       f"{type(actions).__name__} of {len(actions) if isinstance(actions, ActionColumns) else '?'}")
    for what, values in [("kind", kind), ("acted", actions.acted), *[(f"payload field '{name}'", values)
                                                                     for name, values in (payload or {}).items()]]:
        count = _count(values)
        if not (values is None or isinstance(values, str)) and count != n:
            raise RunError(f"{where}: {what} " + (f"has {count} entries for {n} participants" if count is not None
                                                  else f"is {_short(values)}, not one entry per participant")
                           + " (one per participant, in the order of idx)")
    if not _among(actions.source, ACTION_SOURCES):
        raise RunError(f"{where}: source is {actions.source!r:.60}; it must be one of {', '.join(ACTION_SOURCES)}")
    return actions


def _count(values: Any) -> int | None:
    """How many values ``values`` holds (a list, an array), or None for one value (a number, a string)."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        return None
    try:
        return len(values)
    except TypeError:               # a 0-d numpy array
        return None


def _short(value: Any) -> str:
    """``value`` in an error message, cut to a line's worth."""
    text = " ".join(repr(value).split())
    return f"{text[:60]}..." if len(text) > 60 else text


def checked_observations(observations: Any, n: int, t: int, r: int) -> Any:
    """What ``observe_batch`` returned for the ``n`` agents of round ``r``: a list of one observation each,
    refused otherwise here, naming ``observe_batch`` (not left to fail inside the decision model). Which
    agent each is for is looked at only when an action is refused (:func:`refuse_observations`)."""
    if not isinstance(observations, list):
        raise RunError(f"step {t} round {r}: observe_batch returned {type(observations).__name__}, not a list "
                       "of observations")
    if len(observations) != n:
        raise RunError(f"step {t} round {r}: observe_batch returned {len(observations)} observations for {n} agents")
    return observations


def refuse_observations(observations: list, present: set[str], t: int, r: int, known: dict[str, int]) -> None:
    """Raise naming ``observe_batch`` if one of its observations is for an agent not in round ``r`` (unknown,
    or away) or for an agent another one is for: the decision model acts for the agent each observation
    names, so the action it returns for that agent is refused, but the mistake is the observation's."""
    seen: set = set()
    for o in observations:
        agent = getattr(o, "agent_id", None)
        if agent is None:           # not an Observation: the study's own kind, which says no agent
            continue
        where = f"step {t} round {r}: observe_batch returned an observation for"
        if not _among(agent, known):
            raise RunError(f"{where} unknown agent {agent!r:.60}")
        if agent not in present:
            raise RunError(f"{where} agent '{agent}', which did not take part in this round")
        if agent in seen:
            raise RunError(f"{where} agent '{agent}' twice (one observation per agent of ids)")
        seen.add(agent)


def checked_metrics(raw: Any, t: int, collector: str) -> dict[str, float]:
    """A collector's figures for step ``t`` as ``{name: float}``; anything but numbers is refused. ``None`` is
    no figures (a ``collect`` with no ``return``); any other value that is not a dict (``[]``, ``0``, ``""``)
    is a mistake, refused rather than dropped with the step's metrics."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RunError(f"step {t}: {collector}.collect returned {type(raw).__name__} {_short(raw)}, not a dict of "
                       "metric name to number")
    out = {}
    for name, value in raw.items():
        if isinstance(value, (str, bool, np.bool_)) or value is None:
            raise RunError(f"step {t}: {collector}.collect: metric '{name}' is {value!r:.60}, not a number")
        try:
            out[str(name)] = float(value)
        except (TypeError, ValueError):
            raise RunError(f"step {t}: {collector}.collect: metric '{name}' is {value!r:.60}, not a number") from None
    if "" in out or len(out) < len(raw) or len({n.lower() for n in out}) < len(out) or \
            not RESERVED_METRICS.isdisjoint(n.lower() for n in out):
        _refuse_metric_names(list(raw), t, collector)
    return out


RESERVED_METRICS = {"run_id", "step"}
"""The metrics table's own columns: a metric of that name would make its wide form (a column per metric,
``desim.open(s).metrics()``, the export) hold two columns of one name, which Arrow and Parquet readers refuse."""


def _refuse_metric_names(names: list, t: int, collector: str) -> None:
    """A ``RunError`` for the first metric name the store cannot hold: an empty one (no column of the wide
    metrics table can be named ''), or one that would clash with another: SQL reads names without regard to
    case, and a name is stored as its text (``1`` and ``"1"`` are one)."""
    seen: dict[str, Any] = {}
    for name in names:
        key = str(name).lower()
        if not key:
            raise RunError(f"step {t}: {collector}.collect: metric key {name!r} is not a non-empty string (a metric's "
                           "name is a column of the wide metrics table)")
        if key in RESERVED_METRICS:
            raise RunError(f"step {t}: {collector}.collect returned a metric named '{name}', a column the metrics "
                           f"table has already ({', '.join(sorted(RESERVED_METRICS))}); rename it")
        if key in seen:
            raise RunError(f"step {t}: {collector}.collect returned metrics {seen[key]!r} and {name!r}, one name to "
                           "SQL (which ignores case, and stores a name as its text); rename one")
        seen[key] = name


def checked_state_columns(columns: Any, n: int, t: int) -> dict:
    """The environment's ``state_columns`` for step ``t``: a dict of one entry per agent per field."""
    if not isinstance(columns, dict):
        raise RunError(f"step {t}: state_columns returned {type(columns).__name__}, not a dict of field name to "
                       "one value per agent")
    for name, values in columns.items():
        count = len(values) if hasattr(values, "__len__") else None
        if count != n:
            raise RunError(f"step {t}: state_columns field '{name}' has {count if count is not None else 'no'} "
                           f"values for {n} agents (one per agent, in population order)")
    return columns


def checked_messages(messages: Any, t: int) -> Any:
    """The messages drained at step ``t``'s close, refused if one is stamped with a later step: a post's
    step is when it was posted, and the bus keeps only the steps the rule can still show, so a post
    stamped ahead makes every read miss the steps before it. Lists of ``Message``, dicts of lists by
    field and Arrow tables alike (what ``drain_messages`` may return)."""
    if isinstance(messages, dict):
        steps, authors = messages.get("step") or [], messages.get("author_id") or []
    elif hasattr(messages, "num_rows"):
        if not messages.num_rows or "step" not in messages.column_names:
            return messages
        steps = messages.column("step").to_numpy(zero_copy_only=False)
        if steps.max() <= t:            # the usual case, in C: millions of posts a step
            return messages
        steps, authors = steps.tolist(), messages.column("author_id").to_pylist()
    else:
        steps = [getattr(m, "step", None) for m in messages]
        authors = [getattr(m, "author_id", None) for m in messages]
    numbers = [s for s in steps if isinstance(s, int)] if None in steps else steps
    if not numbers or max(numbers) <= t:
        return messages
    late = next((i for i, s in enumerate(steps) if isinstance(s, int) and s > t), None)
    if late is not None:
        raise RunError(f"step {t}: a message by '{authors[late]}' is stamped step {steps[late]}, after the step it "
                       f"was posted in: a message's step is when it is posted (Message(step=ctx.step, ...)); "
                       "the bus keeps only the steps a read can still show, so a post stamped ahead hides the "
                       "steps before it")
    return messages


EVENT_KEYS = frozenset({"kind", "name", "detail"})


def checked_events(events: Any, t: int, env: str) -> list[dict]:
    """What ``advance_to(t)`` says fired: rows of the ``events`` table, each a dict with text ``kind`` and
    ``name`` and an optional ``detail``. An override that adds rows of its own (what a study process did
    since the last step) gets an error naming the step and the row, not a ``KeyError`` from the store."""
    if events is None:
        return []
    if not isinstance(events, list):
        raise RunError(f"step {t}: {env}.advance_to returned {type(events).__name__}, not a list of event rows "
                       "(dicts with kind, name and detail)")
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise RunError(f"step {t}: {env}.advance_to row {i} is {type(e).__name__} {e!r:.60}, not a dict with "
                           "kind, name and detail")
        for key in ("kind", "name"):
            if not isinstance(e.get(key), str) or not e[key]:
                raise RunError(f"step {t}: {env}.advance_to row {i} {e!r:.80}: '{key}' is "
                               f"{'missing' if key not in e else repr(e[key])}; an event row needs a non-empty "
                               f"text '{key}'")
        extra = e.keys() - EVENT_KEYS
        if extra:
            raise RunError(f"step {t}: {env}.advance_to row {i}: unknown key '{sorted(map(str, extra))[0]}' (an "
                           "event row has kind, name and detail; put anything else in detail)")
        try:
            dumps(e.get("detail"))      # stored as JSON: what JSON cannot hold is refused, not stored as its repr
        except TypeError as why:
            raise RunError(f"step {t}: {env}.advance_to row {i} ({e['kind']} '{e['name']}'): detail "
                           f"{e.get('detail')!r:.60} is not JSON ({why})") from None
    return events


def with_interventions(events: list[dict], interventions, t: int, env: str) -> list[dict]:
    """The ``events`` rows of step ``t``: ``events`` (what ``advance_to`` returned) with the interventions that
    fired in it. An override of ``advance_to`` that never called ``super().advance_to(t)`` would let
    ``environment.json``'s events and broadcasts silently do nothing, so it is refused; one that called it
    but dropped its rows (no ``return``) would hide them from the events table, reports and the dashboard,
    so they are recorded all the same, first, as the default ``advance_to`` returns them."""
    if interventions.fired_step != t:
        if not (interventions.events or interventions.broadcasts):
            return events
        due = [f"{kind} '{x.name}'" for kind, items in (("event", interventions.events),
                                                         ("broadcast", interventions.broadcasts))
               for x in items if x.at_step == t]
        raise RunError(f"step {t}: {env}.advance_to did not call super().advance_to({t}), so the events and "
                       f"broadcasts of environment.json never fire"
                       f"{' (this step: ' + ', '.join(due) + ')' if due else ''}; call it and return its rows "
                       "with any of your own")
    # matched by kind and name, not by identity: an override may return copies of the rows, or enrich them
    returned = Counter((e["kind"], e["name"]) for e in events)
    missing = []
    for e in interventions.fired:
        if returned[e["kind"], e["name"]]:
            returned[e["kind"], e["name"]] -= 1
        else:
            missing.append(e)
    return missing + events if missing else events


def check_stop_metrics(conditions, metrics: dict[str, float]) -> None:
    """Refuse, before the run is recorded, a ``stop_when`` condition on a metric that the collector
    does not report at step 0 (a typo, or a metric of another collector)."""
    problems = [(f"stop_when[{i}].metric", f"'{m}' is not a metric the collector reports "
                 f"(it reports: {', '.join(sorted(metrics)) or 'none'})")
                for i, c in enumerate(conditions) for m in c.metrics() if m not in metrics]
    if problems:
        raise StudyConfigError(SIMULATION_FILE, problems)


def stop_reason(conditions, metrics: dict[str, float], t: int) -> str | None:
    """Why the run ends after step ``t`` (the first of ``simulation.json``'s ``stop_when`` conditions
    that holds for the step's metrics), or None. A condition on a metric the collector does not
    report is refused, naming it."""
    for c in conditions:
        for m in c.metrics():
            if m not in metrics:
                raise RunError(f"step {t}: stop_when names metric '{m}', which the collector does not report "
                               f"(it reports: {', '.join(sorted(metrics)) or 'none'})")
        if c.holds(metrics):
            return f"stop_when: {c.text()} at step {t}"
    return None
