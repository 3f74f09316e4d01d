"""The console in headless Chromium (Debian's, through Playwright) against a real server with
real ingested media: sign-in, asking, every viewer, safety, isolation, keyboard and axe-core.

One browser for the whole module; one server and one corpus (the demo, a chunked document with
non-BMP characters, a PDF, an espeak-ng recording and a hostile document) built once.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import ALICE, LiveServer, make_service
from superchargedb.models.embedder import Embedder

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[console]'")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="needs Debian's chromium (scripts/setup.sh installs it)"
    ),
]

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
SHOTS = os.environ.get("SCDB_CONSOLE_SCREENSHOTS")  # a folder: save each view's screenshots
SCOPE = "acme/alpha/backend"
XSS = (
    'Payload review: <img src=x onerror="window.__pwned=1"> and'
    " <script>window.__pwned=2</script> must stay text."
)


LOG = "\n".join(
    f"2026-12-01T10:{i // 60:02d}:{i % 60:02d}Z deploy step {i} host web-{i % 7} status ok"
    for i in range(240)
)


def emoji_document() -> str:
    """Paragraphs enough for several chunks, with astral-plane characters near the top."""
    head = "Launch notes 🚀 for 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 week 🎉🎉 by the platform team 👩‍💻.\n\n"
    paras = []
    for i in range(40):
        paras.append(
            f"Paragraph {i} 🧪 describes milestone {i}: the team shipped feature {i * 7} and "
            f"measured latency {i + 3} milliseconds under load number {i * 11} in region {i % 5}."
        )
    return head + "\n\n".join(paras)


def wav_of(d: Path, text: str) -> bytes:
    out = d / "standup.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(out), text], check=True)
    return out.read_bytes()


def pdf_bytes() -> bytes:
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=letter)
    c.setFont("Helvetica", 14)
    c.drawString(72, 700, "The failover drill promotes the standby database in 0.8 seconds.")
    c.drawString(72, 400, "Rollback uses the previous DNS record and takes two minutes.")
    c.showPage()
    c.setFont("Helvetica", 14)
    c.drawString(72, 700, "Appendix: the drill's timeline, minute by minute.")
    c.drawString(72, 680, "Minute one freezes the schema and checks the replicas,")
    c.drawString(72, 660, "minute two reopens the gates and pages the owners.")
    c.showPage()
    c.save()
    return buf.getvalue()


def wait_job(url: str, job_id: str, timeout: float = 240) -> dict[str, Any]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        j = httpx.get(f"{url}/v1/jobs/{job_id}", headers=ALICE).json()
        if j["state"] in ("done", "failed"):
            return j
        time.sleep(0.3)
    raise TimeoutError(job_id)


def put_and_ingest(url: str, key: str, data: bytes, mime: str, doc_id: str) -> dict[str, Any]:
    r = httpx.put(f"{url}/v1/objects/{key}", headers={**ALICE, "Content-Type": mime}, content=data)
    assert r.status_code == 201, r.text
    r = httpx.post(
        f"{url}/v1/ingest",
        headers=ALICE,
        json={"units": [{"source_uri": key, "mime": mime, "doc_id": doc_id}]},
    )
    job = wait_job(url, r.json()["results"][0]["job_id"])
    assert job["state"] == "done", job
    return job


def units_of(url: str, doc_id: str) -> list[dict[str, Any]]:
    r = httpx.get(
        f"{url}/v1/units", headers=ALICE, params={"doc_id": doc_id, "scope": SCOPE, "limit": 100}
    )
    assert r.status_code == 200, r.text
    return list(r.json()["units"])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[dict[str, Any]]:
    from superchargedb.demo import seed
    from superchargedb.demo.media import seed_media

    d = tmp_path_factory.mktemp("console")
    svc = make_service(d / "data", embedder)
    seed(svc)
    with LiveServer(svc) as live:
        url = live.url
        demo_jobs = seed_media(svc, "aegis_sk_alice").get("jobs", {})
        doc = emoji_document()
        r = httpx.post(
            f"{url}/v1/ingest",
            headers=ALICE,
            params={"scope": SCOPE},
            timeout=120,
            json={
                "units": [
                    {"text": doc, "scope": SCOPE, "doc_id": "emoji-notes"},
                    {"text": XSS, "scope": SCOPE, "doc_id": "payload"},
                    {"text": LOG, "scope": SCOPE, "doc_id": "deploy-log", "modality": "log"},
                ]
            },
        )
        assert r.status_code == 200, r.text
        put_and_ingest(url, f"{SCOPE}/drill.pdf", pdf_bytes(), "application/pdf", "drill")
        speech = "The standup covered the failover drill. Next week we rehearse the rollback."
        put_and_ingest(url, f"{SCOPE}/standup.wav", wav_of(d, speech), "audio/wav", "standup")
        for jid in demo_jobs.values():
            assert wait_job(url, jid)["state"] == "done"
        yield {"url": url, "svc": svc, "doc": doc}
    svc.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--autoplay-policy=no-user-gesture-required"],
        )
        yield b
        b.close()


def until(page: Any, expr: str, timeout: float = 30.0) -> Any:
    """Poll a JavaScript expression through the DevTools protocol until it is truthy.

    page.wait_for_function evaluates strings inside the page, which the console's CSP (no
    eval) forbids; page.evaluate is exempt, as an extension or a debugger would be."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = page.evaluate(expr)
        if got:
            return got
        time.sleep(0.02)
    raise TimeoutError(expr)


class Tab:
    """A page in a fresh context, with the console's errors and its responses recorded."""

    def __init__(self, browser: Any, url: str, width: int = 1280, height: int = 800) -> None:
        self.url = url
        self.ctx = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.ctx.new_page()
        self.errors: list[str] = []
        self.log: list[str] = []
        self.statuses: list[tuple[str, int]] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("response", lambda r: self.statuses.append((r.url, r.status)))

    def _console(self, msg: Any) -> None:
        self.log.append(msg.text)
        if msg.type == "error":
            self.errors.append(msg.text)

    def sign_in(self, key: str) -> None:
        self.page.goto(self.url + "/ui/ask")
        self.page.fill("input[type=password]", key)
        self.page.click("button[type=submit]")
        self.page.wait_for_selector("#who button")

    def ask(self, question: str) -> None:
        self.page.fill("input[name=q]", question)
        self.page.press("input[name=q]", "Enter")
        self.page.wait_for_selector(".meta details")

    def shot(self, name: str) -> None:
        if SHOTS:
            vp = self.page.viewport_size
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=f"{SHOTS}/{name}-{vp['width']}.png")

    def axe(self) -> list[dict[str, Any]]:
        # Evaluated through the DevTools protocol: the page's CSP (no inline script) stays on.
        if not self.page.evaluate("typeof window.axe !== 'undefined'"):
            self.page.evaluate(AXE.read_text())
        result = self.page.evaluate("axe.run(document, {resultTypes: ['violations']})")
        return [
            {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
            for v in result["violations"]
            if v["impact"] in ("serious", "critical")
        ]

    def close(self) -> None:
        self.ctx.close()


@pytest.fixture
def tab(browser: Any, world: dict[str, Any]) -> Iterator[Tab]:
    t = Tab(browser, world["url"])
    yield t
    t.close()


def test_ask_streams_cites_and_opens_the_exact_span(tab: Tab, world: dict[str, Any]) -> None:
    tab.sign_in("aegis_sk_alice")
    assert tab.page.evaluate("Object.keys(sessionStorage)") == ["scdb_key"]
    tab.ask("How fast was the failover cutover?")
    chips = tab.page.locator("button.cite")
    assert chips.count() >= 1
    assert tab.page.locator(".cite.pending").count() == 0  # every citation arrived
    assert tab.page.locator("ol.sources li").count() >= 1
    tab.page.click("details.why summary")
    assert tab.page.locator("ol.timeline li").count() >= 3
    tab.shot("answer")
    final = httpx.post(
        f"{world['url']}/v1/answer",
        headers=ALICE,
        params={"scope": SCOPE},
        json={"q": "How fast was the failover cutover?", "answer": True, "top_k": 8},
    ).json()
    for c in final["answer"]["citations"]:
        tab.page.click(f"button.cite[data-cite='{c['index']}'] >> nth=0")
        unit = httpx.get(f"{world['url']}/v1/units/{c['unit_id']}", headers=ALICE).json()
        loc = c["locator"]
        expected_path = f"/ui/units/{c['unit_id']}"
        until(tab.page, f"location.pathname === {expected_path!r}")
        if loc and loc["kind"] == "char_span" and unit["chunk"]["count"] == 1:
            got = tab.page.locator("#viewer mark.hl").inner_text()
            assert got == unit["text"][loc["start"] : loc["end"]]
        tab.page.wait_for_selector("#viewer .links a")
        tab.shot("viewer")
        tab.page.keyboard.press("Escape")
        assert tab.page.locator("#viewer").is_hidden()
    assert tab.errors == []
    assert tab.axe() == []


@pytest.fixture(scope="module")
def streaming(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[Any]:
    """A second server whose answers come from a local OpenAI-compatible fake that streams."""
    from fake_openai import FakeOpenAI
    from superchargedb.demo import seed_principals

    with FakeOpenAI() as fake:
        svc = make_service(
            tmp_path_factory.mktemp("streaming"),
            embedder,
            openai_base_url=fake.url,
            openai_api_key="sk-t",
            openai_chat_model="gpt-4o-mini",
        )
        seed_principals(svc)
        svc.ingest(
            svc.authenticate("Bearer aegis_sk_alice"),
            {"units": [{"text": RUNBOOK, "doc_id": "runbook", "acl_groups": ["eng-backend"]}]},
        )
        try:
            with LiveServer(svc) as live:
                fake.live_url = live.url
                yield fake
        finally:
            svc.close()


RUNBOOK = (
    "During the Q3 game day the failover cutover took 0.8 seconds end to end. "
    "The primary region was drained before traffic moved to the standby region."
)


def test_evidence_in_a_pdf_and_an_audio_file(tab: Tab, world: dict[str, Any]) -> None:
    """A two-part question answered from the recording and the PDF: each citation opens its
    own view (the player at the moment, the page with its box)."""
    q = (
        "What did the standup cover, and how fast does the failover drill promote the standby"
        " database?"
    )
    tab.sign_in("aegis_sk_alice")
    tab.ask(q)
    final = httpx.post(
        f"{world['url']}/v1/answer",
        headers=ALICE,
        params={"scope": SCOPE},
        json={"q": q, "answer": True, "top_k": 8},
    ).json()
    cites = {c["source_uri"].split("#")[0]: c for c in final["answer"]["citations"]}
    assert {f"{SCOPE}/standup.wav", f"{SCOPE}/drill.pdf"} <= set(cites), cites
    # What the system understood (D-160) is shown: the type, the focus, the two parts.
    qi = final["answer"]["question"]
    understood = tab.page.inner_text(".meta p.understood")
    assert f"question: {qi['type']}" in understood and f"{len(qi['parts'])} parts" in understood
    assert len(qi["parts"]) == 2
    audio, pdf = cites[f"{SCOPE}/standup.wav"], cites[f"{SCOPE}/drill.pdf"]
    tab.page.click(f"button.cite[data-cite='{audio['index']}'] >> nth=0")
    start = audio["locator"]["t_start_ms"]
    until(
        tab.page,
        "(() => { const a = document.querySelector('#viewer audio');"
        f" return a && a.readyState >= 1 && Math.abs(a.currentTime * 1000 - {start}) < 50; }})()",
    )
    tab.page.keyboard.press("Escape")
    tab.page.click(f"button.cite[data-cite='{pdf['index']}'] >> nth=0")
    until(
        tab.page,
        "(() => { const i = document.querySelector('#viewer img.page');"
        " return i && i.complete && i.naturalWidth > 0; })()",
    )
    assert f"p. {pdf['locator']['page']}" in tab.page.inner_text("#viewer p.source")
    assert tab.errors == []


def test_a_chip_is_inert_until_its_citation_arrives(browser: Any, streaming: Any) -> None:
    """The model writes a sentence with its [1], then pauses: the page shows the sentence at
    once with [1] as inert text (nothing to click or focus); the citation arrives only when
    the model has finished, and then [1] is a button that opens the cited span (D-153, D-235)."""
    import threading

    gate = threading.Event()
    first = "The failover cutover took 0.8 seconds end to end [1]."
    streaming.pieces = [
        (first[:25], 0.0),
        (first[25:] + " During", 0.0),  # the next sentence has begun: the first is complete
        (" the Q3 game day the cutover took 0.8 seconds end to end [1].", gate),
    ]
    t = Tab(browser, streaming.live_url)
    try:
        t.sign_in("aegis_sk_alice")
        t.page.fill("input[name=q]", "How long did the failover cutover take?")
        t.page.press("input[name=q]", "Enter")
        t.page.wait_for_selector("p.sentences .sentence .cite.pending")
        assert not gate.is_set()  # the model is still writing
        assert t.page.locator("p.sentences .sentence").count() == 1
        assert "0.8 seconds" in t.page.inner_text("p.sentences")
        assert t.page.locator("button.cite").count() == 0
        assert t.page.locator(".cite.pending").first.get_attribute("tabindex") is None
        t.page.locator(".cite.pending").first.click()  # nothing happens
        assert t.page.locator("#viewer").is_hidden()
        assert t.page.locator(".meta details").count() == 0  # no final yet
        gate.set()
        t.page.wait_for_selector(".meta details")
        assert t.page.locator(".cite.pending").count() == 0
        assert t.page.locator("p.sentences .sentence").count() == 2
        t.page.locator("button.cite").first.click()
        t.page.wait_for_selector("#viewer mark.hl")
        assert "0.8 seconds" in t.page.inner_text("#viewer mark.hl")
        assert "openai:gpt-4o-mini" in t.page.inner_text(".meta")
        assert streaming.requests[-1]["body"]["stream"] is True
        assert t.errors == []
    finally:
        gate.set()
        t.close()


def test_text_span_in_the_third_chunk_after_astral_characters(
    tab: Tab, world: dict[str, Any]
) -> None:
    doc = world["doc"]
    third = next(u for u in units_of(world["url"], "emoji-notes") if u["chunk"]["index"] == 2)
    ls, le = third["locator"]["start"], third["locator"]["end"]
    assert doc[ls:le] == third["text"]
    start, end = ls + 17, ls + 71
    assert any(ord(ch) > 0xFFFF for ch in doc[:start])  # UTF-16 and code points differ here
    tab.sign_in("aegis_sk_alice")
    tab.page.goto(f"{world['url']}/ui/units/{third['unit_id']}?loc=char_span:{start}-{end}")
    tab.page.wait_for_selector("#viewer mark.hl")
    assert tab.page.locator("#viewer mark.hl").inner_text() == doc[start:end]
    # A Locator outside the Unit is refused in words, with no highlight.
    tab.page.goto(f"{world['url']}/ui/units/{third['unit_id']}?loc=char_span:0-10")
    tab.page.wait_for_selector("#viewer .cannot")
    assert tab.page.locator("#viewer mark").count() == 0
    assert tab.errors == []


def test_line_range_rows_are_the_cited_lines(tab: Tab, world: dict[str, Any]) -> None:
    second = next(u for u in units_of(world["url"], "deploy-log") if u["chunk"]["index"] == 1)
    a = second["locator"]["start"]
    assert second["locator"]["kind"] == "line_range"
    lines = LOG.split("\n")
    tab.sign_in("aegis_sk_alice")
    tab.page.goto(f"{world['url']}/ui/units/{second['unit_id']}?loc=line_range:{a + 2}-{a + 4}")
    tab.page.wait_for_selector("#viewer tr.hl")
    rows = tab.page.locator("#viewer tr.hl")
    got = [
        (rows.nth(i).locator("td.ln").inner_text(), rows.nth(i).locator("code").inner_text())
        for i in range(rows.count())
    ]
    assert got == [(str(n), lines[n - 1]) for n in range(a + 2, a + 5)]
    assert tab.axe() == []  # the viewer open
    tab.page.keyboard.press("Escape")
    # The modality filter reaches the query: only the log's Units come back.
    tab.page.click("#nav a[href='/ui/search']")
    tab.page.select_option("select[name=modality]", "log")
    tab.page.fill("input[name=q]", "deploy step status ok")
    tab.page.press("input[name=q]", "Enter")
    tab.page.wait_for_selector("li.hit")
    uris = set(tab.page.locator("li.hit button.link").all_inner_texts())
    assert uris == {second["source_uri"]}
    assert tab.errors == []


def test_upload_shows_progress_and_the_result(
    tab: Tab, world: dict[str, Any], tmp_path: Path
) -> None:
    f = tmp_path / "release notes.txt"
    f.write_text("Release 4.2 moves the pager rotation to Tuesdays.\n", encoding="utf-8")
    bad = tmp_path / "empty.txt"
    bad.write_bytes(b"")
    tab.sign_in("aegis_sk_alice")
    tab.page.click("#nav a[href='/ui/upload']")
    tab.page.set_input_files("input[type=file]", [str(f), str(bad)])
    tab.page.wait_for_selector("ul.uploads li:nth-child(2)")
    until(
        tab.page,
        "[...document.querySelectorAll('ul.uploads .state')].every("
        "s => /^(done|ingested|failed)/.test(s.textContent))",
        60,
    )
    states = tab.page.locator("ul.uploads li").all_inner_texts()
    good = next(s for s in states if s.startswith("release notes.txt"))
    empty = next(s for s in states if s.startswith("empty.txt"))
    assert "failed" not in good and ("done" in good or "ingested" in good), good
    assert "failed:" in empty, empty
    assert tab.page.evaluate("document.querySelector('ul.uploads progress').value") == 1
    tab.shot("upload-done")


def test_player_seeks_to_the_moment_and_pauses_at_its_end(tab: Tab, world: dict[str, Any]) -> None:
    audio = [u for u in units_of(world["url"], "standup") if u["plane"] == "audio"]
    assert audio, "the recording made no audio Units"
    unit = max(audio, key=lambda u: u["locator"]["t_start_ms"])
    loc = unit["locator"]
    tab.sign_in("aegis_sk_alice")
    tab.page.goto(
        f"{world['url']}/ui/units/{unit['unit_id']}"
        f"?loc=time_range:{loc['t_start_ms']}-{loc['t_end_ms']}"
    )
    until(
        tab.page,
        "(() => { const a = document.querySelector('#viewer audio');"
        f" return a && a.readyState >= 1 && Math.abs(a.currentTime * 1000 - {loc['t_start_ms']})"
        " < 50; })()",
    )
    now = tab.page.evaluate("document.querySelector('#viewer audio').currentTime")
    assert abs(now - loc["t_start_ms"] / 1000) <= 0.05
    tab.page.evaluate("document.querySelector('#viewer audio').play()")
    until(tab.page, "document.querySelector('#viewer audio').paused")
    end = tab.page.evaluate("document.querySelector('#viewer audio').currentTime")
    assert abs(end - loc["t_end_ms"] / 1000) <= 0.05
    media = [s for u, s in tab.statuses if "/v1/objects/" in u]
    assert 206 in media, media
    tab.shot("player")
    assert tab.errors == []


def test_the_spec_question_opens_the_keynote_moment(tab: Tab, world: dict[str, Any]) -> None:
    """The demo's headline: the spec's question cites a moment of the keynote video, and the
    citation opens a <video> at that moment."""
    q = "Where does the Q3 keynote demo the failover, and how fast was the cutover?"
    tab.sign_in("aegis_sk_alice")
    tab.ask(q)
    final = httpx.post(
        f"{world['url']}/v1/answer", headers=ALICE, json={"q": q, "answer": True, "top_k": 8}
    ).json()
    moments = [c for c in final["answer"]["citations"] if c["locator"]["kind"] == "time_range"]
    assert moments, final["answer"]
    c = moments[0]
    tab.page.click(f"button.cite[data-cite='{c['index']}'] >> nth=0")
    start = c["locator"]["t_start_ms"]
    until(
        tab.page,
        "(() => { const v = document.querySelector('#viewer video');"
        f" return v && v.readyState >= 1 && Math.abs(v.currentTime * 1000 - {start}) < 50; }})()",
    )
    tab.shot("keynote")
    assert tab.errors == []


def test_a_video_shot_shows_its_keyframe(tab: Tab, world: dict[str, Any]) -> None:
    """A shot of the keynote opens the player at the shot and, below it, the shot's keyframe
    (kept at derivation, D-236) through the preview route: the same pixels the API serves."""
    shots = [u for u in units_of(world["url"], "q3-keynote") if u["modality"] == "video_shot"]
    assert shots and all(s["preview"] for s in shots), shots
    shot = shots[len(shots) // 2]
    loc = shot["locator"]
    tab.sign_in("aegis_sk_alice")
    tab.page.goto(
        f"{world['url']}/ui/units/{shot['unit_id']}"
        f"?loc=time_range:{loc['t_start_ms']}-{loc['t_end_ms']}"
    )
    size = until(
        tab.page,
        "(() => { const i = document.querySelector('#viewer figure.keyframe img');"
        " return i && i.complete && i.naturalWidth > 0 && [i.naturalWidth, i.naturalHeight]; })()",
    )
    served = httpx.get(world["url"] + shot["preview"], headers=ALICE)
    from PIL import Image

    assert served.headers["content-type"] == "image/jpeg"
    assert list(Image.open(io.BytesIO(served.content)).size) == size
    assert tab.page.locator("#viewer video").count() == 1
    caption = tab.page.inner_text("#viewer figure.keyframe figcaption")
    assert caption == f"Keyframe of shot {loc['shot_idx'] + 1} (its middle frame)"
    tab.shot("keyframe")
    assert tab.axe() == []
    assert tab.errors == []


def test_page_box_lands_where_the_locator_says(tab: Tab, world: dict[str, Any]) -> None:
    from PIL import Image

    boxes = [
        u for u in units_of(world["url"], "drill") if (u["locator"] or {}).get("kind") == "bbox"
    ]
    assert boxes, "the PDF made no Units with a page box"
    unit = boxes[0]
    loc = unit["locator"]
    tab.sign_in("aegis_sk_alice")
    box = ",".join(str(v) for v in loc["box"])
    tab.page.goto(f"{world['url']}/ui/units/{unit['unit_id']}?loc=bbox:{loc['page']}:{box}")
    until(
        tab.page,
        "(() => { const i = document.querySelector('#viewer img.page');"
        " return i && i.complete && i.naturalWidth > 0; })()",
    )
    rect = tab.page.evaluate(
        "(() => { const r = document.querySelector('#viewer img.page').getBoundingClientRect();"
        " return [r.left, r.top, r.width]; })()"
    )
    shot = Image.open(io.BytesIO(tab.page.screenshot())).convert("RGB")
    left, top, width = rect
    k = width / 612.0  # a US-letter page is 612 points wide
    x0, y0, x1, y1 = (
        left + loc["box"][0] * k,
        top + loc["box"][1] * k,
        left + loc["box"][2] * k,
        top + loc["box"][3] * k,
    )
    red = [
        (x, y)
        for y in range(int(top), min(shot.height, int(top + width * 11 / 8.5)))
        for x in range(int(left), min(shot.width, int(left + width)))
        if (p := shot.getpixel((x, y)))[0] > 170 and p[1] < 120 and p[2] < 120
    ]
    assert red, "no box colour in the screenshot"
    xs, ys = [p[0] for p in red], [p[1] for p in red]
    found = (min(xs), min(ys), max(xs) + 1, max(ys) + 1)
    for got, want in zip(found, (x0, y0, x1, y1), strict=True):
        assert abs(got - want) <= 2, (found, (x0, y0, x1, y1))
    tab.shot("page-box")
    # The next page, under the same ACL, without the box; a page past the end says so.
    first = tab.page.evaluate("document.querySelector('#viewer img.page').src")
    tab.page.click("#viewer button:has-text('Next page')")
    until(
        tab.page,
        "(() => { const i = document.querySelector('#viewer img.page');"
        " return i.src.endsWith('?page=2') && i.complete && i.naturalWidth > 0; })()",
    )
    assert tab.page.evaluate("document.querySelector('#viewer img.page').src") != first
    tab.page.click("#viewer button:has-text('Next page')")
    tab.page.wait_for_selector("#viewer p.error:not([hidden])")
    assert "no page 3" in tab.page.inner_text("#viewer p.error")
    assert tab.page.evaluate("document.querySelector('#viewer img.page').src").endswith("page=2")
    r = httpx.get(
        f"{world['url']}/v1/units/{unit['unit_id']}/preview",
        params={"page": 2},
        headers={"Authorization": "Bearer aegis_sk_carol"},
    )
    assert r.status_code == 404  # another tenant: the same 404 as for page 1


def red_runs(shot: Any, rect: list[float]) -> list[tuple[int, int, int, int]]:
    """The highlight colour's pixels inside the page image, as boxes: one per run of rows
    (line boxes are stacked, with white between them)."""
    left, top, width, height = rect
    red = [
        (x, y)
        for y in range(int(top), min(shot.height, int(top + height)))
        for x in range(int(left), min(shot.width, int(left + width)))
        if (p := shot.getpixel((x, y)))[0] > 170 and p[1] < 120 and p[2] < 120
    ]
    runs: list[list[tuple[int, int]]] = []
    for x, y in sorted(red, key=lambda p: p[1]):
        if runs and y - runs[-1][-1][1] <= 1:
            runs[-1].append((x, y))
        else:
            runs.append([(x, y)])
    return [
        (min(p[0] for p in r), min(p[1] for p in r), max(p[0] for p in r) + 1, r[-1][1] + 1)
        for r in runs
    ]


def test_a_citations_line_boxes_are_drawn_each_where_it_says(
    tab: Tab, world: dict[str, Any]
) -> None:
    """A citation with ``boxes`` (the localizer's line boxes, issue 22): each box is drawn at
    ``box * rendered width / page width`` within 2 px, and the union ``box`` is not."""
    from PIL import Image

    from superchargedb.locate_words import narrow_boxes

    (unit,) = [u for u in units_of(world["url"], "drill") if "Minute one" in u["text"]]
    r = httpx.get(
        f"{world['url']}/v1/units/{unit['unit_id']}", headers=ALICE, params={"words": "true"}
    )
    text, words = unit["text"], r.json()["words"]
    cited = narrow_boxes(unit["locator"], words, text.index("checks"), text.index(" pages"))
    assert len(cited["boxes"]) == 2, cited
    lines = ";".join(",".join(str(v) for v in b) for b in cited["boxes"])
    param = f"bbox:{cited['page']}:{','.join(str(v) for v in cited['box'])}:{lines}"
    tab.sign_in("aegis_sk_alice")
    tab.page.goto(f"{world['url']}/ui/units/{unit['unit_id']}?loc={param}")
    until(
        tab.page,
        "(() => { const i = document.querySelector('#viewer img.page');"
        " return i && i.complete && i.naturalWidth > 0; })()",
    )
    rect = tab.page.evaluate(
        "(() => { const r = document.querySelector('#viewer img.page').getBoundingClientRect();"
        " return [r.left, r.top, r.width, r.height]; })()"
    )
    shot = Image.open(io.BytesIO(tab.page.screenshot())).convert("RGB")
    left, top, width, _ = rect
    k = width / 612.0  # rendered width / page width (US letter, points)
    want = [
        (left + b[0] * k, top + b[1] * k, left + b[2] * k, top + b[3] * k) for b in cited["boxes"]
    ]
    found = red_runs(shot, rect)
    assert len(found) == len(want), (found, want)  # no union box around them
    for got, exp in zip(found, want, strict=True):
        assert all(abs(g - e) <= 2 for g, e in zip(got, exp, strict=True)), (got, exp)
    assert "boxes the 2 lines" in tab.page.inner_text("#viewer p.note")
    # A permalink whose line box lies outside the Unit is refused in words, never drawn.
    x0, y0, x1, y1 = unit["locator"]["box"]
    outside = f"bbox:{cited['page']}:{x0},{y0},{x1},{y1}:{x0},{y0 - 40},{x1},{y0}"
    tab.page.goto(f"{world['url']}/ui/units/{unit['unit_id']}?loc={outside}")
    tab.page.wait_for_selector("#viewer p.cannot")
    assert tab.page.locator("#viewer img.page").count() == 0
    assert tab.errors == []


def test_hostile_content_stays_text(tab: Tab, world: dict[str, Any]) -> None:
    tab.sign_in("aegis_sk_alice")
    tab.page.click("#nav a[href='/ui/search']")
    tab.page.fill("input[name=q]", "payload review must stay text")
    tab.page.press("input[name=q]", "Enter")
    tab.page.wait_for_selector("li.hit")
    first = tab.page.locator("li.hit").first
    assert "<script>" in first.inner_text()
    first.locator("button.link").click()
    tab.page.wait_for_selector("#viewer pre")
    assert "onerror" in tab.page.locator("#viewer").inner_text()
    assert tab.page.evaluate("window.__pwned") is None
    assert tab.page.locator("main img, #viewer img, main script").count() == 0
    tab.shot("search")
    assert tab.errors == []
    assert tab.axe() == []


def test_a_second_principal_finds_no_trace(tab: Tab, world: dict[str, Any]) -> None:
    secret = "cutover took 0.8 seconds"
    tab.sign_in("aegis_sk_alice")
    tab.ask("How fast was the failover cutover?")
    assert secret in tab.page.inner_text("main")
    tab.page.click("button.cite >> nth=0")
    tab.page.wait_for_selector("#viewer .links a")
    alice_unit = tab.page.evaluate("location.pathname + location.search")
    tab.page.keyboard.press("Escape")
    tab.page.click("#who button")  # sign out
    tab.page.wait_for_selector("input[type=password]")
    assert tab.page.evaluate("sessionStorage.length") == 0
    tab.sign_in("aegis_sk_carol")
    # carol's free tier has no answers: the refusal is shown in words.
    tab.page.fill("input[name=q]", "How fast was the failover cutover?")
    tab.page.press("input[name=q]", "Enter")
    tab.page.wait_for_selector("main .error")
    assert "402" in tab.page.inner_text("main .error")
    tab.page.click("#nav a[href='/ui/search']")
    tab.page.fill("input[name=q]", "failover cutover seconds")
    tab.page.press("input[name=q]", "Enter")
    tab.page.wait_for_selector("main section p")
    tab.page.goto(world["url"] + alice_unit)  # a reload, through whatever the cache holds
    tab.page.wait_for_selector("#viewer .error")
    tab.page.reload()
    tab.page.wait_for_selector("#viewer .error")
    text = tab.page.inner_text("body")
    assert secret not in text and "failover-runbook" not in text
    storage = tab.page.evaluate("JSON.stringify(Object.entries(sessionStorage))")
    assert "alice" not in storage and secret not in storage
    assert not [m for m in tab.log if secret in m or "failover-runbook" in m]


def test_media_without_a_session_is_a_visible_error(tab: Tab, world: dict[str, Any]) -> None:
    unit = next(u for u in units_of(world["url"], "standup") if u["plane"] == "audio")
    tab.sign_in("aegis_sk_alice")
    tab.ctx.clear_cookies()  # the key still reads the Unit; the player has no session
    loc = unit["locator"]
    tab.page.goto(
        f"{world['url']}/ui/units/{unit['unit_id']}"
        f"?loc=time_range:{loc['t_start_ms']}-{loc['t_end_ms']}"
    )
    tab.page.wait_for_selector("#viewer p.error:not([hidden])")
    assert "could not be loaded" in tab.page.inner_text("#viewer")


def test_keyboard_only_walk(tab: Tab) -> None:
    tab.sign_in("aegis_sk_alice")
    tab.page.locator("body").focus()
    tab.page.evaluate("document.activeElement.blur()")
    for _ in range(30):
        tab.page.keyboard.press("Tab")
        if tab.page.evaluate("document.activeElement.name") == "q":
            break
    else:
        raise AssertionError("Tab never reached the question")
    tab.page.keyboard.type("How fast was the failover cutover?")
    tab.page.keyboard.press("Enter")
    tab.page.wait_for_selector(".meta details")
    for _ in range(40):
        tab.page.keyboard.press("Tab")
        if tab.page.evaluate("document.activeElement.classList.contains('cite')"):
            break
    else:
        raise AssertionError("Tab never reached [1]")
    tab.page.keyboard.press("Enter")
    tab.page.wait_for_selector("#viewer .links a")
    assert tab.page.evaluate("document.activeElement.classList.contains('close')")
    tab.page.keyboard.press("Escape")
    assert tab.page.locator("#viewer").is_hidden()
    assert tab.page.evaluate("document.activeElement.classList.contains('cite')")


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_every_view_is_accessible_and_fits(
    browser: Any, world: dict[str, Any], width: int, height: int
) -> None:
    t = Tab(browser, world["url"], width, height)
    try:
        t.page.goto(world["url"] + "/ui/ask")
        t.page.wait_for_selector("input[type=password]")
        assert t.axe() == []
        t.shot("signin")
        t.sign_in("aegis_sk_alice")
        for path, ready in [
            ("/ui/ask", "input[name=q]"),
            ("/ui/search", "input[name=q]"),
            ("/ui/docs", "table.grid"),
            ("/ui/upload", ".drop"),
            ("/ui/ops", ".card dl"),
        ]:
            t.page.click(f"#nav a[href='{path}']")
            t.page.wait_for_selector(ready)
            assert t.axe() == [], path
            wide = t.page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width, (path, wide)
            t.shot(path.rsplit("/", 1)[-1])
        # The answer, and the viewer on its first citation (the keynote's shot: the player and
        # its keyframe).
        t.page.click("#nav a[href='/ui/ask']")
        t.ask("Where does the Q3 keynote demo the failover, and how fast was the cutover?")
        t.page.click("details.why summary")
        for view, ready in (("answer", None), ("keynote", "#viewer figure.keyframe img")):
            if ready:
                t.page.click("button.cite >> nth=0")
                t.page.wait_for_selector(ready)
                until(t.page, f"document.querySelector({ready!r}).complete")
            assert t.axe() == [], view
            wide = t.page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width, (view, wide)
            if width < 1280:  # the wide ones come from the tests that open each view
                t.shot(view)
        assert t.errors == []
    finally:
        t.close()
