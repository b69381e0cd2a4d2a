"""A study built in Python: ``desim.Study(...)``, the same thing a study folder describes.

A notebook can build a study from its classes (or instances, or ``"module:Class"`` refs), run it
and read it without writing a JSON file by hand::

    study = desim.Study(environment=MyEnv, decision=MyRule(epsilon=0.2), population=100, steps=12)
    result = desim.run_study(study)
    result.panel().to_pandas()

A study keeps its files in its ``folder`` (a temporary one, removed when Python exits, unless one
is given): ``study.json``, ``simulation/``, ``population/`` and ``environment/`` are written there from
the arguments, with each component's ref (``module:Class``) and arguments, so the run records the
same resolved configuration as a folder's would, and versions, branches and resume work the same.
``load_study(folder)`` is the other way to make one. A folder that already holds a study with other
files is not overwritten unless ``overwrite=True`` says so: its question, parameters and interventions
would be lost; writing the same files again (a notebook cell run twice) is fine.

Components are resolved by their module path: a class defined in a notebook or script is
``__main__:Class``, which the same process resolves again (a branch, a resume); another process
cannot, and says so. A component is a class, an instance, a ``"module:Class"`` ref or
``{"ref": Class or "module:Class", "args": {...}}``; each is checked for the methods of its role
(``EnvironmentProvider``, ``DecisionModel``, ``MetricCollector``, ``PopulationProvider``) when the
study is made, so a wrong one is named there rather than failing inside a run (a run from files checks
its refs by the same rule, ``desim.study.contract.ROLES``: one way of either path is enough, so a
columnar environment needs no ``observe_batch``, and a class need not subclass the base).

An instance stands for its class and constructor arguments: every run builds a fresh component from
the recorded ref and arguments, as a branch or a resume does (one rule), so what a component keeps on
``self`` during a run (a count, a cache, ``self.ctx``) never passes into the next run, two runs of one study
at once share nothing, and the same seed gives the same panel. The instance itself is not run: read a run's
results from the store (``result.panel()``), not from it. Its constructor arguments are recorded
from its ``recorded_args()`` when it defines one (a
dict of the arguments that rebuild it, as ``type(instance)(**args)``; desim's diffusion components
do, since they take ``**args``), else from its attributes of the same names (a dataclass keeps them
so), read again each time the study is saved (a run saves it first). An argument that cannot be read back that way (kept under another name, taken by
``*args``/``**kwargs``, or a value JSON cannot hold as it is) is refused when the study is made: a
default standing in for it would give a branch another model than its parent's, without a word.
"""
from __future__ import annotations

import atexit
import inspect
import json
import math
import numbers
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from desim.errors import StudyArgumentError
from desim.records import Persona
from desim.study.contract import ROLES, misnamed, missing_methods
from desim.versions import ENVIRONMENT_FILE, POPULATION_FILE, SIMULATION_FILE, STUDY_FILE

_TEMPORARY: list[Path] = []
_FOLDER_LOCK = threading.Lock()     # two runs of one study at once (a thread) make one temporary folder


@atexit.register
def _remove_temporary() -> None:
    for folder in _TEMPORARY:
        shutil.rmtree(folder, ignore_errors=True)


def _known_simulation_keys(given: dict[str, Any]) -> None:
    """Refuse, where the notebook cell is, an argument that is neither ``Study``'s own nor a key of
    ``simulation.json``: taken for a key of that file, ``steps=``'s typo ``step=3`` failed only at the run,
    naming a file the user never wrote."""
    import difflib

    from desim.study.files import SimulationFile
    own = [n for n in inspect.signature(Study.__init__).parameters if n not in ("self", "simulation")]
    keys = [k for k in SimulationFile.model_fields if k not in ("n_steps", "time_unit", "interaction_rounds", "seed",
                                                                 "parameters", "decision", "collector")]
    for name in given:
        if name in keys or name == "n_steps":       # n_steps: refused with its own message
            continue
        near = difflib.get_close_matches(name, own + keys, n=1, cutoff=0.75)
        raise StudyArgumentError(f"desim.Study got an unknown argument {name}={given[name]!r}"
                                 + (f"; did you mean {near[0]}=?" if near else "")
                                 + f" (besides its own arguments it takes simulation.json's {', '.join(keys)})")


class Study:
    """A study from Python objects; see the module docstring. ``population`` is a number of agents
    (ids ``a0``, ``a1``, ...), a list of ``Persona`` or dicts, or a population provider; ``interaction``
    the network as in ``population.json`` (``{"kind": "watts_strogatz", "k": 4, "p": 0.1}``).
    ``overwrite=True`` lets the study replace the files of another study already in ``folder``."""

    def __init__(self, *, environment: Any, decision: Any, population: Any, collector: Any = None,
                 steps: int = 1, time_unit: str = "step", interaction_rounds: int = 1, seed: int = 0,
                 parameters: dict[str, Any] | None = None, interaction: dict[str, Any] | None = None,
                 propagation: str = "independent", layers: dict[str, Any] | None = None,
                 scheduled_events: list[dict] | None = None, broadcasts: list[dict] | None = None,
                 id: str = "study", title: str = "", display_metrics: list[str] | None = None,
                 display_states: list[str] | None = None, folder: str | Path | None = None,
                 overwrite: bool = False, **simulation: Any):
        if "n_steps" in simulation:     # simulation.json's name for steps=: both given, one was silently lost
            raise StudyArgumentError(f"desim.Study: n_steps={simulation['n_steps']!r} is simulation.json's name for "
                                     f"steps= (given as {steps!r}); give steps= only")
        _known_simulation_keys(simulation)
        self.parts = {"environment": environment, "decision": decision, "collector": collector}
        self.population = population
        self.id, self.title = id, title
        self.display_metrics, self.display_states = list(display_metrics or []), list(display_states or [])
        self.simulation = {"n_steps": steps, "time_unit": time_unit, "interaction_rounds": interaction_rounds,
                           "seed": seed, "parameters": dict(parameters or {}), **simulation}
        self.interaction = dict(interaction or {"kind": "none"})
        self.propagation = propagation
        self.environment = {"layers": dict(layers or {}), "scheduled_events": list(scheduled_events or []),
                            "broadcasts": list(broadcasts or [])}
        self.folder = Path(folder) if folder is not None else None
        self.overwrite = overwrite
        self._written: set[Path] = set()      # folders this study wrote: it may write them again
        # refuse here, where the notebook cell is, what would otherwise fail (or go wrong) in a run
        for name, part in self.parts.items():
            if part is not None or name != "collector":     # a study may do without a collector
                _ref(part, name)
                _not_another_model(part, name, self.folder)
        _check_population(population)
        _not_another_model(population, "population", self.folder)
        if self.folder is not None and not overwrite:
            self._refuse_to_replace(self.folder)

    def __repr__(self) -> str:
        return f"Study(id={self.id!r}, folder={str(self.folder) if self.folder else None!r})"

    # --- the files -------------------------------------------------------------------------------
    def files(self) -> dict[str, Any]:
        """The four study files as plain data (what :meth:`save` writes)."""
        sim = {**self.simulation, "decision": _ref(self.parts["decision"], "decision")}
        if self.parts["collector"] is not None:
            sim["collector"] = _ref(self.parts["collector"], "collector")
        return {
            STUDY_FILE: {"id": self.id, "title": self.title, "display_metrics": self.display_metrics,
                           "display_states": self.display_states},
            SIMULATION_FILE: sim,
            POPULATION_FILE: {**self._population(), "interaction": self.interaction,
                                           "propagation": self.propagation},
            ENVIRONMENT_FILE: {"provider": _ref(self.parts["environment"], "environment"),
                                             **self.environment},
        }

    def _population(self) -> dict[str, Any]:
        pop = _check_population(self.population)
        if isinstance(pop, numbers.Integral):
            width = len(str(max(pop - 1, 0)))
            return {"personas": [{"agent_id": f"a{i:0{width}d}"} for i in range(pop)]}
        if isinstance(pop, (list, tuple)):
            return {"personas": [p.model_dump() if isinstance(p, Persona) else dict(p) for p in pop]}
        return {"provider": _ref(pop, "population")}

    def save(self, folder: str | Path | None = None, *, overwrite: bool | None = None) -> Path:
        """Write the study's files into ``folder`` (default: the study's own) and return the folder.

        A folder holding another study's files (ones that differ from these) is refused unless
        ``overwrite`` (default: the study's ``overwrite``) is true or this study wrote them itself."""
        folder = Path(folder) if folder is not None else self._folder()
        texts = _texts(self.files())
        if not (self.overwrite if overwrite is None else overwrite):
            self._refuse_to_replace(folder, texts)
        for rel, text in texts.items():
            _write(folder / rel, text)
        self._written.add(folder.resolve())
        return folder

    def _refuse_to_replace(self, folder: Path, texts: dict[str, str] | None = None) -> None:
        """Stop before the files of another study in ``folder`` are replaced by this one's."""
        if folder.resolve() in self._written or not any((folder / rel).is_file() for rel in _FILES):
            return
        texts = texts if texts is not None else _texts(self.files())
        changed = [f"{rel} ({what})" if what else rel
                   for rel, what in ((rel, _differs(folder / rel, text)) for rel, text in texts.items())
                   if what is not None]
        if changed:
            raise StudyArgumentError(
                f"desim.Study: folder={str(folder)!r} already holds a study, and this one would change "
                f"{'; '.join(changed)}. Give another folder= to keep that study, or pass overwrite=True "
                "to replace its files with these (its stored runs stay)")

    def _folder(self) -> Path:
        with _FOLDER_LOCK:
            if self.folder is None:
                self.folder = Path(tempfile.mkdtemp(prefix=f"desim-{self.id}-"))
                _TEMPORARY.append(self.folder)
            return self.folder

    # --- what a run needs --------------------------------------------------------------------------
    def spec(self, **overrides: Any):
        """The study loaded as a folder's would be (``steps``, ``seed``, ``rounds``, ``params`` as in
        ``load_study``): its files are saved first, and a run builds every component from them, an instance
        given to the constructor from its recorded arguments (see the module docstring)."""
        from desim.study.files import load_study
        return load_study(self.save(), **overrides)


_FILES = (STUDY_FILE, SIMULATION_FILE, POPULATION_FILE, ENVIRONMENT_FILE)


def _texts(files: dict[str, Any]) -> dict[str, str]:
    return {rel: json.dumps(data, indent=2, default=str) + "\n" for rel, data in files.items()}


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader (another run of the study, in a thread) never sees a part
    of it: into a hidden file beside it (which a version's code hash leaves out), then renamed over it in one
    step. A file that already holds ``text`` is left as it is, so a run of an unchanged study writes nothing."""
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        # os.open applies the umask as write_text would (mkstemp would leave the file readable by its owner only)
        with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _differs(path: Path, text: str) -> str | None:
    """None when ``path`` is missing or holds the same JSON as ``text``; else what differs (the
    top-level fields, or "" when the file is not a JSON object)."""
    if not path.is_file():
        return None
    new = json.loads(text)
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return ""
    if old == new:
        return None
    if isinstance(old, dict):
        return ", ".join(k for k in sorted({*old, *new}, key=str) if old.get(k) != new.get(k))
    return ""


# --- components ----------------------------------------------------------------------------------
def _shown(part: Any) -> str:
    """How a given component reads in a message: ``the class Town``, ``a Town instance``, ``2.5 (a float)``."""
    if isinstance(part, type):
        return f"the class {part.__qualname__}"
    if inspect.isroutine(part):
        return f"the function {getattr(part, '__qualname__', part)}"
    if type(part).__module__ != "builtins":
        return f"a {type(part).__qualname__} instance"
    return _value(part)


def _value(value: Any) -> str:
    """A value in a message: its repr, cut short, and its type: ``(1, 2) (a tuple)``."""
    text = repr(value)
    kind = type(value).__name__
    return f"{text[:60] + '...' if len(text) > 60 else text} ({_article(kind)} {kind})"


def _check_kind(part: Any, name: str) -> type:
    """The class of ``part``, once it has the methods of ``name``'s role (else a desim error naming them).
    The rule is the one a run from files applies (``desim.study.contract.ROLES``)."""
    role = ROLES[name]
    cls = part if isinstance(part, type) else type(part)
    missing = missing_methods(cls, name)
    if missing:
        base = role.base.__name__
        hint = misnamed(cls, missing)       # a misspelt name is the usual cause: "it has decide: rename it?"
        # a subclass that lacks a method is one, just not complete: "which is a DecisionModel without decide_batch"
        which = (f"is {_article(base)} {base} without {', '.join(missing)}{f' ({hint})' if hint else ''}"
                 if issubclass(cls, role.base) else
                 f"is not {_article(base)} {base} (it has no {', '.join(missing)}{f'; {hint}' if hint else ''})")
        raise StudyArgumentError(
            f"desim.Study: {name}= is {_shown(part)}, which {which}; expected a subclass of desim.{base} implementing "
            f"{role.implements} (the class, an instance, or a 'module:Class' ref)")
    return cls


def _article(word: str) -> str:
    return "an" if word[0].lower() in "aeiou" else "a"


def _check_population(pop: Any) -> Any:
    """``pop`` when it can make a population (a number, a list of personas, a provider, a ref)."""
    if isinstance(pop, numbers.Integral) and not isinstance(pop, bool):
        if pop < 1:
            raise StudyArgumentError(f"desim.Study: population={pop}: a study needs at least one agent")
        return int(pop)
    if isinstance(pop, (list, tuple)):
        for i, p in enumerate(pop):
            if not isinstance(p, (Persona, Mapping)):
                raise StudyArgumentError(f"desim.Study: population[{i}] is {_shown(p)}; expected a desim.Persona "
                                         "or a dict such as {'agent_id': 'a0', 'attributes': {...}}")
        return pop
    if isinstance(pop, (bool, numbers.Number, bytes, set, frozenset)) or pop is None:
        raise StudyArgumentError(f"desim.Study: population= is {_shown(pop)}; expected a number of agents (an int), "
                                 "a list of desim.Persona or dicts, or a desim.PopulationProvider implementing "
                                 "personas (the class, an instance, or a 'module:Class' ref)")
    _ref(pop, "population")
    return pop


def _ref(part: Any, name: str) -> dict[str, Any]:
    """``{"ref": "module:Class", "args": {...}}`` for a ref string, a ref dict, a class or an instance."""
    if isinstance(part, str):
        return {"ref": part, "args": {}}
    if isinstance(part, Mapping):
        return _ref_dict(part, name)
    cls = _check_kind(part, name)
    ref = {"ref": _named(cls, name), "args": {}}
    if not isinstance(part, type):
        ref["args"] = _arguments(part, name)
    return ref


def _not_another_model(part: Any, name: str, folder: Path | None) -> None:
    """A class from a module named ``model`` is recorded as ``model:Class``, which a study reads as its own
    folder's ``model.py``: one from a ``model.py`` elsewhere (beside a notebook) would not be found by the
    run, or another class would be. Refused, saying how to name it."""
    cls = part if isinstance(part, type) else type(part)
    if cls.__module__ != "model" or isinstance(part, (str, Mapping, numbers.Number, list, tuple)):
        return
    source = getattr(inspect.getmodule(cls), "__file__", None)
    if source is None or (folder is not None and Path(source).resolve() == (Path(folder) / "model.py").resolve()):
        return
    where = f"the study's folder ({folder})" if folder is not None else "the study's (temporary) folder"
    raise StudyArgumentError(
        f"desim.Study: {name}: {cls.__qualname__} comes from {source}, a module named 'model'; a study records "
        f"it as 'model:{cls.__qualname__}', which means the model.py of {where}, not that file. Rename the "
        f"module (e.g. my_model.py, then 'from my_model import {cls.__qualname__}'), or give folder= the "
        "folder that holds that model.py")


def _named(cls: type, name: str) -> str:
    if "<locals>" in cls.__qualname__ or "." in cls.__qualname__:
        raise StudyArgumentError(f"desim.Study: {name}: {cls.__qualname__} is not defined at the top of its "
                                 "module, so a run cannot name it; define it at module level")
    return f"{cls.__module__}:{cls.__qualname__}"


def _ref_dict(part: Mapping, name: str) -> dict[str, Any]:
    """A component given as its file says it: ``{"ref": Class or "module:Class", "args": {...}}``."""
    if "ref" not in part or set(part) - {"ref", "args"}:
        raise StudyArgumentError(
            f"desim.Study: {name}= is {_shown(dict(part))}; a dict names a component as "
            '{"ref": Class or "module:Class", "args": {...}}; otherwise give the class or an instance')
    ref, args = part["ref"], part.get("args") or {}
    if isinstance(ref, type):
        ref = _named(_check_kind(ref, name), name)
    elif not isinstance(ref, str):
        raise StudyArgumentError(f"desim.Study: {name}['ref'] is {_shown(ref)}; expected a class or a "
                                 "'module:Class' ref")
    if not isinstance(args, Mapping):
        raise StudyArgumentError(f"desim.Study: {name}['args'] is {_shown(args)}; expected a dict of arguments")
    for key, value in args.items():
        if not isinstance(key, str) or not _round_trips(value):
            raise StudyArgumentError(f"desim.Study: {name}['args'][{key!r}] is {_value(value)}, which a study file "
                                     "cannot hold as it is (JSON: text, finite numbers, booleans, null, lists, "
                                     "dicts with text keys)")
    return {"ref": ref, "args": dict(args)}


def _arguments(instance: Any, name: str) -> dict[str, Any]:
    """The constructor arguments of ``instance`` (how a branch or a resume rebuilds it from the files):
    what its ``recorded_args()`` returns when it defines one, else its attributes of the same names as
    its constructor's parameters; or a desim error naming the argument that cannot be recorded."""
    cls = type(instance)
    if callable(getattr(instance, "recorded_args", None)):
        return _recorded(instance, name)
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        params = None
    named = [p.name for p in (params or {}).values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    args = ", ".join(f'"{n}": ...' for n in named) or "..."
    fix = (f'or pass the class and its arguments: {name}={{"ref": {cls.__qualname__}, "args": {{{args}}}}} '
           f"(or {name}={cls.__qualname__} when it needs none)")
    if params is None:
        raise StudyArgumentError(f"desim.Study: {name}= is {_shown(instance)} whose constructor signature cannot "
                                 f"be read, so its arguments cannot be recorded; {fix}")
    out = {}
    for p in params.values():
        at = f"desim.Study: {name}= is {_shown(instance)}"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            star = "*" if p.kind is p.VAR_POSITIONAL else "**"
            raise StudyArgumentError(
                f"{at}, whose constructor takes {star}{p.name}: what it was given cannot be read back from the "
                f"instance, so a branch or resume could not rebuild it the same; name each argument in "
                f"{cls.__qualname__}.__init__ and keep it as self.<name>, or give {cls.__qualname__} a "
                f"recorded_args() method returning the dict of arguments that rebuilds it, {fix}")
        if p.kind is p.POSITIONAL_ONLY:
            raise StudyArgumentError(f"{at}, whose constructor takes '{p.name}' only by position, which a study "
                                     f"file cannot pass; make it a keyword parameter, {fix}")
        found, value = _stored(instance, p.name)
        if not found:
            rebuilt = (f"with {p.name}={p.default!r} (its default)" if p.default is not p.empty
                       else f"at all ({p.name} has no default)")
            raise StudyArgumentError(
                f"{at}, which keeps no attribute '{p.name}' for its constructor argument '{p.name}', so the value "
                f"given cannot be recorded and a branch or resume would rebuild {cls.__qualname__} {rebuilt}; "
                f"keep it as self.{p.name} in {cls.__qualname__}.__init__, {fix}")
        if not _round_trips(value):
            raise StudyArgumentError(
                f"{at}, whose argument '{p.name}' is kept as {_value(value)}, which a study file cannot hold as it "
                f"is (JSON: text, finite numbers, booleans, null, lists, dicts with text keys), so a branch or "
                f"resume could not rebuild it; keep a JSON value in self.{p.name}, {fix}")
        out[p.name] = value
    _check_rebuilt(instance, out, name, fix)
    return out


def _check_rebuilt(instance: Any, args: dict[str, Any], name: str, fix: str) -> None:
    """Refuse an instance that its recorded arguments do not rebuild: a constructor that keeps an argument
    changed (``self.pct = pct / 100``) records 0.3 for ``pct=30``, and a branch or resume would build it with
    ``pct=0.3``, a different component, without a word."""
    cls, at = type(instance), f"desim.Study: {name}= is {_shown(instance)}"
    try:
        rebuilt = cls(**args)
    except Exception as e:          # noqa: BLE001 (any failure: a branch or resume would fail the same way)
        raise StudyArgumentError(f"{at}, which its recorded arguments {args} do not rebuild ({type(e).__name__}: "
                                 f"{e}); {fix}") from None
    for key, value in args.items():
        again = _stored(rebuilt, key)[1]
        if again != value:
            raise StudyArgumentError(
                f"{at}, whose constructor keeps '{key}' changed: {cls.__qualname__}({key}={value!r}) keeps "
                f"{key}={again!r}, so the {value!r} recorded for it would rebuild another component in a branch or "
                f"resume; keep the argument as given (self.{key} = {key}) and what is computed from it under "
                f"another name, {fix}")
    unbuilt = [key for key, value in vars(instance).items()
               if not key.startswith("_") and key != "ctx" and not _same_value(value, vars(rebuilt).get(key, _NONE))]
    if unbuilt:     # set after it was made: each run builds the component from its arguments, without them
        import warnings
        warnings.warn(f"{at}, whose {', '.join(map(repr, unbuilt))} {'is' if len(unbuilt) == 1 else 'are'} not what "
                      f"its constructor makes of its recorded arguments {args}: each run builds {cls.__qualname__} "
                      "from those arguments, so set it there (a constructor argument) to have it in the runs",
                      UserWarning, stacklevel=4)


_NONE = object()


def _same_value(a: Any, b: Any) -> bool:
    """Whether two attribute values are the same (arrays and other objects whose == is not a bool: by identity)."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:               # noqa: BLE001 - an array's ambiguous truth, a failing __eq__
        return False


def _recorded(instance: Any, name: str) -> dict[str, Any]:
    """``instance.recorded_args()``: the constructor arguments a component that takes ``**kwargs`` (desim's
    diffusion models, ``NetworkState``) says rebuild it, checked to be JSON a study file holds as it is."""
    cls, at = type(instance), f"desim.Study: {name}= is {_shown(instance)}"
    args = instance.recorded_args()
    if not isinstance(args, Mapping):
        raise StudyArgumentError(f"{at}, whose recorded_args() returned {_value(args)}; it must return a dict of "
                                 f"the arguments that rebuild it, as {cls.__qualname__}(**args)")
    for key, value in args.items():
        if not isinstance(key, str):
            raise StudyArgumentError(f"{at}, whose recorded_args() names an argument {_value(key)}; argument "
                                     "names are text")
        if not _round_trips(value):
            raise StudyArgumentError(
                f"{at}, whose recorded_args() gives argument '{key}' as {_value(value)}, which a study file cannot "
                "hold as it is (JSON: text, finite numbers, booleans, null, lists, dicts with text keys), so a "
                f"branch or resume could not rebuild it; return a JSON value for '{key}'")
    return dict(args)


def _stored(instance: Any, name: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``instance`` keeps ``name`` itself: in its ``__dict__``, a slot or a property.
    A plain class attribute of that name (``bus = None`` on ``EnvironmentProvider``) is not what the
    constructor was given."""
    if name in getattr(instance, "__dict__", {}):
        return True, instance.__dict__[name]
    if inspect.isdatadescriptor(inspect.getattr_static(type(instance), name, None)):
        try:
            return True, getattr(instance, name)
        except AttributeError:      # an empty slot
            return False, None
    return False, None


def _round_trips(value: Any) -> bool:
    """Whether JSON gives ``value`` back as it is: text, finite numbers, booleans, None, lists and dicts
    with text keys of those (a tuple would come back a list, a NaN not at all)."""
    if value is None or isinstance(value, (bool, str, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if type(value) is list:
        return all(_round_trips(v) for v in value)
    if type(value) is dict:
        return all(isinstance(k, str) and _round_trips(v) for k, v in value.items())
    return False
