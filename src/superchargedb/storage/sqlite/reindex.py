"""Re-embed every Unit with the configured model, then let the index rebuild from the catalog.

Runs offline under the data-dir lock. Idempotent: Units already carrying the target model id are
skipped, so an interrupted reindex is simply run again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...models.embedder import Embedder
from .catalog import Catalog


def stale_count(catalog: Catalog, model_id: str) -> int:
    row = (
        catalog.reader()
        .execute("SELECT COUNT(*) FROM units WHERE model_id != ?", (model_id,))
        .fetchone()
    )
    return int(row[0])


def reindex(
    catalog: Catalog,
    index_dir: Path,
    embedder: Embedder,
    batch: int = 64,
    progress: Callable[[int], None] | None = None,
) -> int:
    done = 0
    last = 0
    while True:
        rows = (
            catalog.reader()
            .execute(
                "SELECT id, text FROM units WHERE model_id != ? AND id > ? ORDER BY id LIMIT ?",
                (embedder.model_id, last, batch),
            )
            .fetchall()
        )
        if not rows:
            break
        vecs = embedder.embed([r[1] for r in rows])
        with catalog.write() as conn:
            conn.executemany(
                "UPDATE units SET embedding = ?, model_id = ? WHERE id = ?",
                [
                    (np.asarray(v, dtype=np.float16).tobytes(), embedder.model_id, int(r[0]))
                    for r, v in zip(rows, vecs, strict=True)
                ],
            )
        last = int(rows[-1][0])
        done += len(rows)
        if progress is not None:
            progress(len(rows))
    # Every index file (and its meta.json with the old model id) is now stale. With them gone
    # the next start replays the outbox or, where it was compacted, rebuilds each plane from the
    # catalog's new embeddings (IndexSync.startup).
    if index_dir.is_dir():
        for f in index_dir.iterdir():
            if f.is_file():
                f.unlink()
    return done
