"""The message bus: how agents hear each other within and across steps.

The engine never touches it. A study's environment owns a bus (usually made
in ``reset``), turns post-shaped actions into messages with
``NeighborFeed.ingest`` inside ``apply``, hands each agent its feed with
``NeighborFeed.local_for`` inside ``observe_batch``, and the collector
persists what ``drain()`` returns into the ``messages`` table.

The visibility rule (exact, from the seed page): ``visible_to(recipient,
neighbors, step, round_idx)`` returns message ``m`` iff its author is one of
the recipient's neighbours and either ``m.step == step and m.round <
round_idx`` (posted earlier this step) or ``carry_previous_step and m.step ==
step - 1`` (last step's).

Delivery is indexed by step and author, so a reader costs its neighbours'
look-ups plus the messages it receives, never a scan of the whole bus.
Steps older than ``step - 1`` can never be seen again and are dropped.
"""
from __future__ import annotations

from typing import Callable, Iterable

from .schemas import Action, Message

POST_KINDS = ("post", "reply")


class MessageBus:
    """Where messages are posted and from which each agent reads its visible share."""

    def post(self, message: Message) -> None:
        raise NotImplementedError

    def visible_to(self, recipient: str, neighbors: Iterable[str], step: int, round_idx: int) -> list[Message]:
        raise NotImplementedError

    def drain(self) -> list[Message]:
        raise NotImplementedError


class InMemoryMessageBus(MessageBus):
    """A bus held in memory, indexed by step then author."""

    def __init__(self, carry_previous_step: bool = False):
        self.carry_previous_step = carry_previous_step
        self._by_step: dict[int, dict[str, list[Message]]] = {}
        self._latest = None
        self._undrained: list[Message] = []

    def post(self, message: Message) -> None:
        step = message.step
        if self._latest is None or step > self._latest:
            self._latest = step
            for old in [s for s in self._by_step if s < step - 1]:
                del self._by_step[old]
        self._by_step.setdefault(step, {}).setdefault(message.author_id, []).append(message)
        self._undrained.append(message)

    def visible_to(self, recipient: str, neighbors: Iterable[str], step: int, round_idx: int) -> list[Message]:
        now = self._by_step.get(step)
        before = self._by_step.get(step - 1) if self.carry_previous_step else None
        out: list[Message] = []
        if not now and not before:
            return out
        for author in neighbors:
            if author == recipient:
                continue
            if before:
                out.extend(before.get(author, ()))
            if now and round_idx > 0:
                for m in now.get(author, ()):
                    if m.round < round_idx:
                        out.append(m)
        return out

    def drain(self) -> list[Message]:
        """The messages posted since the last drain, in posting order; the buffer is cleared."""
        out, self._undrained = self._undrained, []
        return out


class NeighborFeed:
    """Routes post-shaped actions onto a bus and reads each agent's neighbours back."""

    def __init__(self, neighbors_fn: Callable[[str], Iterable[str]], bus: MessageBus):
        self.neighbors_fn = neighbors_fn
        self.bus = bus

    def ingest(self, actions: Iterable[Action], step: int, round_idx: int) -> list[Message]:
        """Post every ``post`` or ``reply`` action; other kinds pass through untouched.

        The message content is ``payload["content"]`` when present, else the payload.
        """
        posted = []
        for a in actions:
            if a.kind not in POST_KINDS:
                continue
            p = a.payload
            m = Message.model_construct(
                author_id=a.agent_id, step=step, round=round_idx,
                content=p.get("content", p), channel=p.get("channel", "feed"), kind=a.kind,
                audience="neighbors", reply_to=p.get("reply_to"))
            self.bus.post(m)
            posted.append(m)
        return posted

    def local_for(self, agent_id: str, t: int, round_idx: int) -> list[Message]:
        """The messages ``agent_id`` may see at step ``t``, round ``round_idx``."""
        return self.bus.visible_to(agent_id, self.neighbors_fn(agent_id), t, round_idx)
