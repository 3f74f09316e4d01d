"""``superchargedb serve``: one API process, or N of them on one listening socket.

With ``--workers N`` the parent binds the socket and starts N children (multiprocessing
*spawn*: each child builds its own Service, no state is inherited through fork), handing each the
socket; the kernel gives each incoming connection to one child's ``accept``, so no proxy sits in
front (D-250). The first child seeds the demo before it serves and the others start once it is
serving, so they never load their models all at once on a small machine. The parent only
supervises: a child that dies is reported and started again (after a pause, and no more than
``MAX_QUICK_DEATHS`` times in a row if it dies as it starts); SIGTERM or SIGINT to the parent
sends SIGTERM to every child, and a child still running ``STOP_GRACE_S`` later is killed. A
child also gets SIGTERM when its parent dies (Linux ``PR_SET_PDEATHSIG``), so a ``kill -9`` of
the parent leaves no orphan serving.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import typer

STOP_GRACE_S = 40.0  # above a child's own graceful shutdown: in-flight requests, final flush
READY_WAIT_S = 900.0  # the first child: models and the demo corpus on a small machine
RESTART_PAUSE_S = 1.0
QUICK_DEATH_S = 30.0  # a child dying this soon after its start counts as failing to start
MAX_QUICK_DEATHS = 5


@dataclass(frozen=True)
class ServeOptions:
    data: Path
    host: str
    port: int
    demo: bool


def run_api(
    opts: ServeOptions,
    *,
    sockets: list[socket.socket] | None = None,
    seed_demo: bool = True,
    ready: Any = None,
) -> None:
    """One API process: open the Service, (seed the demo), serve until SIGTERM, close."""
    import uvicorn

    from ..api.app import create_app
    from ..api.transport import uvicorn_config
    from ..logs import configure
    from ..memstats import Trimmer, freeze_heap, limit_arenas
    from ..settings import Settings
    from ..wiring import open_service

    configure()
    settings = Settings(data_dir=opts.data, host=opts.host, port=opts.port)
    # Before the Service and uvicorn start any thread: arenas are created per thread on demand.
    limit_arenas(settings.malloc_arena_max)
    trimmer = Trimmer(settings.malloc_trim_s)
    trimmer.start()
    if opts.demo and "SCDB_ANSWER_PROVIDERS" not in os.environ:
        # With the [llm] extra installed, the local model is first in the demo's chain.
        from ..answer.local_llm import LocalLlamaProvider

        if LocalLlamaProvider(settings.local_model_path).unavailable() is None:
            settings.answer_providers = "local,openai"
    svc = open_service(settings)
    # uvicorn re-raises SIGTERM after its graceful shutdown; with the default action that kills
    # the process before svc.close() (final checkpoint, audit anchor, usage flush) can run.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    memlog = None
    if settings.memory_log is not None:
        from ..memstats import MemoryLog

        memlog = MemoryLog(settings.memory_log, settings.memory_log_interval_s, svc.memory_gauges)
        memlog.start()
    try:
        if opts.demo and seed_demo:
            from ..demo import seed

            out = seed(svc)
            n = sum(r["ingested"] for r in out.values())
            typer.echo(f"demo: principals alice/bob/carol ready, {n} new Units ingested")
            _demo_media(svc)
        freeze_heap()  # the open Service's objects: out of every later full collection's walk
        if sockets is None:
            typer.echo(
                f"SuperChargeDB listening on http://{opts.host}:{opts.port} (data: {opts.data})"
            )
        if ready is not None:
            ready.set()
        uvicorn.Server(uvicorn_config(create_app(svc), settings)).run(sockets=sockets)
    finally:
        if memlog is not None:
            memlog.stop()
        trimmer.stop()
        svc.close()


def _demo_media(svc: Any) -> None:
    """The keynote video and runbook PDF: generated and queued off the serving path, so the
    server answers at once while their jobs run (the console's Operations view shows them)."""
    from ..demo import PRINCIPALS
    from ..demo.media import seed_media

    def run() -> None:
        try:
            out = seed_media(svc, PRINCIPALS[0][1])
        except Exception as exc:  # the demo's media are a bonus: never take the server down
            typer.echo(f"demo media: not ingested ({exc})", err=True)
            return
        typer.echo(f"demo media: {out}")

    threading.Thread(target=run, name="demo-media", daemon=True).start()


def bind_socket(host: str, port: int) -> socket.socket:
    """The listening socket every child accepts on (uvicorn's own options: reuse, backlog)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _die_with_parent(parent: int) -> None:
    """Linux: SIGTERM when the parent dies; elsewhere nothing (the parent's group is killed)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it died before the call above took effect
        sys.exit(0)


def _child(opts: ServeOptions, sock: socket.socket, seed: bool, ready: Any, parent: int) -> None:
    _die_with_parent(parent)
    run_api(opts, sockets=[sock], seed_demo=seed, ready=ready)


class Supervisor:
    """N API children on one socket (see the module doc)."""

    def __init__(self, opts: ServeOptions, n: int, sock: socket.socket) -> None:
        self.opts, self.n, self.sock = opts, n, sock
        self.ctx = multiprocessing.get_context("spawn")
        self.procs: list[BaseProcess | None] = [None] * n
        self.started_at = [0.0] * n
        self.quick_deaths = [0] * n
        # Each child's start Event, kept until the child reports serving: one collected before
        # the spawned child unpickles it has its semaphore unlinked, and the child dies at start.
        self.ready: list[Any] = [None] * n
        self.stopping = threading.Event()

    def _start(self, i: int, seed: bool) -> Any:
        ready = self.ctx.Event()
        p = self.ctx.Process(
            target=_child,
            args=(self.opts, self.sock, seed, ready, os.getpid()),
            name=f"scdb-api-{i}",
        )
        p.start()
        self.procs[i], self.started_at[i], self.ready[i] = p, time.monotonic(), ready
        typer.echo(f"API process {i} started (pid {p.pid})", err=True)
        return ready

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stopping.set())
        first = self._start(0, seed=True)
        while not first.wait(0.5):  # the others start once the first serves (see module doc)
            p0 = self.procs[0]
            if self.stopping.is_set() or p0 is None or not p0.is_alive():
                break
        p0 = self.procs[0]
        if first.is_set() and p0 is not None:
            self.ready[0] = None
            typer.echo(f"API process 0 (pid {p0.pid}) serving", err=True)
        elif not self.stopping.is_set():
            code = None if p0 is None else p0.exitcode
            typer.echo(f"API process 0 exited with code {code} before serving", err=True)
            self._stop_all()
            return 1
        if self.stopping.is_set():
            self._stop_all()
            return 0
        for i in range(1, self.n):
            self._start(i, seed=False)
        typer.echo(
            f"SuperChargeDB listening on http://{self.opts.host}:{self.opts.port} "
            f"({self.n} API processes, data: {self.opts.data})"
        )
        rc = 0
        while not self.stopping.wait(0.5):
            rc = self._check()
            if rc:
                break
        self._stop_all()
        return rc

    def _check(self) -> int:
        """Report children starting to serve, report and restart dead ones; 1 when one keeps
        dying as it starts."""
        for i, p in enumerate(self.procs):
            if p is None:
                continue
            if p.is_alive():
                if self.ready[i] is not None and self.ready[i].is_set():
                    self.ready[i] = None  # reported once
                    typer.echo(f"API process {i} (pid {p.pid}) serving", err=True)
                continue
            lived = time.monotonic() - self.started_at[i]
            self.quick_deaths[i] = self.quick_deaths[i] + 1 if lived < QUICK_DEATH_S else 0
            typer.echo(
                f"API process {i} (pid {p.pid}) exited with code {p.exitcode} after {lived:.0f} s",
                err=True,
            )
            if self.quick_deaths[i] >= MAX_QUICK_DEATHS:
                typer.echo(f"API process {i} keeps dying as it starts: stopping", err=True)
                return 1
            if self.stopping.wait(RESTART_PAUSE_S):
                return 0
            self._start(i, seed=False)
        return 0

    def _stop_all(self) -> None:
        live = [p for p in self.procs if p is not None and p.is_alive()]
        for p in live:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for p in live:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                typer.echo(f"API process pid {p.pid} ignored SIGTERM: killed", err=True)
                p.kill()
                p.join(10)
        self.sock.close()


def serve_processes(opts: ServeOptions, n: int) -> int:
    """Bind, run N children until SIGTERM/SIGINT; the exit code."""
    try:
        sock = bind_socket(opts.host, opts.port)
    except OSError as exc:
        typer.echo(f"cannot listen on {opts.host}:{opts.port}: {exc}", err=True)
        return 2
    return Supervisor(opts, n, sock).run()
