"""Agents talking to each other: the message bus (``bus``), how it keeps posts (``batches``), and the
neighbour view a study reads it through (``feed``; ``columnar`` for the columnar path)."""
from desim.messaging.bus import InMemoryMessageBus, MessageBus
from desim.messaging.feed import NeighborFeed

__all__ = ["InMemoryMessageBus", "MessageBus", "NeighborFeed"]
