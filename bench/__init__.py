"""SuperChargeDB's benchmarks, run from the repository root as ``python -m bench.<name>``.

Shared pieces live in ``bench.common`` (evaluation data, embedding cache, the in-process Service,
statistics, the environment header, report writing, progress bars, plots, the benchmark server);
the peer adapters of the side-by-side benchmark in ``bench.peers``. Reports go to
``bench/results/``. The evaluation data's folder is ``SCDB_EVAL_DIR`` (or ``--eval-dir``).
"""
