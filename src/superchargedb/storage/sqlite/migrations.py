"""Append-only, numbered catalog migrations, recorded in ``schema_migrations``.

Never edit a shipped migration: add ``m00N_...`` instead.
"""

from __future__ import annotations

import sqlite3
import time

M001_INITIAL = """
CREATE TABLE units (
  id INTEGER PRIMARY KEY AUTOINCREMENT,     -- vector key; never reused (D-43)
  unit_id TEXT NOT NULL UNIQUE,             -- UUIDv7, the public id
  scope TEXT NOT NULL,
  doc_id TEXT NOT NULL,
  modality TEXT NOT NULL,
  plane TEXT NOT NULL,
  source_uri TEXT NOT NULL,
  mime TEXT,
  text TEXT NOT NULL,
  acl TEXT NOT NULL,                        -- hashed scope/owner/group tokens for FTS pushdown
  acl_owner TEXT NOT NULL,
  acl_groups TEXT NOT NULL,                 -- sorted JSON array
  content_hash TEXT NOT NULL,
  chunk_idx INTEGER NOT NULL DEFAULT 0,
  n_chunks INTEGER NOT NULL DEFAULT 1,
  loc_kind TEXT, loc_start INTEGER, loc_end INTEGER,
  t_start_ms INTEGER, t_end_ms INTEGER, shot_idx INTEGER,
  page INTEGER, bbox_x0 REAL, bbox_y0 REAL, bbox_x1 REAL, bbox_y1 REAL,
  created_at INTEGER NOT NULL,              -- epoch ms
  event_at INTEGER NOT NULL,                -- epoch ms (D-20)
  t_bucket INTEGER NOT NULL,                -- event_at // 3_600_000
  created_by TEXT NOT NULL,
  seq INTEGER NOT NULL,                     -- outbox seq of this Unit's vector add
  model_id TEXT NOT NULL,
  embedding BLOB NOT NULL,                  -- float16, the index is derived from these
  UNIQUE (scope, doc_id, acl_owner, content_hash, chunk_idx)
);
CREATE INDEX units_scope ON units(scope);
CREATE INDEX units_plane_scope ON units(plane, scope);
CREATE INDEX units_doc ON units(doc_id, scope);
CREATE INDEX units_owner ON units(acl_owner);
CREATE INDEX units_event ON units(t_bucket);

CREATE TABLE unit_groups (
  grp TEXT NOT NULL,
  unit INTEGER NOT NULL,
  PRIMARY KEY (grp, unit)
) WITHOUT ROWID;
CREATE INDEX unit_groups_unit ON unit_groups(unit);

CREATE VIRTUAL TABLE units_fts USING fts5(
  text, acl, content='units', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER units_ai AFTER INSERT ON units BEGIN
  INSERT INTO units_fts(rowid, text, acl) VALUES (new.id, new.text, new.acl);
END;
CREATE TRIGGER units_ad AFTER DELETE ON units BEGIN
  INSERT INTO units_fts(units_fts, rowid, text, acl) VALUES ('delete', old.id, old.text, old.acl);
  DELETE FROM unit_groups WHERE unit = old.id;
END;
CREATE TRIGGER units_au AFTER UPDATE OF text, acl ON units BEGIN
  INSERT INTO units_fts(units_fts, rowid, text, acl) VALUES ('delete', old.id, old.text, old.acl);
  INSERT INTO units_fts(rowid, text, acl) VALUES (new.id, new.text, new.acl);
END;

CREATE TABLE outbox (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  op TEXT NOT NULL CHECK (op IN ('add', 'remove')),
  plane TEXT NOT NULL,
  key INTEGER NOT NULL
);

CREATE TABLE docs (
  scope TEXT NOT NULL,
  doc_id TEXT NOT NULL,
  acl_owner TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (scope, doc_id, acl_owner)
);
CREATE INDEX docs_created_by ON docs(created_by);

CREATE TABLE principals (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  perms TEXT NOT NULL,
  tier TEXT NOT NULL,
  scopes TEXT NOT NULL,
  active_scope TEXT NOT NULL,
  groups TEXT NOT NULL,
  doc_quota INTEGER,
  created_at INTEGER NOT NULL,
  disabled INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  principal_id TEXT NOT NULL REFERENCES principals(id),
  key_hash TEXT NOT NULL UNIQUE,            -- sha256 hex; the key itself is never stored
  prefix TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER,
  revoked_at INTEGER,
  last_used_at INTEGER
);

CREATE TABLE audit_log (
  seq INTEGER PRIMARY KEY,
  prev_hash TEXT NOT NULL UNIQUE,           -- a fork is impossible (D-46)
  hash TEXT NOT NULL,
  at INTEGER NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  record TEXT NOT NULL                      -- canonical JSON; ids and hashes, never content
);

CREATE TABLE scope_gens (
  scope TEXT PRIMARY KEY,
  gen INTEGER NOT NULL
);

CREATE TABLE kv (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
"""

M002_USAGE = """
CREATE TABLE usage_daily (
  principal TEXT NOT NULL,
  day INTEGER NOT NULL,                     -- epoch day (UTC)
  route TEXT NOT NULL,
  requests INTEGER NOT NULL,
  cost_micro_usd INTEGER NOT NULL,
  PRIMARY KEY (principal, day, route)
) WITHOUT ROWID;
"""

M003_OBJECTS_JOBS = """
CREATE TABLE objects (
  key TEXT PRIMARY KEY,                     -- user-visible name; never a filesystem path
  sha256 TEXT NOT NULL,                     -- the blob is objects/<aa>/<bb>/<sha256>
  size INTEGER NOT NULL,
  content_type TEXT NOT NULL,
  scope TEXT NOT NULL,
  acl_owner TEXT NOT NULL,
  acl_groups TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX objects_sha ON objects(sha256);
ALTER TABLE units ADD COLUMN object_key TEXT;
CREATE INDEX units_object ON units(object_key);

CREATE TABLE jobs (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
  payload TEXT NOT NULL,
  principal TEXT NOT NULL,
  scope TEXT NOT NULL,
  acl_owner TEXT NOT NULL,
  acl_groups TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  lease_until INTEGER,
  lease_token TEXT,
  progress REAL NOT NULL DEFAULT 0,
  error TEXT,
  result TEXT,
  dedupe_key TEXT NOT NULL,                 -- scope, doc, owner and content of the request
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX jobs_state ON jobs(state, created_at);
CREATE INDEX jobs_dedupe ON jobs(dedupe_key);
"""

# A chunk of a longer Unit also carries its document's title line (``context``): it is embedded
# and BM25-indexed with the chunk, so later chunks of a document keep matching its title.
M004_CHUNK_CONTEXT = """
ALTER TABLE units ADD COLUMN context TEXT NOT NULL DEFAULT '';
DROP TRIGGER units_ai;
DROP TRIGGER units_ad;
DROP TRIGGER units_au;
DROP TABLE units_fts;
CREATE VIRTUAL TABLE units_fts USING fts5(
  text, context, acl, content='units', content_rowid='id', tokenize='porter unicode61'
);
INSERT INTO units_fts(units_fts) VALUES ('rebuild');
CREATE TRIGGER units_ai AFTER INSERT ON units BEGIN
  INSERT INTO units_fts(rowid, text, context, acl) VALUES (new.id, new.text, new.context, new.acl);
END;
CREATE TRIGGER units_ad AFTER DELETE ON units BEGIN
  INSERT INTO units_fts(units_fts, rowid, text, context, acl)
    VALUES ('delete', old.id, old.text, old.context, old.acl);
  DELETE FROM unit_groups WHERE unit = old.id;
END;
CREATE TRIGGER units_au AFTER UPDATE OF text, context, acl ON units BEGIN
  INSERT INTO units_fts(units_fts, rowid, text, context, acl)
    VALUES ('delete', old.id, old.text, old.context, old.acl);
  INSERT INTO units_fts(rowid, text, context, acl) VALUES (new.id, new.text, new.context, new.acl);
END;
"""

# Who holds a job's lease (JSON: instance id, kind, host identity, pid and its start time), so a
# restart can release the leases of processes that are provably dead (storage/sqlite/jobs.py).
M005_JOB_LEASE_OWNER = """
ALTER TABLE jobs ADD COLUMN lease_owner TEXT;
"""

# Who issued a key (the principal's name, or "operator"): a key an admin mints for someone else
# stays traceable to the admin in every audit record made with it.
M006_KEY_ISSUER = """
ALTER TABLE api_keys ADD COLUMN issued_by TEXT;
"""

# An object is identified by (key, owner), as a document is by (scope, doc_id, owner): another
# principal writing at a key makes its own object there and never replaces, blocks or reveals
# the owner's. A Unit keeps the blob it was derived from (object_sha), so replacing or deleting
# its object does not change what it cites, and blobs are collected by counting these rows.
M007_OBJECT_OWNER = """
CREATE TABLE objects_owned (
  key TEXT NOT NULL,
  acl_owner TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  size INTEGER NOT NULL,
  content_type TEXT NOT NULL,
  scope TEXT NOT NULL,
  acl_groups TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (key, acl_owner)
);
INSERT INTO objects_owned(key, acl_owner, sha256, size, content_type, scope, acl_groups,
  created_by, created_at)
  SELECT key, acl_owner, sha256, size, content_type, scope, acl_groups, created_by, created_at
  FROM objects;
DROP TABLE objects;
ALTER TABLE objects_owned RENAME TO objects;
CREATE INDEX objects_sha ON objects(sha256);
CREATE INDEX objects_owner ON objects(acl_owner);
ALTER TABLE units ADD COLUMN object_sha TEXT;
UPDATE units SET object_sha = (SELECT o.sha256 FROM objects o WHERE o.key = units.object_key)
  WHERE object_key IS NOT NULL;
CREATE INDEX units_object_sha ON units(object_sha);
"""

# Console sessions (console_sessions.py): a browser's cookie, stored hashed, tied to the key
# that signed in so a revoked key or a disabled principal ends it at the next request.
M008_CONSOLE_SESSIONS = """
CREATE TABLE console_sessions (
  token_hash TEXT PRIMARY KEY,              -- sha256 hex of the cookie value; never the value
  principal_id TEXT NOT NULL REFERENCES principals(id),
  key_id TEXT NOT NULL REFERENCES api_keys(id),
  created_at INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL               -- absolute end, whatever the activity
);
CREATE INDEX console_sessions_key ON console_sessions(key_id);
CREATE INDEX console_sessions_expiry ON console_sessions(expires_at);
"""

# A derived Unit's words (D-172): where each lies in the Unit's text and in the source (times for
# speech; page and box for page words), so a citation can narrow to the words it rests on. The
# rows live and die with their Unit (the trigger), keyed by the Unit's rowid.
M009_UNIT_WORDS = """
CREATE TABLE unit_words (
  unit INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  char_start INTEGER NOT NULL,
  char_end INTEGER NOT NULL,
  t_start_ms INTEGER, t_end_ms INTEGER,
  page INTEGER, x0 REAL, y0 REAL, x1 REAL, y1 REAL,
  conf REAL,
  PRIMARY KEY (unit, idx)
) WITHOUT ROWID;
CREATE TRIGGER unit_words_ad AFTER DELETE ON units BEGIN
  DELETE FROM unit_words WHERE unit = old.id;
END;
"""

# A video shot's keyframe (D-236): the JPEG the viewer shows beside the player, taken at
# derivation so a preview never decodes the video. Lives and dies with its Unit (the trigger).
M010_UNIT_KEYFRAMES = """
CREATE TABLE unit_keyframes (
  unit INTEGER PRIMARY KEY,
  mime TEXT NOT NULL,
  data BLOB NOT NULL
);
CREATE TRIGGER unit_keyframes_ad AFTER DELETE ON units BEGIN
  DELETE FROM unit_keyframes WHERE unit = old.id;
END;
"""

MIGRATIONS: list[tuple[str, str]] = [
    ("m001_initial", M001_INITIAL),
    ("m002_usage", M002_USAGE),
    ("m003_objects_jobs", M003_OBJECTS_JOBS),
    ("m004_chunk_context", M004_CHUNK_CONTEXT),
    ("m005_job_lease_owner", M005_JOB_LEASE_OWNER),
    ("m006_key_issuer", M006_KEY_ISSUER),
    ("m007_object_owner", M007_OBJECT_OWNER),
    ("m008_console_sessions", M008_CONSOLE_SESSIONS),
    ("m009_unit_words", M009_UNIT_WORDS),
    ("m010_unit_keyframes", M010_UNIT_KEYFRAMES),
]


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply every migration not yet recorded; returns the names applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER)"
    )
    done = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
    applied = []
    for name, sql in MIGRATIONS:
        if name in done:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process (a server and a `superchargedb worker` starting together) may
            # have applied it between our read of ``done`` and taking the write lock.
            if conn.execute("SELECT 1 FROM schema_migrations WHERE name = ?", (name,)).fetchone():
                conn.execute("COMMIT")
                continue
            for stmt in _statements(sql):
                conn.execute(stmt)
            conn.execute(
                "INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)",
                (name, int(time.time() * 1000)),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied


def _statements(sql: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines():
        line = line.split("--", 1)[0].rstrip() if "--" in line and "'" not in line else line
        if not line.strip():
            continue
        buf += line + "\n"
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
