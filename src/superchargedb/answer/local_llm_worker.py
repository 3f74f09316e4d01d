"""Local LLM subprocess: ``python -I local_llm_worker.py <model_path> <threads> [memory_mb]``.

Started by ``local_llm.LocalLlamaProvider`` through ``WorkerClient`` (one persistent process,
one request at a time), so a crash or an out-of-memory kill of the model cannot take the server
down, and gpt4all's threads never share a process with onnxruntime's (D-42). The module
is self-contained: it never imports the ``superchargedb`` package (which loads onnxruntime), so
it runs as a plain script; ``python -m superchargedb.answer.local_llm_worker`` works too.

Protocol, JSON lines: on start it writes ``{"ready": true, "load_s": ...}`` (or ``{"error":
...}`` and exits); then for each request line ``{"id", "prompt", "max_tokens", "stop"}`` it
writes ``{"id", "text", "prompt_tokens", "completion_tokens", "prompt_s", "gen_s", "stopped"}``
or ``{"id", "error"}``. It exits when stdin closes (the parent went away).
"""

from __future__ import annotations

import json
import os
import queue
import resource
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, TextIO

N_CTX = 4096
N_BATCH = 128  # prompt tokens per forward pass (gpt4all's default of 8 is ~3x slower)
DEFAULT_STOPS = ("<|im_end|>", "<|endoftext|>", "<|im_start|>")


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """``text`` up to the first stop string, and whether one was found."""
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def generate(model: Any, prompt: str, max_tokens: int, stops: Sequence[str]) -> dict[str, Any]:
    """Greedy completion of a raw (already templated) prompt, stopped at the first stop string.

    ``model`` is gpt4all's ``LLModel`` (``GPT4All(...).model``): its ``prompt_model`` is called
    with ``special=True`` so the ChatML markers are parsed as the model's special tokens (the
    high-level ``GPT4All.generate`` passes ``special=False`` and never stops at ``<|im_end|>``).
    Prompt tokens are counted by gpt4all's prompt callback, i.e. with the model's own tokenizer.
    """
    out: list[str] = []
    state: dict[str, Any] = {"prompt_tokens": 0, "completion_tokens": 0, "first": None}
    errors: list[str] = []

    def on_prompt(token_id: int) -> bool:
        state["prompt_tokens"] += 1
        return True

    def on_token(token_id: int, piece: str) -> bool:
        if token_id == -1:  # gpt4all reports errors (e.g. prompt longer than n_ctx) this way
            errors.append(piece)
            return False
        if state["first"] is None:
            state["first"] = time.perf_counter()
        out.append(piece)
        text, stopped = cut_at_stop("".join(out), stops)
        if stopped:
            out[:] = [text]
            state["stopped"] = "stop"
            return False
        state["completion_tokens"] += 1
        return True

    model._prompt_callback = on_prompt  # gpt4all looks it up on the instance per call
    t0 = time.perf_counter()
    model.prompt_model(
        prompt,
        "%1",
        on_token,
        n_predict=max_tokens,
        top_k=1,
        top_p=1.0,
        min_p=0.0,
        temp=0.0,
        n_batch=N_BATCH,
        repeat_penalty=1.0,  # a repeat penalty would punish copying names and numbers
        repeat_last_n=0,
        reset_context=True,
        special=True,
    )
    t1 = time.perf_counter()
    if errors:
        raise RuntimeError(errors[0].strip())
    first = state["first"] or t1
    return {
        "text": "".join(out).strip(),
        "prompt_tokens": state["prompt_tokens"],
        "completion_tokens": state["completion_tokens"],
        "prompt_s": round(first - t0, 4),
        "gen_s": round(t1 - first, 4),
        "stopped": state.get("stopped", "length"),
    }


def load(model_path: Path, threads: int) -> Any:
    from gpt4all import GPT4All

    gpt = GPT4All(
        model_path.name,
        model_path=str(model_path.parent),
        allow_download=False,
        n_threads=threads,
        device="cpu",
        n_ctx=N_CTX,
        verbose=False,
    )
    return gpt.model


def serve(model: Any, inp: TextIO, out: TextIO) -> None:
    for line in inp:
        if not line.strip():
            continue
        rid: Any = None
        try:
            req = json.loads(line)
            rid = req.get("id")
            stops = tuple(req.get("stop") or DEFAULT_STOPS)
            reply = generate(model, str(req["prompt"]), int(req.get("max_tokens", 160)), stops)
            reply["id"] = rid
        except Exception as exc:  # report, keep serving
            reply = {"id": rid, "error": f"{type(exc).__name__}: {exc}"[:500]}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def main(argv: list[str]) -> int:
    model_path, threads = Path(argv[1]), max(1, int(argv[2]))
    if len(argv) > 3 and int(argv[3]) > 0:
        limit = int(argv[3]) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # The protocol gets a private copy of stdout; fd 1 then points at stderr, so anything the
    # native library prints cannot corrupt the JSON lines.
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    t0 = time.perf_counter()
    try:
        model = load(model_path, threads)
    except Exception as exc:
        proto.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:500]}) + "\n")
        proto.flush()
        return 1
    proto.write(json.dumps({"ready": True, "load_s": round(time.perf_counter() - t0, 3)}) + "\n")
    proto.flush()
    serve(model, sys.stdin, proto)
    return 0


# --------------------------------------------------------------------------- parent side


class WorkerTimeout(Exception):
    pass


class WorkerError(Exception):
    """The worker died, failed to load, or answered with an error."""


class WorkerClient:
    """One worker process seen from the server: JSON lines in and out, stderr tail kept."""

    def __init__(self, model_path: Path, threads: int, memory_mb: int = 0) -> None:
        # -I: a clean interpreter that never imports superchargedb (and so not onnxruntime).
        argv = [sys.executable, "-I", str(Path(__file__).resolve()), str(model_path)]
        self.proc = subprocess.Popen(
            [*argv, str(threads), str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env={**os.environ, "OMP_NUM_THREADS": str(threads)},
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.err: deque[str] = deque(maxlen=8)
        self.load_s: float | None = None
        self._seq = 0
        for stream, sink, eof in (
            (self.proc.stdout, self.lines.put, True),
            (self.proc.stderr, self.err.append, False),
        ):
            threading.Thread(target=_pump, args=(stream, sink, eof), daemon=True).start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def _next(self, timeout: float) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=max(0.0, timeout))
        except queue.Empty:
            raise WorkerTimeout from None
        if line is None:
            rc = self.proc.wait()
            how = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
            tail = " | ".join(x.strip() for x in self.err if x.strip())[-300:]
            raise WorkerError(f"local model worker died ({how}): {tail or 'no output'}")
        try:
            return dict(json.loads(line))
        except ValueError:
            raise WorkerError(f"malformed worker reply: {line[:100]!r}") from None

    def wait_ready(self, timeout: float) -> float:
        """Seconds the model took to load; waits at most ``timeout`` for it."""
        if self.load_s is None:
            msg = self._next(timeout)
            if "error" in msg:
                raise WorkerError(f"local model failed to load: {msg['error']}")
            self.load_s = float(msg.get("load_s") or 0.0)
        return self.load_s

    def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        self._seq += 1
        deadline = time.perf_counter() + timeout
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({**msg, "id": self._seq}) + "\n")
            self.proc.stdin.flush()
        except OSError:  # BrokenPipeError: it died between requests
            self.stop()
            raise WorkerError("local model worker died before the request") from None
        while True:
            reply = self._next(deadline - time.perf_counter())
            if reply.get("id") == self._seq:
                if "error" in reply:
                    raise WorkerError(f"local model error: {reply['error']}")
                return reply


def _pump(stream: IO[str] | None, sink: Callable[[Any], None], eof: bool) -> None:
    if stream is not None:
        for line in stream:
            sink(line)
    if eof:
        sink(None)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
