"""Commands that talk to a running server over HTTP (D-41): ``ask`` and ``ingest``."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import typer

URL = typer.Option(
    os.environ.get("SCDB_URL", "http://127.0.0.1:8080"), "--url", help="Server URL ($SCDB_URL)"
)
KEY = typer.Option(None, "--key", help="API key (default: $SCDB_API_KEY)")
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._~+=@,-]")


def _client(url: str, key: str | None, scope: str | None = None) -> Any:
    from ..client import Client

    key = key or os.environ.get("SCDB_API_KEY")
    if not key:
        typer.echo("error: pass --key or set SCDB_API_KEY", err=True)
        raise typer.Exit(2)
    return Client(url, api_key=key, scope=scope, timeout=120)


def _locator_text(loc: dict[str, Any] | None) -> str:
    if not loc:
        return ""
    k = loc.get("kind")
    if k == "char_span":
        return f"chars {loc['start']}-{loc['end']}"
    if k == "line_range":
        return f"lines {loc['start']}-{loc['end']}"
    if k == "bbox":
        return f"page {loc.get('page')} box {loc.get('box')}"
    if k == "time_range":
        shot = f" shot {loc['shot_idx']}" if loc.get("shot_idx") is not None else ""
        return f"{loc['t_start_ms'] / 1000:.1f}s-{loc['t_end_ms'] / 1000:.1f}s{shot}"
    return json.dumps(loc)


def object_key(scope: str, root: Path, path: Path) -> str:
    """A stable object key for a file: the scope plus its path, made key-safe segment by segment."""
    rel = path.relative_to(root) if path != root else Path(path.name)
    parts = [_UNSAFE.sub("_", p) or "_" for p in rel.parts]
    parts = [("_" + p) if p.startswith(".") else p for p in parts]
    return "/".join([scope, *parts])


def register(app: typer.Typer) -> None:
    @app.command()
    def ask(
        question: str,
        scope: str = typer.Option(None, help="Scope to ask in (default: your active scope)"),
        top_k: int = typer.Option(8, help="Hits to retrieve"),
        as_json: bool = typer.Option(False, "--json", help="Print the raw response"),
        url: str = URL,
        key: str = KEY,
    ) -> None:
        """Ask a question; prints the cited answer and its numbered sources with locators."""
        from ..client import APIError

        with _client(url, key) as c:
            try:
                res = c.answer(question, scope=scope, top_k=top_k)
            except APIError as exc:
                typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
                raise typer.Exit(1) from None
        raw = res.raw
        if as_json:
            typer.echo(json.dumps(raw, indent=2))
            return
        ans = raw["answer"]
        typer.echo(ans["text"])
        if ans.get("refused"):
            typer.echo(f"\n(refused: {ans.get('refusal_reason', '')})")
            return
        typer.echo("")
        for cit in ans["citations"]:
            typer.echo(f"[{cit['index']}] {cit['source_uri']}  {_locator_text(cit['locator'])}")
        synth: dict[str, Any] = next(
            (s for s in raw["trace"]["stages"] if s["stage"] == "synth"), {}
        )
        typer.echo(
            f"\nprovider: {ans.get('provider')}  faithfulness: {ans['nli_faithfulness']}"
            f"  {raw['trace']['total_ms']:.0f} ms  {synth.get('detail', '')}"
        )

    @app.command()
    def ingest(
        paths: list[Path],
        scope: str = typer.Option(..., help="Target scope"),
        groups: str = typer.Option(None, help="Comma-separated ACL groups (default: yours)"),
        wait: bool = typer.Option(True, help="Wait for media jobs and report their Units"),
        url: str = URL,
        key: str = KEY,
    ) -> None:
        """Upload and ingest every supported file under PATHS (progress bar, summary)."""
        from tqdm import tqdm

        from ..client import APIError
        from ..ingest.derive import sniff

        files = []
        for p in paths:
            if p.is_dir():
                for f in sorted(p.rglob("*")):
                    if f.is_file() and not (set(f.relative_to(p).parts) & SKIP_DIRS):
                        files.append((p, f))
            elif p.is_file():
                files.append((p.parent, p))
            else:
                typer.echo(f"error: {p} does not exist", err=True)
                raise typer.Exit(2)
        acl = None if groups is None else [g for g in groups.split(",") if g]
        stats: Counter[str] = Counter()
        planes: Counter[str] = Counter()
        failures: list[tuple[str, str]] = []
        jobs: list[tuple[str, str]] = []
        with _client(url, key, scope) as c:
            for root, f in tqdm(files, desc="ingest", unit="file"):
                name = str(f)
                try:
                    with f.open("rb") as fh:
                        head = fh.read(8192)
                    mime = sniff(head, f.name)
                    if mime == "application/octet-stream":
                        stats["unsupported"] += 1
                        continue
                    if mime == "text/plain" and f.suffix.lower() in (".md", ".markdown"):
                        mime = "text/markdown"
                    key_ = object_key(scope, root, f)
                    sha = hashlib.sha256(f.read_bytes()).hexdigest()
                    etag = c.object_etag(key_)
                    if etag == f'"{sha}"':
                        stats["unchanged"] += 1
                        continue
                    c.put_object(key_, f.read_bytes(), mime, acl_groups=acl, if_match=etag)
                    unit: dict[str, Any] = {"source_uri": key_, "mime": mime, "doc_id": key_}
                    if acl is not None:
                        unit["acl_groups"] = acl
                    res = c.ingest([unit]).results[0]
                    raw = res.raw
                    if not raw.get("ok"):
                        err = raw.get("error", {})
                        failures.append((name, f"{err.get('code')}: {err.get('message')}"))
                    elif raw.get("status") == "queued":
                        jobs.append((name, raw["job_id"]))
                        stats["queued"] += 1
                    else:
                        stats["ingested"] += 1
                        planes["text"] += len(raw.get("unit_ids") or [raw["unit_id"]])
                except APIError as exc:
                    failures.append((name, f"{exc.code}: {exc.message}"))
                except OSError as exc:
                    failures.append((name, str(exc)))
            if wait and jobs:
                with tqdm(total=len(jobs), desc="derive", unit="job") as bar:
                    pending = dict(jobs)
                    while pending:
                        for name, job_id in list(pending.items()):
                            j = c.get_job(job_id)
                            if j["state"] in ("done", "failed"):
                                del pending[name]
                                bar.update(1)
                                if j["state"] == "failed":
                                    failures.append((name, f"job failed: {j['error']}"))
                                else:
                                    for uid in j["unit_ids"]:
                                        planes[c.get_unit(uid).raw["plane"]] += 1
                        if pending:
                            time.sleep(1.0)
        typer.echo(
            f"files: {len(files)}  ingested: {stats['ingested']}  media jobs: {stats['queued']}"
            f"  unchanged: {stats['unchanged']}  unsupported: {stats['unsupported']}"
            f"  failed: {len(failures)}"
        )
        if planes:
            typer.echo(
                "units per plane: " + ", ".join(f"{k}={v}" for k, v in sorted(planes.items()))
            )
        for name, why in failures:
            typer.echo(f"  FAILED {name}: {why}")
        if failures:
            raise typer.Exit(1)
