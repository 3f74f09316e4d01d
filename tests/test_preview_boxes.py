"""A preview draws a citation's line boxes (``?boxes=``, D-255) in the page's own coordinates,
each checked to lie inside the Unit's box; bad boxes are a 422 and draw nothing."""

from __future__ import annotations

import io
import time
from typing import Any

from PIL import Image
from reportlab.lib.pagesizes import letter
from reportlab.pdfgen import canvas

from conftest import ALICE, CAROL
from superchargedb.locate_words import narrow_boxes

KEY = "acme/alpha/backend/boxes.pdf"
LINES = (
    "The cutover checklist drains the primary region first,",
    "then promotes the standby database in under a second,",
    "and finally moves the traffic back after the drill.",
)


def pdf() -> bytes:
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=letter)
    c.setFont("Helvetica", 14)
    for i, line in enumerate(LINES):
        c.drawString(72, 700 - 20 * i, line)
    c.showPage()
    c.save()
    return buf.getvalue()


def paragraph(client: Any) -> dict[str, Any]:
    r = client.put(
        f"/v1/objects/{KEY}", headers={**ALICE, "Content-Type": "application/pdf"}, content=pdf()
    )
    assert r.status_code == 201, r.text
    body = {"units": [{"source_uri": KEY, "mime": "application/pdf"}]}
    job_id = client.post("/v1/ingest", headers=ALICE, json=body).json()["results"][0]["job_id"]
    deadline = time.time() + 120
    while (job := client.get(f"/v1/jobs/{job_id}", headers=ALICE).json())["state"] not in (
        "done",
        "failed",
    ):
        assert time.time() < deadline
        time.sleep(0.2)
    assert job["state"] == "done", job
    units = [
        client.get(f"/v1/units/{u}", headers=ALICE, params={"words": "true"}).json()
        for u in job["unit_ids"]
    ]
    (unit,) = [u for u in units if u["text"].count("\n") == 2]  # the three lines, one block
    return unit


def red(img: Image.Image, box: list[float], k: float, x: float, y: float) -> bool:
    p = img.getpixel((int(box[0] * k + x), int(box[1] * k + y)))
    return bool(p[0] > 200 and p[1] < 120 and p[2] < 120)


def test_the_preview_draws_each_line_box_and_not_the_union(client: Any) -> None:
    unit = paragraph(client)
    text, loc = unit["text"], unit["locator"]
    # A citation from "promotes" (line 2) to "finally" (line 3): two line boxes.
    cited = narrow_boxes(loc, unit["words"], text.index("promotes"), text.index(" moves"))
    assert len(cited["boxes"]) == 2
    one, two = cited["boxes"]
    param = ";".join(",".join(str(v) for v in b) for b in cited["boxes"])
    r = client.get(unit["preview"], headers=ALICE, params={"boxes": param})
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    img = Image.open(io.BytesIO(r.content)).convert("RGB")
    k = img.width / 612  # preview pixels per point
    # Each line box's corners are outlined; the Unit's own top-left corner (line 1) is not,
    # nor is the union's top-left corner (above line 2's first cited word: line 1's ink).
    for b in (one, two):
        assert red(img, b, k, 1, 1) and red(img, [b[2], b[3]], k, -2, -2), b
    assert not red(img, loc["box"], k, 1, 1)
    assert not red(img, [cited["box"][0], one[3] + (two[1] - one[3]) / 2], k, 1, 0)
    # The Unit's own preview still draws its own box.
    plain = Image.open(io.BytesIO(client.get(unit["preview"], headers=ALICE).content))
    assert red(plain.convert("RGB"), loc["box"], k, 1, 1)


def test_bad_boxes_are_a_422_and_other_tenants_a_404(client: Any) -> None:
    unit = paragraph(client)
    x0, y0, x1, y1 = unit["locator"]["box"]
    inside = f"{x0},{y0},{(x0 + x1) / 2},{y1}"
    for bad in (
        f"{x0 - 50},{y0},{x1},{y1}",  # sticks out of the Unit's box
        f"{x1},{y0},{x0},{y1}",  # x0 > x1
        "1,2,3",
        "a,b,c,d",
        "",
        f"{inside};nan,1,2,3",
        ";".join([inside] * 65),
    ):
        r = client.get(unit["preview"], headers=ALICE, params={"boxes": bad})
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["error"]["message"].startswith("boxes"), r.text
    assert client.get(unit["preview"], headers=ALICE, params={"boxes": inside}).status_code == 200
    r = client.get(unit["preview"], headers=CAROL, params={"boxes": inside})
    assert r.status_code == 404
