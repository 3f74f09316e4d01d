"""Markdown and text tables for bench/answers.py."""

from __future__ import annotations

from typing import Any

from bench.answers_metrics import FAILURE_KINDS, METRIC_DOC, RATE_METRICS, TARGETS, TOP_K

SCOPE = "acme/alpha/xquad"
# -- report ----------------------------------------------------------------------------------


def fmt(v: Any, nd: int = 3) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def metric_table(evals: dict[str, dict[str, Any]]) -> str:
    """Rows: metrics; columns: the given evaluations (name -> metrics)."""
    names = list(evals)
    lines = [
        "| metric | " + " | ".join(names) + " | target |",
        "|---|" + "---|" * len(names) + "---|",
    ]
    for k in (*RATE_METRICS, "median_sentences", "median_words"):
        cells = []
        for n in names:
            m = evals[n]
            v = m.get(k)
            t = m["targets"].get(k)
            mark = "" if t is None or t["pass"] is None else (" ✅" if t["pass"] else " ❌")
            cells.append(fmt(v, 1 if k.startswith("median") else 3) + mark)
        t = TARGETS.get(k)
        lines.append(
            f"| {k} | " + " | ".join(cells) + f" | {t[0] + ' ' + str(t[1]) if t else ''} |"
        )
    for c in ("in_scope", "out_of_scope", "answered_in_scope", "citations"):
        lines.append(f"| n {c} | " + " | ".join(str(evals[n]["counts"][c]) for n in names) + " | |")
    return "\n".join(lines) + "\n"


def text_table(m: dict[str, Any], label: str) -> str:
    out = [f"{label}:"]
    for k in (*RATE_METRICS, "median_sentences", "median_words"):
        t = m["targets"].get(k)
        mark = (
            ""
            if t is None
            else ("  n/a" if t["pass"] is None else ("  PASS" if t["pass"] else "  FAIL"))
        )
        tgt = f" (target {t['target']})" if t else ""
        out.append(f"  {k:<26} {fmt(m.get(k), 1 if k.startswith('median') else 3):>7}{tgt}{mark}")
    return "\n".join(out)


def _md_escape(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown(report: dict[str, Any], local: dict[str, Any] | None = None) -> str:
    cfg = report["config"]
    th = report["answerability"]
    lines = [
        "# XQuAD cited-answer benchmark",
        "",
        f"Generated {report['generated_at']} by `{report['command']}`"
        f" (commit `{report['environment']['git_commit']}`, {report['environment']['cpus']} CPUs,"
        f" Python {report['environment']['python']}).",
        "",
        "## Design",
        "",
        f"- Data: XQuAD English (1,190 SQuAD v1.1 dev questions, 240 paragraphs, 48 articles)."
        f" {report['ingest']['paragraphs']} paragraphs ingested as one Unit each (text = paragraph,"
        f" `doc_id` = paragraph id, scope `{SCOPE}`);"
        f" {report['ingest']['chunked_paragraphs']} paragraphs were chunked by the server"
        f" ({report['ingest']['units_stored']} Units).",
        "- Split: the 48 article titles sorted; even positions = CALIBRATION half"
        f" ({len(cfg['split']['calibration'])} articles), odd = REPORT half"
        f" ({len(cfg['split']['report'])}). The answerability model, its threshold and the"
        " localization weights are chosen on CALIBRATION only.",
        f"- Each question is asked twice with `POST /v1/answer?scope={SCOPE}`, `top_k={TOP_K}`:"
        " **in scope** (all 240 paragraphs; answerable) and **out of scope** (`filters.doc_id` ="
        " the 235 paragraphs of the other 47 articles: the question's whole article is absent).",
        "- Extractive synthesizer only (`SCDB_ANSWER_PROVIDERS=''`): deterministic, no LLM.",
        f"- Questions: {cfg['questions']['calibration']} CALIBRATION + {cfg['questions']['report']}"
        " REPORT"
        + (
            f" (**limited run: a fixed stratified sample of {cfg['limit']} per half**)"
            if cfg["limit"]
            else " (all)"
        )
        + ".",
        f"- Answerability ({th['mode']}): answer when {th['intercept']:g} + "
        + " + ".join(f"{w:g} x {k}" for k, w in th["weights"].items())
        + f" >= {th['min_score']:g} (`answer/answerability.py`).",
    ]
    if cfg["calibrate"]:
        lines += [
            "- Calibration: one server run with refusal disabled (`SCDB_ANSWER_MIN_SCORE=-1e9`)."
            " The localizer is re-run in-process on each response's hits (same model), which"
            " gives every candidate sentence's signals; `decide()` and the extractive"
            " synthesizer are replayed exactly for any model and threshold. Latency below is"
            " that of the no-refusal run (refusals are cheaper).",
        ]
        rc = report["calibration"]["replay_check"]
        lines.append(
            f"- Replay check (refusal off, replay vs server): {rc['text_mismatches']} text"
            f" and {rc['citation_mismatches']} citation mismatches in {rc['requests']} requests;"
            f" max |best_cos diff| {rc['max_abs_best_cos_diff']}."
        )
    lines.append(
        "- **Near miss** (issue 21): every fifth paragraph (corpus order) is left out"
        " (`filters.doc_id`), its article's other paragraphs stay; each question is asked once,"
        " at the offset that leaves its own paragraph out. Right: refused, or answered with text"
        " containing the gold answer (a sibling paragraph may hold it). The worst of the five"
        " offsets is the row's number."
    )
    lines += ["", "## Metrics", ""]
    ev = report["evaluations"]
    cols = {"REPORT half": ev["report"], "CALIBRATION half (in-sample)": ev["calibration"]}
    for name, extra in report.get("comparisons", {}).items():
        cols[f"REPORT, {name}"] = extra
    lines.append(metric_table(cols))
    lines += ["", "### Near miss by offset", ""]
    lines.append("| half | offset | n | refused | answered with gold | wrong | right share |")
    lines.append("|---|---|---|---|---|---|---|")
    for half in ("report", "calibration"):
        for off, o in (ev[half].get("near_miss") or {}).get("offsets", {}).items():
            lines.append(
                f"| {half} | {off} | {o['n']} | {o.get('refused', 0)} |"
                f" {o.get('answered_gold', 0)} | {o.get('wrong', 0)} | {o['ok_rate']:.3f} |"
            )
    lines.append("")
    lines += [
        "`span_f1` is informational (no target): the localized span is a whole sentence, so its"
        " token F1 against a short gold answer stays low even when it holds the answer"
        " (`span_contains_gold`).",
        "",
    ]
    if local is not None:
        lines += local_section(local)
    lines += ["Definitions:", ""]
    for k, d in METRIC_DOC.items():
        lines.append(f"- `{k}`: {d}.")
    lat = report["latency_ms"]
    lines += [
        "",
        "## Latency (ms, one request at a time)",
        "",
        "| requests | server total p50 / p95 | client wall p50 / p95 | n |",
        "|---|---|---|---|",
    ]
    for name, v in lat.items():
        s, c = v["server_total_ms"], v["client_wall_ms"]
        if s is None:
            continue
        lines.append(f"| {name} | {s['p50']} / {s['p95']} | {c['p50']} / {c['p95']} | {s['n']} |")
    names = list(dict.fromkeys(k for v in lat.values() for k in v["stages_ms"]))
    if names:
        lines += ["", "Per-stage server latency (p50 / p95 ms):", ""]
        lines += ["| requests | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for name, v in lat.items():
            st = v["stages_ms"]
            cells = [f"{st[n]['p50']} / {st[n]['p95']}" if st.get(n) else "—" for n in names]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    sig = report["signals"]
    lines += [
        "",
        "## Signals of the best sentence (both halves, as returned by the server)",
        "",
        "| requests | best_cos p5 / p25 / p50 / p75 / p95"
        " | best_coverage p5 / p25 / p50 / p75 / p95 |",
        "|---|---|---|",
    ]
    for kind, v in sig.items():
        if v["best_cos"] is None:
            continue
        lines.append(
            f"| {kind} | "
            + " / ".join(str(x) for x in v["best_cos"].values())
            + " | "
            + " / ".join(str(x) for x in v["best_coverage"].values())
            + " |"
        )
    if cfg["calibrate"]:
        lines += calibration_section(report["calibration"])
    fs = report["failure_summary"]
    lines += [
        "",
        "## Failures (REPORT half)",
        "",
        "| kind | count | meaning |",
        "|---|---|---|",
    ]
    for k, d in FAILURE_KINDS.items():
        lines.append(f"| {k} | {fs['counts'][k]} | {d} |")
    for k, v in fs.get("patterns", {}).items():
        lines.append(f"\n- {k}: {v}")
    for k in FAILURE_KINDS:
        exs = report["failures"][k]
        if not exs:
            continue
        lines += [
            "",
            f"### {k} ({len(exs)} of {fs['counts'][k]} shown)",
            "",
            "| question | gold | answer | cited doc(s) | gold doc (rank in hits) | cos / cov |",
            "|---|---|---|---|---|---|",
        ]
        for e in exs:
            sig = e["signals"] or {}
            ans = e["answer"] + (f" **[span: {e['span']}]**" if e.get("span") is not None else "")
            if e.get("answer_contains_gold"):
                ans += " *(contains the gold answer)*"
            lines.append(
                f"| {_md_escape(e['question'])} | {_md_escape(e['gold'])} | {_md_escape(ans)}"
                f" | {_md_escape(', '.join(e['cited_docs']) or '—')}"
                f" | {e['gold_doc']} ({fmt(e['gold_rank_in_hits'])})"
                f" | {fmt(sig.get('best_cos'), 2)} / {fmt(sig.get('best_coverage'), 2)} |"
            )
    return "\n".join(lines) + "\n"


def calibration_section(cal: dict[str, Any]) -> list[str]:
    c, cv, b = cal["chosen"], cal["cross_validated_calibration"], cal["builtin"]
    auc = cal["auc"]
    lines = [
        "",
        "## Calibration",
        "",
        f"Objective: {cal['objective']}.",
        "",
        f"- Refit on this run's CALIBRATION half: intercept {c['intercept']:g}, "
        + ", ".join(f"{k} {v:g}" for k, v in c["weights"].items())
        + f"; threshold {c['min_score']:g}.",
        f"- Shipped (answer/answerability.py; the headline columns): intercept"
        f" {b['intercept']:g}, "
        + ", ".join(f"{k} {v:g}" for k, v in b["weights"].items())
        + f"; threshold {b['min_score']:g}.",
        f"- AUC in scope vs out of scope: best_cos alone {auc['calibration']['best_cos']}"
        f" (CAL) / {auc['report']['best_cos']} (REP); the model {auc['calibration']['model']}"
        f" (CAL) / {auc['report']['model']} (REP).",
        f"- {cv['folds']}-fold cross-validation inside CALIBRATION (by article; fit on 3/4,"
        f" scored out of fold): FR {fmt(cv['false_refusal_rate'])}, out-of-scope refused"
        f" {fmt(cv['oos_refusal_rate'])}, recall {fmt(cv['citation_recall'])}, precision"
        f" {fmt(cv['citation_precision'])} (threshold {cv['threshold']:g}).",
        "",
        "Frontier of the refit: the lowest threshold reaching each out-of-scope refusal target"
        " on CALIBRATION (point estimates: no margin, no false-refusal budget), and what it"
        " gives on both halves:",
        "",
        "| OOS target | threshold | CAL FR | CAL OOS refused | CAL recall | CAL precision"
        " | REP FR | REP OOS refused | REP recall | REP precision |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in cal["frontier"]:
        cc, rr = f["calibration"], f["report"]
        lines.append(
            f"| {f['oos_target']} | {f['threshold']:g}"
            + "".join(
                f" | {fmt(x[k])}"
                for x in (cc, rr)
                for k in (
                    "false_refusal_rate",
                    "oos_refusal_rate",
                    "citation_recall",
                    "citation_precision",
                )
            )
            + " |"
        )
    lines += [
        "",
        "Localization weights (score = cos + coverage_weight x weighted coverage + rank_prior /"
        " rank + passage_weight x passage coverage): share of CALIBRATION in-scope questions"
        " whose best sentence lies in the gold paragraph, best 8 of the grid and the built-in:",
        "",
        "| coverage_weight | rank_prior | passage_weight | gold passage share |",
        "|---|---|---|---|",
    ]
    rows = list(cal["localize_grid"])
    if cal.get("localize_builtin") and cal["localize_builtin"] not in rows:
        rows.append(cal["localize_builtin"])
    for g in rows:
        mark = " (built-in)" if g == cal.get("localize_builtin") else ""
        lines.append(
            f"| {g['coverage_weight']} | {g['rank_prior']} | {g['passage_weight']}"
            f" | {g['gold_passage_share']}{mark} |"
        )
    return lines


def local_section(local: dict[str, Any]) -> list[str]:
    """The local model next to the extractive default on the same fixed REPORT sample."""
    cfg = local["config"]
    ev = local["evaluations"]
    lines = [
        "## The local model (`[llm]` extra) on a fixed REPORT sample",
        "",
        f"Generated {local['generated_at']} by `{local['command']}` (commit"
        f" `{local['environment']['git_commit']}`). **Sample**: {cfg['questions']} REPORT"
        f" questions, stratified by article (round-robin over the {cfg['articles']} REPORT"
        " articles, file order within each), each asked in scope and out of scope; the same"
        " sample is answered by the extractive default (a second server) for comparison. Not run"
        " on CALIBRATION (model latency below).",
        (f" **Partial run: {cfg['partial']}.**" if cfg.get("partial") else ""),
        f" Model: {local['model']}; {local['environment']['cpus']} CPUs, load average"
        f" {local['environment']['load_avg_1min']} at the end.",
        "",
    ]
    lines.append(
        metric_table(
            {
                "local model (REPORT sample)": ev["local"],
                "extractive (same sample)": ev["extractive"],
            }
        )
    )
    prov = local["providers"]
    lines += [
        "Who wrote the answers (in-scope and out-of-scope requests of the local run):"
        + ", ".join(f" {k} {v}" for k, v in prov.items())
        + ".",
        "",
        "What happened to the model's output where it ran (synth notes): "
        + (", ".join(f"{k} {v}" for k, v in local.get("synth_notes", {}).items()) or "none")
        + ".",
        "",
        f"Model sentences dropped by verification: {local['dropped_sentences']} (in"
        f" {local['answers_with_drops']} answers). Local run latency (server total):"
        f" p50 {local['latency_ms']['p50']} ms, p95 {local['latency_ms']['p95']} ms over the"
        f" requests where the model ran ({local['latency_ms']['n']}).",
        "",
    ]
    return lines
