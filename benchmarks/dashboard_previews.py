"""Drive realistic traffic through a gateway scraped by Prometheus, then draw the dashboards as PNG.

    python -m benchmarks.dashboard_previews [--seconds 90] [--out grafana/previews]

Starts the provider simulator (20 ms latency), a gateway with the bundled policy and
Debian's ``prometheus`` (1 s scrapes), replays public data through the openai SDK (ToolBench
agent runs turn by turn, MetaTool requests offering 47 tools, BFCL memory conversations on
an 8K-window model, an occasional edited system prompt or dropped tool, an occasional
provider 503), and renders every dashboard with ``gateway.dashboards.preview``. Also prints
the per-request gateway overhead the Overview dashboard reports, with the cache figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
from tqdm import tqdm

from gateway.config import REPO_ROOT
from gateway.dashboards.preview import preview
from tests.procs import run_gateway, run_simulator, sim_models
from tests.prometheus import PromHandle, run_prometheus
from tests.shared_data import data_rows


def _data(name: str) -> list[dict[str, Any]]:
    return data_rows(name)


def _requests() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(session, model, request kwargs) forever, cycling through the public data."""
    runs, metatool, memory = _data("toolbench.jsonl"), _data("metatool.jsonl"), _data("bfcl_memory.jsonl")
    n = 0
    while True:
        for i, run in enumerate(runs):
            n += 1
            for cut in range(2, len(run["messages"]) + 1):
                msgs, tools = run["messages"][:cut], run["tools"]
                if msgs[-1]["role"] == "assistant" and msgs[-1].get("tool_calls"):
                    continue
                if n % 3 == 0 and cut >= 5:  # the system prompt edited mid-session: a "system" break
                    msgs = [{**msgs[0], "content": str(msgs[0]["content"]) + f" (v{n})"}, *msgs[1:]]
                if n % 4 == 0 and cut >= 6:  # a client drops a tool mid-session: a "tools" break
                    tools = tools[:-1]
                yield f"agent-{n}-{i}", "gpt-4o-mini", {"messages": msgs, "tools": tools}
            case = metatool[n % len(metatool)]
            query = [m for m in case["messages"] if m["role"] != "assistant"]
            yield f"tools-{n}", "gpt-4o-mini", {"messages": query, "tools": case["tools"]}
            conv = memory[n % len(memory)]["messages"]
            for cut in (len(conv) // 2, len(conv) // 2 + 4):
                yield f"memory-{n}", "small-window", {"messages": conv[: cut | 1]}


def _drive(base_url: str, sim: Any, seconds: float) -> int:
    client = openai.OpenAI(base_url=base_url, api_key="sk-demo", max_retries=0)
    deadline = time.monotonic() + seconds
    sent = 0
    with tqdm(total=int(seconds), desc="traffic (s)", unit="s") as bar:
        for session, model, kwargs in _requests():
            if time.monotonic() > deadline:
                break
            if sent % 40 == 39:
                sim.faults({"kind": "status", "status": 503, "times": 3})  # outlasts the 2 retries
            with contextlib.suppress(openai.APIStatusError):  # the injected 503s; they are counted as errors
                client.chat.completions.create(model=model, extra_headers={"X-Session-Id": session}, **kwargs)
            sent += 1
            time.sleep(0.05)
            elapsed = min(int(seconds), int(seconds - (deadline - time.monotonic())))
            if elapsed > bar.n:
                bar.update(elapsed - bar.n)
    return sent


def _summary(prom: PromHandle, seconds: float) -> dict[str, float]:
    rng = f"{int(seconds) + 5}s"
    overhead = f"sum by (le) (increase(ventana_gateway_overhead_ms_bucket[{rng}]))"
    q = {
        "requests": f"sum(increase(ventana_requests_total[{rng}]))",
        "p50_overhead_ms": f"histogram_quantile(0.5, {overhead})",
        "p95_overhead_ms": f"histogram_quantile(0.95, {overhead})",
        "cache_hit_actual": "sum(ventana_cached_tokens_total) / sum(ventana_prompt_tokens_total{stage='assembled'})",
        "cache_hit_predicted": "sum(ventana_predicted_cached_tokens_total)"
        " / sum(ventana_prompt_tokens_total{stage='assembled'})",
    }
    return {k: prom.scalar(v) for k, v in q.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "grafana" / "previews")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ventana-previews-") as tmp_name:
        tmp = Path(tmp_name)
        with (
            run_simulator(tmp, record=False, latency_ms=20) as sim,
            run_gateway(tmp, {"models": sim_models(sim.base_url)}) as gw,
            run_prometheus(tmp, gw.url.removeprefix("http://")) as prom,
        ):
            prom.wait_for('count(up{job="ventana"} == 1)', 1)
            time.sleep(2)
            started = time.time()
            sent = _drive(gw.base_url, sim, args.seconds)
            time.sleep(3)  # the last scrapes
            minutes = (time.time() - started + 10) / 60
            print(json.dumps({"requests_sent": sent, **_summary(prom, args.seconds)}, indent=2))
            for path in preview(prom.url, minutes=minutes, out=args.out, rate_interval="15s"):
                print(path)


if __name__ == "__main__":
    main()
