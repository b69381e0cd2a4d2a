"""desim: longitudinal agent-based social simulation on SimPy, stored as panel data in DuckDB.

The public names, by layer:

* schemas and config: ``Persona``, ``Observation``, ``Action``, ``ScheduledEvent``,
  ``Broadcast``, ``Message``, ``load_study``, ``StudyConfigError``;
* study interfaces: ``EnvironmentProvider``, ``PopulationProvider``,
  ``DecisionModel``, ``MetricCollector``, ``ActionColumns``;
* messaging: ``MessageBus``, ``InMemoryMessageBus``, ``NeighborFeed``;
* running: ``run_study``, ``Engine``, ``RunFailed``.
"""
__version__ = "0.1.0"

# Names are imported on first use (PEP 562), so ``desim --help`` or ``import desim.config`` does
# not pay for the engine's numpy, networkx, pyarrow and DuckDB.
_WHERE = {
    "StudyConfigError": "config", "StudySpec": "config", "load_study": "config",
    "Engine": "engine", "RunError": "engine", "RunFailed": "engine", "RunResult": "engine", "run_study": "engine",
    "ActionColumns": "interfaces", "DecisionModel": "interfaces", "EnvironmentProvider": "interfaces",
    "MetricCollector": "interfaces", "PopulationProvider": "interfaces", "RunContext": "interfaces",
    "InMemoryMessageBus": "messaging", "MessageBus": "messaging", "NeighborFeed": "messaging",
    "build_graph": "network", "neighbors_fn": "network",
    "Action": "schemas", "Broadcast": "schemas", "Message": "schemas", "Observation": "schemas",
    "Persona": "schemas", "ScheduledEvent": "schemas",
}


def __getattr__(name: str):
    if name in _WHERE:
        import importlib
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'desim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_WHERE))


__all__ = [
    "Action", "ActionColumns", "Broadcast", "DecisionModel", "Engine", "EnvironmentProvider",
    "InMemoryMessageBus", "Message", "MessageBus", "MetricCollector", "NeighborFeed", "Observation",
    "Persona", "PopulationProvider", "RunContext", "RunError", "RunFailed", "RunResult",
    "ScheduledEvent", "StudyConfigError", "StudySpec", "build_graph", "load_study", "neighbors_fn",
    "run_study",
]
