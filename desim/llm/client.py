"""An OpenAI-compatible chat-completions client that keeps many requests in flight.

vLLM, SGLang, llama.cpp's server, Ollama and the hosted APIs all serve
``POST {base_url}/chat/completions``; this client speaks only that. It runs
on an asyncio loop owned by the decision model (see ``LoopThread``), with at
most ``concurrency`` requests in flight, so a round of N agents costs about
``ceil(N / concurrency)`` times the server's latency.

Each request is retried on 408/409/425/429, on 5xx, on timeouts and on
dropped or refused connections, with exponential back-off and jitter, and
waits at least as long as the server's ``Retry-After`` (or
``retry-after-ms``) asks, up to ``backoff_max_s``. Other 4xx answers (a wrong
model name, a bad key) are not retried: :class:`LLMRequestRejected`. A
request that fails every attempt raises :class:`LLMUnavailable`. The API key
goes into the ``Authorization`` header and nowhere else; error text from the
server is scrubbed of it before it reaches a message.
"""
from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Coroutine

import httpx

from .config import LLMConfig
from .errors import LLMRequestRejected, LLMUnavailable

RETRY_STATUS = {408, 409, 425, 429}


@dataclass(frozen=True)
class Reply:
    """What one request produced: the text, its usage and how it went."""

    content: str | None
    tokens_in: int
    tokens_out: int
    latency_ms: float
    attempts: int


def estimate_tokens(text: str) -> int:
    """About four characters per token: used only when a server reports no usage."""
    return (len(text) + 3) // 4


def retry_after_seconds(headers: httpx.Headers) -> float:
    """The wait a 429/503 asks for: ``retry-after-ms`` or ``Retry-After`` in seconds (0 if absent)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue  # an HTTP date: fall back to our own back-off
    return 0.0


class ChatClient:
    """Chat completions against one server, with bounded concurrency and retries."""

    def __init__(self, cfg: LLMConfig, api_key: str | None):
        self.cfg = cfg
        self._key = api_key
        base = httpx.URL(cfg.base_url.rstrip("/") + "/chat/completions")
        self.url = base
        self.shown_url = str(base.copy_with(username=None, password=None))
        self.retries = 0
        self._free: asyncio.Queue[httpx.AsyncClient] | None = None
        self._jitter = random.Random()

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def _ensure(self) -> None:
        """One single-connection HTTP client per slot, handed out through a queue.

        httpx's shared connection pool scans every connection for every
        request (O(in-flight x connections) per round trip: ~8 ms of CPU per
        request at 64 in flight); a client per slot keeps each pool trivial.
        """
        if self._free is None:
            headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
            tls = httpx.create_ssl_context()
            self._free = asyncio.Queue()
            for _ in range(self.cfg.concurrency):
                self._free.put_nowait(httpx.AsyncClient(
                    headers=headers, timeout=httpx.Timeout(self.cfg.timeout_s), verify=tls,
                    limits=httpx.Limits(max_connections=1, max_keepalive_connections=1)))

    async def complete_many(self, bodies: list[dict[str, Any]], labels: list[str]) -> list[Reply | Exception]:
        """Send every body, at most ``concurrency`` at a time; results in input order."""
        self._ensure()
        return await asyncio.gather(*(self.complete(b, lab) for b, lab in zip(bodies, labels)),
                                    return_exceptions=True)

    async def complete(self, body: dict[str, Any], label: str) -> Reply:
        http = await self._free.get()
        try:
            return await self._complete(http, body, label)
        finally:
            self._free.put_nowait(http)

    async def _complete(self, http: httpx.AsyncClient, body: dict[str, Any], label: str) -> Reply:
        started = time.perf_counter()
        last = ""
        for attempt in range(1, self.cfg.max_retries + 2):
            wait = 0.0
            try:
                resp = await http.post(self.url, json=body)
            except httpx.TimeoutException:
                last = f"no answer within {self.cfg.timeout_s:g} s"
            except httpx.TransportError as e:
                last = f"{type(e).__name__}: {self._scrub(str(e)) or 'connection failed'}"
            else:
                if resp.status_code == 200:
                    reply = self._read(resp, body, started, attempt)
                    if reply is not None:
                        return reply
                    last = "the server's answer is not a chat completion"
                elif resp.status_code in RETRY_STATUS or resp.status_code >= 500:
                    last = f"HTTP {resp.status_code}"
                    wait = retry_after_seconds(resp.headers)
                else:
                    raise LLMRequestRejected(
                        f"{label}: {self.shown_url} answered HTTP {resp.status_code}: "
                        f"{self._scrub(resp.text)[:300]}")
            if attempt <= self.cfg.max_retries:
                self.retries += 1
                backoff = self.cfg.backoff_s * 2 ** (attempt - 1) * self._jitter.uniform(0.5, 1.0)
                await asyncio.sleep(min(self.cfg.backoff_max_s, max(wait, backoff)))
        raise LLMUnavailable(f"{label}: {self.shown_url} failed after {self.cfg.max_retries + 1} "
                             f"attempts (last: {last})")

    def _read(self, resp: httpx.Response, body: dict[str, Any], started: float, attempt: int) -> Reply | None:
        try:
            data = resp.json()
            content = data["choices"][0]["message"].get("content")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return None
        usage = data.get("usage") or {}
        tokens_in = usage.get("prompt_tokens")
        if tokens_in is None:
            tokens_in = sum(estimate_tokens(m["content"]) for m in body["messages"])
        tokens_out = usage.get("completion_tokens")
        if tokens_out is None:
            tokens_out = estimate_tokens(content or "")
        return Reply(content if isinstance(content, str) else None, int(tokens_in), int(tokens_out),
                     (time.perf_counter() - started) * 1000.0, attempt)

    async def aclose(self) -> None:
        if self._free is not None:
            while not self._free.empty():
                await self._free.get_nowait().aclose()
            self._free = None


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

