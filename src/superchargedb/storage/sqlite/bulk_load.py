"""``BulkLoad`` for the embedded backend: the writer's page cache grown while an import runs,
and the index apply of ``IndexSync`` with its vector add in the background (D-64)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .catalog import Catalog
from .index_sync import IndexSync


class SqliteBulkLoad:
    def __init__(self, catalog: Catalog, sync: IndexSync) -> None:
        self.catalog = catalog
        self.sync = sync

    @contextmanager
    def tuned(self, cache_mb: int) -> Iterator[None]:
        with self.catalog.locked() as conn:
            old_cache = int(conn.execute("PRAGMA cache_size").fetchone()[0])
            # A batch inserts into every secondary index of a large table at random places; a
            # page cache that holds those indexes keeps each commit from re-reading them.
            kib = max(cache_mb * 1024, -old_cache if old_cache < 0 else 0)
            conn.execute(f"PRAGMA cache_size=-{kib}")
        try:
            yield
        finally:
            with self.catalog.locked() as conn:
                conn.execute(f"PRAGMA cache_size={old_cache}")

    def apply_behind(self) -> None:
        self.sync.apply_pending(checkpoint=False, background=True)

    def wait_behind(self) -> None:
        self.sync.wait_vectors()

    def checkpoint(self) -> None:
        self.sync.checkpoint()
