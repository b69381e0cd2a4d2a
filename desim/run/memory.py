"""Per-agent memory: the last ``window`` final-round actions of each agent.

Only a step's final round enters memory (one entry per agent per step), as
the seed page requires; rounds before it leave no trace here.

Memory is kept by step, not by agent: closing a step files its final
actions as they are (one list, no per-agent copy), and an agent's memory is
looked up only when a decision model reads it. Most rule models never do, so
they pay nothing for it. An agent's memory is its own last ``window``
actions, however many steps ago (an agent away on an errand keeps what it
did before it left).
"""
from __future__ import annotations

from collections.abc import Sequence

from desim.records import Action


class Memory:
    def __init__(self, agent_ids: list[str], window: int):
        self.window = window
        self.n_agents = len(agent_ids)
        self._steps: list[_Step] = []           # oldest first

    def push(self, actions: list[Action]) -> None:
        """File a closed step's final actions (at most one per agent, as the engine checks)."""
        if not self.window:
            return
        self._steps.append(_Step(actions))
        # once the newest `window` steps each hold every agent, nobody can need anything older
        full = 0
        for i in range(len(self._steps) - 1, -1, -1):
            full = full + 1 if len(self._steps[i].actions) == self.n_agents else 0
            if full == self.window:
                del self._steps[:i]
                break

    def of(self, agent_id: str) -> list[Action]:
        """``agent_id``'s last ``window`` final-round actions, oldest first."""
        out: list[Action] = []
        if not self.window:
            return out
        for step in reversed(self._steps):
            a = step.get(agent_id)
            if a is not None:
                out.append(a)
                if len(out) == self.window:
                    break
        out.reverse()
        return out

    def for_batch(self, agent_ids: list[str]) -> "Memories":
        """The memories of ``agent_ids`` as they stand now (later steps filed do not change them)."""
        return Memories(self._snapshot(), agent_ids)

    def _snapshot(self) -> "Memory":
        """A copy that shares the filed steps but not the list of them (a few entries)."""
        frozen = Memory.__new__(Memory)
        frozen.window, frozen.n_agents, frozen._steps = self.window, self.n_agents, list(self._steps)
        return frozen


class _Step:
    """One step's final actions; indexed by agent on the first look-up."""

    __slots__ = ("actions", "_by_agent")

    def __init__(self, actions: list[Action]):
        self.actions = actions
        self._by_agent: dict[str, Action] | None = None

    def get(self, agent_id: str) -> Action | None:
        if self._by_agent is None:
            self._by_agent = {a.agent_id: a for a in self.actions}
        return self._by_agent.get(agent_id)


class Memories(Sequence):
    """The memories of a round's agents, in their order, each looked up when read.

    ``memories[i]`` is a list of the ``i``-th agent's remembered actions
    (oldest first), as ``decide_batch`` has always received. A read-only
    sequence, not a list: ``list(memories)`` gives the list of lists.
    """

    __slots__ = ("_memory", "_ids")

    def __init__(self, memory: Memory, agent_ids: list[str]):
        self._memory, self._ids = memory, agent_ids

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._memory.of(a) for a in self._ids[i]]
        return self._memory.of(self._ids[i])

    def __iter__(self):
        of = self._memory.of
        return (of(a) for a in self._ids)

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"Memories({list(self)!r})"
