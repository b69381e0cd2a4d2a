"""``desim validate``: load a study, run its first step in memory, and warn
where the study's declarations and its wiring disagree.

The ``propagation`` label is declarative (the engine never reads it), so a
mismatch between the label and what the environment actually wires is a
documentation bug worth a warning, not an error. The probe step also proves
that the refs import and the code runs, without touching the study's store.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .config import StudySpec, load_study
from .engine import Engine


@dataclass
class Report:
    spec: StudySpec
    warnings: list[str] = field(default_factory=list)
    n_agents: int = 0
    n_edges: int = 0
    messages_in_probe: int = 0


def validate(root: str | Path, probe: bool = True) -> Report:
    """Validate a study folder; raises ``StudyConfigError`` on invalid files."""
    spec = load_study(root)
    report = Report(spec)
    sim, pop = spec.simulation, spec.population
    if sim.interaction_rounds < 1:
        report.warnings.append(f"interaction_rounds is {sim.interaction_rounds}; the engine clamps it to 1")
    if not probe:
        return report
    # an LLM study probes on scripted replies: validating must never make paid calls
    scripted = {"llm_kind": "scripted"} if "llm_kind" in sim.parameters else None
    engine = Engine(load_study(root, steps=1, params=scripted), db_path=":memory:", manage_gc=False)
    engine.run()
    report.n_agents, report.n_edges = len(engine.ids), engine.graph.number_of_edges()
    report.messages_in_probe = engine.counters["messages"]
    bus = getattr(engine.environment, "bus", None)
    wired = bus is not None
    if pop.propagation == "contagion" and not wired:
        report.warnings.append("propagation is 'contagion' but the environment wires no message bus "
                               "(self.bus is None after reset): nothing propagates between agents")
    if pop.propagation == "independent" and wired:
        report.warnings.append("propagation is 'independent' but the environment wires a message bus: "
                               "agents can hear each other; label it 'contagion' or 'broadcast_then_local'")
    carry = bool(getattr(bus, "carry_previous_step", False))
    if report.messages_in_probe and spec.rounds == 1 and not carry:
        report.warnings.append("the study posts messages with interaction_rounds: 1 and carry_previous_step "
                               "off: no agent can ever read them (a post is visible only to later rounds "
                               "of its step, or to the next step with carry_previous_step)")
    if pop.interaction.kind == "none" and wired:
        report.warnings.append("a message bus is wired but interaction.kind is 'none': no agent has neighbours")
    return report
