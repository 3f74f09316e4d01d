"""The second, larger read of a scan, merged word by word (tesseract.keep_surer, D-286)."""

from __future__ import annotations

from superchargedb.ingest.tesseract import MIN_ADDED_CONF, OcrWord, keep_surer


def word(text: str, box: tuple[float, float, float, float], conf: float, line: int) -> OcrWord:
    return OcrWord(text, box, conf, (line, 1), (line, 1, 1))


def test_the_surer_read_of_a_word_wins_in_the_first_reads_line() -> None:
    first = [word("TOMEITY", (10, 10, 60, 20), 41, 1), word("CLASS", (65, 10, 100, 20), 90, 1)]
    second = [word("TOXICITY", (11, 10, 61, 21), 88, 7), word("CIASS", (65, 10, 99, 20), 90.5, 7)]
    got = keep_surer(first, second)
    # Each word: the read surer of it by SURER_BY (90.5 is not surer enough than 90).
    assert [w.text for w in got] == ["TOXICITY", "CLASS"]
    assert got[0].line == got[1].line == (1, 1, 1)  # still one line, in reading order
    assert got[0].conf == 88 and got[0].box == (11, 10, 61, 21)


def test_a_word_only_the_second_read_found_is_added_when_it_is_sure() -> None:
    first = [word("NAME", (10, 10, 40, 20), 90, 1)]
    sure = word("DATE", (200, 10, 230, 20), MIN_ADDED_CONF, 5)
    unsure = word("ee", (300, 50, 310, 58), MIN_ADDED_CONF - 1, 6)
    assert [w.text for w in keep_surer(first, [sure, unsure])] == ["NAME", "DATE"]


def test_where_the_reads_cut_words_differently_the_first_stands() -> None:
    first = [word("OF", (10, 10, 25, 20), 60, 1), word("ACCOUNT", (30, 10, 90, 20), 60, 1)]
    glued = word("OFACCOUNT", (10, 10, 90, 20), 95, 3)  # overlaps both
    assert keep_surer(first, [glued]) == first
    long = [word("BANK_SCHEMA.MASK_DRIVERS", (10, 10, 200, 20), 40, 1)]
    pieces = [word("MASK", (100, 10, 130, 20), 96, 2), word("DRIVERS", (140, 10, 200, 20), 96, 2)]
    assert keep_surer(long, pieces) == long  # several over one: not one word read better
    assert keep_surer([], []) == []


def test_a_scan_that_needs_no_preparing_gets_nothing_written_beside_it(tmp_path) -> None:
    """Tall, upright text needs no resampling, so Tesseract reads the source file itself; the
    second read's larger copy (and the turned-text sheet) go to the derivation's own temporary
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
