"""A loopback stub of an OpenAI-compatible server, for tests, benchmarks and dry runs.

It serves ``POST /v1/chat/completions`` and ``GET /v1/models`` on 127.0.0.1
and answers every request after ``latency_ms`` (plus up to ``jitter_ms``)
with a reply derived from a hash of the prompt: the same prompt always gets
the same reply, so a study run against the stub is reproducible. The reply
is a JSON object valid for the schema the request asks for (its
``response_format`` json_schema, or the schema written after ``JSON schema:``
in the system message); at ``garbage_rate`` the reply is unusable text
instead (also decided by the prompt's hash, so a re-run meets the same
garbage). At ``error_rate`` a request fails with HTTP 429 (with
``Retry-After``) or 500; whether the k-th sending of a prompt fails depends
on (prompt, k), not on arrival order, so retries eventually get through.
``GET /stub/stats`` reports what it did (requests, errors, garbage, the most
requests it had in flight at once, hashes of the API keys it was sent).

It is an aiohttp web application (the C HTTP parser of the client library
the LLM layer uses anyway), so the stub's own CPU per request stays well
below the client's and a benchmark measures the client. Run it with
``desim stub-llm --port 8000``; in-process with
``with running_stub(latency_ms=100) as stub: ... stub.base_url``; or as a
separate process (no GIL shared with the run: what benchmarks use, and what
a test that kills the server needs) with ``with stub_process(...) as stub``.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import socket
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import orjson
from aiohttp import web

from desim.llm.client import estimate_tokens
from desim.llm.prompts import SCHEMA_MARKER
from desim.llm.replies import fake_reply, first_json_object, seed_from

GARBAGE = (
    "I would rather talk about this over dinner.",
    '{"opinion": 0.4, "argument": "I am not sure yet',
    "```\nnot json at all\n```",
    '{"unexpected": true}',
)


@dataclass
class StubSettings:
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    error_rate: float = 0.0
    garbage_rate: float = 0.0
    retry_after_s: float = 0.0
    seed: int = 0


@dataclass
class StubStats:
    """What the stub did; ``sends`` counts how often each prompt hash was sent."""

    requests: int = 0
    replies: int = 0
    errors: int = 0
    garbage: int = 0
    authorized: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    key_hashes: set[str] = field(default_factory=set)
    sends: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "replies": self.replies, "errors": self.errors,
                "garbage": self.garbage, "authorized": self.authorized, "max_in_flight": self.max_in_flight, "key_hashes": sorted(self.key_hashes),
                "distinct_prompts": len(self.sends)}


def _unit(*parts: Any) -> float:
    return seed_from(*parts) / 2.0**64


def request_schema(body: dict[str, Any]) -> dict[str, Any]:
    """The reply schema a request asks for: structured output first, then the system message."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        if isinstance(schema, dict):
            return schema
    for m in body.get("messages", []):
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if m.get("role") == "system" and isinstance(content, str) and SCHEMA_MARKER in content:
            found = first_json_object(content.split(SCHEMA_MARKER, 1)[1])
            if found:
                try:
                    return json.loads(found)
                except json.JSONDecodeError:
                    pass
    return {"type": "object", "properties": {"reply": {"type": "string"}}}


def build_app(settings: StubSettings, stats: StubStats) -> web.Application:
    jitter = random.Random(settings.seed)

    async def chat(request: web.Request) -> web.Response:
        stats.requests += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            return await answer(request)
        finally:
            stats.in_flight -= 1

    async def answer(request: web.Request) -> web.Response:
        auth = request.headers.get("authorization", "")
        if auth.startswith("Bearer "):
            stats.authorized += 1
            stats.key_hashes.add(hashlib.sha256(auth[7:].encode()).hexdigest()[:16])
        try:
            body = orjson.loads(await request.read())
            messages = body["messages"]
            prompt = orjson.dumps([body.get("model"), messages, body.get("seed")], option=orjson.OPT_SORT_KEYS)
        except (ValueError, KeyError, TypeError):
            return _json({"error": {"message": "expected a JSON body with messages"}}, 400)
        digest = hashlib.sha256(prompt).hexdigest()
        stats.sends[digest] += 1
        sending = stats.sends[digest]
        delay = settings.latency_ms + (jitter.uniform(0, settings.jitter_ms) if settings.jitter_ms else 0.0)
        if delay > 0:
            await asyncio.sleep(delay / 1000.0)
        if _unit(settings.seed, digest, sending, "error") < settings.error_rate:
            stats.errors += 1
            if sending % 2:
                return _json({"error": {"message": "rate limited (stub)", "type": "rate_limit"}}, 429,
                             {"Retry-After": f"{settings.retry_after_s:g}"})
            return _json({"error": {"message": "internal error (stub)"}}, 500)
        if _unit(settings.seed, digest, "garbage") < settings.garbage_rate:
            stats.garbage += 1
            content = GARBAGE[seed_from(settings.seed, digest, "which") % len(GARBAGE)]
        else:
            content = orjson.dumps(fake_reply(request_schema(body), seed_from(settings.seed, digest))).decode()
        stats.replies += 1
        tokens_in = sum(estimate_tokens(str(m.get("content", ""))) for m in messages)
        tokens_out = estimate_tokens(content)
        return _json({
            "id": f"chatcmpl-{digest[:12]}", "object": "chat.completion", "created": 0,
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                      "total_tokens": tokens_in + tokens_out}})

    async def models(request: web.Request) -> web.Response:
        return _json({"object": "list", "data": [{"id": "stub", "object": "model", "owned_by": "desim"}]})

    async def stub_stats(request: web.Request) -> web.Response:
        return _json(stats.as_dict())

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/stub/stats", stub_stats)
    return app


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, headers=headers, content_type="application/json")


def bind(port: int, host: str = "127.0.0.1") -> socket.socket:
    """A listening socket (``port=0``: any free port).

    Made with ``IPPROTO_TCP`` so that asyncio sets ``TCP_NODELAY`` on the
    accepted connections: without it a reply written in two pieces waits for
    the client's delayed ACK of the first, 40 ms per request.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    return sock


def serve(settings: StubSettings, stats: StubStats, sock: socket.socket) -> None:
    """Serve on ``sock`` until interrupted (what ``desim stub-llm`` runs)."""
    web.run_app(build_app(settings, stats), sock=sock, print=None, access_log=None, shutdown_timeout=1)


@dataclass
class RunningStub:
    """A stub serving on a thread of this process."""

    base_url: str
    port: int
    stats: StubStats
    loop: asyncio.AbstractEventLoop
    runner: web.AppRunner
    thread: threading.Thread

    def stop(self) -> None:
        """Stop at once: in-flight requests are dropped, as when a server dies."""
        if self.loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@contextmanager
def running_stub(port: int = 0, **settings: Any) -> Iterator[RunningStub]:
    """Serve the stub on 127.0.0.1 (an ephemeral port by default) for the ``with`` block."""
    sock = bind(port)
    stats = StubStats()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(build_app(StubSettings(**settings), stats), access_log=None, shutdown_timeout=0)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.SockSite(runner, sock).start())
    thread = threading.Thread(target=loop.run_forever, name="desim-stub", daemon=True)
    thread.start()
    port = sock.getsockname()[1]
    stub = RunningStub(f"http://127.0.0.1:{port}/v1", port, stats, loop, runner, thread)
    try:
        yield stub
    finally:
        stub.stop()
        if not thread.is_alive():
            loop.close()
        sock.close()


@dataclass
class StubProcess:
    """A stub serving from its own ``desim stub-llm`` process."""

    base_url: str
    process: subprocess.Popen

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.base_url[:-len("/v1")] + "/stub/stats", timeout=10) as reply:
            return json.loads(reply.read())

    def kill(self) -> None:
        """Kill the server outright (SIGKILL), as when it crashes."""
        self.process.kill()
        self.process.wait(timeout=10)


@contextmanager
def stub_process(**settings: Any) -> Iterator[StubProcess]:
    """Start ``desim stub-llm --port 0`` with ``settings`` (``StubSettings`` names) for the ``with`` block."""
    flags = {"latency_ms": "--latency-ms", "jitter_ms": "--jitter-ms", "error_rate": "--error-rate",
             "garbage_rate": "--garbage-rate", "retry_after_s": "--retry-after", "seed": "--seed"}
    args = [sys.executable, "-m", "desim.cli", "stub-llm", "--port", "0"]
    for name, value in settings.items():
        args += [flags[name], str(value)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        found = re.search(r"listening on (\S+/v1)", proc.stdout.readline())
        if not found:
            raise RuntimeError(f"desim stub-llm did not start (exit status {proc.wait(timeout=10)})")
        yield StubProcess(found.group(1), proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()
