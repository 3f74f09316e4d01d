"""Side by side, same run: our Service vs LanceDB (native hybrid) vs txtai (hybrid), in-process.

Every system runs in its own subprocess (``python -m bench.peers --child SYSTEM``), so each peak RSS
(``ru_maxrss``) is its own, and is driven by the parent over a pipe (one JSON line per command).

* **Same Units, same vectors.** Our Service ingests the documents (``title + "\\n" + text``, 64
  per call) through its real ingest path; the Units it stores (chunks, with the title line for
  later chunks) and their vectors are exported and given to the peers, so every system indexes the
  same texts with the same MiniLM-L6 int8 vectors. Vectors come from the cache of
  bench/common/embedcache.py (computed once per text, default model); no system embeds anything
  while being measured, queries included (our Service's query embedder is served from the same
  cache, so its ``embed`` stage is a lookup). Live query embedding cost is printed on its own line.
* **Each peer configured as its docs recommend** (the configuration is printed in the report):
  LanceDB: native FTS index on the text, BITMAP scalar indexes on the scope columns, filters as
  ``where(..., prefilter=True)``, hybrid = vector + FTS fused by ``RRFReranker(K=60)``, cosine;
  no ANN index under ``--lancedb-ann-min-rows`` rows (exact scan, as its docs advise for small
  tables). txtai: ``Embeddings(hybrid=True, content=True)`` with external vectors; filters as
  SQL ``where similar(:q) and scope_t = ...``.
* **Alternating rounds.** The queries are split into rounds; in each round every cell
  (mode x filter x concurrency) runs the round's queries on every system in turn (the order
  rotates), so load noise from this shared machine hits all systems alike.
* **Filters.** Every document gets a scope ``acme/alpha/bench/t<b//10>/u<b>`` from a stable
  0..99 bucket of its id; a query filtered to ``.../t3`` sees ~10 %, to ``.../t3/u35`` ~1 %.
  Peers get ``scope_t`` / ``scope_u`` columns. Every filtered hit is checked against its filter.
* **HTTP overhead** (ours only): the same hybrid queries through ``POST /v1/search`` on a local
  uvicorn, paired per query with the in-process call; reported on its own line.

    python -m bench.peers                                  # classic-adi of $SCDB_EVAL_DIR
    python -m bench.peers --dataset "$SCDB_EVAL_DIR/scifact" --limit-docs 1000 --limit-queries 100

Writes ``<out>/peers.json``, ``peers.md``, ``peers_latency.png`` and
``peers_quality_latency.png``. Needs the ``bench`` extra (scripts/install_bench.sh) for the peers;
without it they are reported as not run.

One module each: ``cells`` (what is measured), ``units`` (what every child reads), ``ours`` /
``lancedb_peer`` / ``txtai_peer`` (the adapters), ``child`` (the child's protocol loop),
``parent`` (the parent's end of the pipe), ``prepare`` (queries, scale data, embedding cache),
``run`` (the alternating rounds), ``summary`` (ratios), ``markdown``, ``plots``, ``cli``.
"""
