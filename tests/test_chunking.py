"""Chunking tests with the real WordPiece tokenizer of the default embedder."""

from __future__ import annotations

import re
import time
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from superchargedb.errors import ValidationError
from superchargedb.ingest.chunking import Chunk, chunk_text
from superchargedb.models.embedder import OnnxEmbedder, make_embedder


@cache
def emb() -> OnnxEmbedder:
    e = make_embedder()
    assert isinstance(e, OnnxEmbedder)
    return e


def check_invariants(
    text: str, chunks: list[Chunk], max_tokens: int, *, allow_overlap: bool = True
) -> None:
    """What every chunking must guarantee, whatever the input."""
    covered = bytearray(len(text))
    prev: Chunk | None = None
    for c in chunks:
        assert 0 <= c.start < c.end <= len(text)
        assert text[c.start : c.end] == c.text
        assert c.text == c.text.strip()  # trimmed
        # the one allowed excess: a single code point that alone is several tokens (Hangul)
        assert emb().count_tokens(c.text) <= max_tokens or len(c.text) == 1
        assert c.line_start == text.count("\n", 0, c.start) + 1
        assert c.line_end == text.count("\n", 0, c.end - 1) + 1
        if prev is not None:
            assert c.start > prev.start and c.end > prev.end  # in order
            if not allow_overlap:
                assert c.start >= prev.end
        covered[c.start : c.end] = b"\x01" * (c.end - c.start)
        prev = c
    missing = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
    assert not missing, f"dropped characters at {missing[:10]}"


def paragraph(n_sentences: int, seed: int = 0) -> str:
    words = [
        "the",
        "of",
        "retrieval",
        "vector",
        "index",
        "query",
        "latency",
        "embedding",
        "chunk",
        "token",
        "model",
    ]
    sents = []
    for i in range(n_sentences):
        k = 8 + (i * 7 + seed) % 9
        body = " ".join(words[(i * 3 + j + seed) % len(words)] for j in range(k))
        sents.append(body.capitalize() + ".")
    return " ".join(sents)


def test_short_text_is_one_chunk() -> None:
    text = "A short note about embeddings.\n\nWith two paragraphs."
    chunks = chunk_text(text, emb())
    assert chunks == [Chunk(0, len(text), text, 1, 3)]


def test_whitespace_only_gives_nothing() -> None:
    assert chunk_text("", emb()) == []
    assert chunk_text(" \n\t \n", emb()) == []


def test_surrounding_whitespace_trimmed() -> None:
    text = "\n\n   Indented start.  \n"
    (c,) = chunk_text(text, emb())
    assert (c.start, c.end, c.text, c.line_start, c.line_end) == (5, 20, "Indented start.", 3, 3)


def test_markdown_split_at_headings() -> None:
    # each section fits alone (~150 tokens) but no two fit together
    sections = [f"## Section {i}\n\n{paragraph(12, seed=i)}" for i in range(4)]
    text = "\n\n".join(sections)
    assert all(150 < emb().count_tokens(s) < 240 for s in sections)
    chunks = chunk_text(text, emb())
    check_invariants(text, chunks, 240)
    assert [c.text for c in chunks] == sections


def test_oversized_section_keeps_to_itself_and_small_sections_pack() -> None:
    big = f"# Big\n\n{paragraph(20)}\n\n{paragraph(20, seed=3)}"
    text = f"{big}\n\n# Small A\n\nTiny.\n\n# Small B\n\nAlso tiny."
    chunks = chunk_text(text, emb())
    check_invariants(text, chunks, 240)
    assert chunks[0].text.startswith("# Big")
    assert chunks[-1].text == "# Small A\n\nTiny.\n\n# Small B\n\nAlso tiny."
    assert all("# Small" not in c.text for c in chunks[:-1])


def test_heading_joins_following_text() -> None:
    # A heading alone is a useless chunk: it packs with the start of its long paragraph.
    text = "# Title\n\n" + paragraph(40)
    chunks = chunk_text(text, emb())
    check_invariants(text, chunks, 240)
    assert len(chunks) > 1
    assert chunks[0].text.startswith("# Title\n\n") and len(chunks[0].text) > 100


def test_fenced_hash_lines_are_not_headings() -> None:
    code = "```python\n" + "\n".join(f"# comment {i}\nx = {i}" for i in range(5)) + "\n```"
    text = f"# Real\n\n{code}\n\n{paragraph(30)}"
    chunks = chunk_text(text, emb())
    check_invariants(text, chunks, 240)
    assert chunks[0].text.startswith("# Real\n\n```python")
    assert "```" in chunks[0].text.split("python", 1)[1]  # the whole fence stayed together


def test_paragraph_boundaries_preferred() -> None:
    paras = [paragraph(7, seed=i) for i in range(6)]  # ~100 tokens each
    text = "\n\n".join(paras)
    chunks = chunk_text(text, emb())
    check_invariants(text, chunks, 240)
    for c in chunks:  # every chunk is made of whole paragraphs
        assert c.text.split("\n\n")[0] in paras and c.text.split("\n\n")[-1] in paras


def test_long_paragraph_splits_at_sentences_with_overlap() -> None:
    text = paragraph(60)
    chunks = chunk_text(text, emb(), max_tokens=120, overlap_tokens=16)
    check_invariants(text, chunks, 120)
    assert len(chunks) >= 4
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert a.text.endswith(".")  # cut after a sentence
        assert b.start < a.end  # overlap inside one paragraph...
        assert emb().count_tokens(text[b.start : a.end]) <= 16  # ...of at most 16 tokens
    no_overlap = chunk_text(text, emb(), max_tokens=120, overlap_tokens=0)
    check_invariants(text, no_overlap, 120, allow_overlap=False)


def test_code_splits_on_lines() -> None:
    lines = [f"    result_{i} = compute(alpha, beta, {i})  # step {i}" for i in range(400)]
    text = "def f():\n" + "\n".join(lines) + "\n"
    chunks = chunk_text(text, emb(), kind="lines")
    check_invariants(text, chunks, 240, allow_overlap=False)
    assert len(chunks) > 5
    for c in chunks:
        line_begin = text.rfind("\n", 0, c.start) + 1
        assert text[line_begin : c.start].strip() == ""  # starts at a line start (indent trimmed)
        line_stop = text.find("\n", c.end)
        assert text[c.end : line_stop].strip() == ""  # ends at a line end


def test_logs_with_blank_line_blocks() -> None:
    block = "\n".join(f"2024-05-01T10:00:{i:02d} INFO request id={i} ok" for i in range(20))
    text = "\n\n".join([block] * 6)
    chunks = chunk_text(text, emb(), kind="lines")
    check_invariants(text, chunks, 240, allow_overlap=False)


@pytest.mark.parametrize(
    "text",
    [
        "supercalifragilistic" * 400,  # one giant word
        "日本語のテキスト" * 300,  # CJK without any whitespace
        '{"a":[1,2,3],"b":{"c":"d"}}' * 300,  # minified JSON
        ("x" * 150 + " ") * 50,  # words over WordPiece's 100-character limit
        "a\x00b\x1cc\x0bd " * 400,  # characters the normalizer deletes
    ],
)
def test_no_structure_still_bounded(text: str) -> None:
    chunks = chunk_text(text, emb(), max_tokens=64)
    check_invariants(text, chunks, 64)


def test_bare_count_function() -> None:
    def words(s: str) -> int:
        return len(s.split())

    text = paragraph(40)
    chunks = chunk_text(text, words, max_tokens=50, overlap_tokens=0)
    assert all(words(c.text) <= 50 for c in chunks)
    assert " ".join(c.text for c in chunks).split() == text.split()


def test_validation() -> None:
    with pytest.raises(ValidationError):
        chunk_text("text", emb(), max_tokens=0)
    with pytest.raises(ValidationError):
        chunk_text("text", emb(), kind="poetry")  # type: ignore[arg-type]


def test_one_megabyte_is_fast() -> None:
    parts = []
    for i in range(2000):
        parts.append(f"## Part {i}\n\n{paragraph(4 + i % 9, seed=i)}")
    text = "\n\n".join(parts)
    text = (text * (1_000_000 // len(text) + 1))[:1_000_000]
    t0 = time.perf_counter()
    chunks = chunk_text(text, emb())
    elapsed = time.perf_counter() - t0
    assert elapsed < 10, elapsed  # ~1.5 s here; dominated by one tokenizer pass
    assert sum(len(c.text) for c in chunks) >= len(re.sub(r"\s", "", text)) // 2
    assert max(emb().count_tokens(c.text) for c in chunks) <= 240


# -- properties --------------------------------------------------------------------------------

_atoms = st.one_of(
    st.sampled_from(
        ["the", "Vector", "index.", "query?", "Done!", "naïve", "café", "日本語", "😀", "x" * 120]
    ),
    st.sampled_from([" ", " ", " ", "\n", "\n\n", "\n# Heading\n", "\n```\n", "\t", "  "]),
    st.sampled_from([",", ".", "-", "(", ")", "\x00", "\u00a0", "\u200b", "e\u0301", "İ"]),
    st.text(min_size=1, max_size=6),
)
_texts = st.lists(_atoms, max_size=400).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_texts,
    max_tokens=st.sampled_from([1, 3, 8, 24, 64, 240]),
    overlap=st.sampled_from([0, 2, 8, 32]),
    kind=st.sampled_from(["prose", "lines"]),
)
def test_chunking_properties(text: str, max_tokens: int, overlap: int, kind: str) -> None:
    chunks = chunk_text(text, emb(), max_tokens, overlap, kind)  # type: ignore[arg-type]
    check_invariants(text, chunks, max_tokens, allow_overlap=kind == "prose" and overlap > 0)
    if emb().count_tokens(text) <= max_tokens and text.strip():
        assert len(chunks) == 1
    if overlap and kind == "prose":
        for a, b in zip(chunks, chunks[1:], strict=False):
            if b.start < a.end:
                assert emb().count_tokens(text[b.start : a.end]) <= overlap
