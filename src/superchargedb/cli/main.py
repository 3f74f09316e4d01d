"""The ``superchargedb`` command line (the only module importing Typer)."""

from __future__ import annotations

import ipaddress
import os
import signal
import sys
from pathlib import Path
from typing import Any

import typer

from .admin import audit_app, keys_app
from .bench import register as register_bench
from .importer import register as register_import
from .maintenance import register as register_maintenance
from .mcp import register as register_mcp
from .remote import register as register_remote

app = typer.Typer(
    help="SuperChargeDB: multimodal retrieval with cited answers.", no_args_is_help=True
)
app.add_typer(keys_app, name="keys")
app.add_typer(audit_app, name="audit")
register_maintenance(app)
register_remote(app)
register_bench(app)
register_import(app)
register_mcp(app)

# Commands that do not run a server or open a data dir: the HTTP client and the bench runner.
_NOT_SERVER = frozenset({"ask", "ingest", "bench"})


@app.callback()
def _startup(ctx: typer.Context) -> None:
    # serve, worker and the offline commands stop on a mistyped SCDB_ variable (settings.py).
    if ctx.invoked_subcommand not in _NOT_SERVER:
        from ..settings import UnknownSetting, check_environment

        try:
            check_environment()
        except UnknownSetting as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def serve(
    data: Path = typer.Option(Path("./scdb-data"), "--data", help="Data directory"),
    host: str = typer.Option("127.0.0.1", help="Bind address"),
    port: int = typer.Option(8080, help="Port"),
    demo: bool = typer.Option(False, "--demo", help="Seed the demo principals and corpus"),
    allow_remote: bool = typer.Option(
        False, "--allow-remote", help="Allow binding to a non-loopback address"
    ),
    workers: int = typer.Option(1, help="Must be 1 with the embedded store"),
) -> None:
    """Serve the HTTP API over a data directory."""
    import uvicorn

    from ..api.app import create_app
    from ..api.transport import uvicorn_config
    from ..settings import Settings
    from ..wiring import open_service

    if not _is_loopback(host) and not allow_remote:
        typer.echo(f"refusing to bind to non-loopback {host} without --allow-remote", err=True)
        raise typer.Exit(2)
    if workers != 1:
        typer.echo("the embedded store is owned by one process: --workers must be 1", err=True)
        raise typer.Exit(2)
    from ..logs import configure

    configure()
    settings = Settings(data_dir=data, host=host, port=port)
    from ..memstats import Trimmer, limit_arenas

    # Before the Service and uvicorn start any thread: arenas are created per thread on demand.
    limit_arenas(settings.malloc_arena_max)
    trimmer = Trimmer(settings.malloc_trim_s)
    trimmer.start()
    if demo and "SCDB_ANSWER_PROVIDERS" not in os.environ:
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
        if demo:
            from ..demo import seed

            out = seed(svc)
            n = sum(r["ingested"] for r in out.values())
            typer.echo(f"demo: principals alice/bob/carol ready, {n} new Units ingested")
            _demo_media(svc)
        from ..memstats import freeze_heap

        freeze_heap()  # the open Service's objects: out of every later full collection's walk
        typer.echo(f"SuperChargeDB listening on http://{host}:{port} (data: {data})")
        uvicorn.Server(uvicorn_config(create_app(svc), settings)).run()
    finally:
        if memlog is not None:
            memlog.stop()
        trimmer.stop()
        svc.close()


@app.command()
def worker(
    data: Path = typer.Option(Path("./scdb-data"), "--data", help="Data directory"),
    once: bool = typer.Option(False, help="Exit when the queue is empty"),
) -> None:
    """Run derivation jobs (OCR, ASR, video) for a data dir served by another process."""
    import signal
    import threading

    from ..logs import configure
    from ..settings import Settings
    from ..wiring import open_worker

    configure()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ctx = open_worker(Settings(data_dir=data))
    try:
        n = ctx.run(stop, once=once)
    finally:
        ctx.close()
    typer.echo(f"worker: {n} jobs run")


def _demo_media(svc: Any) -> None:
    """The keynote video and runbook PDF: generated and queued off the serving path, so the
    server answers at once while their jobs run (the console's Operations view shows them)."""
    import threading

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


@app.command()
def doctor(
    data: Path = typer.Option(Path("./scdb-data"), "--data", help="Data directory"),
) -> None:
    """Check SQLite integrity, FTS5 against its content, and catalog vs vector index ids."""
    import json

    from ..settings import Settings
    from ..wiring import open_service

    svc = open_service(Settings(data_dir=data))
    try:
        report = svc.doctor()
    finally:
        svc.close()
    typer.echo(json.dumps(report, indent=2))
    raise typer.Exit(0 if report["ok"] else 1)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
