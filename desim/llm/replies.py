"""Turning reply text into a study's reply object, and making up replies.

``parse_reply`` is tolerant on purpose: servers without structured output
wrap JSON in Markdown fences or prose, so it takes the first balanced
``{...}`` it finds and validates that against the study's reply model. Both
steps take time linear in the reply, so a hostile reply (thousands of ``{``,
deep nesting) costs no more than its length. A
reply that still does not fit is *unusable*: the decision model replaces it
with the study's rule (``source = fallback``).

``fake_reply`` builds a value that satisfies a JSON schema from a seed. The
stub server uses it (seeded by a hash of the prompt, so the same prompt
always gets the same reply) and scripted mode uses it for studies that do
not script their own replies.
"""
from __future__ import annotations

import hashlib
import random
import re
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

# a whole JSON string (escapes included, unterminated up to the end) or one brace
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}]', re.DOTALL)


def first_json_object(text: str) -> str | None:
    """The first balanced ``{...}`` in ``text`` (string-aware), or ``None``, in one pass.

    It scans from the first ``{`` with a stack of open braces, stepping over
    strings whole: the outermost object that closes is returned as soon as it
    does; if the first ``{`` never closes, the earliest-starting object that
    did close inside it. Linear in the text, however many braces it holds.
    """
    start = text.find("{")
    if start < 0:
        return None
    opened: list[int] = []
    best: tuple[int, int] | None = None
    for token in _TOKEN.finditer(text, start):
        c = token.group()
        if c == "{":
            opened.append(token.start())
        elif c == "}":
            if not opened:
                continue
            begin = opened.pop()
            if not opened:
                return text[begin:token.end()]
            if best is None or begin < best[0]:
                best = (begin, token.end())
    return text[best[0]:best[1]] if best else None


def parse_reply(text: str | None, model: type[BaseModel]) -> tuple[BaseModel | None, str]:
    """``(reply, "")`` when ``text`` holds a JSON object valid for ``model``, else ``(None, why)``.

    Valid as the JSON schema sent with the prompt says, with no coercion (pydantic's strict mode): a
    boolean or a numeric string where a number is asked for is an unusable reply, a counted fallback.

    Linear time: the extraction is one pass and orjson parses in one (it
    refuses nesting deeper than 1,024 instead of recursing)."""
    if not text:
        return None, "empty reply"
    candidate = first_json_object(text)
    if candidate is None:
        return None, "no JSON object in the reply"
    try:        # malformed text is said as such, and nesting past 1,024 refused before pydantic reads it
        orjson.loads(candidate)
    except orjson.JSONDecodeError as e:
        return None, f"malformed JSON: {str(e).split(':', 1)[0]}"
    try:    # strict, as the schema sent says: true or "0.7" is no number, and is not taken for one
        return model.model_validate_json(candidate, strict=True), ""
    except ValidationError as e:
        first = e.errors()[0]
        return None, f"{'.'.join(str(p) for p in first['loc']) or 'reply'}: {first['msg']}"


def seed_from(*parts: Any) -> int:
    """A stable integer seed from text parts (sha256, so it is the same on every machine)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


_WORDS = ("agree", "doubt", "prefer", "neighbours", "evidence", "cost", "group", "change", "keep",
          "listen", "trust", "risk", "time", "price", "friends", "convinced", "unsure", "better")


def fake_reply(schema: dict[str, Any], seed: int) -> Any:
    """A value valid for ``schema`` (objects, numbers with bounds, enums, strings, arrays, ``$ref``)."""
    return _fake(schema, random.Random(seed), schema.get("$defs", {}), 0)


def _fake(schema: dict[str, Any], rng: random.Random, defs: dict[str, Any], depth: int) -> Any:
    if "$ref" in schema:
        return _fake(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), rng, defs, depth + 1)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return _fake(options[0], rng, defs, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: _fake(sub, rng, defs, depth + 1) for name, sub in props.items()} if depth < 8 else {}
    if kind in ("number", "integer"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", lo + 10))
        return rng.randint(int(lo), int(hi)) if kind == "integer" else round(rng.uniform(lo, hi), 4)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        n = max(int(schema.get("minItems", 1)), 1)
        return [_fake(schema.get("items", {}), rng, defs, depth + 1) for _ in range(n)]
    if kind == "null":
        return None
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9)))
    limit = schema.get("maxLength")
    return words[:limit] if limit else words
