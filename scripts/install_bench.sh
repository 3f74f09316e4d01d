#!/usr/bin/env bash
# Installs the `bench` extra (LanceDB, txtai, matplotlib) for `superchargedb bench` / bench/peers.py.
#
#   bash scripts/install_bench.sh            # into .venv (the project venv)
#   bash scripts/install_bench.sh /path/venv # into another venv (created when missing)
#
# txtai depends on torch; plain `pip install txtai` resolves to a CUDA build of several GB. The CPU
# wheel of torch 2.13.0 lies on this kind of machine's disk (pip's find-links), so it is installed
# first and pinned, and the extra then keeps it. Nothing here downloads a model: the benchmark feeds
# every system our own precomputed MiniLM vectors.
#
# Prints the time taken and the disk the extra added to the venv.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
PYTHON=${PYTHON:-python3}
TORCH=${SCDB_BENCH_TORCH:-torch==2.13.0}

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"
site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
before=$(du -sk "$VENV" | cut -f1)
t0=$(date +%s)

# The project itself (no-op when already installed editable).
"$PY" -m pip show superchargedb >/dev/null 2>&1 || "$PY" -m pip install -q -e .

# 1. CPU torch first, so that txtai's `torch>=...` requirement is already satisfied.
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.version.cuda is None else 1)' 2>/dev/null; then
  "$PY" -m pip install -q "$TORCH"
fi
torch_ver=$("$PY" -c 'import torch; print(torch.__version__)')

# 2. The extra, with torch held where it is.
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
echo "torch==${torch_ver}" >"$constraints"
"$PY" -m pip install -q -e '.[bench]' -c "$constraints"

t1=$(date +%s)
after=$(du -sk "$VENV" | cut -f1)
"$PY" - <<'EOF'
import importlib.metadata as md
import torch

for name in ("lancedb", "pyarrow", "txtai", "faiss-cpu", "transformers", "matplotlib"):
    try:
        print(f"  {name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"  {name} (not installed)")
print(f"  torch {torch.__version__} (cuda: {torch.version.cuda})")
EOF
echo "bench extra installed into $VENV ($site) in $((t1 - t0)) s;" \
  "the venv grew by $(((after - before) / 1024)) MiB (now $((after / 1024)) MiB)"
