"""Commit positions (D-271): the text a client sends back is parsed exactly or refused, and a
database error is a 503 only when it means the node is gone or read-only (D-272)."""

from __future__ import annotations

import pytest

from superchargedb import positions


@pytest.mark.parametrize("text", ["0/3001108", "A/0", "FFFFFFFF/FFFFFFFF", "0/1b"])
def test_a_position_survives_its_round_trip(text: str) -> None:
    assert positions.render(positions.parse(text)).lower() == text.lower()


def test_positions_order_as_the_log_does() -> None:
    assert positions.parse("1/0") > positions.parse("0/FFFFFFFF") > positions.parse("0/10")


@pytest.mark.parametrize("text", ["", "3001108", "0/", "/1", "0/1/2", "g/1", "1 /2", "0x1/2"])
def test_a_malformed_position_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        positions.parse(text)


def test_writes_are_collected_only_inside_a_request() -> None:
    positions.wrote(5)  # no request: nowhere to go, nothing kept
    with positions.tracking(read_after=7) as written:
        assert positions.tracked() and positions.read_after() == 7
        positions.wrote(9)
        positions.wrote(3)
    assert written == [9, 3]
    assert not positions.tracked() and positions.read_after() is None


def test_only_a_lost_or_read_only_node_is_unavailable() -> None:
    psycopg = pytest.importorskip("psycopg")
    from superchargedb.storage.postgres.backend import unreachable

    gone = [
        psycopg.OperationalError("server closed the connection unexpectedly"),
        psycopg.errors.AdminShutdown(),
        psycopg.errors.ConnectionFailure(),
        psycopg.errors.ReadOnlySqlTransaction(),
    ]
    failed = [
        psycopg.errors.DiskFull(),
        psycopg.errors.SerializationFailure(),
        psycopg.errors.UniqueViolation(),
        psycopg.ProgrammingError("a bug of ours"),
    ]
    assert [unreachable(e) for e in gone] == [True] * len(gone)
    assert [unreachable(e) for e in failed] == [False] * len(failed)
