"""The gateway's helper process dies with it: a gateway killed with -9 leaves no child behind.

A pool worker waits on a queue it holds both ends of, so nothing told it its gateway was gone:
a background encoder child tried in session 47 kept encoding at nice 19 for nobody, and the store
writer (``store.writer: process``) sat on its database connection. The test starts the real child
in a real process, kills that process with SIGKILL, and watches the child's state in /proc.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.procs import REPO_ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")

_WRITER = """
import os
from gateway.store.writer_process import WriterProcess
writer = WriterProcess()
print(writer.call(os.getpid), flush=True)
os.kill(os.getpid(), 9)
"""


def test_the_store_writer_process_dies_with_the_gateway() -> None:
    done = subprocess.run([sys.executable, "-c", _WRITER], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    (child,) = [int(pid) for pid in done.stdout.split()]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.1)
    assert not _alive(child), "the child outlived the gateway"


def _alive(pid: int) -> bool:
    """Running (a zombie left to a container's init to reap does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")
