"""Scope grammar, the prefix rule and clamping, against an independent reference."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from superchargedb.auth.scopes import clamp, is_valid_scope, scope_within
from superchargedb.errors import ScopeForbiddenError

SEG = st.sampled_from(["acme", "alpha", "alphabet", "al_ha", "a", "b", "beta", "x.y", "a-b"])
SCOPE = st.lists(SEG, min_size=1, max_size=4).map("/".join)


def ref_within(inner: str, outer: str) -> bool:
    """Reference: split on '/', compare segment lists."""
    i, o = inner.split("/"), outer.split("/")
    return len(i) >= len(o) and i[: len(o)] == o


@given(SCOPE, SCOPE)
def test_scope_within_matches_reference(a, b):
    assert scope_within(a, b) == ref_within(a, b)


@pytest.mark.parametrize(
    "inner,outer,expected",
    [
        ("acme/alpha/backend", "acme/alpha", True),
        ("acme/alpha", "acme/alpha", True),
        ("acme/alphabet", "acme/alpha", False),
        ("acme/alphabet/x", "acme/alpha", False),
        ("acme/alpha", "acme/alpha/backend", False),
        ("acme/al_ha/x", "acme/alpha", False),
    ],
)
def test_scope_within_cases(inner, outer, expected):
    assert scope_within(inner, outer) is expected


@pytest.mark.parametrize("s", ["acme", "acme/alpha", "a/b/c/d/e/f/g/h", "x.y-z_1/0"])
def test_valid_scopes(s):
    assert is_valid_scope(s)


@pytest.mark.parametrize(
    "s",
    [
        "",
        "/",
        "acme/",
        "/acme",
        "acme//alpha",
        "Acme",
        "acme/../x",
        "acme/.",
        "a/b/c/d/e/f/g/h/i",
        "acme alpha",
        "аcme",
        "acme\\alpha",
        "acme/%2e%2e",
        "_acme",
        "-a",
        "a" * 64,
        None,
        5,
    ],
)
def test_invalid_scopes(s):
    assert not is_valid_scope(s)


def test_clamp():
    grants = ["acme/alpha", "acme/gamma/x"]
    assert clamp("acme/alpha/backend", grants) == ["acme/alpha/backend"]
    assert clamp("acme/alpha", grants) == ["acme/alpha"]
    assert clamp("acme", grants) == ["acme/alpha", "acme/gamma/x"]
    assert clamp("acme/gamma", grants) == ["acme/gamma/x"]
    with pytest.raises(ScopeForbiddenError):
        clamp("acme/beta", grants)
    with pytest.raises(ScopeForbiddenError):
        clamp("acme/alphabet", grants)
