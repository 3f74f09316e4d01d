"""``superchargedb tenants``: which cluster holds each tenant, when tenants are spread over
several (``SCDB_CLUSTER_URLS``, D-277)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..errors import SCDBError, ValidationError
from ..operator import OperatorStore
from .admin import DATA, _fail, _store

if TYPE_CHECKING:
    from ..storage.postgres.placement import Placement

tenants_app = typer.Typer(
    help="The tenant directory over several clusters (SCDB_CLUSTER_URLS).", no_args_is_help=True
)


def _placement(st: OperatorStore) -> Placement:
    if st.router is None:
        typer.echo(
            "error: tenants are placed only over several clusters (SCDB_CLUSTER_URLS)", err=True
        )
        raise typer.Exit(2)
    return st.router.placement


@tenants_app.command("list")
def tenants_list(data: Path = DATA) -> None:
    """Every placed tenant and its cluster, and the clusters configured."""
    with _store(data) as st:
        placement = _placement(st)
        out = {"clusters": placement.clusters, "tenants": placement.known()}
    typer.echo(json.dumps(out, indent=2))


@tenants_app.command("place")
def tenants_place(
    tenant: str = typer.Argument(..., help="A tenant: a scope's first segment"),
    cluster: str = typer.Argument(..., help="One of the names in SCDB_CLUSTER_URLS"),
    data: Path = DATA,
) -> None:
    """Put a tenant on a cluster before anything of it exists (a placed tenant never moves)."""
    from ..auth.scopes import check_scope

    with _store(data) as st:
        placement = _placement(st)
        try:
            if "/" in tenant:
                raise ValidationError("a tenant is one scope segment (acme, not acme/eng)")
            placement.place(check_scope(tenant, "tenant"), cluster)
        except SCDBError as exc:
            _fail(exc)
    typer.echo(json.dumps({"tenant": tenant, "cluster": cluster}))
