"""Cost and quality of attach_documents and shrink_oversize, measured in-process.

Speed is a ratio to a baseline measured in the same run: tokenizing every text of the
request once with the model's tokenizer (tiktoken, unmemoised), the least any gateway
that budgets by real token counts must spend on it. Medians over repeats; the passes'
token counts are memoised per text (as in the server), so repeats after the first are
the warm cost a retrying agent sees, and the cold first run is reported separately.

Quality for the oversize pass: clause recall. A 300K-token contract is asked about
``--questions`` different clauses; a question is answered "within the window" when the
clause's full text is in what the provider would receive and the prompt fits.

    python -m benchmarks.documents [--repeats 15] [--questions 30]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from rich.progress import track

from gateway.assembly.attach_documents import DocumentPolicy, attach_documents
from gateway.assembly.context import Context
from gateway.assembly.shrink_oversize import OversizePolicy, shrink_oversize
from tests.assembly.make_context import make_context
from tests.long_contract import long_contract
from tests.shared_data import need, shared_path

SEEDS = shared_path("seeds")
QUESTION = "¿Qué es la ingeniería de contexto y en qué se diferencia de la ingeniería de prompts?"


def _median_ms(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """(cold first run, median of the following runs), in milliseconds."""
    times = []
    for _ in range(repeats + 1):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return times[0], statistics.median(times[1:])


def _seed_paragraphs() -> list[str]:
    """Real prose: the paragraphs of the project's Spanish source articles."""
    paragraphs: list[str] = []
    for path in sorted(need(SEEDS).glob("*.txt")):
        paragraphs += [p.strip() for p in path.read_text(encoding="utf-8").splitlines() if len(p.strip()) > 80]
    return paragraphs


def _documents_request(n_docs: int, doc_tokens: int) -> Context:
    """``n_docs`` documents of about ``doc_tokens`` tokens cut from the seed articles, a few of them stale."""
    paragraphs = _seed_paragraphs()
    counter = make_context({"messages": []}).env.counter
    docs, current, size, i = [], [], 0, 0
    while len(docs) < n_docs:
        para = paragraphs[i % len(paragraphs)]
        current.append(para)
        size += counter.text(para)
        i += 1
        if size >= doc_tokens:
            day = 27 - len(docs) % 25
            docs.append(
                {"text": "\n\n".join(current), "source": f"seed#{len(docs)}", "fetched_at": f"2026-09-{day:02d}"}
            )
            current, size = [], 0
    body = {
        "messages": [{"role": "user", "content": QUESTION}],
        "documents": docs,
        "document_policy": {"max_age_days": 20, "budget_tokens": 8_000},
    }
    return make_context(body, now="2026-09-28T00:00:00Z")


def _tokenize_once(ctx: Context) -> int:
    """The baseline: encode every message text and every document text once, no memo."""
    texts = [str(m.get("content") or "") for m in ctx.messages]
    texts += [str(d["text"]) for d in ctx.extensions.get("documents", ())]
    return sum(len(ctx.env.counter.encode(t)) for t in texts)


def bench_documents(repeats: int) -> list[str]:
    rows = []
    for n_docs, doc_tokens in track([(5, 300), (20, 1_000), (50, 2_000)], description="attach_documents"):
        ctx = _documents_request(n_docs, doc_tokens)
        _, base = _median_ms(lambda c=ctx: _tokenize_once(c), repeats)
        cold, warm = _median_ms(lambda c=ctx: attach_documents(c, DocumentPolicy()), repeats)
        _, decisions = attach_documents(ctx, DocumentPolicy())
        kept = sum(d.action != "dropped" for d in decisions)
        rows.append(f"| {n_docs} x {doc_tokens} | {cold:.1f} | {warm:.1f} | {base:.1f} | {warm / base:.1f}x | {kept} |")
    return rows


def _clause_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("Clause ") and "reference" in line]


def bench_oversize(repeats: int, questions: int) -> tuple[list[str], str]:
    contract = long_contract(300_000)
    lines = _clause_lines(contract)
    rng = random.Random(5)
    sample = rng.sample(lines, questions)
    found = 0
    fit = 0
    timings: list[float] = []
    for line in track(sample, description="clause recall"):
        clause_id = line.split(":", 1)[0].removeprefix("Clause ")
        topic = line.split(":", 1)[1].split(";")[0].split(" ", 3)[-1]
        question = f"What does clause {clause_id} say about {topic}?"
        ctx = make_context({"messages": [{"role": "user", "content": f"{contract}\n\n{question}"}]})
        started = time.perf_counter()
        out, _ = shrink_oversize(ctx, OversizePolicy())
        timings.append((time.perf_counter() - started) * 1000)
        found += line in out.messages[-1]["content"]
        fit += out.prompt_tokens() <= 128_000
    ctx = make_context({"messages": [{"role": "user", "content": contract + "\n\nWhat does clause 14.3 set?"}]})
    _, base = _median_ms(lambda: _tokenize_once(ctx), repeats)
    rows = [
        f"| 300K-token contract, {questions} clause questions | {found}/{questions} | {fit}/{questions} "
        f"| {statistics.median(timings):.0f} | {base:.1f} | {statistics.median(timings) / base:.1f}x |"
    ]
    return rows, f"{ctx.prompt_tokens()} prompt tokens"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--questions", type=int, default=30)
    args = parser.parse_args()
    doc_rows = bench_documents(args.repeats)
    over_rows, size = bench_oversize(args.repeats, args.questions)
    print("\n| documents x tokens | cold ms | warm ms (median) | baseline: tokenize once ms | ratio | kept |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(doc_rows))
    print(f"\nshrink_oversize ({size})")
    print("| case | clause kept | prompt fits 128K | median ms | baseline: tokenize once ms | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(over_rows))


if __name__ == "__main__":
    main()
