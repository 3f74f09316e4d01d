"""Maintenance commands: backup, restore, reindex, doctor."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..errors import SCDBError

DATA = typer.Option(Path("./scdb-data"), "--data", help="Data directory")


def _fail(exc: SCDBError) -> None:
    typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    @app.command()
    def backup(dest: Path, data: Path = DATA) -> None:
        """Online, consistent backup (catalog snapshot + objects); safe while a server runs."""
        from ..storage.sqlite.backup import backup as do_backup

        try:
            manifest = do_backup(data, dest)
        except SCDBError as exc:
            _fail(exc)
        typer.echo(json.dumps(manifest, indent=2))

    @app.command()
    def restore(src: Path, data: Path = DATA) -> None:
        """Restore a backup into an empty data dir, rebuild the index, verify the audit chain."""
        from ..auth.admin import OPERATOR
        from ..settings import Settings
        from ..storage.sqlite.backup import restore_files
        from ..wiring import open_service

        try:
            manifest = restore_files(src, data)
        except SCDBError as exc:
            _fail(exc)
        svc = open_service(Settings(data_dir=data))
        try:
            chain = svc.audit_verify(OPERATOR)
            units = svc.catalog.reader().execute("SELECT COUNT(*) FROM units").fetchone()[0]
        finally:
            svc.close()
        ok = chain["ok"] and units == manifest["units"]
        typer.echo(json.dumps({"ok": ok, "units": units, "audit": chain}, indent=2))
        raise typer.Exit(0 if ok else 1)

    @app.command()
    def reindex(
        data: Path = DATA,
        embedder: str = typer.Option(None, help="Embedder spec (default: SCDB_EMBEDDER)"),
        rederive: bool = typer.Option(
            False,
            help="also queue media derived before Units kept their words to be derived again"
            " (the server's or a worker's job runner does it)",
        ),
    ) -> None:
        """Re-embed every Unit with the configured model; the index is rebuilt on next start.
        With --rederive, media Units without word tables are queued to be derived again."""
        from tqdm import tqdm

        from ..models.embedder import make_embedder
        from ..settings import Settings
        from ..storage.lock import DataDirLock
        from ..storage.sqlite.catalog import Catalog
        from ..storage.sqlite.reindex import reindex as do_reindex
        from ..storage.sqlite.reindex import stale_count

        settings = Settings(data_dir=data)
        lock = DataDirLock(data)
        try:
            lock.acquire()
        except SCDBError as exc:
            _fail(exc)
        try:
            emb = make_embedder(
                embedder or settings.embedder,
                max_tokens=settings.embed_max_tokens,
                threads=settings.embed_threads,
                batch_size=settings.embed_batch_size,
            )
            catalog = Catalog(data / "catalog.db", settings.sqlite_synchronous)
            queued: list[str] = []
            if rederive:
                from ..storage.sqlite import rederive as rd
                from ..storage.sqlite.jobs import JobQueue

                queue = JobQueue(catalog, settings.job_lease_s, settings.job_max_attempts)
                with catalog.write() as conn:
                    queued = rd.requeue(conn, queue, rd.stale_jobs(conn))
            total = stale_count(catalog, emb.model_id)
            with tqdm(total=total, unit="unit", desc=f"reindex -> {emb.model_id}") as bar:
                n = do_reindex(catalog, data / "index", emb, progress=bar.update)
            catalog.close()
        finally:
            lock.release()
        out: dict[str, object] = {"reembedded": n, "model_id": emb.model_id}
        if rederive:
            out["rederive_queued"] = len(queued)
        typer.echo(json.dumps(out))
