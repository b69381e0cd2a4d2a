"""The endpoint pool after a dead server's round: the next round probes it at once, one request's back-off a
round (EndpointPool.new_round), not queued behind the waiters the last round cancelled."""
from __future__ import annotations

import asyncio
import os

from desim.llm.endpoints import Endpoint, EndpointPool

HANG_GUARD_S = float(os.environ.get("DESIM_TEST_HANG_S", "600"))


def test_a_new_round_probes_a_dead_endpoint_at_once_after_cancelled_waiters():
    async def scenario():
        pool = EndpointPool([Endpoint(url="http://x/v1/chat/completions", shown="http://x/v1", limit=1)],
                            backoff_s=10_000.0, backoff_max_s=10_000.0)
        first = await pool.acquire(0)
        pool.release(first, False)                  # it did not answer: down for a very long while
        waiting = [asyncio.ensure_future(pool.acquire(0)) for _ in range(3)]
        await asyncio.sleep(0)                      # queued behind the back-off
        assert not any(w.done() for w in waiting)
        for w in waiting:                           # the round fails fast: its other requests are cancelled
            w.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        pool.new_round()
        # the next round's first request gets the probe slot now; a queue of dead waiters made it wait
        probe = await asyncio.wait_for(pool.acquire(0), HANG_GUARD_S)
        assert probe is first and probe.in_flight == 1
        assert not pool._waiters
        pool.release(probe, True)                   # it answered: healthy again, every slot open
        assert first.capacity(asyncio.get_running_loop().time()) == 1
        pool.close()
    asyncio.run(scenario())
