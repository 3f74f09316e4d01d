"""What ``superchargedb migrate`` copies from an embedded catalog into PostgreSQL (D-275): the
tables copied row for row, in the order they are copied, shared by the reader of the embedded
catalog (``sqlite/export.py``) and the writer into the database (``postgres/migrate_target.py``).

The Units are not among them: they go through the PostgreSQL backend's own insert, which
derives their postings and outbox operations (``postgres/units.py``), with their word tables
and keyframes beside them in the same transaction. What is derived on either side (the
embedded FTS5 and vector index files, the ``acl`` tokens, ``unit_groups``, the outbox and its
watermarks in ``kv``; PostgreSQL's postings, ``lex_terms`` and ``lex_stats``) is not copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .protocols import UnitRecord


@dataclass(frozen=True)
class Table:
    """One table copied as it is stored, in batches ordered by ``key``.

    ``key`` is the embedded table's primary key (stable across runs), or ``rowid`` for the job
    queue, whose order is the queue's (PostgreSQL numbers the jobs as they arrive).
    """

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    lists: tuple[str, ...] = ()  # JSON arrays in SQLite, text[] in PostgreSQL
    flags: tuple[str, ...] = ()  # 0/1 in SQLite, boolean in PostgreSQL


def _cols(s: str) -> tuple[str, ...]:
    return tuple(s.split())


# Foreign keys first: a key needs its principal, a session its key.
TABLES: tuple[Table, ...] = (
    Table(
        "principals",
        _cols("id name perms tier scopes active_scope groups doc_quota created_at disabled"),
        ("id",),
        lists=("perms", "scopes", "groups"),
        flags=("disabled",),
    ),
    Table(
        "api_keys",
        _cols(
            "id principal_id key_hash prefix created_at expires_at revoked_at last_used_at"
            " issued_by"
        ),
        ("id",),
    ),
    Table(
        "console_sessions",
        _cols("token_hash principal_id key_id created_at last_seen_at expires_at"),
        ("token_hash",),
    ),
    Table(
        "objects",
        _cols("key acl_owner sha256 size content_type scope acl_groups created_by created_at"),
        ("key", "acl_owner"),
        lists=("acl_groups",),
    ),
    Table(
        "docs",
        _cols("scope doc_id acl_owner created_by created_at"),
        ("scope", "doc_id", "acl_owner"),
    ),
    Table(
        "usage_daily",
        _cols("principal day route requests cost_micro_usd"),
        ("principal", "day", "route"),
    ),
    Table(
        "jobs",
        _cols(
            "id kind state payload principal scope acl_owner acl_groups attempts max_attempts"
            " dedupe_key lease_token lease_until lease_owner progress result error created_at"
            " updated_at"
        ),
        ("rowid",),
        lists=("acl_groups",),
    ),
    Table("scope_gens", _cols("scope gen"), ("scope",)),
    # The chain last, each record as stored: verifying it on PostgreSQL proves the copy.
    Table("audit_log", _cols("seq prev_hash hash at actor action record"), ("seq",)),
)

UNITS = "units"
# Rows that travel with their Unit, counted after the copy.
UNIT_SIDE_TABLES = ("unit_words", "unit_keyframes")
# The Units are copied after the documents (TABLES[:UNITS_AFTER]), before usage, jobs and chain.
UNITS_AFTER = 5
# Every table the final check counts on both sides, in copy order.
COUNTED = (
    *(t.name for t in TABLES[:UNITS_AFTER]),
    UNITS,
    *UNIT_SIDE_TABLES,
    *(t.name for t in TABLES[UNITS_AFTER:]),
)


WORD_COLUMNS = _cols("idx char_start char_end t_start_ms t_end_ms page x0 y0 x1 y1 conf")


@dataclass(frozen=True)
class SourceInfo:
    """What identifies the source store and what its Units are embedded with."""

    store_id: str  # the chain's first hash and the catalog's creation time, hashed
    model_id: str | None  # None: no Units
    dim: int | None
    audit_seq: int  # the chain's head (0, GENESIS when empty)
    audit_hash: str


@dataclass(frozen=True)
class UnitBatch:
    last: int  # the batch's highest catalog id: the next batch starts above it
    units: list[UnitRecord]
    vectors: np.ndarray  # float16 as stored, row i is units[i]'s
    words: list[tuple[Any, ...]]  # (unit_id, idx, char_start, ...) in WORD_COLUMNS order
    keyframes: list[tuple[str, str, bytes]]  # (unit_id, mime, data)
