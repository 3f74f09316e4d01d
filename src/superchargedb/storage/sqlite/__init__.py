"""The embedded backend: SQLite (WAL + FTS5) as the catalog, the derived sparse lexical
index, blobs as files (with the USearch vector index in ``storage/vectors.py``). The
only package where ``sqlite3`` is imported (an import-linter contract checks it)."""
