"""What ``kill -9`` loses with the database up: a burst answered, SIGKILL straight after the last answer.

SIGKILL gives the gateway no lifespan, so the records still in the writer's memory queue (at
most ``LINGER_S`` plus a batch of traffic, docs/hardening.md) are gone; the records the writer
had committed, or spooled while the database was away, survive (tests/security/test_kill9_mid_burst.py).
Prints, per run, how many answered requests the SQLite store lacks afterwards.

    python -m benchmarks.kill9_loss --burst 40 --runs 3
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

from tests.procs import run_gateway, run_simulator, sim_models


def one_run(work: Path, base_url: str, burst: int) -> tuple[int, int]:
    """Answered and lost request counts of one burst of ``burst`` requests (8 at a time), then the kill."""
    with run_gateway(work, {"models": sim_models(base_url)}) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="sk-burst", max_retries=0)

        def ask(i: int) -> str:
            messages = [{"role": "user", "content": f"burst {i}"}]
            raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
            return raw.headers["x-ventana-request-id"]

        with ThreadPoolExecutor(8) as pool:
            answered = set(pool.map(ask, range(burst)))
        gw.proc.kill()
        gw.proc.wait(30)
    with sqlite3.connect(work / "ventana.db") as db:
        stored = {row[0] for row in db.execute("SELECT request_id FROM requests")}
    return len(answered), len(answered - stored)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d, run_simulator(Path(d), record=False) as sim:
        for run in range(args.runs):
            work = Path(d) / f"run{run}"
            work.mkdir()
            answered, lost = one_run(work, sim.base_url, args.burst)
            print(f"run {run}: answered {answered}, lost to kill -9 {lost} ({lost / answered:.0%})")


if __name__ == "__main__":
    main()
