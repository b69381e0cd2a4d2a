"""Study parameters: ``"$name"`` in a study file stands for the parameter ``name`` of
``simulation.json`` (after ``--set``), so that a model's arguments and an intervention's timing can be
set, swept and branched without editing the files.

The one place that reads ``"$name"``: :func:`substitute_parameters` replaces references in a value,
:func:`substitute_interventions` in the fields of ``environment.json``'s interventions that may hold
them, :func:`substitute_interaction` in the network settings of ``population.json``, and :func:`parameter_uses` says where each parameter is referenced (a branch may change only
those its interventions use).

The one rule for a parameter's type, whatever the way in (``--set`` text, ``params=`` from Python, a
sweep's grid, an effect's arms): :func:`typed_value`.
"""
from __future__ import annotations

import math
import numbers
import re
from pathlib import Path
from typing import Any

from desim.errors import StudyConfigError
from desim.versions import ENVIRONMENT_FILE, POPULATION_FILE, SIMULATION_FILE, code_files

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


ARGUMENTS = re.compile(r"^(decision|collector|provider)\.args\.")
"""The fields a model's own checks name: its arguments (the files' other ``"$name"`` fields are checked as the
study loads, naming the parameter already)."""


def named_where_set(error: StudyConfigError, spec: Any) -> StudyConfigError:
    """``error``, raised by a model on an argument that held ``"$name"`` (``decision.args.gamma``, or
    environment.json's ``provider.args.seed_fraction`` for ``"$seed_share"``), named where the user sets the
    value: ``simulation/simulation.json: parameters.seed_share (used as provider.args.seed_fraction)``
    (:meth:`StudyConfigError.from_parameters`). A parameter whose value is not the file's was given by ``--set``
    or ``params=``, and the problem says so."""
    files = spec.files or {}
    written = files.get("simulation", {}).get("parameters", {}) if isinstance(files.get("simulation"), dict) else {}
    given = {name for name, value in spec.simulation.parameters.items() if written.get(name, value) != value}
    for key, rel in (("simulation", SIMULATION_FILE), ("population", POPULATION_FILE),
                     ("environment", ENVIRONMENT_FILE)):
        if Path(error.file) in (Path(rel), Path(spec.root) / rel):
            used = {field: name for field, name in parameter_fields(files.get(key)).items() if ARGUMENTS.match(field)}
            return error.from_parameters(used, SIMULATION_FILE, given)
    return error


def bad_parameter(study: str, name: str, message: str) -> StudyConfigError:
    """The error a model raises for a parameter it cannot use, named where the user sets it (``--set
    name=...`` or ``simulation.json``'s ``parameters``): ``simulation/simulation.json:
    parameters.<name>: <study>: <message>``."""
    return StudyConfigError(SIMULATION_FILE, [(f"parameters.{name}", f"{study}: {message}")])


def check_parameters(study: str, checks: list[tuple[str, bool, str]]) -> None:
    """Raise one :func:`bad_parameter` error naming every ``(name, ok, message)`` whose check failed,
    so a user fixes them all at once rather than one run at a time."""
    problems = [(f"parameters.{name}", f"{study}: {message}") for name, ok, message in checks if not ok]
    if problems:
        raise StudyConfigError(SIMULATION_FILE, problems)


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


def python_texts(root: Path) -> dict[str, str]:
    """The text of each Python file of the study (``{relative path: text}``), read once for the searches of
    :func:`mentioned_in_code`: listing the study's files hashes every one of them."""
    return {rel: (root / rel).read_text(encoding="utf-8", errors="replace")
            for rel in code_files(root) if rel.endswith(".py")}


def mentioned_in_code(texts: dict[str, str], name: str, also_a_value: bool = False) -> list[str]:
    """The study Python files of ``texts`` (:func:`python_texts`) that spell ``name`` as a string literal
    (code may read ``ctx.params``).

    A parameter named after the layer or attribute its event sets (``advisory_push``) is spelled in code that
    reads the value (``interventions.value("advisory_push")``, an observation's ``["advisory_push"]``), not the
    parameter: with ``also_a_value`` only a read of ``params`` counts (``ctx.params["advisory_push"]``,
    ``self.ctx.params.get('advisory_push')``)."""
    quoted = f"""["']{re.escape(name)}["']"""
    pattern = re.compile(rf"params\s*(\[\s*|\.get\(\s*){quoted}" if also_a_value else quoted)
    return [rel for rel, text in texts.items() if pattern.search(text)]


def unread_parameters(spec) -> dict[str, str]:
    """The declared parameters nothing in the study reads, each with why it seems so: no ``"$name"`` in its
    files, and no Python file in its folder that names it (code reads a parameter as ``ctx.params["name"]``).
    Code outside the folder (an installed package, a module beside a notebook) may still read one, which
    is why callers warn, or refuse with a way through, rather than decide."""
    uses = parameter_uses(spec.files) if spec.files else {}
    unused = [name for name in spec.simulation.parameters if name not in uses]
    texts = python_texts(spec.root) if unused else {}
    return {name: (f"nothing in the study reads parameter '{name}': no \"${name}\" in its files and no Python "
                   f"file in its folder names '{name}' (as ctx.params[\"{name}\"])")
            for name in unused if not mentioned_in_code(texts, name)}


def described(text: str, values: dict[str, Any] | None) -> str:
    """A study's description with each ``$name`` of a parameter in ``values`` as its value ("From day
    $testing_starts" reads "From day 10"): authors name a parameter there as they do in the study's files,
    and a reader of a run's card or the dashboard should see the number the run used, not a placeholder.
    A ``$word`` that is no parameter stays as written."""
    if not values or "$" not in text:
        return text

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            return match.group(0)
        v = values[name]
        return ("true" if v else "false") if isinstance(v, bool) else f"{v:g}" if isinstance(v, float) else str(v)
    return re.sub(r"\$([A-Za-z_]\w*)", value, text)


def parameter_fields(raw: Any) -> dict[str, str]:
    """Which parameter each field of one raw study file holds: ``{"scheduled_events[0].at_step":
    "campaign_week"}``, fields named as the file's validation errors name them."""
    return {where.removeprefix("file."): name for name, wheres in parameter_uses({"file": raw}).items()
            for where in wheres}


KINDS = {bool: "true or false", int: "an int", float: "a float", str: "text"}
A_KIND = {bool: "a bool", int: "an int", float: "a float", str: "text"}


def typed_value(value: Any, declared: Any) -> Any:
    """``value`` as a value of the type of the parameter's declared default ``declared``: the one rule for
    a parameter's type, for ``--set`` and for ``params=`` from Python alike, so that what ``runs.parameters``
    records is what the model ran with.

    Text is read as ``--set`` reads it (``"100"`` is 100, ``"yes"`` is True for a bool). Any other value
    must be of the declared kind already; a numpy scalar becomes the Python value of that kind
    (``np.int64(100)`` is 100, ``np.bool_(True)`` is True) and an int is taken for a float (3 is 3.0, as
    ``--set x=3`` is). Refused, with a ``ValueError`` its caller prefixes with the parameter's name:

    * a bool for a number and a number for a bool: Python's ``True == 1`` would run one agent;
    * a float for an int, even an integral one (``100.0``): ``--set n=100.0`` and the study files' strict
      types refuse it too, so the rule is one, and a float that reaches an int parameter is more often a
      computed value that is off (``np.linspace``) than one meant; the message says which int to give;
    * NaN or infinity for a float; anything but text for a text parameter.
    """
    want = _kind(declared)
    if want is None:            # no kind a study file can declare: nothing to check against
        return value
    if isinstance(value, str) and want is not str:
        return _from_text(value, want)
    have = _kind(value)
    if have is want or (have is int and want is float):
        try:
            typed = want(value)
        except OverflowError:   # an int too large for a float
            typed = math.inf
        if want is float and not math.isfinite(typed):
            raise ValueError(f"{value!r} is not a finite float")
        return typed
    if have is None:
        raise ValueError(f"{value!r} ({type(value).__name__}) is not {KINDS[want]}")
    hint = f": give {int(value)} if that is meant" if have is float and want is int and float(value).is_integer() else ""
    raise ValueError(f"{value!r} is {A_KIND[have]}, not {KINDS[want]}{hint}")


def _kind(value: Any) -> type | None:
    """``bool``, ``int``, ``float`` or ``str`` for a Python or numpy scalar of that kind; None otherwise."""
    if isinstance(value, bool):
        return bool
    if isinstance(value, str):
        return str
    dtype = getattr(value, "dtype", None)
    if dtype is not None and getattr(value, "shape", None) == ():       # a numpy scalar
        return {"b": bool, "i": int, "u": int, "f": float}.get(dtype.kind)
    if isinstance(value, numbers.Integral):
        return int
    if isinstance(value, numbers.Real):
        return float
    return None


def _from_text(text: str, want: type) -> Any:
    """A ``--set`` value: text read as the declared kind (``bool``, ``int`` or ``float``)."""
    try:
        if want is bool:
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise ValueError(text)
        if want is int:
            return int(text)
        number = float(text)
        if not math.isfinite(number):
            raise ValueError(text)
        return number
    except ValueError:
        raise ValueError(f"'{text}' is not {KINDS[want]}") from None
