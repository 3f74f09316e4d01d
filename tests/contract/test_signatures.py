"""Nothing backend-shaped crosses the storage seam: every method of every Protocol in
``storage/protocols*.py`` takes and returns plain domain types (no SQL text or connection, no
cursor or row, no rowid, no ``Any``/``dict[str, Any]``), and every record is a frozen
dataclass of such types."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing

from superchargedb.storage import (
    protocols,
    protocols_auth,
    protocols_reads,
    protocols_search,
    protocols_service,
    protocols_writes,
)

# Every module of storage Protocols (a new concept's module is added here).
MODULES = (
    protocols,
    protocols_search,
    protocols_reads,
    protocols_auth,
    protocols_writes,
    protocols_service,
)

FORBIDDEN = re.compile(r"\b(sqlite3|Connection|Cursor|Row|Any|rowid|sql|SQL)\b|dict\[str, ")
# The one array type: a float32 vector (its shape parameter is typing.Any in numpy's stubs).
VECTOR = str(protocols.Vector)


def _classes() -> list[type]:
    return [
        obj
        for mod in MODULES
        for _, obj in inspect.getmembers(mod, inspect.isclass)
        if obj.__module__ == mod.__name__
    ]


def _protocols() -> list[type]:
    return [c for c in _classes() if getattr(c, "_is_protocol", False)]


def _records() -> list[type]:
    return [c for c in _classes() if dataclasses.is_dataclass(c)]


def _tuples() -> list[type]:
    """Records kept as NamedTuples where a search builds hundreds of them."""
    return [c for c in _classes() if issubclass(c, tuple) and hasattr(c, "_fields")]


def _ns(cls: type) -> dict[str, object]:
    """Names as the class's module sees them (inherited members: as their own module does; the
    modules refer to each other's types under TYPE_CHECKING)."""
    return {k: v for mod in (*MODULES, inspect.getmodule(cls)) for k, v in vars(mod).items()}


def _bad(text: str) -> list[str]:
    return FORBIDDEN.findall(text.replace(VECTOR, "Vector"))


def test_the_seam_has_the_concepts() -> None:
    names = {p.__name__ for p in _protocols()}
    assert {
        "Backend",
        "UnitReader",
        "UnitWriter",
        "VectorIndex",
        "LexicalIndex",
        "AuditLog",
        "AuditWriter",
        "JobQueue",
        "JobWriter",
        "Outbox",
        "ObjectStore",
        "KV",
        "KVWriter",
        "WriteTx",
        "SearchStore",
        "SearchView",
        "PrincipalReader",
        "PrincipalWriter",
        "AuthTx",
        "SessionStore",
        "AuthStore",
        "DocWriter",
        "QuotaLedger",
        "WriteStore",
    } <= names


def test_protocol_signatures_are_plain() -> None:
    checked = 0
    for proto in _protocols():
        for name, fn in inspect.getmembers(proto):
            if name.startswith("_"):
                continue
            target = fn.fget if isinstance(fn, property) else fn
            if not callable(target):
                continue
            hints = typing.get_type_hints(target, _ns(proto))
            for arg, hint in hints.items():
                text = str(hint)
                assert not _bad(text), f"{proto.__name__}.{name}({arg}: {text})"
                assert arg.lower() not in ("sql", "conn", "cursor", "rowid", "row"), (
                    f"{proto.__name__}.{name} takes {arg}"
                )
            checked += 1
    assert checked >= 25  # every method of the ~14 Protocols, not a vacuous pass


def test_records_are_frozen_and_plain() -> None:
    records = _records()
    assert len(records) >= 6
    for rec in records:
        assert rec.__dataclass_params__.frozen, rec.__name__  # type: ignore[attr-defined]
        for f in dataclasses.fields(rec):
            text = str(typing.get_type_hints(rec, _ns(rec))[f.name])
            assert not _bad(text), f"{rec.__name__}.{f.name}: {text}"
            assert f.name.lower() not in ("rowid", "id", "key"), f"{rec.__name__}.{f.name}"
    tuples = _tuples()
    assert tuples, "the NamedTuple records are inspected too"
    for rec in tuples:
        for name, hint in typing.get_type_hints(rec, _ns(rec)).items():
            assert not _bad(str(hint)), f"{rec.__name__}.{name}: {hint}"
            assert name.lower() not in ("rowid", "id", "key"), f"{rec.__name__}.{name}"


def test_the_check_sees_a_leak() -> None:
    """The inspection is not vacuous: a Protocol taking a connection is flagged."""

    class Leaky(typing.Protocol):
        def get(self, conn: sqlite3.Connection, unit_id: str) -> dict[str, typing.Any]: ...  # noqa: F821

    import sqlite3

    hints = typing.get_type_hints(Leaky.get, {"sqlite3": sqlite3, "typing": typing})
    assert any(_bad(str(h)) for h in hints.values())


def test_architecture_lists_every_protocol() -> None:
    """docs/architecture.md names every Protocol of the seam (a new one is documented)."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    missing = [p.__name__ for p in _protocols() if f"`{p.__name__}`" not in doc]
    assert not missing, f"undocumented storage Protocols: {missing}"
