"""Where a statement runs: the open write transaction's cursor, or a pool connection.

The readers and writers beside the Units (documents, quota, principals, ...) serve both inside
a write (their reads see its own changes, and a check and the write it guards are one
transaction, D-18) and outside one (each call a pooled autocommit statement). They take a
:class:`Sql` and never care which.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import psycopg

from ...errors import ValidationError

Row = tuple[Any, ...]
Conn = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]


class Sql(Protocol):
    def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Run a statement that returns rows; all of them."""
        ...

    def do(self, sql: str, params: Sequence[object] = ()) -> int:
        """Run a statement for its effect (streamed in a pipelined write); rows it touched, or
        -1 where a pipeline has not told yet."""
        ...


class OnCursor:
    """Inside the caller's open transaction."""

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        self.cur = cur

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        return self.cur.execute(sql.encode(), params).fetchall()

    def do(self, sql: str, params: Sequence[object] = ()) -> int:
        return self.cur.execute(sql.encode(), params).rowcount


class OnPool:
    """Each call one autocommit statement on a pooled connection."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        with self.conn() as c:
            return c.execute(sql.encode(), params).fetchall()

    def do(self, sql: str, params: Sequence[object] = ()) -> int:
        with self.conn() as c:
            return c.execute(sql.encode(), params).rowcount


def refuse_nul(what: str, *values: object) -> None:
    """PostgreSQL text cannot hold a NUL byte (D-207, D-244): a value to be stored with one is
    a 422 before anything is written, never a driver error."""
    for v in values:
        items = v if isinstance(v, list | tuple | frozenset | set) else (v,)
        if any(isinstance(x, str) and "\0" in x for x in items):
            raise ValidationError(f"{what} may not contain a NUL byte")
