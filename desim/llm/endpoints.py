"""Where each request goes: several endpoints, a concurrency limit on each, and back-off of a dead one.

One large run is usually served by several inference replicas; each is an
:class:`Endpoint` with its own ``concurrency`` slots. :class:`EndpointPool`
hands a request a slot on the least-loaded endpoint that can take it, and
queues it otherwise. The queue is ordered by attempts made (most first):
a retry goes before a fresh request, and the request closest to running
out of retries goes first, so a failing server fails the round quickly
instead of every request spending its retries in turn.

An endpoint that does not answer at all (refused, reset, garbage instead of
HTTP, or no complete reply within ``timeout_s``) is *tripped*: it takes no
request for ``backoff_s x 2^(k-1)`` (jittered, at most ``backoff_max_s``)
after its k-th failure in a row, and then one request at a time (a probe)
until one succeeds. Requests it failed go to the other endpoints meanwhile.
A new round starts the back-off of a failed endpoint over (:meth:`EndpointPool.new_round`).
A server that answers with an HTTP error is alive: those requests back off
on their own (:mod:`desim.llm.client`), the endpoint stays open.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Endpoint:
    """One server: its URL as sent and as shown, its HTTP session and its health."""

    url: str                  # .../chat/completions, without credentials: what the HTTP library sees
    shown: str                # the base URL as messages and llm_calls show it
    limit: int
    proxy: str | None = None  # from the environment, looked up once
    session: Any = None
    in_flight: int = 0
    failures: int = 0         # failures in a row since the last success (0: healthy)
    down_until: float = 0.0   # loop time before which it takes nothing
    tripped_at: float = -1.0  # loop time of the last trip: older attempts do not trip it again

    def capacity(self, now: float) -> int:
        """How many requests it may have in flight now: all its slots, none while down, one probe after."""
        if not self.failures:
            return self.limit
        return 0 if now < self.down_until else 1

    def load(self) -> float:
        return self.in_flight / self.limit


@dataclass(order=True)
class _Waiter:
    key: tuple[int, int]
    future: asyncio.Future = field(compare=False)
    avoid: frozenset = field(compare=False)


class EndpointPool:
    """Slots on several endpoints for the requests of one client, on one event loop."""

    def __init__(self, endpoints: list[Endpoint], backoff_s: float, backoff_max_s: float,
                 rng: random.Random | None = None):
        self.endpoints = endpoints
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self._rng = rng or random.Random()
        self._waiters: list[_Waiter] = []
        self._order = itertools.count()
        self._timers: list[asyncio.TimerHandle] = []

    def new_round(self) -> None:
        """A new round probes a failed endpoint again at once, its back-off counted from the start.

        Rounds are apart by the simulation's own work, and a study that falls back when the server is
        unavailable should pay one request's back-off per round, not a wait grown over many rounds;
        the endpoint stays on probation (one request at a time) until it answers.
        """
        now = asyncio.get_running_loop().time()
        for endpoint in self.endpoints:
            if endpoint.failures:
                endpoint.failures, endpoint.down_until, endpoint.tripped_at = 1, now, now
        self._waiters = [w for w in self._waiters if not w.future.done()]   # none left from the last round
        heapq.heapify(self._waiters)
        self._dispatch()

    def _pick(self, avoid: frozenset) -> Endpoint | None:
        """The least-loaded endpoint with a free slot, keeping away from a still-tripped endpoint this
        request failed on while a healthy one is left to wait for."""
        now = asyncio.get_running_loop().time()
        free = [e for e in self.endpoints if e.in_flight < e.capacity(now)]
        if avoid and any(not e.failures for e in self.endpoints):
            free = [e for e in free if not (e.failures and e in avoid)]
        return min(free, key=Endpoint.load) if free else None

    async def acquire(self, attempts: int, avoid: frozenset = frozenset()) -> Endpoint:
        """A slot on some endpoint (released with :meth:`release`); waits, by priority, when none is free."""
        if not self._waiters:          # a queued waiter means no endpoint can take anyone now
            endpoint = self._pick(avoid)
            if endpoint is not None:
                endpoint.in_flight += 1
                return endpoint
        waiter = _Waiter((-attempts, next(self._order)), asyncio.get_running_loop().create_future(), avoid)
        heapq.heappush(self._waiters, waiter)
        try:
            return await waiter.future
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                self.release(waiter.future.result(), None)     # granted, but the request was cancelled
            elif waiter in self._waiters:   # out of the queue now: a cancelled waiter left in it made the
                self._waiters.remove(waiter)    # next round's requests queue behind the old back-off timer
                heapq.heapify(self._waiters)
            raise

    def release(self, endpoint: Endpoint, ok: bool | None, started: float = 0.0) -> None:
        """Give the slot back: ``ok`` True (it answered), False (it did not answer), None (no verdict)."""
        endpoint.in_flight -= 1
        if ok:
            endpoint.failures = 0
        elif ok is False and (not endpoint.failures or started >= endpoint.tripped_at):
            self._trip(endpoint)
        self._dispatch()

    def _trip(self, endpoint: Endpoint) -> None:
        loop = asyncio.get_running_loop()
        endpoint.failures += 1
        wait = self.backoff_s * 2 ** (endpoint.failures - 1) * self._rng.uniform(0.5, 1.0)
        endpoint.tripped_at = loop.time()
        endpoint.down_until = endpoint.tripped_at + min(self.backoff_max_s, wait)
        self._timers = [t for t in self._timers if not t.cancelled() and t.when() > endpoint.tripped_at]
        self._timers.append(loop.call_at(endpoint.down_until, self._dispatch))

    def _dispatch(self) -> None:
        """Hand free slots to the waiters, highest priority first."""
        while self._waiters:
            waiter = self._waiters[0]
            if waiter.future.done():           # cancelled while waiting
                heapq.heappop(self._waiters)
                continue
            endpoint = self._pick(waiter.avoid)
            if endpoint is None:
                return
            heapq.heappop(self._waiters)
            endpoint.in_flight += 1
            waiter.future.set_result(endpoint)

    def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers = []
