"""Study parameters: ``"$name"`` in a study file stands for the parameter ``name`` of
``simulation.json`` (after ``--set``), so that a model's arguments and an intervention's timing can be
set, swept and branched without editing the files.

The one place that reads ``"$name"``: :func:`substitute_parameters` replaces references in a value,
:func:`substitute_interventions` in the fields of ``environment.json``'s interventions that may hold
them, :func:`substitute_interaction` in the network settings of ``population.json``, and :func:`parameter_uses` says where each parameter is referenced (a branch may change only
those its interventions use).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from desim.errors import StudyConfigError

REFERENCE = re.compile(r"^\$([A-Za-z_]\w*)$")    # a whole string "$name", nothing else


def substitute_parameters(value: Any, params: dict[str, Any], path: Path, where: str) -> Any:
    """Replace ``"$name"`` strings inside ``value`` by the study parameter ``name``; an unknown name is
    an error naming the file and field."""
    if isinstance(value, str):
        m = REFERENCE.match(value)
        if m:
            if m.group(1) not in params:
                raise StudyConfigError(path, [(where, f"unknown parameter '${m.group(1)}' "
                                                      f"(simulation.json parameters: {sorted(params)})")])
            return params[m.group(1)]
        return value
    if isinstance(value, dict):
        return {k: substitute_parameters(v, params, path, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_parameters(v, params, path, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


INTERVENTION_FIELDS = {"scheduled_events": ("at_step", "value", "ttl"), "broadcasts": ("at_step", "ttl")}


def substitute_interventions(env: Any, params: dict[str, Any], path: Path) -> Any:
    """environment.json with ``"$name"`` resolved in the interventions' ``at_step``, ``value``,
    ``ttl`` and selector values, so that the timing of a policy can be swept or ``--set``."""
    if not isinstance(env, dict):
        return env
    out = dict(env)
    for key, fields in INTERVENTION_FIELDS.items():
        items = env.get(key)
        if not isinstance(items, list):
            continue
        out[key] = []
        for i, item in enumerate(items):
            if isinstance(item, dict):
                item = dict(item)
                for name in fields:
                    if name in item:
                        item[name] = substitute_parameters(item[name], params, path, f"{key}[{i}].{name}")
                if isinstance(item.get("selector"), dict):
                    item["selector"] = substitute_parameters(item["selector"], params, path,
                                                             f"{key}[{i}].selector")
            out[key].append(item)
    return out


INTERACTION_FIELDS = ("graph_seed", "k", "p", "m", "width", "height", "neighborhood", "torus", "directed")
"""The network settings of ``population.json``'s ``interaction`` that may be ``"$name"`` (a sweep over
the network's density or its seed); not the edges or the file, which name agents and paths."""


def substitute_interaction(population: Any, params: dict[str, Any], path: Path) -> Any:
    """population.json with ``"$name"`` resolved in the interaction's network settings."""
    if not isinstance(population, dict) or not isinstance(population.get("interaction"), dict):
        return population
    interaction = dict(population["interaction"])
    for name in INTERACTION_FIELDS:
        if name in interaction:
            interaction[name] = substitute_parameters(interaction[name], params, path, f"interaction.{name}")
    return {**population, "interaction": interaction}


def parameter_uses(files: dict[str, Any]) -> dict[str, list[str]]:
    """Where each ``"$name"`` appears in a study's raw files: ``{name: [field path, ...]}``."""
    uses: dict[str, list[str]] = {}

    def walk(value: Any, where: str) -> None:
        if isinstance(value, str):
            m = REFERENCE.match(value)
            if m:
                uses.setdefault(m.group(1), []).append(where)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{where}.{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{where}[{i}]")

    for key, value in files.items():
        walk(value, key)
    return uses


def parameter_fields(raw: Any) -> dict[str, str]:
    """Which parameter each field of one raw study file holds: ``{"scheduled_events[0].at_step":
    "campaign_week"}``, fields named as the file's validation errors name them."""
    return {where.removeprefix("file."): name for name, wheres in parameter_uses({"file": raw}).items()
            for where in wheres}
