"""The template layer: persona, the four observation quadrants and memory as chat messages.

A study describes its agents' situation once, in a :class:`PromptTemplate`,
and every agent's prompt at every step and round is rendered from it. The
rendering is deterministic (sorted keys, fixed wording): the same
observation always gives the same text, which is what makes the reply cache
hit on a re-run, a branch or a resumed run.

Rounds follow the seed page: round 0 has no peer content from this step, so
it asks for an opening position; rounds >= 1 show the neighbours' posts from
the feed and invite revision. The system message carries the reply's JSON
schema after the marker ``JSON schema:``, so a server without structured
output (and the stub) can still see what is wanted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import orjson

from desim.records import Action, Observation, Persona

SCHEMA_MARKER = "JSON schema:"
_JSON = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS

QUADRANTS = (
    ("macro_physical", "The world around everyone"),
    ("local_physical", "Your own situation"),
    ("macro_information", "News everyone has heard"),
    ("local_information", "What you have heard yourself"),
)


def _text(value: Any) -> str:
    """A value as prompt text: strings as they are, everything else as compact, sorted JSON.

    orjson, not ``json``: a prompt shows a dozen such values, and ``json.dumps``
    with ``sort_keys`` costs ten times more per call (most of a round's rendering)."""
    kind = type(value)
    if kind is str:
        return value
    if kind is int or (kind is float and math.isfinite(value)):
        return repr(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    return orjson.dumps(value, option=_JSON, default=str).decode()


@dataclass(frozen=True)
class PromptTemplate:
    """How a study's agents are prompted.

    ``role`` is the system instruction (who the agents are, what they decide);
    ``peers_key`` names the ``local_information`` entry holding the feed's
    posts (a list), shown under its own heading; ``hide`` lists observation
    keys that only the rule needs; ``persona_keys`` picks the persona
    attributes worth showing (``None``: all); ``show_text`` adds the
    observation's own ``text`` rendering, when the environment writes one.
    ``final``, when given, replaces ``revision`` in the last of several rounds
    (the round whose answer is the step's decision).
    """

    role: str
    peers_key: str | None = None
    hide: tuple[str, ...] = ()
    persona_keys: tuple[str, ...] | None = None
    show_text: bool = True
    opening: str = ("This is the opening round of this step's discussion: say what you are leaning "
                    "towards and why.")
    revision: str = ("Your neighbours' posts are above. Give your position again: keep it, or revise "
                     "it if they persuaded you, and say why.")
    final: str | None = None
    answer: str = "Answer with one JSON object only, no other text."

    def system(self, schema: dict[str, Any]) -> str:
        return (f"{self.role}\n\n{self.answer} It must match this {SCHEMA_MARKER}\n"
                f"{orjson.dumps(schema, option=_JSON).decode()}")

    def messages(self, persona: Persona, obs: Observation, memory: list[Action], schema: dict[str, Any],
                 rounds: int) -> list[dict[str, str]]:
        """The chat messages for one agent in one round."""
        return [{"role": "system", "content": self.system(schema)},
                {"role": "user", "content": self.user(persona, obs, memory, rounds)}]

    def user(self, persona: Persona, obs: Observation, memory: list[Action], rounds: int) -> str:
        lines = [f"Step {obs.step}, round {obs.round_idx + 1} of {rounds}.", "", "## You",
                 f"- id: {persona.agent_id}"]
        if persona.description:
            lines.append(persona.description)
        keys = sorted(persona.attributes) if self.persona_keys is None else self.persona_keys
        lines += [f"- {k}: {_text(persona.attributes[k])}" for k in keys if k in persona.attributes]
        for quadrant, title in QUADRANTS:
            items = {k: v for k, v in getattr(obs, quadrant).items()
                     if k not in self.hide and k != self.peers_key}
            if items:
                lines += ["", f"## {title}"] + [f"- {k}: {_text(items[k])}" for k in sorted(items)]
        if obs.text and self.show_text:
            lines += ["", obs.text]
        if memory:
            lines += ["", "## Your recent decisions"]
            for a in memory:
                why = f" ({a.rationale})" if a.rationale else ""
                lines.append(f"- step {a.step}: {a.kind} {_text(a.payload)}{why}")
        posts = obs.local_information.get(self.peers_key) if self.peers_key else None
        if posts:
            lines += ["", "## Your neighbours' posts"] + [f"- {_text(p)}" for p in posts]
        lines += ["", self.instruction(obs.round_idx, rounds)]
        return "\n".join(lines)

    def instruction(self, round_idx: int, rounds: int) -> str:
        if round_idx == 0:
            return self.opening
        if self.final and round_idx == rounds - 1:
            return self.final
        return self.revision
