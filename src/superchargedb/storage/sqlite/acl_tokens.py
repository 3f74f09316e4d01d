"""The visibility rule as FTS tokens: what the lexical index's ``acl`` column holds (D-24).

unicode61 would split a scope on ``/``, ``.`` and ``-``, so each scope, owner and group becomes
one hashed token; a Unit carries its scope's every ancestor, so a query for ``a/b`` matches a
Unit in ``a/b/c`` by one token.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from ...readfilter import ancestors


def scope_token(scope: str) -> str:
    return "s" + hashlib.sha256(b"scope\0" + scope.encode()).hexdigest()[:20]


def owner_token(owner: str) -> str:
    return "o" + hashlib.sha256(b"owner\0" + owner.encode()).hexdigest()[:20]


def group_token(group: str) -> str:
    return "g" + hashlib.sha256(b"group\0" + group.encode()).hexdigest()[:20]


def acl_tokens(scope: str, owner: str, groups: Iterable[str]) -> str:
    """The text of the FTS ``acl`` column for a Unit."""
    toks = [scope_token(a) for a in ancestors(scope)]
    toks.append(owner_token(owner))
    toks.extend(group_token(g) for g in sorted(set(groups)))
    return " ".join(toks)
