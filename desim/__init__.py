"""desim: longitudinal agent-based social simulation on SimPy, stored as panel data in DuckDB.

What a study author needs, from the top::

    import desim
    study = desim.load_study("studies/opinion_diffusion")      # or desim.Study(...) in Python
    result = desim.run_study(study)
    panel = desim.open("studies/opinion_diffusion").panel()    # an Arrow table; .to_pandas()

* records: ``Persona``, ``Observation``, ``Action``, ``Message``, ``ActionColumns``;
* the study contract: ``EnvironmentProvider``, ``PopulationProvider``, ``DecisionModel``,
  ``MetricCollector``, ``RunContext``; messaging: ``InMemoryMessageBus``, ``NeighborFeed``,
  ``MessageBus``, ``neighbors_fn``;
* a study and its runs: ``Study``, ``load_study``, ``run_study``, ``RunResult``; reading them back:
  ``open``, ``StudyData``;
* stopping and failing: ``StopRun``, ``DesimError`` (the root of every desim error), ``RunFailed``,
  ``StudyConfigError``; a model refusing its parameters: ``check_parameters``, ``bad_parameter``.

Experiments are one namespace down, in ``desim.experiments``: ``branch``, ``resume``, ``effect`` and
``effect_table``, ``compare``; ``desim.branch(...)`` and the other calls documented before still work.
Sweeps are a module, imported by name (``desim.sweep`` is no attribute until then):
``from desim.sweep import run_sweep``.
"""
from desim.version import __version__  # noqa: F401

# Names are imported on first use (PEP 562), so ``desim --help`` or ``import desim.study.files`` does
# not pay for the engine's numpy, networkx, pyarrow and DuckDB.
_WHERE = {
    # records
    "Action": "desim.records", "ActionColumns": "desim.records", "Message": "desim.records",
    "Observation": "desim.records", "Persona": "desim.records",
    # the study contract and messaging
    "DecisionModel": "desim.study.contract", "EnvironmentProvider": "desim.study.contract",
    "MetricCollector": "desim.study.contract", "PopulationProvider": "desim.study.contract",
    "RunContext": "desim.study.contract", "InMemoryMessageBus": "desim.messaging.bus",
    "MessageBus": "desim.messaging.bus", "NeighborFeed": "desim.messaging.feed", "neighbors_fn": "desim.study.network",
    # a study and its runs
    "Study": "desim.study.study", "load_study": "desim.study.files", "StudySpec": "desim.study.files",
    "run_study": "desim.experiments.runs", "RunResult": "desim.experiments.recording",
    "open": "desim.store.reader", "StudyData": "desim.store.reader",
    # errors
    "DesimError": "desim.errors", "RunFailed": "desim.errors", "StopRun": "desim.errors",
    "StudyConfigError": "desim.errors",
    # a model's parameters it cannot use, named where the user sets them
    "bad_parameter": "desim.study.params", "check_parameters": "desim.study.params",
}
__all__ = sorted(_WHERE)

# documented before, kept working: experiments and other names now one namespace down
_ALIASES = {
    "branch": ("desim.experiments.branches", "branch"), "resume": ("desim.experiments.branches", "resume"),
    "BranchRefused": ("desim.experiments.branches", "BranchRefused"),
    "effect": ("desim.experiments.effects", "run_effect"), "effect_table": ("desim.experiments.effects", "effect_table"),
    "effect_rows": ("desim.experiments.effects", "effect_rows"),
    "EffectError": ("desim.experiments.effects", "EffectError"), "compare": ("desim.experiments.comparisons", "compare"),
    "run_health": ("desim.store.health", "run_health"), "RunError": ("desim.run.checks", "RunError"),
    "Engine": ("desim.run.engine", "Engine"), "build_graph": ("desim.study.network", "build_graph"),
    "Broadcast": ("desim.study.interventions", "Broadcast"),
    "ScheduledEvent": ("desim.study.interventions", "ScheduledEvent"),
}


def __getattr__(name: str):
    import importlib
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
    elif name in _ALIASES:
        module, attr = _ALIASES[name]
        value = getattr(importlib.import_module(module), attr)
    else:
        raise AttributeError(f"module 'desim' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_WHERE) + list(_ALIASES))
