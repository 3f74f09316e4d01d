"""The OCR scorer of bench/ingest_media.py on hand-made cases, and the bench on two pages."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.common import evaldir
from bench.ocr_score import norm, score_page, suspect_words

REPO = Path(__file__).resolve().parent.parent
NO_PAGES = evaldir.skip_reason("ocr-rendered-pdf")  # SCDB_EVAL_DIR, inherited by the bench


def boxes(*b: tuple[float, float, float, float]) -> np.ndarray:
    return np.array(b, dtype=float).reshape(-1, 4)


def test_normalisation_is_the_same_on_both_sides() -> None:
    assert norm("con\ufb01dent \u201cquoted\u201d it\u2019s 1\u20132 \u2014") == (
        'confident "quoted" it\'s 1-2 -'
    )
    assert norm("Notices . . . . . . vii") == "Notices vii"
    assert norm("a\x03b\tc  d") == "a b c d"


def test_line_aligned_cer_counts_what_the_reader_sees() -> None:
    gt = ["The", "SESSION_USER", "i", "is", "here."]
    gtb = boxes(
        (0, 0, 30, 10), (40, 0, 160, 10), (170, 0, 174, 10), (180, 0, 195, 10), (200, 0, 240, 10)
    )
    # split word (one space), a small "i" whose ink box is much smaller than its font box,
    # a word the OCR misses, an OCR word over a figure far away (not charged, but counted)
    ocr = ["The", "SESSION", "_USER", "i", "here.", "FIGURE"]
    ob = boxes(
        (0, 1, 29, 9),
        (40, 1, 110, 9),
        (112, 1, 160, 9),
        (171, 3, 173, 9),
        (200, 1, 238, 9),
        (0, 100, 60, 110),
    )
    c, bad = score_page(gt, gtb, ocr, ob)
    ref = "The SESSION_USER i is here."
    assert c["chars"] == len(ref) and c["words"] == 5
    assert c["edits"] == 1 + 3  # the space inside the split word, "is" and its space missing
    assert c["space"] == 2 and c["missing"] == 2
    assert c["unaligned_ocr_chars"] == len("FIGURE")
    assert bad == [{"edits": 4, "ref": ref, "hyp": "The SESSION _USER i here."}]
    # nothing read at all: every character of the line is an edit
    c, _ = score_page(gt, gtb, [], boxes())
    assert c["edits"] == c["chars"] == len(ref)
    # a wrong character is a confusion, a wrong case a case error
    c, _ = score_page(
        ["Proc1", "Word"],
        boxes((0, 0, 50, 10), (60, 0, 99, 10)),
        ["Proci", "word"],
        boxes((0, 0, 50, 10), (60, 0, 99, 10)),
    )
    assert (c["edits"], c["confusion"], c["case"]) == (2, 1, 1)


def test_leader_dots_are_not_scored_but_junk_read_over_them_is() -> None:
    gt = ["Notices", ".", ".", ".", ".", "vii"]
    gtb = boxes(
        (0, 0, 50, 10),
        (60, 8, 62, 10),
        (66, 8, 68, 10),
        (72, 8, 74, 10),
        (78, 8, 80, 10),
        (90, 0, 110, 10),
    )
    c, _ = score_page(gt, gtb, ["Notices", "vii"], boxes((0, 1, 50, 9), (90, 1, 110, 9)))
    assert (c["chars"], c["edits"]) == (len("Notices vii"), 0)
    c, bad = score_page(
        gt, gtb, ["Notices", "eee", "vii"], boxes((0, 1, 50, 9), (58, 4, 82, 10), (90, 1, 110, 9))
    )
    assert c["edits"] == 4 and c["extra"] == 3 and bad[0]["hyp"] == "Notices eee vii"


def test_suspect_ground_truth_is_found_by_general_checks() -> None:
    gray = np.full((100, 300), 255, dtype=np.uint8)
    gray[10:20, 0:100] = 0  # ink under "Specifies" and its duplicated pieces
    gray[40:50, 0:50] = 0  # ink under the word with control characters
    texts = ["Specifies", "S", "ifi", "(QKDQFH\x03", "Hidden"]
    b = boxes(
        (0, 10, 100, 20), (0, 10, 10, 20), (20, 10, 40, 20), (0, 40, 50, 50), (200, 70, 280, 80)
    )
    assert suspect_words(texts, b, gray) == {
        1: "duplicate",
        2: "duplicate",
        3: "control_chars",
        4: "no_ink",
    }


@pytest.mark.slow
@pytest.mark.skipif(NO_PAGES is not None, reason=str(NO_PAGES))
@pytest.mark.skipif(not shutil.which("tesseract"), reason="tesseract missing: scripts/setup.sh")
def test_ingest_media_bench_ocr_smoke(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.ingest_media",
            "--suites",
            "ocr",
            "--limit",
            "2",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    ocr = json.loads((tmp_path / "ingest_media.json").read_text())["ocr"]
    assert ocr["pages"] == 2 and len(ocr["per_page"]) == 2 and ocr["gt_chars"] > 1000
    for k in ("cer", "cer_verified", "cer_v1", "cer_reading_order", "word_box_recall_iou50"):
        assert 0.0 <= ocr[k] <= 1.0, k
    assert ocr["cer"] < 0.1 and ocr["word_box_recall_iou50"] > 0.6  # sane, not a target
    assert ocr["pages_per_s"] > 0 and ocr["engine_cpu_s_per_page"] > 0
    assert sum(ocr["errors_by_kind"].values()) == sum(p["edits"] for p in ocr["per_page"])
    md = (tmp_path / "ingest_media.md").read_text()
    assert md.startswith("# Media derivation benchmark") and "OCR: per page" in md
