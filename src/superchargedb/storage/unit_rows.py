"""A stored Unit row back into its ``UnitRecord``: the conversion both backends share.

The embedded and the PostgreSQL catalog keep a Unit in the same named columns; they differ
only in how its groups are stored (JSON text in SQLite, a text array in PostgreSQL), so each
backend decodes those and this builds the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from ..types import Locator
from .protocols import UnitRecord


class Row(Protocol):
    """A row addressed by column name: ``sqlite3.Row``, or a mapping of a PostgreSQL row."""

    def __getitem__(self, column: str, /) -> Any: ...


def unit_record(r: Row, acl_groups: Iterable[str]) -> UnitRecord:
    return UnitRecord(
        unit_id=r["unit_id"],
        scope=r["scope"],
        doc_id=r["doc_id"],
        plane=r["plane"],
        modality=r["modality"],
        text=r["text"],
        acl_owner=r["acl_owner"],
        acl_groups=tuple(acl_groups),
        content_hash=r["content_hash"],
        source_uri=r["source_uri"] or None,  # stored as "" when the Unit names none
        mime=r["mime"],
        locator=Locator.from_row(r),
        chunk_index=r["chunk_idx"],
        chunk_count=r["n_chunks"],
        created_at=r["created_at"],
        event_at=r["event_at"],
        object_key=r["object_key"],
        object_sha=r["object_sha"],
    )
