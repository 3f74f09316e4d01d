#!/usr/bin/env bash
# Sets up everything the project needs on a fresh machine: system packages, venv, Python packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# System packages used by the media pipeline, the shared rate-limit store and their tests
# (installed when missing). command -> Debian package
declare -A pkgs=(
  [tesseract]=tesseract-ocr
  [ffmpeg]=ffmpeg
  [ffprobe]=ffmpeg
  [espeak-ng]=espeak-ng
  [redis-server]=redis-server
  [chromium]=chromium  # the console's browser tests (Playwright drives it; never a download)
)
need=()
for cmd in "${!pkgs[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || need+=("${pkgs[$cmd]}")
done
# The English Tesseract model is a separate package.
if command -v tesseract >/dev/null 2>&1 && ! tesseract --list-langs 2>/dev/null | grep -qx eng; then
  need+=(tesseract-ocr-eng)
fi
if [ ${#need[@]} -gt 0 ]; then need+=(tesseract-ocr-eng); fi
if [ ${#need[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
fi

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# [redis]: the client for the shared rate-limit store (SCDB_REDIS_URL; tests/test_ratelimit_redis.py)
# [console]: Playwright for the console's browser tests (tests/test_console_browser.py)
.venv/bin/python -m pip install -q -e '.[dev,redis,console]'
