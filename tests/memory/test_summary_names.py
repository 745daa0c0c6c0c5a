"""The extractive summary carries the names a later question asks back, more than truncation does.

Reads the bfcl_memory subset in tests/data: each conversation (the client answering "Noted.") is
summarised the way compaction summarises an aged range in ``benchmarks.memory_recall`` (200-token
summary, chunks of the summariser's input size), all but its last two turns, and the accepted
answers found in the summary are counted against naive truncation of the same span to the
summary's own tokens. Before the names line the summary carried 29 of 141 answers (truncation
8, +0.15); the goal of issue 40 is +0.2.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

from benchmarks.memory_recall import COMPACTION, REPLY, _window
from benchmarks.summaries import final_kept
from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.policy import Policy
from gateway.assembly.summarize_range import summarize_range
from gateway.summarize import extractive
from gateway.summarize.extractive import ALSO_MENTIONED, ExtractiveSummarizer
from gateway.tokens import counter_for
from tests.assembly.compaction_helpers import run_turns
from tests.shared_data import TEST_DATA

COUNTER = counter_for("o200k_base")


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("’", "'").split())


def _has(answer: str, text: str) -> bool:
    needle = _norm(answer).strip(" .\"'")
    return bool(needle) and re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", text) is not None


def _truncated(span: list[dict[str, Any]], budget: int) -> str:
    kept: list[str] = []
    spent = 0
    for m in reversed(span):
        spent += COUNTER.message(m)
        if spent > budget:
            break
        kept.append(str(m["content"]))
    return _norm("\n".join(kept))


def _summary_over_truncation() -> tuple[int, int, int]:
    """Answers in the summary, in truncation to its tokens, and questions, over the bfcl subset."""
    cases = [orjson.loads(x) for x in (TEST_DATA / "bfcl_memory.jsonl").read_bytes().splitlines() if x]
    policy = CompactionPolicy.model_validate(COMPACTION)
    questions = in_summary = in_truncation = 0
    for case in cases:
        span: list[dict[str, Any]] = []
        for m in case["messages"]:
            span += [m, {"role": "assistant", "content": "Noted."}]
        span = span[:-4]
        summary = summarize_range(span, 0, len(span), None, None, policy, COUNTER).checkpoint.summary
        assert COUNTER.text(summary) <= policy.summary_max_tokens
        full = _norm("\n".join(m["content"] for m in case["messages"]))
        said = [q["answers"] for q in case["questions"] if any(_has(a, full) for a in q["answers"])]
        cut = _truncated(span, COUNTER.text(summary))
        questions += len(said)
        in_summary += sum(any(_has(a, _norm(summary)) for a in answers) for answers in said)
        in_truncation += sum(any(_has(a, cut) for a in answers) for answers in said)
    return in_summary, in_truncation, questions


def test_summary_carries_answers_beyond_truncation_to_its_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """With half the budget reserved for the names line (off by default: it cost rhelm held-out answers)."""
    monkeypatch.setattr(extractive, "NAMES_SHARE", 0.5)
    in_summary, in_truncation, questions = _summary_over_truncation()
    assert (in_summary - in_truncation) / questions >= 0.2, (in_summary, in_truncation, questions)


def test_the_default_summary_in_clauses_carries_more_answers_than_whole_sentences() -> None:
    """Issue 40, session 37: whole sentences ranked by weight carried 27 answers (truncation 8, +0.13);
    the clauses that state them carry 34 (+0.18) in the same 200 tokens, without reserved names room."""
    in_summary, in_truncation, questions = _summary_over_truncation()
    assert (in_summary - in_truncation) / questions >= 0.17, (in_summary, in_truncation, questions)


def test_names_line_skips_words_written_lowercase_and_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extractive, "NAMES_SHARE", 0.5)
    chat = (
        {"role": "user", "content": "I manage money at Legend Investments, and our platform is called SOAR."},
        {"role": "user", "content": "Notes: Submit the form, then we submit again; order ORD-881 is late."},
        {"role": "user", "content": "My mentor at Goldman Sachs, and later at Morgan Stanley, was Dana Reyes."},
        {"role": "user", "content": "We moved to Lisbon, then to Porto."},
    )
    summary = ExtractiveSummarizer(COUNTER)(chat, None, 60)
    names = next(line for line in summary.splitlines() if line.startswith("- also mentioned: "))
    for name in ("Legend Investments", "Goldman Sachs", "Morgan Stanley", "Dana Reyes", "Lisbon", "Porto"):
        assert name in summary
    assert "Submit" not in names and "ORD-881" not in names


def _replayed_over_truncation() -> tuple[int, int, int]:
    """The gateway's own measure (``benchmarks.summaries --only bfcl``, "kept" against "truncation, final
    budget") replayed in process: every user turn assembled with the session carried over and each
    planned summary prepared at once, as the API does in the background; recall is not part of it."""
    cases = [orjson.loads(x) for x in (TEST_DATA / "bfcl_memory.jsonl").read_bytes().splitlines() if x]
    kept = cut = questions = 0
    for case in cases:
        history: list[dict[str, Any]] = []
        histories: list[list[dict[str, Any]]] = []
        for m in case["messages"]:
            history.append(m)
            histories.append(list(history))
            history.append({"role": "assistant", "content": REPLY})
        history.pop()
        policy = Policy(compaction=CompactionPolicy.model_validate(COMPACTION))
        results = run_turns(histories, policy, window=_window(case), prepare_ahead=True)
        final, final_cut = final_kept(history, [dict(m) for m in results[-1].assembled.messages])
        full = _norm("\n".join(m["content"] for m in case["messages"]))
        for answers in (q["answers"] for q in case["questions"]):
            if any(_has(a, full) for a in answers):
                questions += 1
                kept += any(_has(a, final) for a in answers)
                cut += any(_has(a, final_cut) for a in answers)
    return kept, cut, questions


def test_the_final_request_after_the_gateways_compactions_carries_more_answers_than_truncation() -> None:
    """Issue 40, session 38: the summary that reaches the final request (refolded at every compaction)
    carried 53 answers against truncation's 34 (+0.13, main before this session); a fact the kept rounds
    still say leaves the summary's room to others, the names line gets a share of the room that the
    sentences take back when the names need less, and asides in parentheses are dropped: 64 (+0.21). Session
    40: a refolded names line alternates the earlier names with the span's new ones: 66 (+0.23)."""
    kept, cut, questions = _replayed_over_truncation()
    assert (kept - cut) / questions >= 0.22, (kept, cut, questions)


def test_a_refolded_names_line_gives_the_new_spans_names_every_other_place() -> None:
    """Issue 40, session 40: the previous summary's names took the line's first places, so once it was
    full a conversation's later names never got in (bfcl student: "Archie", "Carla", "Saturday", said in
    its second half). The line alternates them: the earlier names keep every other place, in their order."""
    earlier = ["Lisbon", "Porto", "Goldman Sachs", "Morgan Stanley", "Dana Reyes", "Legend Investments", "Kyoto"]
    previous = "- user: I moved twice for work.\n" + ALSO_MENTIONED + ", ".join(earlier)
    chat = (
        {"role": "user", "content": "Our dog is a retriever, and we call him Archie at home."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "My lab partner this term, a quiet one, is Carla from the robotics club."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "We hiked near the lake, then drove on to Bend for the night."},
    )
    summary = ExtractiveSummarizer(COUNTER)(chat, previous, 60)
    names = next(line for line in summary.splitlines() if line.startswith(ALSO_MENTIONED))
    listed = names[len(ALSO_MENTIONED) :].split(", ")
    assert COUNTER.text(summary) <= 60
    assert "Carla" in listed and "Bend" in listed, summary  # the span's names, said after the line was full
    assert {"Lisbon", "Porto", "Morgan Stanley"} <= set(listed), summary  # the earlier ones keep their places
    assert listed.index("Lisbon") < listed.index("Porto") < listed.index("Morgan Stanley")  # and their order
