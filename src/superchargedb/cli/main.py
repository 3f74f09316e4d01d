"""The ``superchargedb`` command line (the only module importing Typer)."""

from __future__ import annotations

import ipaddress
import signal
import sys
from pathlib import Path

import typer

from .admin import audit_app, keys_app
from .bench import register as register_bench
from .importer import register as register_import
from .maintenance import register as register_maintenance
from .mcp import register as register_mcp
from .migrate import register as register_migrate
from .remote import register as register_remote
from .stack import stack_app
from .tenants import tenants_app

app = typer.Typer(
    help="SuperChargeDB: multimodal retrieval with cited answers.", no_args_is_help=True
)
app.add_typer(keys_app, name="keys")
app.add_typer(audit_app, name="audit")
app.add_typer(tenants_app, name="tenants")
app.add_typer(stack_app, name="stack")
register_maintenance(app)
register_remote(app)
register_bench(app)
register_import(app)
register_mcp(app)
register_migrate(app)

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
    workers: int = typer.Option(
        1, help="API processes on one socket (PostgreSQL only; 1 with the embedded store)"
    ),
) -> None:
    """Serve the HTTP API over a data directory (or, with PostgreSQL, N processes on one port)."""
    from .serving import ServeOptions, run_api, serve_processes

    if not _is_loopback(host) and not allow_remote:
        typer.echo(f"refusing to bind to non-loopback {host} without --allow-remote", err=True)
        raise typer.Exit(2)
    if workers < 1:
        typer.echo("--workers must be at least 1", err=True)
        raise typer.Exit(2)
    opts = ServeOptions(data, host, port, demo)
    if workers == 1:
        run_api(opts)
        return
    from ..settings import Settings

    if not Settings(data_dir=data).database_url:  # D-246: then nothing is owned by one process
        typer.echo("the embedded store is owned by one process: --workers must be 1", err=True)
        raise typer.Exit(2)
    raise typer.Exit(serve_processes(opts, workers))


@app.command()
def worker(
    data: Path = typer.Option(Path("./scdb-data"), "--data", help="Data directory"),
    once: bool = typer.Option(False, help="Exit when the queue is empty"),
) -> None:
    """Run derivation jobs (OCR, ASR, video) for a data dir served by another process."""
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
