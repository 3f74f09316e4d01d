"""A small local HTTP server that speaks the OpenAI chat-completions protocol (the network
boundary we cannot reach in tests). Each test sets what it answers.

A request with ``stream: true`` gets ``chat.completion.chunk`` events: ``pieces`` when set, a
list of (text, what to wait for before sending it: seconds, or a ``threading.Event`` the
test sets), else ``reply`` in pieces of a few
characters; the last chunk carries the usage, as OpenAI's ``include_usage`` does. The waits
are real, so a client sees each piece only when it is sent."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class FakeOpenAI:
    def __init__(self) -> None:
        self.reply = "I cannot answer from the provided sources."
        self.status = 200
        self.delay_s = 0.0
        self.pieces: list[tuple[str, float | threading.Event]] | None = None
        self.break_after: int | None = None  # streamed pieces after which the connection drops
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                outer.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                if outer.status != 200:
                    self.send_response(outer.status)
                    self.end_headers()
                    self.wfile.write(b'{"error": "boom"}')
                    return
                if body.get("stream"):
                    self._stream(body)
                    return
                out = {
                    "id": "x",
                    "object": "chat.completion",
                    "model": body.get("model"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": outer.reply}}
                    ],
                    "usage": {"prompt_tokens": 321, "completion_tokens": 17},
                }
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any]) -> None:
                pieces: list[tuple[str, float | threading.Event]] = outer.pieces or [
                    (outer.reply[i : i + 7], 0.0) for i in range(0, len(outer.reply), 7)
                ]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for i, (text, wait) in enumerate(pieces):
                    if outer.break_after is not None and i >= outer.break_after:
                        return  # the connection closes without [DONE]
                    if isinstance(wait, threading.Event):
                        wait.wait(30)
                    else:
                        time.sleep(wait)
                    delta = {"choices": [{"index": 0, "delta": {"content": text}}]}
                    self._event({"object": "chat.completion.chunk", **delta})
                usage = {"prompt_tokens": 321, "completion_tokens": 17}
                self._event({"object": "chat.completion.chunk", "choices": [], "usage": usage})
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _event(self, obj: dict[str, Any]) -> None:
                self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def prompt(self) -> str:
        return self.requests[-1]["body"]["messages"][-1]["content"]


@contextmanager
def answer_client(
    tmp: Path, embedder: Any, fake: FakeOpenAI, units: list[dict[str, Any]], **settings: Any
) -> Iterator[Any]:
    """A TestClient over a fresh Service whose OpenAI-compatible provider is ``fake``, with the
    demo principals and ``units`` ingested as alice (``settings`` override the defaults)."""
    from fastapi.testclient import TestClient

    from conftest import make_service
    from superchargedb.api.app import create_app
    from superchargedb.demo import seed_principals

    svc = make_service(
        tmp,
        embedder,
        openai_base_url=fake.url,
        openai_api_key="sk-t",
        openai_chat_model="gpt-4o-mini",
        **settings,
    )
    seed_principals(svc)
    try:
        svc.ingest(svc.authenticate("Bearer aegis_sk_alice"), {"units": units})
        with TestClient(create_app(svc), raise_server_exceptions=False) as c:
            yield c
    finally:
        svc.close()
