"""The study files' reference page, written from the pydantic models that validate them.

Every field's type, default, bounds and meaning come from the models (a
field's ``description``), so the page cannot say something the loader does not
do. ``docs/reference.md`` is this module's output; a test fails when the two
differ, and ``python -m desim.reference > docs/reference.md`` brings the page
up to date.
"""
from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal, Union

import annotated_types
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from desim.llm.config import LLMConfig
from desim.records import INT32, Persona
from desim.study.files import (FILES, INT64, NETWORKS, EnvironmentFile, Interaction, PanelOptions, PopulationFile,
                               Ref, SimulationFile, StopWhen, StudyFile, WarmStart)
from desim.study.interventions import Broadcast, ScheduledEvent

# each file, then the objects its fields hold, in the order a reader meets them
PAGES: list[tuple[str, type[BaseModel], list[tuple[str, type[BaseModel]]]]] = [
    (FILES["study"][0], StudyFile, []),
    (FILES["simulation"][0], SimulationFile, [("code reference", Ref), ("warm_start", WarmStart),
                                              ("panel", PanelOptions), ("stop_when[]", StopWhen),
                                              ("llm", LLMConfig)]),
    (FILES["population"][0], PopulationFile, [("personas[]", Persona), ("interaction", Interaction)]),
    (FILES["environment"][0], EnvironmentFile, [("scheduled_events[]", ScheduledEvent),
                                                ("broadcasts[]", Broadcast)]),
]
NAMES = {model: name for _, _, objects in PAGES for name, model in objects}


def type_text(annotation: Any) -> str:
    """A field's type in JSON terms: ``integer``, ``list of string``, ``"set" | "add"``, ``object or null``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin is Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (Union, types.UnionType):
        inner = [type_text(a) for a in args if a is not type(None)]
        return " or ".join(inner) + (" or null" if type(None) in args else "")
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is tuple:
        return "[" + ", ".join(type_text(a) for a in args) + "]"
    if origin is dict:
        return "object" if args[1] is Any else f"object of {type_text(args[1])}"
    if isinstance(annotation, type) and (issubclass(annotation, BaseModel) or annotation in NAMES):
        return f"object ({NAMES.get(annotation, annotation.__name__)})"
    return {int: "integer", float: "number", str: "string", bool: "boolean", Any: "any"}.get(annotation,
                                                                                          str(annotation))


def constraints(annotation: Any) -> list[Any]:
    """The bounds written into a type (``Annotated[int, Field(ge=1)] | None``), not on the field."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return [c for m in args[1:] for c in getattr(m, "metadata", [m])]
    if origin in (Union, types.UnionType):
        return [c for a in args for c in constraints(a)]
    return []


def bounds_text(metadata: list[Any]) -> str:
    """The bounds a person needs to know (the store's own integer limits are left out)."""
    out = []
    for m in metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("min_length", "length >=")):
            value = getattr(m, attr, None)
            if value is not None and abs(value) not in (INT32, INT64, INT64 + 1):
                out.append(f"{sign} {value}")
        if isinstance(m, annotated_types.Len) and m.min_length:
            out.append(f"length >= {m.min_length}")
    return ", ".join(dict.fromkeys(out))


def default_text(field: Any) -> str:
    if field.is_required():
        return "**required**"
    value = field.default_factory() if field.default_factory is not None else field.default
    if value is PydanticUndefined:
        return ""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_defaults=True)
    return f"`{json.dumps(value)}`"


def field_table(model: type[BaseModel]) -> list[str]:
    rows = ["| field | type | default | bounds | meaning |", "|---|---|---|---|---|"]
    for name, field in model.model_fields.items():
        about = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{name}` | {type_text(field.annotation)} | {default_text(field)} | "
                    f"{bounds_text(field.metadata + constraints(field.annotation))} | {about} |")
    return rows


def doc(model: type[BaseModel]) -> str:
    """The model's docstring, as one paragraph."""
    return " ".join((model.__doc__ or "").split()).replace("``", "`")


def network_table() -> list[str]:
    rows = ["| kind | builds | needs | also reads |", "|---|---|---|---|"]
    for kind, (builds, needs, reads) in NETWORKS.items():
        rows.append(f"| `{kind}` | {builds} | {', '.join(f'`{n}`' for n in needs)} | "
                    f"{', '.join(f'`{n}`' for n in reads)} |")
    return rows


def render() -> str:
    out = ["# Study files: the reference", "",
           "Generated from the models that validate the files (`python -m desim.reference > docs/reference.md`); "
           "a test fails when this page and the models differ. Every file rejects unknown keys, and types are "
           "strict: `true` is not a number and `\"3\"` is not an integer. A study's own words about its files "
           "(what each parameter means) belong in its README.", ""]
    for path, model, objects in PAGES:
        out += [f"## `{path}`", ""]
        if doc(model):
            out += [doc(model), ""]
        if path == FILES["simulation"][0]:
            out += ["`decision`, `collector` and every `provider` are code references (below).", ""]
        out += field_table(model) + [""]
        for name, sub in objects:
            out += [f"### `{name}`", ""]
            if doc(sub):
                out += [doc(sub), ""]
            out += field_table(sub) + [""]
            if sub is Interaction:
                out += ["Network kinds (a setting the kind does not read is a `desim validate` warning):", ""]
                out += network_table() + [""]
    return "\n".join(out)


if __name__ == "__main__":  # pragma: no cover
    print(render(), end="")
