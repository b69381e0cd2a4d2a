"""Scheduled events and broadcasts, ready to use by any environment.

``environment.json`` lists them; this module keeps the named values they act
on and fires them at their step, so a study does not re-implement either:

* a ``ScheduledEvent`` sets, adds to or multiplies a named value: an
  environment layer when it has no selector, or an attribute of every agent
  the selector matches;
* a ``Broadcast`` is active from ``at_step`` for ``ttl`` steps and is shown to
  everyone (macro information) or to the agents its selector matches.

Events at ``at_step: 0`` fire at reset, before the initial states are recorded.
"""
from __future__ import annotations

import copy
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic import Strict as StrictType

from desim.errors import StudyConfigError
from desim.records import INT32, Persona, Step, Strict
from desim.versions import ENVIRONMENT_FILE

INTERVENTION_KINDS = ("event", "broadcast")
"""The ``kind`` of the ``events`` rows :meth:`Interventions.fire` writes; other rows are ones a study recorded
itself in ``advance_to`` (a headline, a price), shown in the events table but not marked as interventions."""

# --- what environment.json lists -------------------------------------------------------------
Selector = dict[str, Any]
"""Attribute equality filter: ``{"dorm": "A"}`` or ``{"dorm": ["A", "B"]}``."""


class ScheduledEvent(Strict):
    """A change to a named environment value at a step.

    Without a selector it changes the environment layer ``target``; with one
    it changes the attribute ``target`` of every agent the selector matches.
    """

    at_step: Step = Field(description='the step it fires at (0: at reset; "$name" of a parameter)')
    name: str = Field(description="its name in the events table and on charts")
    target: str = Field(description="the environment layer it changes (with a selector: the agents' attribute)")
    op: Literal["set", "add", "multiply"] = Field("set", description="how value is applied")
    value: Any = Field(description="the new value, or the number added or multiplied by")
    selector: Selector | None = Field(None, description='the agents it applies to, by attribute: {"dorm": "A"} or '
                                      '{"dorm": ["A", "B"]}')
    note: str = Field("", description="free text")

    @field_validator("value")
    @classmethod
    def _numeric_for_arithmetic(cls, v: Any, info) -> Any:
        op = info.data.get("op", "set")
        if op in ("add", "multiply") and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ValueError(f"op '{op}' needs a number, got {type(v).__name__}")
        return v


class Broadcast(Strict):
    """Information that reaches everyone (or a selector) from ``at_step`` for
    ``ttl`` steps (``None``: until the end)."""

    at_step: Step = Field(description='the first step it is shown at ("$name" of a parameter)')
    name: str = Field(description="its name in the events table and on charts")
    channel: str = Field("broadcast", description="the channel agents see it on")
    content: Any = Field(description="what is shown (any JSON value)")
    ttl: Annotated[int, StrictType(), Field(ge=1, le=INT32)] | None = Field(None, description=(
        "for how many steps (default: until the end)"))
    selector: Selector | None = Field(None, description="the agents who see it, by attribute (default: everyone)")

    def active_at(self, step: int) -> bool:
        if step < self.at_step:
            return False
        return self.ttl is None or step < self.at_step + self.ttl


def selector_matches(selector: Selector | None, attributes: dict[str, Any]) -> bool:
    """True when every key of ``selector`` equals (or, for a list, contains) the attribute."""
    if not selector:
        return True
    for key, wanted in selector.items():
        have = attributes.get(key)
        if isinstance(wanted, list):
            if have not in wanted:
                return False
        elif have != wanted:
            return False
    return True


# --- firing them ---------------------------------------------------------------------------------


def _apply_op(op: str, old: Any, value: Any) -> Any:
    if op == "set":
        return copy.deepcopy(value)
    if old is None:
        raise ValueError("no current value to change")
    if op == "add":
        return old + value
    return old * value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_layer_arithmetic(layers: dict[str, Any], events: list[ScheduledEvent]) -> None:
    """Refuse, before the run, an ``add`` or ``multiply`` on a layer that holds no number when it fires (text,
    a flag, a list, as ``layers`` gives it or an earlier ``set`` makes it): ``"none" + 1`` failed at that step,
    deep in the run, and ``"a" + "b"`` would have joined two texts."""
    held = dict(layers)
    problems = []
    for i, ev in sorted(enumerate(events), key=lambda pair: pair[1].at_step):
        if ev.selector is not None:
            continue
        if ev.op == "set":
            held[ev.target] = ev.value
        elif ev.target in held and not _number(held[ev.target]):
            change = (f"add {ev.value} to layer '{ev.target}'" if ev.op == "add"
                      else f"multiply layer '{ev.target}' by {ev.value}")
            problems.append((f"scheduled_events[{i}]", f"'{ev.name}' would {change} at step {ev.at_step}, when it "
                                                       f"holds {held[ev.target]!r:.40}, not a number"))
    if problems:
        raise StudyConfigError(ENVIRONMENT_FILE, problems)


class Interventions:
    """Environment layers, per-agent attributes, and the interventions that change them."""

    def __init__(self, layers: dict[str, Any], events: list[ScheduledEvent],
                 broadcasts: list[Broadcast], personas: list[Persona]):
        self.layers: dict[str, Any] = copy.deepcopy(layers)
        self.events = sorted(events, key=lambda e: e.at_step)
        check_layer_arithmetic(self.layers, events)
        self.broadcasts = list(broadcasts)
        self._personas = personas
        self._attributes: dict[str, dict[str, Any]] | None = None
        self._active: list[Broadcast] = []
        self.fired_step: int | None = None
        """The step :meth:`fire` last ran for, and ``fired`` what it fired then: the engine checks from them
        that an overridden ``advance_to`` called ``super().advance_to(t)`` and recorded what fired."""
        self.fired: list[dict[str, Any]] = []
        self.attribute_changes = 0
        """How many events have changed agents' attributes so far: what reads an attribute once (a
        diffusion model's per-node parameter) knows from it when to read again."""

    @property
    def attributes(self) -> dict[str, dict[str, Any]]:
        """Each agent's attributes as the interventions see and change them, by agent id: a copy of its
        persona's ``attributes``, made for everyone the first time any is read. A run that never reads
        them (a columnar model, an epidemic) makes none: at 100,000 agents, 0.03 s and 10 MB a run."""
        if self._attributes is None:
            self._attributes = {p.agent_id: dict(p.attributes) for p in self._personas}
        return self._attributes

    def fire(self, step: int) -> list[dict[str, Any]]:
        """Apply every event scheduled for ``step`` and start its broadcasts.

        Returns one record per event or broadcast that fired, for the
        ``events`` table.
        """
        fired: list[dict[str, Any]] = []
        for ev in self.events:
            if ev.at_step != step:
                continue
            if ev.selector is None:
                try:
                    self.layers[ev.target] = _apply_op(ev.op, self.layers.get(ev.target), ev.value)
                except (ValueError, TypeError) as e:
                    raise ValueError(f"event '{ev.name}' at step {step}: cannot {ev.op} layer "
                                     f"'{ev.target}': {e}") from None
                affected = None
            else:
                affected = 0
                for agent_id, attrs in self.attributes.items():
                    if selector_matches(ev.selector, attrs):
                        try:
                            attrs[ev.target] = _apply_op(ev.op, attrs.get(ev.target), ev.value)
                        except (ValueError, TypeError) as e:
                            raise ValueError(f"event '{ev.name}' at step {step}: cannot {ev.op} "
                                             f"attribute '{ev.target}' of agent {agent_id}: {e}") from None
                        affected += 1
                self.attribute_changes += 1
            fired.append({"kind": INTERVENTION_KINDS[0], "name": ev.name, "detail": {
                "target": ev.target, "op": ev.op, "value": ev.value, "selector": ev.selector,
                "affected_agents": affected, "note": ev.note}})
        for b in self.broadcasts:
            if b.at_step == step:
                fired.append({"kind": INTERVENTION_KINDS[1], "name": b.name, "detail": {
                    "channel": b.channel, "content": b.content, "ttl": b.ttl, "selector": b.selector}})
        self._active = [b for b in self.broadcasts if b.active_at(step)]
        self.fired_step, self.fired = step, fired
        return fired

    def active_broadcasts(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        """Broadcasts active at the last fired step; with ``agent_id``, those reaching that agent.

        Without ``agent_id`` only broadcasts with no selector (everyone's) are returned.
        """
        out = []
        for b in self._active:
            if b.selector is None or (agent_id is not None and
                                      selector_matches(b.selector, self.attributes.get(agent_id, {}))):
                out.append({"name": b.name, "channel": b.channel, "content": b.content})
        return out

    def value(self, name: str, default: Any = None) -> Any:
        return self.layers.get(name, default)

    def attribute(self, agent_id: str, name: str, default: Any = None) -> Any:
        attributes = self._attributes          # read once per agent per step on the per-agent path
        if attributes is None:
            attributes = self.attributes
        return attributes[agent_id].get(name, default)
