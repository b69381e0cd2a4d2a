"""An OpenAI-compatible chat-completions client: many requests in flight, every one bounded in time and size.

vLLM, SGLang, llama.cpp's server, Ollama and the hosted APIs all serve
``POST {base_url}/chat/completions``; this client speaks only that, over
aiohttp (one keep-alive session per endpoint; see the README for why), on an
asyncio loop owned by the decision model (:class:`LoopThread`).

Bounds, all derived from the ``llm`` block (:class:`~desim.llm.config.LLMConfig`):

* an attempt (connect, send, the whole reply) has ``timeout_s``, so a server
  that trickles bytes cannot hold it longer;
* a reply body is read up to ``max_reply_bytes`` and refused beyond
  (``Accept-Encoding: identity`` and no decompression, so what is counted is
  what is held);
* a request has ``request_deadline_s()``; a round has ``round_deadline_s(n)``;
* fail-fast: the first request out of retries ends the round at once, with an
  error naming step, round, agent and URL: the requests not yet sent are
  cancelled, those already sent finish (their completions are billed; the
  caller keeps them), without retrying.

Retried: 408/409/425/429, 5xx, an answer that is not a chat completion or is
too large (after a back-off of ``backoff_s x 2^(k-1)``, jittered, at least
what ``Retry-After`` asks, at most ``backoff_max_s``, holding no slot), and no
answer at all (the endpoint is backed off and the request goes to another
endpoint; :mod:`desim.llm.endpoints`). Other 4xx are not retried:
:class:`LLMRequestRejected`. Credentials never reach a message
(:mod:`desim.llm.scrub`).
"""
from __future__ import annotations

import asyncio
import random
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Coroutine, Mapping

import aiohttp
import orjson

from desim.llm.config import LLMConfig, shown_url
from desim.llm.endpoints import Endpoint, EndpointPool
from desim.llm.errors import LLMError, LLMRequestRejected, LLMUnavailable
from desim.llm.scrub import Scrubber, basic_token, userinfo

RETRY_STATUS = {408, 409, 425, 429}


@dataclass(frozen=True)
class Reply:
    """What one request produced: the text, its usage, how it went and which endpoint answered."""

    content: str | None
    tokens_in: int
    tokens_out: int
    latency_ms: float
    attempts: int
    endpoint: str | None = None


def estimate_tokens(text: str) -> int:
    """About four characters per token: used only when a server reports no usage."""
    return (len(text) + 3) // 4


def retry_after_seconds(headers: Mapping[str, str]) -> float:
    """The wait a 429/503 asks for: ``retry-after-ms`` or ``Retry-After`` in seconds (0 if absent)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue  # an HTTP date: fall back to our own back-off
    return 0.0


def endpoint_proxy(url: str) -> str | None:
    """The proxy the environment (``https_proxy``, ``no_proxy``, ...) names for ``url``, if any."""
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


class _Retry(Exception):
    """One attempt failed in a way worth retrying; ``down`` when the endpoint did not answer at all."""

    def __init__(self, why: str, wait: float = 0.0, down: bool = False):
        super().__init__(why)
        self.why, self.wait, self.down = why, wait, down


class _Wire:
    """One round's requests as they go: which are on the wire (sent, not yet answered), and whether the
    round is stopping (a request failed for good: send nothing new, let those on the wire finish)."""

    def __init__(self) -> None:
        self.sending: set[int] = set()
        self.stopping = False


class _NotSent(Exception):
    """A request that got its slot after its round had begun to stop: given back unsent."""


def _not_if_stopping(pool: EndpointPool, endpoint: Endpoint, wire: _Wire | None) -> None:
    if wire is not None and wire.stopping:
        pool.release(endpoint, None)
        raise _NotSent


class ChatClient:
    """Chat completions against one or more endpoints, bounded in time, size and concurrency."""

    def __init__(self, cfg: LLMConfig, api_key: str | None):
        self.cfg = cfg
        urls = cfg.endpoints()
        self.scrub = Scrubber(api_key, urls + [p for p in map(endpoint_proxy, urls) if p]).clean
        creds = [userinfo(u) for u in urls]
        if api_key and any(creds):
            raise LLMError("credentials twice: DESIM_LLM_API_KEY and user:password@ in DESIM_LLM_BASE_URL; "
                           "use one of them")
        self._auth = [f"Bearer {api_key}" if api_key else f"Basic {basic_token(*c)}" if c else None for c in creds]
        self.endpoints = [Endpoint(url=shown_url(u) + "/chat/completions", shown=shown_url(u),
                                   limit=cfg.concurrency, proxy=endpoint_proxy(u)) for u in urls]
        self.shown_url = ", ".join(e.shown for e in self.endpoints)
        self.retries = 0
        self._jitter = random.Random()
        self._pool: EndpointPool | None = None

    def _ensure(self) -> EndpointPool:
        """One keep-alive session per endpoint, made on the loop that uses it."""
        if self._pool is None:
            for endpoint, auth in zip(self.endpoints, self._auth):
                headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
                if auth:
                    headers["Authorization"] = auth
                # trust_env=False: aiohttp would look up netrc and the proxy variables on a thread
                # for every request; the proxy is looked up once instead (endpoint_proxy)
                endpoint.session = aiohttp.ClientSession(
                    headers=headers, auto_decompress=False, trust_env=False,
                    cookie_jar=aiohttp.DummyCookieJar(),
                    timeout=aiohttp.ClientTimeout(total=None),     # our own deadlines bound every attempt
                    connector=aiohttp.TCPConnector(limit=self.cfg.concurrency, enable_cleanup_closed=True))
            self._pool = EndpointPool(self.endpoints, self.cfg.backoff_s, self.cfg.backoff_max_s, self._jitter)
        return self._pool

    async def complete_many(self, bodies: list[dict[str, Any]], labels: list[str], where: str,
                            sent: list[int] | None = None) -> tuple[dict[int, Reply], Exception | None]:
        """Send every body; ``({index: reply}, failure)``.

        The first request that fails for good stops the round: the requests not yet sent (waiting for a
        slot, or to retry) are cancelled, but those on the wire are let finish, without retrying. A server
        generates, and bills, a completion whose client hangs up; its reply is worth keeping (the caller
        caches it) rather than paying for it again on the resume. The replies in are returned with the
        failure. A round that outlives ``round_deadline_s`` is cut short with everything in it. ``where``
        names the round. ``sent``, if given (one zero per body), receives the attempts each request
        actually sent, answered or not: a request that got no reply has no :class:`Reply` to carry them,
        and its row in ``llm_calls`` must still say how many attempts it made (they add up to the
        ``retries`` counter).
        """
        self._ensure().new_round()
        loop = asyncio.get_running_loop()
        wire = _Wire()
        tasks = {loop.create_task(self.complete(body, label, sent, i, wire)): i
                 for i, (body, label) in enumerate(zip(bodies, labels))}
        deadline = self.cfg.round_deadline_s(len(bodies))
        ends = loop.time() + deadline
        replies: dict[int, Reply] = {}
        failure: Exception | None = None
        try:
            done, pending = await asyncio.wait(tasks, timeout=deadline, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                error = task.exception()
                if error is None:
                    replies[tasks[task]] = task.result()
                elif isinstance(error, _NotSent):
                    continue
                elif failure is None or not isinstance(failure, LLMError):
                    failure = error
            if pending and failure is not None:
                wire.stopping = True            # no new request, no retry: the ones on the wire finish
                for task in pending:
                    if tasks[task] not in wire.sending:
                        task.cancel()
                done, pending = await asyncio.wait(pending, timeout=max(0.0, ends - loop.time()))
                replies.update((tasks[t], t.result()) for t in done
                               if not t.cancelled() and t.exception() is None)
        finally:                        # also when the caller gives up (Ctrl-C): nothing keeps running
            for task in tasks:
                task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            if failure is None:
                waiting = sorted(tasks[t] for t in pending)
                failure = LLMUnavailable(
                    f"{where}: {self.shown_url}: the round was not answered within its deadline of "
                    f"{deadline:g} s ({len(waiting)} requests unanswered, the first: "
                    f"{labels[waiting[0]]}); see llm.timeout_s and llm.max_retries")
        if failure is not None and not isinstance(failure, LLMError):
            failure = LLMUnavailable(f"{where}: {self.shown_url}: {type(failure).__name__}: "
                                     f"{self.scrub(str(failure))}")
        return replies, failure

    async def complete(self, body: dict[str, Any], label: str, sent: list[int] | None = None,
                       index: int = 0, wire: _Wire | None = None) -> Reply:
        """One request: attempts until an answer, a refusal, no retries left or the request deadline.

        Each attempt is counted in ``sent[index]`` (if given) as it goes out, and each one after the
        first in ``retries``: a retry is counted when it is sent, not when it is planned, since a request
        cancelled while it waits to retry (fail-fast, the round deadline) sends nothing more."""
        pool = self._pool
        payload = orjson.dumps(body)
        loop = asyncio.get_running_loop()
        endpoint = await pool.acquire(0)
        _not_if_stopping(pool, endpoint, wire)
        started = loop.time()
        deadline = started + self.cfg.request_deadline_s()
        last, tried, avoid = "", [], frozenset()
        attempts = self.cfg.max_retries + 1
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                remaining = deadline - loop.time()
                try:
                    async with asyncio.timeout(max(remaining, 0.0)):
                        endpoint = await pool.acquire(attempt - 1, avoid)
                except TimeoutError:
                    break
                _not_if_stopping(pool, endpoint, wire)
                if loop.time() >= deadline:
                    pool.release(endpoint, None)
                    break
            tried.append(endpoint.shown)
            if sent is not None:
                sent[index] += 1
            if attempt > 1:
                self.retries += 1
            sent_at = loop.time()
            if wire is not None:
                wire.sending.add(index)
            try:
                reply = await self._attempt(endpoint, payload, body, min(self.cfg.timeout_s, deadline - sent_at),
                                            label)
            except _Retry as e:
                final = attempt == attempts or (wire is not None and wire.stopping)
                if final and wire is not None:
                    wire.stopping = True        # before the slot goes to a request waiting for it
                pool.release(endpoint, not e.down, sent_at)      # an HTTP error still shows it alive
                last = f"{endpoint.shown}: {e.why}"
                if e.down:
                    avoid = avoid | {endpoint}
                if final:
                    break
                if not e.down:      # the endpoint answered: this request backs off on its own, slot freed
                    backoff = self.cfg.backoff_s * 2 ** (attempt - 1) * self._jitter.uniform(0.5, 1.0)
                    wait = min(self.cfg.backoff_max_s, max(e.wait, backoff), max(0.0, deadline - loop.time()))
                    await asyncio.sleep(wait)
                continue
            except BaseException as e:
                if wire is not None and isinstance(e, Exception):
                    wire.stopping = True        # refused (LLMRequestRejected): the round fails; nothing new is sent
                pool.release(endpoint, None)
                raise
            finally:
                if wire is not None:
                    wire.sending.discard(index)
            pool.release(endpoint, True)
            return Reply(reply[0], reply[1], reply[2], (loop.time() - started) * 1000.0, attempt, endpoint.shown)
        if wire is not None:
            wire.stopping = True
        tries = f"{len(tried)} attempts" if len(tried) > 1 else "1 attempt"
        ran_out = "" if len(tried) == attempts else f", out of its deadline of {self.cfg.request_deadline_s():g} s"
        raise LLMUnavailable(f"{label}: {', '.join(dict.fromkeys(tried))} failed after {tries}{ran_out} "
                             f"(last: {self.scrub(last)})")

    async def _attempt(self, endpoint: Endpoint, payload: bytes, body: dict[str, Any], timeout: float,
                       label: str) -> tuple[str | None, int, int]:
        """One HTTP exchange within ``timeout``: ``(content, tokens_in, tokens_out)`` or :class:`_Retry`."""
        cap = self.cfg.max_reply_bytes
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                async with endpoint.session.post(endpoint.url, data=payload, proxy=endpoint.proxy) as resp:
                    status = resp.status
                    if resp.content_length is not None and resp.content_length > cap:
                        resp.close()
                        raise _Retry(f"a reply of {resp.content_length} bytes is over llm.max_reply_bytes={cap}")
                    if resp.content_length is not None:       # announced and within the cap
                        data = await resp.read()
                    else:                                      # read until the end, counting
                        data = bytearray()
                        while chunk := await resp.content.readany():
                            data += chunk
                            if len(data) > cap:
                                resp.close()
                                raise _Retry(f"the reply grew past llm.max_reply_bytes={cap} bytes")
                    headers = resp.headers
        except TimeoutError:
            raise _Retry(f"no complete answer within {timeout:g} s (llm.timeout_s)", down=True) from None
        except (aiohttp.ClientError, OSError, ValueError) as e:
            raise _Retry(f"{type(e).__name__}: {self.scrub(str(e)) or 'connection failed'}", down=True) from None
        if status == 200:
            parsed = self._read(bytes(data), body)
            if parsed is None:
                raise _Retry("the server's answer is not a chat completion")
            return parsed
        text = self.scrub(bytes(data[:600]).decode("utf-8", "replace"))[:300]
        if status in RETRY_STATUS or status >= 500:
            raise _Retry(f"HTTP {status}: {text}" if text else f"HTTP {status}", wait=retry_after_seconds(headers))
        hint = ""
        if status in (401, 403):
            hint = (" (the API key, DESIM_LLM_API_KEY, is not accepted)" if endpoint.session.headers.get("Authorization")
                    else " (no API key was sent: set DESIM_LLM_API_KEY)")
        raise LLMRequestRejected(f"{label}: {endpoint.shown}/chat/completions answered HTTP {status}{hint}: {text}")

    @staticmethod
    def _read(raw: bytes, body: dict[str, Any]) -> tuple[str | None, int, int] | None:
        try:
            data = orjson.loads(raw)
            content = data["choices"][0]["message"].get("content")
            usage = data.get("usage")
            usage = usage if isinstance(usage, dict) else {}
            if not isinstance(content, str):
                content = None
            # a count that is not a whole number of tokens is estimated, as a missing one is: the reply was
            # paid for, and refusing it for its bookkeeping would pay for it again on every retry
            tokens_in = _token_count(usage.get("prompt_tokens"))
            if tokens_in is None:
                tokens_in = sum(estimate_tokens(m["content"]) for m in body["messages"])
            tokens_out = _token_count(usage.get("completion_tokens"))
            if tokens_out is None:
                tokens_out = estimate_tokens(content or "")
            return content, tokens_in, tokens_out
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return None

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.close()
            for endpoint in self.endpoints:
                await endpoint.session.close()
                endpoint.session = None
            self._pool = None


def _token_count(value: Any) -> int | None:
    """A server's token count, or None when it reports none a count can be (text, negative, NaN, huge)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2**31:
        return None
    return int(value)


class LoopThread:
    """A private asyncio loop on a daemon thread, for synchronous callers.

    ``decide_batch`` is synchronous (the SimPy loop is single-threaded); it
    hands a coroutine to this loop and waits for its result. The loop lives
    as long as the decision model, so the HTTP connections are reused from
    round to round, and it works even when the caller already runs an event
    loop (a notebook).
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="desim-llm", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()
