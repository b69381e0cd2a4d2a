"""desim: longitudinal agent-based social simulation on SimPy, stored as panel data in DuckDB.

The public names, by layer:

* schemas and config: ``Persona``, ``Observation``, ``Action``, ``ScheduledEvent``,
  ``Broadcast``, ``Message``, ``load_study``, ``StudyConfigError``;
* study interfaces: ``EnvironmentProvider``, ``PopulationProvider``,
  ``DecisionModel``, ``MetricCollector``, ``ActionColumns``;
* messaging: ``MessageBus``, ``InMemoryMessageBus``; feed: ``NeighborFeed``;
* running: ``run_study`` (honours ``warm_start``), ``Engine``, ``RunFailed``;
* reading: ``open`` (a study's store as Arrow tables: ``desim.open("studies/x").panel()``);
* counterfactuals: ``branch`` (a run of the study forking from a stored run at a
  step, ``BranchRefused`` when it cannot be exact), ``resume``, ``compare``,
  ``effect`` (paired effects over replicate controls, with intervals) and
  ``effect_table`` (an effect's summaries), ``run_health`` (``stale`` for a run
  whose process is gone).
"""
from .version import __version__  # noqa: E402

import sys  # noqa: E402
import types  # noqa: E402

# Names are imported on first use (PEP 562), so ``desim --help`` or ``import desim.config`` does
# not pay for the engine's numpy, networkx, pyarrow and DuckDB.
_WHERE = {
    "StudyConfigError": "config", "StudySpec": "config", "load_study": "config",
    "Engine": "engine", "RunError": "engine", "RunFailed": "engine", "RunResult": "engine", "run_study": "engine",
    "ActionColumns": "interfaces", "DecisionModel": "interfaces", "EnvironmentProvider": "interfaces",
    "MetricCollector": "interfaces", "PopulationProvider": "interfaces", "RunContext": "interfaces",
    "InMemoryMessageBus": "messaging", "MessageBus": "messaging", "NeighborFeed": "feed",
    "build_graph": "network", "neighbors_fn": "network",
    "Action": "schemas", "Broadcast": "schemas", "Message": "schemas", "Observation": "schemas",
    "Persona": "schemas", "ScheduledEvent": "schemas",
    "StudyData": "store", "open": "store",
    "BranchRefused": "branch", "branch": "branch", "resume": "branch", "compare": "compare",
    "EffectError": "effect", "effect_table": "effect", "effect": "effect", "run_health": "store.health",
}
_RENAMED = {"effect": "run_effect"}   # desim.effect is desim.effect.run_effect


def __getattr__(name: str):
    if name in _WHERE:
        import importlib
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), _RENAMED.get(name, name))
        globals()[name] = value
        return value
    raise AttributeError(f"module 'desim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_WHERE))


class _Package(types.ModuleType):
    """``desim.branch``, ``desim.compare`` and ``desim.effect`` are functions named like the modules
    that define them; importing such a module must not rebind the package's name to the module
    (``from desim.branch import ...`` still finds the module in ``sys.modules``)."""

    def __setattr__(self, name: str, value) -> None:
        if name in _RENAMED or name in ("branch", "compare"):
            if isinstance(value, types.ModuleType):
                return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "Action", "ActionColumns", "Broadcast", "BranchRefused", "DecisionModel", "EffectError", "Engine", "EnvironmentProvider",
    "InMemoryMessageBus", "Message", "MessageBus", "MetricCollector", "NeighborFeed", "Observation",
    "Persona", "PopulationProvider", "RunContext", "RunError", "RunFailed", "RunResult",
    "ScheduledEvent", "StudyConfigError", "StudySpec", "build_graph", "load_study", "neighbors_fn",
    "StudyData", "branch", "compare", "effect", "effect_table", "open", "resume", "run_health", "run_study",
]
