"""Tenants across clusters: the storage Protocols over a directory database and several
PostgreSQL clusters, each a whole ``PgBackend`` (D-277).

A request's statements go to the one cluster that holds its principal's tenants
(``placement.py``): every part the service takes from this backend resolves the cluster per
call, from the tenants the request acts for (``acting.routed_tenants``). Principals, keys,
console sessions, usage counts and the tenant directory live in the directory database
(``directory.py``): a key must be found before its tenant is known. Each cluster keeps its own
Units, objects (in its own blob store), jobs, outbox and audit chain; the directory keeps the
chain of the principal and key changes.

What the process does for itself (the outbox tail, the job workers' claims, the gauges, the
operator's checks) has no tenant: those parts go over every cluster, each call pinned to one
(``on``). A part reached with neither a tenant nor a pin is a bug, and fails loudly
(``UnroutedError``) instead of guessing a cluster.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, cast

from ... import acting
from ...readfilter import ReadFilter
from ..protocols import JobRecord, Lease, Outbox, UnitReader, VectorIndex
from ..protocols_reads import AuditEntry, ChainReport, JobListing, TenantCounts
from ..protocols_search import SearchStore, SearchView
from ..protocols_service import (
    KeyframeReader,
    Listing,
    ObjectCatalog,
    RouteUsage,
    ServiceTx,
    UnitUsage,
    WordReader,
)
from ..protocols_writes import BulkLoad, DocReader, QuotaLedger
from .backend import PgBackend
from .directory import DirectoryAuth, RoutedPrincipals
from .placement import Placement

if TYPE_CHECKING:
    from ..protocols import JobState
    from ..protocols_auth import SessionStore
    from ..protocols_service import ServerBackend

_PIN: ContextVar[str | None] = ContextVar("scdb_cluster_pin", default=None)


class UnroutedError(RuntimeError):
    """A tenant's part reached from a context that acts for no tenant and pins no cluster."""


class ClusterRouter:
    """One process's handle on a directory database and its clusters."""

    def __init__(
        self, directory: PgBackend, clusters: Mapping[str, PgBackend], placement: Placement
    ) -> None:
        self.directory = directory
        self.clusters = dict(clusters)
        self.names = list(clusters)
        self.placement = placement
        self.auth = DirectoryAuth(directory, self)
        self._claims = itertools.cycle(range(len(self.names)))
        self._claims_lock = threading.Lock()

    # -- routing -----------------------------------------------------------------------------
    @contextmanager
    def on(self, name: str) -> Iterator[PgBackend]:
        """A block whose parts go to cluster ``name`` (the process's own per-cluster work)."""
        token = _PIN.set(name)
        try:
            yield self.clusters[name]
        finally:
            _PIN.reset(token)

    def here_name(self) -> str:
        pinned = _PIN.get()
        if pinned is not None:
            return pinned
        tenants = acting.routed_tenants()
        if tenants is None:
            raise UnroutedError("a tenant's storage was reached with no tenant acting")
        return self.placement.cluster_of(tenants)

    def here(self) -> PgBackend:
        """The cluster of the current request (or of the pinned block)."""
        return self.clusters[self.here_name()]

    def routed(self) -> bool:
        """Whether the current context has a cluster (a request, a job, a pinned block)."""
        return _PIN.get() is not None or acting.routed_tenants() is not None

    def of_scopes(self, scopes: Collection[str]) -> str:
        """The cluster holding the tenants of ``scopes`` (placing them if new)."""
        return self.placement.cluster_of({acting.tenant_of(s) for s in scopes})

    def _part(self, attr: str) -> Any:
        return _Here(self, attr)

    # -- the Protocols' attributes -----------------------------------------------------------
    @property
    def units(self) -> UnitReader:
        return cast(UnitReader, self._part("units"))

    @property
    def vectors(self) -> VectorIndex:
        return cast(VectorIndex, _Vectors(self))

    @property
    def lexical(self) -> Any:
        return self._part("lexical")

    @property
    def audit(self) -> Any:
        return self._part("audit")

    @property
    def jobs(self) -> _Jobs:
        return _Jobs(self)

    @property
    def search(self) -> SearchStore:
        return _Search(self)

    @property
    def outbox(self) -> Outbox:
        return _Outbox(self)

    @property
    def kv(self) -> Any:
        return self._part("kv")

    @property
    def docs(self) -> DocReader:
        return cast(DocReader, self._part("docs"))

    @property
    def quota(self) -> QuotaLedger:
        return cast(QuotaLedger, self._part("quota"))

    @property
    def principals(self) -> RoutedPrincipals:
        return self.auth.principals

    @property
    def sessions(self) -> SessionStore:
        return self.auth.sessions

    @property
    def counts(self) -> _Counts:
        return _Counts(self)

    @property
    def job_views(self) -> JobListing:
        return cast(JobListing, self._part("job_views"))

    @property
    def audit_trail(self) -> _AuditTrail:
        return _AuditTrail(self)

    @property
    def bulk(self) -> BulkLoad:
        return cast(BulkLoad, self._part("bulk"))

    @property
    def listing(self) -> Listing:
        return cast(Listing, self._part("listing"))

    @property
    def usage(self) -> _Usage:
        return _Usage(self)

    @property
    def words(self) -> WordReader:
        return cast(WordReader, self._part("words"))

    @property
    def keyframes(self) -> KeyframeReader:
        return cast(KeyframeReader, self._part("keyframes"))

    @property
    def object_rows(self) -> ObjectCatalog:
        return cast(ObjectCatalog, self._part("object_rows"))

    @property
    def ready(self) -> bool:
        return all(b.ready for b in self.clusters.values())

    def sizes(self) -> Mapping[str, float]:
        out: dict[str, float] = {}
        for name, b in self.clusters.items():
            for k, v in b.sizes().items():
                out[f"{k}.{name}"] = v
        return out

    def doctor(self) -> str:
        """Each cluster's report, and ``ok`` when every one is."""
        reports = {name: json.loads(b.doctor()) for name, b in self.clusters.items()}
        return json.dumps(
            {"ok": all(r.get("ok", False) for r in reports.values()), "clusters": reports}
        )

    @contextmanager
    def ordered(self) -> Iterator[None]:
        yield  # as on one database: nothing to hold (PgBackend.ordered)

    def write(self) -> AbstractContextManager[ServiceTx]:
        """One transaction on the request's cluster."""
        return self.here().write()

    def close(self) -> None:
        for b in self.clusters.values():
            b.close()
        self.directory.close()


class _Here:
    """A part of whichever cluster the call is made for, resolved per attribute access."""

    def __init__(self, router: ClusterRouter, attr: str) -> None:
        self._router, self._attr = router, attr

    def __getattr__(self, name: str) -> Any:
        return getattr(getattr(self._router.here(), self._attr), name)


class _Vectors(_Here):
    def __init__(self, router: ClusterRouter) -> None:
        super().__init__(router, "vectors")

    def count(self, plane: str) -> int:
        r = self._router
        if r.routed():
            return r.here().vectors.count(plane)
        return sum(b.vectors.count(plane) for b in r.clusters.values())


class _Search:
    """``SearchStore``: each view on the request's cluster (its own derived lexical index)."""

    overlap_legs = True  # every cluster is PostgreSQL: a pooled connection per call

    def __init__(self, router: ClusterRouter) -> None:
        self.router = router

    def view(self, rf: ReadFilter) -> SearchView:
        return self.router.here().search.view(rf)

    def cache_stats(self) -> tuple[int, int]:
        stats = [b.search.cache_stats() for b in self.router.clusters.values()]
        return sum(s[0] for s in stats), sum(s[1] for s in stats)


class _Outbox:
    """A request applies its own cluster's outbox; the process's tail applies every one."""

    def __init__(self, router: ClusterRouter) -> None:
        self.router = router

    def _each(self) -> list[Outbox]:
        r = self.router
        return [r.here().outbox] if r.routed() else [b.outbox for b in r.clusters.values()]

    def head(self) -> int:
        return sum(o.head() for o in self._each())

    def applied(self) -> int:
        return sum(o.applied() for o in self._each())

    def replay(self) -> int:
        return sum(o.replay() for o in self._each())


class _Jobs:
    """``JobQueue``: a worker claims from the clusters in turn; a lease goes back to the
    cluster of its job's scope."""

    def __init__(self, router: ClusterRouter) -> None:
        self.router = router

    @property
    def lease_s(self) -> float:
        return next(iter(self.router.clusters.values())).jobs.lease_s

    def _of(self, lease: Lease) -> PgBackend:
        return self.router.clusters[self.router.of_scopes([lease.scope])]

    def claim(self) -> Lease | None:
        r = self.router
        if r.routed():
            return r.here().jobs.claim()
        with r._claims_lock:
            start = next(r._claims)
        for i in range(len(r.names)):
            lease = r.clusters[r.names[(start + i) % len(r.names)]].jobs.claim()
            if lease is not None:
                return lease
        return None

    def heartbeat(self, lease: Lease, progress: float) -> None:
        self._of(lease).jobs.heartbeat(lease, progress)

    def fail(self, lease: Lease, error: str, *, retry: bool) -> JobState:
        return self._of(lease).jobs.fail(lease, error, retry=retry)

    def get(self, job_id: str) -> JobRecord | None:
        r = self.router
        if r.routed():
            return r.here().jobs.get(job_id)
        for b in r.clusters.values():
            got = b.jobs.get(job_id)
            if got is not None:
                return got
        return None

    def depth(self) -> Mapping[str, int]:
        r = self.router
        each = [r.here()] if r.routed() else list(r.clusters.values())
        out: dict[str, int] = {}
        for b in each:
            for state, n in b.jobs.depth().items():
                out[state] = out.get(state, 0) + n
        return out


class _Counts(_Here):
    def __init__(self, router: ClusterRouter) -> None:
        super().__init__(router, "counts")

    def within(self, scopes: Sequence[str]) -> TenantCounts:
        return self._router.here().counts.within(scopes)

    def units_total(self) -> int:
        r = self._router
        if r.routed():
            return r.here().counts.units_total()
        return sum(b.counts.units_total() for b in r.clusters.values())


class _Usage:
    """A principal's Units are counted on its cluster; its requests in the directory, where
    the meter flushes them (the meter has no tenant to route by)."""

    def __init__(self, router: ClusterRouter) -> None:
        self.router = router

    def units_created(self, principal: str) -> UnitUsage:
        return self.router.here().usage.units_created(principal)

    def requests(self, principal: str, day_lo: int, day_hi: int) -> list[RouteUsage]:
        return self.router.directory.usage.requests(principal, day_lo, day_hi)


class _AuditTrail:
    """Every cluster's chain and the directory's, each verified on its own (D-278). A
    request sees the directory's and its own cluster's; the process (the operator) every one."""

    def __init__(self, router: ClusterRouter) -> None:
        self.router = router

    def _chains(self) -> list[tuple[str, PgBackend]]:
        r = self.router
        clusters = [(r.here_name(), r.here())] if r.routed() else list(r.clusters.items())
        return [("directory", r.directory), *clusters]

    def verify_chain(self) -> ChainReport:
        each = {name: b.audit_trail.verify_chain() for name, b in self._chains()}
        bad = [(name, rep) for name, rep in each.items() if not rep.ok]
        records = sum(rep.records for rep in each.values())
        if bad:
            name, rep = bad[0]
            return ChainReport(
                ok=False,
                records=records,
                first_bad_seq=rep.first_bad_seq,
                reason=f"chain {name}: {rep.reason}",
                chains=each,
            )
        return ChainReport(ok=True, records=records, chains=each)

    def tenant_records(self, tenants: Collection[str]) -> int:
        return sum(b.audit_trail.tenant_records(tenants) for _, b in self._chains())

    def entries(self) -> Iterator[AuditEntry]:
        """The directory's chain only when nothing routes (each chain is exported on its own:
        ``superchargedb audit export --chain``)."""
        r = self.router
        name = _PIN.get()
        b = r.clusters[name] if name is not None else r.directory
        yield from b.audit_trail.entries()


if TYPE_CHECKING:  # mypy checks the router against the seam
    _server: type[ServerBackend] = ClusterRouter
    _search: type[SearchStore] = _Search
    _outbox: type[Outbox] = _Outbox
