"""Input that slipped through (issue 16, class 8), on a real server.

The many single rejections are cases of tests/bad_input_cases.py (state unchanged, stable
codes); here: a Unit that names a plane but no modality gets the plane's default modality, and
the tier gate decides on that plane before per-Unit validation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import ALICE, CAROL, LiveServer, make_service, stored_value


@pytest.fixture(scope="module")
def server(tmp_path_factory, embedder) -> Iterator[tuple[Any, httpx.Client]]:
    from superchargedb.demo import seed_principals

    svc = make_service(tmp_path_factory.mktemp("input") / "data", embedder, job_workers=0)
    seed_principals(svc)
    with LiveServer(svc) as live, httpx.Client(base_url=live.url, timeout=60) as c:
        yield svc, c
    svc.close()


def units(svc: Any) -> int:
    return int(stored_value(svc, "SELECT COUNT(*) FROM units"))


def test_plane_without_modality_takes_the_planes_default(server):
    svc, c = server
    defaults = {"text": "text", "visual": "image", "audio": "utterance", "doc_visual": "scan"}
    for plane, modality in defaults.items():
        r = c.post(
            "/v1/ingest",
            json={"units": [{"text": f"A caption on the {plane} plane.", "plane": plane}]},
            headers=ALICE,
        )
        res = r.json()["results"][0]
        assert r.status_code == 200 and res["ok"], r.text
        got = c.get(f"/v1/units/{res['unit_id']}", headers=ALICE).json()
        assert (got["plane"], got["modality"]) == (plane, modality), got


def test_the_tier_gate_runs_on_the_named_plane_first(server):
    svc, c = server
    before = units(svc)
    for unit in (
        {"text": "A red bicycle.", "plane": "visual"},  # the spec's own shape
        {"text": "Hello there.", "plane": "audio", "locator": {"kind": "bbox"}},  # malformed too
        {"text": "A red bicycle.", "modality": "image", "mime": "image/png"},
    ):
        batch = {"units": [{"text": "A fine text Unit."}, unit]}
        r = c.post("/v1/ingest", json=batch, headers=CAROL)
        assert r.status_code == 402, (unit, r.text)
        assert r.json()["error"]["code"] == "upgrade_required", r.text
    assert units(svc) == before


def test_strict_types_and_text_checks(server):
    svc, c = server
    before = units(svc)
    for body in ({"q": "x", "top_k": True}, {"q": "x", "top_k": "3"}, {"q": "x", "rerank": 1}):
        r = c.post("/v1/search", json=body, headers=ALICE)
        assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error", body
    for unit in (
        {"text": "Looks like text.", "mime": "image/png"},
        {"text": "\x00"},
        {"text": " \x00\n\t\x00 "},
        {"text": "\u200b\ufeff"},
        {"text": "Fine words.", "locator": {"kind": "char_span", "start": False, "end": 3}},
    ):
        r = c.post("/v1/ingest", json={"units": [unit]}, headers=ALICE)
        res = r.json()["results"][0]
        assert r.status_code == 200 and res["error"]["code"] == "validation_error", (unit, r.text)
    assert units(svc) == before
