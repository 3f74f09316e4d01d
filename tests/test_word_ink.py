"""Word boxes fitted to their ink (D-256): ``word_ink.py`` (worker-side, loaded by path as the
image worker loads it) on ink shaped like Tesseract's output on the FUNSD forms, the real
Tesseract path on a rendered line, and the snap of a scan's boxes to its pixels."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from superchargedb.ingest import tesseract
from superchargedb.ingest.derive_base import DeriveOptions, MediaLimits
from superchargedb.ingest.derive_ocr import scaled


def word_ink() -> Any:
    path = Path(tesseract.__file__).with_name("word_ink.py")
    spec = importlib.util.spec_from_file_location("word_ink_test", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


wi = word_ink()


def page(h: int = 60, w: int = 80) -> Any:
    return np.zeros((h, w), dtype=bool)


def test_a_line_high_box_shrinks_to_the_words_ink_not_the_next_lines() -> None:
    """'is' as Tesseract boxed it on form 83624198: from its line's top to the next line's
    capitals (rows 1843-1893 of the 2.4x OCR image); the word's ink is rows 10-27 here."""
    ink = page()
    ink[10:12, 20:24] = True  # the i's dot, one blank row above its stem
    ink[13:28, 20:24] = True  # the stem
    ink[16:28, 26:36] = True  # the s
    ink[45:55, 0:80] = True  # the next line's capitals, inside the bottom of the box
    assert wi.ink_box(ink, (18, 2, 38, 50), pad=1, gap=2) == (20, 10, 36, 28)


def test_a_box_cutting_a_stroke_grows_by_at_most_pad_and_never_into_a_neighbour() -> None:
    ink = page()
    ink[20:30, 10:31] = True  # a word whose last stroke column is 30
    ink[20:30, 33:40] = True  # the next word, two blank columns away
    # Tesseract's box ends at 29 (cuts the stroke at column 29-30): grown one column.
    assert wi.ink_box(ink, (10, 18, 29, 32), pad=1, gap=2) == (10, 20, 30, 30)
    # With a larger pad it grows to the end of the stroke, not across the blank columns.
    assert wi.ink_box(ink, (10, 18, 29, 32), pad=6, gap=2) == (10, 20, 31, 30)


def test_runs_of_ink_rows_join_across_a_small_gap_only() -> None:
    counts = np.zeros(40, dtype=int)
    counts[2:4] = 3  # a dot
    counts[6:20] = 9  # the letters
    counts[30:34] = 50  # another line's rule: more ink per row, but fewer rows of ink
    assert wi.main_rows(counts, gap=2) == (2, 20)
    assert wi.main_rows(counts, gap=1) == (6, 20)  # the dot two rows off is not joined


def test_a_box_without_ink_is_left_as_it_is() -> None:
    ink = page()
    ink[40:50, 40:50] = True
    assert wi.ink_box(ink, (2.4, 3.6, 20.2, 19.7), pad=1, gap=2) == (2, 3, 20, 20)
    assert wi.ink_boxes(np.full((10, 10), 255, np.uint8), [(1, 1, 5, 5)], 230, 1, 1) == [
        (1, 1, 5, 5)
    ]


def test_a_scans_boxes_snap_out_to_its_pixels_and_a_pdfs_do_not() -> None:
    # An OCR image at 2.4x: a box edge at 470.4 px is source pixel 196.0; 492.0 px is 205.0.
    assert scaled((470.4, 1761.6, 492.0, 1790.0), 2.4, snap=True) == (196, 734, 205, 746)
    assert scaled((471.0, 1762.0, 491.0, 1789.0), 2.4, snap=True) == (196, 734, 205, 746)
    assert scaled((471.0, 1762.0, 491.0, 1789.0), 2.0) == (235.5, 881.0, 245.5, 894.5)


def rendered() -> tuple[Any, dict[str, tuple[int, int, int, int]]]:
    """A line with capitals, ascenders and descenders over a line of capitals, and each
    word's ink box, found by drawing the word alone at the same place."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(26)
    im = Image.new("L", (900, 160), 255)
    truth = {}
    x = 40
    for text in ("Of", "the", "journey", "or", "Fig"):
        ImageDraw.Draw(im).text((x, 40), text, font=font, fill=0)
        alone = Image.new("L", im.size, 255)
        ImageDraw.Draw(alone).text((x, 40), text, font=font, fill=0)
        ys, xs = np.nonzero(np.asarray(alone) < tesseract.INK)
        truth[text] = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
        x += int(ImageDraw.Draw(im).textlength(text + "  ", font=font))
    ImageDraw.Draw(im).text((40, 84), "MOTOR CARRIER HEADQUARTERS", font=font, fill=0)
    return im, truth


def test_tesseracts_words_fitted_to_their_ink(tmp_path: Path) -> None:
    im, truth = rendered()
    path = tmp_path / "line.png"
    im.save(path)
    lim, opt = MediaLimits(), DeriveOptions()
    words = tesseract.ocr_words(path, limits=lim, options=opt)
    fitted = tesseract.fit_to_ink(words, path, 30.0, limits=lim, options=opt)
    got = {w.text: w.box for w in fitted if w.text in truth}
    assert set(got) == set(truth), [w.text for w in words]
    for text, box in got.items():
        assert box == truth[text], (text, box, truth[text])
    # (On clean rendered text Tesseract's boxes are already the ink, and stay so; its line-high
    # boxes come on scans, the shapes of the tests above.)
