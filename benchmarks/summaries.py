"""Benchmark summaries and recall with the default policy: is what people said still there, or given back?

    python -m benchmarks.summaries                      # all three data sets
    python -m benchmarks.summaries --only locker        # the noisy 200-turn session only
    python -m benchmarks.summaries --rhelm 3 --bfcl-questions 10   # smaller
    python -m benchmarks.summaries --only bfcl,rhelm --memory-mode tool   # recall as a tool the model calls

Every conversation is replayed through a real gateway process (the official openai SDK,
real HTTP) to the provider simulator, which records what it received. The gateway runs
the default policy (compaction at 55 % of the window, episodic recall on) unless a row
says otherwise. "Naive truncation" keeps the newest messages that fit in the same number
of tokens the gateway sent for that request (the question excluded), so both sides spend
the same budget.

1. **locker**: ``benchmarks.locker_session``, 200 turns in which the user states 40
   locker codes in prose; the client keeps the simulator's replies ("Simulated answer
   <hex> to: ..."), one incidental id per turn; 16K window. Codes in the final request
   (the question "give me every code"), and inside its summary. Extractive (no provider
   key) and the LLM path (``summarizer_model`` naming the simulator's model) side by side.
2. **bfcl_memory**: ``shared/data/bfcl_memory.jsonl``, one user message a turn (the client
   keeps "Noted."), window a quarter of each conversation's tokens (as
   ``benchmarks.memory_recall``, with its compaction sizes), then every question asked at
   the end in the same session: is an accepted answer in what the provider received?
3. **rhelm**: ``shared/data/long_conversations/rhelm.jsonl``, the smallest conversations
   longer than the window (16K), the dataset's own assistant replies kept, every 8th
   turn sent (``--stride``; each request carries the whole history so far). For the
   short-answer questions (not ``hallucination``/``misleading``) whose answer occurs
   literally in the conversation: is it in the final request before the question
   ("kept", what compaction kept), and in the request that asks it ("asked", with recall)?
"""

from __future__ import annotations

import argparse
import re
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import orjson
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.locker_session import FINAL_QUESTION, SYSTEM, codes_present, locker_session
from benchmarks.memory_recall import COMPACTION as BFCL_COMPACTION
from benchmarks.memory_recall import REPLY, _window
from benchmarks.rhelm_split import Half, in_half
from gateway import local_model
from gateway.providersim.completion import is_summary_request
from gateway.tokens import counter_for
from tests.procs import SimHandle, free_port, run_gateway, run_simulator
from tests.shared_data import data_path, need

COUNTER = counter_for("o200k_base")
WINDOW = 16_000
#: ``--summarizer local``: the real model's window (a 4,000-token span, the prompt, the previous summary
#: and 200 tokens out fit) and how long a summary may take on two CPU cores before the extractive one stands in.
LOCAL_CTX = 8_192
LOCAL_TIMEOUT_S = 240.0
SKIPPED_TYPES = ("hallucination", "misleading")  # long answers that correct a premise: no literal check


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _model(name: str, base_url: str, window: int) -> dict[str, Any]:
    return {"name": name, "litellm_model": "openai/gpt-4o-mini", "api_base": base_url, "context_window": window}


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("’", "'").split())


def _contains(answer: str, text: str) -> bool:
    """The answer at word boundaries in normalised text (a bare "3" must not match "13")."""
    needle = _norm(answer).strip(" .\"'")
    return bool(needle) and re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", text) is not None


def _content(messages: Sequence[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def truncate(history: Sequence[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The newest messages that fit in ``budget`` tokens (naive truncation)."""
    kept: list[dict[str, Any]] = []
    spent = 0
    for message in reversed(history):
        spent += COUNTER.message(message)
        if spent > budget:
            break
        kept.append(message)
    return kept[::-1]


def _is_gateway_block(message: dict[str, Any]) -> bool:
    return str(message.get("content") or "").startswith(("<recalled", "<reminder"))


# -- 1. the noisy locker session ------------------------------------------------------------------


@dataclass
class LockerRun:
    final: int = 0
    in_summary: int = 0
    truncated: int = 0
    compactions: int = 0
    prompt: int = 0
    cached: int = 0
    final_tokens: int = 0
    by: str = "-"  # who wrote the final summary (its by= attribute)


def locker_run(client: openai.OpenAI, sim: SimHandle, session: str, turns: int, codes: int) -> LockerRun:
    users, planted = locker_session(turns=turns, codes=codes)
    out = LockerRun()
    sim.reset()
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    heads: set[str] = set()
    for text in tqdm([*users, FINAL_QUESTION], desc=session, leave=False):
        history.append({"role": "user", "content": text})
        got = client.chat.completions.create(
            model="locker", messages=history, extra_headers={"x-session-id": session}, max_tokens=200
        )
        history.append({"role": "assistant", "content": got.choices[0].message.content})
        if got.usage is not None:
            out.prompt += got.usage.prompt_tokens
            details = got.usage.prompt_tokens_details
            out.cached += (details.cached_tokens or 0) if details else 0
    chats = [b for b in sim.received() if not is_summary_request(b["messages"])]
    for body in chats:
        for m in body["messages"]:
            if str(m.get("content") or "").startswith("<summary"):
                heads.add(str(m["content"]).split("\n", 1)[0])
    final = chats[-1]["messages"]
    out.compactions = len(heads)
    found = re.findall(r'<summary of="[^"]*" by="([^"]*)"', _content(final))
    out.by = found[0] if found else "-"
    out.final = codes_present(planted, _content(final))
    out.in_summary = codes_present(
        planted, _content([m for m in final if str(m.get("content")).startswith("<summary")])
    )
    out.final_tokens = COUNTER.messages(final[:-1])
    out.truncated = codes_present(planted, _content(truncate(history[:-2], out.final_tokens)))
    return out


def locker(tmp: Path, turns: int, codes: int, window: int = WINDOW) -> list[str]:
    rows = [
        "| summariser | final summary by | compactions | codes in final request | codes inside the summary | "
        "naive truncation, same budget | final request tokens | cached share of prompt tokens |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    with run_simulator(_dir(tmp / "sim-locker")) as sim:
        for label, compaction in (
            ("extractive (default, no key)", {}),
            ("llm via simulator", {"summarizer_model": "locker"}),
        ):
            config = {"models": [_model("locker", sim.base_url, window)], "policy": {"compaction": compaction}}
            with run_gateway(_dir(tmp / f"gw-locker-{len(rows)}"), config) as gw:
                client = openai.OpenAI(base_url=gw.base_url, api_key="sk-bench", max_retries=0, timeout=120)
                run = locker_run(client, sim, f"locker-{len(rows)}", turns, codes)
            rows.append(
                f"| {label} | {run.by} | {run.compactions} | {run.final}/{codes} ({run.final / codes:.2f}) | "
                f"{run.in_summary}/{codes} | {run.truncated}/{codes} ({run.truncated / codes:.2f}) | "
                f"{run.final_tokens} | {run.cached / max(1, run.prompt):.3f} |"
            )
    return rows


# -- 2 and 3. questions asked at the end of a replayed conversation -------------------------------


@dataclass
class Tally:
    questions: int = 0
    kept: int = 0  # answer in the final request before the question (what compaction kept)
    asked: int = 0  # answer in the request that asks the question (recall included)
    truncated: int = 0  # answer in naive truncation to the asked request's budget
    recalled: int = 0  # questions that got a <recalled> block
    final_cut: int = 0  # answer in naive truncation to the final request's budget (what "kept" spent)
    by_type: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0, 0, 0]))

    def add(self, kind: str, kept: bool, asked: bool, truncated: bool, recalled: bool, final_cut: bool) -> None:
        self.questions += 1
        self.kept += kept
        self.asked += asked
        self.truncated += truncated
        self.recalled += recalled
        self.final_cut += final_cut
        row = self.by_type[kind]
        for i, hit in enumerate((True, kept, asked, truncated, final_cut)):
            row[i] += hit


def replay(
    client: openai.OpenAI,
    sim: SimHandle,
    model: str,
    session: str,
    messages: Sequence[dict[str, Any]],
    reply: str | None,
    stride: int = 1,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Send the conversation turn by turn; return the client's history and the last request received.

    With ``reply`` every user message is a turn answered by ``reply``; without, the
    conversation's own assistant messages are kept and a request ends before each one.
    With ``stride`` > 1 only every ``stride``-th such request is sent (and the last), as a
    client resuming a conversation would: compaction then summarises longer spans at once."""
    headers = {"x-session-id": session}
    history: list[dict[str, Any]] = []
    turns = 0
    for i, message in enumerate(tqdm(messages, desc=session, leave=False)):
        history.append(message)
        following = messages[i + 1] if i + 1 < len(messages) else None
        if message["role"] != "user" or (reply is None and following is not None and following["role"] == "user"):
            continue  # a request ends at the user message an answer follows (a session marker does not)
        turns += 1
        last = all(m["role"] != "user" for m in messages[i + 1 :])
        if turns % stride and not last:
            if reply is not None:
                history.append({"role": "assistant", "content": reply})
            continue
        sim.reset()  # keep only the latest body: each is the whole conversation so far
        client.chat.completions.create(model=model, messages=history, extra_headers=headers, max_tokens=50)
        if reply is not None:
            history.append({"role": "assistant", "content": reply})
    return history, sim.received()[-1]["messages"]


def ask(
    client: openai.OpenAI,
    sim: SimHandle,
    model: str,
    session: str,
    history: list[dict[str, Any]],
    question: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Ask one question after ``history``; return what was received (question excluded) and the truncation."""
    sim.reset()
    messages = [*history, {"role": "user", "content": question}]
    client.chat.completions.create(model=model, messages=messages, extra_headers={"x-session-id": session})
    received = [m for m in sim.received()[-1]["messages"] if m.get("content") != question]
    return received, truncate(history, COUNTER.messages(received))


def _score(
    tally: Tally,
    kind: str,
    answers: Sequence[str],
    final: str,
    received: list[dict[str, Any]],
    cut: list[dict[str, Any]],
    final_cut: str,
) -> None:
    seen, truncated = _norm(_content(received)), _norm(_content(cut))
    tally.add(
        kind,
        any(_contains(a, final) for a in answers),
        any(_contains(a, seen) for a in answers),
        any(_contains(a, truncated) for a in answers),
        any(_is_gateway_block(m) and str(m.get("content")).startswith("<recalled") for m in received),
        any(_contains(a, final_cut) for a in answers),
    )


def final_kept(history: Sequence[dict[str, Any]], last: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """What the final replayed request carried without asking (its recalled and reminder blocks left
    out), and naive truncation of the same conversation to the same number of tokens; both normalised."""
    body = [m for m in last if not _is_gateway_block(m)]
    users = [i for i, m in enumerate(history) if m.get("role") == "user"]
    covered = history[: users[-1] + 1] if users else history
    return _norm(_content(body)), _norm(_content(truncate(covered, COUNTER.messages(body))))


def bfcl(
    tmp: Path,
    questions: int | None,
    memory_mode: str = "inline",
    summarizer: str = "extractive",
    only: Sequence[str] = (),
    misses: bool = False,
) -> Tally:
    """``summarizer``: ``extractive`` (no key); ``llm``: the simulator's model summarises (it answers
    a ``<transcript>`` request by keeping the clauses with facts; it does not read the prompt's rules);
    ``local``: a real model reads the prompt and writes the summary (Qwen2.5-Coder-0.5B on llama.cpp,
    ``gateway/local_model.py``; a call it does not answer in time falls back to the extractive summary,
    and the final request's ``by=`` says which wrote each)."""
    cases = [orjson.loads(line) for line in need(data_path("bfcl_memory.jsonl")).read_text().splitlines() if line]
    cases = [c for c in cases if not only or c["id"].rsplit("/", 1)[-1] in only]
    tally = Tally()
    with ExitStack() as stack:
        sim = stack.enter_context(run_simulator(_dir(tmp / f"sim-bfcl-{summarizer}")))
        models = [_model("mem-" + c["id"].rsplit("/", 1)[-1], sim.base_url, _window(c)) for c in cases]
        compaction: dict[str, Any] = dict(BFCL_COMPACTION)
        if summarizer == "llm":
            models.append(_model("summariser", sim.base_url, 128_000))
            compaction["summarizer_model"] = "summariser"
        elif summarizer == "local":
            server = local_model.start_server(local_model.fetch_model(), port=free_port(), n_ctx=LOCAL_CTX)
            stack.callback(server.stop)
            local = {"litellm_model": "openai/qwen2.5-coder-0.5b-instruct", "engine": "llama.cpp"}
            models.append({**_model("summariser", server.base_url, LOCAL_CTX), **local})
            compaction |= {"summarizer_model": "summariser", "summarizer_timeout_s": LOCAL_TIMEOUT_S}
        config = {"models": models, "policy": {"compaction": compaction, "memory": {"mode": memory_mode}}}
        with run_gateway(_dir(tmp / f"gw-bfcl-{summarizer}"), config) as gw:
            wait = LOCAL_TIMEOUT_S * 4 if summarizer == "local" else 120
            client = openai.OpenAI(base_url=gw.base_url, api_key="sk-bench", max_retries=0, timeout=wait)
            for case in tqdm(cases, desc="bfcl_memory"):
                name = case["id"].rsplit("/", 1)[-1]
                history, last = replay(client, sim, "mem-" + name, f"bfcl-{name}", case["messages"], REPLY)
                full = _norm(_content(case["messages"]))
                final, final_cut = final_kept(history, last)
                if summarizer != "extractive":  # a model's call that failed or timed out left the extractive one
                    authors = re.findall(r'<summary of="[^"]*" by="([^"]+)"', _content(last))
                    print(f"{name}: the final request's summary written by {authors or 'none'}", flush=True)
                for q in case["questions"][:questions]:
                    if not any(_contains(a, full) for a in q["answers"]):
                        continue
                    received, cut = ask(client, sim, "mem-" + name, f"bfcl-{name}", history, q["question"])
                    _score(tally, name, q["answers"], final, received, cut, final_cut)
                    if misses and not any(_contains(a, _norm(_content(received))) for a in q["answers"]):
                        about = {"type": name, "question": q["question"], "answer": q["answers"][0]}
                        print(explain_miss(tmp / f"gw-bfcl-{summarizer}", about, received, history), flush=True)
    return tally


def _rhelm_cases(count: int, half: Half = "all", window: int = WINDOW) -> list[dict[str, Any]]:
    path = need(data_path("long_conversations", "rhelm.jsonl"))
    cases = in_half([orjson.loads(line) for line in path.read_bytes().splitlines() if line], half)
    longer = sorted((c for c in cases if c["meta"]["tokens_o200k"] > window), key=lambda c: c["meta"]["tokens_o200k"])
    return longer[:count]


def explain_miss(
    gateway_dir: Path, q: dict[str, Any], received: Sequence[dict[str, Any]], history: Sequence[dict[str, Any]]
) -> str:
    """Why an answer was not present when asked: where it sits in the conversation, in the archive,
    and how the archive ranks it against the question (the tail the gateway also weighs is left out)."""
    from gateway.memory.archive import search
    from gateway.store.engine import make_engine

    answer = q["answer"]
    turns = [i for i, m in enumerate(history) if _contains(answer, _norm(str(m.get("content") or "")))]
    engine = make_engine(f"sqlite:///{gateway_dir / 'ventana.db'}")
    found = search(engine, q["question"])
    sessions = {p.session_id for p in found if _contains(answer, _norm(p.text))}
    ranked = [p for p in found if p.session_id in sessions]
    hits = [(i, p) for i, p in enumerate(ranked) if _contains(answer, _norm(p.text))]
    block = next((str(m["content"]) for m in received if str(m.get("content") or "").startswith("<recalled")), "")
    recalled = re.findall(r'<passage turns="([^"]*)" messages="[^"]*"(?: said="[^"]*")? score="([^"]*)"', block)
    engine.dispose()
    lines = [
        f"MISS [{q['type']}] {q['question']!r} -> {answer!r}",
        f"  answer in history messages {turns[:6]}; archived in {len(hits)} passage(s) of {len(ranked)}",
        *(f"  rank {i} score {p.score:.2f} turns {p.turns}: {p.text[:160]!r}" for i, p in hits[:3]),
        f"  top: {[(p.turns, round(p.score, 2)) for p in ranked[:5]]}; recalled {recalled}",
    ]
    return "\n".join(lines)


def rhelm(
    tmp: Path,
    count: int,
    stride: int,
    memory_mode: str = "inline",
    half: Half = "all",
    window: int = WINDOW,
    misses: bool = False,
) -> tuple[Tally, list[dict[str, Any]]]:
    cases = _rhelm_cases(count, half, window)
    tally = Tally()
    with run_simulator(_dir(tmp / f"sim-rhelm-{half}-{window}")) as sim:
        config = {"models": [_model("rhelm", sim.base_url, window)], "policy": {"memory": {"mode": memory_mode}}}
        with run_gateway(_dir(tmp / f"gw-rhelm-{half}-{window}"), config) as gw:
            client = openai.OpenAI(base_url=gw.base_url, api_key="sk-bench", max_retries=0, timeout=300)
            for k, case in enumerate(tqdm(cases, desc="rhelm")):
                history, last = replay(client, sim, "rhelm", f"rhelm-{k}", case["messages"], None, stride)
                full = _norm(_content(case["messages"]))
                final, final_cut = final_kept(history, last)
                for q in case["questions"]:
                    if q["type"] in SKIPPED_TYPES or not _contains(q["answer"], full):
                        continue
                    received, cut = ask(client, sim, "rhelm", f"rhelm-{k}", history, q["question"])
                    _score(tally, q["type"], [q["answer"]], final, received, cut, final_cut)
                    if misses and not _contains(q["answer"], _norm(_content(received))):
                        print(explain_miss(tmp / f"gw-rhelm-{half}-{window}", q, received, history), flush=True)
    return tally, cases


def _share(hit: int, of: int) -> str:
    return f"{hit}/{of} ({hit / of:.2f})" if of else "0/0"


def tally_rows(label: str, tally: Tally) -> list[str]:
    rows = [
        f"| {label} | questions | present when asked (recall on) | naive truncation, asked budget | "
        "asked - truncation | in final request, not asked (kept) | naive truncation, final budget | "
        "kept - truncation |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind, (n, kept, asked, cut, final_cut) in sorted(tally.by_type.items()):
        rows.append(
            f"| {kind} | {n} | {_share(asked, n)} | {_share(cut, n)} | {(asked - cut) / n:+.2f} | "
            f"{_share(kept, n)} | {_share(final_cut, n)} | {(kept - final_cut) / n:+.2f} |"
        )
    n = tally.questions
    rows.append(
        f"| **all** | {n} | **{_share(tally.asked, n)}** | {_share(tally.truncated, n)} | "
        f"**{(tally.asked - tally.truncated) / max(1, n):+.2f}** | **{_share(tally.kept, n)}** | "
        f"{_share(tally.final_cut, n)} | **{(tally.kept - tally.final_cut) / max(1, n):+.2f}** |"
    )
    rows.append(f"\n{tally.recalled} of {n} questions got a `<recalled>` block.")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="locker,bfcl,rhelm", help="comma-separated parts: locker, bfcl, rhelm")
    parser.add_argument("--turns", type=int, default=200, help="turns of the locker session")
    parser.add_argument("--codes", type=int, default=40, help="codes planted in the locker session")
    parser.add_argument("--window", type=int, default=WINDOW, help="context window of the locker session")
    parser.add_argument("--bfcl-questions", type=int, default=None, help="questions per bfcl conversation (all)")
    parser.add_argument("--rhelm", type=int, default=30, help="rhelm conversations (the smallest over the window)")
    parser.add_argument(
        "--memory-mode",
        choices=["inline", "tool"],
        default="inline",
        help="bfcl, rhelm: policy.memory.mode (tool: the model asks the gateway's recall_archive tool)",
    )
    parser.add_argument("--stride", type=int, default=8, help="rhelm: send every n-th turn (and the last)")
    parser.add_argument(
        "--half",
        choices=["tune", "held-out", "all"],
        default="held-out",
        help="rhelm: the chats tuned on or the held-out ones (benchmarks/rhelm_split.py)",
    )
    parser.add_argument("--rhelm-windows", default=str(WINDOW), help="rhelm: comma-separated context windows")
    parser.add_argument(
        "--summarizer",
        choices=["extractive", "llm", "local"],
        default="extractive",
        help="bfcl: who writes the summaries (local: a real 0.5B model on llama.cpp)",
    )
    parser.add_argument("--bfcl-cases", default="", help="bfcl: comma-separated conversations (all)")
    parser.add_argument("--misses", action="store_true", help="bfcl, rhelm: say why each answer was missed")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="ventana-summaries-bench-") as name:
        tmp = Path(name)
        if "locker" in parts:
            print(f"\n### locker session ({args.turns} turns, {args.codes} codes, {args.window}-token window)\n")
            print("\n".join(locker(tmp, args.turns, args.codes, args.window)), flush=True)
        if "bfcl" in parts:
            print(f"\n### bfcl_memory.jsonl (window = conversation tokens / 4, {args.summarizer} summariser)\n")
            only = [c for c in args.bfcl_cases.split(",") if c]
            tally = bfcl(tmp, args.bfcl_questions, args.memory_mode, args.summarizer, only, args.misses)
            print("\n".join(tally_rows("conversation", tally)), flush=True)
        for window in [int(w) for w in args.rhelm_windows.split(",")] if "rhelm" in parts else []:
            tally, cases = rhelm(tmp, args.rhelm, args.stride, args.memory_mode, args.half, window, args.misses)
            tokens = sorted(c["meta"]["tokens_o200k"] for c in cases)
            sizes = f"{tokens[0]}-{tokens[-1]}" if tokens else "no"
            print(
                f"\n### long_conversations/rhelm.jsonl, {args.half} ({len(cases)} conversations of {sizes} tokens, "
                f"{window} window, stride {args.stride}: every {args.stride}. turn sent)\n"
            )
            print("\n".join(tally_rows("question type", tally)), flush=True)


if __name__ == "__main__":
    main()
