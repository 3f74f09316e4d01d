"""``superchargedb migrate``: copy an embedded data dir into the server stack (storage/migrate.py).

The target is the deployment the settings name, as ``serve`` would open it: the database of
``SCDB_DATABASE_URL`` and the blob store of ``--data`` (its ``objects/`` folder, or the bucket of
``SCDB_S3_*``). Run it again after an interruption: it resumes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from ..errors import SCDBError


def _print_report(r: dict[str, Any]) -> None:
    w = max(len(t) for t in r["tables"])
    typer.echo(f"{'table':<{w}}  {'source':>9}  {'target':>9}")
    for t, v in r["tables"].items():
        mark = "" if v["source"] == v["target"] else "  MISMATCH"
        typer.echo(f"{t:<{w}}  {v['source']:>9}  {v['target']:>9}{mark}")
    lex = r["lexical"]
    typer.echo(
        f"lexical statistics: {lex['n_docs']} documents over {lex['units']} Units, "
        f"{lex['pending']} outbox rows pending: {'ok' if lex['ok'] else 'MISMATCH'}"
    )
    typer.echo(f"blobs copied: {r['blobs_copied']}, absent: {r['blobs_absent_count']}")
    for sha in r["blobs_absent"]:
        typer.echo(f"  absent: {sha}")
    a = r["audit"]
    state = "verified" if a["ok"] else f"NOT VERIFIED ({a['reason'] or 'head differs'})"
    typer.echo(
        f"audit chain on PostgreSQL: {a['records']} of {a['source_records']} records,"
        f" head {str(a['head'])[:16]}: {state}"
    )
    resumed = " (resumed)" if r["resumed"] else ""
    verdict = "OK" if r["ok"] else "FAILED"
    typer.echo(f"migrate{resumed}: {verdict} in {r['seconds']} s")


def register(app: typer.Typer) -> None:
    @app.command()
    def migrate(
        source: Path = typer.Argument(..., help="The embedded data dir to copy (not served)"),
        data: Path = typer.Option(
            Path("./scdb-data"), "--data", help="The server deployment's data dir"
        ),
        batch: int = typer.Option(1000, min=1, help="Rows per transaction"),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON"),
    ) -> None:
        """Copy an embedded data dir into PostgreSQL (SCDB_DATABASE_URL) and the deployment's
        blob store: Units with their vectors as stored, principals and key hashes, documents,
        objects, usage, jobs and the audit chain; resumable; checked at the end (counts per
        table, the chain verified on PostgreSQL). Exit 1 when refused or when a check fails."""
        from ..settings import Settings
        from ..storage import migrate as migration
        from ..storage.migrate_tables import TABLES, UNITS
        from ..storage.sqlite import audit
        from ..wiring import blob_store

        settings = Settings(data_dir=data)
        if not settings.database_url:
            typer.echo("error: set SCDB_DATABASE_URL to the database to migrate into", err=True)
            raise typer.Exit(2)
        bars: list[Any] = []

        def progress(totals: dict[str, int]) -> migration.Progress:
            from tqdm import tqdm

            total = sum(totals[t.name] for t in TABLES) + totals[UNITS]
            bars.append(tqdm(total=total, desc="migrate", unit="row"))

            def step(table: str, n: int) -> None:
                bars[0].set_postfix_str(table, refresh=False)
                bars[0].update(n)

            return step

        try:
            data.mkdir(parents=True, exist_ok=True)
            report = migration.migrate(
                source,
                settings.database_url,
                blob_store(settings, data),
                audit.load_key(settings.audit_key_file),
                batch=batch,
                source_anchor=audit.anchor_path(source),
                target_anchor=audit.anchor_path(data, settings.audit_anchor_file),
                progress=progress,
            )
        except SCDBError as exc:
            typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
            raise typer.Exit(1) from None
        finally:
            for b in bars:
                b.close()
        if as_json:
            typer.echo(json.dumps(report, indent=2))
        else:
            _print_report(report)
        raise typer.Exit(0 if report["ok"] else 1)
