"""``superchargedb stack up|down|status``: the server stack on one machine (``stack/up.py``)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from ..stack.up import StackState

stack_app = typer.Typer(
    help="Start, stop or show a local server stack (PostgreSQL, SeaweedFS, Valkey, API, worker).",
    no_args_is_help=True,
)

# Its own default, apart from serve's ./scdb-data: an embedded data dir and a stack's stay apart.
_DATA = typer.Option(Path("./scdb-stack"), "--data", help="Data directory (engines: DATA/stack/)")


def _show(state: StackState) -> None:
    running = state.running()
    typer.echo(f"API: {state.url} ({state.workers} API processes; data: {state.data})")
    for name, ref in state.processes.items():
        status = "running" if running[name] else "NOT running"
        typer.echo(f"  {name:<10} pid {ref.pid:<8} {status:<12} log: {state.logs.get(name, '-')}")


@stack_app.command()
def up(
    data: Path = _DATA,
    port: int = typer.Option(8080, help="The API's port on 127.0.0.1"),
    workers: int = typer.Option(2, min=1, help="API processes (serve --workers)"),
    demo: bool = typer.Option(True, "--demo/--no-demo", help="Seed the demo principals and corpus"),
    standby: bool = typer.Option(
        False, "--standby", help="Also a synchronous hot standby (reads, `stack failover`)"
    ),
    clusters: bool = typer.Option(
        False, "--clusters", help="Tenants over two PostgreSQL clusters and a directory database"
    ),
) -> None:
    """Start PostgreSQL + pgvector, SeaweedFS and Valkey from their wheels, then the API and
    one media worker over them; print the URL and what was started."""
    from ..stack.postgres import StackUnavailableError
    from ..stack.up import StackError
    from ..stack.up import up as stack_up

    try:
        state, started = stack_up(
            data,
            port=port,
            workers=workers,
            demo=demo,
            standby=standby,
            clusters=clusters,
            echo=typer.echo,
        )
    except (StackError, StackUnavailableError, FileNotFoundError, TimeoutError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if not started:
        typer.echo("a stack is already running for this data dir:")
    _show(state)
    if started and demo:
        typer.echo(f"try: curl -H 'Authorization: Bearer aegis_sk_alice' {state.url}/v1/me")
    typer.echo(f"stop it with: superchargedb stack down --data {data}")


@stack_app.command()
def failover(data: Path = _DATA) -> None:
    """Promote the standby to primary and fence the old primary (it never takes a write again;
    restarted, it comes up read-only). The API processes and workers follow by themselves."""
    from ..stack.failover import failover as stack_failover
    from ..stack.up import StackError

    try:
        stack_failover(data, echo=typer.echo)
    except (StackError, TimeoutError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


@stack_app.command()
def down(data: Path = _DATA) -> None:
    """Stop everything `stack up` started for this data dir (the data stays)."""
    from ..stack.up import StackError
    from ..stack.up import down as stack_down

    try:
        state = stack_down(data, echo=typer.echo)
    except StackError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if state is None:
        typer.echo("no stack is running for this data dir")
    else:
        typer.echo("stack stopped")


@stack_app.command()
def status(
    data: Path = _DATA,
    as_json: bool = typer.Option(False, "--json", help="The whole state file (with secrets)"),
    as_env: bool = typer.Option(
        False, "--env", help="`export` lines of the stack's settings (for other commands)"
    ),
) -> None:
    """Show the stack's processes (exit 1 when none runs or one is down)."""
    from ..stack.up import StackError, read_state

    try:
        state = read_state(data.resolve())
    except StackError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if state is None:
        typer.echo("no stack is running for this data dir")
        raise typer.Exit(1)
    if as_env:  # eval "$(superchargedb stack status --env)"; superchargedb backup DEST
        for k, v in state.env.items():
            typer.echo(f"export {k}={shlex.quote(v)}")
    elif as_json:
        typer.echo(json.dumps({**state.to_json(), "running": state.running()}, indent=2))
    else:
        _show(state)
    raise typer.Exit(0 if all(state.running().values()) else 1)
