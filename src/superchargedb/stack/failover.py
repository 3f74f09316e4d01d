"""``superchargedb stack failover``: the standby becomes the primary, the old primary is fenced
(D-272).

For a stack started with ``stack up --standby``. In order: the old primary is fenced first (its
postmaster killed if it still runs, its data dir marked to come back only as a standby of the
new primary, ``standby.py``), so that no write can land on it once the standby is promoted;
then the standby is promoted and ``stack/primary`` records which node dir is the primary now.
The API processes and workers need no restart: their ``SCDB_DATABASE_URL`` names both nodes
with ``target_session_attrs=read-write``, so the pool's next connection finds the promoted one;
requests in between answer 503 with Retry-After. Until a new standby is added (the next ``stack
up --standby`` copies one from the new primary) commits wait for no standby: a loss of this
node loses what it acknowledged since.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from . import standby as standby_mod
from .up import StackError, _write_state, read_state, stack_dir


def failover(data: Path, *, echo: Callable[[str], None] = print) -> float:
    """Promote the stack's standby and fence its primary; returns the seconds it took."""
    data = Path(data).resolve()
    state = read_state(data)
    if state is None:
        raise StackError("no stack is running for this data dir")
    if "standby" not in state.nodes or "standby" not in state.processes:
        raise StackError("this stack has no standby to fail over to (start it with --standby)")
    root = stack_dir(data)
    old, new = state.nodes["primary"], state.nodes["standby"]
    password = (root / new["dir"] / "password").read_text().strip()
    t0 = time.monotonic()
    standby_mod.fence(root / old["dir"], int(new["port"]), password)
    echo(f"fenced the old primary ({old['dir']}, port {old['port']})")
    standby_mod.promote(standby_mod.node_url(int(new["port"]), password))
    took = time.monotonic() - t0
    (root / standby_mod.PRIMARY_FILE).write_text(new["dir"] + "\n")
    echo(f"promoted {new['dir']} (port {new['port']}) to primary in {took:.2f} s")
    state.nodes = {"primary": new, "fenced": old}
    # The promoted node is the one `stack down` stops as PostgreSQL now; the fenced one is dead.
    state.processes["postgres"] = state.processes.pop("standby")
    state.logs["postgres"] = state.logs.pop("standby", state.logs.get("postgres", ""))
    _write_state(state)
    return took
