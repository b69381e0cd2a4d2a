"""The study's JSON files as pydantic models, and loading them with errors a
person can act on.

A study is a folder::

    study.json
    simulation/simulation.json
    population/population.json
    environment/environment.json
    model.py

Every file is validated on load. An error names the file, the field path and
what was expected; unknown keys are errors, because a typo (``n_step``) that
silently falls back to a default is the worst kind of bug in a study.
"""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .schemas import Broadcast, Persona, ScheduledEvent

TIME_UNITS = ("second", "minute", "hour", "day", "week", "month", "quarter", "year", "step")
PROPAGATIONS = ("independent", "contagion", "broadcast_then_local")
NETWORK_KINDS = (
    "none", "complete", "edges", "ring", "lattice", "watts_strogatz",
    "barabasi_albert", "erdos_renyi", "groups",
)


class StudyConfigError(ValueError):
    """A study file is missing, malformed or invalid. ``str()`` names the file and field."""

    def __init__(self, file: str | Path, problems: list[tuple[str, str]]):
        self.file = str(file)
        self.problems = problems
        lines = [f"{self.file}: {field}: {msg}" if field else f"{self.file}: {msg}" for field, msg in problems]
        super().__init__("\n".join(lines))


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Ref(Strict):
    """Names Python code: ``model:ClassName`` inside the study, or ``package.module:Name``."""

    ref: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    args: dict[str, Any] = Field(default_factory=dict)


class StudyFile(Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    title: str = ""
    question: str = ""
    description: str = ""
    display_metrics: list[str] = Field(default_factory=list)
    display_states: list[str] = Field(default_factory=list)
    # per state field, a "#rrggbb" colour per category, e.g. {"status": {"S": "#4c9a5b", "I": "#d62728"}}
    state_colors: dict[str, dict[str, str]] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _colors(self) -> "StudyFile":
        for name, colors in self.state_colors.items():
            for category, color in colors.items():
                if not re.fullmatch(r"#[0-9a-fA-F]{6}", color):
                    raise ValueError(f"state_colors.{name}.{category}: {color!r} is not a #rrggbb colour")
        return self


class WarmStart(Strict):
    from_run: str
    at_step: int = Field(ge=1)


class PanelOptions(Strict):
    """How the panel stores state fields: ``allow_nonfinite`` lists float fields that may hold NaN
    or infinity (elsewhere those stop the run, since they are usually a bug)."""

    allow_nonfinite: list[str] = Field(default_factory=list)


class SimulationFile(Strict):
    n_steps: int = Field(ge=1)
    time_unit: Literal[TIME_UNITS] = "step"  # type: ignore[valid-type]
    interaction_rounds: int = 1
    seed: int = 0
    decision: Ref
    collector: Ref | None = None
    memory_window: int = Field(default=5, ge=0)
    warm_start: WarmStart | None = None
    record_rounds: bool = False
    agent_processes: bool = True
    parameters: dict[str, float | int | str | bool] = Field(default_factory=dict)
    llm: dict[str, Any] | None = None
    panel: PanelOptions | None = None


class Interaction(Strict):
    """How agents are connected. ``kind`` picks explicit ``edges`` or a seeded generator."""

    kind: Literal[NETWORK_KINDS] = "none"  # type: ignore[valid-type]
    edges: list[tuple[str, str]] | None = None
    k: int | None = Field(default=None, ge=1)
    p: float | None = Field(default=None, ge=0.0, le=1.0)
    m: int | None = Field(default=None, ge=1)
    width: int | None = Field(default=None, ge=1)
    height: int | None = Field(default=None, ge=1)
    neighborhood: Literal["moore", "von_neumann"] = "moore"
    torus: bool = True
    attribute: str | None = None
    directed: bool = False

    @model_validator(mode="after")
    def _needs(self) -> "Interaction":
        need = {
            "edges": ["edges"], "watts_strogatz": ["k", "p"], "barabasi_albert": ["m"],
            "erdos_renyi": ["p"], "groups": ["attribute"], "lattice": ["width", "height"],
        }.get(self.kind, [])
        missing = [f for f in need if getattr(self, f) is None]
        if missing:
            raise ValueError(f"interaction kind '{self.kind}' needs {', '.join(missing)}")
        return self


class PopulationFile(Strict):
    personas: list[Persona] | None = None
    roster: str | None = None
    provider: Ref | None = None
    interaction: Interaction = Field(default_factory=Interaction)
    propagation: Literal[PROPAGATIONS] = "independent"  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _one_source(self) -> "PopulationFile":
        given = [n for n in ("personas", "roster", "provider") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of personas, roster, provider (got {given or 'none'})")
        return self


class EnvironmentFile(Strict):
    provider: Ref
    layers: dict[str, Any] = Field(default_factory=dict)
    scheduled_events: list[ScheduledEvent] = Field(default_factory=list)
    broadcasts: list[Broadcast] = Field(default_factory=list)


class StudySpec(BaseModel):
    """A loaded, validated study: the four files plus where they live."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    root: Path
    files: dict[str, Any] = {}
    study: StudyFile
    simulation: SimulationFile
    population: PopulationFile
    environment: EnvironmentFile

    def version_config(self) -> dict[str, Any]:
        """The study as its files say, before run-time overrides: what a version is made of."""
        return self.files or self.resolved()

    @property
    def id(self) -> str:
        return self.study.id

    @property
    def rounds(self) -> int:
        """``interaction_rounds`` clamped to at least 1, as the engine uses it."""
        return max(1, self.simulation.interaction_rounds)

    def resolved(self) -> dict[str, Any]:
        """The whole configuration as plain JSON data (stored with every run)."""
        return {
            "study": self.study.model_dump(mode="json"),
            "simulation": self.simulation.model_dump(mode="json"),
            "population": self.population.model_dump(mode="json", exclude_none=True),
            "environment": self.environment.model_dump(mode="json"),
        }


FILES = {
    "study": ("study.json", StudyFile),
    "simulation": ("simulation/simulation.json", SimulationFile),
    "population": ("population/population.json", PopulationFile),
    "environment": ("environment/environment.json", EnvironmentFile),
}


def _field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _describe(err: dict) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key (check the spelling; unknown keys are not allowed)"
    if err["type"] == "missing":
        return "required field is missing"
    got = err.get("input")
    kind = type(got).__name__ if got is not None else "null"
    msg = err["msg"]
    if err["type"] in ("value_error", "assertion_error") or err["loc"] == ():
        return msg
    return f"{msg} (got {kind} {json.dumps(got, default=str)[:60]})"


def read_json(path: Path) -> Any:
    """Read a JSON file; a syntax error names the file, line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StudyConfigError(path, [("", "file not found")]) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise StudyConfigError(path, [("", f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}")]) from None


def validate_file(path: Path, model: type[BaseModel], data: Any) -> BaseModel:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise StudyConfigError(path, [(_field_path(err["loc"]), _describe(err)) for err in e.errors()]) from None


def _check_unique_ids(path: Path, personas: list[Persona], where: str) -> None:
    seen: dict[str, int] = {}
    for i, p in enumerate(personas):
        if p.agent_id in seen:
            raise StudyConfigError(path, [(f"{where}[{i}].agent_id",
                                           f"duplicate agent_id '{p.agent_id}' (first at {where}[{seen[p.agent_id]}])")])
        seen[p.agent_id] = i


_PARAM = re.compile(r"^\$([A-Za-z_]\w*)$")


def substitute_parameters(value: Any, params: dict[str, Any], path: Path, where: str) -> Any:
    """Replace ``"$name"`` strings inside ``args`` by the study parameter ``name``."""
    if isinstance(value, str):
        m = _PARAM.match(value)
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


def load_study(root: str | Path, *, steps: int | None = None, seed: int | None = None,
               rounds: int | None = None, params: dict[str, Any] | None = None) -> StudySpec:
    """Load and validate a study folder, applying command-line overrides.

    ``params`` overrides entries of ``simulation.parameters``; naming a
    parameter the study does not declare is an error.
    """
    root = Path(root)
    if not root.is_dir():
        raise StudyConfigError(root, [("", "study folder not found")])
    loaded: dict[str, Any] = {}
    files: dict[str, Any] = {}
    for key, (rel, model) in FILES.items():
        path = root / rel
        files[key] = read_json(path)
        if key != "environment":    # validated once its interventions' "$name" values are known
            loaded[key] = validate_file(path, model, files[key])

    sim: SimulationFile = loaded["simulation"]
    sim_path = root / FILES["simulation"][0]
    updates: dict[str, Any] = {}
    if steps is not None:
        updates["n_steps"] = steps
    if seed is not None:
        updates["seed"] = seed
    if rounds is not None:
        updates["interaction_rounds"] = rounds
    if params:
        unknown = sorted(set(params) - set(sim.parameters))
        if unknown:
            raise StudyConfigError(sim_path, [("parameters", f"unknown parameter(s) {unknown}; "
                                                             f"declared: {sorted(sim.parameters)}")])
        merged = dict(sim.parameters)
        for k, v in params.items():
            merged[k] = coerce_like(v, sim.parameters[k])
        updates["parameters"] = merged
    if updates:
        sim = validate_file(sim_path, SimulationFile, {**sim.model_dump(mode="json"), **updates})
    loaded["simulation"] = sim

    pops: PopulationFile = loaded["population"]
    pop_path = root / FILES["population"][0]
    if pops.personas is not None:
        _check_unique_ids(pop_path, pops.personas, "personas")

    # resolve "$param" references in the interventions and in every ref's args
    p = sim.parameters
    env_path = root / FILES["environment"][0]
    env: EnvironmentFile = validate_file(env_path, EnvironmentFile,
                                         substitute_interventions(files["environment"], p, env_path))
    loaded["environment"] = env
    sim.decision.args = substitute_parameters(sim.decision.args, p, sim_path, "decision.args")
    if sim.collector:
        sim.collector.args = substitute_parameters(sim.collector.args, p, sim_path, "collector.args")
    if pops.provider:
        pops.provider.args = substitute_parameters(pops.provider.args, p, pop_path, "provider.args")
    env.provider.args = substitute_parameters(env.provider.args, p, env_path, "provider.args")
    env.layers = substitute_parameters(env.layers, p, env_path, "layers")
    return StudySpec(root=root, files=files, **loaded)


def coerce_like(value: Any, like: Any) -> Any:
    """Turn a command-line string into the type of the parameter's declared default."""
    if not isinstance(value, str) or isinstance(like, str):
        return value
    try:
        if isinstance(like, bool):
            if value.lower() in ("true", "1", "yes"):
                return True
            if value.lower() in ("false", "0", "no"):
                return False
            raise ValueError(value)
        if isinstance(like, int):
            return int(value)
        if isinstance(like, float):
            return float(value)
    except ValueError:
        raise ValueError(f"parameter value '{value}' is not a {type(like).__name__}") from None
    return value


def read_roster(root: Path, roster: str) -> list[Persona]:
    """Personas from a roster file beside population.json: JSON (a list) or CSV (an ``agent_id`` column)."""
    path = root / "population" / roster
    if path.suffix.lower() == ".csv":
        try:
            with path.open(newline="", encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
        except FileNotFoundError:
            raise StudyConfigError(path, [("", "roster file not found")]) from None
        data = []
        for row in rows:
            agent_id = row.pop("agent_id", None)
            data.append({"agent_id": agent_id, "attributes": {k: _csv_value(v) for k, v in row.items()}})
    else:
        data = read_json(path)
    if not isinstance(data, list):
        raise StudyConfigError(path, [("", "expected a list of personas")])
    personas = []
    for i, item in enumerate(data):
        try:
            personas.append(Persona.model_validate(item))
        except ValidationError as e:
            raise StudyConfigError(path, [(f"[{i}].{_field_path(err['loc'])}", _describe(err)) for err in e.errors()]) from None
    _check_unique_ids(path, personas, "")
    return personas


def _csv_value(v: str) -> Any:
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def spec_from_config(root: str | Path, config: dict[str, Any], where: str = "stored run config") -> StudySpec:
    """Rebuild a study from the resolved configuration stored with a run (for resume and branches)."""
    loaded = {}
    for key, (_, model) in FILES.items():
        loaded[key] = validate_file(Path(f"{where}:{key}"), model, config[key])
    return StudySpec(root=Path(root), **loaded)
