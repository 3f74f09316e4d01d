"""FTS5's own ``porter unicode61`` tokens, for the derived lexical index (D-23, D-25).

The sparse index must see exactly the tokens FTS5 indexes, or BM25 quality and the FTS5
comparison drift. Rather than re-implementing unicode61 and FTS5's Porter stemmer, SQLite is the
oracle: ``unicode61`` classifies each character on its own as a token character or a separator
(no context), so a text can be cut at separators first and each piece tokenized separately
without changing the result. Pieces are cut at the ASCII separators *measured* from FTS5 when the
tokenizer starts (anything in doubt stays inside a piece); every distinct piece is tokenized once
by a tiny in-memory FTS5 table (read back through ``fts5vocab``) and cached. Real text has few
distinct pieces (words), so after warm-up tokenizing is a regex plus dict lookups.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence

TOKENIZE = "porter unicode61"
_MAX_CACHE = 2_000_000  # distinct pieces kept; the cache is cleared (not evicted) beyond it


class Fts5Tokenizer:
    """Thread-safe; ``tokens(text)`` equals the token sequence FTS5 indexes for ``text``."""

    def __init__(self, tokenize: str = TOKENIZE) -> None:
        self.tokenize = tokenize
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{tokenize}')")
        self._db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[str, ...]] = {}
        seps = "".join(c for c in map(chr, range(1, 128)) if self._is_separator(c))
        # A piece is a maximal run of characters that are not measured ASCII separators.
        self._piece = re.compile("[^" + re.escape(seps) + "]+") if seps else re.compile(".+")

    def _is_separator(self, c: str) -> bool:
        return self._run([f"ab{c}cd"])[0] == ("ab", "cd")

    def _run(self, pieces: Sequence[str]) -> list[tuple[str, ...]]:
        """FTS5's tokens of each piece (the oracle); called with the lock held or at init."""
        db = self._db
        db.execute("BEGIN")
        try:
            db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", enumerate(pieces, 1))
            out: list[list[tuple[int, str]]] = [[] for _ in pieces]
            for doc, off, term in db.execute("SELECT doc, offset, term FROM v"):
                out[doc - 1].append((off, term))
            db.execute("DELETE FROM t")
        finally:
            db.execute("COMMIT")
        return [tuple(t for _, t in sorted(toks)) for toks in out]

    def _resolve(self, pieces: Iterable[str]) -> None:
        miss = [p for p in dict.fromkeys(pieces) if p not in self._cache]
        if not miss:
            return
        with self._lock:
            miss = [p for p in miss if p not in self._cache]
            if len(self._cache) + len(miss) > _MAX_CACHE:
                self._cache = {}
            for i in range(0, len(miss), 5000):
                part = miss[i : i + 5000]
                self._cache.update(zip(part, self._run(part), strict=True))

    def pieces(self, text: str) -> list[str]:
        """``text`` cut at the measured separators (each piece tokenizes on its own)."""
        return self._piece.findall(text)

    def piece_tokens(self, pieces: Sequence[str]) -> list[tuple[str, ...]]:
        """FTS5's tokens of each piece (resolved through the cache)."""
        self._resolve(pieces)
        cache = self._cache
        return [cache[p] if p in cache else self._run_one(p) for p in pieces]

    def tokens(self, text: str) -> list[str]:
        pieces = self._piece.findall(text)
        cache = self._cache
        try:
            return [t for p in pieces for t in cache[p]]
        except KeyError:
            self._resolve(pieces)
            cache = self._cache
            return [t for p in pieces for t in cache.get(p) or self._run_one(p)]

    def _run_one(self, piece: str) -> tuple[str, ...]:
        with self._lock:
            return self._run([piece])[0]

    def tokens_many(self, texts: Sequence[str]) -> list[list[str]]:
        """``tokens`` of each text, resolving all unknown pieces in one pass (bulk builds)."""
        split = [self._piece.findall(t) for t in texts]
        self._resolve(p for ps in split for p in ps)
        cache = self._cache
        out = []
        for ps in split:
            try:
                out.append([t for p in ps for t in cache[p]])
            except KeyError:  # the cache was cleared mid-way: resolve this text alone
                out.append(self.tokens(" ".join(ps)))
        return out

    def cache_size(self) -> int:
        return len(self._cache)
