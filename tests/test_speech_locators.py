"""Speech Locators as tight as the evidence (issue 22, the speech half).

Pure parts first (edges on a made-up envelope, the ``#t=`` form, narrowing a cited span to its
words, the word table in a real SQLite catalog), then espeak-ng sentences joined with 0-200 ms
gaps: Units at sentence grain with no voiced audio outside them (voiced measured here on the
signal, independently of the derivation), and through the API the words of a Unit
(``?words=true``, same ACL as the Unit) and an answer whose citation opens the second sentence.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import ALICE, CAROL
from superchargedb.answer.localize import pin_locator
from superchargedb.ingest.utterances import Signal, group_words, place, t_fragment
from superchargedb.locate_words import narrow_time
from superchargedb.storage.sqlite import unit_words
from superchargedb.storage.sqlite.migrations import migrate

# --------------------------------------------------------------------------- pure parts


def test_one_t_fragment_form() -> None:
    assert t_fragment(767_250) == "#t=767.25"
    assert t_fragment(1_234) == "#t=1.234"
    assert t_fragment(8_000) == "#t=8"
    assert t_fragment(0) == "#t=0"
    assert t_fragment(90) == "#t=0.09"


def envelope_of(spans: list[tuple[float, float]], total: float) -> np.ndarray:
    """A dB envelope: 0 dB inside the spans (speech), -60 dB elsewhere, 10 ms frames."""
    db = np.full(int(total * 100), -60.0, dtype=np.float32)
    for a, b in spans:
        db[int(a * 100) : int(b * 100)] = 0.0
    return db


def test_edges_follow_the_signal_not_late_word_times() -> None:
    # Two sentences said at 1.0-3.0 s and 3.15-5.0 s; the recognizer's word times start 0.4 s
    # late and end 0.3 s early (what Whisper does), and the second sentence is a new segment.
    sig = Signal(envelope_of([(1.0, 3.0), (3.15, 5.0)], 6.0), 6.0)
    words = [
        [" One", 1.4, 1.9, 1, 1],
        [" two.", 2.0, 2.7, 1, 1],
        [" Three", 3.55, 4.0, 1, 2],
        [" four.", 4.1, 4.7, 1, 2],
    ]
    a, b = place(group_words(words, sig), sig)
    assert abs(a[0][1] - 1.0) <= 0.02 and abs(b[-1][2] - 5.0) <= 0.02, (a, b)
    # the cut lies in the 150 ms quiet between them; each side reaches its speech
    assert 3.0 - 0.02 <= a[-1][2] <= 3.15 and 3.0 <= b[0][1] <= 3.15 + 0.02, (a, b)
    assert a[-1][2] <= b[0][1]
    # no word is cut: every word keeps at least its recognized span
    for w, got in zip(words, [*a, *b], strict=True):
        assert got[1] <= w[1] and got[2] >= w[2]


def test_outer_edges_walk_at_most_a_second_and_stop_at_silence() -> None:
    sig = Signal(envelope_of([(0.0, 9.0)], 9.0), 9.0)  # voiced throughout (room tone)
    (g,) = place(group_words([[" hi", 4.0, 4.5, 1, 1]], sig), sig)
    assert g[0][1] == pytest.approx(3.0) and g[0][2] == pytest.approx(5.5)


def test_a_cited_span_narrows_to_its_words_times() -> None:
    text = "We start at nine. The report goes to finance."
    words = []
    t = 1000
    for part in text.split(" "):
        start = text.index(part, words[-1]["end"] if words else 0)
        words.append(
            {"start": start, "end": start + len(part), "t_start_ms": t, "t_end_ms": t + 300}
        )
        t += 400
    loc = {"kind": "time_range", "t_start_ms": 900, "t_end_ms": 5000}
    second = text.index("The")
    got = narrow_time(loc, words, second, len(text))
    assert got == {"kind": "time_range", "t_start_ms": 2600, "t_end_ms": 4500}
    assert narrow_time(loc, words, 0, 3) == {**loc, "t_start_ms": 1000, "t_end_ms": 1300}
    assert narrow_time(loc, [], 0, 5) == loc  # no word table: the Unit's own range
    assert narrow_time({"kind": "bbox", "bbox": [0, 0, 1, 1]}, words, 0, 5)["kind"] == "bbox"
    # clamped inside the Unit's range
    tight = {"kind": "time_range", "t_start_ms": 1100, "t_end_ms": 1200}
    assert narrow_time(tight, words, 0, 3) == tight
    hit = {"text": text, "locator": loc}
    assert pin_locator(hit, second, len(text), words=words) == got  # the answer's call site
    assert pin_locator(hit, second, len(text)) == loc


def test_word_table_lives_and_dies_with_its_unit(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
    conn.row_factory = sqlite3.Row
    migrate(conn)
    cols = {r[1]: r for r in conn.execute("PRAGMA table_info(units)")}
    row = {c: 0 for c, r in cols.items() if r[3] and r[4] is None and c != "id"}
    row |= {"unit_id": "u1", "scope": "s", "doc_id": "d", "text": "hi there", "acl": ""}
    row |= {"modality": "utterance", "plane": "audio", "source_uri": "k", "acl_owner": "a"}
    row |= {"acl_groups": "[]", "content_hash": "h", "created_by": "a", "model_id": "m"}
    row |= {"embedding": b""}
    conn.execute(
        f"INSERT INTO units({','.join(row)}) VALUES ({','.join('?' * len(row))})", [*row.values()]
    )
    rid = conn.execute("SELECT id FROM units WHERE unit_id = 'u1'").fetchone()[0]
    words = [
        {"start": 0, "end": 2, "t_start_ms": 10, "t_end_ms": 200, "conf": 0.9},
        {"start": 3, "end": 8, "page": 2, "box": [1.0, 2.0, 3.0, 4.0]},
    ]
    unit_words.put(conn, rid, words)
    assert unit_words.get(conn, rid) == words
    assert unit_words.for_unit_id(conn, "u1") == words
    assert unit_words.for_unit_ids(conn, ["u1", "nope"]) == {"u1": words}
    unit_words.put(conn, rid, words[:1])  # a re-derivation replaces the table
    assert unit_words.get(conn, rid) == words[:1]
    conn.execute("DELETE FROM units WHERE id = ?", (rid,))
    assert conn.execute("SELECT COUNT(*) FROM unit_words").fetchone()[0] == 0


# --------------------------------------------------------------------------- real speech

needs_engines = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("ffmpeg", "ffprobe", "espeak-ng")),
    reason="needs ffmpeg and espeak-ng (scripts/setup.sh installs them)",
)
SENTENCES = [
    "The weather today is sunny and warm.",
    "Our meeting starts at nine in the morning.",
    "Please send the quarterly report to the finance team.",
    "The new office opens next spring.",
]
GAPS_S = [0.3, 0.05, 0.2, 0.12, 0.5]  # before, between and after the sentences


def voiced(x: np.ndarray, rate: int) -> np.ndarray:
    """10 ms frames whose RMS, smoothed over 50 ms, is within 30 dB of the file's peak."""
    hop = rate // 100
    n = len(x) // hop
    rms = np.sqrt((x[: n * hop].astype(np.float64).reshape(n, hop) ** 2).mean(axis=1))
    smooth = np.convolve(rms, np.ones(5) / 5, mode="same")
    return smooth >= smooth.max() * 10 ** (-30 / 20)


@pytest.fixture(scope="module")
def track(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """espeak-ng sentences with 0-200 ms gaps; each sentence's voiced span in seconds."""
    d = tmp_path_factory.mktemp("speech-grain")
    rate = 22050
    pcm = [np.zeros(int(GAPS_S[0] * rate), dtype=np.int16)]
    clips = []
    for i, sentence in enumerate(SENTENCES):
        clip = d / f"s{i}.wav"
        subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(clip), sentence], check=True)
        with wave.open(str(clip)) as w:
            x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
        start = sum(len(p) for p in pcm)
        clips.append((start, start + len(x)))
        pcm += [x, np.zeros(int(GAPS_S[i + 1] * rate), dtype=np.int16)]
    x = np.concatenate(pcm)
    v = voiced(x, rate)
    truth = []
    for a, b in clips:
        idx = np.flatnonzero(v[a * 100 // rate : b * 100 // rate]) + a * 100 // rate
        truth.append((idx[0] / 100, (idx[-1] + 1) / 100))
    wav = d / "speech.wav"
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(x.tobytes())
    return {"wav": wav, "x": x, "rate": rate, "voiced": v, "truth": truth}


@needs_engines
@pytest.mark.slow  # one Whisper run over 12 s of speech: ~5-10 s
def test_utterances_at_sentence_grain_leave_no_voiced_audio_out(track: dict[str, Any]) -> None:
    from superchargedb.ingest.derive import derive

    units = sorted(derive(track["wav"], "audio/wav", None), key=lambda u: u.locator.t_start_ms)
    spans = [(u.locator.t_start_ms / 1000, u.locator.t_end_ms / 1000) for u in units]
    v = track["voiced"]
    centre = (np.arange(len(v)) + 0.5) / 100
    inside = np.zeros(len(v), dtype=bool)
    for a, b in spans:
        inside |= (centre >= a) & (centre < b)
    assert (v & ~inside).sum() / v.sum() < 0.005, spans
    for (start, end), sentence in zip(track["truth"], SENTENCES, strict=True):
        u = min(units, key=lambda u: abs(u.locator.t_start_ms / 1000 - start))
        a, b = u.locator.t_start_ms / 1000, u.locator.t_end_ms / 1000
        assert abs(a - start) <= 0.3 and b - a <= 2 * (end - start), (sentence, (a, b), spans)
        assert u.fragment == t_fragment(u.locator.t_start_ms)
        table = u.meta["unit_words"]
        assert " ".join(u.text[w["start"] : w["end"]] for w in table) == u.text
        assert all(
            u.locator.t_start_ms <= w["t_start_ms"] <= w["t_end_ms"] <= u.locator.t_end_ms
            for w in table
        )
    assert all(b - a <= 15.0 for a, b in spans)


@needs_engines
@pytest.mark.slow  # ASR + embedding + an answer: ~10-20 s
def test_words_through_the_api_and_an_answer_opens_its_sentence(client, track) -> None:
    key = "acme/alpha/backend/briefing.wav"
    r = client.put(
        f"/v1/objects/{key}",
        headers={**ALICE, "Content-Type": "audio/wav"},
        content=track["wav"].read_bytes(),
    )
    assert r.status_code == 201, r.text
    r = client.post(
        "/v1/ingest", headers=ALICE, json={"units": [{"source_uri": key, "mime": "audio/wav"}]}
    )
    from test_media_ingest import wait_job

    job = wait_job(client, ALICE, r.json()["results"][0]["job_id"], timeout=300)
    assert job["state"] == "done", job
    for uid in job["unit_ids"]:
        plain = client.get(f"/v1/units/{uid}", headers=ALICE).json()
        assert "words" not in plain
        u = client.get(f"/v1/units/{uid}?words=true", headers=ALICE).json()
        assert {k: v for k, v in u.items() if k != "words"} == plain
        assert u["words"] and " ".join(w["text"] for w in u["words"]) == u["text"]
        loc = u["locator"]
        assert all(
            loc["t_start_ms"] <= w["t_start_ms"] < w["t_end_ms"] <= loc["t_end_ms"]
            for w in u["words"]
        )
        assert u["source_uri"] == key + t_fragment(loc["t_start_ms"])
        # the words are the Unit's: someone who cannot read it gets the same 404 as ever
        r = client.get(f"/v1/units/{uid}?words=true", headers=CAROL)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = client.get(f"/v1/units/{job['unit_ids'][0]}?words=maybe", headers=ALICE)
    assert r.status_code == 422 and "error" in r.json()
    out = client.post(
        "/v1/answer",
        headers=ALICE,
        json={"q": "When does our meeting start?", "answer": True, "top_k": 5},
    ).json()
    cites = [c for c in out["answer"]["citations"] if c["source_uri"].startswith(key)]
    assert cites, out["answer"]
    loc = cites[0]["locator"]
    start, end = track["truth"][1]
    assert abs(loc["t_start_ms"] / 1000 - start) <= 0.3, (loc, start)
    assert abs(loc["t_end_ms"] / 1000 - end) <= 0.3, (loc, end)
