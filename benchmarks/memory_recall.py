"""Benchmark episodic recall: are the answers to BFCL memory questions in what the provider received?

    python -m benchmarks.memory_recall            # 5 conversations, 155 questions, recall off and on
    python -m benchmarks.memory_recall --quick    # 2 conversations, 10 questions each

Each conversation of ``shared/data/bfcl_memory.jsonl`` is replayed through a real gateway
process (real HTTP, the official openai SDK) to the provider simulator, one user message a
turn, the client keeping a fixed short reply as the assistant turn. The model's window is
set per conversation to a quarter of the conversation's tokens, so compaction (extractive
summaries) must replace most of the history. Then every question of the conversation is
asked at the end of the full history, in the same session, and the simulator's record
says what the provider received: an answer counts as present when one of its accepted
strings appears (case-insensitive) in the received messages other than the question itself.
The stricter "evidence" column asks whether the dataset's evidence sentence itself (the
longest stretch of ``evidence_excerpt``, whitespace-normalised) was received; 137 of the
155 excerpts occur verbatim in the conversations (the rest are paraphrased).
Recall off (``memory.enabled: false``) and on (``memory.enabled: true``, long-term facts
off so only episodic recall is measured) run on separate gateway processes.

A third gateway measures long-term memory alone (recall off, facts on): each conversation
is replayed in one session under its own caller key, then every question is asked alone
as the first message of a new session of that caller; only the ``<memory>`` block the
rules built can carry the answer there.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import orjson
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.compaction import _memory_data
from gateway.tokens import counter_for
from tests.procs import SimHandle, run_gateway, run_simulator

COUNTER = counter_for("o200k_base")
REPLY = "Noted."
WINDOW_SHARE = 4  # window = conversation tokens / WINDOW_SHARE
MIN_WINDOW = 800
COMPACTION = {"summary_max_tokens": 200, "summarizer_input_tokens": 4000, "keep_recent_turns": 2, "prepare_at": 0.55}
MEMORY_ON = {
    "enabled": True,
    "long_term": False,
    "recall_budget_tokens": 600,
    "max_passages": 3,
    "passage_tokens": 200,
    "min_score": 0.2,
}


@dataclass
class Outcome:
    present: int = 0
    evidence: int = 0  # the evidence sentence itself, not only the answer string, was received
    answerable: int = 0
    asked: int = 0
    recalled: list[int] = field(default_factory=list)  # passages placed per question
    prompt_tokens: list[int] = field(default_factory=list)
    compacted: bool = False


def _window(case: dict[str, Any]) -> int:
    return max(MIN_WINDOW, COUNTER.messages(case["messages"]) // WINDOW_SHARE)


def _models(cases: list[dict[str, Any]], base_url: str) -> list[dict[str, Any]]:
    return [
        {
            "name": _model_name(c),
            "litellm_model": "openai/gpt-4o-mini",
            "api_base": base_url,
            "context_window": _window(c),
        }
        for c in cases
    ]


def _model_name(case: dict[str, Any]) -> str:
    return "mem-" + case["id"].rsplit("/", 1)[-1]


def _text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages).lower()


def _found(answers: list[str], text: str) -> bool:
    return any(a.lower() in text for a in answers)


def _evidence(excerpt: str) -> str:
    """The longest stretch of the dataset's evidence excerpt, whitespace-normalised (the stricter check)."""
    pieces = [p.strip(" \"'“”") for p in excerpt.replace("…", "...").split("...")]
    return " ".join(max(pieces, key=len).lower().split())


def replay(client: openai.OpenAI, sim: SimHandle, case: dict[str, Any], session: str, questions: int | None) -> Outcome:
    """Replay one conversation turn by turn, then ask each question at its end."""
    out, history = Outcome(), []
    model, headers = _model_name(case), {"x-session-id": session}
    full = _text(case["messages"])
    for message in tqdm(case["messages"], desc=f"{session} turns", leave=False):
        history.append(message)
        client.chat.completions.create(model=model, messages=history, extra_headers=headers)
        history.append({"role": "assistant", "content": REPLY})
    for q in tqdm(case["questions"][:questions], desc=f"{session} questions", leave=False):
        sim.reset()
        question = {"role": "user", "content": q["question"]}
        got = client.chat.completions.create(model=model, messages=[*history, question], extra_headers=headers)
        received = sim.received()[-1]["messages"]
        seen = [m for m in received if m.get("content") != q["question"]]
        out.asked += 1
        out.answerable += _found(q["answers"], full)
        out.present += _found(q["answers"], full) and _found(q["answers"], _text(seen))
        evidence = _evidence(q.get("evidence_excerpt") or "")
        out.evidence += bool(evidence) and evidence in " ".join(_text(seen).split())
        out.recalled.append(sum(str(m.get("content") or "").count("<passage ") for m in received))
        out.prompt_tokens.append(got.usage.prompt_tokens if got.usage else 0)
        out.compacted = out.compacted or any(str(m.get("content") or "").startswith("<summary") for m in received)
    return out


def next_session(client: openai.OpenAI, sim: SimHandle, case: dict[str, Any], questions: int | None) -> Outcome:
    """Long-term memory: replay the conversation in one session, then ask each question alone in a new one."""
    out, history, name = Outcome(), [], case["id"].rsplit("/", 1)[-1]
    full = _text(case["messages"])
    for message in tqdm(case["messages"], desc=f"long-term {name} turns", leave=False):
        history.append(message)
        client.chat.completions.create(model="mem-wide", messages=history, extra_headers={"x-session-id": f"lt-{name}"})
        history.append({"role": "assistant", "content": REPLY})
    for i, q in enumerate(case["questions"][:questions]):
        sim.reset()
        question = {"role": "user", "content": q["question"]}
        headers = {"x-session-id": f"lt-{name}-q{i}"}
        client.chat.completions.create(model="mem-wide", messages=[question], extra_headers=headers)
        seen = [m for m in sim.received()[-1]["messages"] if m.get("content") != q["question"]]
        # only the fact lines count: the block's own markup (facts="1") must not match an answer "1"
        facts = [line for m in seen for line in str(m.get("content") or "").splitlines() if line.startswith("- ")]
        out.asked += 1
        out.answerable += _found(q["answers"], full)
        out.present += _found(q["answers"], full) and _found(q["answers"], "\n".join(facts).lower())
        out.recalled.append(len(facts))
    return out


def long_term(tmp: Path, cases: list[dict[str, Any]], questions: int | None) -> list[str]:
    rows = [
        "| conversation | facts placed in the new session | answer present in the new session |",
        "| --- | --- | --- |",
    ]
    (tmp / "sim-lt").mkdir(parents=True, exist_ok=True)
    with run_simulator(tmp / "sim-lt") as sim:
        model = {"name": "mem-wide", "litellm_model": "openai/gpt-4o-mini", "api_base": sim.base_url}
        memory = {"enabled": True, "recall": False, "long_term": True, "profile_budget_tokens": 600}
        config = {"models": [{**model, "context_window": 128000}], "policy": {"memory": memory}}
        (tmp / "gw-lt").mkdir(parents=True, exist_ok=True)
        with run_gateway(tmp / "gw-lt", config) as gw:
            for case in tqdm(cases, desc="long-term"):
                key = "sk-" + case["id"].rsplit("/", 1)[-1]  # one caller (owner) per conversation
                client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=120)
                got = next_session(client, sim, case, questions)
                rows.append(f"| {case['id']} | {max(got.recalled, default=0)} | {got.present}/{got.answerable} |")
    return rows


def run(tmp: Path, cases: list[dict[str, Any]], questions: int | None) -> dict[str, dict[str, Outcome]]:
    results: dict[str, dict[str, Outcome]] = {}
    (tmp / "sim").mkdir(parents=True, exist_ok=True)
    with run_simulator(tmp / "sim") as sim:
        for mode, memory in (("off", {"enabled": False}), ("on", MEMORY_ON)):
            config = {"models": _models(cases, sim.base_url), "policy": {"compaction": COMPACTION, "memory": memory}}
            gw_dir = tmp / f"gw-{mode}"
            gw_dir.mkdir(parents=True, exist_ok=True)
            with run_gateway(gw_dir, config) as gw:
                client = openai.OpenAI(base_url=gw.base_url, api_key="sk-bench", max_retries=0, timeout=120)
                for case in tqdm(cases, desc=f"recall {mode}"):
                    session = f"{mode}-{case['id'].rsplit('/', 1)[-1]}"
                    results.setdefault(case["id"], {})[mode] = replay(client, sim, case, session, questions)
    return results


def table(cases: list[dict[str, Any]], results: dict[str, dict[str, Outcome]]) -> list[str]:
    rows = [
        "| conversation | history tokens | window | questions | answer in history | compacted | "
        "present, recall off | present, recall on | evidence off / on | passages recalled (median) | "
        "prompt tokens off / on (median) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    tot = {"asked": 0, "answerable": 0, "off": 0, "on": 0, "ev_off": 0, "ev_on": 0}
    for case in cases:
        off, on = results[case["id"]]["off"], results[case["id"]]["on"]
        tot["asked"] += off.asked
        tot["answerable"] += off.answerable
        tot["off"] += off.present
        tot["on"] += on.present
        tot["ev_off"] += off.evidence
        tot["ev_on"] += on.evidence
        rows.append(
            f"| {case['id']} | {COUNTER.messages(case['messages'])} | {_window(case)} | {off.asked} | "
            f"{off.answerable} | {'yes' if off.compacted else 'no'} | {off.present}/{off.answerable} | "
            f"{on.present}/{on.answerable} | {off.evidence} / {on.evidence} | {statistics.median(on.recalled):.0f} | "
            f"{statistics.median(off.prompt_tokens):.0f} / {statistics.median(on.prompt_tokens):.0f} |"
        )
    a = tot["answerable"] or 1
    rows.append(
        f"| **all** | | | {tot['asked']} | {tot['answerable']} | | **{tot['off']}/{a} ({tot['off'] / a:.0%})** | "
        f"**{tot['on']}/{a} ({tot['on'] / a:.0%})** | {tot['ev_off']} / {tot['ev_on']} of {tot['asked']} | | |"
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 conversations, 10 questions each")
    args = parser.parse_args()
    cases = [orjson.loads(line) for line in _memory_data().read_text().splitlines() if line.strip()]
    if args.quick:
        cases = [c for c in cases if c["id"].endswith(("notetaker", "healthcare"))]
    with tempfile.TemporaryDirectory(prefix="ventana-memory-bench-") as tmp:
        results = run(Path(tmp), cases, 10 if args.quick else None)
        facts = long_term(Path(tmp), cases, 10 if args.quick else None)
    print("\n".join(table(cases, results)))
    print("\nLong-term facts (rules), each question asked alone in a new session of the same caller:\n")
    print("\n".join(facts))


if __name__ == "__main__":
    main()
