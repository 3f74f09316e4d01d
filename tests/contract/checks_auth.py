"""The principals', keys' and sessions' storage contract (``storage/protocols_auth.py``).

Run on every backend kind by ``test_contract_auth.py`` (its teeth are tested there too). The
isolation-relevant question, ``reads_beyond``, is checked against ``readfilter.may_read`` on the
isolation oracle's world; lookups by a digest must match it exactly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from contract.backends import Kind
from contract.checks import WORLD, fill
from superchargedb.errors import ConflictError
from superchargedb.readfilter import may_read
from superchargedb.storage.protocols_auth import PrincipalState
from superchargedb.types import Principal

Factory = Callable[..., Kind]


def person(
    name: str,
    scopes: tuple[str, ...],
    groups: set[str] = frozenset(),  # type: ignore[assignment]
    perms: tuple[str, ...] = ("read",),
    tier: str = "pro",
    quota: int | None = None,
) -> Principal:
    return Principal(
        id=f"p-{name}",
        name=name,
        perms=frozenset(perms),
        tier=tier,
        scopes=tuple(sorted(scopes)),
        active_scope=sorted(scopes)[0],
        groups=frozenset(groups),
        doc_quota=quota,
    )


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def same(a: Principal, b: Principal) -> bool:
    """Field for field (``==`` leaves out the key's id and issuer)."""
    return a == b and (a.key_id, a.key_issuer) == (b.key_id, b.key_issuer)


def check_principals_round_trip(kind: Factory, tmp: Path) -> None:
    """A stored principal reads back field for field; a taken name is a 409 with nothing kept;
    an update replaces the fields (not the name); reads in a write see its own changes; the
    enabled admins are exactly the enabled principals holding ``admin``."""
    b = kind().open(tmp / "store")
    try:
        alice = person("alice", ("acme/alpha", "acme/beta"), {"eng", "ops"}, ("read", "write"))
        bob = person("bob", ("acme",), perms=("read", "admin"), tier="enterprise", quota=7)
        with b.write() as tx:
            tx.principals.insert(bob, 2_000)
            tx.principals.insert(alice, 1_000)
            assert tx.principals.named("alice") is not None  # the write's own change
        got = b.principals.named("alice")
        assert got == PrincipalState(alice, False) and same(got.principal, alice)
        assert b.principals.named("bob") == PrincipalState(bob, False)
        assert b.principals.named("nobody") is None
        assert b.principals.named("Alice") is None  # exact, not case-folded
        assert [s.principal.name for s in b.principals.every()] == ["alice", "bob"]
        with pytest.raises(ConflictError), b.write() as tx:
            tx.principals.insert(person("carol", ("acme",)), 3_000)
            tx.principals.insert(replace(alice, id="p-alice-2"), 3_000)
        assert b.principals.named("carol") is None  # the whole write rolled back
        assert [s.principal.name for s in b.principals.every()] == ["alice", "bob"]
        changed = replace(
            alice,
            name="renamed",
            perms=frozenset({"read"}),
            tier="free",
            scopes=("acme/beta",),
            active_scope="acme/beta",
            groups=frozenset({"ops"}),
            doc_quota=3,
        )
        with b.write() as tx:
            tx.principals.update(changed, disabled=True)
        got = b.principals.named("alice")
        assert got is not None and got.disabled
        assert got.principal == replace(changed, name="alice")
        assert b.principals.named("renamed") is None
        admins = [
            person("adm1", ("acme",), perms=("admin",)),
            person("adm2", ("beta",), perms=("read", "admin")),
            person("adm3", ("gamma",), perms=("admin", "write")),
        ]
        with b.write() as tx:
            for i, a in enumerate(admins):
                tx.principals.insert(a, 4_000 + i)
            tx.principals.update(admins[1], disabled=True)
        got_admins = b.principals.enabled_admins(excluding="p-adm1")
        assert sorted(p.name for p in got_admins) == ["adm3", "bob"]
        assert {p.name: p for p in got_admins}["adm3"] == admins[2]
        assert sorted(p.name for p in b.principals.enabled_admins(excluding="p-x")) == [
            "adm1",
            "adm3",
            "bob",
        ]
    finally:
        b.close()


def _key(tx: Any, kid: str, pid: str, raw: str, at: int, **kw: Any) -> None:
    tx.principals.add_key(
        kid,
        pid,
        digest(raw),
        raw[:12],
        created_at=at,
        expires_at=kw.get("expires_at"),
        issued_by=kw.get("issued_by"),
    )


def check_keys_by_hash_and_lifecycle(kind: Factory, tmp: Path) -> None:
    """A key is found by its exact digest only, with its holder and its state; listing is per
    principal, oldest first; revoking keeps the first date; the principal's disabling shows."""
    b = kind().open(tmp / "store")
    try:
        alice = person("alice", ("acme/alpha",), {"eng"})
        bob = person("bob", ("acme/beta",))
        with b.write() as tx:
            tx.principals.insert(alice, 1)
            tx.principals.insert(bob, 1)
            _key(tx, "k-2", alice.id, "aegis_sk_two", 2_000, expires_at=9_000)
            _key(tx, "k-1", alice.id, "aegis_sk_one", 1_000, issued_by="operator")
            _key(tx, "k-b", bob.id, "aegis_sk_bob", 1_500, issued_by="alice")
        found = b.principals.by_key_hash(digest("aegis_sk_one"))
        assert found is not None
        assert same(found.principal, replace(alice, key_id="k-1", key_issuer="operator"))
        assert found.key_hash == digest("aegis_sk_one")
        assert (found.expires_at, found.revoked_at, found.disabled) == (None, None, False)
        found = b.principals.by_key_hash(digest("aegis_sk_bob"))
        assert found is not None
        assert same(found.principal, replace(bob, key_id="k-b", key_issuer="alice"))
        h = digest("aegis_sk_one")
        for near in (h[:-1], h[:32], h.upper(), h[:-1] + ("0" if h[-1] != "0" else "1"), ""):
            assert b.principals.by_key_hash(near) is None, near
        keys = b.principals.keys_of(alice.id)
        assert [k.key_id for k in keys] == ["k-1", "k-2"]
        assert {k.principal_name for k in keys} == {"alice"}
        assert [(k.prefix, k.created_at, k.expires_at, k.issued_by) for k in keys] == [
            ("aegis_sk_one", 1_000, None, "operator"),
            ("aegis_sk_two", 2_000, 9_000, None),
        ]
        assert [k.key_id for k in b.principals.keys_of(bob.id)] == ["k-b"]
        assert b.principals.keys_of("p-nobody") == []
        k = b.principals.key("k-b")
        assert k is not None and (k.principal_id, k.principal_name) == (bob.id, "bob")
        assert b.principals.key("k-missing") is None
        with b.write() as tx:
            tx.principals.revoke_key("k-1", 3_000)
            tx.principals.set_key_expiry("k-2", 4_500)
        with b.write() as tx:
            tx.principals.revoke_key("k-1", 5_000)  # already revoked: the first date stays
        assert b.principals.key("k-1").revoked_at == 3_000  # type: ignore[union-attr]
        assert b.principals.key("k-2").expires_at == 4_500  # type: ignore[union-attr]
        assert b.principals.key("k-b").revoked_at is None  # type: ignore[union-attr]
        assert b.principals.by_key_hash(h).revoked_at == 3_000  # type: ignore[union-attr]
        with b.write() as tx:
            tx.principals.update(alice, disabled=True)
        found = b.principals.by_key_hash(digest("aegis_sk_two"))
        assert found is not None and found.disabled and found.expires_at == 4_500
        assert not b.principals.by_key_hash(digest("aegis_sk_bob")).disabled  # type: ignore[union-attr]
    finally:
        b.close()


# Targets and actors over the isolation oracle's world: the '/' boundary and look-alikes, a
# parent scope, owners with and without groups, shared groups in and out of the other's scopes.
PEOPLE = [
    person("alice", ("acme/alpha",), {"eng"}),
    person("bob", ("acme/alphabet",), {"ops"}),
    person("bob", ("acme",), {"eng"}),  # the owner of most Units, reading the whole tenant
    person("carol", ("acme/alpha",)),
    person("dave", ("acme/alpha",)),
    person("erin", ("acme/alpha/x", "acme"), {"eng", "ops"}),
    person("frank", ("acme/alpha/x",), {"eng"}),
    person("gina", ("acme/alpha-b", "acme/alpha0"), {"eng"}),
    person("hal", ("beta",), {"eng"}),
    person("ivy", ("acme/alpha", "beta/alpha"), {"eng"}),
]


def _reads(p: Principal, scope: str, owner: str, groups: tuple[str, ...]) -> bool:
    return may_read(p.scopes, p.name, p.groups, scope, owner, groups)


def _oracle(target: Principal, actor: Principal | None) -> bool:
    return any(
        _reads(target, scope, owner, groups)
        and not (actor is not None and _reads(actor, scope, owner, groups))
        for _, scope, owner, groups in WORLD
    )


def check_reads_beyond_follows_the_rule(kind: Factory, tmp: Path) -> None:
    """``reads_beyond(target, actor)`` is True exactly when a Unit the target reads is not
    readable by the actor, for every pair (and for an actor that reads nothing)."""
    b = kind().open(tmp / "store")
    try:
        fill(b)
        answers: dict[bool, int] = {True: 0, False: 0}
        group_only = 0
        for target in PEOPLE:
            for actor in [*PEOPLE, None]:
                want = _oracle(target, actor)
                got = b.principals.reads_beyond(target, actor)
                assert got == want, (target.name, target.scopes, actor and actor.name)
                answers[want] += 1
                owner_only = replace(target, groups=frozenset())
                if want and not _oracle(owner_only, actor):
                    group_only += 1  # only a Unit shared into the target's groups is beyond
        # Not vacuous: both answers occur, and some pairs hinge on the group leg alone.
        assert answers[True] >= 10 and answers[False] >= 10, answers
        assert group_only >= 5, group_only
        # An empty store: nobody reads beyond anybody.
        e = kind().open(tmp / "empty")
        try:
            assert not e.principals.reads_beyond(PEOPLE[5], None)
        finally:
            e.close()
    finally:
        b.close()


def check_sessions_follow_their_key_and_principal(kind: Factory, tmp: Path) -> None:
    """A session is found by its exact digest, from any process on the store, with its key's
    and principal's current state; only its owner ends it; a new one sweeps the expired."""
    k = kind()
    b = k.open(tmp / "store")
    try:
        alice = person("alice", ("acme/alpha",), {"eng"})
        with b.write() as tx:
            tx.principals.insert(alice, 1)
            tx.principals.insert(person("bob", ("acme",)), 1)
            _key(tx, "k-1", alice.id, "aegis_sk_one", 1_000, expires_at=90_000, issued_by="op")
        s1 = digest("scs_one")
        b.sessions.start(s1, alice.id, "k-1", at=10_000, expires_at=50_000)
        got = b.sessions.find(s1)
        assert got is not None
        assert same(got.principal, replace(alice, key_id="k-1", key_issuer="op"))
        assert (got.last_seen_at, got.expires_at, got.key_expires_at) == (10_000, 50_000, 90_000)
        assert (got.key_revoked_at, got.disabled) == (None, False)
        for near in (s1[:-1], s1.upper(), digest("scs_two")):
            assert b.sessions.find(near) is None
        peer = k.peer(b)
        try:
            seen = peer.sessions.find(s1)  # another process on the same store accepts it
            assert seen is not None and seen.principal == alice
        finally:
            k.close_peer(peer)
        b.sessions.touch(s1, 12_345)
        assert b.sessions.find(s1).last_seen_at == 12_345  # type: ignore[union-attr]
        with b.write() as tx:
            tx.principals.revoke_key("k-1", 20_000)
        assert b.sessions.find(s1).key_revoked_at == 20_000  # type: ignore[union-attr]
        with b.write() as tx:
            tx.principals.update(alice, disabled=True)
        assert b.sessions.find(s1).disabled  # type: ignore[union-attr]
        assert not b.sessions.end(s1, "p-bob")  # not bob's
        assert b.sessions.find(s1) is not None
        assert not b.sessions.end(digest("scs_missing"), alice.id)
        assert b.sessions.end(s1, alice.id)
        assert b.sessions.find(s1) is None
        assert not b.sessions.end(s1, alice.id)
        # Starting a session sweeps those whose absolute end has passed, and only those.
        s2, s3, s4 = digest("scs_2"), digest("scs_3"), digest("scs_4")
        b.sessions.start(s2, alice.id, "k-1", at=60_000, expires_at=61_000)
        b.sessions.start(s3, alice.id, "k-1", at=60_000, expires_at=70_000)
        b.sessions.start(s4, alice.id, "k-1", at=61_000, expires_at=80_000)
        assert b.sessions.find(s2) is None
        assert b.sessions.find(s3) is not None and b.sessions.find(s4) is not None
    finally:
        b.close()


def check_principal_change_commits_with_its_audit_record(kind: Factory, tmp: Path) -> None:
    """A principal, its key and the audit record commit together or not at all."""
    b = kind().open(tmp / "store")
    try:
        base = b.audit.verify().records
        alice = person("alice", ("acme/alpha",))
        with pytest.raises(RuntimeError), b.write() as tx:
            tx.principals.insert(alice, 1)
            _key(tx, "k-1", alice.id, "aegis_sk_one", 1)
            tx.audit.append("operator", "principal.create", {"name": "alice"})
            raise RuntimeError("the request failed after its writes")
        assert b.principals.named("alice") is None
        assert b.principals.by_key_hash(digest("aegis_sk_one")) is None
        assert b.audit.verify().records == base
        with b.write() as tx:
            tx.principals.insert(alice, 1)
            _key(tx, "k-1", alice.id, "aegis_sk_one", 1)
            tx.audit.append("operator", "principal.create", {"name": "alice"})
        assert b.principals.named("alice") is not None
        assert b.principals.by_key_hash(digest("aegis_sk_one")) is not None
        report = b.audit.verify()
        assert report.ok and report.records == base + 1
    finally:
        b.close()


CHECKS = {
    f.__name__: f
    for f in (
        check_principals_round_trip,
        check_keys_by_hash_and_lifecycle,
        check_reads_beyond_follows_the_rule,
        check_sessions_follow_their_key_and_principal,
        check_principal_change_commits_with_its_audit_record,
    )
}
