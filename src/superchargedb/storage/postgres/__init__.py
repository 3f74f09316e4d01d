"""The server stack's backend: the storage Protocols over PostgreSQL + pgvector (psycopg 3)."""
