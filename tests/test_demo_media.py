"""The demo's media: the keynote video and the runbook PDF, generated and ingested as jobs."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from conftest import make_service, stored_rows, stored_value
from superchargedb.demo import seed
from superchargedb.demo.media import KEYNOTE_KEY, RUNBOOK_KEY, UNIT_SCOPE, seed_media
from superchargedb.models.embedder import Embedder

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("espeak-ng", "ffmpeg", "ffprobe")),
    reason="needs espeak-ng and ffmpeg (scripts/setup.sh installs them)",
)
QUESTION = "Where does the Q3 keynote demo the failover, and how fast was the cutover?"


@pytest.mark.slow  # ASR and shot detection of a 20 s video: ~15 s on a quiet 2-core machine
def test_demo_media_answer_the_spec_question(tmp_path: Path, embedder: Embedder) -> None:
    svc = make_service(tmp_path / "data", embedder)
    try:
        seed(svc)
        out = seed_media(svc, "aegis_sk_alice")
        assert set(out["jobs"]) == {KEYNOTE_KEY, RUNBOOK_KEY}
        deadline = time.time() + 240
        for jid in out["jobs"].values():
            sql = "SELECT state FROM jobs WHERE id = ?"
            while (state := stored_value(svc, sql, (jid,))) not in ("done", "failed"):
                assert time.time() < deadline, "demo jobs did not finish"
                time.sleep(0.3)
            assert state == "done"
        rows = stored_rows(
            svc,
            "SELECT scope, loc_kind, source_uri FROM units WHERE source_uri LIKE ? OR source_uri"
            " LIKE ?",
            (KEYNOTE_KEY + "%", RUNBOOK_KEY + "%"),
        )
        assert {r[0] for r in rows} == {UNIT_SCOPE}  # the keynote's object lives elsewhere
        kinds = {r[1] for r in rows}
        assert {"time_range", "bbox"} <= kinds
        # The PDF is its own document: the Markdown runbook is still there.
        md = stored_value(svc, "SELECT COUNT(*) FROM units WHERE doc_id = 'failover-runbook'")
        assert md >= 1
        alice = svc.authenticate("Bearer aegis_sk_alice")
        res = svc.answer(alice, {"q": QUESTION, "answer": True, "top_k": 8}, None, None)
        cited = {c["locator"]["kind"] for c in res["answer"]["citations"] if c["locator"]}
        assert "time_range" in cited, res["answer"]
        # Generated and ingested once: a second run queues nothing.
        assert seed_media(svc, "aegis_sk_alice") == {"jobs": {}}
    finally:
        svc.close()
