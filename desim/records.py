"""The records that travel through a step: personas, observations, actions, messages, and a
round's actions as columns.

These are the bottom layer of desim: nothing here imports from the rest of
the package. Two kinds of record live here, for two jobs:

* what comes from files and from outside (personas) is validated once, by
  pydantic, with errors that name the field: ``Persona`` is a pydantic
  dataclass with slots (unknown keys refused, as on the :class:`Strict` base
  of every study file), so a million of them take 56 bytes each, not the 470
  of a model, and ``Persona.model_construct`` builds one unchecked in 0.15 us;
* what travels through the hot path, one per agent per round (``Observation``,
  ``Action``, ``Message``), are plain records: ``Observation`` and ``Action``
  msgspec ``Struct``s (a record type written in C: built from keywords, as
  studies build them, in 0.09 us, where a slots dataclass takes 0.39 us
  because CPython makes and unpacks a dict of keywords to call a Python
  class), ``Message`` a named tuple. No type is checked when one is built. The engine checks every action a study
  returns at the boundary it already has (known agent, took part, one per
  round, right step, valid source, kind non-empty, payload a dict), with errors
  naming step, round and agent. They keep the pydantic spellings studies use
  (keyword construction, ``model_construct``, ``model_dump``, ``model_copy``),
  and may also be built positionally, in field order;
* ``ActionColumns``: a round's actions as arrays, on the columnar path.
"""
from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field
from typing import Annotated, Any, NamedTuple

import msgspec
import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic import Strict as StrictType

INT32 = 2**31 - 1
"""The largest step the store holds (an INTEGER column)."""
Step = Annotated[int, StrictType(), Field(ge=0, le=INT32)]

ACTION_SOURCES = ("rule", "llm", "fallback", "replay")



def is_number(value: Any) -> bool:
    """A real number that is not a bool (Python's ``True`` is an ``int``; a setting of ``true`` where a number
    belongs is a mistake, not 1). numpy's numbers count, its bools do not."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))

class Strict(BaseModel):
    """Base for every schema: unknown keys are errors, a typo never passes."""

    model_config = ConfigDict(extra="forbid")


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
        return {name: getattr(self, name) for name in self.model_fields}

    def model_copy(self, update: dict[str, Any] | None = None):
        if dataclasses.is_dataclass(self):
            return dataclasses.replace(self, **(update or {}))
        return msgspec.structs.replace(self, **(update or {}))


@pydantic_dataclass(slots=True, config=ConfigDict(extra="forbid"))
class Persona(_Record):
    """One member of the fixed population; ``agent_id`` is the longitudinal key."""

    agent_id: str = Field(min_length=1, description="the agent's id, the same in every step and run")
    attributes: dict[str, Any] = Field(default_factory=dict, description="what the study knows about the agent "
                                       "(a dorm, an age, a starting state)")
    description: str = Field("", description="a persona in words (an LLM agent's prompt uses it)")

    @classmethod
    def model_construct(cls, agent_id: str, attributes: dict[str, Any] | None = None,
                        description: str = "") -> "Persona":
        """A persona from values already checked, as pydantic's ``model_construct``: nothing validated,
        ``attributes`` kept as given (a provider of a million agents: 0.15 us each, not 1.5)."""
        p = object.__new__(cls)
        p.agent_id, p.attributes, p.description = agent_id, {} if attributes is None else attributes, description
        return p

    @classmethod
    def model_validate(cls, data: Any) -> "Persona":
        """A persona from a dict (a roster's item), checked; anything else is a ``ValidationError``."""
        return cls.__pydantic_validator__.validate_python(data)


class Observation(msgspec.Struct, _Record):
    """What one agent sees at step ``step`` in round ``round_idx``.

    The four quadrants cross two axes: physical or information, macro (the
    same for everyone) or local (this agent's own). ``text`` is an optional
    rendering for language-model prompts.
    """

    agent_id: str
    step: int
    round_idx: int = 0
    macro_physical: dict[str, Any] = msgspec.field(default_factory=dict)
    local_physical: dict[str, Any] = msgspec.field(default_factory=dict)
    macro_information: dict[str, Any] = msgspec.field(default_factory=dict)
    local_information: dict[str, Any] = msgspec.field(default_factory=dict)
    text: str | None = None


class Action(msgspec.Struct, _Record):
    """What one agent did. ``source`` says who decided it (``rule``, ``llm``, ``fallback``, ``replay``)."""

    agent_id: str
    step: int
    kind: str
    payload: dict[str, Any] = msgspec.field(default_factory=dict)
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
Persona.model_fields = Persona.__pydantic_fields__     # name -> FieldInfo, as a pydantic model's
Observation.model_fields = dict.fromkeys(Observation.__struct_fields__)
Action.model_fields = dict.fromkeys(Action.__struct_fields__)


@dataclass
class ActionColumns:
    """A round's actions as columns aligned with the participants' positions (the columnar path).

    ``kind`` is one string for everyone or an array of strings; ``payload`` maps
    a field name to an array. ``acted`` (optional) marks who acted at all.
    """

    kind: str | np.ndarray
    payload: dict[str, np.ndarray] = field(default_factory=dict)
    acted: np.ndarray | None = None
    source: str = "rule"
    idx: np.ndarray | None = None  # set by the engine: the participants' positions

    def __len__(self) -> int:
        if isinstance(self.kind, np.ndarray):
            return len(self.kind)
        for v in self.payload.values():
            return len(v)
        return 0 if self.acted is None else len(self.acted)
