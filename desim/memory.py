"""Per-agent memory: the last ``window`` final-round actions of each agent.

Only a step's final round enters memory (one entry per agent per step), as
the seed page requires; rounds before it leave no trace here.
"""
from __future__ import annotations

from collections import deque

from .schemas import Action


class Memory:
    def __init__(self, agent_ids: list[str], window: int):
        self.window = window
        self._items: dict[str, deque[Action]] = {a: deque(maxlen=window or None) for a in agent_ids} if window else {}

    def push(self, actions: list[Action]) -> None:
        if not self.window:
            return
        for a in actions:
            self._items[a.agent_id].append(a)

    def of(self, agent_id: str) -> list[Action]:
        if not self.window:
            return []
        return list(self._items[agent_id])

    def for_batch(self, agent_ids: list[str]) -> list[list[Action]]:
        if not self.window:
            return [[] for _ in agent_ids]
        items = self._items
        return [list(items[a]) for a in agent_ids]
