"""The engine: one run of a study, step by step, on a SimPy clock.

Read this file top to bottom to know what a run does. For ``t = 1..n_steps``
(sim time ``t`` is step ``t``), with ``K = max(1, interaction_rounds)``:

1. ``advance_to(t)`` fires the step's scheduled events and broadcasts, once;
2. for ``r = 0..K-1`` a round opens: one shared SimPy event (the gate) wakes
   every agent process waiting at it; those agents are the round's
   participants, and ``observe_batch -> decide_batch -> apply`` runs for them;
   an agent busy elsewhere (queuing at a ``simpy.Resource``, travelling) is not
   waiting at the gate and does not act in that round;
3. after round ``K-1`` the final actions go into memory, the step's panel
   rows (every agent's state, its final action or none, whether it was away)
   and metrics are captured, and the collector process writes them as one
   folder of typed Parquet files that appears at once (``desim.datafiles``).

Rounds take no simulated time. Other SimPy processes of the study share the
clock and run between steps; a step starts only after everything else
scheduled for that instant has run (it is scheduled with a lower priority),
so a change made "at t = 2.0" is visible to step 2's observations.

The engine never touches the message bus: it only passes ``round_idx`` down.
"""
from __future__ import annotations

import gc
import signal
import sys
import threading
import time
import traceback
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable

import networkx as nx
import numpy as np
import pyarrow as pa
import simpy
from simpy.events import NORMAL, Event

from .clock import Clock
from .config import StudyConfigError, StudySpec, check_population, read_roster
from .errors import StudyCodeError, call, original, process_failure
from .interfaces import ActionColumns, MetricCollector, RunContext, StopRun, has_columnar_path, has_state_columns
from .interventions import Interventions
from .memory import Memory
from .network import build_graph
from .refs import build
from .rng import Streams
from .schemas import ACTION_SOURCES, Action, Persona
from .store import Catalogue, StudyLayout, open_store
from .store.files import RunFiles
from .store.health import HEARTBEAT_SECONDS
from .store.live import Heartbeat, LiveFile
from .store.tables import (PanelTypes, agent_rows, columnar_initial_rows, columnar_round_rows, columnar_rows,
                           edge_rows, event_rows, initial_rows, message_rows, message_table, metric_rows, round_rows)
from .versions import code_files, code_hash, overrides_of

LATE = NORMAL + 1
_agent_id, _kind, _step, _source, _payload = (attrgetter(name) for name in
                                              ("agent_id", "kind", "step", "source", "payload"))
_ACTION, _DICT, _STR, _SOURCES = {Action}, {dict}, {str}, frozenset(ACTION_SOURCES)


class RunError(RuntimeError):
    """A run stopped because study code misbehaved; the message names the step and agent."""


class RunFailed(RuntimeError):
    """Raised by :meth:`Engine.run` when a run ends ``failed``; its completed steps stay stored."""

    def __init__(self, run_id: str, error: str, db_path: Path, traceback: str = ""):
        self.run_id, self.error, self.db_path, self.traceback = run_id, error, db_path, traceback
        super().__init__(f"run {run_id} failed: {error}")


class StepTick(Event):
    """A timeout scheduled after every other event of the same instant."""

    def __init__(self, env: simpy.Environment, delay: float):
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, LATE, delay)


@dataclass
class StepRecord:
    """What a closed step hands to the collector process."""

    step: int
    panel: pa.Table
    metrics: dict[str, float]
    events: list[dict]
    round_actions: pa.Table | None = None
    llm_calls: pa.Table | None = None


@dataclass
class RunResult:
    run_id: str
    status: str
    store_path: Path
    steps_done: int
    rows_written: int
    wall_seconds: float
    error: str | None = None
    counters: dict[str, Any] = field(default_factory=dict)

    # the run's data, each an Arrow table (``.to_pandas()``); see ``desim.store.reader``
    def data(self):
        from .store import StudyData
        return StudyData(self.store_path)

    def panel(self, columns=None, steps=None):
        return self.data().panel(self.run_id, columns, steps)

    def metrics(self, wide: bool = True):
        return self.data().metrics(self.run_id, wide)

    def messages(self):
        return self.data().messages(self.run_id)

    def events(self):
        return self.data().events(self.run_id)

    def initial_states(self):
        return self.data().initial_states(self.run_id)


class Engine:
    """Runs one study once and writes it to the study's store."""

    def __init__(self, spec: StudySpec, *, db_path: str | Path | None = None, kind: str = "run",
                 run_id: str | None = None, parent_run_id: str | None = None,
                 fork_step: int | None = None, note: str | None = None, sweep_id: str | None = None,
                 replay: dict[int, list] | None = None, resume: bool = False,
                 on_step: Callable[[int, dict[str, float]], None] | None = None, manage_gc: bool = True,
                 handle_signals: bool = True):
        self.spec = spec
        self.sim_cfg = spec.simulation
        self.n_steps = spec.simulation.n_steps
        self.rounds = spec.rounds
        self.seed = spec.simulation.seed
        self.in_memory = str(db_path) == ":memory:"     # a probe run: nothing is written
        self.layout = StudyLayout.at(db_path) if db_path and not self.in_memory else StudyLayout(spec.root)
        self.db_path = Path(db_path) if self.in_memory else self.layout.db
        self.kind, self.parent_run_id, self.fork_step = kind, parent_run_id, fork_step
        self.note, self.sweep_id = note, sweep_id
        self.run_id = run_id or f"r{uuid.uuid4().hex[:10]}"
        self.replay = replay or {}
        self.resume = resume
        self.on_step = on_step
        self.manage_gc = manage_gc
        self.handle_signals = handle_signals
        self._signal: int | None = None
        self.counters: dict[str, Any] = {"decide_calls": 0, "rows_written": 0, "messages": 0}
        self.write_from = 1
        with _gc_paused(manage_gc):     # set-up makes many objects and no cyclic garbage worth a pass
            self._build()

    # --- set-up -----------------------------------------------------------------
    def _build(self) -> None:
        spec, root = self.spec, self.spec.root
        self.streams = Streams(self.seed)
        self.personas = self._population()
        try:
            self.graph = build_graph(spec.population.interaction, self.personas,
                                     seed=int(self.streams.numpy("network").integers(2**31)))
        except (ValueError, nx.NetworkXException) as e:
            raise StudyConfigError(root / "population" / "population.json",
                                   [("interaction", f"cannot build a '{spec.population.interaction.kind}' "
                                                    f"network over {len(self.personas)} agents: {e}")]) from None
        check_population(spec, self.personas)
        self.sim = simpy.Environment()
        self.interventions = Interventions(spec.environment.layers, spec.environment.scheduled_events,
                                           spec.environment.broadcasts, self.personas)
        self.ctx = RunContext(sim=self.sim, clock=Clock(self.sim_cfg.time_unit), streams=self.streams,
                              personas=self.personas, graph=self.graph, interventions=self.interventions,
                              params=dict(self.sim_cfg.parameters), n_steps=self.n_steps,
                              rounds=self.rounds, seed=self.seed, run_id=self.run_id, occupy=self.occupy,
                              root=spec.root, llm=self.sim_cfg.llm)
        self.environment = build(spec.environment.provider, root, "environment/environment.json: provider")
        self.decision = build(self.sim_cfg.decision, root, "simulation/simulation.json: decision")
        self.collector = (build(self.sim_cfg.collector, root, "simulation/simulation.json: collector")
                          if self.sim_cfg.collector else MetricCollector())
        for part in (self.environment, self.decision, self.collector):
            part.ctx = self.ctx
        self._call = partial(call, root=root)
        self._call(self.decision.reset, self.seed)   # before anything is written: a bad llm block stops here
        self.columnar = has_columnar_path(self.environment, self.decision)
        self.state_columns = self.columnar or has_state_columns(self.environment)
        self.ids = self.ctx.agent_ids
        self._all_ids = frozenset(self.ids)
        self.id_array = pa.array(self.ids, pa.string())
        self.types = PanelTypes(self.sim_cfg.panel.allow_nonfinite if self.sim_cfg.panel else ())
        self._last_present: Any = None
        self.memory = Memory(self.ids, self.sim_cfg.memory_window)
        self._gate = self.sim.event()
        self._present: list[int] = []
        self._busy: set[str] = set()
        self._errands: dict[str, simpy.Process] = {}
        self._agents: list[simpy.Process] = []
        self._step_closed = self.sim.event()
        self._round_rows: list[pa.Table] = []

    def _population(self) -> list[Persona]:
        pop, root = self.spec.population, self.spec.root
        if pop.personas is not None:
            return list(pop.personas)
        if pop.roster is not None:
            return read_roster(root, pop.roster)
        provider = build(pop.provider, root, "population/population.json: provider")
        personas = call(provider.personas, self.streams.numpy("population"), root=root, step="population")
        if not isinstance(personas, list):
            raise RunError(f"population provider {pop.provider.ref}: returned {type(personas).__name__}, "
                           "not a list of Persona")
        seen: set[str] = set()
        for i, p in enumerate(personas):
            if not isinstance(p, Persona):
                raise RunError(f"population provider {pop.provider.ref}: item {i} is a "
                               f"{type(p).__name__}, not a Persona")
            if p.agent_id in seen:
                raise RunError(f"population provider {pop.provider.ref}: duplicate agent_id '{p.agent_id}'")
            seen.add(p.agent_id)
        return personas

    def occupy(self, agent_id: str, errand) -> None:
        """Send an agent on an errand (a SimPy generator); it skips every round until it returns."""
        if agent_id in self._busy:
            raise RunError(f"agent {agent_id} is already busy at t={self.sim.now}")
        self._busy.add(agent_id)
        if self._agents:
            self._agents[self.ctx.index[agent_id]].interrupt(errand)
        else:   # no standing agent processes (yet, in reset, or at all): the errand gets its own
            self._errands[agent_id] = self.sim.process(self._errand(agent_id, errand))

    def _errand(self, agent_id: str, errand):
        yield from errand
        self._busy.discard(agent_id)
        del self._errands[agent_id]

    # --- SimPy processes --------------------------------------------------------
    def _agent(self, i: int, agent_id: str):
        """An agent waits at the round gate; when sent on an errand it runs it, then returns."""
        away = self._errands.get(agent_id)
        if away is not None:            # sent on an errand in reset(), before this process existed
            yield away
        while True:
            try:
                yield self._gate
                self._present.append(i)
            except simpy.Interrupt as errand:
                yield from errand.cause
                self._busy.discard(agent_id)

    def _open_round(self):
        if not self._agents:            # agent_processes: false -- everyone not on an errand takes part
            if not self._busy:
                return self._everyone
            busy = {self.ctx.index[a] for a in self._busy}
            return [i for i in self._everyone if i not in busy]
        gate, self._gate = self._gate, self.sim.event()
        self._present = []
        gate.succeed()
        yield self.sim.timeout(0)       # processed after the gate: every waiting agent has arrived
        self._present.sort()
        return self._present

    def _steps(self, first: int):
        for t in range(first, self.n_steps + 1):
            yield StepTick(self.sim, t - self.sim.now)
            self.ctx.step = t
            events = self._call(self.environment.advance_to, t, step=t)
            if t in self.replay:
                actions = self._replay_step(t)
            else:
                for r in range(self.rounds):
                    self.ctx.round_idx = r
                    present = yield from self._open_round()
                    actions = self._round(present, t, r)
            self._call(self.environment.end_step, t, step=t)
            self._close_step(t, actions, events)

    def _collector(self):
        """Writes each closed step in one transaction, then reports progress."""
        while True:
            record: StepRecord = yield self._step_closed
            messages = self._messages(record.step)
            self.counters["messages"] += messages.num_rows
            if record.step >= self.write_from:
                self.files.write_step(record.step, {
                    "panel": record.panel, "metrics": metric_rows(record.step, record.metrics),
                    "events": event_rows(record.step, record.events) if record.events else None,
                    "messages": messages, "round_actions": record.round_actions,
                    "llm_calls": record.llm_calls})
                self.counters["rows_written"] += record.panel.num_rows
                self._save_types()
                self.last_written = record.step
            if self.live:
                self.live.step(record.step, record.metrics)
            if self.on_step:
                self.on_step(record.step, record.metrics)
            if self._signal is not None:
                name = signal.Signals(self._signal).name
                raise StopRun(f"stopped by {name} after step {record.step}; resume with: "
                              f"desim run {self.spec.root} --resume {self.run_id}")

    # --- one round ----------------------------------------------------------------
    def _round(self, present: list[int], t: int, r: int):
        self.counters["decide_calls"] += 1
        if self.columnar:
            idx = np.asarray(present, dtype=np.int64)
            obs = self._call(self.environment.observe_columns, idx, t, r, step=t, round_idx=r)
            actions = self._call(self.decision.decide_columns, obs, idx, t, r, step=t, round_idx=r)
            if not isinstance(actions, ActionColumns) or len(actions) != len(idx):
                raise RunError(f"step {t} round {r}: decide_columns must return ActionColumns with "
                               f"{len(idx)} entries, got {type(actions).__name__} of {len(actions) if isinstance(actions, ActionColumns) else '?'}")
            actions.idx = idx
            self._call(self.environment.apply_columns, idx, actions, step=t, round_idx=r)
            if self.sim_cfg.record_rounds:
                self._round_rows.append(columnar_round_rows(self.types, t, self.id_array, actions, r))
            self._last_present = present
            return actions
        everyone = len(present) == len(self.ids)
        ids = list(self.ids) if everyone else [self.ids[i] for i in present]
        observations = self._call(self.environment.observe_batch, ids, t, r, step=t, round_idx=r)
        if len(observations) != len(ids):
            raise RunError(f"step {t} round {r}: observe_batch returned {len(observations)} "
                           f"observations for {len(ids)} agents")
        actions = self._checked(self._call(self.decision.decide_batch, observations, self.memory.for_batch(ids),
                                           step=t, round_idx=r), ids, everyone, t, r)
        self._call(self.environment.apply, actions, step=t, round_idx=r)
        if self.sim_cfg.record_rounds:
            self._round_rows.append(round_rows(self.types, t, actions, r))
        self._last_present = present
        return actions

    def _checked(self, actions: Any, ids: list[str], everyone: bool, t: int, r: int) -> list[Action]:
        """Refuse garbage from a decision model with an error naming the agent.

        This is where the hot-path records are validated (they are plain dataclasses): each
        check is one pass in C over the round's actions (a set of their types, of their steps,
        ...), and only when one fails are the actions walked in Python, to word the error.
        Actions for ``ids`` in their order (the usual reply) are one list comparison: distinct
        agents that took part; any other order is checked through a set."""
        if not isinstance(actions, list):
            raise RunError(f"step {t} round {r}: decide_batch returned {type(actions).__name__}, not a list")
        if not actions:
            return actions
        present = None
        try:        # every check as one pass in C over the round's actions
            kinds = set(map(_kind, actions))
            good = set(map(type, actions)) == _ACTION
            if good and list(map(_agent_id, actions)) != ids:
                present = self._all_ids if everyone else set(ids)
                agents = set(map(_agent_id, actions))
                good = len(agents) == len(actions) and present.issuperset(agents)
            good = (good and set(map(_step, actions)) == {t}
                    and _SOURCES.issuperset(map(_source, actions))
                    and set(map(type, map(_payload, actions))) == _DICT
                    and set(map(type, kinds)) == _STR and "" not in kinds)
        except (AttributeError, TypeError):     # not Actions, or an unhashable id or step
            good = False
        if not good:
            if present is None:
                present = self._all_ids if everyone else set(ids)
            seen: set[str] = set()
            for a in actions:
                if (type(a) is not Action or a.agent_id in seen or a.agent_id not in present or a.step != t
                        or a.source not in ACTION_SOURCES or type(a.payload) is not dict
                        or type(a.kind) is not str or not a.kind):
                    self._refuse(a, seen, present, t, r)
                seen.add(a.agent_id)
        return actions

    def _refuse(self, a: Any, seen: set[str], present: set[str], t: int, r: int) -> None:
        if not isinstance(a, Action):
            raise RunError(f"step {t} round {r}: decide_batch returned {a!r:.80}, not an Action")
        try:
            known = a.agent_id in self.ctx.index
        except TypeError:
            known = False
        if not known:
            raise RunError(f"step {t} round {r}: action for unknown agent {a.agent_id!r:.60}")
        if a.agent_id not in present:
            raise RunError(f"step {t} round {r}: action for agent '{a.agent_id}', "
                           "which did not take part in this round")
        if a.agent_id in seen:
            raise RunError(f"step {t} round {r}: two actions for agent '{a.agent_id}' in one round")
        if a.step != t:
            raise RunError(f"step {t} round {r}: action for agent '{a.agent_id}' says step {a.step}")
        raise RunError(f"step {t} round {r}: malformed action for agent '{a.agent_id}': {a!r:.120}")

    def _replay_step(self, t: int):
        """A warm start: the parent's stored actions, round by round, applied without
        observing or deciding (``replay[t]`` holds one list of actions per round)."""
        actions = None
        for r, actions in enumerate(self.replay[t]):
            self.ctx.round_idx = r
            if self.columnar:
                self._call(self.environment.apply_columns, actions.idx, actions, step=t, round_idx=r)
            else:
                self._call(self.environment.apply, actions, step=t, round_idx=r)
        return actions

    # --- closing a step -------------------------------------------------------------
    def _close_step(self, t: int, actions, events: list[dict]) -> None:
        away = self._away()
        if self.columnar:
            panel = columnar_rows(self.types, t, self.id_array, self._states(t), actions, away)
        else:
            self.memory.push(actions)
            states = self._states(t) if self.state_columns else None
            panel = self._call(agent_rows, self.types, t, self.id_array, self.ids, self.environment.agent_state,
                               actions, away, states, step=t, blame=self.environment.agent_state)
        metrics = self._metrics(t, actions)
        round_rows = (pa.concat_tables(self._round_rows, promote_options="permissive") if self._round_rows
                      else None)   # a payload field new in a later round is null in the earlier ones
        self._round_rows = []
        closed, self._step_closed = self._step_closed, self.sim.event()
        calls = self.decision.drain_calls() if hasattr(self.decision, "drain_calls") else None
        closed.succeed(StepRecord(t, panel, metrics, events or [], round_rows, calls))

    def _metrics(self, t: int, actions) -> dict[str, float]:
        raw = self._call(self.collector.collect, t, self.environment, actions, step=t) or {}
        if not isinstance(raw, dict):
            raise RunError(f"step {t}: {type(self.collector).__name__}.collect returned "
                           f"{type(raw).__name__}, not a dict of metric name to number")
        out = {}
        for name, value in raw.items():
            if isinstance(value, (str, bool, np.bool_)) or value is None:
                raise RunError(f"step {t}: metric '{name}' is {value!r:.60}, not a number")
            try:
                out[str(name)] = float(value)
            except (TypeError, ValueError):
                raise RunError(f"step {t}: metric '{name}' is {value!r:.60}, not a number") from None
        return out

    def _away(self):
        """Agents that missed the final round (busy on an errand), or None when nobody did."""
        present = self._last_present
        if present is None or len(present) == len(self.ids):
            return None
        away = np.ones(len(self.ids), bool)
        away[np.asarray(present, dtype=np.int64)] = False
        return away

    def _messages(self, step: int) -> pa.Table:
        drained = self._call(self.environment.drain_messages, step=step)
        return message_table(drained, step) if isinstance(drained, pa.Table) else message_rows(drained, step)

    def _save_types(self) -> None:
        saved = self.types.to_json()
        if saved != self._saved_types:
            self.files.save_types(saved)
            self._saved_types = saved

    def _states(self, t: int) -> dict:
        """The environment's ``state_columns``, checked: a dict of one entry per agent per field."""
        columns = self._call(self.environment.state_columns, step=t)
        if not isinstance(columns, dict):
            raise RunError(f"step {t}: state_columns returned {type(columns).__name__}, not a dict of "
                           "field name to one value per agent")
        for name, values in columns.items():
            n = len(values) if hasattr(values, "__len__") else None
            if n != len(self.ids):
                raise RunError(f"step {t}: state_columns field '{name}' has {n if n is not None else 'no'} "
                               f"values for {len(self.ids)} agents (one per agent, in population order)")
        return columns

    def _initial(self, events: list[dict]) -> None:
        if self.state_columns:
            table = columnar_initial_rows(self.types, self.id_array, self._states(0))
        else:
            states = self._call(self._initial_states, step=0, blame=self.environment.agent_state)
            table = initial_rows(self.types, self.id_array, self.ids, states)
        metrics = self._metrics(0, None)
        messages = self._messages(0)
        if not self.resume:
            self.files.write_step(0, {"initial": table, "edges": edge_rows(self.graph.edges()),
                                      "metrics": metric_rows(0, metrics),
                                      "events": event_rows(0, events) if events else None,
                                      "messages": messages})
            self._save_types()
            self.last_written = 0
        if self.live:
            self.live.step(0, metrics)

    def _initial_states(self) -> list[dict]:
        return [self.environment.agent_state(agent_id) for agent_id in self.ids]

    # --- the run --------------------------------------------------------------------
    def run(self) -> RunResult:
        """Run every step; mark the run completed, or failed with its completed steps kept."""
        started = time.perf_counter()
        with _gc_paused(self.manage_gc):    # no collection passes during the study's set-up either
            try:    # the study's set-up, before anything is written: its errors leave no trace in the store
                self._call(self.environment.reset, self.seed)
            except BaseException:
                self.decision.close()
                raise
            memory = self.in_memory
            self.files = RunFiles(None if memory else self.layout.data, self.run_id)
            self.live = None if memory else LiveFile(self.layout.live_file(self.run_id), self.run_id, self.spec.id,
                                                     self.n_steps, self.kind)
        self.last_written, self._saved_types = -1, None
        status, error, first, trace = "running", None, 1, None
        failure: Exception | None = None
        beat = Heartbeat(self.live, HEARTBEAT_SECONDS) if self.live else None
        previous = self._trap_signals()
        try:
            if self.manage_gc:      # off for the whole run; one collection and a freeze before the loop
                gc.disable()
            self._open_run(memory)
            self._initial(self._call(self.environment.advance_to, 0, step=0))
            if self.sim_cfg.agent_processes:
                self._agents = [self.sim.process(self._agent(i, a)) for i, a in enumerate(self.ids)]
            else:
                self._everyone = list(range(len(self.ids)))
            self.sim.process(self._collector())
            steps = self.sim.process(self._steps(first))
            if self.manage_gc:      # set-up's objects leave the collector's view; no collection pass first
                gc.freeze()         # (set-up leaves little garbage; a pass took 0.2 s at 20,000 agents)
            self.sim.run(until=steps)
            status = "completed"
        except StopRun as e:
            status, error = "interrupted", f"{type(e).__name__}: {e}"
        except KeyboardInterrupt:
            status, error = "interrupted", "interrupted by the user"
            raise
        except SystemExit as e:
            status, error = "failed", f"study code called sys.exit({e.code!r}) during step {self.ctx.step}"
            raise
        except Exception as e:  # the run is marked failed; completed steps stay in the store
            e = original(e)
            if isinstance(e.__context__, (KeyboardInterrupt, StopRun)):  # a rollback failed under Ctrl-C
                status, error = "interrupted", f"{type(e.__context__).__name__}: {e.__context__}"
            else:
                if not isinstance(e, StudyCodeError):   # raised while the clock ran: maybe a study process
                    e = process_failure(e, self.spec.root, self.sim.now, self.ctx.step) or e
                status, failure = "failed", e
                if isinstance(e, StudyCodeError):
                    error, trace = str(e), e.traceback
                else:
                    error, trace = f"{type(e).__name__}: {e}", "".join(traceback.format_exception(e))
        finally:
            self._restore_signals(previous)
            if beat:
                beat.stop()
            if self.manage_gc:
                gc.enable()
                gc.unfreeze()
            try:
                self._close_run(memory, status, error, started, trace)
            finally:
                self.decision.close()
        wall = time.perf_counter() - started
        if failure is not None:
            raise RunFailed(self.run_id, error, self.db_path, trace or "") from failure
        if hasattr(self.decision, "counters"):
            self.counters["llm"] = dict(self.decision.counters())
        done = self.ctx.step if status != "completed" else self.n_steps
        return RunResult(self.run_id, status, self.db_path, done, self.counters["rows_written"],
                         wall, error, dict(self.counters))

    def _open_run(self, memory: bool) -> None:
        """Record the run in the catalogue (or find it, to resume), then let the database go."""
        if memory:
            return
        with open_store(self.layout, read_only=False) as con:
            catalogue = Catalogue(con)
            if self.resume:
                row = catalogue.run(self.run_id)
                if row is None:
                    raise RunError(f"no run '{self.run_id}' in {self.db_path}")
                last = max(row["last_step"], self.files.last_step())
                self.files.drop_after(last)
                self.write_from = max(1, last + 1)
                self.resume = last >= 0            # nothing stored yet: write step 0 too
                saved = self.files.load_types()
                if saved:
                    self.types = PanelTypes(self.types.state.allow_nonfinite, saved)
                    self._saved_types = saved
                self.last_written = last
                catalogue.reopen_run(self.run_id)
            else:
                self._start_run(catalogue)
        self.files.start()

    def _close_run(self, memory: bool, status: str, error: str | None, started: float,
                   trace: str | None = None) -> None:
        """Merge the run's step files and record how it ended."""
        if memory:
            return
        try:
            with open_store(self.layout, read_only=False) as con:
                try:
                    self.files.merge()
                finally:
                    Catalogue(con).finish_run(self.run_id, status, error, time.perf_counter() - started,
                                              last_step=self.last_written if self.last_written >= 0 else None,
                                              traceback=trace)
        finally:
            if self.live:
                self.live.finish(status, error)

    # --- signals: SIGTERM, SIGHUP and a first Ctrl-C end the run at the next step boundary ---
    def _trap_signals(self) -> dict[int, Any]:
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            previous[sig] = signal.signal(sig, self._on_signal)
        return previous

    def _on_signal(self, signum: int, frame) -> None:
        if self._signal is not None:            # asked twice: stop now
            raise KeyboardInterrupt if signum == signal.SIGINT else StopRun(
                f"stopped by a second {signal.Signals(signum).name} during step {self.ctx.step}")
        self._signal = signum
        if signum == signal.SIGINT:
            sys.stderr.write(f"\ndesim: stopping after step {self.ctx.step} (Ctrl-C again to stop now)\n")

    @staticmethod
    def _restore_signals(previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


    def _start_run(self, catalogue: Catalogue) -> None:
        """Record the run (and its version: a new configuration is a new version)."""
        config = self.spec.resolved()
        code = code_files(self.spec.root, self.spec.population.roster)
        version_id, created = catalogue.ensure_version(self.spec.id, self.spec.version_config(),
                                                       kind=self.kind, code=code,
                                                       parent_run_id=self.parent_run_id, fork_step=self.fork_step,
                                                       note=self.note)
        kind, parent = self.kind, self.parent_run_id
        if kind == "run" and created:
            prev = catalogue.parent_version(version_id)
            if prev:  # an edited study: a new version, child of the last run of the previous one
                kind, parent = "version", catalogue.latest_run_of(prev)
        self.kind = kind
        catalogue.start_run(
            run_id=self.run_id, study_id=self.spec.id, kind=kind, seed=self.seed,
            n_steps=self.n_steps, rounds=self.rounds, time_unit=self.sim_cfg.time_unit,
            config=config, parameters=dict(self.sim_cfg.parameters), parent_run_id=parent,
            fork_step=self.fork_step, note=self.note, sweep_id=self.sweep_id, n_agents=len(self.ids),
            version_id=version_id, overrides=overrides_of(self.spec), code=code, code_hash=code_hash(code))


@contextmanager
def _gc_paused(pause: bool):
    """The cyclic collector off for a block (when the engine manages it), back as it was after."""
    was = gc.isenabled()
    if pause:
        gc.disable()
    try:
        yield
    finally:
        if pause and was:
            gc.enable()


def run_study(spec: StudySpec, **kwargs) -> RunResult:
    """Run ``spec`` once; see :class:`Engine` for the options.

    A ``warm_start`` in simulation.json makes the run a branch of that run at
    that step, as ``desim run`` does (refused, before anything is written, when
    it cannot be exact).
    """
    warm = spec.simulation.warm_start
    if warm:
        from .branch import branch  # branches are built on the engine
        return branch(spec.root, warm.from_run, warm.at_step, spec=spec, note=kwargs.pop("note", "warm start"),
                      **kwargs)
    return Engine(spec, **kwargs).run()


