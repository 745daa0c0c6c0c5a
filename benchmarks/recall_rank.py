"""How well recall ranks, without a gateway: archive the older part of a conversation, ask its questions.

    python -m benchmarks.recall_rank --half tune --count 8        # the chats the constants were chosen on
    python -m benchmarks.recall_rank --half held-out --count 8    # chats only measured on

For each ``long_conversations/rhelm.jsonl`` conversation of the half (``benchmarks/rhelm_split.py``),
the smallest ``--count`` over ``--keep`` tokens: everything before the newest ``--keep`` tokens is
archived as compaction would archive it (``memory/archive.passages_of``, vectors included), the
rest is what the model still sees. Each short-answer question whose answer occurs literally in
the archived part and not in the kept part is ranked (``memory/archive.search`` with the kept
turns as the tail) and chosen from (``select_passages``, default policy). A hit: the answer is in
the chosen passages. Rows: BM25 alone, and BM25 fused with MiniLM (the default), per question type.
This is the fast loop used to choose the constants; ``benchmarks.summaries`` measures the gateway.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.rhelm_split import Half, in_half
from gateway.assembly.recall_memory import MemoryPolicy
from gateway.assembly.select_passages import select_passages
from gateway.edges.memory import tail_turns
from gateway.memory import archive as archive_mod
from gateway.memory import vectors
from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.tokens import counter_for
from tests.shared_data import shared_path

COUNTER = counter_for("o200k_base")
SKIPPED = ("hallucination", "misleading")


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("’", "'").split())


def _has(answer: str, text: str) -> bool:
    needle = _norm(answer).strip(" .\"'")
    return bool(needle) and re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", _norm(text)) is not None


def _cut(messages: list[dict[str, Any]], keep: int) -> int:
    """The first message of the newest ``keep`` tokens, moved back to a user turn's start."""
    spent, i = 0, len(messages)
    while i > 0 and spent + COUNTER.message(messages[i - 1]) <= keep:
        i -= 1
        spent += COUNTER.message(messages[i])
    while i < len(messages) and messages[i]["role"] != "user":
        i += 1
    return i


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", default="tune", choices=["tune", "held-out", "all"])
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--keep", type=int, default=8000, help="tokens the model still sees verbatim")
    args = parser.parse_args()
    half: Half = args.half
    path = shared_path("data", "long_conversations", "rhelm.jsonl")
    cases = [orjson.loads(line) for line in path.read_bytes().splitlines() if line]
    cases = sorted(in_half(cases, half), key=lambda c: c["meta"]["tokens_o200k"])
    cases = [c for c in cases if c["meta"]["tokens_o200k"] > 2 * args.keep][: args.count]
    policy = MemoryPolicy()
    hits: dict[str, dict[str, list[int]]] = {"bm25": defaultdict(lambda: [0, 0]), "fused": defaultdict(lambda: [0, 0])}
    recalled_tokens: dict[str, int] = {"bm25": 0, "fused": 0}
    with tempfile.TemporaryDirectory(prefix="ventana-recall-rank-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'rank.db'}"
        upgrade(url)
        engine = make_engine(url)
        for n, case in enumerate(cases):
            messages = case["messages"]
            cut = _cut(messages, args.keep)
            rows = archive_mod.passages_of(messages, 0, cut, policy.passage_tokens, COUNTER.text)
            archive_mod.archive(engine, f"s{n}", "caller:bench", archive_mod.embed(rows))
            archive_mod.archive(engine, f"b{n}", "caller:bench", rows)  # the same rows without vectors
            kept = messages[cut:]
            archived_text = "\n".join(r["text"] for r in rows)
            kept_text = "\n".join(str(m["content"]) for m in kept)
            for q in case["questions"]:
                if q["type"] in SKIPPED or not _has(q["answer"], archived_text) or _has(q["answer"], kept_text):
                    continue
                visible = [*kept, {"role": "user", "content": q["question"]}]
                tail = tail_turns(visible, 0)
                for label, session in (("fused", f"s{n}"), ("bm25", f"b{n}")):
                    found = archive_mod.search(engine, q["question"], session_id=session, tail=tail)
                    top = found[: policy.max_passages * 4]
                    chosen = select_passages(top, visible, policy, COUNTER)
                    text = "\n".join(c.passage.text for c in chosen)
                    row = hits[label][q["type"]]
                    row[0] += 1
                    row[1] += _has(q["answer"], text)
                    recalled_tokens[label] += sum(c.tokens for c in chosen)
        engine.dispose()
    kept = f"newest {args.keep} tokens kept, embeddings: {vectors.available()}"
    print(f"\n{half} half, {len(cases)} conversations, {kept}\n")
    print("| ranking | " + " | ".join(sorted(hits["fused"])) + " | all | recalled tokens per question |")
    print("| --- " * (len(hits["fused"]) + 3) + "|")
    for label in ("bm25", "fused"):
        cells = [f"{h}/{n} ({h / n:.2f})" for n, h in (hits[label][k] for k in sorted(hits["fused"]))]
        n_all = sum(v[0] for v in hits[label].values())
        h_all = sum(v[1] for v in hits[label].values())
        per = recalled_tokens[label] / max(1, n_all)
        print(f"| {label} | " + " | ".join(cells) + f" | {h_all}/{n_all} ({h_all / max(1, n_all):.2f}) | {per:.0f} |")


if __name__ == "__main__":
    main()
