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
``load_study(folder)`` is the other way to make one.

Components are resolved by their module path: a class defined in a notebook or script is
``__main__:Class``, which the same process resolves again (a branch, a resume); another process
cannot, and says so. An instance is used as it is for the run it is passed to; its arguments are
recorded from its attributes of the same names as its constructor's parameters, so that a branch
rebuilding it from the files gets the same model.
"""
from __future__ import annotations

import atexit
import inspect
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from desim.records import Persona

_TEMPORARY: list[Path] = []


@atexit.register
def _remove_temporary() -> None:
    for folder in _TEMPORARY:
        shutil.rmtree(folder, ignore_errors=True)


class Study:
    """A study from Python objects; see the module docstring. ``population`` is a number of agents
    (ids ``a0``, ``a1``, ...), a list of ``Persona`` or dicts, or a population provider; ``interaction``
    the network as in ``population.json`` (``{"kind": "watts_strogatz", "k": 4, "p": 0.1}``)."""

    def __init__(self, *, environment: Any, decision: Any, population: Any, collector: Any = None,
                 steps: int = 1, time_unit: str = "step", interaction_rounds: int = 1, seed: int = 0,
                 parameters: dict[str, Any] | None = None, interaction: dict[str, Any] | None = None,
                 propagation: str = "independent", layers: dict[str, Any] | None = None,
                 scheduled_events: list[dict] | None = None, broadcasts: list[dict] | None = None,
                 id: str = "study", title: str = "", display_metrics: list[str] | None = None,
                 display_states: list[str] | None = None, folder: str | Path | None = None,
                 **simulation: Any):
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

    def __repr__(self) -> str:
        return f"Study(id={self.id!r}, folder={str(self.folder) if self.folder else None!r})"

    # --- the files -------------------------------------------------------------------------------
    def files(self) -> dict[str, Any]:
        """The four study files as plain data (what :meth:`save` writes)."""
        sim = {**self.simulation, "decision": _ref(self.parts["decision"], "decision")}
        if self.parts["collector"] is not None:
            sim["collector"] = _ref(self.parts["collector"], "collector")
        return {
            "study.json": {"id": self.id, "title": self.title, "display_metrics": self.display_metrics,
                           "display_states": self.display_states},
            "simulation/simulation.json": sim,
            "population/population.json": {**self._population(), "interaction": self.interaction,
                                           "propagation": self.propagation},
            "environment/environment.json": {"provider": _ref(self.parts["environment"], "environment"),
                                             **self.environment},
        }

    def _population(self) -> dict[str, Any]:
        pop = self.population
        if isinstance(pop, bool):
            raise TypeError("population: a number of agents, a list of personas or a provider, not a bool")
        if isinstance(pop, int):
            width = len(str(max(pop - 1, 0)))
            return {"personas": [{"agent_id": f"a{i:0{width}d}"} for i in range(pop)]}
        if isinstance(pop, (list, tuple)):
            return {"personas": [p.model_dump() if isinstance(p, Persona) else dict(p) for p in pop]}
        return {"provider": _ref(pop, "population")}

    def save(self, folder: str | Path | None = None) -> Path:
        """Write the study's files into ``folder`` (default: the study's own) and return the folder."""
        folder = Path(folder) if folder is not None else self._folder()
        for rel, data in self.files().items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
        return folder

    def _folder(self) -> Path:
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix=f"desim-{self.id}-"))
            _TEMPORARY.append(self.folder)
        return self.folder

    # --- what a run needs --------------------------------------------------------------------------
    def spec(self, **overrides: Any):
        """The study loaded as a folder's would be (``steps``, ``seed``, ``rounds``, ``params`` as in
        ``load_study``), with instances given to the constructor used as they are."""
        from desim.study.files import load_study
        spec = load_study(self.save(), **overrides)
        spec.objects = {name: obj for name, obj in (*self.parts.items(), ("population", self.population))
                        if obj is not None and not isinstance(obj, (type, str, int, list, tuple))}
        return spec


def _ref(part: Any, name: str) -> dict[str, Any]:
    """``{"ref": "module:Class", "args": {...}}`` for a ref string, a class or an instance."""
    if isinstance(part, str):
        return {"ref": part, "args": {}}
    if isinstance(part, dict) and "ref" in part:
        return {"ref": part["ref"], "args": dict(part.get("args") or {})}
    cls = part if isinstance(part, type) else type(part)
    if "<locals>" in cls.__qualname__ or "." in cls.__qualname__:
        raise TypeError(f"{name}: {cls.__qualname__} is not defined at the top of its module, so a run "
                        "cannot name it; define it at module level")
    ref = {"ref": f"{cls.__module__}:{cls.__qualname__}", "args": {}}
    if not isinstance(part, type):
        ref["args"] = _arguments(part)
    return ref


def _arguments(instance: Any) -> dict[str, Any]:
    """The constructor arguments of ``instance`` that it keeps as attributes of the same names and that
    JSON can hold (how a branch rebuilds it from the files)."""
    out = {}
    try:
        params = inspect.signature(type(instance)).parameters
    except (TypeError, ValueError):
        return out
    for p in params.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or not hasattr(instance, p.name):
            continue
        value = getattr(instance, p.name)
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        out[p.name] = value
    return out
