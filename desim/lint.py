"""Every check of a study beyond its files' schemas, in one place: ``desim
validate`` prints them and the dashboard shows the same list.

Two kinds:

* static warnings need only the files: a ``propagation`` label that
  contradicts the declared network, an intervention after the last step
  (it never fires), ``interaction_rounds`` below 1;
* the probe runs step 1 in memory (never touching the study's store) and
  checks what only running code can tell: whether a message bus is wired,
  whether posts can ever be read, and whether ``study.json``'s display
  metrics and states exist. A display name that exists nowhere is an error,
  since reports and the dashboard would silently drop it.

The ``propagation`` label is declarative (the engine never reads it), so a
mismatch between the label and the wiring is a documentation bug worth a
warning, not an error.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from desim.errors import RunFailed, StudyConfigError
from desim.experiments.recording import record
from desim.experiments.runs import outside_the_run  # noqa: F401 - said once, there; desim sweep and effect import it here
from desim.run.assemble import Run, assemble
from desim.store.recorder import MemorySink
from desim.study.failures import StudyCodeError, call
from desim.study.files import FILES, StudySpec, load_study
from desim.study.params import unread_parameters

ENVIRONMENT, POPULATION, SIMULATION = (FILES[k][0] for k in ("environment", "population", "simulation"))


@dataclass
class Report:
    spec: StudySpec
    warnings: list[str] = field(default_factory=list)
    n_agents: int = 0
    n_edges: int = 0
    messages_in_probe: int = 0


def validate(root: str | Path, probe: bool = True) -> Report:
    """Validate a study folder; raises ``StudyConfigError`` on invalid files (and, after the
    probe, on display metrics, states or metric_bounds nothing produces)."""
    spec = load_study(root)
    _check_warm_start(spec)
    _check_llm_block(spec)
    report = Report(spec, static_warnings(spec))
    if probe:
        _probe(spec, report)
    return report


def _check_warm_start(spec: StudySpec) -> None:
    """A warm start must name a run of this study's store that a branch at its step can start from: what
    ``desim run`` refuses (a parent whose rounds were not stored, code changed since) is refused here too."""
    warm = spec.simulation.warm_start
    if warm is None:
        return
    from desim.experiments.branches import BranchRefused, check_branchable
    from desim.store import Catalogue, StoreMissing, StudyLayout, open_store
    layout = StudyLayout(spec.root)
    try:
        with open_store(layout) as con:
            row = Catalogue(con).run(warm.from_run)
            if row is not None:
                check_branchable(con, layout, row, spec, warm.at_step, spec.root)
    except StoreMissing:
        row = None
    except BranchRefused as e:
        raise StudyConfigError(spec.root / SIMULATION, [("warm_start", str(e))]) from None
    if row is None:
        raise StudyConfigError(spec.root / SIMULATION, [("warm_start.from_run", f"no run '{warm.from_run}' in this "
                                                        "study's store (desim runs lists them)")])


def _check_llm_block(spec: StudySpec) -> None:
    """The ``llm`` block of a study an LLM decides, checked with the files (``--no-probe`` too), not only once
    the decision is built in the probe: what ``desim run`` would refuse. Another study's block is not read
    (a key in it is refused by every load, wherever it is)."""
    if spec.simulation.llm is None:
        return
    from desim.llm import LLMDecision
    from desim.study.refs import resolve
    try:
        decision = resolve(spec.simulation.decision.ref, spec.root)
    except Exception:
        return                      # the probe, or the run, names a ref that does not resolve
    if isinstance(decision, type) and issubclass(decision, LLMDecision):
        from desim.llm.config import load_llm_config
        load_llm_config(spec.simulation.llm, where=spec.root / SIMULATION)


def static_warnings(spec: StudySpec) -> list[str]:
    """Checks that need no run. Each names the study file and field it is about."""
    out = []
    pop, sim, env = spec.population, spec.simulation, spec.environment
    if sim.interaction_rounds < 1:
        out.append(f"{SIMULATION}: interaction_rounds is {sim.interaction_rounds}; the engine clamps it to 1")
    if pop.propagation in ("contagion", "broadcast_then_local", "network") and pop.interaction.kind == "none":
        out.append(f"{POPULATION}: propagation is '{pop.propagation}' but interaction.kind is 'none': "
                   "no agent has neighbours to hear from")
    if pop.propagation == "independent" and pop.interaction.kind != "none":
        out.append(f"{POPULATION}: propagation is 'independent' but a '{pop.interaction.kind}' network is "
                   "declared: is the network used?")
    if pop.propagation == "broadcast_then_local" and not env.broadcasts and not env.scheduled_events:
        out.append(f"{POPULATION}: propagation is 'broadcast_then_local' but {ENVIRONMENT} has no broadcasts "
                   "or events")
    unused = pop.interaction.unused()
    if unused:
        out.append(f"{POPULATION}: interaction kind '{pop.interaction.kind}' does not read {', '.join(sorted(unused))}: "
                   "is the kind right?")
    out += outside_the_run(spec)
    out += [f"{SIMULATION}: parameters.{name}: {why}" for name, why in unread_parameters(spec).items()]
    return out


def _probe(spec: StudySpec, report: Report) -> None:
    """Step 1 of the study, in memory: the assembled run is inspected, and its output goes through the
    same conversions a recorded run's would (a ``MemorySink``), so the probe refuses what a run would."""
    root, sim, pop = spec.root, spec.simulation, spec.population
    # an LLM study probes on scripted replies: validating must never make paid calls
    scripted = {"llm_kind": "scripted"} if "llm_kind" in sim.parameters else None
    run = assemble(load_study(root, steps=1, params=scripted))
    metrics: set[str] = set()
    sink = MemorySink()
    try:
        probed = record(run, sink, on_step=lambda step, values: metrics.update(values), manage_gc=False,
                        handle_signals=False)
    except RunFailed as e:
        raise StudyCodeError(f"probe step 1 failed: {e.error}", e.traceback) from None
    metrics.update(sink.zero_metrics)       # step 0's: a run its study ended at reset has no step 1
    report.n_agents, report.n_edges = len(run.ids), run.network.number_of_edges()
    report.messages_in_probe = sink.messages
    _display_names(spec, metrics, _state_fields(run))
    bus = message_bus(run.environment)
    wired = bus is not None or report.messages_in_probe > 0   # posts stored in the probe went through some bus
    reads_network = run.network.read       # study code asked for ctx.graph or ctx.network in the probe step
    w = report.warnings
    w += probed.warnings                    # what the run itself would say (a diffusion with no seed)
    if pop.propagation == "contagion" and not wired:
        if reads_network:
            w.append(f"{POPULATION}: propagation is 'contagion' but the environment wires no message bus: its "
                     "model spreads states along the network directly; label it 'network'")
        else:
            w.append(f"{POPULATION}: propagation is 'contagion' but the environment wires no message bus "
                     "(none among its attributes after reset, and no message posted): nothing propagates "
                     "between agents")
    if pop.propagation == "broadcast_then_local" and not reads_network and not wired:
        w.append(f"{POPULATION}: propagation is 'broadcast_then_local' but the environment wires no message bus "
                 "and never reads the network (ctx.graph or ctx.network): nothing spreads locally after the "
                 "broadcast")
    if pop.propagation == "network" and not reads_network and not wired:
        w.append(f"{POPULATION}: propagation is 'network' but the study never reads the network (ctx.graph or "
                 "ctx.network) and wires no message bus: nothing spreads along the edges")
    if pop.propagation == "independent" and (wired or reads_network):   # more than the static "is the network used?"
        w[:] = [x for x in w if "propagation is 'independent' but a" not in x]
        if wired:
            w.append(f"{POPULATION}: propagation is 'independent' but the environment wires a message bus: "
                     "agents can hear each other; label it 'contagion' or 'broadcast_then_local'")
        else:
            w.append(f"{POPULATION}: propagation is 'independent' but the study reads the network: label it "
                     "'network' if states spread along its edges")
    # said only of a bus the lint found: one kept where it does not look (in a dict of feeds) may carry
    carry = bool(getattr(bus, "carry_previous_step", False))
    if report.messages_in_probe and spec.rounds == 1 and bus is not None and not carry:
        w.append(f"{SIMULATION}: the study posts messages with interaction_rounds: 1 and carry_previous_step "
                 "off: no agent can ever read them (a post is visible only to later rounds "
                 "of its step, or to the next step with carry_previous_step)")
    if pop.interaction.kind in ("file", "edges"):       # a generator's isolates are its model's; a file's may be a slip
        import numpy as np
        source, target, _ = run.network.edges()
        linked = np.zeros(len(run.ids), bool)
        linked[source], linked[target] = True, True
        alone = [run.ids[i] for i in np.flatnonzero(~linked)]
        if alone:
            given = f"{pop.interaction.path}" if pop.interaction.kind == "file" else "interaction.edges"
            w.append(f"{POPULATION}: {len(alone):,} of {len(run.ids):,} agents have no edge in {given} "
                     f"({', '.join(alone[:5])}{', ...' if len(alone) > 5 else ''}): nothing reaches them or "
                     "leaves them along the network")
    silent = bus is not None and not report.messages_in_probe and getattr(bus, "latest_step", 0) is None
    if silent:      # a bus nothing was posted to (stored or not) in step 1
        w.append(f"{SIMULATION}: a message bus is wired but step 1 posted no message: NeighborFeed.ingest posts "
                 "only actions of kind 'post' or 'reply' (others pass through it untouched), so unless the study "
                 "posts later, no agent hears another")
    w += _new_attributes_like_old(spec, run.personas)
    if pop.interaction.kind == "none" and wired and not any("interaction.kind is 'none'" in x for x in w):
        w.append(f"{POPULATION}: a message bus is wired but interaction.kind is 'none': no agent has neighbours")


def _new_attributes_like_old(spec: StudySpec, personas) -> list[str]:
    """An event that sets an attribute no agent has, close to the name of one they have (``grup``, ``group``):
    most likely a typo, after which the event changes an attribute nothing reads and the intervention silently
    does nothing. A new name unlike any (``vaccinated``) is left alone: setting a new attribute is legitimate."""
    import difflib
    have = sorted({k for p in personas for k in p.attributes})
    out, made = [], set()
    for i, ev in sorted(enumerate(spec.environment.scheduled_events), key=lambda pair: pair[1].at_step):
        if ev.selector is None or ev.target in have or ev.target in made:
            continue
        made.add(ev.target)
        near = difflib.get_close_matches(ev.target, have, n=1, cutoff=0.75)
        if near:
            out.append(f"{ENVIRONMENT}: scheduled_events[{i}].target: no agent has attribute '{ev.target}', so event "
                       f"'{ev.name}' gives its agents a new one; did you mean '{near[0]}'? (a study reading "
                       f"'{near[0]}' would see no change)")
    return out


def message_bus(env) -> object | None:
    """The first message bus ``env`` holds after reset (:func:`desim.study.contract.message_buses`, the
    rule by which its messages are stored), None when it holds none."""
    from desim.study.contract import message_buses
    buses = message_buses(env)
    return buses[0] if buses else None


def _state_fields(run: Run) -> set[str]:
    """The state fields of the panel rows the probe step wrote."""
    env = run.environment
    if run.states_as_columns:
        return set(call(env.state_columns, root=run.root, step=1))
    out: set[str] = set()
    for agent_id in run.ids:
        state = call(env.agent_state, agent_id, root=run.root, step=1, agent=agent_id)
        if isinstance(state, dict):
            out.update(str(k) for k in state)
    return out


def _display_names(spec: StudySpec, metrics: set[str], states: set[str]) -> None:
    path = spec.root / FILES["study"][0]
    for key, names, have, what in (("display_metrics", spec.study.display_metrics, metrics, "the collector reports"),
                                   ("display_states", spec.study.display_states, states, "agent states have")):
        for i, name in enumerate(names):
            if name not in have:
                raise StudyConfigError(path, [(f"{key}[{i}]", f"unknown name '{name}' ({what}: "
                                               f"{', '.join(sorted(have)) or 'none'})")])
    for name in spec.study.metric_bounds:
        if name not in metrics:
            raise StudyConfigError(path, [(f"metric_bounds.{name}", f"unknown metric '{name}' (the collector "
                                           f"reports: {', '.join(sorted(metrics)) or 'none'})")])
