"""The engine: one run of an assembled study, step by step, on a SimPy clock.

Read this file top to bottom to know what a run does. For ``t = 1..n_steps``
(sim time ``t`` is step ``t``), with ``K = max(1, interaction_rounds)``:

1. ``advance_to(t)`` fires the step's scheduled events and broadcasts, once;
2. for ``r = 0..K-1`` a round opens: every agent process waiting at the gate
   (a SimPy event it waits on whenever it is not on an errand) takes part,
   and ``observe_batch -> decide_batch -> apply`` runs for the round's
   participants; an agent busy elsewhere (queuing at a ``simpy.Resource``,
   travelling) is not waiting at the gate and does not act in that round;
3. after round ``K-1``, ``end_step(t)`` lets the environment settle the step;
   the final actions go into each agent's memory, the step's panel rows (every
   agent's state, its final action or none, whether it was away) and metrics
   are captured, and the collector process hands them to the sink.

Rounds take no simulated time. Other SimPy processes of the study share the
clock and run between steps; a step, and each of its rounds, starts only after
everything else scheduled for that instant has run (it is scheduled with a
lower priority), so a change made "at t = 2.0" is visible to step 2's
observations, and what a process does on news from ``advance_to`` (however
many zero-time hops it takes) is there for round 0: no round sees new input.

The engine never touches the message bus (it only passes ``round_idx`` down)
and never the store: the *source* says who decides (``desim.run.sources``: the
study's behaviour model, or stored actions replayed before a branch's fork),
and the *sink* keeps what the run produces (``desim.store.recorder``).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import simpy
from simpy.events import NORMAL, Event

from desim.errors import StopRun, resume_hint
from desim.run import checks
from desim.run.assemble import Run
from desim.run.memory import Memory
from desim.run.sink import Sink
from desim.study.contract import model_hook
from desim.study.failures import call, tag_agent

LATE = NORMAL + 1


class Settled(Event):
    """A timeout scheduled after every other event of the same instant: a step, and each of its rounds,
    begins only once what else happens at that instant has run, zero-time chains included (a process
    that wakes on what ``advance_to`` or the last round's ``apply`` did, and hands it on)."""

    def __init__(self, env: simpy.Environment, delay: float):
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, LATE, delay)


class Engine:
    """Runs an assembled study once: ``Engine(run, source, sink).run()``.

    ``on_step(step, metrics)`` hears each step as it is kept; ``should_stop()`` (a signal's name, or
    ``None``) ends the run at the next step boundary; ``ready()`` is called once set-up is done, just
    before the clock starts."""

    def __init__(self, run: Run, source, sink: Sink, *, on_step: Callable[[int, dict], None] | None = None,
                 should_stop: Callable[[], str | None] | None = None, ready: Callable[[], None] | None = None):
        if not isinstance(run, Run):    # Engine(spec).run() was the API before the run split
            raise TypeError("Engine takes an assembled Run (desim.run.assemble); to run a study, "
                            "desim.run_study(study)")
        self.run_, self.source, self.sink = run, source, sink
        self.on_step, self.should_stop, self.ready = on_step, should_stop, ready
        self.sim, self.ctx = run.sim, run.ctx     # the SimPy environment, and the study's context
        self.environment = run.environment        # the study's EnvironmentProvider (not SimPy's env)
        self.ids = run.ids
        self._everyone: frozenset[str] | None = None     # the ids as a set, for the per-agent checks (built on use)
        self._positions = list(range(len(run.ids)))
        # the columnar path's positions when everyone takes part: one read-only array every round shares
        self._everyone_idx = np.arange(len(run.ids), dtype=np.int64)
        self._everyone_idx.flags.writeable = False
        self.record_rounds = run.spec.simulation.record_rounds
        self.memory = Memory(self.ids, run.spec.simulation.memory_window)
        self.counters: dict[str, Any] = {"decide_calls": 0}     # the run adds the store's counts
        self._drain_calls = model_hook(run.decision, "drain_calls")     # an LLM decision's llm_calls rows
        self._call = lambda fn, *args, **where: call(fn, *args, root=run.root, **where)
        self._gate = self.sim.event()      # never fires: an agent process waits here between errands
        self._off_gate: set[int] = set()   # the agent processes not waiting at the gate (on an errand)
        self._left: set[int] = set()       # those that left it since the round opening now began
        self._busy: set[str] = set()
        self._errands: dict[str, simpy.Process] = {}
        self._agents: list[simpy.Process] = []
        self._step_closed = self.sim.event()
        self.opened = False             # the sink has the run: from here on, how it ends is recorded
        self.ctx.occupy = self.occupy

    # --- the run ---------------------------------------------------------------------------
    def run(self) -> None:
        """Set the study up, keep its initial state, and run every step."""
        run = self.run_
        # the study's set-up and its step 0 (initial states and metrics): their errors, and a stop_when
        # naming a metric the collector does not report, leave no trace in the store
        self._call(self.environment.reset, run.seed)
        events = self._advance(0)
        states, metrics = self._states(0), self._metrics(0, None)
        checks.check_stop_metrics(run.spec.simulation.stop_when, metrics)
        step_zero = self.sink.step_zero(run, states, metrics, events or [], checks.checked_messages(
            self._call(self.environment.drain_messages, step=0), 0))
        self.sink.open(run)
        self.opened = True
        self.sink.initial(step_zero)
        if run.spec.simulation.agent_processes:
            self._agents = [self.sim.process(self._agent(i, a)) for i, a in enumerate(self.ids)]
        collector = self.sim.process(self._collector())
        steps = self.sim.process(self._steps())
        if self.ready:
            self.ready()
        self.sim.run(until=steps)
        # The collector stores the last step at the instant the step loop ends, and SimPy stops at the
        # loop's end before it would raise the collector's failure: raise it here, or a run whose last step
        # was not stored (or whose on_step failed) would be recorded as completed.
        if collector.triggered and not collector.ok:
            collector.defused = True
            raise collector.value

    def _steps(self):
        for t in range(1, self.run_.n_steps + 1):
            if self.ctx.end_reason is not None:     # the study said its process is over (end_run, stop_when)
                break
            yield Settled(self.sim, t - self.sim.now)
            self.ctx.step = t
            events = self._advance(t)
            stored = self.source.stored(t)
            if stored is not None:
                actions, present = yield from self._replay(t, stored)
            else:
                for r in range(self.run_.rounds):
                    self.ctx.round_idx = r
                    present = yield from self._open_round()
                    actions = self._round(present, t, r)
            self._call(self.environment.end_step, t, step=t)
            self._close_step(t, actions, events, present)

    def _advance(self, t: int) -> list[dict]:
        """Step ``t``'s exogenous input: ``advance_to``, then the ``events`` rows of what fired."""
        env = type(self.environment).__name__
        events = checks.checked_events(self._call(self.environment.advance_to, t, step=t), t, env)
        return checks.with_interventions(events, self.ctx.interventions, t, env)

    def _collector(self):
        """Hands each closed step to the sink, with its messages, then reports progress."""
        while True:
            record = yield self._step_closed
            messages = checks.checked_messages(self._call(self.environment.drain_messages, step=record.step),
                                               record.step)
            self.sink.write(record, messages)
            if self.on_step:
                self.on_step(record.step, record.metrics)
            stop = self.should_stop() if self.should_stop else None
            if stop and not self._last(record.step):     # after the last step there is nothing left to stop
                raise StopRun(f"stopped by {stop} after step {record.step}; resume with: "
                              f"{resume_hint(self.run_.root, self.run_.run_id)}")

    def _last(self, step: int) -> bool:
        """Whether ``step`` is the run's last: its ``n_steps``, or the study said its process is over."""
        return step >= self.run_.n_steps or self.ctx.end_reason is not None

    # --- agents, errands and the round gate -------------------------------------------------
    def occupy(self, agent_id: str, errand) -> None:
        """Send an agent on an errand (a SimPy generator); it skips every round until it returns."""
        if agent_id not in self.ctx.index:
            raise checks.RunError(f"ctx.occupy: no agent '{agent_id}' in the population (t={self.sim.now})")
        if agent_id in self._busy:
            raise checks.RunError(f"agent {agent_id} is already busy at t={self.sim.now}")
        self._busy.add(agent_id)
        if self._agents:
            self._agents[self.ctx.index[agent_id]].interrupt(errand)
        else:   # no standing agent processes (yet, in reset, or at all): the errand gets its own
            self._errands[agent_id] = self.sim.process(self._errand(agent_id, errand))

    def _errand(self, agent_id: str, errand):
        with tag_agent(agent_id):
            yield from errand
        self._busy.discard(agent_id)
        del self._errands[agent_id]

    def _agent(self, i: int, agent_id: str):
        """An agent waits at the round gate; when sent on an errand it runs it, then returns.

        It notes itself when it leaves the gate and when it is back (``_off_gate``), so a round
        reads who is waiting without waking every agent: the gate never fires."""
        away = self._errands.get(agent_id)
        if away is not None:            # sent on an errand in reset(), before this process existed
            self._off_gate.add(i)
            yield away
        while True:
            self._off_gate.discard(i)
            try:
                yield self._gate
            except simpy.Interrupt as errand:
                self._off_gate.add(i)
                self._left.add(i)
                with tag_agent(agent_id):
                    yield from errand.cause
                self._busy.discard(agent_id)

    def _id_set(self) -> frozenset[str]:
        if self._everyone is None:
            self._everyone = frozenset(self.ids)
        return self._everyone

    def _open_round(self):
        if not self._agents:            # agent_processes: false -- everyone not on an errand takes part
            if self.sim.peek() == self.sim.now:     # what else happens at this instant runs first (an errand
                yield Settled(self.sim, 0)          # given in the last round begins), as at the gate below
            if not self._busy:
                return self._positions
            busy = {self.ctx.index[a] for a in self._busy}
            return [i for i in self._positions if i not in busy]
        # The round's participants: the agents waiting at the gate as it opens, less those sent away
        # by what else happens at this instant before the round starts (an errand given in the last
        # round begins). One back from an errand in that moment waits for the next round.
        waiting_off, self._left = set(self._off_gate), set()
        yield Settled(self.sim, 0)
        gone = waiting_off | self._left
        if not gone:
            return self._positions
        return [i for i in self._positions if i not in gone]

    # --- one round ---------------------------------------------------------------------------
    def _round(self, present: list[int], t: int, r: int):
        self.counters["decide_calls"] += 1
        model, where = self.source.model, {"step": t, "round_idx": r}
        if self.run_.columnar:
            idx = self._everyone_idx if present is self._positions else np.asarray(present, dtype=np.int64)
            obs = self._call(self.environment.observe_columns, idx, t, r, **where)
            actions = checks.checked_action_columns(
                self._call(model.decide_columns, obs, idx, t, r, **where), len(idx), t, r)
            actions.idx = idx
            self._call(self.environment.apply_columns, idx, actions, **where)
        else:
            everyone = len(present) == len(self.ids)
            ids = list(self.ids) if everyone else [self.ids[i] for i in present]
            observations = checks.checked_observations(
                self._call(self.environment.observe_batch, ids, t, r, **where), len(ids), t, r)
            actions = checks.checked_actions(
                self._call(model.decide_batch, observations, self.memory.for_batch(ids), **where), ids, t, r,
                self.ctx.index, self._id_set() if everyone else None, observations, model=model)
            self._call(self.environment.apply, actions, **where)
        if self.record_rounds:
            self.sink.round(t, r, actions)
        return actions

    def _replay(self, t: int, rounds: list):
        """A replayed step: each round's stored actions applied, nobody observing or deciding. The round
        gate still opens as in a decided round, so errands interleave with the rounds as they did and the
        agents away are recorded as away. Returns the final round's actions and who took part in it."""
        actions = present = None
        for r, actions in enumerate(rounds):
            self.ctx.round_idx = r
            present = yield from self._open_round()
            if self.run_.columnar:
                self._call(self.environment.apply_columns, actions.idx, actions, step=t, round_idx=r)
            else:
                self._call(self.environment.apply, actions, step=t, round_idx=r)
            if self.record_rounds:      # kept like the panel's replayed rows: a branch's round_actions are whole
                self.sink.round(t, r, actions)
        return actions, present

    # --- closing a step ------------------------------------------------------------------------
    def _close_step(self, t: int, actions, events: list[dict], present: list[int] | None) -> None:
        away = self._away(present)
        if not self.run_.columnar:
            self.memory.push(actions)
        record = self.sink.capture(t, self._states(t), actions, away)
        record.metrics, record.events = self._metrics(t, actions), events or []
        if self.ctx.end_reason is None:
            self.ctx.end_reason = checks.stop_reason(self.run_.spec.simulation.stop_when, record.metrics, t)
        drain_calls = self._drain_calls
        record.llm_calls = drain_calls() if drain_calls is not None else None
        closed, self._step_closed = self._step_closed, self.sim.event()
        closed.succeed(record)

    def _states(self, t: int):
        """Every agent's state: columns (``state_columns``) or one dict per agent (``agent_state``)."""
        if self.run_.states_as_columns:
            return checks.checked_state_columns(self._call(self.environment.state_columns, step=t), len(self.ids), t)
        agent_state, states, agent = self.environment.agent_state, [], None
        append = states.append
        try:
            for agent in self.ids:
                append(agent_state(agent))
        except Exception as e:
            self._call(_raise, e, step=t, agent=agent, blame=agent_state)
        return states

    def _metrics(self, t: int, actions) -> dict[str, float]:
        collector = self.run_.collector
        raw = self._call(collector.collect, t, self.environment, actions, step=t)
        return checks.checked_metrics(raw, t, type(collector).__name__)

    def _away(self, present: list[int] | None):
        """Agents that missed the final round (busy on an errand), or None when nobody did."""
        if present is None or len(present) == len(self.ids):
            return None
        away = np.ones(len(self.ids), bool)
        away[np.asarray(present, dtype=np.int64)] = False
        return away


def _raise(error: Exception) -> None:
    raise error
