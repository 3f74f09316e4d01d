"""The PostgreSQL schema as numbered migrations, applied once per database under a lock.

``schema_version`` records each applied step; ``migrate`` runs the missing ones in order in one
transaction that holds an advisory lock (DDL is transactional here), so two processes opening a
fresh database together apply every step exactly once, and a failed step leaves nothing behind.
A step is a function of the embedding dimension (the ``halfvec`` column's type); the dimension
and the model are recorded in ``meta`` and a later open with another dimension is refused.

Text compared by range (scopes: the ``/`` boundary test of D-2) is ``COLLATE "C"``: byte order
whatever the database's default collation, and what the btree behind that test is sorted by.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from ..vectors import PLANES
from . import rls

MIGRATE_LOCK = 0x5CDB_0001  # pg_advisory_xact_lock key: one migrator at a time


def _m001_base(dim: int) -> str:
    hnsw = "\n".join(
        f"CREATE INDEX units_hnsw_{p} ON units USING hnsw (embedding halfvec_cosine_ops)"
        f" WHERE plane = '{p}';"
        for p in PLANES
    )
    return f"""
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE units (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  unit_id text NOT NULL UNIQUE,
  scope text COLLATE "C" NOT NULL,
  doc_id text NOT NULL,
  plane text NOT NULL,
  modality text NOT NULL,
  source_uri text NOT NULL DEFAULT '',
  mime text,
  text text NOT NULL,
  acl_owner text NOT NULL,
  acl_groups text[] NOT NULL DEFAULT '{{}}',
  content_hash text NOT NULL,
  chunk_idx integer NOT NULL DEFAULT 0,
  n_chunks integer NOT NULL DEFAULT 1,
  loc_kind text, loc_start integer, loc_end integer, t_start_ms bigint, t_end_ms bigint,
  shot_idx integer, page integer,
  bbox_x0 double precision, bbox_y0 double precision,
  bbox_x1 double precision, bbox_y1 double precision,
  created_at bigint NOT NULL,
  event_at bigint NOT NULL,
  object_key text,
  object_sha text,
  model_id text NOT NULL,
  terms text[] NOT NULL,
  dl integer NOT NULL,
  embedding halfvec({int(dim)}) NOT NULL
);
CREATE INDEX units_scope ON units (scope);
CREATE INDEX units_owner ON units (acl_owner);
CREATE INDEX units_groups ON units USING gin (acl_groups);
CREATE INDEX units_doc ON units (doc_id);
CREATE INDEX units_event ON units (event_at);
{hnsw}
CREATE TABLE postings (
  term text COLLATE "C" NOT NULL,
  unit bigint NOT NULL,
  tf integer NOT NULL,
  pos integer[] NOT NULL,
  PRIMARY KEY (term, unit) INCLUDE (tf)
);
CREATE TABLE lex_terms (term text COLLATE "C" PRIMARY KEY, df bigint NOT NULL);
CREATE TABLE lex_stats (
  id integer PRIMARY KEY CHECK (id = 1), n_docs bigint NOT NULL, total bigint NOT NULL
);
INSERT INTO lex_stats VALUES (1, 0, 0);
CREATE TABLE outbox (
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  op text NOT NULL,
  plane text NOT NULL,
  unit bigint NOT NULL,
  d_docs integer NOT NULL,
  d_len bigint NOT NULL,
  terms text[] NOT NULL,
  d_df integer NOT NULL,
  applied boolean NOT NULL DEFAULT false
);
CREATE INDEX outbox_pending ON outbox (seq) WHERE NOT applied;
CREATE TABLE scope_gens (scope text COLLATE "C" PRIMARY KEY, gen bigint NOT NULL);
CREATE TABLE kv (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE audit_log (
  seq bigint PRIMARY KEY,
  prev_hash text NOT NULL UNIQUE,
  hash text NOT NULL,
  at bigint NOT NULL,
  actor text NOT NULL,
  action text NOT NULL,
  record text NOT NULL
);
CREATE TABLE jobs (
  id text PRIMARY KEY,
  kind text NOT NULL,
  state text NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
  payload text NOT NULL,
  principal text NOT NULL,
  scope text COLLATE "C" NOT NULL,
  acl_owner text NOT NULL,
  acl_groups text[] NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL,
  dedupe_key text NOT NULL,
  lease_token text,
  lease_until bigint,
  lease_owner text,
  progress double precision NOT NULL DEFAULT 0,
  result text,
  error text,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL
);
CREATE INDEX jobs_runnable ON jobs (created_at, id) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_dedupe ON jobs (dedupe_key);
"""


def _m002_writes(dim: int) -> str:
    """The write side's rows beside the Units (``protocols_writes.py``): what a Unit carries for
    its quota and its later chunks' lexical context, the idempotency key as a constraint (the
    embedded catalog's ``UNIQUE``), documents, objects, usage and word tables."""
    return """
ALTER TABLE units ADD COLUMN context text NOT NULL DEFAULT '';
ALTER TABLE units ADD COLUMN created_by text NOT NULL DEFAULT '';
CREATE UNIQUE INDEX units_idempotency ON units (scope, doc_id, acl_owner, content_hash, chunk_idx);
-- Its leading column serves the scope range of D-2 as the planner prefers it: one index less
-- to write.
DROP INDEX units_scope;
CREATE INDEX units_created_by ON units (created_by) WHERE object_key IS NOT NULL;
CREATE INDEX outbox_unit_pending ON outbox (unit) WHERE NOT applied;
CREATE TABLE docs (
  scope text COLLATE "C" NOT NULL,
  doc_id text NOT NULL,
  acl_owner text NOT NULL,
  created_by text NOT NULL,
  created_at bigint NOT NULL,
  PRIMARY KEY (scope, doc_id, acl_owner)
);
CREATE INDEX docs_created_by ON docs (created_by);
CREATE TABLE objects (
  key text NOT NULL,
  acl_owner text NOT NULL,
  sha256 text NOT NULL,
  size bigint NOT NULL,
  content_type text NOT NULL,
  scope text COLLATE "C" NOT NULL,
  acl_groups text[] NOT NULL DEFAULT '{}',
  created_by text NOT NULL,
  created_at bigint NOT NULL,
  PRIMARY KEY (key, acl_owner)
);
CREATE INDEX objects_sha ON objects (sha256);
CREATE INDEX objects_owner ON objects (acl_owner);
CREATE INDEX objects_scope ON objects (scope);
CREATE TABLE usage_daily (
  principal text NOT NULL,
  day integer NOT NULL,
  route text NOT NULL,
  requests bigint NOT NULL,
  cost_micro_usd bigint NOT NULL,
  PRIMARY KEY (principal, day, route)
);
CREATE TABLE unit_words (
  unit bigint NOT NULL REFERENCES units (id) ON DELETE CASCADE,
  idx integer NOT NULL,
  char_start integer NOT NULL,
  char_end integer NOT NULL,
  t_start_ms bigint, t_end_ms bigint,
  page integer,
  x0 double precision, y0 double precision, x1 double precision, y1 double precision,
  conf double precision,
  PRIMARY KEY (unit, idx)
);
CREATE INDEX jobs_reserving ON jobs (principal) WHERE state IN ('queued', 'running');
-- Jobs queued in one millisecond are claimed in the order they were queued (the embedded
-- queue's rowid order), not by their random ids.
ALTER TABLE jobs ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
DROP INDEX jobs_runnable;
CREATE INDEX jobs_runnable ON jobs (created_at, seq) WHERE state IN ('queued', 'running');
"""


def _m003_auth(dim: int) -> str:
    """Principals, their API keys (hashed) and the console's sessions (``protocols_auth.py``):
    the system of record's, beside the Units whose visibility they decide."""
    return """
CREATE TABLE principals (
  id text PRIMARY KEY,
  name text NOT NULL UNIQUE,
  perms text[] NOT NULL,
  tier text NOT NULL,
  scopes text[] NOT NULL,
  active_scope text NOT NULL,
  groups text[] NOT NULL,
  doc_quota bigint,
  created_at bigint NOT NULL,
  disabled boolean NOT NULL DEFAULT false
);
CREATE TABLE api_keys (
  id text PRIMARY KEY,
  principal_id text NOT NULL REFERENCES principals (id),
  key_hash text NOT NULL UNIQUE,  -- sha256 hex; the key itself is never stored
  prefix text NOT NULL,
  created_at bigint NOT NULL,
  expires_at bigint,
  revoked_at bigint,
  last_used_at bigint,
  issued_by text
);
CREATE INDEX api_keys_principal ON api_keys (principal_id, created_at);
CREATE TABLE console_sessions (
  token_hash text PRIMARY KEY,  -- sha256 hex of the cookie value; never the value
  principal_id text NOT NULL REFERENCES principals (id),
  key_id text NOT NULL REFERENCES api_keys (id),
  created_at bigint NOT NULL,
  last_seen_at bigint NOT NULL,
  expires_at bigint NOT NULL  -- absolute end, whatever the activity
);
CREATE INDEX console_sessions_key ON console_sessions (key_id);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);
"""


def _m004_reads(dim: int) -> str:
    """What the facade's views read (``protocols_reads.py``): jobs by scope (tenant counts) and
    in listing order, ``(created_at, id)`` in byte order as the keyset compares them."""
    return """
CREATE INDEX jobs_scope ON jobs (scope);
CREATE INDEX jobs_listing ON jobs (created_at, (id COLLATE "C"));
"""


def _m005_keyframes(dim: int) -> str:
    """A video shot's kept keyframe (D-236), deleted with its Unit."""
    return """
CREATE TABLE unit_keyframes (
  unit bigint PRIMARY KEY REFERENCES units (id) ON DELETE CASCADE,
  mime text NOT NULL,
  data bytea NOT NULL
);
"""


def _m006_row_security(dim: int) -> str:
    """Row-level security on the tenant tables and the role the API acts in (D-263)."""
    return rls.migration_sql()


def _m007_outbox_tail(dim: int) -> str:
    """The outbox as a log each process's derived lexical index tails (D-267): every row
    carries its transaction's id, applied rows are kept ``outbox.RETAIN_S``, and ``lex_stats``
    records the newest transaction id pruned (the applier that prunes may act in the tenant
    role, which writes ``lex_stats`` and not ``meta``) so a process that fell behind rebuilds."""
    return """
ALTER TABLE outbox ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  ADD COLUMN at timestamptz NOT NULL DEFAULT now();
CREATE INDEX outbox_xid ON outbox (xid);
CREATE INDEX outbox_at ON outbox (at);
ALTER TABLE lex_stats ADD COLUMN pruned_xid xid8 NOT NULL DEFAULT '0';
"""


def _m008_plane_scope(dim: int) -> str:
    """The dense leg's bounded count per plane as one range of ``(plane, scope)`` (D-268): on the
    scope's index alone, a plane without Units in a broad scope was a scan of the whole scope."""
    return "CREATE INDEX units_plane_scope ON units (plane, scope);"


def _m009_inline_vectors(dim: int) -> str:
    """Vectors kept in the row (D-273): a Unit's row is often past the 2 kB TOAST threshold,
    and with pgvector's default EXTERNAL storage the embedding was the column moved out of
    line, so an exact scan read two more pages per row. MAIN keeps it inline (the text goes
    out of line first). Rows written before keep their layout until rewritten
    (``VACUUM FULL units``)."""
    return "ALTER TABLE units ALTER COLUMN embedding SET STORAGE MAIN;"


def _m010_tenant_clusters(dim: int) -> str:
    """The tenant directory (D-277): which cluster holds each tenant, kept in the directory
    database (every database has the table; only the directory's is used)."""
    return """
CREATE TABLE tenant_clusters (
  tenant text PRIMARY KEY,
  cluster text NOT NULL,
  placed_at bigint NOT NULL
);
REVOKE INSERT, UPDATE, DELETE ON tenant_clusters FROM scdb_tenant;
"""


MIGRATIONS: list[tuple[int, str, Callable[[int], str]]] = [
    (1, "base", _m001_base),
    (2, "writes", _m002_writes),
    (3, "auth", _m003_auth),
    (4, "reads", _m004_reads),
    (5, "keyframes", _m005_keyframes),
    (6, "row_security", _m006_row_security),
    (7, "outbox_tail", _m007_outbox_tail),
    (8, "plane_scope", _m008_plane_scope),
    (9, "inline_vectors", _m009_inline_vectors),
    (10, "tenant_clusters", _m010_tenant_clusters),
]


def migrate(conn: psycopg.Connection[Any], dim: int, model_id: str) -> int:
    """Apply the missing migrations (on an autocommit connection with tuple rows); returns the
    schema version."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
        current = int(row[0]) if row else 0
        for version, name, step in MIGRATIONS:
            if version <= current:
                continue
            conn.execute(step(dim).encode())
            conn.execute(
                "INSERT INTO schema_version(version, name) VALUES (%s, %s)", (version, name)
            )
            current = version
        if current >= 1:
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('dim', %s), ('model_id', %s)"
                " ON CONFLICT (key) DO NOTHING",
                (str(dim), model_id),
            )
            got = conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
            if got is not None and int(got[0]) != dim:
                raise ValueError(f"the database holds {got[0]}-d vectors, not {dim}-d")
    return current
