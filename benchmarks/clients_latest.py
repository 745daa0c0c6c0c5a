"""Drift check: the newest release of every pinned client, run through the same end-to-end tests.

``tests/clients.txt`` lists the clients the suite was verified with (Claude Code and Codex CLI
from npm, the OpenAI, Anthropic and Agents SDKs from PyPI) and the tests that exercise each.
``tests/run.sh`` installs exactly those versions, so a client release never turns the suite
red on its own. This script asks each registry for the newest version, installs it into a
scratch prefix (npm: ``<scratch>/npm``; Python: a virtualenv over the system site-packages
holding only the newer package), runs the client's tests against it (``VENTANA_<COMMAND>_BIN``
points the end-to-end tests at the scratch binary), and prints one row per client:

    python -m benchmarks.clients_latest [--only claude-code,codex] [--scratch DIR] [--keep]

It never fails: a client that fails its tests, or that cannot be installed, is a row of the
report (exit status 0). Nothing outside the scratch folder is changed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLIENTS = REPO / "tests" / "clients.txt"
TEST_TIMEOUT_S = 1200


@dataclass(frozen=True)
class Client:
    """One line of tests/clients.txt."""

    kind: str  # "npm" or "pip"
    package: str
    pinned: str
    command: str  # the npm package's binary, "-" for a Python package
    tests: tuple[str, ...]

    @property
    def short(self) -> str:
        return self.package.rsplit("/", 1)[-1]


@dataclass
class Row:
    client: Client
    latest: str = "?"
    result: str = "not run"
    detail: str = ""
    seconds: float = 0.0


def read_clients(path: Path = CLIENTS) -> list[Client]:
    clients = []
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        kind, package, version, command, *tests = fields
        clients.append(Client(kind, package, version, command, tuple(tests)))
    return clients


def _run(cmd: list[str], timeout: float, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)  # type: ignore[call-overload, no-any-return]


def latest_version(client: Client) -> str:
    """The registry's newest release (npm's ``latest`` tag; pip's newest index entry)."""
    if client.kind == "npm":
        out = _run(["npm", "view", client.package, "version"], 120)
        if out.returncode != 0:
            raise RuntimeError(f"npm view failed: {out.stderr.strip()[-200:]}")
        return out.stdout.strip()
    out = _run([sys.executable, "-m", "pip", "index", "versions", client.package], 180)
    found = re.search(rf"^{re.escape(client.package)} \(([^)]+)\)", out.stdout, re.MULTILINE)
    if not found:
        raise RuntimeError(f"pip index versions failed: {(out.stderr or out.stdout).strip()[-200:]}")
    return found.group(1)


def install(client: Client, version: str, scratch: Path) -> tuple[str, dict[str, str]]:
    """Install ``version`` into the scratch folder; the Python to run the tests with and the env to add."""
    if client.kind == "npm":
        prefix = scratch / "npm"
        spec = f"{client.package}@{version}"
        out = _run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", spec], 600)
        binary = prefix / "node_modules" / ".bin" / client.command
        if out.returncode != 0 or not binary.exists():
            raise RuntimeError(f"npm install failed: {out.stderr.strip()[-300:]}")
        return sys.executable, {f"VENTANA_{client.command.upper()}_BIN": str(binary)}
    venv = scratch / f"venv-{client.short}"
    made = _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], 300)
    python = venv / "bin" / "python"
    if made.returncode != 0:
        raise RuntimeError(f"venv failed: {made.stderr.strip()[-300:]}")
    pin = f"{client.package}=={version}"
    out = _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", pin], 900)
    if out.returncode != 0:
        raise RuntimeError(f"pip install failed: {out.stderr.strip()[-300:]}")
    return str(python), {}


def run_tests(client: Client, python: str, extra_env: dict[str, str]) -> tuple[str, str]:
    """Run the client's tests; (result, pytest's summary line and the first failure if any)."""
    env = {**os.environ, **extra_env}
    pytest = ["-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", "-p", "no:benchmark", "-n", "0"]
    cmd = [python, *pytest, *client.tests]
    try:
        out = _run(cmd, TEST_TIMEOUT_S, cwd=REPO, env=env)
    except subprocess.TimeoutExpired:
        return "timeout", f"pytest did not finish in {TEST_TIMEOUT_S} s"
    lines = out.stdout.strip().splitlines()
    summary = lines[-1].strip("= ") if lines else out.stderr.strip()[-200:]
    if out.returncode == 0:
        return ("skipped" if "skipped" in summary else "passed"), summary
    failed = [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))]
    return "failed", summary + (f"; first: {failed[0][:300]}" if failed else "")


def check(client: Client, scratch: Path, same_too: bool) -> Row:
    row = Row(client)
    started = time.monotonic()
    try:
        row.latest = latest_version(client)
        if row.latest == client.pinned and not same_too:
            row.result, row.detail = "= pinned", "the newest release is the verified one (tests/run.sh runs it)"
            return row
        python, env = install(client, row.latest, scratch)
        row.result, row.detail = run_tests(client, python, env)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        row.result, row.detail = "not installed", str(exc)
    finally:
        row.seconds = time.monotonic() - started
    return row


def table(rows: list[Row]) -> str:
    out = [
        "| client | pinned | latest | result | tests | detail |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        detail = r.detail.replace("|", "\\|").replace("\n", " ")
        tests = ", ".join(Path(t).name for t in r.client.tests)
        out.append(f"| {r.client.package} | {r.client.pinned} | {r.latest} | {r.result} | {tests} | {detail} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated packages (default: all of tests/clients.txt)")
    parser.add_argument("--scratch", type=Path, help="install folder (default: a temporary one, removed afterwards)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--same-too", action="store_true", help="run the tests even when the newest is the pinned one")
    args = parser.parse_args()
    wanted = {w.strip() for w in args.only.split(",") if w.strip()}
    clients = [c for c in read_clients() if not wanted or c.package in wanted or c.short in wanted]
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="ventana-clients-latest-"))
    scratch.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for client in clients:
            print(f"{client.package}: checking the newest release ...", file=sys.stderr, flush=True)
            row = check(client, scratch, args.same_too)
            print(f"  {row.latest}: {row.result} ({row.seconds:.0f} s)", file=sys.stderr, flush=True)
            rows.append(row)
    finally:
        if not args.keep and args.scratch is None:
            shutil.rmtree(scratch, ignore_errors=True)
    print(table(rows))


if __name__ == "__main__":
    main()
