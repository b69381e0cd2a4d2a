"""desim: longitudinal agent-based social simulation on SimPy, stored as panel data in DuckDB.

The public names, by layer:

* schemas and config: ``Persona``, ``Observation``, ``Action``, ``ScheduledEvent``,
  ``Broadcast``, ``Message``, ``load_study``, ``StudyConfigError``;
* study interfaces: ``EnvironmentProvider``, ``PopulationProvider``,
  ``DecisionModel``, ``MetricCollector``, ``ActionColumns``;
* messaging: ``MessageBus``, ``InMemoryMessageBus``, ``NeighborFeed``;
* running: ``run_study`` (honours ``warm_start``), ``Engine``, ``RunFailed``;
* reading: ``open`` (a study's store as Arrow tables: ``desim.open("studies/x").panel()``);
* counterfactuals: ``branch`` (a run of the study forking from a stored run at a
  step, ``BranchRefused`` when it cannot be exact), ``resume``, ``compare``,
  ``effect`` (paired effects over replicate controls, with intervals) and
  ``effect_table`` (an effect's summaries), ``run_health`` (``stale`` for a run
  whose process is gone).
"""
__version__ = "0.1.0"

from .config import StudyConfigError, StudySpec, load_study  # noqa: E402
from .engine import Engine, RunError, RunFailed, RunResult, run_study  # noqa: E402
from .interfaces import (ActionColumns, DecisionModel, EnvironmentProvider,  # noqa: E402
                         MetricCollector, PopulationProvider, RunContext)
from .messaging import InMemoryMessageBus, MessageBus, NeighborFeed  # noqa: E402
from .network import build_graph, neighbors_fn  # noqa: E402
from .schemas import Action, Broadcast, Message, Observation, Persona, ScheduledEvent  # noqa: E402
from .studydata import StudyData, open  # noqa: E402,A004
from .branch import BranchRefused, branch, resume  # noqa: E402
from .compare import compare  # noqa: E402
from .effect import EffectError, effect_table  # noqa: E402
from .effect import run_effect as effect  # noqa: E402
from .status import run_health  # noqa: E402

__all__ = [
    "Action", "ActionColumns", "Broadcast", "BranchRefused", "DecisionModel", "EffectError", "Engine", "EnvironmentProvider",
    "InMemoryMessageBus", "Message", "MessageBus", "MetricCollector", "NeighborFeed", "Observation",
    "Persona", "PopulationProvider", "RunContext", "RunError", "RunFailed", "RunResult",
    "ScheduledEvent", "StudyConfigError", "StudySpec", "build_graph", "load_study", "neighbors_fn",
    "StudyData", "branch", "compare", "effect", "effect_table", "open", "resume", "run_health", "run_study",
]
