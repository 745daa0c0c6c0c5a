"""``benchmarks.request_timeline`` marks the seams of a served request in the gateway and the floor proxy
(uvicorn's protocol and the upstream client, wrapped from outside; in the gateway a few of its own
functions too) and reports each segment's median."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import cast

import pytest

from benchmarks.request_timeline import GATEWAY_SEGMENTS, SEGMENTS, _neighbour, requests_of, segments
from benchmarks.timeline_hooks import DIR_VARIABLE
from tests.procs import REPO_ROOT, SimHandle, _env


def test_marks_split_per_request_and_a_new_connections_first_begin_is_not_the_forward() -> None:
    marks = [
        ("in", 1_000),
        ("forward", 2_000),  # the connection's own begin, before connecting
        ("forward", 5_000),  # the request's
        ("forward sent", 6_000),
        ("provider", 9_000),
        ("forward", 9_500),  # a later begin on the same request's connection: not its forward
        ("head", 10_000),
        ("head sent", 11_000),
        ("end", 12_000),
        ("end sent", 13_000),
        ("in", 20_000),
        ("forward", 21_000),
        ("forward sent", 22_000),
        ("provider", 25_000),
        ("head", 26_000),
        ("head sent", 27_000),
        ("end", 28_000),
        ("end sent", 31_000),
    ]
    found = requests_of(marks)
    assert [r["forward"] for r in found] == [5_000, 21_000]
    medians = segments(found)
    assert medians["before the forward"] == 2.5  # 4 us and 1 us
    assert medians["the provider"] == 3.0
    assert medians["end write"] == 2.0
    assert medians["in to end written"] == 11.5
    assert "first body write" not in medians  # a non-streamed answer has no body before its end
    found[0].update(door=1_500, turn=2_500, journal=9_800, journaled=9_900)
    own = segments(found, GATEWAY_SEGMENTS)
    assert own == {"server and middleware": 0.5, "admission and body read": 1.0, "the journal": 0.1}


def test_the_timeline_reads_both_proxies_seams_over_real_http() -> None:
    """With an unmarked neighbour in the rounds (``--neighbour``) and a config change for the gateway."""
    args = "--rounds 1 --requests 12 --skip 2 --neighbour sleep=1 --config store.batch_size=7"
    run = _timeline(*args.split())
    assert "beside sleep=1, the gateway with store.batch_size=7" in run.stdout
    rows = {line.split(" | ")[0].strip("| "): line for line in run.stdout.splitlines() if line.startswith("| ")}
    assert rows["segment (median us)"].split(" | ")[1:] == ["ventana", "floor |"]
    for label, _, _ in SEGMENTS:  # a stream passes every seam, in both proxies
        cells = [c.strip(" |") for c in rows[label].split(" | ")[1:]]
        assert len(cells) == 2 and all(float(c) > 0 for c in cells), rows[label]
    assert "client, ventana: first" in run.stdout
    for label, _, _ in GATEWAY_SEGMENTS:  # and the gateway's own seams, before the forward and after the answer
        assert float(rows[label].split(" | ")[1].strip(" |")) > 0, rows[label]


def test_the_growing_timeline_splits_a_new_round_from_a_resent_one() -> None:
    """``--growing``: a growing session and its fixed resends through the gateway, per history bucket, each
    side of the forward; every row has both shapes, in the order the client sent them."""
    run = _timeline("--growing", "12")
    rows = [line for line in run.stdout.splitlines() if line.startswith("| ") and "K |" in line]
    assert rows, run.stdout
    for row in rows:
        cells = [c.strip() for c in row.strip("| ").split(" | ")]
        grown, fixed = (int(n) for n in cells[1].split(" / "))
        assert grown >= 1 and fixed >= 5, row  # a fixed point is resent 5 times
        for pair in cells[2:4]:
            assert all(float(x) > 0 for x in pair.split(" / ")), row


def test_a_neighbour_it_cannot_start_is_refused_and_the_marks_folder_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DIR_VARIABLE, "/tmp/marks")
    with ExitStack() as stack, pytest.raises(SystemExit, match="litellm, burn=MS or sleep=MS"):
        _neighbour(stack, Path("/tmp"), cast(SimHandle, None), "fast=2")
    assert os.environ[DIR_VARIABLE] == "/tmp/marks"  # the gateway and floor started later still mark


def _timeline(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m benchmarks.request_timeline ARGS`` from the checkout, checked to have succeeded."""
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.request_timeline", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO_ROOT,
        env=_env(),
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run
