"""What ``kill -9`` (or SIGTERM) loses with the database up: a burst answered, the signal right after the last answer.

SIGKILL gives the gateway no lifespan: without the journal (``--no-journal``, the code before
session 36) the records still in the writer's memory queue were gone. With it (the default) each
answered request's record is on disk before the client has its answer, and the restarted gateway
replays what the writer had not committed (store/journal.py). Prints, per run, how many answered
requests the SQLite store lacks after a restart on the same files.

    python -m benchmarks.kill9_loss --burst 40 --runs 3 [--signal term] [--no-journal]
"""

from __future__ import annotations

import argparse
import signal
import sqlite3
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

from tests.procs import run_gateway, run_simulator, sim_models


def stored(work: Path) -> set[str]:
    with sqlite3.connect(work / "ventana.db") as db:
        return {row[0] for row in db.execute("SELECT request_id FROM requests")}


def one_run(
    work: Path, base_url: str, burst: int, sig: int = signal.SIGKILL, journal: bool = True
) -> tuple[int, int, int]:
    """Of one burst of ``burst`` requests (8 at a time) then the signal: how many were answered, how many
    the store lacked after the signal, and how many after a restart on the same files (the journal replayed)."""
    config = {"models": sim_models(base_url), "store": {"journal": journal}}
    with run_gateway(work, config) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="sk-burst", max_retries=0)

        def ask(i: int) -> str:
            messages = [{"role": "user", "content": f"burst {i}"}]
            raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
            return raw.headers["x-ventana-request-id"]

        with ThreadPoolExecutor(8) as pool:
            answered = set(pool.map(ask, range(burst)))
        gw.proc.send_signal(sig)
        gw.proc.wait(30)
    missing = len(answered - stored(work))
    with run_gateway(work, config):
        pass  # serving means the start-up replay is done
    return len(answered), missing, len(answered - stored(work))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--signal", choices=("kill", "term"), default="kill")
    parser.add_argument("--no-journal", action="store_true", help="the code path before the journal")
    args = parser.parse_args()
    sig = signal.SIGKILL if args.signal == "kill" else signal.SIGTERM
    with tempfile.TemporaryDirectory() as d, run_simulator(Path(d), record=False) as sim:
        for run in range(args.runs):
            work = Path(d) / f"run{run}"
            work.mkdir()
            answered, missing, lost = one_run(work, sim.base_url, args.burst, sig, journal=not args.no_journal)
            print(
                f"run {run}: answered {answered}, not stored after SIG{args.signal.upper()} {missing}, "
                f"lost after the restart {lost} ({lost / answered:.0%})"
            )


if __name__ == "__main__":
    main()
