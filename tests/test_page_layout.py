"""The layout pass for scans (D-212, D-213): rules found and painted out, OCR lines cut into cells
and key/value lines, regions joined down to the next rule, junk and rotated text left out.

Pure functions on generated pages and words; the real Tesseract path is covered by
tests/test_page_locators.py and measured by bench/funsd_forms.py.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from superchargedb.ingest import layout
from superchargedb.ingest.derive_ocr import OcrWord


def font(size: int = 22) -> Any:
    from PIL import ImageFont

    return ImageFont.load_default(size)  # Pillow's bundled scalable font


def page_prep() -> Any:
    """Loaded by path, as the image worker loads it."""
    path = Path(layout.__file__).with_name("page_prep.py")
    spec = importlib.util.spec_from_file_location("page_prep_test", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sheet() -> tuple[Any, dict[str, Any]]:
    """A 1000 x 700 page: a ruled 2 x 2 table, an underlined word, a run of touching bold
    letters, a dark panel with white text. Text lines are ~24 px tall."""
    from PIL import Image, ImageDraw

    im = Image.new("L", (1000, 700), 255)
    d = ImageDraw.Draw(im)
    for y in (60, 120, 180):  # the table: 3 rules across, 3 down
        d.line([(50, y), (650, y)], fill=0, width=3)
    for x in (50, 350, 650):
        d.line([(x, 60), (x, 180)], fill=0, width=3)
    d.text((70, 75), "Region", font=font(), fill=0)
    d.text((370, 75), "North", font=font(), fill=0)
    d.text((70, 135), "Budget", font=font(), fill=0)
    d.text((370, 135), "4200", font=font(), fill=0)
    d.text((70, 250), "Signed", font=font(), fill=0)
    d.line([(60, 278), (420, 278)], fill=0, width=2)  # an underline beneath the word
    d.text((70, 330), "WWWWWWWWWWWWWWWWWW", font=font(), fill=0)  # letters that touch
    d.rectangle([(600, 300), (950, 650)], fill=40)  # a dark panel ...
    for i in range(8):  # ... with white text on it
        d.text((620, 320 + 40 * i), "IIIIIIIIIIIIIIIIIII", font=font(), fill=255)
    return im, {"text": [(70, 75, 150, 100), (370, 75, 440, 100), (70, 250, 150, 275)]}


def test_rules_are_found_painted_out_and_letters_kept() -> None:
    pp = page_prep()
    im, where = sheet()
    before = np.asarray(im)
    out, rules = pp.remove_rules(im, 24.0)
    after = np.asarray(out)
    # every border of the table, and the underline, are rules (boxes on the page)
    assert len(rules["v"]) >= 3 and len(rules["h"]) >= 4, rules
    assert any(r[0] <= 60 and r[2] >= 410 and 270 <= r[1] <= 282 for r in rules["h"]), rules
    assert all(after[y, x] > 200 for x, y in ((200, 60), (200, 180), (50, 100), (650, 150)))
    # the letters are untouched: inside the cells, the underlined word, the touching letters
    for x0, y0, x1, y1 in where["text"]:
        assert (before[y0:y1, x0:x1] < 128).sum() == (after[y0:y1, x0:x1] < 128).sum()
    assert np.array_equal(before[325:360, 60:400], after[325:360, 60:400])
    # nothing inside the dark panel counts as a rule
    assert np.array_equal(before[305:645, 605:945], after[305:645, 605:945])
    assert not any(r[0] > 600 and r[1] > 300 for r in rules["h"] + rules["v"])


def test_a_page_without_rules_is_left_as_it_is() -> None:
    from PIL import Image, ImageDraw

    pp = page_prep()
    im = Image.new("L", (600, 200), 255)
    ImageDraw.Draw(im).text((20, 20), "Plain text, no rules.", font=font(), fill=0)
    out, rules = pp.remove_rules(im, 24.0)
    assert rules == {"h": [], "v": []} and out is im


def word(
    text: str, box: tuple[float, float, float, float], line: int, conf: float = 95.0
) -> OcrWord:
    return OcrWord(text, box, conf, (1, 1), (1, 1, line))


H = 20.0  # the page's line height in these words' pixels


def texts(regions: list[list[list[OcrWord]]]) -> list[str]:
    return ["\n".join(" ".join(w.text for w in line) for line in r) for r in regions]


def test_lines_are_cut_at_rules_and_column_gaps_but_keys_keep_their_values() -> None:
    words = [
        word("Region", (10, 10, 80, 30), 1),
        word("North", (120, 10, 180, 30), 1),  # a vertical rule at x=100 between them
        word("FROM:", (10, 50, 70, 70), 2),
        word("R.", (150, 50, 170, 70), 2),  # a wide gap after a key: one line
        word("Lane", (175, 50, 220, 70), 2),
        word("Total", (10, 75, 60, 95), 3),
        word("12", (200, 75, 220, 95), 3),  # a wide gap, no key: two cells
    ]
    rules = {"v": [[99, 0, 101, 40]], "h": [[0, 39, 300, 41]]}
    got = texts(layout.regions(words, rules, H))
    assert got == ["Region", "North", "FROM: R. Lane\nTotal", "12"], got


def test_regions_join_down_to_the_next_rule() -> None:
    words = [
        word("The", (10, 10, 40, 30), 1),
        word("first", (45, 10, 90, 30), 1),
        word("paragraph.", (10, 35, 110, 55), 2),
        word("Below", (10, 70, 60, 90), 3),  # a rule between lines 2 and 3
        word("the", (65, 70, 95, 90), 3),
        word("rule.", (100, 70, 140, 90), 3),
        word("Far", (10, 200, 40, 220), 4),  # far below: a region of its own
    ]
    rules = {"h": [[0, 60, 300, 62]], "v": []}
    assert texts(layout.regions(words, rules, H)) == [
        "The first\nparagraph.",
        "Below the rule.",
        "Far",
    ]
    # without the rule, the second line's successor joins it
    assert texts(layout.regions(words, {}, H))[0] == "The first\nparagraph.\nBelow the rule."


def test_junk_and_rotated_text_are_left_out_but_turned_words_kept() -> None:
    words = [
        word("Invoice", (10, 10, 90, 30), 1),
        word("ee", (300, 300, 320, 315), 2, conf=12.0),  # a lone speck read as letters
        word("S7o2S5628", (600, 100, 620, 300), 3, conf=0.0),  # a margin number read across
        word("No", (10, 40, 35, 60), 4, conf=25.0),  # short and unsure, but not alone
        word("12", (40, 40, 60, 60), 4, conf=90.0),
    ]
    assert texts(layout.regions(words, {}, H)) == ["Invoice\nNo 12"]
    turned = [*words[:2], OcrWord("82253245", (600, 100, 620, 300), 88.0, (9, 1), (9, 1, 1), 90)]
    assert "82253245" in texts(layout.regions(turned, {}, H))
