"""The tenant directory: which cluster holds each tenant (a scope root), D-277.

Kept in the directory database (``tenant_clusters``), beside the principals and keys, because a
request's cluster is known only once its key is. A tenant is placed once and never moves (no
data is moved between clusters): the first principal whose scopes name it places it on the
cluster of the tenants it already shares a principal with, else on the cluster holding the
fewest tenants; the operator may place one first (``superchargedb tenants place``). Because a
placement never changes, each process caches what it has read for good.

One principal's tenants lie in one cluster: its quota, its usage of Units and a tenant admin's
"reads beyond" check count its rows in one database, and its requests touch one cluster. A
principal whose scopes would span two clusters is refused when it is made or changed
(``ClusterSpanError``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Mapping, Sequence

from ... import acting
from ...errors import ClusterSpanError, ValidationError
from .sql import Conn

# Placements change rarely and race only with each other: one lock orders them.
_PLACE_LOCK = 0x5CDB_7E4A


def choose(tenant_counts: Mapping[str, int], clusters: Sequence[str]) -> str:
    """The cluster a tenant with no placed peer goes to: the one holding the fewest tenants,
    the first listed on a tie."""
    return min(clusters, key=lambda c: (tenant_counts.get(c, 0), clusters.index(c)))


class Placement:
    """``conn``: connections to the directory database."""

    def __init__(self, conn: Conn, clusters: Sequence[str]) -> None:
        self.conn = conn
        self.clusters = list(clusters)
        self._known: dict[str, str] = {}
        self._lock = threading.Lock()

    def cluster_of(self, tenants: Collection[str]) -> str:
        """The one cluster holding ``tenants`` (placing those not placed yet); raises
        ``ClusterSpanError`` when they lie in more than one."""
        if not tenants:
            raise ValidationError("no tenant to route to")
        with self._lock:
            found = {t: self._known[t] for t in tenants if t in self._known}
        if len(found) < len(tenants):
            found = self._place(sorted(tenants))
        return _one(found)

    def known(self) -> dict[str, str]:
        """Every placement, read from the directory (``superchargedb tenants list``)."""
        with acting.as_process(), self.conn() as c:
            rows = c.execute(
                "SELECT tenant, cluster FROM tenant_clusters ORDER BY tenant"
            ).fetchall()
        got = {str(t): str(k) for t, k in rows}
        with self._lock:
            self._known.update(got)
        return got

    def place(self, tenant: str, cluster: str) -> None:
        """Put a tenant on a cluster before anything of it exists; a tenant already placed
        elsewhere is refused (its data would stay behind)."""
        if cluster not in self.clusters:
            raise ValidationError(f"no cluster {cluster!r} (clusters: {', '.join(self.clusters)})")
        with acting.as_process(), self.conn() as c, c.transaction():
            c.execute("SELECT pg_advisory_xact_lock(%s)", (_PLACE_LOCK,))
            row = c.execute(
                "SELECT cluster FROM tenant_clusters WHERE tenant = %s", (tenant,)
            ).fetchone()
            if row is not None and str(row[0]) != cluster:
                raise ValidationError(
                    f"tenant {tenant!r} is on cluster {row[0]!r}: moving a tenant is not built"
                )
            c.execute(
                "INSERT INTO tenant_clusters (tenant, cluster, placed_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (tenant) DO NOTHING",
                (tenant, cluster, int(time.time() * 1000)),
            )
        with self._lock:
            self._known[tenant] = cluster

    def _place(self, tenants: list[str]) -> dict[str, str]:
        """Read the tenants' placements and place the missing ones, in one transaction under
        the placement lock (two processes placing the same tenant agree)."""
        with acting.as_process(), self.conn() as c, c.transaction():
            c.execute("SELECT pg_advisory_xact_lock(%s)", (_PLACE_LOCK,))
            rows = c.execute(
                "SELECT tenant, cluster FROM tenant_clusters WHERE tenant = ANY(%s)", (tenants,)
            ).fetchall()
            found = {str(t): str(k) for t, k in rows}
            missing = [t for t in tenants if t not in found]
            if missing:
                if found:
                    target = _one(found)  # the tenants it already shares a principal with
                else:
                    counts = c.execute(
                        "SELECT cluster, count(*) FROM tenant_clusters GROUP BY cluster"
                    ).fetchall()
                    target = choose({str(k): int(n) for k, n in counts}, self.clusters)
                now = int(time.time() * 1000)
                for t in missing:
                    c.execute(
                        "INSERT INTO tenant_clusters (tenant, cluster, placed_at)"
                        " VALUES (%s, %s, %s)",
                        (t, target, now),
                    )
                    found[t] = target
        with self._lock:
            self._known.update(found)
        return found


def _one(found: Mapping[str, str]) -> str:
    clusters = sorted(set(found.values()))
    if len(clusters) == 1:
        return clusters[0]
    where = ", ".join(f"{t}: {k}" for t, k in sorted(found.items()))
    raise ClusterSpanError(
        f"these tenants lie in different clusters ({where}); one principal's scopes must lie"
        " in one cluster"
    )
