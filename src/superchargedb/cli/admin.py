"""Operator commands: ``keys`` and ``audit`` (offline, holding the data-dir lock)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from ..auth.admin import OPERATOR
from ..errors import SCDBError
from ..operator import OperatorStore

keys_app = typer.Typer(help="Principals and API keys (operator, offline).", no_args_is_help=True)
audit_app = typer.Typer(help="The keyed audit chain.", no_args_is_help=True)

DATA = typer.Option(Path("./scdb-data"), "--data", help="Data directory")


def _store(data: Path) -> OperatorStore:
    from ..settings import Settings

    try:
        return OperatorStore(Settings(data_dir=data))
    except SCDBError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from None


def _split(v: str | None) -> list[str]:
    return [x.strip() for x in (v or "").split(",") if x.strip()]


def _fail(exc: SCDBError) -> None:
    typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
    raise typer.Exit(1)


@keys_app.command("create")
def keys_create(
    principal: str = typer.Option(..., "--principal", help="Principal name (created if new)"),
    scopes: str = typer.Option(None, help="Comma-separated scopes (new principal)"),
    perms: str = typer.Option("read", help="Comma-separated: read,write,admin"),
    tier: str = typer.Option("free", help="free | pro | enterprise"),
    groups: str = typer.Option("", help="Comma-separated ACL groups"),
    quota: int = typer.Option(None, help="Document quota (none = unlimited)"),
    active_scope: str = typer.Option(None, help="Default scope for requests"),
    expires_days: float = typer.Option(None, help="Key lifetime in days"),
    data: Path = DATA,
) -> None:
    """Create a key (and the principal when it does not exist). The key is shown once."""
    expires = int((time.time() + expires_days * 86400) * 1000) if expires_days else None
    with _store(data) as st:
        try:
            if st.auth_store.principals.named(principal) is not None:
                out = st.admin_create_key(OPERATOR, principal, expires)
            else:
                spec = {
                    "name": principal,
                    "perms": _split(perms),
                    "tier": tier,
                    "scopes": _split(scopes),
                    "groups": _split(groups),
                    "doc_quota": quota,
                    "expires_at": expires,
                }
                if active_scope is not None:  # absent: the first scope (null is a 422)
                    spec["active_scope"] = active_scope
                out = st.admin_create_principal(OPERATOR, spec)
        except SCDBError as exc:
            _fail(exc)
    typer.echo(json.dumps(out, indent=2))
    typer.echo("Store this key now: it is not shown again.", err=True)


@keys_app.command("list")
def keys_list(data: Path = DATA) -> None:
    """Principals and their keys (hashes are never shown; only a prefix)."""
    with _store(data) as st:
        for p in st.admin_list_principals(OPERATOR)["principals"]:
            keys = st.admin_list_keys(OPERATOR, p["name"])["keys"]
            typer.echo(json.dumps({**p, "keys": keys}))


@keys_app.command("revoke")
def keys_revoke(key_id: str, data: Path = DATA) -> None:
    """Revoke a key at once."""
    with _store(data) as st:
        try:
            typer.echo(json.dumps(st.admin_revoke_key(OPERATOR, key_id)))
        except SCDBError as exc:
            _fail(exc)


@keys_app.command("rotate")
def keys_rotate(
    key_id: str,
    overlap_s: int = typer.Option(0, help="Seconds the old key keeps working"),
    data: Path = DATA,
) -> None:
    """Issue a new key for the same principal; the old one expires after the overlap."""
    with _store(data) as st:
        try:
            typer.echo(json.dumps(st.admin_rotate_key(OPERATOR, key_id, overlap_s), indent=2))
        except SCDBError as exc:
            _fail(exc)


@audit_app.command("verify")
def audit_verify(data: Path = DATA) -> None:
    """Recompute the chain; name the first altered, removed or reordered record."""
    with _store(data) as st:
        report = st.audit_verify(OPERATOR)
    typer.echo(json.dumps(report, indent=2))
    raise typer.Exit(0 if report["ok"] else 1)


@audit_app.command("export")
def audit_export(
    out: Path = typer.Option(None, "--out", help="File to write (default: stdout)"),
    data: Path = DATA,
) -> None:
    """Write the chain as JSON lines."""
    with _store(data) as st:
        lines = list(st.audit_export())
    if out is None:
        for line in lines:
            typer.echo(line)
    else:
        out.write_text("\n".join(lines) + "\n")
        typer.echo(f"wrote {len(lines)} records to {out}", err=True)
