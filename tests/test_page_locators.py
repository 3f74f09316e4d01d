"""Page Locators as tight as the evidence (issue 22, the page half; D-210..D-213).

Pure parts first (a page region's word table, a cited span narrowed to its words' boxes, a
chunk's own table), then the real engines: a reportlab page with a text layer and its render as
a scan go through pdfium and Tesseract, through the API (``?words=true``) and into an answer
whose citation boxes the words it rests on.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import ALICE, CAROL, embedded
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


# --------------------------------------------------------------------------- real engines

needs_engines = pytest.mark.skipif(
    not shutil.which("tesseract"), reason="needs tesseract (scripts/setup.sh installs it)"
)
LETTER = (612.0, 792.0)
DPI = 150
UPPER = (
    "The archive team moved every ledger to the east wing in March. Visitors sign in at the "
    "front desk and leave their bags in the cloakroom."
)
LOWER = (
    "The greenhouse pumps were serviced in October. The replacement filters for the greenhouse "
    "pumps are stored in cabinet seven of the boiler room."
)
CELLS = [("Region", "North"), ("Budget", "4200")]  # a ruled 2 x 2 table in the middle


def make_form(path: Path) -> Path:
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.pdfgen import canvas
    from reportlab.platypus import Frame, Paragraph

    c = canvas.Canvas(str(path), pagesize=LETTER)
    style = getSampleStyleSheet()["BodyText"]
    Frame(72, 600, 460, 120, showBoundary=0).addFromList([Paragraph(UPPER, style)], c)
    # the table: rules around and between the cells
    x0, x1, x2, top = 72, 252, 432, 520
    for i, (a, b) in enumerate(CELLS):
        y = top - 30 * (i + 1)
        c.drawString(x0 + 8, y + 10, a)
        c.drawString(x1 + 8, y + 10, b)
    for y in (top, top - 30, top - 60):
        c.line(x0, y, x2, y)
    for x in (x0, x1, x2):
        c.line(x, top, x, top - 60)
    Frame(72, 160, 460, 120, showBoundary=0).addFromList([Paragraph(LOWER, style)], c)
    c.showPage()
    c.save()
    return path


@pytest.fixture(scope="module")
def form(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("reportlab")
    pytest.importorskip("pypdfium2")
    from test_derive_media import render_png

    d = tmp_path_factory.mktemp("form")
    pdf = make_form(d / "form.pdf")
    return {"pdf": pdf, "png": render_png(pdf, d / "form.png", DPI)}


def truth(pdf: Path, word: str, scale: float = 1.0) -> list[list[float]]:
    from test_derive_media import pdfium_word_boxes

    return [[v * scale for v in b] for b in pdfium_word_boxes(pdf, word)]


def area(b: Any) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def inside(outer: Any, inner: Any, tol: float = 1.5) -> bool:
    return all(
        (outer[0] <= inner[0] + tol, outer[1] <= inner[1] + tol, outer[2] >= inner[2] - tol,
         outer[3] >= inner[3] - tol)
    )  # fmt: skip


def words_of(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


@needs_engines
def test_scan_regions_are_layout_blocks_with_word_boxes(form: dict[str, Any]) -> None:
    from superchargedb.ingest.derive import derive
    from test_derive_media import iou

    units = derive(form["png"], "image/png", "scan")
    scale = DPI / 72
    for u in units:
        table = u.meta["unit_words"]
        assert table and " ".join(u.text[w["start"] : w["end"]] for w in table) == " ".join(
            u.text.split()
        )
        assert all(inside(u.locator.box, w["box"], 0.01) and w["page"] == 1 for w in table)
    # each table cell is a region of its own: no Unit reads across the vertical rule
    for a, b in CELLS:
        (ua,) = [u for u in units if a.lower() in words_of(u.text)]
        assert b.lower() not in words_of(ua.text), ua.text
    # the word boxes are where the words are drawn
    for word in ("greenhouse", "cabinet", "Budget", "North", "ledger"):
        want = truth(form["pdf"], word, scale)
        got = [
            w["box"]
            for u in units
            for w in u.meta["unit_words"]
            if re.sub(r"\W", "", u.text[w["start"] : w["end"]]) == word
        ]
        assert got and all(max(iou(g, t) for g in got) >= 0.5 for t in want), (word, got, want)


@needs_engines
def test_pdf_text_layer_words_keep_their_boxes(form: dict[str, Any]) -> None:
    from superchargedb.ingest.derive import derive

    units = derive(form["pdf"], "application/pdf", None)
    for u in units:
        table = u.meta["unit_words"]
        assert [u.text[w["start"] : w["end"]] for w in table] == u.text.split()
        assert "conf" not in table[0] and table[0]["page"] == 1
    (want,) = truth(form["pdf"], "cabinet")
    unit = next(u for u in units if "cabinet" in u.text)
    (got,) = [
        w["box"] for w in unit.meta["unit_words"] if unit.text[w["start"] : w["end"]] == "cabinet"
    ]
    assert inside(got, want) and inside(want, got, 2.5), (got, want)


@needs_engines
@pytest.mark.slow  # OCR + embedding + an answer through the API: ~10-20 s
def test_an_answer_on_a_form_boxes_the_words_it_rests_on(client, form) -> None:
    from test_media_ingest import wait_job

    key = "acme/alpha/backend/forms/facilities.png"
    r = client.put(
        f"/v1/objects/{key}",
        headers={**ALICE, "Content-Type": "image/png"},
        content=form["png"].read_bytes(),
    )
    assert r.status_code == 201, r.text
    body = {"units": [{"source_uri": key, "mime": "image/png", "modality": "scan"}]}
    r = client.post("/v1/ingest", headers=ALICE, json=body)
    job = wait_job(client, ALICE, r.json()["results"][0]["job_id"], timeout=300)
    assert job["state"] == "done", job
    for uid in job["unit_ids"]:
        plain = client.get(f"/v1/units/{uid}", headers=ALICE).json()
        u = client.get(f"/v1/units/{uid}?words=true", headers=ALICE).json()
        assert {k: v for k, v in u.items() if k != "words"} == plain and "boxes" not in u["locator"]
        assert " ".join(w["text"] for w in u["words"]) == " ".join(u["text"].split())
        assert all(inside(u["locator"]["box"], w["box"], 0.01) for w in u["words"])
        r = client.get(f"/v1/units/{uid}?words=true", headers=CAROL)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    out = client.post(
        "/v1/answer",
        headers=ALICE,
        json={"q": "Where are the replacement filters for the greenhouse pumps stored?",
              "answer": True, "top_k": 5},
    ).json()  # fmt: skip
    cites = [c for c in out["answer"]["citations"] if c["source_uri"].startswith(key)]
    assert cites, out["answer"]
    loc = cites[0]["locator"]
    assert loc["kind"] == "bbox" and loc["boxes"], loc
    scale = DPI / 72
    cited = "The replacement filters for the greenhouse pumps are stored in cabinet seven"
    want = [
        b
        for w in ("replacement", "filters", "cabinet", "seven")
        for b in truth(form["pdf"], w, scale)
    ]
    assert all(any(inside(b, t, 2.0) for b in loc["boxes"]) for t in want), (loc, want)
    # the sentence's own words, not the paragraph: its lines' boxes cover at most 1.5x the
    # union of its words' boxes (the other sentence of the paragraph is left out)
    words = [b for w in set(cited.split()) for b in truth(form["pdf"], w, scale)
             if b[1] > 792 * scale / 2]  # fmt: skip
    union = [min(b[0] for b in words), min(b[1] for b in words), max(b[2] for b in words),
             max(b[3] for b in words)]  # fmt: skip
    assert sum(area(b) for b in loc["boxes"]) <= 1.5 * area(union), (loc, union)
    first = truth(form["pdf"], "October", scale)[0]
    assert not any(inside(b, first, 0) for b in loc["boxes"]), "the first sentence is boxed too"


@needs_engines
@pytest.mark.slow  # two OCR jobs through the API: ~10 s
def test_rederive_upgrades_media_derived_before_word_tables(client, svc, form) -> None:
    """``reindex --rederive``: a scan derived by an older build (no word tables; simulated by
    deleting them) is queued again with its own request and comes back with words."""
    import sqlite3

    from superchargedb.storage.sqlite import rederive
    from test_media_ingest import wait_job

    key = "acme/alpha/backend/forms/old.png"
    r = client.put(
        f"/v1/objects/{key}",
        headers={**ALICE, "Content-Type": "image/png"},
        content=form["png"].read_bytes(),
    )
    assert r.status_code == 201, r.text
    body = {"units": [{"source_uri": key, "mime": "image/png", "modality": "scan"}]}
    r = client.post("/v1/ingest", headers=ALICE, json=body)
    first = wait_job(client, ALICE, r.json()["results"][0]["job_id"], timeout=300)
    assert first["state"] == "done", first
    with embedded(svc).catalog.write() as conn:
        assert rederive.stale_jobs(conn) == []  # everything has its words
        conn.execute("DELETE FROM unit_words")  # as an older build left it
        stale = rederive.stale_jobs(conn)
        assert [s["id"] for s in stale] == [first["job_id"]]
        (job_id,) = rederive.requeue(conn, embedded(svc).queue, stale)
    svc.jobs_wakeup()
    again = wait_job(client, ALICE, job_id, timeout=300)
    assert again["state"] == "done", again
    ids = again["unit_ids"]
    assert ids
    for uid in ids:
        u = client.get(f"/v1/units/{uid}?words=true", headers=ALICE).json()
        assert u["words"], u
    # the old Units are gone (replace), the document counts once, and nothing is stale
    n = sqlite3.connect(svc.settings.data_dir / "catalog.db").execute(
        "SELECT COUNT(*) FROM units WHERE source_uri LIKE ?", (key + "%",)
    )
    assert n.fetchone()[0] == len(ids)
    with embedded(svc).catalog.write() as conn:
        assert rederive.stale_jobs(conn) == []
    # a later ingest of the same object finds the new job
    r = client.post("/v1/ingest", headers=ALICE, json=body).json()["results"][0]
    assert r["job_id"] == job_id and r["status"] == "unchanged"


def test_reindex_rederive_is_an_operator_command(tmp_path: Path, embedder) -> None:
    """``superchargedb reindex --rederive`` on a data dir (offline, under its lock): it reports
    what it queued; without media derived before word tables, nothing."""
    import json

    from typer.testing import CliRunner

    from conftest import make_service
    from superchargedb.cli.main import app

    make_service(tmp_path / "data", embedder).close()
    res = CliRunner().invoke(app, ["reindex", "--data", str(tmp_path / "data"), "--rederive"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.rindex("{") :])  # after tqdm's progress line
    assert out["rederive_queued"] == 0 and out["reembedded"] == 0
    res = CliRunner().invoke(app, ["reindex", "--data", str(tmp_path / "data")])
    assert "rederive_queued" not in res.output
