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
silently falls back to a default is the worst kind of bug in a study. Types
are strict (``true`` is not an integer, ``"yes"`` is not a boolean) and
integers stay inside what the store can hold, so nothing that passes here
fails later, after a run has been recorded.
"""
from __future__ import annotations

import difflib
import json
import math
import operator
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic import Strict as StrictType

from desim.errors import StudyConfigError
from desim.records import INT32, Persona, Strict
from desim.study.interventions import Broadcast, ScheduledEvent, selector_matches
from desim.study.params import (parameter_fields, substitute_interaction, substitute_interventions,
                                substitute_parameters, typed_value)
from desim.versions import ENVIRONMENT_FILE, POPULATION_FILE, SIMULATION_FILE, STUDY_FILE

INT64 = 2**63 - 1
Int = Annotated[int, StrictType()]
Bool = Annotated[bool, StrictType()]
Number = Annotated[float, StrictType()]     # an integer is accepted, a string or boolean is not
Finite = Annotated[float, StrictType(), Field(allow_inf_nan=False)]     # a Number, and not NaN or infinite

TIME_UNITS = ("second", "minute", "hour", "day", "week", "month", "quarter", "year", "step")
PROPAGATIONS = ("independent", "contagion", "broadcast_then_local", "network")
"""``propagation`` labels (declarative; the engine never reads them): agents act on their own; they hear each
other through the message bus; a broadcast first, then the bus; or a state spreads along the network's edges,
read directly by the study's model (``desim.diffusion``) without a bus."""
# network kind -> (what it builds, the settings it needs, the settings it also reads)
NETWORKS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "none": ("no edges: nobody hears anybody through the network", (), ()),
    "complete": ("everyone connected to everyone", (), ()),
    "edges": ("the edges listed in `edges` (pairs of agent ids)", ("edges",), ("directed",)),
    "file": ("the edges of a file beside population.json: an edge list, a CSV with attribute columns, or "
             "GraphML (docs/network.md)", ("path",), ("format", "source_column", "target_column", "directed")),
    "ring": ("each agent joined to its `k` nearest agents in population order (k even: k/2 on each side; default 2)",
             (), ("k",)),
    "lattice": ("a `width` x `height` grid over the agents in population order (row by row), Moore (8 neighbours) "
                "or von Neumann (4), wrapping round when `torus`", ("width", "height"), ("neighborhood", "torus")),
    "watts_strogatz": ("a small world (Watts & Strogatz 1998): a ring of `k` neighbours (k even), each edge rewired with "
                       "probability `p`", ("k", "p"), ("graph_seed",)),
    "barabasi_albert": ("a scale-free network (Barabasi & Albert 1999): each new agent attaches to `m` existing "
                        "ones, preferentially to the well connected", ("m",), ("graph_seed",)),
    "erdos_renyi": ("a random graph G(n, p) (Erdos & Renyi 1959): each pair joined with probability `p`", ("p",),
                    ("graph_seed",)),
    "groups": ("cliques of the agents that share the persona attribute `attribute` (a dorm, a household)",
               ("attribute",), ()),
}
NETWORK_KINDS = tuple(NETWORKS)


class Ref(Strict):
    """Names Python code: ``model:ClassName`` inside the study, or ``package.module:Name``."""

    ref: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", description='"model:Name" in the study\'s '
                     'model.py, or "package.module:Name"')
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments it is built with")


class StudyFile(Strict):
    """What the study is: its name, its question, and how reports and the dashboard show it."""

    id: str = Field(pattern=r"^[A-Za-z0-9_\-]+$", description="the study's name in the store and in reports "
                    "(letters, digits, _ and -)")
    title: str = Field("", description="a title for reports and the dashboard")
    question: str = Field("", description="the research question, shown above the study's results")
    description: str = Field("", description="free text about the study; a `$name` of a parameter reads as the "
                             "value a run used (on its report card) or the study's own (on the dashboard)")
    display_metrics: list[str] = Field(default_factory=list, description="metrics the reports and dashboard "
                                       "show first")
    display_states: list[str] = Field(default_factory=list, description="state fields the reports and "
                                      "dashboard show first")
    state_colors: dict[str, dict[str, str]] = Field(default_factory=dict, description=(
        'per state field, a "#rrggbb" colour per category: {"status": {"S": "#4c9a5b", "I": "#d62728"}}'))
    tags: list[str] = Field(default_factory=list, description="free labels")
    metric_bounds: dict[str, tuple[Finite | None, Finite | None]] = Field(default_factory=dict, description=(
        'per metric, the [low, high] its values cannot leave: {"share_I": [0, 1]}, {"count_I": [0, null]} (null: '
        "no bound on that side); sweep and effect intervals are clipped to them (an effect's to [low - high, "
        "high - low]) and the clipped end is marked"))

    @model_validator(mode="after")
    def _colors(self) -> "StudyFile":
        for name, colors in self.state_colors.items():
            for category, color in colors.items():
                if not re.fullmatch(r"#[0-9a-fA-F]{6}", color):
                    raise ValueError(f"state_colors.{name}.{category}: {color!r} is not a #rrggbb colour")
        return self

    @field_validator("metric_bounds")
    @classmethod
    def _bounds(cls, bounds: dict[str, tuple[float | None, float | None]]) -> dict[str, tuple[float | None, float | None]]:
        for name, (low, high) in bounds.items():
            if low is None and high is None:
                raise ValueError(f"'{name}': no bound on either side (give [low, high], null for an open side)")
            if low is not None and high is not None and not low < high:
                raise ValueError(f"'{name}': low {low:g} is not below high {high:g} (give [low, high])")
        return bounds


class WarmStart(Strict):
    """Makes the run a branch of another run, as ``desim branch --from-run RUN --at-step T`` does, but with
    the study as loaded: its seed and parameters are this run's (give that run's ``--seed`` and ``--set``
    again), not inherited from that run, and anything but interventions at steps >= T must equal that run's."""

    from_run: str = Field(description="the run to branch from (its run id)")
    at_step: Int = Field(ge=1, le=INT32, description="the first step decided anew; steps 1..at_step-1 are that "
                                                      "run's, replayed from its stored actions")


class PanelOptions(Strict):
    """How the panel stores state fields: ``allow_nonfinite`` lists float fields that may hold NaN
    or infinity (elsewhere those stop the run, since they are usually a bug)."""

    allow_nonfinite: list[str] = Field(default_factory=list, description="float state fields that may hold "
                                       "NaN or infinity")


STOP_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">=": operator.ge,
            ">": operator.gt}


class StopWhen(Strict):
    """End the run after the first step (1 or later) whose metric ``metric`` satisfies ``op value`` (an
    epidemic that died out: ``{"metric": "count_I", "op": "<=", "value": 0}``). The run is ``completed``,
    with that step as its last and the condition as its reason. Several conditions: the first that holds.
    Conditions that must hold together are one ``{"all": [...]}`` (an SEIR is over when nobody is exposed
    and nobody infectious: ``{"all": [{"metric": "count_E", "value": 0}, {"metric": "count_I", "value": 0}]}``)."""

    metric: str | None = Field(None, min_length=1, description="a metric the collector writes each step")
    op: Literal["<", "<=", "==", "!=", ">=", ">"] = Field("<=", description="how the metric is compared")
    value: Number | None = Field(None, description='the value it is compared with (a number, or "$name" of a '
                                 'parameter)')
    all: list[StopWhen] | None = Field(None, min_length=2, description="instead of metric, op and value: "
                                       "conditions that must all hold at the same step")

    @model_validator(mode="after")
    def _one_form(self) -> StopWhen:
        if self.all is not None:
            # op at its default is what a stored configuration holds (runs.config of a run to resume): only
            # another op, given beside all, is a condition in two forms
            if self.metric is not None or self.value is not None or ("op" in self.model_fields_set and self.op != "<="):
                raise ValueError("give either metric, op and value, or all, not both")
            return self
        if self.metric is None or self.value is None:
            raise ValueError("a condition needs metric and value (op defaults to <=), or all: [conditions]")
        return self

    def metrics(self) -> list[str]:
        """The metrics the condition reads."""
        return [m for c in self.all for m in c.metrics()] if self.all is not None else [self.metric]

    def holds(self, metrics: dict[str, float]) -> bool:
        """Whether the step's ``metrics`` satisfy it (every metric it reads is in them)."""
        if self.all is not None:
            return all(c.holds(metrics) for c in self.all)
        return STOP_OPS[self.op](metrics[self.metric], self.value)

    def text(self) -> str:
        """As the run's end reason says it: ``count_I <= 0``, ``count_E <= 0 and count_I <= 0``."""
        if self.all is not None:
            return " and ".join(c.text() for c in self.all)
        return f"{self.metric} {self.op} {self.value:g}"


class SimulationFile(Strict):
    """How a run goes: its steps and rounds, its seed, the decision model and the collector."""

    n_steps: Int = Field(ge=1, le=INT32, description="steps in a run (--steps overrides)")
    time_unit: Literal[TIME_UNITS] = Field("step", description="what one step is (SimPy time advances by 1 "  # type: ignore[valid-type]
                                           "per step)")
    interaction_rounds: Int = Field(default=1, le=INT32, description="zero-duration rounds inside each step in "
                                    "which agents read and post (at least 1)")
    seed: Int = Field(default=0, ge=-INT64 - 1, le=INT64, description="the run's seed (--seed overrides): same "
                      "seed, same panel")
    decision: Ref = Field(description="the decision model: a rule, an LLM decision, or both")
    collector: Ref | None = Field(None, description="computes the step's metrics (default: none)")
    memory_window: Int = Field(default=5, ge=0, le=INT32, description="how many of its past actions an agent "
                               "remembers: its final-round action of each step it took part in, the latest "
                               "memory_window of them (a step it was away for adds none)")
    warm_start: WarmStart | None = Field(None, description="make the run a branch of another run: its steps "
                                         "before at_step replayed, the rest decided")
    record_rounds: Bool = Field(False, description="also store every round's actions (the round_actions table: "
                                  "a row per agent taking part, per round)")
    agent_processes: Bool = Field(True, description="one SimPy process per agent (false: the batch path, "
                                  "same panel)")
    parameters: dict[str, float | int | str | bool] = Field(default_factory=dict, description=(
        'named values, read by study code (ctx.params) and by "$name" in the files; --set name=value and '
        "sweeps override them"))
    llm: dict[str, Any] | None = Field(None, description="the LLM layer's settings (the llm block below)")
    panel: PanelOptions | None = Field(None, description="how the panel stores state fields")
    stop_when: list[StopWhen] = Field(default_factory=list, description="end the run early when a metric "
                                      "crosses a value")


class Interaction(Strict):
    """How agents are connected: ``kind`` picks explicit ``edges``, a network ``file`` or a seeded generator.

    A generator draws from the run's seed, or from ``graph_seed`` when it is given, so that the
    replicates of a sweep (whose seeds differ) share one network."""

    kind: Literal[NETWORK_KINDS] = Field("none", description="how the network is built (the kinds below)")  # type: ignore[valid-type]
    edges: list[tuple[str, str]] | None = Field(None, description="kind edges: [source, target] pairs of agent ids")
    path: str | None = Field(None, description="kind file: the network file, relative to population.json's folder")
    format: Literal["edgelist", "csv", "graphml"] | None = Field(
        None, description="kind file: the file's format; default from its suffix (.csv, .graphml, else an edge list)")
    source_column: str | None = Field(None, description='kind file, CSV: the column of the edges\' sources ("source")')
    target_column: str | None = Field(None, description='kind file, CSV: the column of the edges\' targets ("target")')
    graph_seed: Int | None = Field(None, ge=-INT64 - 1, le=INT64, description=(
        "a generator's own seed: the same network for every run seed (replicates of a sweep share it); "
        "default: drawn from the run seed"))
    k: Int | None = Field(None, ge=1, le=INT32, description="ring, watts_strogatz: neighbours on the ring")
    p: Number | None = Field(None, ge=0.0, le=1.0, description="watts_strogatz: rewiring probability; erdos_renyi: "
                                                              "edge probability")
    m: Int | None = Field(None, ge=1, le=INT32, description="barabasi_albert: edges of each new agent")
    width: Int | None = Field(None, ge=1, le=INT32, description="lattice: columns")
    height: Int | None = Field(None, ge=1, le=INT32, description="lattice: rows")
    neighborhood: Literal["moore", "von_neumann"] = Field("moore", description="lattice: 8 or 4 neighbours")
    torus: Bool = Field(True, description="lattice: wrap round the edges")
    attribute: str | None = Field(None, description="groups: the persona attribute the groups share")
    directed: Bool = Field(False, description="edges, file: edges have a direction (a reads b: b -> a)")

    @model_validator(mode="after")
    def _needs(self) -> "Interaction":
        missing = [f for f in NETWORKS[self.kind][1] if getattr(self, f) is None]
        if missing:
            raise ValueError(f"interaction kind '{self.kind}' needs {', '.join(missing)}")
        if self.kind in ("ring", "watts_strogatz") and self.k is not None and self.k % 2:
            # k/2 neighbours on each side of the ring: an odd k would silently become k - 1
            raise ValueError(f"interaction kind '{self.kind}' needs an even k (k/2 neighbours on each side of "
                             f"the ring), got {self.k}")
        return self

    def unused(self) -> list[str]:
        """Settings given that this kind does not read (``desim validate`` warns: probably a mistake)."""
        _, needs, reads = NETWORKS[self.kind]
        return [name for name in self.model_fields_set - {"kind"} if name not in needs + reads]


class PopulationFile(Strict):
    """Who the agents are (exactly one of ``personas``, ``roster``, ``provider``) and how they are connected."""

    personas: list[Persona] | None = Field(None, description="the agents, listed (one of personas, roster, "
                                           "provider)")
    roster: str | None = Field(None, description="a file of personas beside population.json: CSV "
                               "(an agent_id column, the others attributes) or JSON (a list of personas)")
    provider: Ref | None = Field(None, description="Python code that returns the personas")
    interaction: Interaction = Field(default_factory=Interaction, description="the network (below)")
    propagation: Literal[PROPAGATIONS] = Field("independent", description="how influence travels, as a "  # type: ignore[valid-type]
                                               "label checked by desim validate: " + ", ".join(PROPAGATIONS))

    @model_validator(mode="after")
    def _one_source(self) -> "PopulationFile":
        given = [n for n in ("personas", "roster", "provider") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of personas, roster, provider (got {given or 'none'})")
        return self


class EnvironmentFile(Strict):
    """What the agents live in: the environment's code, its named values and the interventions that change them."""

    provider: Ref = Field(description="the environment: what agents observe and what their actions do")
    layers: dict[str, Any] = Field(default_factory=dict, description="named environment values (the "
                                   "scheduled events' targets)")
    scheduled_events: list[ScheduledEvent] = Field(default_factory=list, description="changes at a step")
    broadcasts: list[Broadcast] = Field(default_factory=list, description="information shown from a step")


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
        return rounds_run(self.simulation.interaction_rounds)

    def resolved(self) -> dict[str, Any]:
        """The whole configuration as plain JSON data (stored with every run)."""
        return {
            # a study that declares no metric_bounds records the config it recorded before the field existed,
            # so the controls already in its store are still found for reuse (Catalogue.reusable_control)
            "study": self.study.model_dump(mode="json", exclude=None if self.study.metric_bounds
                                           else {"metric_bounds"}),
            "simulation": self.simulation.model_dump(mode="json"),
            "population": self.population.model_dump(mode="json", exclude_none=True),
            "environment": self.environment.model_dump(mode="json"),
        }


FILES = {
    "study": (STUDY_FILE, StudyFile),
    "simulation": (SIMULATION_FILE, SimulationFile),
    "population": (POPULATION_FILE, PopulationFile),
    "environment": (ENVIRONMENT_FILE, EnvironmentFile),
}


def field_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def describe_error(err: dict) -> str:
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):    # a model's, a dataclass's (Persona)
        return "unknown key (check the spelling; unknown keys are not allowed)"
    if err["type"] in ("missing", "missing_argument"):
        return "required field is missing"
    got = err.get("input")
    kind = type(got).__name__ if got is not None else "null"
    msg = err["msg"]
    if err["type"] in ("value_error", "assertion_error") or err["loc"] == ():
        return msg.removeprefix("Value error, ")
    return f"{msg} (got {kind} {json.dumps(got, default=str)[:60]})"


def read_text(path: Path, what: str = "file") -> str:
    """A UTF-8 text file (a byte-order mark is dropped); any failure names the file."""
    try:
        return path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise StudyConfigError(path, [("", f"{what} not found")]) from None
    except IsADirectoryError:
        raise StudyConfigError(path, [("", f"is a directory, not a {what}")]) from None
    except UnicodeDecodeError as e:
        line = path.read_bytes()[:e.start].count(b"\n") + 1
        raise StudyConfigError(path, [("", f"not UTF-8 text: byte 0x{e.object[e.start]:02x} at line {line} "
                                           "(save the file as UTF-8)")]) from None
    except OSError as e:
        raise StudyConfigError(path, [("", f"cannot be read: {e.strerror or e}")]) from None


class _NotJSON(ValueError):
    """A number Python's reader would take but a study cannot hold: ``NaN`` or ``Infinity`` (JSON has no such
    numbers), or one too large for a float (``1e999``, which Python reads as infinity without a word).
    ``args``: the text as written, and what is wrong with it."""


def _refuse_constant(name: str) -> Any:
    raise _NotJSON(name, "is not a JSON number (JSON has no NaN or Infinity; give a number, or leave the field out)")


def _finite_float(text: str) -> float:
    """A JSON number with a point or an exponent, refused when it overflows a float: read as infinity it
    would pass every check a field makes of a number and be stored as the non-standard ``Infinity``."""
    value = float(text)
    if math.isinf(value):
        raise _NotJSON(text, "is outside the range of a float (it would be read as infinity, and JSON has no "
                             "Infinity); give a finite number")
    return value


def _integer(text: str) -> int:
    """A JSON integer; one of more digits than Python converts (4,300) is refused as out of range rather than
    escaping as Python's own ``ValueError``."""
    try:
        return int(text)
    except ValueError:
        raise _NotJSON(text, f"is an integer of {len(text.lstrip('-'))} digits, far outside what a study "
                             "file can hold") from None


class _TwiceGiven(ValueError):
    """A key given twice in one object: Python's reader keeps the last, so a value pasted in twice (an old
    ``n_steps`` above a new one) would be taken without a word."""


def _refuse_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) < len(pairs):
        seen = set()
        raise _TwiceGiven(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return out


def read_json(path: Path) -> Any:
    """Read a JSON file; a syntax error names the file, line and column. ``NaN`` and ``Infinity`` are
    refused like any other error of syntax: they are not JSON, and a value that is not a number would
    otherwise reach a field's check as something else (``None`` once re-read). So is a number too large
    for a float (``1e999``), which Python's reader turns into that same infinity."""
    text = read_text(path)
    if not text.strip():        # JSON's own word for it is "Expecting value: line 1 column 1"
        raise StudyConfigError(path, [("", "the file is empty; it must hold JSON (a study file: an object, {...})")])
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_integer,
                          object_pairs_hook=_refuse_repeated_keys)
    except _TwiceGiven as e:
        key = str(e)
        # the lines when the key is written only twice in the file (elsewhere it may be another object's key)
        lines = [text.count("\n", 0, m.start()) + 1 for m in re.finditer(rf'"{re.escape(key)}"\s*:', text)]
        where = ("" if len(lines) != 2 else f" (line {lines[0]})" if lines[0] == lines[1]
                 else f" (lines {lines[0]} and {lines[1]})")
        raise StudyConfigError(path, [("", f"'{key}' is given twice in one object{where}: JSON readers keep one of "
                                           "them without a word; give it once")]) from None
    except json.JSONDecodeError as e:
        raise StudyConfigError(path, [("", f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}")]) from None
    except _NotJSON as e:
        written, why = e.args
        at = re.search(rf"(?<![\w\".]){re.escape(written)}(?![\w\".])", text)
        line, column = (text.count("\n", 0, at.start()) + 1, at.start() - text.rfind("\n", 0, at.start())) \
            if at else (None, None)
        where = f" at line {line} column {column}" if at else ""
        shown = written if len(written) <= 40 else f"{written[:20]}...{written[-8:]}"
        raise StudyConfigError(path, [("", f"malformed JSON{where}: {shown} {why}")]) from None
    except RecursionError:
        raise StudyConfigError(path, [("", "JSON nested too deeply to be a study file")]) from None


def validate_file(path: Path, model: type[BaseModel], data: Any) -> BaseModel:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise StudyConfigError(path, config_problems(model, data, e.errors())) from None


KEY_IN_FILES = ("a key in the study's files would be stored with every run and shared with the study; set it "
                "in DESIM_LLM_API_KEY instead")


def rounds_run(interaction_rounds: int) -> int:
    """The rounds a step runs for a file's (or a stored run's) ``interaction_rounds``: the seed clamps it to
    ``max(1, ...)``, so 0 and 1 are the same study."""
    return max(1, interaction_rounds)


def config_problems(model: type[BaseModel], data: Any, errors: list[dict],
                    prefix: tuple = ()) -> list[tuple[str, str]]:
    """The ``(field, message)`` problems of ``data`` validated as ``model`` (pydantic's ``errors``), an unknown
    key close to a known one saying which it may be (``n_step``: "did you mean 'n_steps'?"). Every check of a
    study file's object says its problems through this; ``prefix`` is where ``data`` sits in its file (the
    ``llm`` block of ``simulation.json``: ``("llm",)``)."""
    errors = _one_per_union(data, errors)
    meant = _optional_meant(model, data, errors)
    return _misspelt([(err["type"], prefix + tuple(err["loc"]), describe_error(err)) for err in errors],
                     {prefix + loc: name for loc, name in meant.items()})


_KIND_OF = {"float_type": "a number", "int_type": "a number", "int_from_float": "a number", "string_type": "text",
            "bool_type": "true/false", "dict_type": "an object", "model_type": "an object", "model_attributes_type":
            "an object", "list_type": "a list", "tuple_type": "a list"}
"""What each of pydantic's type errors asks for, in the words of a JSON file."""


def _one_per_union(data: Any, errors: list[dict]) -> list[dict]:
    """``errors`` with those of one union's alternatives made one. pydantic tries a value against each type of
    a union and says every refusal, each at the field plus the alternative's tag (``parameters.gamma.float``,
    ``.int``, ``.str``, ``.bool`` for ``"gamma": null``): four lines naming types the file never spells. An
    error is an alternative's when its field's parent is the value it refused (a field inside the value would
    have refused a part of it). When every alternative refused the kind of value, that is one problem at the
    field (``null is not allowed (a number, text or true/false)``); when one took the kind but not the value
    (out of range), its refusal is the problem, at the field without the tag."""
    groups: dict[tuple, list[int]] = {}
    for i, err in enumerate(errors):
        loc = tuple(err["loc"])
        if len(loc) > 0 and isinstance(loc[-1], str) and err["type"] not in ("missing", "extra_forbidden") \
                and _found(data, loc[:-1]) is err.get("input", _ABSENT):
            groups.setdefault(loc[:-1], []).append(i)
    unions = {at: members for at, members in groups.items() if len(members) > 1}
    if not unions:
        return errors
    first = {members[0]: at for at, members in unions.items()}
    inside = {i for members in unions.values() for i in members}
    out = []
    for i, err in enumerate(errors):
        if i in first:
            at = first[i]
            members = [errors[j] for j in unions[at]]
            kept = [e for e in members if e["type"] not in _KIND_OF]
            if kept:            # an alternative of the value's kind refused the value: its reason stands
                out += [{**e, "loc": at} for e in kept]
            else:
                kinds = list(dict.fromkeys(_KIND_OF[e["type"]] for e in members))
                wanted = ", ".join(kinds[:-1]) + f" or {kinds[-1]}" if len(kinds) > 1 else kinds[0]
                shown = json.dumps(err.get("input"), default=str)
                out.append({"type": "value_error", "loc": at, "input": err.get("input"),
                            "msg": f"{shown if len(shown) <= 40 else shown[:37] + '...'} is not allowed ({wanted})"})
        elif i not in inside:
            out.append(err)
    return out


_ABSENT = object()


def _found(data: Any, loc: tuple) -> Any:
    """The value at ``loc`` in ``data`` (a field path of pydantic's), or a marker no error's input is."""
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and -len(data) <= part < len(data):
            data = data[part]
        else:
            return _ABSENT
    return data


def _models_at(model: type[BaseModel], loc: tuple) -> list[type[BaseModel]]:
    """The models whose object sits at ``loc`` inside ``model``: through fields, list items and dict
    values; a union gives each of its models that fits (an event of either kind)."""
    def inside(annotation: Any) -> list[Any]:
        """``annotation`` with Optional, unions and Annotated opened up."""
        args = typing.get_args(annotation)
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            return [a for arg in args for a in inside(arg)]
        if typing.get_origin(annotation) is typing.Annotated:
            return inside(args[0])
        return [annotation]

    current: list[Any] = [model]
    for part in loc:
        following = []
        for kind in (k for a in current for k in inside(a)):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                if isinstance(part, str) and part in kind.model_fields:
                    following.append(kind.model_fields[part].annotation)
            elif typing.get_origin(kind) in (list, tuple) and isinstance(part, int):
                following += list(typing.get_args(kind)[:1])
            elif typing.get_origin(kind) is dict and isinstance(part, str):
                following += list(typing.get_args(kind)[1:2])
        current = following
    return [k for a in current for k in inside(a) if isinstance(k, type) and issubclass(k, BaseModel)]


def _optional_meant(model: type[BaseModel], data: Any, errors: list[dict]) -> dict[tuple, str]:
    """For an unknown key, the optional key of its object it is close to (``interaction_round`` for
    ``interaction_rounds``), when that key is not given: unknown keys are refused, so a typo in an optional
    key would otherwise be read as the default without a word."""
    meant = {}
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] != "extra_forbidden" or not loc or not isinstance(loc[-1], str):
            continue
        given = data
        for part in loc[:-1]:
            given = given[part] if isinstance(given, (dict, list)) else None
        names = {name for kind in _models_at(model, loc[:-1]) for name in kind.model_fields} - set(given or ())
        near = difflib.get_close_matches(loc[-1], sorted(names), n=1, cutoff=0.75)
        if near:
            meant[loc] = near[0]
    return meant


def read_study_file(root: str | Path) -> StudyFile:
    """The study's ``study.json``, validated: its name, question and what reports show first. Every reader
    of a study's face (reports, effects, sweeps, the dashboard) comes here, so a malformed entry is one
    error naming the file and field, never a reader's own guess (``list("status")`` as display states)."""
    path = Path(root) / STUDY_FILE
    return validate_file(path, StudyFile, read_json(path))


def is_study_folder(folder: str | Path) -> bool:
    """Whether ``folder`` holds a study (a ``study.json``): how listings find studies among other folders."""
    return (Path(folder) / STUDY_FILE).is_file()


def study_file_or_none(root: str | Path) -> StudyFile | None:
    """:func:`read_study_file`, or None when the file is missing or invalid: for views that show a title or
    colours beside the error another part of the same page reports (the dashboard's study card)."""
    try:
        return read_study_file(root)
    except StudyConfigError:
        return None


def _misspelt(errors: list[tuple[str, tuple, str]], optional: dict[tuple, str] | None = None) -> list[tuple[str, str]]:
    """The problems as ``(field, message)``; an unknown key beside a missing one it is close to (``n_step``
    for ``n_steps``) is one problem, the typo, not two. An unknown key close to a known optional key
    (``optional``, from :func:`_optional_meant`) says which."""
    missing = {loc[:-1]: [] for kind, loc, _ in errors if kind == "missing"}
    for kind, loc, _ in errors:
        if kind == "missing":
            missing[loc[:-1]].append(str(loc[-1]))
    meant: dict[tuple, str] = {}
    for kind, loc, _ in errors:
        if kind == "extra_forbidden" and loc[:-1] in missing:
            close = difflib.get_close_matches(str(loc[-1]), missing[loc[:-1]], n=1, cutoff=0.75)
            if close:
                meant[loc] = close[0]
    taken = {loc[:-1] + (name,) for loc, name in meant.items()}
    out = []
    for kind, loc, message in errors:
        if loc in meant:
            message = f"unknown key; did you mean '{meant[loc]}'? (required, and missing)"
        elif optional and tuple(loc) in optional:
            message = f"unknown key; did you mean '{optional[tuple(loc)]}'? (unknown keys are not allowed)"
        elif kind == "missing" and tuple(loc) in taken:
            continue
        out.append((field_path(loc), message))
    return out


def check_unique_ids(path: Path, personas: list[Persona], where: str) -> None:
    seen: dict[str, int] = {}
    for i, p in enumerate(personas):
        if p.agent_id in seen:
            raise StudyConfigError(path, [(f"{where}[{i}].agent_id",
                                           f"duplicate agent_id '{p.agent_id}' (first at {where}[{seen[p.agent_id]}])")])
        seen[p.agent_id] = i


def load_study(root: str | Path, *, steps: int | None = None, seed: int | None = None,
               rounds: int | None = None, params: dict[str, Any] | None = None) -> StudySpec:
    """Load and validate a study folder, applying command-line overrides.

    ``params`` overrides entries of ``simulation.parameters``; naming a
    parameter the study does not declare is an error.
    """
    root = Path(root)
    _check_folder(root)
    loaded: dict[str, Any] = {}
    files: dict[str, Any] = {}
    for key, (rel, model) in FILES.items():
        path = root / rel
        files[key] = read_json(path)
        if key not in ("environment", "population"):    # validated once their "$name" values are known
            data = files[key]
            if key == "simulation" and isinstance(data, dict) and "stop_when" in data:
                data = {k: v for k, v in data.items() if k != "stop_when"}     # its "$name" values: below
            loaded[key] = validate_file(path, model, data)

    sim: SimulationFile = loaded["simulation"]
    sim_path = root / FILES["simulation"][0]
    if isinstance(sim.llm, dict) and "api_key" in sim.llm:     # whatever decides: the block is stored with runs
        raise StudyConfigError(sim_path, [("llm.api_key", KEY_IN_FILES)])
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
            try:
                merged[k] = coerce_like(v, sim.parameters[k])
            except ValueError as e:
                given = "--set value" if isinstance(v, str) else "value"
                raise StudyConfigError(sim_path, [(f"parameters.{k}", f"{given} {e} (declared as "
                                                   f"{json.dumps(sim.parameters[k])})")]) from None
        updates["parameters"] = merged
    raw_sim = files["simulation"]
    if isinstance(raw_sim, dict) and "stop_when" in raw_sim:
        updates["stop_when"] = substitute_parameters(raw_sim["stop_when"], updates.get("parameters", sim.parameters),
                                                     sim_path, "stop_when")
    if updates:
        try:
            sim = validate_file(sim_path, SimulationFile, {**sim.model_dump(mode="json"), **updates})
        except StudyConfigError as e:      # a value from the command line: say so, the file may be right
            given = {"n_steps": ("--steps", steps), "seed": ("--seed", seed), "interaction_rounds": ("--rounds", rounds)}
            raise StudyConfigError(e.file, [
                (field, f"{msg}; the value is {given[field][0]} {given[field][1]} (the file says "
                        f"{json.dumps(getattr(sim, field))})" if field in given and given[field][1] is not None
                 else msg) for field, msg in e.problems]) from None
    loaded["simulation"] = sim

    pop_path = root / FILES["population"][0]
    try:
        pops: PopulationFile = validate_file(pop_path, PopulationFile,
                                             substitute_interaction(files["population"], sim.parameters, pop_path))
    except StudyConfigError as e:
        raise _from_parameters(e, files["population"], sim.parameters, params or {}) from None
    loaded["population"] = pops
    if pops.personas is not None:
        if not pops.personas:
            raise StudyConfigError(pop_path, [("personas", "the list is empty: a study needs at least one agent")])
        check_unique_ids(pop_path, pops.personas, "personas")
    for i, (a, b) in enumerate(pops.interaction.edges or []):
        if a == b:
            raise StudyConfigError(pop_path, [(f"interaction.edges[{i}]", f"self-loop '{a}' -> '{b}': an agent "
                                               "never reads its own posts, so it would change nothing; remove it")])

    # resolve "$param" references in the interventions and in every ref's args
    p = sim.parameters
    env_path = root / FILES["environment"][0]
    try:
        env: EnvironmentFile = validate_file(env_path, EnvironmentFile,
                                             substitute_interventions(files["environment"], p, env_path))
    except StudyConfigError as e:
        raise _from_parameters(e, files["environment"], p, params or {}) from None
    loaded["environment"] = env
    sim.decision.args = substitute_parameters(sim.decision.args, p, sim_path, "decision.args")
    if sim.collector:
        sim.collector.args = substitute_parameters(sim.collector.args, p, sim_path, "collector.args")
    if pops.provider:
        pops.provider.args = substitute_parameters(pops.provider.args, p, pop_path, "provider.args")
    env.provider.args = substitute_parameters(env.provider.args, p, env_path, "provider.args")
    env.layers = substitute_parameters(env.layers, p, env_path, "layers")
    _check_layers(env_path, env)
    return StudySpec(root=root, files=files, **loaded)


def _check_folder(root: Path) -> None:
    """The study folder exists; a path the system refuses to look at (a name too long, a loop of links) is
    said as that, naming it, rather than as Python's ``OSError``."""
    try:
        found = root.is_dir()
    except OSError as e:
        raise StudyConfigError(root, [("", f"cannot be a study folder: {e.strerror or e}")]) from None
    if not found:
        raise StudyConfigError(root, [("", "study folder not found")])


def _from_parameters(err: StudyConfigError, raw: Any, params: dict[str, Any],
                     given: dict[str, Any]) -> StudyConfigError:
    """``err`` with each refused value that came from a ``"$name"`` naming its parameter, its value and
    where that was set (``--set`` or the default in simulation.json): the user's cause, not only the field."""
    came_from = parameter_fields(raw)
    problems = []
    for field, msg in err.problems:
        name = came_from.get(field)
        if name is not None and name in params:
            origin = "set by --set" if name in given else "its default in simulation.json"
            msg = f"{msg}; the value is parameter '{name}' = {json.dumps(params[name], default=str)} ({origin})"
        problems.append((field, msg))
    return StudyConfigError(err.file, problems)


def _check_layers(path: Path, env: EnvironmentFile) -> None:
    """An event without a selector changes a layer: it must be one ``layers`` declares (a typo
    would otherwise make a new layer nobody reads, or fail mid-run on ``add``), and a ``set`` of a layer
    that holds a number must give a number (:func:`_sets_a_number`)."""
    for i, ev in enumerate(env.scheduled_events):
        if ev.selector is None and ev.target not in env.layers:
            known = f"layers: {', '.join(env.layers)}" if env.layers else "environment.json declares no layers"
            raise StudyConfigError(path, [(f"scheduled_events[{i}].target", f"unknown layer '{ev.target}' "
                                           f"({known}; an event with a selector changes agent attributes)")])
        if ev.selector is None and not _sets_a_number(ev.op, ev.value, env.layers[ev.target]):
            raise StudyConfigError(path, [(f"scheduled_events[{i}].value", (
                f"{json.dumps(ev.value, default=str)[:40]} is not a number (layer {ev.target} is "
                f"{json.dumps(env.layers[ev.target])}): the study's code reads a number there, and would fail "
                "or misread it at that step, mid-run; give a number"))])


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _sets_a_number(op: str, value: Any, layer: Any) -> bool:
    """Whether an event's ``value`` fits the layer it changes. Only what cannot be right is refused: a
    ``set`` of a layer declared as a number to text, a flag, null, a list or an object (the study's code
    does arithmetic with it, and ``"abc"`` failed there at the event's step, deep in the run). A layer of
    text, a flag or null may be set to anything; ``add`` and ``multiply`` check their own value."""
    return op != "set" or not _is_number(layer) or _is_number(value)


def check_population(spec: StudySpec, personas: list[Persona]) -> None:
    """What needs the population: it is not empty, and every selector of ``environment.json``
    names attributes the agents have and matches at least one agent.

    A selector on an attribute that an earlier event changes is checked only
    for the name: whom it matches then depends on the run.
    """
    pop_path = spec.root / FILES["population"][0]
    if not personas:
        raise StudyConfigError(pop_path, [("", "the population is empty: a study needs at least one agent")])
    env, path = spec.environment, spec.root / FILES["environment"][0]
    events = [(ev.at_step, i, ev.target) for i, ev in enumerate(env.scheduled_events) if ev.selector is not None]
    have = {k for p in personas for k in p.attributes} | {target for _, _, target in events}
    items = ([(f"scheduled_events[{i}]", (ev.at_step, i), ev) for i, ev in enumerate(env.scheduled_events)]
             + [(f"broadcasts[{i}]", (b.at_step, len(events)), b) for i, b in enumerate(env.broadcasts)])
    for where, when, item in items:
        if not item.selector:
            continue
        changing = {target for at, i, target in events if (at, i) < when}
        for key in item.selector:
            if key not in have:
                raise StudyConfigError(path, [(f"{where}.selector.{key}", f"no agent has attribute '{key}' "
                                               f"(attributes: {', '.join(sorted(have)) or 'none'})")])
        if set(item.selector) & changing:
            continue
        matched = [p for p in personas if selector_matches(item.selector, p.attributes)]
        if not matched:
            raise StudyConfigError(path, [(f"{where}.selector", f"{json.dumps(item.selector)} matches no "
                                           f"agent of the {len(personas)}")])
        op = getattr(item, "op", "set")
        if op != "set" and item.target not in changing:
            lacking = next((p for p in matched if isinstance(p.attributes.get(item.target), bool)
                            or not isinstance(p.attributes.get(item.target), (int, float))), None)
            if lacking is not None:
                raise StudyConfigError(path, [(f"{where}.target", f"cannot {op} attribute '{item.target}' of "
                                               f"agent '{lacking.agent_id}': it is "
                                               f"{json.dumps(lacking.attributes.get(item.target))}, not a number")])


def coerce_like(value: Any, like: Any) -> Any:
    """``value`` (``--set`` text, or a value from Python) as the type of the parameter's declared default
    ``like``: the one rule, :func:`desim.study.params.typed_value`, for ``load_study``, sweeps and effects."""
    return typed_value(value, like)


def spec_from_config(root: str | Path, config: dict[str, Any], where: str = "stored run config") -> StudySpec:
    """Rebuild a study from the resolved configuration stored with a run (for resume and branches)."""
    loaded = {}
    for key, (_, model) in FILES.items():
        loaded[key] = validate_file(Path(f"{where}:{key}"), model, config[key])
    return StudySpec(root=Path(root), **loaded)
