"""The records that travel through a step: personas, observations, actions,
interventions and messages.

These are the bottom layer of desim: nothing here imports from the rest of
the package. Two kinds of record live here, for two jobs:

* what comes from files and from outside (personas, scheduled events,
  broadcasts) are pydantic models, validated once, with errors that name the
  field;
* what travels through the hot path, one per agent per round (``Observation``,
  ``Action``, ``Message``), are plain records: ``Observation`` and ``Action``
  slots dataclasses, ``Message`` a named tuple; building one costs a fifth of
  a validating model or less. The engine checks every action a study
  returns at the boundary it already has (known agent, took part, one per
  round, right step, valid source, kind non-empty, payload a dict), with errors
  naming step, round and agent. They keep the pydantic spellings studies use
  (keyword construction, ``model_construct``, ``model_dump``, ``model_copy``),
  and may also be built positionally, in field order, which is about twice as
  quick as keywords in a loop over every agent.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, Strict as StrictType, field_validator

INT32 = 2**31 - 1
"""The largest step the store holds (an INTEGER column)."""
Step = Annotated[int, StrictType(), Field(ge=0, le=INT32)]

ActionSource = Literal["rule", "llm", "fallback", "replay"]
ACTION_SOURCES = ("rule", "llm", "fallback", "replay")


class Strict(BaseModel):
    """Base for every schema: unknown keys are errors, a typo never passes."""

    model_config = ConfigDict(extra="forbid")


class Persona(Strict):
    """One member of the fixed population; ``agent_id`` is the longitudinal key."""

    agent_id: str = Field(min_length=1)
    attributes: dict[str, Any] = Field(default_factory=dict)
    description: str = ""


class _Record:
    """The pydantic spellings a light record keeps, so studies written against them run unchanged."""

    __slots__ = ()

    @classmethod
    def model_construct(cls, **values):
        return cls(**values)

    @classmethod
    def model_validate(cls, data: dict[str, Any]):
        return cls(**data)

    def model_dump(self, mode: str | None = None) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def model_copy(self, update: dict[str, Any] | None = None):
        return dataclasses.replace(self, **(update or {}))


@dataclass(slots=True)
class Observation(_Record):
    """What one agent sees at step ``step`` in round ``round_idx``.

    The four quadrants cross two axes: physical or information, macro (the
    same for everyone) or local (this agent's own). ``text`` is an optional
    rendering for language-model prompts.
    """

    agent_id: str
    step: int
    round_idx: int = 0
    macro_physical: dict[str, Any] = field(default_factory=dict)
    local_physical: dict[str, Any] = field(default_factory=dict)
    macro_information: dict[str, Any] = field(default_factory=dict)
    local_information: dict[str, Any] = field(default_factory=dict)
    text: str | None = None


@dataclass(slots=True)
class Action(_Record):
    """What one agent did. ``source`` says who decided it (``rule``, ``llm``, ``fallback``, ``replay``)."""

    agent_id: str
    step: int
    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    rationale: str = ""
    source: str = "rule"


class Message(NamedTuple):
    """A post on the message bus, stamped with the step and round it was posted in.

    A named tuple, not a dataclass: the bus stores each post once and hands
    the same object to every neighbour who reads it, and a tuple is the
    cheapest record Python builds (``tuple.__new__(Message, fields)`` in the
    feed). Immutable: ``model_copy(update=...)`` makes a changed copy.
    """

    author_id: str
    step: int
    round: int
    content: Any
    channel: str = "feed"
    kind: str = "post"
    audience: str = "neighbors"
    reply_to: str | None = None

    @classmethod
    def model_construct(cls, **values) -> "Message":
        return cls(**values)

    @classmethod
    def model_validate(cls, data: dict[str, Any]) -> "Message":
        return cls(**data)

    def model_dump(self, mode: str | None = None) -> dict[str, Any]:
        return dict(zip(self._fields, self))

    def model_copy(self, update: dict[str, Any] | None = None) -> "Message":
        return self._replace(**(update or {}))


Message.model_fields = dict.fromkeys(Message._fields)
for _cls in (Observation, Action):
    _cls.model_fields = {f.name: f for f in dataclasses.fields(_cls)}


Selector = dict[str, Any]
"""Attribute equality filter: ``{"dorm": "A"}`` or ``{"dorm": ["A", "B"]}``."""


class ScheduledEvent(Strict):
    """A change to a named environment value at a step.

    Without a selector it changes the environment layer ``target``; with one
    it changes the attribute ``target`` of every agent the selector matches.
    """

    at_step: Step
    name: str
    target: str
    op: Literal["set", "add", "multiply"] = "set"
    value: Any
    selector: Selector | None = None
    note: str = ""

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

    at_step: Step
    name: str
    channel: str = "broadcast"
    content: Any
    ttl: Annotated[int, StrictType(), Field(ge=1, le=INT32)] | None = None
    selector: Selector | None = None

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
