"""Doubted words read again, cut out and enlarged on one sheet (ingest/reread.py, D-289).

A real Tesseract on a rendered page. Its first read is made doubtful on purpose (a word's text
garbled and its confidence set low, two words glued into one), so the test knows what the
second look must find: the real words, each with its own box inside the doubted word's box.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from superchargedb.ingest.derive_base import DeriveOptions, MediaLimits
from superchargedb.ingest.reread import reread_doubted
from superchargedb.ingest.tesseract import OcrWord, ocr_words

LIMITS, OPTIONS = MediaLimits(), DeriveOptions()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[OcrWord]]:
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("L", (1000, 260), 255)
    font = ImageFont.load_default(size=36)
    ImageDraw.Draw(img).text((30, 40), "NAME OF ACCOUNT", fill=0, font=font)
    ImageDraw.Draw(img).text((30, 150), "Return date", fill=0, font=font)
    path = tmp_path_factory.mktemp("page") / "page.png"
    img.save(path)
    words = ocr_words(path, limits=LIMITS, options=OPTIONS)
    assert [w.text for w in words] == ["NAME", "OF", "ACCOUNT", "Return", "date"]
    return path, words


def near(got: tuple[float, ...], want: tuple[float, ...], px: float = 4) -> bool:
    """The same box on the page, to a few pixels (the sheet is read at another scale)."""
    return all(abs(a - b) <= px for a, b in zip(got, want, strict=True))


def test_a_misread_word_is_read_again_and_keeps_its_line(page, tmp_path) -> None:
    path, words = page
    doubted = list(words)
    doubted[3] = replace(words[3], text="Rctum", conf=12.0)
    got = reread_doubted(doubted, path, 40, out_dir=tmp_path, limits=LIMITS, options=OPTIONS)
    assert [w.text for w in got] == ["NAME", "OF", "ACCOUNT", "Return", "date"]
    assert got[3].line == words[3].line and got[3].conf > 60
    assert near(got[3].box, words[3].box)
    assert got[:3] == words[:3] and got[4] == words[4]  # sure words are left as they were


def test_a_glued_word_becomes_its_pieces_with_their_own_boxes(page, tmp_path) -> None:
    path, words = page
    of, account = words[1], words[2]
    glued = replace(
        of,
        text="OFACCOUNT",
        conf=30.0,
        box=(
            of.box[0],
            min(of.box[1], account.box[1]),
            account.box[2],
            max(of.box[3], account.box[3]),
        ),
    )
    got = reread_doubted(
        [words[0], glued, *words[3:]], path, 40, out_dir=tmp_path, limits=LIMITS, options=OPTIONS
    )
    assert [w.text for w in got] == ["NAME", "OF", "ACCOUNT", "Return", "date"]
    assert got[1].box[2] < got[2].box[0]  # two boxes, side by side
    assert near(got[1].box, of.box) and near(got[2].box, account.box)
    assert got[1].line == got[2].line == of.line


def test_a_doubted_speck_with_nothing_to_read_stays_as_it_was(page, tmp_path) -> None:
    path, words = page
    speck = OcrWord("ee", (700.0, 180.0, 730.0, 200.0), 15.0, (9, 1), (9, 1, 1))  # blank paper
    got = reread_doubted(
        [*words, speck], path, 40, out_dir=tmp_path, limits=LIMITS, options=OPTIONS
    )
    assert got == [*words, speck]
    assert sorted(p.name for p in path.parent.iterdir()) == ["page.png"]  # nothing beside it


def test_a_scan_that_needs_no_preparing_gets_nothing_written_beside_it(tmp_path) -> None:
    """Tall, upright text needs no resampling, so Tesseract reads the source file itself; the
    doubted words' sheet (and the turned-text sheet) go to the derivation's own temporary
    folder, never beside the source (in the object store, that is the blob folder)."""
    from PIL import Image, ImageDraw, ImageFont

    from superchargedb.ingest.derive_base import DeriveOptions, MediaLimits
    from superchargedb.ingest.derive_ocr import derive_scan

    src = tmp_path / "blobs"
    src.mkdir()
    img = Image.new("L", (900, 300), 255)
    font = ImageFont.load_default(size=40)
    ImageDraw.Draw(img).text((30, 40), "Replacement filters", fill=0, font=font)
    ImageDraw.Draw(img).text((30, 150), "are stored in bay four", fill=0, font=font)
    page = src / "page.png"
    img.save(page)
    units = derive_scan(page, limits=MediaLimits(), options=DeriveOptions())
    assert "filters" in " ".join(u.text for u in units).lower()
    assert sorted(p.name for p in src.iterdir()) == ["page.png"]
