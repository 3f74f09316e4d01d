"""The server stack's engines run locally: PostgreSQL + pgvector, SeaweedFS (S3) and Valkey,
started from their wheels on loopback under a data dir, for the tests and ``stack up``.

Nothing here is needed to serve: the backends under ``storage/`` connect by URL to whatever
PostgreSQL, S3 or Valkey the settings name; this package only starts local ones.
"""
