"""``superchargedb import``: bulk-load Units with precomputed vectors (ingest/bulk_import.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from ..errors import SCDBError

DATA = typer.Option(Path("./scdb-data"), "--data", help="Data directory")


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if not line.strip():
                continue
            try:
                yield i, json.loads(line)
            except ValueError as exc:
                raise typer.BadParameter(f"{path}:{i + 1}: not JSON ({exc})") from None


def register(app: typer.Typer) -> None:
    @app.command("import")
    def import_units(
        units: Path = typer.Argument(..., help="JSON Lines, one Unit per line"),
        vectors: Path = typer.Option(..., "--vectors", help=".npy (n, dim) float16/float32"),
        data: Path = DATA,
        owner: str = typer.Option(None, help="acl_owner of records that name none"),
        batch: int = typer.Option(50_000, min=1, help="Units per transaction"),
        model_id: str = typer.Option(
            None, "--model-id", help="Model that made the vectors (must be the configured one)"
        ),
    ) -> None:
        """Bulk-import Units with their precomputed embeddings (operator, offline).

        Every record is validated first; nothing is written unless all are valid. Then each
        batch commits in one transaction with its outbox rows and audit record, and the vector
        and lexical indexes are built in bulk and checkpointed at the end.
        """
        import numpy as np
        from tqdm import tqdm

        from ..ingest.bulk_import import Validator, check_vectors, import_batches
        from ..settings import Settings
        from ..wiring import open_service

        settings = Settings(data_dir=data, job_workers=0)
        vecs = np.load(vectors, mmap_mode="r", allow_pickle=False)
        try:
            svc = open_service(settings)
        except SCDBError as exc:
            typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
            raise typer.Exit(1) from None
        try:
            emb = svc.embedder
            if model_id is not None and model_id != emb.model_id:
                typer.echo(
                    f"error: vectors from {model_id!r} but the configured model is "
                    f"{emb.model_id!r} (set SCDB_EMBEDDER)",
                    err=True,
                )
                raise typer.Exit(1)
            val = Validator(owner, settings.max_text_chars)
            n = 0
            try:
                for i, raw in tqdm(_records(units), desc="validate", unit="unit"):
                    val.prepare(i, raw)
                    n += 1
                if vecs.ndim != 2 or vecs.shape != (n, emb.dim):
                    raise typer.BadParameter(
                        f"{vectors} holds {vecs.shape}, expected ({n}, {emb.dim})"
                    )
                for lo in range(0, n, batch):
                    check_vectors(vecs[lo : lo + batch], min(batch, n - lo), emb.dim, lo)
            except SCDBError as exc:
                typer.echo(f"error [{exc.code}]: {exc.message} (nothing imported)", err=True)
                raise typer.Exit(1) from None

            def batches() -> Iterator[tuple[list[Any], Any]]:
                recs: list[Any] = []
                row = 0
                for _, raw in _records(units):
                    recs.append(raw)
                    if len(recs) == batch:
                        yield recs, vecs[row : row + len(recs)]
                        row += len(recs)
                        recs = []
                if recs:
                    yield recs, vecs[row : row + len(recs)]

            with tqdm(total=n, desc="import", unit="unit") as bar:
                out = import_batches(svc, batches(), default_owner=owner, progress=bar.update)
        finally:
            svc.close()
        typer.echo(json.dumps(out))
