"""Media derivation with the real engines (pdfium, Tesseract, ffmpeg, Whisper tiny.en).

Every fixture is generated here: a reportlab PDF, its render as a scan, espeak-ng speech with
known offsets, and an ffmpeg video of solid-colour shots carrying that speech.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import struct
import subprocess
import threading
import wave
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from superchargedb.ingest.derive import (
    DerivationError,
    Derived,
    DeriveOptions,
    MediaLimits,
    derive,
    run_engine,
    sniff,
)
from superchargedb.ingest.derive_ocr import HttpCaptioner
from superchargedb.ingest.utterances import group_words, t_fragment

pytest.importorskip("pypdfium2")
pytest.importorskip("reportlab")
pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("tesseract", "ffmpeg", "ffprobe", "espeak-ng")),
    reason="needs tesseract, ffmpeg and espeak-ng (scripts/setup.sh installs them)",
)

LETTER = (612.0, 792.0)
PARAGRAPHS = [  # (x, y of the frame's bottom, text), reportlab coordinates (bottom-left origin)
    (
        72,
        640,
        "Aurora storage engines keep every page in a write-ahead log. Checkpoints copy "
        "pages back to the main file when the log grows too large.",
    ),
    (
        72,
        480,
        "Quarterly revenue grew by twelve percent while operating costs stayed flat, "
        "mostly thanks to cheaper cloud contracts.",
    ),
    (
        320,
        300,
        "Penguins huddle together during the Antarctic winter to conserve heat and survive storms.",
    ),
    (72, 120, "Volcanic islands form where magma rises through thin oceanic crust."),
]
SEARCHED = ["Checkpoints", "revenue", "Penguins", "Volcanic", "contracts", "magma"]
SENTENCES = [
    "The weather today is sunny and warm.",
    "Please send the quarterly report to the finance team.",
    "Our meeting starts at nine in the morning.",
]
SHOTS_S = [3.6, 3.2, 5.0]  # two solid-colour shots and a slide; cuts at 3.6 s and 6.8 s


def span(u: Derived) -> tuple[int, int]:
    assert u.locator.t_start_ms is not None and u.locator.t_end_ms is not None
    return u.locator.t_start_ms, u.locator.t_end_ms


def words_of(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def iou(a: Any, b: Any) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def contains(outer: Any, inner: Any, tol: float = 0.01) -> bool:
    return (
        outer[0] <= inner[0] + tol
        and outer[1] <= inner[1] + tol
        and outer[2] >= inner[2] - tol
        and outer[3] >= inner[3] - tol
    )


def pdfium_word_boxes(pdf_path: Path, word: str, page: int = 0) -> list[tuple[float, ...]]:
    """Independent ground truth: every occurrence of ``word`` via pdfium's own search, as the
    union of its tight char boxes, flipped to a top-left origin (unrotated Letter page)."""
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(pdf_path))
    pg = pdf[page]
    height = pg.get_height()
    tp = pg.get_textpage()
    searcher = tp.search(word, match_case=True, match_whole_word=True)
    boxes = []
    while (hit := searcher.get_next()) is not None:
        i, n = hit
        cb = [tp.get_charbox(j) for j in range(i, i + n)]
        left, bottom = min(c[0] for c in cb), min(c[1] for c in cb)
        right, top = max(c[2] for c in cb), max(c[3] for c in cb)
        boxes.append((left, height - top, right, height - bottom))
    pdf.close()
    return boxes


def make_pdf(path: Path, *, with_scan_page: Path | None = None) -> Path:
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.pdfgen import canvas
    from reportlab.platypus import Frame, Paragraph

    c = canvas.Canvas(str(path), pagesize=LETTER)
    style = getSampleStyleSheet()["BodyText"]
    for x, y, text in PARAGRAPHS:
        Frame(x, y, 230, 120, showBoundary=0).addFromList([Paragraph(text, style)], c)
    c.showPage()
    if with_scan_page is not None:  # a page that is only a picture of page 1: no text layer
        c.drawImage(str(with_scan_page), 0, 0, width=LETTER[0], height=LETTER[1])
        c.showPage()
    c.save()
    return path


def render_png(pdf_path: Path, out: Path, dpi: int) -> Path:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(pdf_path))
    pdf[0].render(scale=dpi / 72).to_pil().save(out)
    pdf.close()
    return out


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("media")
    pdf = make_pdf(d / "doc.pdf")
    return {"dir": d, "pdf": pdf, "png200": render_png(pdf, d / "page200.png", 200)}


# --------------------------------------------------------------------------- PDF


def test_pdf_paragraphs_have_tight_boxes(media: dict[str, Any]) -> None:
    pdf = media["pdf"]
    units = derive(pdf, "application/pdf", None)
    assert len(units) == len(PARAGRAPHS)
    page_area = LETTER[0] * LETTER[1]
    for u in units:
        assert (u.modality, u.plane, u.fragment) == ("pdf_page", "doc_visual", "#page=1")
        assert u.locator.kind == "bbox" and u.locator.page == 1
        b = u.locator.box
        assert b is not None and 0 <= b[0] < b[2] <= LETTER[0] and 0 <= b[1] < b[3] <= LETTER[1]
        assert (b[2] - b[0]) * (b[3] - b[1]) <= 0.30 * page_area
    for i, (_, _, text) in enumerate(PARAGRAPHS):
        owners = [u for u in units if words_of(text) == words_of(u.text)]
        assert len(owners) == 1, f"paragraph {i} is not exactly one Unit"
        box = owners[0].locator.box
        for word in SEARCHED:
            truth = pdfium_word_boxes(pdf, word)
            assert truth, word
            for wb in truth:
                inside = contains(box, wb)
                center = ((wb[0] + wb[2]) / 2, (wb[1] + wb[3]) / 2)
                center_in = box[0] <= center[0] <= box[2] and box[1] <= center[1] <= box[3]
                if word in text:
                    assert inside, f"{word} {wb} not inside its paragraph box {box}"
                else:
                    assert not center_in, f"{word} of another paragraph inside {box}"


def test_scan_ocr_matches_text_layer(media: dict[str, Any]) -> None:
    scale = 200 / 72
    units = derive(media["png200"], "image/png", "scan")
    assert units and all(u.modality == "scan" and u.plane == "doc_visual" for u in units)
    assert all(u.locator.page == 1 and u.fragment == "#page=1" for u in units)
    ocr = [(w[0], w[1:]) for u in units for w in u.meta["words"]]
    for word in SEARCHED:
        (truth,) = pdfium_word_boxes(media["pdf"], word)
        found = [b for t, b in ocr if re.sub(r"\W", "", t) == word]
        assert found, f"OCR missed {word}"
        best = max(iou([v / scale for v in b], truth) for b in found)
        assert best >= 0.5, (word, best)
    # every paragraph's box is in pixels of the image and holds its own words
    for u in units:
        for _, b in [(w[0], w[1:]) for w in u.meta["words"]]:
            assert contains(u.locator.box, b)


def test_pdf_page_without_text_layer_is_ocrd_in_points(media: dict[str, Any]) -> None:
    png = render_png(media["pdf"], media["dir"] / "page150.png", 150)
    pdf = make_pdf(media["dir"] / "mixed.pdf", with_scan_page=png)
    units = derive(pdf, "application/pdf", "pdf_page")
    page2 = [u for u in units if u.locator.page == 2]
    assert page2 and all(u.meta["source"] == "ocr" and u.fragment == "#page=2" for u in page2)
    assert {u.meta["source"] for u in units if u.locator.page == 1} == {"text_layer"}
    ocr = [(re.sub(r"\W", "", w[0]), w[1:]) for u in page2 for w in u.meta["words"]]
    for word in ("Penguins", "revenue", "Checkpoints"):
        (truth,) = pdfium_word_boxes(pdf, word, page=0)  # page 2 is a picture of page 1
        assert max(iou(b, truth) for t, b in ocr if t == word) >= 0.5, word


def test_rotated_page_boxes_follow_the_displayed_page(media: dict[str, Any]) -> None:
    import ctypes

    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    for rot in (90, 270):
        pdf = pdfium.PdfDocument(str(media["pdf"]))
        pdf[0].set_rotation(rot)
        pdf[0].set_cropbox(20, 30, 600, 780)
        path = media["dir"] / f"rot{rot}.pdf"
        pdf.save(str(path))
        pdf.close()
        units = derive(path, "application/pdf", None)
        unit = next(u for u in units if "Penguins" in u.text)
        ours = next(w[1:] for w in unit.meta["words"] if w[0] == "Penguins")
        # pdfium's own page -> device mapping of every char of the word
        pdf = pdfium.PdfDocument(str(path))
        pg = pdf[0]
        w, h = pg.get_size()
        tp = pg.get_textpage()
        i, n = tp.search("Penguins").get_next()
        k, pts = 1000, []
        for j in range(i, i + n):
            left, bottom, right, top = tp.get_charbox(j)
            for x, y in ((left, bottom), (right, top)):
                dx, dy = ctypes.c_int(), ctypes.c_int()
                raw.FPDF_PageToDevice(pg.raw, 0, 0, int(w * k), int(h * k), 0, x, y, dx, dy)
                pts.append((dx.value / k, dy.value / k))
        pdf.close()
        truth = (
            min(p[0] for p in pts),
            min(p[1] for p in pts),
            max(p[0] for p in pts),
            max(p[1] for p in pts),
        )
        assert (w, h) == (750.0, 580.0)
        assert all(abs(a - b) < 0.02 for a, b in zip(ours, truth, strict=True)), (ours, truth)
        assert unit.locator.box is not None and contains(unit.locator.box, ours)


# --------------------------------------------------------------------------- images


TOC = [("Introduction", 1), ("Storage engines", 4), ("Checkpoints and recovery", 9)]


def make_toc_pdf(path: Path) -> Path:
    """A table of contents: titles, dot leaders, page numbers (Helvetica 10 pt)."""
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=LETTER)
    c.setFont("Helvetica", 10)
    y = 700
    for title, page in TOC:
        c.drawString(72, y, title)
        x = 72 + c.stringWidth(title, "Helvetica", 10) + 6
        while x < 520:
            c.drawString(x, y, ".")
            x += 6
        c.drawRightString(540, y, str(page))
        y -= 18
    c.drawString(72, y - 30, "A plain sentence with its full stop. Another, in it, is here.")
    c.showPage()
    c.save()
    return path


def test_scan_preparation_erases_leaders_and_upscales_small_type(tmp_path: Path) -> None:
    from PIL import Image

    from superchargedb.ingest.media_worker import leader_mask, ocr_prepare, otsu, text_height

    pdf = make_toc_pdf(tmp_path / "toc.pdf")
    png = render_png(pdf, tmp_path / "toc150.png", 150)
    gray = np.asarray(Image.open(png).convert("L"))
    height = text_height(gray)
    assert height is not None and 10 <= height <= 18  # 10-pt lines at 150 dpi
    ink = gray < otsu(gray)
    mask = leader_mask(ink, height)
    scale = 150 / 72
    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    # every leader row is erased, between each title and its page number, and nothing else:
    # not the sentence's full stops, not the dots of its i's, not the titles' letters
    assert len(rows) and rows.max() < (792 - 700 + 2 * 18 + 4) * scale
    assert cols.min() > 72 * scale and cols.max() < 530 * scale
    for i in range(len(TOC)):
        band = mask[int((792 - 700 + 18 * i - 4) * scale) : int((792 - 700 + 18 * i + 2) * scale)]
        assert band.any(axis=1).sum() >= 1 and band.sum() > 30 * 2, i
    sentence = slice(
        int((792 - 700 + 54 + 30 - 12) * scale), int((792 - 700 + 54 + 30 + 4) * scale)
    )
    assert not mask[sentence].any()
    img, f, measured, erased = ocr_prepare(Image.open(png).convert("RGB"), 24.0, 50_000_000)
    assert img.mode == "L" and erased == int(mask.sum()) and measured == height
    w, h = Image.open(png).size
    assert abs(f - 24.0 / height) < 1e-9 and img.size == (round(w * f), round(h * f))
    # a 300-dpi render already has tall enough lines: left at its size
    png300 = render_png(pdf, tmp_path / "toc300.png", 300)
    assert ocr_prepare(Image.open(png300), 24.0, 50_000_000)[1] == 1.0


def test_table_of_contents_scan_reads_no_leader_junk(tmp_path: Path) -> None:
    pdf = make_toc_pdf(tmp_path / "toc.pdf")
    png = render_png(pdf, tmp_path / "toc150.png", 150)
    units = derive(png, "image/png", "scan")
    words = [re.sub(r"\W", "", w[0]) for u in units for w in u.meta["words"]]
    titles = {w for title, _ in TOC for w in title.split()}
    sentence = set(
        re.findall(r"\w+", "A plain sentence with its full stop. Another, in it, is here.")
    )
    assert titles <= set(words)
    junk = [w for w in words if w and w not in titles | sentence and not w.isdigit()]
    assert not junk, junk
    # boxes are in the pixels of the image as given, not of the upscaled copy
    (truth,) = pdfium_word_boxes(pdf, "Checkpoints")
    box = next(w[1:] for u in units for w in u.meta["words"] if w[0] == "Checkpoints")
    assert iou([v / (150 / 72) for v in box], truth) >= 0.5


def test_visual_image_with_exif_and_ocr(tmp_path: Path) -> None:
    from PIL import Image, ImageDraw, ImageFont

    im = Image.new("RGB", (900, 300), "white")
    ImageDraw.Draw(im).text(
        (40, 100), "HARBOUR BRIDGE TOURS", fill="black", font=ImageFont.load_default(size=60)
    )
    exif = Image.Exif()
    exif[0x010F], exif[0x0110] = "Canon", "EOS 5D"
    exif.get_ifd(0x8769)[0x9003] = "2023:06:01 12:34:56"
    exif.get_ifd(0x8769)[0x9011] = "+02:00"
    path = tmp_path / "photo.jpg"
    im.save(path, quality=95, exif=exif)
    (u,) = derive(path, "image/jpeg", None)
    assert (u.modality, u.plane) == ("image", "visual")
    assert u.locator.box == (0.0, 0.0, 900.0, 300.0) and u.locator.page == 1
    assert {"harbour", "bridge", "tours"} <= words_of(u.text)
    assert "Canon EOS 5D" in u.text and "900x300" in u.text
    assert u.meta["captured_at"] == 1685615696000  # epoch ms (OffsetTimeOriginal applied)
    assert u.meta["captured_at_iso"] == "2023-06-01T10:34:56Z"


class _ChatHandler(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []
    status = 200

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _ChatHandler.seen.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        )
        reply = {
            "choices": [
                {"message": {"role": "assistant", "content": "A red square on white paper."}}
            ]
        }
        data = json.dumps(reply).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def chat_server() -> Iterator[str]:
    srv = HTTPServer(("127.0.0.1", 0), _ChatHandler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_http_captioner_against_a_local_server(tmp_path: Path, chat_server: str) -> None:
    from PIL import Image

    path = tmp_path / "red.png"
    Image.new("RGB", (64, 64), "red").save(path)
    cap = HttpCaptioner(chat_server, "llava-test", api_key="sk-local")
    (u,) = derive(path, "image/png", "image", options=DeriveOptions(captioner=cap))
    assert u.text.startswith("A red square on white paper.")
    assert u.meta["caption"] == "A red square on white paper."
    req = _ChatHandler.seen[-1]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-local"
    content = req["body"]["messages"][0]["content"]
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")
    _ChatHandler.status = 500  # a failing captioner degrades to OCR + metadata
    try:
        (u2,) = derive(path, "image/png", None, options=DeriveOptions(captioner=cap))
    finally:
        _ChatHandler.status = 200
    assert "caption" not in u2.meta and "64x64" in u2.text


# --------------------------------------------------------------------------- audio and video


def espeak_track(d: Path) -> tuple[Path, list[tuple[float, float]]]:
    """Sentences with known silences between them; true (start, end) of each in seconds."""
    rate, gaps = 22050, [0.6, 1.4, 1.2, 0.9]
    pcm = [np.zeros(int(gaps[0] * rate), dtype=np.int16)]
    offset, truth = gaps[0], []
    for i, sentence in enumerate(SENTENCES):
        clip = d / f"s{i}.wav"
        subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(clip), sentence], check=True)
        with wave.open(str(clip)) as w:
            assert w.getframerate() == rate
            x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
        loud = np.flatnonzero(np.abs(x) > 0.02 * np.abs(x).max())
        truth.append((offset + loud[0] / rate, offset + (loud[-1] + 1) / rate))
        pcm += [x, np.zeros(int(gaps[i + 1] * rate), dtype=np.int16)]
        offset += len(x) / rate + gaps[i + 1]
    out = d / "speech.wav"
    with wave.open(str(out), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.concatenate(pcm).tobytes())
    return out, truth


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("speech")
    wav, truth = espeak_track(d)
    return {"dir": d, "wav": wav, "truth": truth, "units": derive(wav, "audio/wav", None)}


def test_utterances_match_sentence_boundaries(speech: dict[str, Any]) -> None:
    units: list[Derived] = speech["units"]
    assert units and all((u.modality, u.plane) == ("utterance", "audio") for u in units)
    for u in units:
        a, b = span(u)
        assert u.locator.kind == "time_range" and 0 < b - a <= 15_000
        assert u.fragment == t_fragment(a)
    for (start, end), sentence in zip(speech["truth"], SENTENCES, strict=True):
        hits = [
            u
            for u in units
            if abs(span(u)[0] / 1000 - start) <= 0.5 and abs(span(u)[1] / 1000 - end) <= 0.5
        ]
        assert len(hits) == 1, (sentence, start, end, [(span(u), u.text) for u in units])
        assert len(words_of(hits[0].text) & words_of(sentence)) >= 3, hits[0].text


def test_utterance_grouping_breaks_on_segments_sentences_pauses_and_caps_at_15s() -> None:
    # 80 s of continuous speech in one segment, no sentence ends: pieces of at most 15 s
    words = [[" word", i * 0.4, i * 0.4 + 0.35, 0.9, 1] for i in range(200)]
    groups = group_words(words)
    assert len(groups) >= 6 and all(g[-1][2] - g[0][1] <= 15.0 for g in groups)
    assert all(g[-1][2] - g[0][1] >= 5.0 for g in groups[:-1])  # no splinters
    # a segment boundary, a sentence end (not "Mr.") and a long pause each start an utterance
    words = [
        [" Hello", 0.0, 0.4, 1, 1],
        [" Mr.", 0.5, 0.8, 1, 1],
        [" Smith.", 0.9, 1.3, 1, 1],
        [" Yes", 1.4, 1.7, 1, 1],
        [" we", 1.8, 2.0, 1, 2],
        [" can", 3.0, 3.3, 1, 2],
    ]
    assert [len(g) for g in group_words(words)] == [3, 1, 1, 1]


def make_video(d: Path, wav: Path, shots_s: list[float] = SHOTS_S, fps: int = 25) -> Path:
    """An MP4 of solid-colour shots of known durations (the last one a slide reading "QUARTERLY
    REVIEW") over ``wav``, cut to the shots' total length; made with ffmpeg."""
    from PIL import Image, ImageDraw, ImageFont

    slide = d / "slide.png"
    im = Image.new("RGB", (640, 360), (20, 40, 160))
    ImageDraw.Draw(im).text(
        (40, 140), "QUARTERLY REVIEW", fill="white", font=ImageFont.load_default(size=56)
    )
    im.save(slide)
    colours = ["red", "green", "yellow", "magenta", "cyan", "white"]
    argv = ["ffmpeg", "-v", "error", "-y"]
    for colour, dur in zip(colours, shots_s[:-1], strict=False):
        argv += ["-f", "lavfi", "-i", f"color=c={colour}:s=640x360:r={fps}:d={dur}"]
    argv += ["-loop", "1", "-framerate", str(fps), "-t", str(shots_s[-1]), "-i", str(slide)]
    argv += ["-i", str(wav)]
    n = len(shots_s)
    inputs = "".join(f"[{i}:v]" for i in range(n))
    graph = f"{inputs}concat=n={n}:v=1:a=0,format=yuv420p[v];[{n}:a]apad[a]"
    argv += ["-filter_complex", graph, "-map", "[v]", "-map", "[a]", "-t", str(sum(shots_s))]
    argv += ["-c:v", "libx264", "-c:a", "aac"]
    out = d / "clip.mp4"
    argv += ["-metadata", "creation_time=2024-05-01T10:00:00Z", str(out)]
    subprocess.run(argv, check=True)
    return out


@pytest.fixture(scope="module")
def video(speech: dict[str, Any]) -> dict[str, Any]:
    out = make_video(speech["dir"], speech["wav"])
    return {"path": out, "units": derive(out, "video/mp4", None)}


@pytest.mark.slow  # ~12 s on a quiet 2-core machine, 20+ s under load (ASR + encode + 3 OCRs)
def test_video_shots_and_transcript(video: dict[str, Any]) -> None:
    units: list[Derived] = video["units"]
    shots = sorted(
        (u for u in units if u.modality == "video_shot"), key=lambda u: u.locator.shot_idx or 0
    )
    utts = [u for u in units if u.modality == "utterance"]
    assert len(shots) == len(SHOTS_S) and utts
    frame_ms = 40
    edges = np.cumsum([0.0, *SHOTS_S]) * 1000
    for i, s in enumerate(shots):
        a, b = span(s)
        assert (s.plane, s.locator.kind, s.locator.shot_idx) == ("visual", "time_range", i)
        assert abs(a - edges[i]) <= frame_ms and abs(b - edges[i + 1]) <= frame_ms
        assert s.fragment == t_fragment(a)
        assert s.meta["captured_at_iso"] == "2024-05-01T10:00:00Z"
        # an utterance said during the shot is in its text; one across a cut is split by word
        for u in utts:
            ua, ub = span(u)
            if a - 100 <= ua and ub <= b + 100:
                assert words_of(u.text) <= words_of(s.meta["transcript"]), (i, u.text, s.text)
            if ua < b and ub > a:
                assert s.meta["transcript"] and s.meta["transcript"] in s.text
    spoken = set().union(*(words_of(u.text) for u in utts))
    assert spoken == set().union(*(words_of(s.meta["transcript"]) for s in shots))
    assert {"quarterly", "review"} <= words_of(shots[2].meta["ocr_text"])
    assert all(u.plane == "audio" and u.meta["captured_at"] == 1714557600000 for u in utts)


# --------------------------------------------------------------------------- bad input


def png_bytes(w: int = 8, h: int = 8) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (w, h), "white").save(buf, format="PNG")
    return buf.getvalue()


def test_bad_inputs_are_clear_derivation_errors(tmp_path: Path, speech: dict[str, Any]) -> None:
    cases: list[tuple[str, bytes, str, str | None, str]] = [
        (
            "bad.pdf",
            b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\ngarbage",
            "application/pdf",
            None,
            "malformed PDF",
        ),
        ("empty.bin", b"", "application/pdf", None, "empty"),
        ("fake.mp4", png_bytes(), "video/mp4", None, "video/mp4"),
        ("notes.txt", b"just some notes\n", "text/plain", None, "text Units"),
        ("blob.bin", bytes(range(256)) * 4, "application/octet-stream", None, "unsupported"),
        ("pic.png", png_bytes(), "image/png", "utterance", "modality"),
    ]
    wav = speech["wav"].read_bytes()
    cases.append(("cut.wav", wav[: len(wav) // 3], "audio/wav", None, "truncated WAV"))
    cases.append(("hdr.wav", wav[:44], "audio/wav", None, "WAV"))
    cases.append(("speech.wav", wav, "audio/wav", "video_shot", "no video stream"))
    for name, data, mime, modality, needle in cases:
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(DerivationError) as exc:
            derive(p, mime, modality)
        assert needle in exc.value.message, (name, exc.value.message)
        assert exc.value.code == "derivation_failed" and exc.value.http_status == 422
        assert not exc.value.retryable
    # the wrong-type message names both the declared and the sniffed type
    p = tmp_path / "fake.mp4"
    with pytest.raises(DerivationError, match="image/png"):
        derive(p, "video/mp4", None)


def test_limits_are_checked_before_decoding(
    tmp_path: Path, media: dict[str, Any], speech: dict[str, Any]
) -> None:
    # a 60000 x 60000 PNG header over a few bytes of data: refused from the header alone
    data = bytearray(png_bytes())
    ihdr = struct.pack(">II", 60000, 60000) + bytes(data[24:29])
    data[16:29] = ihdr
    data[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(bytes(data))
    with pytest.raises(DerivationError, match="pixels"):
        derive(bomb, "image/png", "scan")
    with pytest.raises(DerivationError, match="pages"):
        two = make_pdf(tmp_path / "two.pdf", with_scan_page=media["png200"])
        derive(two, "application/pdf", None, limits=MediaLimits(max_pages=1))
    with pytest.raises(DerivationError, match="over the limit"):
        derive(speech["wav"], "audio/wav", None, limits=MediaLimits(max_duration_s=2))


def test_engine_crash_memory_and_timeout_stay_in_the_subprocess() -> None:
    import sys

    opts, lim = DeriveOptions(), MediaLimits(timeout_s=5, memory_mb=256)
    crash = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
    with pytest.raises(DerivationError, match="SIGSEGV") as exc:
        run_engine(crash, limits=lim, options=opts, what="crasher")
    assert exc.value.retryable  # a crash or a timeout may pass on another try
    hog = [sys.executable, "-c", "x = bytearray(1024 * 1024 * 1024)"]
    with pytest.raises(DerivationError, match="MemoryError") as exc:
        run_engine(hog, limits=lim, options=opts, what="hog")
    assert not exc.value.retryable
    slow = [sys.executable, "-c", "import time; time.sleep(30)"]
    with pytest.raises(DerivationError, match="timed out") as exc:
        run_engine(slow, limits=MediaLimits(timeout_s=0.5), options=opts, what="sleeper")
    assert exc.value.retryable
    env = [sys.executable, "-c", "import os; print(os.environ['OMP_THREAD_LIMIT'])"]
    assert run_engine(env, limits=lim, options=opts, what="env").strip() == b"1"


# --------------------------------------------------------------------------- sniffing


def test_sniff_every_fixture_type(
    tmp_path: Path, media: dict[str, Any], speech: dict[str, Any]
) -> None:
    from PIL import Image

    im = Image.new("RGB", (16, 16), "blue")
    heads: dict[str, bytes] = {
        "application/pdf": media["pdf"].read_bytes(),
        "audio/wav": speech["wav"].read_bytes(),
        "text/plain": "naïve café ✓".encode()[:-1],  # cut inside a multi-byte character
        "application/octet-stream": b"\x00\x01\x02\xfe\xff" * 10,
    }
    for fmt, mime in (
        ("PNG", "image/png"),
        ("JPEG", "image/jpeg"),
        ("WEBP", "image/webp"),
        ("TIFF", "image/tiff"),
    ):
        buf = io.BytesIO()
        im.save(buf, format=fmt)
        heads[mime] = buf.getvalue()
    enc = {
        "audio/mpeg": ("x.mp3", ["-c:a", "libmp3lame"]),
        "audio/ogg": ("x.ogg", ["-c:a", "libvorbis"]),
        "audio/flac": ("x.flac", ["-c:a", "flac"]),
        "audio/mp4": ("x.m4a", ["-c:a", "aac"]),
    }
    for mime, (name, codec) in enc.items():
        out = tmp_path / name
        subprocess.run(
            ["ffmpeg", "-v", "error", "-y", "-i", str(speech["wav"]), "-t", "1", *codec, str(out)],
            check=True,
        )
        heads[mime] = out.read_bytes()
    webm = tmp_path / "x.webm"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "color=c=red:s=64x64:d=0.2",
            "-c:v",
            "libvpx",
            str(webm),
        ],
        check=True,
    )
    heads["video/webm"] = webm.read_bytes()
    mp4 = tmp_path / "x.mp4"
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "color=c=red:s=64x64:d=0.2",
            "-c:v",
            "libx264",
            str(mp4),
        ],
        check=True,
    )
    heads["video/mp4"] = mp4.read_bytes()
    ts = tmp_path / "x.ts"
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y", "-i", str(mp4), "-c", "copy", str(ts)], check=True
    )
    heads["video/mp2t"] = ts.read_bytes()
    for mime, data in heads.items():
        assert sniff(data[:4096]) == mime, mime
    assert sniff(b"") == "application/octet-stream"
