"""Page Locators as tight as the evidence (issue 22, the page half; D-210..D-213).

Pure parts first (a page region's word table, a cited span narrowed to its words' boxes, a
chunk's own table), then the real engines: a reportlab page with a text layer and its render as
a scan go through pdfium and Tesseract, through the API (``?words=true``) and into an answer
whose citation boxes the words it rests on.
"""

from __future__ import annotations

from typing import Any

from superchargedb.answer.localize import pin_locator
from superchargedb.ingest.page_words import PageWord, chunk_tables, page_text
from superchargedb.locate_words import line_boxes, narrow, narrow_boxes

LOC = {"kind": "bbox", "box": [10.0, 10.0, 400.0, 120.0], "page": 2}


def table_of(lines: list[list[tuple[str, tuple[float, float, float, float]]]]) -> Any:
    return page_text([[PageWord(t, b, 0.9) for t, b in line] for line in lines], 2)


TWO_LINES = [
    [
        ("Quarterly", (10, 10, 90, 30)),
        ("revenue", (95, 12, 160, 30)),
        ("grew.", (165, 10, 210, 30)),
    ],
    [("Costs", (10, 40, 60, 60)), ("stayed", (65, 40, 120, 62)), ("flat.", (125, 41, 170, 60))],
    [("Cloud", (10, 100, 60, 120)), ("contracts", (65, 100, 150, 120))],
]


def test_a_page_region_keeps_each_words_span_and_box() -> None:
    text, table = table_of(TWO_LINES)
    assert text == "Quarterly revenue grew.\nCosts stayed flat.\nCloud contracts"
    assert [text[w["start"] : w["end"]] for w in table] == [t for ln in TWO_LINES for t, _ in ln]
    assert all(w["page"] == 2 and w["conf"] == 0.9 and len(w["box"]) == 4 for w in table)
    # empty words are left out of both the text and the table
    text2, table2 = page_text([[PageWord(" ", (0, 0, 1, 1)), PageWord("a", (1, 1, 2, 2))]], 1)
    assert (text2, [w["start"] for w in table2]) == ("a", [0])


def test_a_cited_span_narrows_to_its_words_boxes_line_by_line() -> None:
    text, table = table_of(TWO_LINES)
    a = text.index("revenue")
    b = text.index("stayed") + len("stayed")
    got = narrow_boxes(LOC, table, a, b)
    # one tight box per line the span touches, in reading order; box is their union
    assert got["boxes"] == [[95.0, 10.0, 210.0, 30.0], [10.0, 40.0, 120.0, 62.0]]
    assert got["box"] == [10.0, 10.0, 210.0, 62.0] and got["page"] == 2
    assert got["kind"] == "bbox"
    # the third line (far below) is not in the citation's box
    assert got["box"][3] < 100
    # a span on no word, no table, or another page's words: the Unit's own Locator
    assert narrow_boxes(LOC, table, len(text), len(text) + 5) == LOC
    assert narrow_boxes(LOC, [], 0, 5) == LOC
    other = [{**w, "page": 3} for w in table]
    assert narrow_boxes(LOC, other, 0, 5) == LOC
    # boxes never leave the Unit's own box
    wide = [{**table[0], "box": [0.0, 0.0, 999.0, 999.0]}]
    assert narrow_boxes(LOC, wide, 0, 3)["boxes"] == [[10.0, 10.0, 400.0, 120.0]]
    # dispatch by kind; a time range is not given boxes
    assert narrow(LOC, table, a, b) == got
    tr = {"kind": "time_range", "t_start_ms": 0, "t_end_ms": 10}
    assert narrow(tr, table, a, b) == tr


def test_line_boxes_split_where_the_line_turns() -> None:
    boxes = [[0, 0, 10, 10], [12, 1, 20, 11], [0, 20, 10, 30], [30, 0, 40, 10]]
    # the third word starts a new line (below); the fourth starts another (back up, to the right)
    assert line_boxes(boxes) == [[0, 0, 20, 11], [0, 20, 10, 30], [30, 0, 40, 10]]


def test_pin_locator_boxes_a_page_hit_with_a_word_table() -> None:
    text, table = table_of(TWO_LINES)
    hit = {"unit_id": "u", "text": text, "locator": LOC, "modality": "scan"}
    a = text.index("Cloud")
    got = pin_locator(hit, a, len(text), words=table)
    assert got == {
        **LOC,
        "box": [10.0, 100.0, 150.0, 120.0],
        "boxes": [[10.0, 100.0, 150.0, 120.0]],
    }
    assert pin_locator(hit, a, len(text)) == LOC  # no table: the Unit's own box


def test_a_chunk_keeps_its_own_words() -> None:
    text, table = table_of(TWO_LINES)
    cut = text.index("Costs")
    first, second = chunk_tables(table, [(0, cut), (cut, len(text))])
    assert [text[w["start"] : w["end"]] for w in first] == ["Quarterly", "revenue", "grew."]
    part = text[cut:]
    assert [part[w["start"] : w["end"]] for w in second][:2] == ["Costs", "stayed"]
    assert {w["box"][1] for w in second} == {40.0, 41.0, 100.0}
