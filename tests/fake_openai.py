"""A small local HTTP server that speaks the OpenAI chat-completions protocol (the network
boundary we cannot reach in tests). Each test sets what it answers."""

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
