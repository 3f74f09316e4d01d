"""Hostile clients on raw sockets, for the admission tests and bench/fairness.py.

One event loop in a background thread drives, per request class, connections of two kinds:

- stalled: sends a request head announcing a body, then one byte of it, and waits; when the
  server answers (408) or closes, it reconnects and stalls again;
- back-to-back: a keep-alive connection that sends the same request again as soon as the
  previous answer has arrived.

And ``StalledReader``: connections that send a GET and never read the (large) answer.
Statuses seen are counted per class and kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson


@dataclass(frozen=True)
class Target:
    """One request a flood sends: the class it counts as, and what to send."""

    cls: str
    method: str
    path: str
    body: Callable[[int], bytes] | None = None  # sequence number -> body


def head(method: str, path: str, key: str, length: int | None, extra: str = "") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: flood", f"Authorization: Bearer {key}"]
    if length is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {length}"]
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Status and body of one response with a Content-Length (all of ours have one)."""
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value.strip())
    body = await reader.readexactly(length) if length else b""
    return status, body


@dataclass
class Flood:
    port: int
    key: str
    targets: list[Target]
    stalled: int = 32  # per target
    back_to_back: int = 32  # per target
    counts: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    errors: Counter[tuple[str, str]] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = threading.Event()
        self._lock = threading.Lock()

    def __enter__(self) -> Flood:
        self._thread.start()
        self._started.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)

    def _count(self, t: Target, kind: str, status: int) -> None:
        with self._lock:
            self.counts[(t.cls, kind, status)] += 1

    def snapshot(self) -> Counter[tuple[str, str, int]]:
        with self._lock:
            return Counter(self.counts)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        tasks = []
        for t in self.targets:
            tasks += [asyncio.create_task(self._stall(t)) for _ in range(self.stalled)]
            tasks += [
                asyncio.create_task(self._loop_requests(t, i)) for i in range(self.back_to_back)
            ]
        self._started.set()
        await self._stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _stall(self, t: Target) -> None:
        assert self._stop is not None
        while not self._stop.is_set():
            writer = None
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.write(head(t.method, t.path, self.key, 1000) + b"{")
                await writer.drain()
                status, _ = await read_response(reader)
                self._count(t, "stalled", status)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                with self._lock:
                    self.errors[(t.cls, "stalled")] += 1
            finally:
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(Exception):
                        await writer.wait_closed()

    async def _loop_requests(self, t: Target, worker: int) -> None:
        assert self._stop is not None
        seq = 0
        while not self._stop.is_set():
            writer = None
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                while not self._stop.is_set():
                    seq += 1
                    body = t.body(worker * 1_000_000 + seq) if t.body else None
                    msg = head(t.method, t.path, self.key, len(body) if body is not None else None)
                    writer.write(msg + (body or b""))
                    await writer.drain()
                    status, _ = await read_response(reader)
                    self._count(t, "back_to_back", status)
                    if status in (429, 503):  # told to back off: briefly (keeps the pressure)
                        await asyncio.sleep(0.05)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                with self._lock:
                    self.errors[(t.cls, "back_to_back")] += 1
            finally:
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(Exception):
                        await writer.wait_closed()


def json_body(obj: object) -> Callable[[int], bytes]:
    return lambda _seq: orjson.dumps(obj)


def standard_targets(scope: str) -> list[Target]:
    """One target per admission class, each a request that does real work."""
    return [
        Target("search", "POST", "/v1/search", json_body({"q": "failover replication steps"})),
        Target("answer", "POST", "/v1/answer", json_body({"q": "how does failover work?"})),
        Target(
            "ingest",
            "POST",
            "/v1/ingest",
            lambda seq: orjson.dumps(
                {"units": [{"doc_id": f"flood-{seq % 50}", "text": f"flood note {seq}"}]}
            ),
        ),
        Target("other", "PATCH", f"/v1/docs/flood-0?scope={scope}", json_body({"acl_groups": []})),
    ]


class StalledReader:
    """``n`` connections that GET ``path`` and read only the status line of the answer."""

    def __init__(self, port: int, key: str, path: str, n: int) -> None:
        self.socks: list[socket.socket] = []
        for _ in range(n):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fill up fast
            s.settimeout(10)
            s.connect(("127.0.0.1", port))
            s.sendall(head("GET", path, key, None))
            self.socks.append(s)
        # The response has started (its head is here), or the request was refused.
        self.statuses = [s.recv(12)[9:12].decode() for s in self.socks]

    def drain(self) -> list[int]:
        """Read every connection to its end: bytes received by each."""
        sizes = []
        for s in self.socks:
            n = 0
            with contextlib.suppress(OSError):
                while chunk := s.recv(1 << 16):
                    n += len(chunk)
            sizes.append(n)
        return sizes

    def close(self) -> None:
        for s in self.socks:
            s.close()
