"""Media derivation benchmark: speech recognition (WER, real-time factor) and page OCR (CER,
word-box recall, pages/s), both through ``superchargedb.ingest.derive.derive``.

- ``/work/shared/eval/speech-pocketsphinx``: 11 WAVs (37 s) with reference transcripts. Each is
  derived as audio (utterance Units); the hypothesis is the Units' text in time order. WER is
  word-level Levenshtein over all files (case and punctuation removed, hyphens split, integers
  below 1000 spelled out, since Whisper writes "10" for "ten"). RTF is wall time / audio time,
  end to end (a fresh worker loads the model for each file) and for the Whisper call alone.
- ``/work/shared/eval/ocr-rendered-pdf``: 20 born-digital pages rendered at 150 dpi, with the
  PDF text layer as ground truth (``gt/*.txt``, ``gt/*.words.tsv`` boxes in pixels). Each page
  is derived as a scan. Scored over ground-truth words holding a letter or digit (the text layer
  has one word per leader dot): CER aligns each word with its best-overlapping OCR word (IoU >=
  0.3; unmatched words count every character as an error); word-box recall is the share with an
  OCR box at IoU >= 0.5 (and the same text, for the stricter figure). The whole-page CER in
  reading order is reported too: it also charges text the OCR reads inside screenshots (absent
  from the text layer) and the two tools' different reading orders of tables and figures.

    .venv/bin/python bench/ingest_media.py [--out bench/results] [--limit N] [--asr-model base]

Writes ``<out>/ingest_media.json`` and ``<out>/ingest_media.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import tempfile
import time
import wave
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from superchargedb.ingest.derive import DerivationError, DeriveOptions, MediaLimits, derive
from superchargedb.ingest.derive_av import transcribe

SPEECH = Path("/work/shared/eval/speech-pocketsphinx")
OCR = Path("/work/shared/eval/ocr-rendered-pdf")
ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
ONES += "fifteen sixteen seventeen eighteen nineteen"
TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def spell(n: int) -> str:
    ones = ONES.split()
    if n < 20:
        return ones[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ones[n % 10])
    rest = n % 100
    return ones[n // 100] + " hundred" + ("" if rest == 0 else " " + spell(rest))


def normalize_words(text: str) -> list[str]:
    text = re.sub(r"[-_/]", " ", text.lower())
    text = re.sub(r"[^\w\s']", " ", text).replace("'", "")
    text = re.sub(r"\b\d{1,3}\b", lambda m: spell(int(m.group())), text)
    return text.split()


def levenshtein(ref: list[Any] | str, hyp: list[Any] | str) -> int:
    """Edit distance, one numpy row at a time (insertions by a running minimum)."""
    if not ref or not hyp:
        return max(len(ref), len(hyp))
    vocab: dict[Any, int] = {}
    r = np.array([vocab.setdefault(x, len(vocab)) for x in ref])
    h = np.array([vocab.setdefault(x, len(vocab)) for x in hyp])
    idx = np.arange(len(h) + 1)
    row = idx.copy()
    for i in range(1, len(r) + 1):
        cand = np.empty_like(row)
        cand[0] = i
        cand[1:] = np.minimum(row[:-1] + (h != r[i - 1]), row[1:] + 1)
        row = np.minimum.accumulate(cand - idx) + idx
    return int(row[-1])


def bench_speech(opts: DeriveOptions, limit: int | None) -> dict[str, Any]:
    rows = list(csv.DictReader((SPEECH / "transcripts.tsv").open(), delimiter="\t"))[:limit]
    edits = ref_words = 0
    audio_s = wall_s = asr_s = 0.0
    files = []
    for row in rows:
        wav = SPEECH / row["audio"]
        t0 = time.perf_counter()
        units = derive(wav, "audio/wav", "utterance", options=opts)
        wall = time.perf_counter() - t0
        hyp = " ".join(u.text for u in sorted(units, key=lambda u: u.locator.t_start_ms or 0))
        engine = transcribe(wav, limits=MediaLimits(), options=opts)  # the Whisper call alone
        ref_w, hyp_w = normalize_words(row["text"]), normalize_words(hyp)
        e = levenshtein(ref_w, hyp_w)
        edits, ref_words = edits + e, ref_words + len(ref_w)
        dur = float(row["duration_s"])
        audio_s, wall_s, asr_s = audio_s + dur, wall_s + wall, asr_s + engine["transcribe_s"]
        files.append(
            {
                "id": row["id"],
                "ref": row["text"],
                "hyp": hyp,
                "errors": e,
                "words": len(ref_w),
                "wall_s": round(wall, 3),
            }
        )
        print(f"  {row['id'][:40]:40s} {e:2d}/{len(ref_w):2d}  {hyp!r}")
    # One long track (all files, 1 s apart): Whisper's 30 s windows are filled, as in real use.
    with tempfile.TemporaryDirectory() as tmp:
        track = Path(tmp) / "all.wav"
        with wave.open(str(track), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(16000)
            for row in rows:
                with wave.open(str(SPEECH / row["audio"])) as w:
                    out.writeframes(w.readframes(w.getnframes()) + b"\0\0" * 16000)
            track_s = out.getnframes() / 16000
        long = transcribe(track, limits=MediaLimits(), options=opts)
    long_hyp = normalize_words(" ".join(str(w[0]) for w in long["words"]))
    long_ref = [w for row in rows for w in normalize_words(row["text"])]
    return {
        "files": len(rows),
        "audio_s": round(audio_s, 2),
        "long_track_s": round(track_s, 2),
        "long_track_wer": round(levenshtein(long_ref, long_hyp) / max(1, len(long_ref)), 4),
        "rtf_whisper_long_track": round(long["transcribe_s"] / track_s, 3),
        "ref_words": ref_words,
        "wer": round(edits / max(1, ref_words), 4),
        "rtf_end_to_end": round(wall_s / audio_s, 3),
        "rtf_whisper_only": round(asr_s / audio_s, 3),
        "per_file": files,
    }


def read_gt_words(path: Path) -> tuple[list[str], np.ndarray]:
    lines = [ln.split("\t") for ln in path.read_text().splitlines()[2:] if ln.strip()]
    return [c[0] for c in lines], np.array([[float(v) for v in c[1:5]] for c in lines])


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ix = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    iy = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    inter = np.clip(ix, 0, None) * np.clip(iy, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / (area_a[:, None] + area_b[None, :] - inter + 1e-9)


def score_page(
    gt_text: list[str], gt: np.ndarray, ocr_text: list[str], ocr: np.ndarray
) -> dict[str, int]:
    """Over ground-truth words with a letter or digit (dot leaders are one GT word per dot):
    box hits (IoU >= 0.5), box hits with the same text, and box-aligned character errors
    (each GT word against its best-overlapping OCR word, IoU >= 0.3; unmatched = all wrong)."""
    keep = [i for i, t in enumerate(gt_text) if re.search(r"\w", t)]
    texts, gt = [gt_text[i] for i in keep], gt[keep]
    out = {"words": len(texts), "chars": sum(len(t) for t in texts), "hits": 0, "same": 0}
    out["char_errors"] = out["chars"]
    if not len(texts) or not len(ocr):
        return out
    iou = iou_matrix(gt, ocr)
    best = iou.argmax(axis=1)
    errors = 0
    for i, t in enumerate(texts):
        j = int(best[i])
        if iou[i, j] >= 0.5:
            out["hits"] += 1
            out["same"] += int(ocr_text[j] == t)
        errors += levenshtein(t, ocr_text[j]) if iou[i, j] >= 0.3 else len(t)
    out["char_errors"] = errors
    return out


def bench_ocr(opts: DeriveOptions, limit: int | None) -> dict[str, Any]:
    pages = sorted((OCR / "pages").glob("*.png"))[:limit]
    tot = {"words": 0, "chars": 0, "hits": 0, "same": 0, "char_errors": 0}
    raw_edits = raw_chars = 0
    wall = 0.0
    per_page = []
    for png in pages:
        stem = png.stem
        t0 = time.perf_counter()
        try:
            units = derive(png, "image/png", "scan", options=opts)
        except DerivationError:  # a page without any text
            units = []
        wall += time.perf_counter() - t0
        hyp = " ".join(" ".join(u.text.split()) for u in units)
        ref = " ".join((OCR / "gt" / f"{stem}.txt").read_text().split())
        e = levenshtein(ref, hyp)
        raw_edits, raw_chars = raw_edits + e, raw_chars + len(ref)
        gt_text, gt_boxes = read_gt_words(OCR / "gt" / f"{stem}.words.tsv")
        ocr_w = [w for u in units for w in u.meta["words"]]
        ocr_boxes = np.array([w[1:5] for w in ocr_w], dtype=float).reshape(-1, 4)
        sc = score_page(gt_text, gt_boxes.reshape(-1, 4), [w[0] for w in ocr_w], ocr_boxes)
        for k in tot:
            tot[k] += sc[k]
        row = {
            "page": stem,
            "cer_box_aligned": round(sc["char_errors"] / max(1, sc["chars"]), 4),
            "cer_reading_order": round(e / max(1, len(ref)), 4),
            "word_box_recall": round(sc["hits"] / max(1, sc["words"]), 4),
            "paragraphs": len(units),
        }
        per_page.append(row)
        print(
            f"  {stem:28s} CER {row['cer_box_aligned']:.4f} (reading order "
            f"{row['cer_reading_order']:.3f})  box recall {row['word_box_recall']:.3f}"
            f"  {len(units)} paragraphs"
        )
    return {
        "pages": len(pages),
        "gt_words": tot["words"],
        "cer": round(tot["char_errors"] / max(1, tot["chars"]), 4),
        "cer_median_page": round(
            float(np.median([p["cer_box_aligned"] for p in per_page if p["paragraphs"]])), 4
        ),
        "cer_reading_order": round(raw_edits / max(1, raw_chars), 4),
        "word_box_recall_iou50": round(tot["hits"] / max(1, tot["words"]), 4),
        "word_box_recall_iou50_same_text": round(tot["same"] / max(1, tot["words"]), 4),
        "pages_per_s": round(len(pages) / wall, 3),
        "per_page": per_page,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    ap.add_argument("--limit", type=int, default=None, help="files/pages per suite")
    ap.add_argument("--asr-model", default="tiny.en")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    opts = DeriveOptions(asr_model=args.asr_model, threads=args.threads)
    print(f"speech ({SPEECH.name}, Whisper {args.asr_model}, {args.threads} thread(s)):")
    speech = bench_speech(opts, args.limit)
    print(f"OCR ({OCR.name}, Tesseract, {args.threads} thread(s)):")
    ocr = bench_ocr(opts, args.limit)
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "threads": args.threads,
        "asr_model": args.asr_model,
        "speech": speech,
        "ocr": ocr,
    }
    rows = [
        ("speech WER", f"{speech['wer']:.3f}", "<= 0.12 (tiny.en)"),
        ("speech RTF, end to end", f"{speech['rtf_end_to_end']:.3f}", "model load per file"),
        ("speech RTF, Whisper only", f"{speech['rtf_whisper_only']:.3f}", "per file (1-7 s)"),
        (
            "speech RTF, Whisper, one long track",
            f"{speech['rtf_whisper_long_track']:.3f}",
            f"{speech['long_track_s']:.0f} s; WER {speech['long_track_wer']:.3f}",
        ),
        ("OCR CER (box-aligned to GT words)", f"{ocr['cer']:.4f}", "<= 0.03"),
        ("OCR CER, median page", f"{ocr['cer_median_page']:.4f}", ""),
        ("OCR CER (reading order, whole page)", f"{ocr['cer_reading_order']:.4f}", "see note"),
        ("OCR word-box recall (IoU>=0.5)", f"{ocr['word_box_recall_iou50']:.3f}", ""),
        ("... and same text", f"{ocr['word_box_recall_iou50_same_text']:.3f}", ""),
        ("OCR pages/s", f"{ocr['pages_per_s']:.2f}", "150-dpi pages"),
    ]
    table = "| metric | value | note |\n|---|---|---|\n"
    table += "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    print("\n" + table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ingest_media.json").write_text(json.dumps(result, indent=2) + "\n")
    md = f"# Media derivation benchmark\n\n{result['when']}, {os.cpu_count()} CPUs, "
    md += f"{args.threads} engine thread(s), Whisper {args.asr_model}, "
    md += f"{speech['files']} speech files ({speech['audio_s']} s), {ocr['pages']} OCR pages.\n\n"
    md += table + "\n\nCommand: `.venv/bin/python bench/ingest_media.py`\n"
    (args.out / "ingest_media.md").write_text(md)


if __name__ == "__main__":
    main()
