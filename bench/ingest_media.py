"""Media derivation benchmark: speech recognition (WER, real-time factor) and page OCR (CER,
word-box recall, pages/s), both through ``superchargedb.ingest.derive.derive``.

- ``$SCDB_EVAL_DIR/speech-pocketsphinx``: 11 WAVs (37 s) with reference transcripts. Each is
  derived as audio (utterance Units); the hypothesis is the Units' text in time order. WER is
  word-level Levenshtein over all files (case and punctuation removed, hyphens split, integers
  below 1000 spelled out, since Whisper writes "10" for "ten"). RTF is wall time / audio time,
  end to end (a fresh worker loads the model for each file) and for the Whisper call alone.
- ``$SCDB_EVAL_DIR/ocr-rendered-pdf``: 20 born-digital pages rendered at 150 dpi, with the
  PDF text layer as ground truth (``gt/*.txt``, ``gt/*.words.tsv`` boxes in pixels). Each page
  is derived as a scan. CER and word-box recall are defined in ``bench/ocr_score.py`` (words
  aligned by box, scored line by line, both sides normalised the same way); the report adds
  the CER without ground-truth words that general checks flag as suspect (no ink in their box,
  control characters, drawn twice), the first metric of this bench (for comparison), the
  whole-page CER in reading order (it also charges text read inside screenshots and the two
  tools' different reading orders), per-page numbers, edits by kind and the worst lines.
  Pages/s is wall time (noisy on a shared machine); the engine CPU seconds per page (image
  worker + Tesseract, from ``RUSAGE_CHILDREN``) is the steadier cost figure.

    .venv/bin/python -m bench.ingest_media [--out bench/results] [--limit N] [--asr-model base]
        [--suites speech,ocr] [--before OLD_OCR_SECTION.json]

A suite left out keeps its previous result in the JSON (each section carries its own date).

Writes ``<out>/ingest_media.json`` and ``<out>/ingest_media.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import resource
import tempfile
import time
import wave
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from tqdm import tqdm

from bench.common import evaldir
from bench.ocr_score import (
    CATEGORIES,
    levenshtein,
    norm,
    score_page,
    score_page_v1,
    suspect_words,
)
from superchargedb.ingest.derive import DerivationError, DeriveOptions, MediaLimits, derive
from superchargedb.ingest.derive_av import transcribe

# Folders inside the eval folder (SCDB_EVAL_DIR / --eval-dir).
SPEECH = "speech-pocketsphinx"
OCR = "ocr-rendered-pdf"
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


def bench_speech(opts: DeriveOptions, limit: int | None, data: Path) -> dict[str, Any]:
    rows = list(csv.DictReader((data / "transcripts.tsv").open(), delimiter="\t"))[:limit]
    edits = ref_words = 0
    audio_s = wall_s = asr_s = 0.0
    files = []
    for row in rows:
        wav = data / row["audio"]
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
                with wave.open(str(data / row["audio"])) as w:
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


def child_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def ratio(a: float, b: float) -> float:
    return round(a / max(1, b), 4)


def bench_ocr(opts: DeriveOptions, limit: int | None, data: Path) -> dict[str, Any]:
    pages = sorted((data / "pages").glob("*.png"))[:limit]
    tot: Counter[str] = Counter()
    ver: Counter[str] = Counter()  # suspect ground-truth words left out
    v1_errors = v1_chars = raw_edits = raw_chars = 0
    wall = cpu = 0.0
    per_page, worst_lines = [], []
    for png in tqdm(pages, desc="OCR pages", unit="page"):
        stem = png.stem
        t0, c0 = time.perf_counter(), child_cpu_s()
        try:
            units = derive(png, "image/png", "scan", options=opts)
        except DerivationError:  # a page without any text
            units = []
        wall, cpu = wall + time.perf_counter() - t0, cpu + child_cpu_s() - c0
        gt_text, gt_boxes = read_gt_words(data / "gt" / f"{stem}.words.tsv")
        gt_boxes = gt_boxes.reshape(-1, 4)
        ocr_w = [w for u in units for w in u.meta["words"]]
        ocr_text = [str(w[0]) for w in ocr_w]
        ocr_boxes = np.array([w[1:5] for w in ocr_w], dtype=float).reshape(-1, 4)
        gray = np.asarray(Image.open(png).convert("L"))
        suspect = suspect_words(gt_text, gt_boxes, gray)
        sc, bad = score_page(gt_text, gt_boxes, ocr_text, ocr_boxes)
        sv, _ = score_page(gt_text, gt_boxes, ocr_text, ocr_boxes, skip=set(suspect))
        v1 = score_page_v1(gt_text, gt_boxes, ocr_text, ocr_boxes)
        ref = norm((data / "gt" / f"{stem}.txt").read_text())
        hyp = norm(" ".join(u.text for u in units))
        e = levenshtein(ref, hyp)
        raw_edits, raw_chars = raw_edits + e, raw_chars + len(ref)
        v1_errors, v1_chars = v1_errors + v1["char_errors"], v1_chars + v1["chars"]
        tot.update(sc)
        ver.update(sv)
        row: dict[str, Any] = {
            "page": stem,
            "gt_words": sc["words"],
            "gt_chars": sc["chars"],
            "cer": ratio(sc["edits"], sc["chars"]),
            "cer_verified": ratio(sv["edits"], sv["chars"]),
            "cer_v1": ratio(v1["char_errors"], v1["chars"]),
            "cer_reading_order": ratio(e, len(ref)),
            "word_box_recall": ratio(sc["hits"], sc["words"]),
            "edits": sc["edits"],
            "errors_by_kind": {k: sc[k] for k in CATEGORIES},
            "suspect_gt_words": dict(Counter(suspect.values())),
            "suspect_gt_examples": {
                why: [gt_text[i] for i, w in suspect.items() if w == why][:4]
                for why in sorted(set(suspect.values()))
            },
            "unaligned_ocr_chars": sc["unaligned_ocr_chars"],
            "paragraphs": len(units),
            "seconds": round(time.perf_counter() - t0, 2),
        }
        per_page.append(row)
        worst_lines += [{"page": stem, **b} for b in bad]
        tqdm.write(
            f"  {stem:28s} CER {row['cer']:.4f} (verified {row['cer_verified']:.4f}, v1 "
            f"{row['cer_v1']:.4f})  box recall {row['word_box_recall']:.3f}  {len(units)} paras"
        )
    scored = [p for p in per_page if p["gt_chars"]]
    faulty = [p["page"] for p in scored if p["suspect_gt_words"]]
    return {
        "pages": len(pages),
        "gt_words": tot["words"],
        "gt_chars": tot["chars"],
        "cer": ratio(tot["edits"], tot["chars"]),
        "cer_median_page": round(float(np.median([p["cer"] for p in scored] or [0])), 4),
        "cer_verified": ratio(ver["edits"], ver["chars"]),
        "suspect_gt_words": sum_dicts(p["suspect_gt_words"] for p in scored),
        "pages_with_suspect_gt": faulty,
        "cer_without_control_char_pages": cer_without(
            scored, [p["page"] for p in scored if "control_chars" in p["suspect_gt_words"]]
        ),
        "cer_v1": ratio(v1_errors, v1_chars),
        "cer_reading_order": ratio(raw_edits, raw_chars),
        "word_box_recall_iou50": ratio(tot["hits"], tot["words"]),
        "word_box_recall_iou50_same_text": ratio(tot["same"], tot["words"]),
        "errors_by_kind": {k: tot[k] for k in CATEGORIES},
        "unaligned_ocr_chars": tot["unaligned_ocr_chars"],
        "pages_per_s": round(len(pages) / wall, 3),
        "engine_cpu_s_per_page": round(cpu / max(1, len(pages)), 2),
        "per_page": per_page,
        "worst_lines": sorted(worst_lines, key=lambda b: -b["edits"])[:40],
    }


def sum_dicts(rows: Any) -> dict[str, int]:
    out: Counter[str] = Counter()
    for r in rows:
        out.update(r)
    return dict(out)


def cer_without(scored: list[dict[str, Any]], pages: list[str]) -> dict[str, Any]:
    rest = [p for p in scored if p["page"] not in pages]
    edits, chars = sum(p["edits"] for p in rest), sum(p["gt_chars"] for p in rest)
    return {"left_out": pages, "cer": ratio(edits, chars)}


def speech_rows(speech: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        ("speech WER", f"{speech['wer']:.3f}", "<= 0.12 (tiny.en)"),
        ("speech RTF, end to end", f"{speech['rtf_end_to_end']:.3f}", "model load per file"),
        ("speech RTF, Whisper only", f"{speech['rtf_whisper_only']:.3f}", "per file (1-7 s)"),
        (
            "speech RTF, Whisper, one long track",
            f"{speech['rtf_whisper_long_track']:.3f}",
            f"{speech['long_track_s']:.0f} s; WER {speech['long_track_wer']:.3f}",
        ),
    ]


def ocr_rows(ocr: dict[str, Any]) -> list[tuple[str, str, str]]:
    wo = ocr["cer_without_control_char_pages"]
    return [
        ("OCR CER, all pages (line-aligned, normalised)", f"{ocr['cer']:.4f}", "<= 0.03"),
        ("OCR CER, median page", f"{ocr['cer_median_page']:.4f}", ""),
        (
            "OCR CER, suspect GT words left out",
            f"{ocr['cer_verified']:.4f}",
            ", ".join(f"{k}: {v}" for k, v in sorted(ocr["suspect_gt_words"].items())),
        ),
        (
            "OCR CER, without pages whose GT has control characters",
            f"{wo['cer']:.4f}",
            ", ".join(wo["left_out"]) or "none",
        ),
        ("OCR CER, first metric (best-IoU word, raw)", f"{ocr['cer_v1']:.4f}", "comparison only"),
        ("OCR CER (reading order, whole page)", f"{ocr['cer_reading_order']:.4f}", "see note"),
        ("OCR word-box recall (IoU>=0.5)", f"{ocr['word_box_recall_iou50']:.3f}", ""),
        ("... and same text", f"{ocr['word_box_recall_iou50_same_text']:.3f}", ""),
        ("OCR pages/s (wall)", f"{ocr['pages_per_s']:.2f}", "150-dpi pages, noisy"),
        ("OCR engine CPU s/page", f"{ocr['engine_cpu_s_per_page']:.2f}", "worker + Tesseract"),
    ]


def table(rows: list[tuple[str, ...]], head: tuple[str, ...]) -> str:
    out = "| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n"
    return out + "\n".join("| " + " | ".join(r) + " |" for r in rows) + "\n"


def ocr_markdown(ocr: dict[str, Any], before: dict[str, Any] | None) -> str:
    md = "\n## OCR: per page\n\n"
    rows = []
    for p in ocr["per_page"]:
        kinds = sorted(p["errors_by_kind"].items(), key=lambda kv: -kv[1])
        rows.append(
            (
                p["page"],
                str(p["gt_chars"]),
                f"{p['cer']:.4f}",
                f"{p['cer_verified']:.4f}",
                f"{p['cer_v1']:.4f}",
                f"{p['word_box_recall']:.3f}",
                ", ".join(f"{k} {v}" for k, v in sorted(p["suspect_gt_words"].items())) or "",
                ", ".join(f"{k} {v}" for k, v in kinds[:3] if v),
            )
        )
    head = ("page", "GT chars", "CER", "verified", "v1", "box recall", "suspect GT", "edits")
    md += table(rows, head)
    examples = [
        f"- {p['page']}: "
        + "; ".join(f"{why} {ws!r}" for why, ws in p["suspect_gt_examples"].items())
        for p in ocr["per_page"]
        if p.get("suspect_gt_examples")
    ]
    if examples:
        md += "\nSuspect ground-truth words (examples):\n\n" + "\n".join(examples) + "\n"
    kinds = ", ".join(f"{k} {v}" for k, v in ocr["errors_by_kind"].items())
    md += f"\nEdits by kind, all pages: {kinds}. OCR characters outside any scored GT word "
    md += f"(figures, screenshots; not charged): {ocr['unaligned_ocr_chars']}.\n"
    if before:
        md += "\n## OCR: before / after (same scorer, same machine, same session)\n\n"
        keys = [
            ("cer", "CER, all pages"),
            ("cer_verified", "CER, suspect GT left out"),
            ("cer_v1", "CER, first metric"),
            ("word_box_recall_iou50", "word-box recall"),
            ("word_box_recall_iou50_same_text", "... and same text"),
            ("pages_per_s", "pages/s (wall)"),
            ("engine_cpu_s_per_page", "engine CPU s/page"),
        ]
        md += table(
            [(label, str(before.get(k, "")), str(ocr[k])) for k, label in keys],
            ("metric", "before", "after"),
        )
        md += f"\nBefore: {before.get('pipeline', '')}\n"
    return md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    ap.add_argument("--limit", type=int, default=None, help="files/pages per suite")
    ap.add_argument("--asr-model", default="tiny.en")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--suites", default="speech,ocr", help="comma-separated: speech, ocr (none: report only)"
    )
    ap.add_argument("--before", type=Path, help="an OCR section (JSON) of the previous pipeline")
    evaldir.add_argument(ap)
    args = ap.parse_args()
    suites = set(args.suites.split(","))
    opts = DeriveOptions(asr_model=args.asr_model, threads=args.threads)
    out_json = args.out / "ingest_media.json"
    # A suite that is not run keeps its last result (each section has its own date).
    result = json.loads(out_json.read_text()) if out_json.exists() else {}
    for section in ("speech", "ocr"):
        if section in result:
            result[section].setdefault("when", result.get("when"))
    when = datetime.now(UTC).isoformat(timespec="seconds")
    result.update(
        when=when,
        machine={"cpus": os.cpu_count(), "platform": platform.platform()},
        threads=args.threads,
        asr_model=args.asr_model,
    )
    if "speech" in suites:
        data = evaldir.dataset(SPEECH, args.eval_dir)
        print(f"speech ({SPEECH}, Whisper {args.asr_model}, {args.threads} thread(s)):")
        result["speech"] = {"when": when, **bench_speech(opts, args.limit, data)}
    if "ocr" in suites:
        data = evaldir.dataset(OCR, args.eval_dir)
        print(f"OCR ({OCR}, Tesseract, {args.threads} thread(s)):")
        result["ocr"] = {"when": when, **bench_ocr(opts, args.limit, data)}
    speech, ocr = result.get("speech"), result.get("ocr")
    before = json.loads(args.before.read_text()) if args.before else result.get("ocr_before")
    if before:
        result["ocr_before"] = before
    rows = (speech_rows(speech) if speech else []) + (ocr_rows(ocr) if ocr else [])
    tab = table(rows, ("metric", "value", "note"))
    print("\n" + tab)
    args.out.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(result, indent=2) + "\n")
    md = f"# Media derivation benchmark\n\n{os.cpu_count()} CPUs (shared), "
    md += f"{args.threads} engine thread(s) (OMP_THREAD_LIMIT), Whisper {args.asr_model}.\n"
    if speech:
        md += f"Speech: {speech['files']} files ({speech['audio_s']} s), "
        md += f"run {speech['when']}.\n"
    if ocr:
        md += f"OCR: {ocr['pages']} pages, run {ocr['when']}.\n"
    md += "\n" + tab
    if ocr:
        md += ocr_markdown(ocr, before)
    md += "\nCER is defined in docs/media.md (OCR quality) and bench/ocr_score.py.\n"
    md += "\nCommand: `.venv/bin/python -m bench.ingest_media [--suites ocr]`\n"
    (args.out / "ingest_media.md").write_text(md)


if __name__ == "__main__":
    main()
