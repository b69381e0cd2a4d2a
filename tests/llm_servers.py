"""Hostile loopback servers for the LLM layer's tests: each speaks (or fails to speak) HTTP on
127.0.0.1 from its own asyncio loop thread, so a test can point a real run at it."""
from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Awaitable, Callable
from waits import HANG_S

Handler = Callable[["HostileServer", asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def dead_url() -> str:
    """A loopback URL nobody listens on (connections are refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/v1"


class HostileServer:
    """Runs ``handler(server, reader, writer)`` for every connection; counts connections and bytes sent."""

    def __init__(self, handler: Handler):
        self.handler = handler
        self.connections = 0
        self.requests = 0
        self.bytes_sent = 0
        self.heads: list[str] = []
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "HostileServer":
        self._thread.start()
        if not self._ready.wait(HANG_S):
            raise RuntimeError("the loopback server did not start")
        return self

    def __exit__(self, *exc) -> None:
        async def stop():
            self.server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(HANG_S)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _run(self) -> None:
        async def serve(reader, writer):
            self.connections += 1
            try:
                await self.handler(self, reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
                pass    # the client went away, or the server is stopping
            finally:
                writer.close()

        async def start():
            self.server = await asyncio.start_server(serve, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]
            self._ready.set()

        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(start())
        self.loop.run_forever()

    async def read_request(self, reader: asyncio.StreamReader) -> tuple[str, bytes]:
        """One HTTP request: its head (as text) and its body."""
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        length = next((int(line.split(":", 1)[1]) for line in head.split("\r\n")
                       if line.lower().startswith("content-length:")), 0)
        body = await reader.readexactly(length)
        self.requests += 1
        self.heads.append(head)
        return head, body

    async def send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        await writer.drain()
        self.bytes_sent += len(data)


def http_response(status: int, body: bytes, reason: str = "OK") -> bytes:
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            .encode() + body)


def completion(content: str) -> bytes:
    """A well-formed chat completion whose message is ``content``."""
    return json.dumps({"object": "chat.completion", "choices": [{"index": 0, "message": {
        "role": "assistant", "content": content}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}).encode()


async def silent(server: HostileServer, reader, writer) -> None:
    """Accepts, reads, never answers."""
    await server.read_request(reader)
    await reader.read()          # until the client gives up


async def trickling(server: HostileServer, reader, writer) -> None:
    """Answers 200 with a 2,000-byte body, one byte every 0.1 s."""
    await server.read_request(reader)
    await server.send(writer, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2000\r\n\r\n")
    while True:
        await server.send(writer, b" ")
        await asyncio.sleep(0.1)


def huge(size: int, declared: bool) -> Handler:
    """Answers 200 with ``size`` bytes of a JSON string, with or without a Content-Length."""
    async def handler(server: HostileServer, reader, writer) -> None:
        await server.read_request(reader)
        head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {size}\r\n\r\n" if declared else "Connection: close\r\n\r\n"
        await server.send(writer, head.encode())
        chunk = b"x" * 65536
        sent = 0
        while sent < size:
            await server.send(writer, chunk)
            sent += len(chunk)
    return handler


async def first_silent(server: HostileServer, reader, writer) -> None:
    """Never answers the first sending of a request; answers every later sending at once."""
    seen = server.__dict__.setdefault("seen", set())
    while True:
        _, body = await server.read_request(reader)
        if body not in seen:
            seen.add(body)
            await reader.read()
            return
        await server.send(writer, http_response(200, completion('{"opinion": 0.5, "argument": "late"}')))


def replying(content: str) -> Handler:
    """Answers every request on the connection with a chat completion of ``content``."""
    async def handler(server: HostileServer, reader, writer) -> None:
        while True:
            await server.read_request(reader)
            await server.send(writer, http_response(200, completion(content)))
    return handler


async def garbage(server: HostileServer, reader, writer) -> None:
    """Answers with bytes that are not HTTP."""
    await server.read_request(reader)
    await server.send(writer, b"\x00\xff\xfeSSH-2.0-not-http\r\n\r\n{}{}{}\r\n")


def echoing(status: int, after: int = 0) -> Handler:
    """Answers the first ``after`` requests with a chat completion, then every request with ``status``
    and the request's own head as the error text, the way some proxies and debug servers do:
    credentials in the request come back in the body."""
    async def handler(server: HostileServer, reader, writer) -> None:
        while True:
            head, _ = await server.read_request(reader)
            if server.requests <= after:
                await server.send(writer, http_response(200, completion('{"opinion": 0.5, "argument": "ok"}')))
                continue
            body = json.dumps({"error": {"message": f"cannot serve this request: {head}"}}).encode()
            await server.send(writer, http_response(status, body, "Error"))
    return handler


def one_fails_while_others_run(delay_s: float = 0.3) -> Handler:
    """The first request gets HTTP 500 at once; every other is answered ``delay_s`` after that failure was
    sent (so the ones already sent are on the wire when the client learns of it). ``server.generated``
    counts the completions it made: what a hosted API bills, whether or not the client waits for them."""
    async def handler(server: HostileServer, reader, writer) -> None:
        failed = server.__dict__.setdefault("failed", asyncio.Event())
        server.__dict__.setdefault("generated", 0)
        while True:
            await server.read_request(reader)
            if server.requests == 1:
                await server.send(writer, http_response(500, b'{"error": {"message": "overloaded"}}', "Error"))
                failed.set()
                continue
            await failed.wait()
            await asyncio.sleep(delay_s)
            server.generated += 1
            await server.send(writer, http_response(200, completion('{"opinion": 0.5, "argument": "ok"}')))
    return handler
